#include "runtime/node/frames.h"

#include <cmath>
#include <limits>

namespace hp::runtime::node {

FrameWriter& FrameWriter::str(std::string_view s) {
  put(std::uint32_t(s.size()));
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  bytes_.insert(bytes_.end(), p, p + s.size());
  return *this;
}

FrameWriter& FrameWriter::blob(std::span<const std::byte> b) {
  put(std::uint32_t(b.size()));
  bytes_.insert(bytes_.end(), b.begin(), b.end());
  return *this;
}

bool FrameReader::take(std::size_t n) {
  if (!ok_ || n > bytes_.size() - pos_) {
    ok_ = false;
    return false;
  }
  pos_ += n;
  return true;
}

std::string FrameReader::str() {
  const auto n = get<std::uint32_t>();
  if (!take(n)) return {};
  return std::string(reinterpret_cast<const char*>(bytes_.data() + pos_ - n), n);
}

std::vector<std::byte> FrameReader::blob() {
  const auto n = get<std::uint32_t>();
  if (!take(n)) return {};
  return std::vector<std::byte>(bytes_.data() + pos_ - n, bytes_.data() + pos_);
}

Status FrameReader::finish() const {
  HP_ENSURE(ok_ && pos_ == bytes_.size(), ErrorCode::kCorruptData,
            "a {} frame of {} bytes does not parse ({}): the chip process and the node worker "
            "must be the same build",
            what_, bytes_.size(), ok_ ? "bytes left over" : "it ends early");
  return Status::ok();
}

void encode_task(const TaskFrame& task, int num_scalars, FrameWriter* out) {
  out->put(task.key).put(task.l3_task).put(task.digest);
  out->put(std::uint8_t(task.config.mode))
      .put(std::int32_t(task.config.block_num))
      .put(std::int32_t(task.config.num_flags))
      .put(task.config.wait_timeout_s.value_or(std::numeric_limits<double>::quiet_NaN()));
  const TaskArgs& args = task.args;
  out->put(std::uint32_t(args.num_tensors()));
  for (int i = 0; i < args.num_tensors(); ++i) {
    const TensorView& t = args.tensor(i);
    out->put(std::uint8_t(args.tag(i)))
        .put(std::uint8_t(args.dump_marked(i)))
        .put(std::uint8_t(t.dtype()))
        .put(std::uint8_t(t.ndim()))
        .put(reinterpret_cast<std::uintptr_t>(t.data()));
    for (int d = 0; d < t.ndim(); ++d) out->put(t.dim(d)).put(t.stride(d));
  }
  out->put(std::uint32_t(num_scalars));
  for (int i = 0; i < num_scalars; ++i) {
    const auto dtype = args.scalar_dtype(i);
    out->put(args.scalar_bits(i)).put(std::uint8_t(dtype ? *dtype : DType::kCount));
  }
}

Status decode_task(std::span<const std::byte> bytes, TaskFrame* out) {
  FrameReader in(bytes, "task");
  out->key = in.get<std::uint64_t>();
  out->l3_task = in.get<TaskId>();
  out->digest = in.get<Sha256Digest>();
  out->config.mode = static_cast<platform::LaunchMode>(in.get<std::uint8_t>());
  out->config.block_num = in.get<std::int32_t>();
  out->config.num_flags = in.get<std::int32_t>();
  const double timeout = in.get<double>();
  out->config.wait_timeout_s = std::isnan(timeout) ? std::nullopt : std::optional<double>(timeout);
  out->args = TaskArgs();
  std::vector<int> marked;
  const auto tensors = in.get<std::uint32_t>();
  for (std::uint32_t i = 0; i < tensors && in.ok(); ++i) {
    const auto tag = static_cast<ArgTag>(in.get<std::uint8_t>());
    if (in.get<std::uint8_t>() != 0) marked.push_back(int(i));
    const auto dtype = static_cast<DType>(in.get<std::uint8_t>());
    const int ndim = std::min<int>(in.get<std::uint8_t>(), TensorView::kMaxDims);
    auto* data = reinterpret_cast<void*>(in.get<std::uintptr_t>());
    std::int64_t shape[TensorView::kMaxDims], strides[TensorView::kMaxDims];
    for (int d = 0; d < ndim; ++d) {
      shape[d] = in.get<std::int64_t>();
      strides[d] = in.get<std::int64_t>();
    }
    const TensorView view(data, dtype, std::span<const std::int64_t>(shape, std::size_t(ndim)),
                          std::span<const std::int64_t>(strides, std::size_t(ndim)));
    switch (tag) {
      case ArgTag::kInput:
        out->args.input(view);
        break;
      case ArgTag::kInOut:
        out->args.inout(view);
        break;
      case ArgTag::kOutputExisting:
        out->args.output_existing(view);
        break;
      default:
        out->args.no_dep(view);
        break;
    }
  }
  const auto scalars = in.get<std::uint32_t>();
  for (std::uint32_t i = 0; i < scalars && in.ok(); ++i) {
    const auto bits = in.get<std::uint64_t>();
    const auto dtype = static_cast<DType>(in.get<std::uint8_t>());
    out->args.scalar_bits_of(bits, dtype < DType::kCount ? std::optional(dtype) : std::nullopt);
  }
  if (!marked.empty()) out->args.dump(marked);
  return in.finish();
}

void encode_session(const SessionFrame& session, FrameWriter* out) {
  const DiagnosticsConfig& d = session.diagnostics;
  out->str(d.output_prefix)
      .put(std::int32_t(d.dump_args))
      .put(std::uint8_t(d.scope_stats))
      .put(std::uint8_t(d.dep_gen))
      .put(std::uint8_t(d.swimlane))
      .put(std::int32_t(session.task_ring_slots))
      .put(session.heap_ring_bytes);
}

Status decode_session(std::span<const std::byte> bytes, SessionFrame* out) {
  FrameReader in(bytes, "session");
  DiagnosticsConfig& d = out->diagnostics;
  d.output_prefix = in.str();
  d.dump_args = in.get<std::int32_t>();
  d.scope_stats = in.get<std::uint8_t>() != 0;
  d.dep_gen = in.get<std::uint8_t>() != 0;
  d.swimlane = in.get<std::uint8_t>() != 0;
  out->task_ring_slots = in.get<std::int32_t>();
  out->heap_ring_bytes = in.get<std::uint64_t>();
  return in.finish();
}

void encode_status(std::uint64_t key, const Status& status, FrameWriter* out) {
  out->put(key).put(std::uint32_t(status.code())).str(status.is_ok() ? "" : status.message());
}

Status decode_status(std::span<const std::byte> bytes, std::uint64_t* key, Status* status) {
  FrameReader in(bytes, "status");
  *key = in.get<std::uint64_t>();
  const auto code = in.get<std::uint32_t>();
  std::string message = in.str();
  HP_RETURN_IF_ERROR(in.finish());
  HP_ENSURE(code < std::uint32_t(ErrorCode::kCount), ErrorCode::kCorruptData,
            "a status frame carries error code {}, which this build does not know", code);
  *status = code == 0 ? Status::ok() : Status(static_cast<ErrorCode>(code), std::move(message));
  return Status::ok();
}

}  // namespace hp::runtime::node
