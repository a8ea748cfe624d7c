// hp_example_add_f32, hp_example_scale_f32, hp_example_sum_f32 (example_kernels.h).
#include <cmath>

#include "example_kernels.h"
#include "kernel_checks.h"

using hp::ErrorCode;
using hp::Status;
using hp::examples::expect_args;
using hp::examples::expect_rows;
using hp::examples::share;

namespace {

Status expect_same_length(const hp::TensorView& a, const hp::TensorView& b, const char* kernel) {
  HP_ENSURE(a.dim(0) == b.dim(0), ErrorCode::kShapeMismatch, "{}: lengths differ: {} vs {}", kernel,
            a.to_string(), b.to_string());
  return Status::ok();
}

}  // namespace

HP_EXAMPLE_KERNEL hp_example_add_f32(const hp::runtime::TaskArgs& args,
                                     hp::platform::BlockContext& block) {
  HP_RETURN_IF_ERROR(expect_args(args, "hp_example_add_f32", 3, 0));
  for (int i = 0; i < 3; ++i) {
    HP_RETURN_IF_ERROR(
        expect_rows(args.tensor(i), "hp_example_add_f32 tensor", hp::DType::kFP32, 1));
  }
  HP_RETURN_IF_ERROR(expect_same_length(args.tensor(0), args.tensor(1), "hp_example_add_f32"));
  HP_RETURN_IF_ERROR(expect_same_length(args.tensor(0), args.tensor(2), "hp_example_add_f32"));
  const auto* x = static_cast<const float*>(args.tensor(0).data());
  const auto* y = static_cast<const float*>(args.tensor(1).data());
  auto* z = static_cast<float*>(args.tensor(2).data());
  const auto [lo, hi] = share(args.tensor(0).dim(0), block.block_idx(), block.block_dim());
  for (std::int64_t i = lo; i < hi; ++i) z[i] = x[i] + y[i];
  return Status::ok();
}

HP_EXAMPLE_KERNEL hp_example_scale_f32(const hp::runtime::TaskArgs& args,
                                       hp::platform::BlockContext& block) {
  HP_RETURN_IF_ERROR(expect_args(args, "hp_example_scale_f32", 2, 1));
  for (int i = 0; i < 2; ++i) {
    HP_RETURN_IF_ERROR(
        expect_rows(args.tensor(i), "hp_example_scale_f32 tensor", hp::DType::kFP32, 1));
  }
  HP_RETURN_IF_ERROR(expect_same_length(args.tensor(0), args.tensor(1), "hp_example_scale_f32"));
  const auto* x = static_cast<const float*>(args.tensor(0).data());
  auto* y = static_cast<float*>(args.tensor(1).data());
  const float alpha = args.scalar_as<float>(0);
  const auto [lo, hi] = share(args.tensor(0).dim(0), block.block_idx(), block.block_dim());
  for (std::int64_t i = lo; i < hi; ++i) y[i] = alpha * x[i];
  return Status::ok();
}

HP_EXAMPLE_KERNEL hp_example_sum_f32(const hp::runtime::TaskArgs& args,
                                     hp::platform::BlockContext& block) {
  HP_RETURN_IF_ERROR(expect_args(args, "hp_example_sum_f32", 2, 0));
  HP_RETURN_IF_ERROR(expect_rows(args.tensor(0), "hp_example_sum_f32 x", hp::DType::kFP32, 1));
  HP_RETURN_IF_ERROR(expect_rows(args.tensor(1), "hp_example_sum_f32 out", hp::DType::kFP32, 1));
  HP_ENSURE(args.tensor(1).dim(0) == 1, ErrorCode::kShapeMismatch,
            "hp_example_sum_f32 out: expected [1], got {}", args.tensor(1).to_string());
  if (block.block_idx() != 0) return Status::ok();  // one block sums: a fixed order
  const auto* x = static_cast<const float*>(args.tensor(0).data());
  double sum = 0;
  for (std::int64_t i = 0; i < args.tensor(0).dim(0); ++i) sum += x[i];
  *static_cast<float*>(args.tensor(1).data()) = static_cast<float>(sum);
  return Status::ok();
}
