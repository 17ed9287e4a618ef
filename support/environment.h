// Changing the process environment from a library, where other threads may be reading it.
//
// glibc's setenv replaces the environment array with a grown copy and frees the old one when it
// allocated that one itself, which it has after any earlier setenv in the process (PoCL, for one,
// sets HWLOC_PLUGINS_PATH when it enumerates devices). A thread reading the old array meanwhile
// (getenv, std::filesystem::temp_directory_path, posix_spawn given `environ`) then reads freed
// memory: Kiln's conformance harness saw `posix_spawn` fail with EFAULT, and a stress test of it
// crashed.
#pragma once

namespace kiln {

// Adds `entry` ("NAME=VALUE", which must stay alive for the rest of the process: a string
// literal) to the environment, unless NAME is already set. The grown array is published with
// one atomic pointer store and the array it replaces is never freed (a few hundred bytes, once),
// so that concurrent readers see either the old environment or the new one, both valid.
// Thread-safety: safe against concurrent readers; a setenv or unsetenv running at the same
// moment on another thread may undo this one's change or be undone by it, never crash. Returns
// false when NAME was already set or memory ran out (the environment is then unchanged).
bool add_to_environment(const char* entry);

}  // namespace kiln
