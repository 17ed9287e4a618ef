// KILN_CHECK: internal invariants. A failed check is a bug in Kiln, never a user error: it
// prints the condition, the place and a message, then aborts. User errors use Status.
#pragma once

#include <cstdio>
#include <cstdlib>

#define KILN_CHECK(cond, msg)                                                              \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "kiln: internal error: %s:%d: check '%s' failed: %s\n", __FILE__, \
                   __LINE__, #cond, (msg));                                                \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)
