// hyper_parallel._hp_moe: the MoE communication calls hyper_parallel.moe builds on. Tensors
// cross as specs (address, dtype name, shape, strides in elements) of arrays the Python side
// owns; collective calls release the GIL; errors raise HpError after the GIL is back.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "moe/buffer.h"
#include "moe/layout.h"
#include "moe/moe_layer.h"
#include "moe/sessions.h"
#include "raise_status.h"
#include "shmem/shmem.h"

namespace py = pybind11;
using hp::python::blocking;
using hp::python::check;

namespace {

using Spec =
    std::tuple<std::uintptr_t, std::string, std::vector<std::int64_t>, std::vector<std::int64_t>>;

hp::TensorView view(const std::optional<Spec>& spec) {
  if (!spec) return {};
  const auto& [address, dtype_name, shape, strides] = *spec;
  hp::DType dtype{};
  check(hp::parse_dtype(dtype_name, &dtype));
  return hp::TensorView(reinterpret_cast<void*>(address), dtype, shape, strides);
}

hp::moe::DispatchArgs dispatch_args(const Spec& x, const Spec& topk_idx, const Spec& topk_weights,
                                    const std::optional<Spec>& mask, bool quantize,
                                    std::int64_t alignment) {
  return {.x = view(x),
          .topk_idx = view(topk_idx),
          .topk_weights = view(topk_weights),
          .x_active_mask = view(mask),
          .quant = quantize ? hp::moe::Quant::kDynamicInt8 : hp::moe::Quant::kNone,
          .expert_alignment = alignment};
}

// Copies a native vector into an output the caller allocated with its size in bytes.
template <typename T>
void copy_out(const std::vector<T>& values, const Spec& out) {
  const hp::TensorView v = view(out);
  check(v.validate("output"));
  if (std::size_t(v.numel()) * v.element_size() != values.size() * sizeof(T) ||
      !v.is_contiguous()) {
    hp::python::raise(hp::Status::error(hp::ErrorCode::kInternal,
                                        "output {}: expected {} contiguous bytes", v.to_string(),
                                        values.size() * sizeof(T)));
  }
  if (!values.empty()) std::memcpy(v.data(), values.data(), values.size() * sizeof(T));
}

// A Buffer session (moe/sessions.h: the torch ops reach the same one by its handle).
struct PyBuffer {
  std::shared_ptr<hp::moe::BufferSession> session = std::make_shared<hp::moe::BufferSession>();
  std::uint64_t handle = 0;

  ~PyBuffer() { hp::moe::buffer_sessions().remove(handle); }  // the table holds no session longer

  hp::moe::Buffer& get() {
    hp::moe::Buffer* b = nullptr;
    check(session->get(&b));
    return *b;
  }
};

// 'shmem' or 'window' (anything else raises INVALID_ARGUMENT).
hp::moe::CommKind parse_comm(const std::string& comm) {
  if (comm == "window") return hp::moe::CommKind::kWindow;
  if (comm != "shmem") {
    hp::python::raise(hp::Status::error(hp::ErrorCode::kInvalidArgument,
                                        "comm='{}': expected 'shmem' or 'window'", comm));
  }
  return hp::moe::CommKind::kShmem;
}

hp::moe::DispatchPath parse_dispatch_path(const std::string& path) {
  if (path == "push") return hp::moe::DispatchPath::kPush;
  if (path == "pull") return hp::moe::DispatchPath::kPull;
  if (path != "auto") {
    hp::python::raise(hp::Status::error(hp::ErrorCode::kInvalidArgument,
                                        "dispatch_path='{}': expected 'auto', 'push' or 'pull'",
                                        path));
  }
  return hp::moe::DispatchPath::kAuto;
}

// The tensor of weights[key] (None or absent: an empty view), or each of its list's.
hp::TensorView weight(const py::dict& weights, const char* key) {
  if (!weights.contains(key) || weights[key].is_none()) return {};
  return view(weights[key].cast<Spec>());
}
std::vector<hp::TensorView> weight_list(const py::dict& weights, const char* key) {
  std::vector<hp::TensorView> out;
  if (!weights.contains(key) || weights[key].is_none()) return out;
  for (const Spec& spec : weights[key].cast<std::vector<Spec>>()) out.push_back(view(spec));
  return out;
}

// A MoE layer session (its weights packed at creation and the chip it runs on, if any).
struct PyLayer {
  std::shared_ptr<hp::moe::LayerSession> session = std::make_shared<hp::moe::LayerSession>();
  std::uint64_t handle = 0;

  ~PyLayer() { hp::moe::layer_sessions().remove(handle); }

  hp::moe::MoeLayer& get() {
    hp::moe::MoeLayer* l = nullptr;
    check(session->get(&l));
    return *l;
  }
};

hp::kernels::WeightType parse_weight_type(const std::string& name) {
  if (name == "int4") return hp::kernels::WeightType::kInt4;
  if (name != "int8") {
    hp::python::raise(hp::Status::error(hp::ErrorCode::kInvalidArgument,
                                        "weight_dtype='{}': expected 'int8' or 'int4'", name));
  }
  return hp::kernels::WeightType::kInt8;
}

}  // namespace

PYBIND11_MODULE(_hp_moe, m) {
  m.doc() = "HyperParallel MoE communication (native layer of hyper_parallel.moe)";
  m.def("dispatch_layout", [](const Spec& topk_idx, std::int64_t num_experts, int num_ranks,
                              const std::optional<Spec>& mask) {
    hp::moe::DispatchLayout layout;
    check(hp::moe::dispatch_layout(view(topk_idx), num_experts, num_ranks, &layout, view(mask)));
    return py::make_tuple(layout.tokens_per_rank, layout.tokens_per_expert,
                          py::bytes(reinterpret_cast<const char*>(layout.is_token_in_rank.data()),
                                    layout.is_token_in_rank.size()));
  });
  py::class_<PyBuffer>(m, "Buffer")
      .def(py::init([](std::int64_t hidden, std::int64_t max_tokens, std::int64_t experts,
                       std::int64_t topk, std::int64_t max_element_bytes,
                       std::int64_t combine_element_bytes, const std::string& comm,
                       bool low_latency, double capacity_factor, bool grow_on_overflow,
                       bool zero_copy_combine, const std::string& dispatch_path) {
        const hp::moe::CommKind kind = parse_comm(comm);
        const hp::moe::DispatchPath path = parse_dispatch_path(dispatch_path);
        auto b = std::make_unique<PyBuffer>();
        blocking([&] {
          return hp::moe::Buffer::create({.hidden = hidden,
                                          .max_tokens_per_rank = max_tokens,
                                          .num_experts = experts,
                                          .topk = topk,
                                          .max_element_bytes = max_element_bytes,
                                          .combine_element_bytes = combine_element_bytes,
                                          .comm = kind,
                                          .low_latency = low_latency,
                                          .capacity_factor = capacity_factor,
                                          .grow_on_overflow = grow_on_overflow,
                                          .zero_copy_combine = zero_copy_combine,
                                          .dispatch_path = path},
                                         &b->session->buffer);
        });
        b->handle = hp::moe::buffer_sessions().add(b->session);
        return b;
      }))
      .def("destroy",
           [](PyBuffer& self) {
             if (!self.session->buffer) return;
             hp::moe::buffer_sessions().remove(self.handle);
             blocking([&] { return self.session->buffer->destroy(); });
             self.session->buffer.reset();
           })
      .def_property_readonly("handle", [](PyBuffer& self) { return self.handle; })
      .def_property_readonly("rank", [](PyBuffer& self) { return self.get().rank(); })
      .def_property_readonly("num_ranks", [](PyBuffer& self) { return self.get().num_ranks(); })
      .def_property_readonly("local_experts",
                             [](PyBuffer& self) { return self.get().local_experts(); })
      .def_property_readonly(
          "dispatch_path",
          [](PyBuffer& self) {
            return self.get().dispatch_path() == hp::moe::DispatchPath::kPull ? "pull" : "push";
          })
      .def("notify_dispatch",
           [](PyBuffer& self, const Spec& x, const Spec& idx, const Spec& w,
              const std::optional<Spec>& mask, bool quantize, std::int64_t alignment) {
             hp::moe::Buffer& b = self.get();
             const auto args = dispatch_args(x, idx, w, mask, quantize, alignment);
             blocking([&] { return b.notify_dispatch(args, &self.session->handle); });
             return py::make_tuple(self.session->handle.rows,
                                   self.session->handle.tokens_per_expert,
                                   self.session->handle.expert_offsets);
           })
      .def("dispatch_data",
           [](PyBuffer& self, const Spec& x, const Spec& idx, const Spec& w,
              const std::optional<Spec>& mask, bool quantize, std::int64_t alignment,
              const Spec& recv_x, const std::optional<Spec>& recv_scale, const Spec& recv_weights,
              const Spec& src_rank, const Spec& src_token) {
             hp::moe::Buffer& b = self.get();
             const auto args = dispatch_args(x, idx, w, mask, quantize, alignment);
             const hp::moe::DispatchOutputs out{.x = view(recv_x),
                                                .x_scale = view(recv_scale),
                                                .topk_weights = view(recv_weights)};
             blocking([&] { return b.dispatch_data(args, &self.session->handle, out); });
             copy_out(self.session->handle.row_src_rank, src_rank);
             copy_out(self.session->handle.row_src_token, src_token);
           })
      // (address, dtype name, rows, hidden) of the combine rows of the last dispatch.
      .def("combine_buffer",
           [](PyBuffer& self) {
             hp::moe::Buffer& b = self.get();
             hp::TensorView rows;
             blocking([&] { return b.combine_buffer(self.session->handle, &rows); });
             return py::make_tuple(reinterpret_cast<std::uintptr_t>(rows.data()),
                                   std::string(hp::to_string(rows.dtype())), rows.dim(0),
                                   rows.dim(1));
           })
      .def("combine",
           [](PyBuffer& self, const Spec& expert_out, const std::optional<Spec>& weights,
              const Spec& y) {
             hp::moe::Buffer& b = self.get();
             blocking([&] {
               return b.combine(view(expert_out), self.session->handle, view(y), view(weights),
                                weights.has_value());
             });
           })
      .def("low_latency_dispatch",
           [](PyBuffer& self, const Spec& x, const Spec& idx, const Spec& w,
              const std::optional<Spec>& mask, bool quantize) {
             hp::moe::Buffer& b = self.get();
             const auto args = dispatch_args(x, idx, w, mask, quantize, 1);
             blocking([&] { return b.low_latency_dispatch(args, &self.session->low_latency); });
             const hp::moe::LowLatencyResult& r = self.session->low_latency;
             return py::make_tuple(std::string(hp::to_string(r.x_dtype)), r.rows_per_expert,
                                   r.tokens_per_expert, r.layout_range);
           })
      .def("low_latency_outputs",
           [](PyBuffer& self, const Spec& recv_x, const std::optional<Spec>& recv_scale,
              const Spec& src_rank, const Spec& src_token) {
             const hp::moe::LowLatencyResult& r = self.session->low_latency;
             copy_out(r.x_bytes, recv_x);
             if (recv_scale) copy_out(r.x_scale, *recv_scale);
             copy_out(r.handle.row_src_rank, src_rank);
             copy_out(r.handle.row_src_token, src_token);
           })
      .def("low_latency_combine",
           [](PyBuffer& self, const Spec& expert_out, const Spec& weights, const Spec& y) {
             hp::moe::Buffer& b = self.get();
             blocking([&] {
               return b.low_latency_combine(view(expert_out), view(weights),
                                            self.session->low_latency.handle, view(y));
             });
           });
  py::class_<PyLayer>(m, "Layer")
      // weights: w1, w1_scale, w2, w2_scale (specs, or lists of per-expert specs: TENSOR_LIST,
      // keys w1_list, ...), shared_w1 ... shared_w2_scale, smooth1, smooth2, shared_smooth2.
      .def(py::init([](std::int64_t hidden, std::int64_t intermediate, std::int64_t experts,
                       std::int64_t topk, std::int64_t max_tokens, const std::string& comm,
                       const py::dict& weights, std::int64_t shared_intermediate, bool backward,
                       const std::string& path, int cube_cores, int vector_cores,
                       double capacity_factor, bool grow_on_overflow,
                       const std::string& weight_dtype, bool keep_activations,
                       bool int8_activation_grads) {
        auto l = std::make_unique<PyLayer>();
        const hp::moe::CommKind kind = parse_comm(comm);
        const hp::kernels::WeightType weight_type = parse_weight_type(weight_dtype);
        hp::moe::LayerPath layer_path = hp::moe::LayerPath::kAuto;
        if (path == "staged") {
          layer_path = hp::moe::LayerPath::kStaged;
        } else if (path == "deep") {
          layer_path = hp::moe::LayerPath::kDeep;
        } else if (path != "auto") {
          hp::python::raise(hp::Status::error(hp::ErrorCode::kInvalidArgument,
                                              "path='{}': expected 'auto', 'staged' or 'deep'",
                                              path));
        }
        if (cube_cores > 0 || vector_cores > 0) {
          check(hp::platform::Chip::create({.num_cube = cube_cores, .num_vector = vector_cores},
                                           &l->session->chip));
        }
        const hp::moe::ExpertWeights w{.w1 = weight(weights, "w1"),
                                       .w1_scale = weight(weights, "w1_scale"),
                                       .w2 = weight(weights, "w2"),
                                       .w2_scale = weight(weights, "w2_scale"),
                                       .w1_list = weight_list(weights, "w1_list"),
                                       .w1_scale_list = weight_list(weights, "w1_scale_list"),
                                       .w2_list = weight_list(weights, "w2_list"),
                                       .w2_scale_list = weight_list(weights, "w2_scale_list"),
                                       .shared_w1 = weight(weights, "shared_w1"),
                                       .shared_w1_scale = weight(weights, "shared_w1_scale"),
                                       .shared_w2 = weight(weights, "shared_w2"),
                                       .shared_w2_scale = weight(weights, "shared_w2_scale"),
                                       .smooth1 = weight(weights, "smooth1"),
                                       .smooth2 = weight(weights, "smooth2"),
                                       .shared_smooth2 = weight(weights, "shared_smooth2")};
        blocking([&] {
          return hp::moe::MoeLayer::create({.hidden = hidden,
                                            .intermediate = intermediate,
                                            .num_experts = experts,
                                            .topk = topk,
                                            .max_tokens_per_rank = max_tokens,
                                            .shared_intermediate = shared_intermediate,
                                            .comm = kind,
                                            .chip = l->session->chip.get(),
                                            .backward = backward,
                                            .keep_activations = keep_activations,
                                            .int8_activation_grads = int8_activation_grads,
                                            .path = layer_path,
                                            .capacity_factor = capacity_factor,
                                            .grow_on_overflow = grow_on_overflow,
                                            .weights = weight_type},
                                           w, &l->session->layer);
        });
        l->handle = hp::moe::layer_sessions().add(l->session);
        return l;
      }))
      .def_property_readonly("deep", [](PyLayer& self) { return self.get().deep(); })
      .def_property_readonly("last_backward_kept",
                             [](PyLayer& self) { return self.get().last_backward_kept(); })
      .def_property_readonly("handle", [](PyLayer& self) { return self.handle; })
      .def("destroy",
           [](PyLayer& self) {
             if (!self.session->layer) return;
             hp::moe::layer_sessions().remove(self.handle);
             blocking([&] { return self.session->layer->destroy(); });
             self.session->layer.reset();
           })
      .def("forward",
           [](PyLayer& self, const Spec& x, const Spec& idx, const Spec& w,
              const std::optional<Spec>& mask, const Spec& y) {
             hp::moe::MoeLayer& l = self.get();
             blocking([&] { return l.forward(view(x), view(idx), view(w), view(y), view(mask)); });
             const hp::moe::MoeStageTimes& t = l.last_times();
             return py::make_tuple(t.dispatch, t.gmm1, t.gmm2, t.combine, t.overlap, l.last_rows());
           })
      .def("backward",
           [](PyLayer& self, const Spec& x, const Spec& idx, const Spec& w,
              const std::optional<Spec>& mask, const Spec& dy, const Spec& dx, const Spec& d_topk,
              const Spec& dw1, const Spec& dw2, const std::optional<Spec>& shared_dw1,
              const std::optional<Spec>& shared_dw2) {
             hp::moe::MoeLayer& l = self.get();
             blocking([&] {
               return l.backward({.x = view(x),
                                  .topk_idx = view(idx),
                                  .topk_weights = view(w),
                                  .x_active_mask = view(mask),
                                  .dy = view(dy),
                                  .dx = view(dx),
                                  .d_topk_weights = view(d_topk),
                                  .dw1 = view(dw1),
                                  .dw2 = view(dw2),
                                  .shared_dw1 = view(shared_dw1),
                                  .shared_dw2 = view(shared_dw2)});
             });
             const hp::moe::MoeGradStageTimes& t = l.last_grad_times();
             return py::make_tuple(t.dispatch, t.recompute, t.act_grad, t.weight_grad, t.combine,
                                   t.overlap);
           });
}
