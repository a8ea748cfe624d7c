#include "runtime/tensor_dump_observer.h"

#include <array>
#include <cstring>

#include "common/json_file.h"

namespace hp::runtime {
namespace {

// The view's elements in row-major order of its shape.
void pack_row_major(const TensorView& t, std::vector<std::byte>* out) {
  const std::size_t esize = t.element_size();
  const std::int64_t numel = t.numel();
  out->resize(static_cast<std::size_t>(numel) * esize);
  if (numel == 0) return;
  const auto* base = static_cast<const std::byte*>(t.data());
  const int nd = t.ndim();
  if (nd == 0) {
    std::memcpy(out->data(), base, esize);
    return;
  }
  // Odometer over every dim but the last; the last dim is one row.
  std::array<std::int64_t, TensorView::kMaxDims> index{};
  const std::int64_t cols = t.dim(nd - 1);
  const std::int64_t col_stride = t.stride(nd - 1);
  std::byte* dst = out->data();
  for (;;) {
    std::int64_t offset = 0;
    for (int d = 0; d < nd - 1; ++d) offset += index[static_cast<std::size_t>(d)] * t.stride(d);
    const std::byte* row = base + offset * static_cast<std::int64_t>(esize);
    if (col_stride == 1) {
      std::memcpy(dst, row, static_cast<std::size_t>(cols) * esize);
      dst += static_cast<std::size_t>(cols) * esize;
    } else {
      for (std::int64_t c = 0; c < cols; ++c, dst += esize) {
        std::memcpy(dst, row + c * col_stride * static_cast<std::int64_t>(esize), esize);
      }
    }
    int d = nd - 2;
    for (; d >= 0; --d) {
      auto& i = index[static_cast<std::size_t>(d)];
      if (++i < t.dim(d)) break;
      i = 0;
    }
    if (d < 0) return;
  }
}

std::size_t scalar_bytes(const std::optional<DType>& dtype) {
  return dtype ? dtype_size(*dtype) : sizeof(std::uint64_t);
}

}  // namespace

Status TensorDumpObserver::create(const std::string& prefix, int level,
                                  std::unique_ptr<TensorDumpObserver>* out) {
  auto o = std::unique_ptr<TensorDumpObserver>(new TensorDumpObserver(prefix, level));
  HP_RETURN_IF_ERROR(o->bin_.open(output_path(prefix, kTensorDumpBinFile)));
  HP_RETURN_IF_ERROR(probe_output_file(output_path(prefix, kTensorDumpJsonFile)));
  *out = std::move(o);
  return Status::ok();
}

TensorDumpObserver::Range TensorDumpObserver::capture(const TaskArgs& args, const Entry& entry) {
  Range r{.offset = bin_.size(), .bytes = 0};
  if (entry.scalar) {
    const std::uint64_t bits = args.scalar_bits(entry.arg);
    std::array<std::byte, sizeof(bits)> bytes;
    std::memcpy(bytes.data(), &bits, sizeof(bits));  // little-endian: the value's low bytes
    const std::size_t n = scalar_bytes(args.scalar_dtype(entry.arg));
    bin_.write(std::span<const std::byte>(bytes.data(), n));
  } else {
    const TensorView& t = args.tensor(entry.arg);
    if (t.is_contiguous()) {
      bin_.write(
          std::span<const std::byte>(static_cast<const std::byte*>(t.data()),
                                     static_cast<std::size_t>(t.numel()) * t.element_size()));
    } else {
      pack_row_major(t, &scratch_);
      bin_.write(scratch_);
    }
  }
  r.bytes = bin_.size() - r.offset;
  return r;
}

void TensorDumpObserver::on_task_ready(const TaskInfo& task) {
  if (task.args == nullptr) return;
  const TaskArgs& args = *task.args;
  if (level_ < 2 && !args.dump_requested()) return;
  std::lock_guard lock(mu_);
  std::vector<std::size_t> captured;
  auto add = [&](Entry e) {
    e.before = capture(args, e);
    captured.push_back(entries_.size());
    entries_.push_back(std::move(e));
  };
  for (int i = 0; i < args.num_tensors(); ++i) {
    if (level_ < 2 && !args.dump_marked(i)) continue;
    const TensorView& t = args.tensor(i);
    add(Entry{.task = task.id,
              .callable = std::string(task.callable),
              .scalar = false,
              .arg = i,
              .tag = args.tag(i),
              .dtype = std::string(to_string(t.dtype())),
              .shape = {t.shape().begin(), t.shape().end()},
              .strides = {t.strides().begin(), t.strides().end()},
              .address = reinterpret_cast<std::uintptr_t>(t.data())});
  }
  if (level_ >= 2) {
    for (int i = 0; i < args.num_scalars(); ++i) {
      const std::optional<DType> dtype = args.scalar_dtype(i);
      add(Entry{.task = task.id,
                .callable = std::string(task.callable),
                .scalar = true,
                .arg = i,
                .dtype = dtype ? std::string(to_string(*dtype)) : std::string("bits64")});
    }
  }
  if (!captured.empty()) awaiting_after_[task.id] = std::move(captured);
}

void TensorDumpObserver::on_task_complete(const TaskInfo& task, const Status& status) {
  if (task.args == nullptr) return;
  std::lock_guard lock(mu_);
  auto it = awaiting_after_.find(task.id);
  if (it == awaiting_after_.end()) return;
  for (std::size_t index : it->second) {
    Entry& e = entries_[index];
    e.after = capture(*task.args, e);
    e.status = std::string(status.is_ok() ? "OK" : to_string(status.code()));
  }
  awaiting_after_.erase(it);
}

Status TensorDumpObserver::finish() {
  std::lock_guard lock(mu_);
  Status bin = bin_.close();
  auto range = [](const Range& r) { return Json{{"offset", r.offset}, {"bytes", r.bytes}}; };
  Json entries = Json::array();
  for (const Entry& e : entries_) {
    entries.push_back({
        {"task", id_string(e.task)},
        {"callable", e.callable},
        {"kind", e.scalar ? "scalar" : "tensor"},
        {"arg", e.arg},
        {"tag", e.scalar ? Json(nullptr) : Json(std::string(to_string(e.tag)))},
        {"dtype", e.dtype},
        {"shape", e.shape},
        {"strides", e.strides},
        {"address", e.scalar ? Json(nullptr) : Json(address_string(e.address))},
        {"before", range(e.before)},
        {"after", e.after ? range(*e.after) : Json(nullptr)},
        {"status", e.status.empty() ? Json(nullptr) : Json(e.status)},
    });
  }
  const Json doc = {{"schema_version", 1},
                    {"runtime_level", runtime_level_},
                    {"level", level_},
                    {"bin_file", std::string(kTensorDumpBinFile)},
                    {"entries", std::move(entries)}};
  HP_RETURN_IF_ERROR(write_json_file(output_path(prefix_, kTensorDumpJsonFile), doc));
  return bin;
}

}  // namespace hp::runtime
