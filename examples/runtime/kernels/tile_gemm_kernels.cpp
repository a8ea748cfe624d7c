// hp_example_tile_gemm_f32 and hp_example_bias_act_f32 (example_kernels.h): a plain C++ tile
// GEMM. The optimised GEMMs of native/kernels live in the multicore component, which the core
// component (where the examples are built) cannot link.
#include "example_kernels.h"
#include "kernel_checks.h"

using hp::ErrorCode;
using hp::Status;
using hp::examples::expect_args;
using hp::examples::expect_rows;
using hp::examples::share;

HP_EXAMPLE_KERNEL hp_example_tile_gemm_f32(const hp::runtime::TaskArgs& args,
                                           hp::platform::BlockContext& block) {
  HP_RETURN_IF_ERROR(expect_args(args, "hp_example_tile_gemm_f32", 3, 1));
  const hp::TensorView& a = args.tensor(0);
  const hp::TensorView& b = args.tensor(1);
  const hp::TensorView& c = args.tensor(2);
  HP_RETURN_IF_ERROR(expect_rows(a, "hp_example_tile_gemm_f32 a", hp::DType::kFP32, 2));
  HP_RETURN_IF_ERROR(expect_rows(b, "hp_example_tile_gemm_f32 b", hp::DType::kFP32, 2));
  HP_RETURN_IF_ERROR(expect_rows(c, "hp_example_tile_gemm_f32 c", hp::DType::kFP32, 2));
  HP_ENSURE(a.dim(1) == b.dim(0) && a.dim(0) == c.dim(0) && b.dim(1) == c.dim(1),
            ErrorCode::kShapeMismatch, "hp_example_tile_gemm_f32: a {} b {} c {} do not chain",
            a.to_string(), b.to_string(), c.to_string());
  const bool accumulate = args.scalar_as<std::int32_t>(0) != 0;
  const std::int64_t k_dim = a.dim(1), n_dim = b.dim(1);
  const auto [lo, hi] = share(c.dim(0), block.block_idx(), block.block_dim());
  for (std::int64_t i = lo; i < hi; ++i) {
    const float* a_row = static_cast<const float*>(a.data()) + i * a.stride(0);
    float* c_row = static_cast<float*>(c.data()) + i * c.stride(0);
    if (!accumulate) {
      for (std::int64_t j = 0; j < n_dim; ++j) c_row[j] = 0.0f;
    }
    for (std::int64_t k = 0; k < k_dim; ++k) {
      const float a_ik = a_row[k];
      const float* b_row = static_cast<const float*>(b.data()) + k * b.stride(0);
      for (std::int64_t j = 0; j < n_dim; ++j) c_row[j] += a_ik * b_row[j];
    }
  }
  return Status::ok();
}

HP_EXAMPLE_KERNEL hp_example_bias_act_f32(const hp::runtime::TaskArgs& args,
                                          hp::platform::BlockContext& block) {
  HP_RETURN_IF_ERROR(expect_args(args, "hp_example_bias_act_f32", 2, 1));
  const hp::TensorView& c = args.tensor(0);
  const hp::TensorView& bias = args.tensor(1);
  HP_RETURN_IF_ERROR(expect_rows(c, "hp_example_bias_act_f32 c", hp::DType::kFP32, 2));
  HP_RETURN_IF_ERROR(expect_rows(bias, "hp_example_bias_act_f32 bias", hp::DType::kFP32, 1));
  HP_ENSURE(bias.dim(0) == c.dim(1), ErrorCode::kShapeMismatch,
            "hp_example_bias_act_f32: bias {} does not match c {}", bias.to_string(),
            c.to_string());
  const auto activation = static_cast<hp::examples::Activation>(args.scalar_as<std::int32_t>(0));
  HP_ENSURE(activation >= hp::examples::Activation::kNone &&
                activation <= hp::examples::Activation::kGelu,
            ErrorCode::kInvalidArgument,
            "hp_example_bias_act_f32: activation {} is not 0 (none), "
            "1 (relu) or 2 (gelu)",
            static_cast<int>(activation));
  const auto* bias_data = static_cast<const float*>(bias.data());
  const auto [lo, hi] = share(c.dim(0), block.block_idx(), block.block_dim());
  for (std::int64_t i = lo; i < hi; ++i) {
    float* row = static_cast<float*>(c.data()) + i * c.stride(0);
    for (std::int64_t j = 0; j < c.dim(1); ++j) {
      row[j] = hp::examples::activate(row[j] + bias_data[j], activation);
    }
  }
  return Status::ok();
}
