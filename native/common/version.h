// The library's version (the project version in CMakeLists.txt).
#ifndef HYPER_PARALLEL_COMMON_VERSION_H_
#define HYPER_PARALLEL_COMMON_VERSION_H_

#include <string_view>

#include "common/api.h"

namespace hp {

HP_API std::string_view version() noexcept;  // "0.1.0"

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_VERSION_H_
