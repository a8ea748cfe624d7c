// GoogleTest printers for native/common types, so that failures read "CORRUPT_DATA (10)"
// rather than "4-byte object <0A-00 00-00>". Found by argument-dependent lookup.
#ifndef HYPER_PARALLEL_TESTS_COMMON_PRINTERS_H_
#define HYPER_PARALLEL_TESTS_COMMON_PRINTERS_H_

#include <cstdint>
#include <ostream>

#include "common/settings.h"
#include "common/status.h"
#include "common/tensor_view.h"

namespace hp {

inline void PrintTo(ErrorCode code, std::ostream* os) {
  *os << to_string(code) << " (" << static_cast<std::uint32_t>(code) << ")";
}

inline void PrintTo(const Status& status, std::ostream* os) { *os << status.to_string(); }

inline void PrintTo(DType dtype, std::ostream* os) {
  *os << to_string(dtype) << " (" << static_cast<int>(dtype) << ")";
}

inline void PrintTo(LogLevel level, std::ostream* os) {
  *os << "LogLevel(" << static_cast<int>(level) << ")";
}

inline void PrintTo(PinMode mode, std::ostream* os) {
  *os << "PinMode(" << static_cast<int>(mode) << ")";
}

}  // namespace hp

#endif  // HYPER_PARALLEL_TESTS_COMMON_PRINTERS_H_
