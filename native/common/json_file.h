// JSON files through nlohmann-json, with stable errors: a missing file is NOT_FOUND, an
// unreadable one IO_ERROR, one that does not parse CORRUPT_DATA (with the parser's position).
#ifndef HYPER_PARALLEL_COMMON_JSON_FILE_H_
#define HYPER_PARALLEL_COMMON_JSON_FILE_H_

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/api.h"
#include "common/status.h"

namespace hp {

using Json = nlohmann::json;

HP_API Status read_json_file(const std::string& path, Json* out);

// An integer field of a file another process wrote: `j` must be a JSON integer that T holds,
// else std::invalid_argument naming it (the readers turn it into CORRUPT_DATA). Not get<T>():
// it converts a JSON float with a cast, undefined behaviour for one out of T's range.
template <typename T>
T json_integer(const Json& j) {
  static_assert(std::is_integral_v<T>);
  if (j.is_number_unsigned()) {
    const auto v = j.get<std::uint64_t>();
    if (std::in_range<T>(v)) return T(v);
  } else if (j.is_number_integer()) {
    const auto v = j.get<std::int64_t>();
    if (std::in_range<T>(v)) return T(v);
  }
  throw std::invalid_argument(j.dump() + " is not an integer of the field's range");
}
// An array of such integers.
template <typename T>
std::vector<T> json_integers(const Json& j) {
  if (!j.is_array()) throw std::invalid_argument(j.dump() + " is not an array of integers");
  std::vector<T> out;
  out.reserve(j.size());
  for (const Json& v : j) out.push_back(json_integer<T>(v));
  return out;
}
// Writes atomically: a temporary file in the same directory, then rename().
HP_API Status write_json_file(const std::string& path, const Json& value, int indent = 2);

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_JSON_FILE_H_
