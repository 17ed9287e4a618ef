// Status and Result<T>: errors as values, used by every Kiln library.
//
// A Status is either ok or carries an ErrorCode, a message and, for user errors found in a
// file, the SourceLoc of the offending token. Internal invariants do not use Status; they use
// KILN_CHECK (support/check.h), which aborts with a message naming the invariant.
//
// Thread-safety: plain values; safe to copy and move between threads.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

// Where something is in a user's file. line and column are 1-based; 0 means "unknown".
struct SourceLoc {
  std::string file;
  int line = 0;
  int column = 0;

  bool valid() const { return line > 0; }
  // "file:line:col" (or just "file" when the position is unknown).
  std::string to_string() const;
};

enum class ErrorCode : uint8_t {
  kOk = 0,
  kInvalidArgument,  // a user error: bad input file, bad option, wrong shape, ...
  kNotFound,         // a named thing (file, input, device, weight) does not exist
  kUnsupported,      // valid, but this build or device cannot do it
  kCorrupt,          // a file or artifact failed validation
  kOutOfMemory,
  kUnavailable,      // a driver or device is not present
  kInternal,         // a bug in Kiln
  kUntrusted,        // an artifact lacks a valid signature by a trusted key (artifact/signing.h)
};

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(ErrorCode code, std::string message, SourceLoc loc = {})
      : code_(code), message_(std::move(message)), loc_(std::move(loc)) {}

  static Status ok() { return Status(); }

  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const SourceLoc& loc() const { return loc_; }

  // "file:line:col: error: message" when a location is known, otherwise "error: message".
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
  SourceLoc loc_;
};

inline Status invalid_argument(std::string message, SourceLoc loc = {}) {
  return Status(ErrorCode::kInvalidArgument, std::move(message), std::move(loc));
}
inline Status not_found(std::string message) { return Status(ErrorCode::kNotFound, std::move(message)); }
inline Status unsupported(std::string message) { return Status(ErrorCode::kUnsupported, std::move(message)); }
inline Status corrupt(std::string message) { return Status(ErrorCode::kCorrupt, std::move(message)); }
inline Status internal_error(std::string message) { return Status(ErrorCode::kInternal, std::move(message)); }

// Result<T>: a T or a non-ok Status (an expected-like type; std::expected is C++23).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {}  // NOLINT: implicit by design

  bool is_ok() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return is_ok(); }

  // Precondition: is_ok().
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error, or an ok Status when this holds a value (so a diagnostic such as
  // `CHECK_MESSAGE(r.is_ok(), r.status().to_string())` is safe to evaluate on success).
  const Status& status() const& {
    static const Status kOkStatus;
    const Status* error = std::get_if<Status>(&data_);
    return error != nullptr ? *error : kOkStatus;
  }
  Status status() && {
    Status* error = std::get_if<Status>(&data_);
    return error != nullptr ? std::move(*error) : Status::ok();
  }

 private:
  std::variant<T, Status> data_;
};

}  // namespace kiln

// Propagate a non-ok Status from an expression returning Status.
#define KILN_RETURN_IF_ERROR(expr)                \
  do {                                            \
    ::kiln::Status kiln_status_ = (expr);         \
    if (!kiln_status_.is_ok()) return kiln_status_; \
  } while (0)

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)
// KILN_ASSIGN_OR_RETURN(auto x, expr): unwraps a Result or returns its Status.
#define KILN_ASSIGN_OR_RETURN(decl, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_result_, __LINE__), decl, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, decl, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.is_ok()) return std::move(tmp).status();  \
  decl = std::move(tmp).value()
