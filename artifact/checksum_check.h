// Internal to the artifact reader: checking many blobs' checksums (the targets' modules and
// kernels, the constants) on several threads while the reader goes on. Hashing reads every weight
// and every binary once (5-7 GB/s a core), which was most of a small model's load time; on helper
// threads that start as soon as the constants are located, it overlaps with converting the rest
// of the file.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <thread>
#include <vector>

namespace kiln::artifact::detail {

// Thread-safety: one owner calls first_mismatch(); the helpers only read the blobs, which must
// stay alive and unchanged until first_mismatch() returns or the object is destroyed.
class ChecksumCheck {
 public:
  struct Item {
    std::span<const uint8_t> bytes;
    uint64_t expected = 0;  // the checksum the file states
  };

  // Starts hashing `items` with `format_version`'s algorithm (blob_checksum) on helper threads
  // (none for a few MB). Format 5 on, checksums fold 1 MiB segments, so the work is cut into
  // segments and one large constant no longer keeps a thread busy while the others wait; older
  // formats hash each blob whole, largest first.
  ChecksumCheck(std::vector<Item> items, uint32_t format_version);
  ~ChecksumCheck();  // joins the helpers
  ChecksumCheck(const ChecksumCheck&) = delete;
  ChecksumCheck& operator=(const ChecksumCheck&) = delete;

  // Hashes what the helpers have not taken, waits for them and returns the index of the first
  // item whose checksum does not match, or nullopt when all match. Call at most once.
  std::optional<size_t> first_mismatch();

 private:
  struct Piece {
    std::span<const uint8_t> bytes;
  };
  void hash_pieces();
  void join();

  std::vector<Item> items_;
  uint32_t format_version_;
  bool segmented_;
  std::vector<Piece> pieces_;
  std::vector<size_t> first_piece_;  // items_[i]'s pieces: [first_piece_[i], first_piece_[i + 1])
  std::vector<size_t> order_;        // the order pieces are taken in: largest first
  std::vector<uint64_t> hashes_;     // one per piece
  std::atomic<size_t> next_{0};      // the next entry of order_ to take
  std::vector<std::thread> helpers_;
};

}  // namespace kiln::artifact::detail
