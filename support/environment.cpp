#include "support/environment.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace kiln {

bool add_to_environment(const char* entry) {
  // Serializes Kiln's own additions, and keeps every array it made reachable: a later setenv
  // copies away from it, and leak checkers would otherwise report it.
  static std::mutex mutex;
  static auto* made = new std::vector<char**>();
  const char* equals = std::strchr(entry, '=');
  if (!equals || equals == entry) return false;
  std::lock_guard<std::mutex> lock(mutex);
  if (std::getenv(std::string(entry, equals).c_str())) return false;
  char** current = __atomic_load_n(&environ, __ATOMIC_ACQUIRE);
  size_t count = 0;
  while (current && current[count]) ++count;
  auto** grown = static_cast<char**>(std::malloc((count + 2) * sizeof(char*)));
  if (!grown) return false;
  if (count > 0) std::memcpy(grown, current, count * sizeof(char*));
  grown[count] = const_cast<char*>(entry);
  grown[count + 1] = nullptr;
  try {
    made->push_back(grown);
  } catch (const std::bad_alloc&) {
    std::free(grown);
    return false;
  }
  __atomic_store_n(&environ, grown, __ATOMIC_RELEASE);  // `current` is not freed: see the header
  return true;
}

}  // namespace kiln
