// Writing the tools' JSON reports (kiln-run --bench-json, --profile-trace, --info-json; kiln-bench
// --json), all through nlohmann_json.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "support/status.h"

namespace kiln::tools {

// Writes `value`, indented, to `path`, or to stdout when `path` is "-". A file that cannot be
// written is kInvalidArgument naming it.
Status write_json_file(const std::string& path, const nlohmann::json& value);

}  // namespace kiln::tools
