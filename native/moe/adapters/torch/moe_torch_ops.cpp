// torch.ops.hyper_parallel's MoE ops over CPU tensors: dispatch_layout, notify_dispatch,
// dispatch, combine, low_latency_dispatch, low_latency_combine, mega_moe (with an autograd
// kernel) and mega_moe_grad, with the schemas of the operator registry (torch_schemas.h).
//
// The buffer and the layer are torch.classes.hyper_parallel.MoeBuffer / MegaMoeLayer, made from
// the handle of a hyper_parallel.moe.Buffer / MegaMoe (moe/sessions.h): the torch ops run the
// same native object as the Python calls, so both paths are one. Calls are collective, in the
// same order on every rank, as the Python ones. Errors raise RuntimeError("[hp <CODE> (<n>)]
// <message>"); hyper_parallel.moe turns them into HpError.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <hyper_parallel/moe/layout.h>
#include <hyper_parallel/moe/sessions.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "torch_schemas.h"

namespace {

using at::Tensor;
using c10::optional;

void check(const hp::Status& status) {
  TORCH_CHECK(status.is_ok(), "[hp ", hp::to_string(status.code()), " (",
              static_cast<std::uint32_t>(status.code()), ")] ", status.message());
}

hp::DType dtype_of(const Tensor& t, const char* what) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return hp::DType::kFP32;
    case at::kBFloat16:
      return hp::DType::kBF16;
    case at::kLong:
      return hp::DType::kInt64;
    case at::kInt:
      return hp::DType::kInt32;
    case at::kChar:
      return hp::DType::kInt8;
    case at::kByte:
    case at::kBool:
      return hp::DType::kUInt8;
    default:
      break;
  }
  TORCH_CHECK(false, "[hp DTYPE_MISMATCH (4)] ", what, " is a tensor of ", t.scalar_type(),
              ": expected float32, bfloat16, int64, int32, int8, uint8 or bool");
}

// A CPU tensor, contiguous (a copy when it is not): the view below points into it.
Tensor cpu(const Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "[hp INVALID_ARGUMENT (1)] ", what, " is on ", t.device(),
              ": expected a CPU tensor");
  return t.contiguous();
}
optional<Tensor> cpu(const optional<Tensor>& t, const char* what) {
  if (!t.has_value() || !t->defined()) return c10::nullopt;
  return cpu(*t, what);
}

hp::TensorView view(const Tensor& t, const char* what) {
  std::vector<std::int64_t> shape(t.sizes().begin(), t.sizes().end());
  return hp::TensorView(t.data_ptr(), dtype_of(t, what), shape);
}
hp::TensorView view(const optional<Tensor>& t, const char* what) {
  return t ? view(*t, what) : hp::TensorView();
}

Tensor int64_tensor(const std::vector<std::int64_t>& v, at::IntArrayRef shape) {
  return at::tensor(v, at::kLong).reshape(shape);
}

// Each row's (source rank, source token): int32 [rows, 2], or [.., rows, 2] for `shape`.
Tensor src_info(const std::vector<std::int32_t>& rank, const std::vector<std::int32_t>& token,
                at::IntArrayRef shape) {
  Tensor out = at::empty(shape, at::kInt);
  auto* p = out.data_ptr<std::int32_t>();
  for (std::size_t i = 0; i < rank.size(); ++i) {
    p[2 * i] = rank[i];
    p[2 * i + 1] = token[i];
  }
  return out;
}

// torch.classes.hyper_parallel.MoeBuffer: a hyper_parallel.moe.Buffer's session.
struct MoeBuffer : torch::CustomClassHolder {
  std::shared_ptr<hp::moe::BufferSession> session;
  std::int64_t id = 0;

  explicit MoeBuffer(std::int64_t handle) : id(handle) {
    check(hp::moe::buffer_sessions().find(std::uint64_t(handle), &session));
  }
  hp::moe::Buffer& get() const {
    hp::moe::Buffer* b = nullptr;
    check(session->get(&b));
    return *b;
  }
};

// torch.classes.hyper_parallel.MegaMoeLayer: a hyper_parallel.moe.MegaMoe's session, and the
// weights' gradients mega_moe's backward adds up (float32, created on the first backward).
struct MegaMoeLayer : torch::CustomClassHolder {
  std::shared_ptr<hp::moe::LayerSession> session;
  std::int64_t id = 0;
  Tensor w1_grad, w2_grad, shared_w1_grad, shared_w2_grad;

  explicit MegaMoeLayer(std::int64_t handle) : id(handle) {
    check(hp::moe::layer_sessions().find(std::uint64_t(handle), &session));
  }
  hp::moe::MoeLayer& get() const {
    hp::moe::MoeLayer* l = nullptr;
    check(session->get(&l));
    return *l;
  }
};

hp::moe::DispatchArgs dispatch_args(const Tensor& x, const Tensor& idx, const Tensor& w,
                                    const optional<Tensor>& mask, bool quantize,
                                    std::int64_t alignment) {
  return {.x = view(x, "x"),
          .topk_idx = view(idx, "topk_idx"),
          .topk_weights = view(w, "topk_weights"),
          .x_active_mask = view(mask, "x_active_mask"),
          .quant = quantize ? hp::moe::Quant::kDynamicInt8 : hp::moe::Quant::kNone,
          .expert_alignment = alignment};
}

// ---- dispatch and combine ----------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> dispatch_layout(const Tensor& topk_idx, std::int64_t num_experts,
                                                   std::int64_t num_ranks,
                                                   const optional<Tensor>& x_active_mask) {
  const Tensor idx = cpu(topk_idx, "topk_idx");
  const optional<Tensor> mask = cpu(x_active_mask, "x_active_mask");
  hp::moe::DispatchLayout layout;
  TORCH_CHECK(num_ranks >= 1 && num_ranks <= (1 << 20),
              "[hp INVALID_ARGUMENT (1)] num_ranks = ", num_ranks, ": expected >= 1");
  check(hp::moe::dispatch_layout(view(idx, "topk_idx"), num_experts, int(num_ranks), &layout,
                                 view(mask, "x_active_mask")));
  Tensor in_rank = at::empty({layout.num_tokens, num_ranks}, at::kBool);
  std::memcpy(in_rank.data_ptr(), layout.is_token_in_rank.data(), layout.is_token_in_rank.size());
  return {int64_tensor(layout.tokens_per_rank, {num_ranks}),
          int64_tensor(layout.tokens_per_expert, {num_experts}), in_rank};
}

std::tuple<Tensor, Tensor> notify_dispatch(const c10::intrusive_ptr<MoeBuffer>& buffer,
                                           const Tensor& x, const Tensor& topk_idx,
                                           const Tensor& topk_weights,
                                           const optional<Tensor>& x_active_mask, bool quantize,
                                           std::int64_t expert_alignment) {
  hp::moe::Buffer& b = buffer->get();
  const Tensor xc = cpu(x, "x"), idx = cpu(topk_idx, "topk_idx"),
               w = cpu(topk_weights, "topk_weights");
  const optional<Tensor> mask = cpu(x_active_mask, "x_active_mask");
  hp::moe::Handle& h = buffer->session->handle;
  check(b.notify_dispatch(dispatch_args(xc, idx, w, mask, quantize, expert_alignment), &h));
  const std::int64_t local = b.local_experts();
  return {int64_tensor(h.tokens_per_expert, {local}), int64_tensor(h.expert_offsets, {local + 1})};
}

std::tuple<Tensor, optional<Tensor>, Tensor, Tensor, Tensor, Tensor> dispatch(
    const c10::intrusive_ptr<MoeBuffer>& buffer, const Tensor& x, const Tensor& topk_idx,
    const Tensor& topk_weights, const optional<Tensor>& x_active_mask, bool quantize,
    std::int64_t expert_alignment) {
  hp::moe::Buffer& b = buffer->get();
  const Tensor xc = cpu(x, "x"), idx = cpu(topk_idx, "topk_idx"),
               w = cpu(topk_weights, "topk_weights");
  const optional<Tensor> mask = cpu(x_active_mask, "x_active_mask");
  const hp::moe::DispatchArgs args = dispatch_args(xc, idx, w, mask, quantize, expert_alignment);
  hp::moe::Handle& h = buffer->session->handle;
  check(b.notify_dispatch(args, &h));
  const std::int64_t rows = h.rows, hidden = b.config().hidden, local = b.local_experts();
  Tensor recv_x = at::empty({rows, hidden}, quantize ? at::kChar : xc.scalar_type());
  optional<Tensor> scale;
  if (quantize) scale = at::empty({rows}, at::kFloat);
  Tensor recv_w = at::empty({rows}, at::kFloat);
  check(b.dispatch_data(args, &h,
                        {.x = view(recv_x, "recv_x"),
                         .x_scale = view(scale, "recv_x_scale"),
                         .topk_weights = view(recv_w, "recv_topk_weights")}));
  return {recv_x,
          scale,
          recv_w,
          src_info(h.row_src_rank, h.row_src_token, {rows, 2}),
          int64_tensor(h.tokens_per_expert, {local}),
          int64_tensor(h.expert_offsets, {local + 1})};
}

// topk_weights: each received row's weight (normally dispatch's recv_topk_weights), or None for
// the plain sum (dispatch's adjoint), as the C op's weights.
Tensor combine(const c10::intrusive_ptr<MoeBuffer>& buffer, const Tensor& expert_out,
               const optional<Tensor>& topk_weights) {
  hp::moe::Buffer& b = buffer->get();
  const Tensor out = cpu(expert_out, "expert_out");
  const optional<Tensor> w = cpu(topk_weights, "topk_weights");
  const hp::moe::Handle& h = buffer->session->handle;
  Tensor y = at::empty({h.layout.num_tokens, b.config().hidden}, out.scalar_type());
  check(
      b.combine(view(out, "expert_out"), h, view(y, "y"), view(w, "topk_weights"), w.has_value()));
  return y;
}

std::tuple<Tensor, optional<Tensor>, Tensor, Tensor, Tensor> low_latency_dispatch(
    const c10::intrusive_ptr<MoeBuffer>& buffer, const Tensor& x, const Tensor& topk_idx,
    const Tensor& topk_weights, const optional<Tensor>& x_active_mask, bool quantize) {
  hp::moe::Buffer& b = buffer->get();
  const Tensor xc = cpu(x, "x"), idx = cpu(topk_idx, "topk_idx"),
               w = cpu(topk_weights, "topk_weights");
  const optional<Tensor> mask = cpu(x_active_mask, "x_active_mask");
  hp::moe::LowLatencyResult& r = buffer->session->low_latency;
  check(b.low_latency_dispatch(dispatch_args(xc, idx, w, mask, quantize, 1), &r));
  const std::int64_t local = std::int64_t(r.tokens_per_expert.size()), rows = r.rows_per_expert;
  Tensor recv_x = at::empty({local, rows, r.hidden}, quantize ? at::kChar : xc.scalar_type());
  std::memcpy(recv_x.data_ptr(), r.x_bytes.data(), r.x_bytes.size());
  optional<Tensor> scale;
  if (quantize) {
    scale = at::empty({local, rows}, at::kFloat);
    std::memcpy(scale->data_ptr(), r.x_scale.data(), r.x_scale.size() * sizeof(float));
  }
  return {recv_x, scale, int64_tensor(r.tokens_per_expert, {local}),
          int64_tensor(r.layout_range, {local, std::int64_t(b.num_ranks()), 2}),
          src_info(r.handle.row_src_rank, r.handle.row_src_token, {local, rows, 2})};
}

Tensor low_latency_combine(const c10::intrusive_ptr<MoeBuffer>& buffer, const Tensor& expert_out,
                           const Tensor& topk_weights) {
  hp::moe::Buffer& b = buffer->get();
  const Tensor out = cpu(expert_out, "expert_out"), w = cpu(topk_weights, "topk_weights");
  const hp::moe::LowLatencyResult& r = buffer->session->low_latency;
  Tensor y = at::empty({r.handle.tokens, b.config().hidden}, out.scalar_type());
  check(b.low_latency_combine(view(out, "expert_out"), view(w, "topk_weights"), r.handle,
                              view(y, "y")));
  return y;
}

// ---- the layer -----------------------------------------------------------------------------

// y (float32 from the layer, returned in x's dtype).
Tensor layer_forward(MegaMoeLayer& layer, const Tensor& x, const Tensor& topk_idx,
                     const Tensor& topk_weights, const optional<Tensor>& x_active_mask) {
  hp::moe::MoeLayer& l = layer.get();
  const Tensor xc = cpu(x, "x"), idx = cpu(topk_idx, "topk_idx"),
               w = cpu(topk_weights, "topk_weights");
  const optional<Tensor> mask = cpu(x_active_mask, "x_active_mask");
  Tensor y = at::empty({xc.size(0), l.config().hidden}, at::kFloat);
  check(l.forward(view(xc, "x"), view(idx, "topk_idx"), view(w, "topk_weights"), view(y, "y"),
                  view(mask, "x_active_mask")));
  return x.scalar_type() == at::kFloat ? y : y.to(x.scalar_type());
}

using Grads = std::tuple<Tensor, Tensor, Tensor, Tensor, optional<Tensor>, optional<Tensor>>;

Grads layer_backward(MegaMoeLayer& layer, const Tensor& x, const Tensor& topk_idx,
                     const Tensor& topk_weights, const Tensor& dy_in,
                     const optional<Tensor>& x_active_mask) {
  hp::moe::MoeLayer& l = layer.get();
  const hp::moe::MoeLayerConfig& c = l.config();
  const Tensor xc = cpu(x, "x"), idx = cpu(topk_idx, "topk_idx"),
               w = cpu(topk_weights, "topk_weights");
  Tensor dy = cpu(dy_in, "dy");
  if (dy.scalar_type() != at::kFloat && dy.scalar_type() != at::kBFloat16) dy = dy.to(at::kFloat);
  const optional<Tensor> mask = cpu(x_active_mask, "x_active_mask");
  const std::int64_t T = xc.size(0), H = c.hidden, I = c.intermediate, E = l.local_experts(),
                     Is = c.shared_intermediate;
  Tensor dx = at::empty({T, H}, dy.scalar_type()), d_topk = at::empty({T, c.topk}, at::kFloat);
  Tensor dw1 = at::empty({E, H, 2 * I}, at::kFloat), dw2 = at::empty({E, I, H}, at::kFloat);
  optional<Tensor> sdw1, sdw2;
  if (Is > 0) {
    sdw1 = at::empty({1, H, 2 * Is}, at::kFloat);
    sdw2 = at::empty({1, Is, H}, at::kFloat);
  }
  check(l.backward({.x = view(xc, "x"),
                    .topk_idx = view(idx, "topk_idx"),
                    .topk_weights = view(w, "topk_weights"),
                    .x_active_mask = view(mask, "x_active_mask"),
                    .dy = view(dy, "dy"),
                    .dx = view(dx, "dx"),
                    .d_topk_weights = view(d_topk, "d_topk_weights"),
                    .dw1 = view(dw1, "dw1"),
                    .dw2 = view(dw2, "dw2"),
                    .shared_dw1 = view(sdw1, "shared_dw1"),
                    .shared_dw2 = view(sdw2, "shared_dw2")}));
  return {dx, d_topk, dw1, dw2, sdw1, sdw2};
}

Tensor mega_moe_cpu(const c10::intrusive_ptr<MegaMoeLayer>& layer, const Tensor& x,
                    const Tensor& topk_idx, const Tensor& topk_weights,
                    const optional<Tensor>& x_active_mask) {
  return layer_forward(*layer, x, topk_idx, topk_weights, x_active_mask);
}

Grads mega_moe_grad(const c10::intrusive_ptr<MegaMoeLayer>& layer, const Tensor& x,
                    const Tensor& topk_idx, const Tensor& topk_weights, const Tensor& dy,
                    const optional<Tensor>& x_active_mask) {
  return layer_backward(*layer, x, topk_idx, topk_weights, dy, x_active_mask);
}

void accumulate(Tensor* held, const optional<Tensor>& value) {
  if (!value) return;
  *held = held->defined() ? *held + *value : *value;
}

// mega_moe under autograd: the backward is the layer's (collective: every rank calls it as it
// called the forward); x and topk_weights get their gradients, the weights' are added to the
// layer's w1_grad ... shared_w2_grad.
struct MegaMoeFunction : torch::autograd::Function<MegaMoeFunction> {
  static Tensor forward(torch::autograd::AutogradContext* ctx,
                        const c10::intrusive_ptr<MegaMoeLayer>& layer, const Tensor& x,
                        const Tensor& topk_idx, const Tensor& topk_weights,
                        const optional<Tensor>& x_active_mask) {
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["has_mask"] = x_active_mask.has_value() && x_active_mask->defined();
    ctx->save_for_backward({x, topk_idx, topk_weights, x_active_mask.value_or(Tensor())});
    return layer_forward(*layer, x, topk_idx, topk_weights, x_active_mask);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto layer = ctx->saved_data["layer"].toCustomClass<MegaMoeLayer>();
    const auto saved = ctx->get_saved_variables();
    const optional<Tensor> mask =
        ctx->saved_data["has_mask"].toBool() ? optional<Tensor>(saved[3]) : c10::nullopt;
    auto [dx, d_topk, dw1, dw2, sdw1, sdw2] =
        layer_backward(*layer, saved[0], saved[1], saved[2], grad[0], mask);
    accumulate(&layer->w1_grad, dw1);
    accumulate(&layer->w2_grad, dw2);
    accumulate(&layer->shared_w1_grad, sdw1);
    accumulate(&layer->shared_w2_grad, sdw2);
    const Tensor& x = saved[0];
    const Tensor& topk_weights = saved[2];
    return {Tensor(), ctx->needs_input_grad(0) ? dx.to(x.scalar_type()) : Tensor(), Tensor(),
            ctx->needs_input_grad(2) ? d_topk.to(topk_weights.scalar_type()) : Tensor(), Tensor()};
  }
};

Tensor mega_moe_autograd(const c10::intrusive_ptr<MegaMoeLayer>& layer, const Tensor& x,
                         const Tensor& topk_idx, const Tensor& topk_weights,
                         const optional<Tensor>& x_active_mask) {
  return MegaMoeFunction::apply(layer, x, topk_idx, topk_weights, x_active_mask);
}

optional<Tensor> defined(const Tensor& t) {
  return t.defined() ? optional<Tensor>(t) : c10::nullopt;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(hyper_parallel, m) {
  m.class_<MoeBuffer>("MoeBuffer")
      .def(torch::init<std::int64_t>())
      .def("handle", [](const c10::intrusive_ptr<MoeBuffer>& self) { return self->id; })
      .def("rank",
           [](const c10::intrusive_ptr<MoeBuffer>& self) {
             return std::int64_t(self->get().rank());
           })
      .def("num_ranks",
           [](const c10::intrusive_ptr<MoeBuffer>& self) {
             return std::int64_t(self->get().num_ranks());
           })
      .def("local_experts",
           [](const c10::intrusive_ptr<MoeBuffer>& self) { return self->get().local_experts(); });
  m.class_<MegaMoeLayer>("MegaMoeLayer")
      .def(torch::init<std::int64_t>())
      .def("handle", [](const c10::intrusive_ptr<MegaMoeLayer>& self) { return self->id; })
      .def("deep", [](const c10::intrusive_ptr<MegaMoeLayer>& self) { return self->get().deep(); })
      .def("w1_grad",
           [](const c10::intrusive_ptr<MegaMoeLayer>& self) { return defined(self->w1_grad); })
      .def("w2_grad",
           [](const c10::intrusive_ptr<MegaMoeLayer>& self) { return defined(self->w2_grad); })
      .def("shared_w1_grad",
           [](const c10::intrusive_ptr<MegaMoeLayer>& self) {
             return defined(self->shared_w1_grad);
           })
      .def("shared_w2_grad",
           [](const c10::intrusive_ptr<MegaMoeLayer>& self) {
             return defined(self->shared_w2_grad);
           })
      .def("reset_grad", [](const c10::intrusive_ptr<MegaMoeLayer>& self, const std::string& name) {
        Tensor* grad = name == "w1_grad"          ? &self->w1_grad
                       : name == "w2_grad"        ? &self->w2_grad
                       : name == "shared_w1_grad" ? &self->shared_w1_grad
                       : name == "shared_w2_grad" ? &self->shared_w2_grad
                                                  : nullptr;
        TORCH_CHECK(grad != nullptr, "[hp INVALID_ARGUMENT (1)] reset_grad('", name,
                    "'): expected w1_grad, w2_grad, shared_w1_grad or shared_w2_grad");
        *grad = Tensor();
      });
  namespace schemas = hp::torch_ops::schemas;
  m.def(schemas::dispatch_layout, TORCH_FN(dispatch_layout));
  m.def(schemas::notify_dispatch, TORCH_FN(notify_dispatch));
  m.def(schemas::dispatch, TORCH_FN(dispatch));
  m.def(schemas::combine, TORCH_FN(combine));
  m.def(schemas::low_latency_dispatch, TORCH_FN(low_latency_dispatch));
  m.def(schemas::low_latency_combine, TORCH_FN(low_latency_combine));
  m.def(schemas::mega_moe);
  m.def(schemas::mega_moe_grad, TORCH_FN(mega_moe_grad));
}

TORCH_LIBRARY_IMPL(hyper_parallel, CPU, m) { m.impl("mega_moe", TORCH_FN(mega_moe_cpu)); }
TORCH_LIBRARY_IMPL(hyper_parallel, Autograd, m) { m.impl("mega_moe", TORCH_FN(mega_moe_autograd)); }
