// The fused_deep_moe family's variants, each taken from the op packages on the search path with
// hp::ops::find (the payload's package holds one variant; tests/build runs this with packages of
// the others on HP_VENDOR_PATH): the variant's create and forward give the y of the C++ layer
// made with the same weights, weight type and communication context, bit for bit. A variant no
// package holds is skipped, naming the packages searched.
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "hyper_parallel_op_api.h"
#include "moe/layer_weights.h"
#include "moe/moe_layer.h"
#include "moe/routing_inputs.h"
#include "ops/op_lookup.h"
#include "ops/op_tensor.h"
#include "shmem/scenario.h"

namespace hp::moe {
namespace {

using hp::moe::testing::all_mapped;
using hp::moe::testing::make_weights;
using hp::moe::testing::Weights;
using hp::ops::testing::tensor;
using hp::shmem::testing::run_scenario;

struct Variant {
  const char* op;
  const char* create;
  hp::kernels::WeightType weights;
  bool forces_shmem;
};

using CreateFn = decltype(&hpHyperMegaMoeCreateWithWeights);
using DestroyFn = decltype(&hpHyperMegaMoeDestroy);
using WorkspaceFn = decltype(&hpHyperMegaMoeGetWorkspaceSize);
using ExecuteFn = decltype(&hpHyperMegaMoe);
using LastErrorFn = decltype(&hpGetLastErrorMessage);

class OpVariant : public ::testing::TestWithParam<std::tuple<Variant, int32_t>> {};

TEST_P(OpVariant, MatchesTheLayer) {
  const auto [variant, comm] = GetParam();
  hp::ops::OpEntry entry;
  const Status found = hp::ops::find(variant.op, &entry);
  if (found.code() == ErrorCode::kNotFound) GTEST_SKIP() << found.message();
  ASSERT_TRUE(found.is_ok()) << found.to_string();
  void *create = nullptr, *destroy = nullptr, *last_error = nullptr;
  ASSERT_TRUE(hp::ops::find_symbol(entry, variant.create, &create).is_ok());
  ASSERT_TRUE(hp::ops::find_symbol(entry, "hpHyperMegaMoeDestroy", &destroy).is_ok());
  ASSERT_TRUE(hp::ops::find_symbol(entry, "hpGetLastErrorMessage", &last_error).is_ok());
  auto error = reinterpret_cast<LastErrorFn>(last_error);
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (comm == HP_MOE_COMM_WINDOW && !all_mapped()) return Status::ok();
    const std::int64_t local = 2, H = 64, I = 32, K = 2, T = 10, E = local * ranks;
    // int4 values: every variant takes them (the int8 ones store them as int8).
    Weights w = make_weights(H, I, local, 11 + std::uint32_t(me), 7);
    std::vector<float> x(std::size_t(T * H)), wts(std::size_t(T * K), 0.5f);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = float(int((i * 3 + std::size_t(me)) % 13) - 6) / 4;
    std::vector<std::int64_t> idx(std::size_t(T * K));
    for (std::int64_t t = 0; t < T; ++t) {
      idx[std::size_t(K * t)] = (t + me) % E;
      idx[std::size_t(K * t + 1)] = (t + me + 1) % E;
    }
    const hpTensor t_w1 = tensor(w.w1.data(), HP_DTYPE_INT8, {local, H, 2 * I}),
                   t_s1 = tensor(w.s1.data(), HP_DTYPE_FP32, {local, 2 * I}),
                   t_w2 = tensor(w.w2.data(), HP_DTYPE_INT8, {local, I, H}),
                   t_s2 = tensor(w.s2.data(), HP_DTYPE_FP32, {local, H}),
                   t_x = tensor(x.data(), HP_DTYPE_FP32, {T, H}),
                   t_idx = tensor(idx.data(), HP_DTYPE_INT64, {T, K}),
                   t_w = tensor(wts.data(), HP_DTYPE_FP32, {T, K});
    const hpHyperMegaMoeWeights weights{
        .w1 = &t_w1, .w1Scale = &t_s1, .w2 = &t_w2, .w2Scale = &t_s2};
    const hpHyperMegaMoeConfig config{.hidden = H,
                                      .intermediate = I,
                                      .num_experts = E,
                                      .topk = K,
                                      .max_tokens_per_rank = T,
                                      .comm = comm};
    hpHyperMegaMoeLayer* layer = nullptr;
    EXPECT_EQ(reinterpret_cast<CreateFn>(create)(&config, &weights, &layer), HP_STATUS_OK)
        << error();
    std::vector<float> y(std::size_t(T * H), -1.0f);
    const hpTensor t_y = tensor(y.data(), HP_DTYPE_FP32, {T, H});
    uint64_t bytes = 0;
    hpOpExecutor* exec = nullptr;
    EXPECT_EQ(
        entry.workspace_fn<WorkspaceFn>()(layer, &t_x, &t_idx, &t_w, nullptr, &t_y, &bytes, &exec),
        HP_STATUS_OK)
        << error();
    std::vector<std::uint8_t> storage(bytes + 64);
    void* ws = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 63) &
                                       ~std::uintptr_t(63));
    EXPECT_EQ(entry.execute_fn<ExecuteFn>()(ws, bytes, exec), HP_STATUS_OK) << error();
    EXPECT_EQ(reinterpret_cast<DestroyFn>(destroy)(layer), HP_STATUS_OK);

    std::unique_ptr<MoeLayer> cpp;
    const CommKind kind =
        variant.forces_shmem || comm == HP_MOE_COMM_SHMEM ? CommKind::kShmem : CommKind::kWindow;
    HP_RETURN_IF_ERROR(
        MoeLayer::create({.hidden = H,
                          .intermediate = I,
                          .num_experts = E,
                          .topk = K,
                          .max_tokens_per_rank = T,
                          .comm = kind,
                          .weights = variant.weights},
                         {.w1 = TensorView(w.w1.data(), DType::kInt8, {local, H, 2 * I}),
                          .w1_scale = TensorView(w.s1.data(), DType::kFP32, {local, 2 * I}),
                          .w2 = TensorView(w.w2.data(), DType::kInt8, {local, I, H}),
                          .w2_scale = TensorView(w.s2.data(), DType::kFP32, {local, H})},
                         &cpp));
    std::vector<float> y_cpp(y.size());
    HP_RETURN_IF_ERROR(cpp->forward(TensorView(x.data(), DType::kFP32, {T, H}),
                                    TensorView(idx.data(), DType::kInt64, {T, K}),
                                    TensorView(wts.data(), DType::kFP32, {T, K}),
                                    TensorView(y_cpp.data(), DType::kFP32, {T, H})));
    EXPECT_EQ(y, y_cpp) << "rank " << me;
    HP_RETURN_IF_ERROR(cpp->destroy());
    // an int8 value is refused, on every rank
    if (variant.weights == hp::kernels::WeightType::kInt4) {
      if (me == 0) w.w1[3] = 100;
      layer = nullptr;
      const hpStatus st = reinterpret_cast<CreateFn>(create)(&config, &weights, &layer);
      EXPECT_EQ(st, me == 0 ? HP_STATUS_OUT_OF_RANGE : HP_STATUS_INVALID_ARGUMENT) << error();
      EXPECT_EQ(layer, nullptr);
    }
    return Status::ok();
  });
}

const Variant kVariants[] = {
    {"fused_deep_moe", "hpHyperMegaMoeCreateWithWeights", hp::kernels::WeightType::kInt8, false},
    {"fused_deep_moe_w4a8", "hpHyperMegaMoeW4A8CreateWithWeights", hp::kernels::WeightType::kInt4,
     false},
    {"fused_deep_moe_shmem", "hpHyperMegaMoeShmemCreateWithWeights", hp::kernels::WeightType::kInt8,
     true},
};

INSTANTIATE_TEST_SUITE_P(Family, OpVariant,
                         ::testing::Combine(::testing::ValuesIn(kVariants),
                                            ::testing::Values(HP_MOE_COMM_SHMEM,
                                                              HP_MOE_COMM_WINDOW)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).op) +
                                  (std::get<1>(info.param) == HP_MOE_COMM_SHMEM ? "_shmem_comm"
                                                                                : "_window_comm");
                         });

}  // namespace
}  // namespace hp::moe

int main(int argc, char** argv) { return hp::shmem::testing::scenario_main(argc, argv); }
