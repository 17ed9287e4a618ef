// The last line of defence of every tool's main(): an exception that escaped the tool's own
// error handling (std::bad_alloc from an allocation the machine cannot serve, a bug) is reported
// on one line as "<tool>: error: out of memory (...)" with exit status 1, or as
// "<tool>: internal error: ..." with exit status 2, never as an abort.
#pragma once

#include <cstdio>
#include <exception>
#include <new>

namespace kiln::tools {

template <class Body>
int run_guarded(const char* tool, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: error: out of memory (an allocation failed; try smaller sizes)\n", tool);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", tool, e.what());
    return 2;
  } catch (...) {
    std::fprintf(stderr, "%s: internal error: an unknown exception\n", tool);
    return 2;
  }
}

}  // namespace kiln::tools
