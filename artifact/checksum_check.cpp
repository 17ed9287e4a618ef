#include "artifact/checksum_check.h"

#include <algorithm>
#include <system_error>

#include "artifact/artifact.h"

namespace kiln::artifact::detail {
namespace {

// A thread costs about what hashing 0.1 MB does; below 2 MB per thread the extra ones do not pay.
constexpr uint64_t kBytesPerThread = uint64_t{2} << 20;
constexpr unsigned kMaxThreads = 16;

}  // namespace

ChecksumCheck::ChecksumCheck(std::vector<Item> items, uint32_t format_version)
    : items_(std::move(items)), format_version_(format_version), segmented_(checksums_have_segments(format_version)) {
  first_piece_.resize(items_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i < items_.size(); ++i) {
    const std::span<const uint8_t> bytes = items_[i].bytes;
    first_piece_[i] = pieces_.size();
    total += bytes.size();
    if (!segmented_) {
      pieces_.push_back({bytes});
      continue;
    }
    for (size_t at = 0; at < bytes.size(); at += kChecksumSegmentBytes)
      pieces_.push_back({bytes.subspan(at, std::min(kChecksumSegmentBytes, bytes.size() - at))});
  }
  first_piece_[items_.size()] = pieces_.size();
  order_.resize(pieces_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  std::stable_sort(order_.begin(), order_.end(),
                   [&](size_t a, size_t b) { return pieces_[a].bytes.size() > pieces_[b].bytes.size(); });
  hashes_.resize(pieces_.size());
  const unsigned threads = unsigned(std::clamp<uint64_t>(
      std::min<uint64_t>(total / kBytesPerThread, std::max(1u, std::thread::hardware_concurrency())), 1, kMaxThreads));
  try {
    for (unsigned t = 1; t < threads; ++t) helpers_.emplace_back([this] { hash_pieces(); });
  } catch (const std::system_error&) {
    // No thread to spare: first_mismatch() hashes the rest itself.
  }
}

ChecksumCheck::~ChecksumCheck() {
  // An early return of the reader: stop handing out pieces, then wait for those in hand.
  next_ = order_.size();
  join();
}

void ChecksumCheck::join() {
  for (std::thread& helper : helpers_) helper.join();
  helpers_.clear();
}

void ChecksumCheck::hash_pieces() {
  for (size_t i = next_++; i < order_.size(); i = next_++) {
    const std::span<const uint8_t> bytes = pieces_[order_[i]].bytes;
    hashes_[order_[i]] = segmented_ ? checksum_segment(bytes, format_version_) : blob_checksum(bytes, format_version_);
  }
}

std::optional<size_t> ChecksumCheck::first_mismatch() {
  hash_pieces();
  join();
  for (size_t i = 0; i < items_.size(); ++i) {
    const std::span<const uint64_t> mine(hashes_.data() + first_piece_[i], first_piece_[i + 1] - first_piece_[i]);
    const uint64_t actual = segmented_ ? fold_segment_checksums(mine, items_[i].bytes.size()) : mine.front();
    if (actual != items_[i].expected) return i;
  }
  return std::nullopt;
}

}  // namespace kiln::artifact::detail
