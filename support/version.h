// Kiln's version, one place: CMakeLists.txt's project(VERSION), passed in by support/CMakeLists.txt
// as KILN_VERSION_STRING. The tools print it, the C API returns it, artifacts record it as their
// producer, and kilnc's compile cache keys on it.
#pragma once

#ifndef KILN_VERSION_STRING
#error "KILN_VERSION_STRING is defined by support/CMakeLists.txt for every target linking kiln_support"
#endif

namespace kiln {

inline constexpr const char* kVersion = KILN_VERSION_STRING;

}  // namespace kiln
