#include "moe/tools/moe_checks.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "moe/moe_reference.h"
#include "shmem/shmem.h"

namespace hp::moe::tools {

namespace {

double relative_error(const float* got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

}  // namespace

Status check_against_references(const WorkloadShape& s, std::int64_t check_tokens,
                                const RankInputs& in, const std::vector<float>& y,
                                std::vector<double>* errors) {
  const std::int64_t T = std::min<std::int64_t>(check_tokens, s.tokens);
  const ExpertWeightsData all = make_expert_weights(s, 0, s.experts, s.intermediate);
  const std::int64_t si = s.shared_intermediate;
  const ExpertWeightsData shared = make_expert_weights(s, s.experts, si > 0 ? 1 : 0, si);
  auto shared_view = [&](const void* data, DType type, std::initializer_list<std::int64_t> shape) {
    return si > 0 ? TensorView(const_cast<void*>(data), type, shape) : TensorView();
  };
  std::vector<float> ref_q(std::size_t(T * s.hidden)), ref_f(ref_q.size());
  MoeReferenceArgs args{
      .w1 = TensorView(const_cast<std::int8_t*>(all.w1.data()), DType::kInt8,
                       {s.experts, s.hidden, 2 * s.intermediate}),
      .w1_scale = TensorView(const_cast<float*>(all.w1_scale.data()), DType::kFP32,
                             {s.experts, 2 * s.intermediate}),
      .w2 = TensorView(const_cast<std::int8_t*>(all.w2.data()), DType::kInt8,
                       {s.experts, s.intermediate, s.hidden}),
      .w2_scale =
          TensorView(const_cast<float*>(all.w2_scale.data()), DType::kFP32, {s.experts, s.hidden}),
      .shared_w1 = shared_view(shared.w1.data(), DType::kInt8, {1, s.hidden, 2 * si}),
      .shared_w1_scale = shared_view(shared.w1_scale.data(), DType::kFP32, {1, 2 * si}),
      .shared_w2 = shared_view(shared.w2.data(), DType::kInt8, {1, si, s.hidden}),
      .shared_w2_scale = shared_view(shared.w2_scale.data(), DType::kFP32, {1, s.hidden}),
      .x = TensorView(const_cast<float*>(in.x.data()), DType::kFP32, {T, s.hidden}),
      .topk_idx =
          TensorView(const_cast<std::int64_t*>(in.topk_idx.data()), DType::kInt64, {T, s.topk}),
      .topk_weights =
          TensorView(const_cast<float*>(in.topk_weights.data()), DType::kFP32, {T, s.topk}),
      .y = TensorView(ref_q.data(), DType::kFP32, {T, s.hidden})};
  HP_RETURN_IF_ERROR(moe_reference_quantized(args));
  args.y = TensorView(ref_f.data(), DType::kFP32, {T, s.hidden});
  HP_RETURN_IF_ERROR(moe_reference_float(args));
  *errors = {relative_error(y.data(), ref_q), relative_error(y.data(), ref_f)};
  return Status::ok();
}

std::vector<float> make_dy(const WorkloadShape& s, int rank) {
  std::mt19937 rng(s.seed * 104729u + std::uint32_t(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> dy(std::size_t(s.tokens * s.hidden));
  for (auto& v : dy) v = normal(rng);
  return dy;
}

Status check_gradients(const WorkloadShape& s, std::int64_t check_tokens, MoeLayer& layer,
                       std::vector<double>* errors) {
  const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
  const std::int64_t T = s.tokens, H = s.hidden, I = s.intermediate, K = s.topk, E = s.experts,
                     local = E / ranks;
  const std::int64_t C = std::min<std::int64_t>(check_tokens, T), si = s.shared_intermediate,
                     Is = std::max<std::int64_t>(si, 1);
  const ExpertWeightsData all = make_expert_weights(s, 0, E, I);
  const ExpertWeightsData shared = make_expert_weights(s, E, si > 0 ? 1 : 0, si);
  auto view = [](const auto& v, DType type, std::initializer_list<std::int64_t> shape) {
    return TensorView(const_cast<void*>(static_cast<const void*>(v.data())), type, shape);
  };
  auto shared_view = [&](const auto& v, DType type, std::initializer_list<std::int64_t> shape) {
    return si > 0 ? view(v, type, shape) : TensorView();
  };
  // The layer.
  const RankInputs in = make_rank_inputs(s, me);
  std::vector<float> dy = make_dy(s, me);
  std::fill(dy.begin() + C * H, dy.end(), 0.0f);
  std::vector<float> dx(std::size_t(T * H)), d_topk(std::size_t(T * K)),
      dw1(std::size_t(local * H * 2 * I)), dw2(std::size_t(local * I * H)),
      sdw1(std::size_t(H * 2 * Is)), sdw2(std::size_t(Is * H));
  HP_RETURN_IF_ERROR(layer.backward({.x = view(in.x, DType::kFP32, {T, H}),
                                     .topk_idx = view(in.topk_idx, DType::kInt64, {T, K}),
                                     .topk_weights = view(in.topk_weights, DType::kFP32, {T, K}),
                                     .dy = view(dy, DType::kFP32, {T, H}),
                                     .dx = view(dx, DType::kFP32, {T, H}),
                                     .d_topk_weights = view(d_topk, DType::kFP32, {T, K}),
                                     .dw1 = view(dw1, DType::kFP32, {local, H, 2 * I}),
                                     .dw2 = view(dw2, DType::kFP32, {local, I, H}),
                                     .shared_dw1 = shared_view(sdw1, DType::kFP32, {1, H, 2 * si}),
                                     .shared_dw2 = shared_view(sdw2, DType::kFP32, {1, si, H})}));
  // The reference: this rank's experts' weights' gradients need every rank's check tokens.
  std::vector<float> ref_dw1(std::size_t(E * H * 2 * I), 0.0f),
      ref_dw2(std::size_t(E * I * H), 0.0f), ref_sdw1(sdw1.size(), 0.0f),
      ref_sdw2(sdw2.size(), 0.0f), scratch_sdw1(sdw1.size()), scratch_sdw2(sdw2.size());
  std::vector<float> ref_dx, ref_dtopk;
  for (int r = 0; r < ranks; ++r) {
    const RankInputs rin = r == me ? in : make_rank_inputs(s, r);
    const std::vector<float> rdy = make_dy(s, r);
    std::vector<float> rdx(std::size_t(C * H)), rdtopk(std::size_t(C * K));
    std::fill(scratch_sdw1.begin(), scratch_sdw1.end(), 0.0f);
    std::fill(scratch_sdw2.begin(), scratch_sdw2.end(), 0.0f);
    HP_RETURN_IF_ERROR(moe_reference_quantized_grad(
        {.forward = {.w1 = view(all.w1, DType::kInt8, {E, H, 2 * I}),
                     .w1_scale = view(all.w1_scale, DType::kFP32, {E, 2 * I}),
                     .w2 = view(all.w2, DType::kInt8, {E, I, H}),
                     .w2_scale = view(all.w2_scale, DType::kFP32, {E, H}),
                     .shared_w1 = shared_view(shared.w1, DType::kInt8, {1, H, 2 * si}),
                     .shared_w1_scale = shared_view(shared.w1_scale, DType::kFP32, {1, 2 * si}),
                     .shared_w2 = shared_view(shared.w2, DType::kInt8, {1, si, H}),
                     .shared_w2_scale = shared_view(shared.w2_scale, DType::kFP32, {1, H}),
                     .x = view(rin.x, DType::kFP32, {C, H}),
                     .topk_idx = view(rin.topk_idx, DType::kInt64, {C, K}),
                     .topk_weights = view(rin.topk_weights, DType::kFP32, {C, K})},
         .dy = view(rdy, DType::kFP32, {C, H}),
         .dx = view(rdx, DType::kFP32, {C, H}),
         .d_topk_weights = view(rdtopk, DType::kFP32, {C, K}),
         .dw1 = view(ref_dw1, DType::kFP32, {E, H, 2 * I}),
         .dw2 = view(ref_dw2, DType::kFP32, {E, I, H}),
         .shared_dw1 = shared_view(scratch_sdw1, DType::kFP32, {1, H, 2 * si}),
         .shared_dw2 = shared_view(scratch_sdw2, DType::kFP32, {1, si, H})}));
    if (r == me) {
      ref_dx = std::move(rdx);
      ref_dtopk = std::move(rdtopk);
      ref_sdw1 = scratch_sdw1;
      ref_sdw2 = scratch_sdw2;
    }
  }
  // Every gradient the layer wrote, with its reference (the routed and shared weights' together).
  auto concat = [](std::vector<float> a, const std::vector<float>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::vector<float> got_dw1 = concat(dw1, si > 0 ? sdw1 : std::vector<float>{});
  const std::vector<float> got_dw2 = concat(dw2, si > 0 ? sdw2 : std::vector<float>{});
  const std::vector<float> want_dw1 =
      concat(std::vector<float>(ref_dw1.begin() + me * local * H * 2 * I,
                                ref_dw1.begin() + (me + 1) * local * H * 2 * I),
             si > 0 ? ref_sdw1 : std::vector<float>{});
  const std::vector<float> want_dw2 =
      concat(std::vector<float>(ref_dw2.begin() + me * local * I * H,
                                ref_dw2.begin() + (me + 1) * local * I * H),
             si > 0 ? ref_sdw2 : std::vector<float>{});
  *errors = {relative_error(dx.data(), ref_dx), relative_error(d_topk.data(), ref_dtopk),
             relative_error(got_dw1.data(), want_dw1), relative_error(got_dw2.data(), want_dw2)};
  return Status::ok();
}

CheckVerdict judge(const std::vector<double>& all_errors, int ranks, bool checked) {
  CheckVerdict v;
  for (int r = 0; r < ranks; ++r) {
    const double* e = &all_errors[std::size_t(r) * kErrorsPerRank];
    v.quantized = std::max(v.quantized, e[0]);
    v.floating = std::max(v.floating, e[1]);
    for (int g = 0; g < kGrads; ++g) v.grads[g] = std::max(v.grads[g], e[2 + g]);
  }
  const bool grads_passed = std::all_of(std::begin(v.grads), std::end(v.grads),
                                        [](double e) { return e < kGradTolerance; });
  v.passed = !checked ||
             (v.quantized < kQuantizedTolerance && v.floating < kFloatTolerance && grads_passed);
  return v;
}

}  // namespace hp::moe::tools
