// Which build of a linked library the process runs, for compile-cache keys (codegen/
// compile_cache.h): a reinstalled or upgraded NVRTC or shaderc must change every key.
#pragma once

#include <string>

namespace kiln {

// The path, size and modification time of the shared library (or executable, when linked
// statically) that holds `symbol` — how ccache identifies a compiler. "unknown library" when the
// loader cannot say.
std::string loaded_library_identity(const void* symbol);

// The same for a library file that need not be loaded (its path, size and modification time).
std::string library_file_identity(const std::string& path);

}  // namespace kiln
