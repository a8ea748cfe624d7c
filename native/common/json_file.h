// JSON files through nlohmann-json, with stable errors: a missing file is NOT_FOUND, an
// unreadable one IO_ERROR, one that does not parse CORRUPT_DATA (with the parser's position).
#ifndef HYPER_PARALLEL_COMMON_JSON_FILE_H_
#define HYPER_PARALLEL_COMMON_JSON_FILE_H_

#include <string>

#include <nlohmann/json.hpp>

#include "common/api.h"
#include "common/status.h"

namespace hp {

using Json = nlohmann::json;

HP_API Status read_json_file(const std::string& path, Json* out);
// Writes atomically: a temporary file in the same directory, then rename().
HP_API Status write_json_file(const std::string& path, const Json& value, int indent = 2);

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_JSON_FILE_H_
