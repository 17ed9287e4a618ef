// kiln-run --info: what an artifact holds, read without opening a device.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "artifact/reader.h"

namespace kiln::tools {

// The description, as --info-json writes it: artifact path, format_version, producer (the
// compiler and version that wrote it, e.g. "kilnc 0.1.0"), targets (name, kernel binaries,
// shared modules), inputs and outputs (name, dtype, shape with symbolic dims as their names),
// symbols, kernels (index, name, kind, source nodes), constants (count, named weights, bytes)
// and the memory plan's arena size (an expression in the symbols).
nlohmann::json describe_artifact(const artifact::LoadedArtifact& artifact, const std::string& path);

// The same description as text, for --info.
std::string format_description(const nlohmann::json& description);

}  // namespace kiln::tools
