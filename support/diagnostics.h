// Diagnostics: collects the user errors found while reading one input, so that a run reports
// every error it can recover from (up to a limit) before giving up, the way C compilers do.
//
// Not thread-safe: one Diagnostics per input being processed.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "support/status.h"

namespace kiln {

// `text` with each line prefixed by its number ("12\t..."): generated source quoted in an
// internal error, so that a compiler's line:column diagnostics can be followed.
std::string numbered_lines(const std::string& text);

struct Diagnostic {
  SourceLoc loc;
  std::string message;
  // "file:line:col: error: message"
  std::string to_string() const;
};

class Diagnostics {
 public:
  explicit Diagnostics(size_t limit = 20) : limit_(limit) {}

  void error(SourceLoc loc, std::string message);
  void add(const Status& status);  // records a non-ok status as an error

  bool has_errors() const { return !errors_.empty(); }
  size_t error_count() const { return errors_.size(); }
  // True once the error limit is reached; callers should stop trying to recover.
  bool at_limit() const { return errors_.size() >= limit_; }
  const std::vector<Diagnostic>& errors() const { return errors_; }

  // All errors, one per line, each ending in '\n'.
  std::string to_string() const;
  // A Status summarizing the collected errors (the first error's location and message, plus a
  // count of the rest). Precondition: has_errors().
  Status to_status() const;

 private:
  size_t limit_;
  std::vector<Diagnostic> errors_;
};

}  // namespace kiln
