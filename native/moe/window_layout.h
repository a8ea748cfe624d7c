// The pieces of a Buffer's window shared by its normal and low-latency modes (buffer.h has the
// layout): status slots, flag kinds, row rounding and the input checks both modes make.
#ifndef HYPER_PARALLEL_MOE_WINDOW_LAYOUT_H_
#define HYPER_PARALLEL_MOE_WINDOW_LAYOUT_H_

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "common/tensor_view.h"

namespace hp::moe::window {

inline constexpr std::size_t kSlot = 64;  // status words 64 bytes apart (the protocol rule)
// flags: kinds x R slots; rank s sets slot [kind][s] of a peer to the call's epoch.
enum FlagKind { kNotify = 0, kDispatch = 1, kCombine = 2, kLowLatencyDispatch = 3, kLowLatencyCombine = 4 };
inline constexpr int kFlagKinds = 5;
inline constexpr std::ptrdiff_t kCountsHeader = 1;  // a counts slot starts with a status code

inline std::size_t round64(std::size_t n) { return (n + 63) & ~std::size_t(63); }

inline Status expect_contiguous(const TensorView& t, const char* what) {
  HP_ENSURE(t.is_contiguous(), ErrorCode::kInvalidArgument, "{} {}: expected contiguous", what, t.to_string());
  return Status::ok();
}

}  // namespace hp::moe::window

#endif  // HYPER_PARALLEL_MOE_WINDOW_LAYOUT_H_
