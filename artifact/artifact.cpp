#include "artifact/artifact.h"

namespace kiln::artifact {

uint64_t blob_checksum(const std::vector<uint8_t>& blob) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (uint8_t byte : blob) {
    hash ^= byte;
    hash *= 0x100000001b3ull;  // FNV-1a 64 prime
  }
  return hash;
}

}  // namespace kiln::artifact
