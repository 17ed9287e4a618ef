#include "support/status.h"

namespace kiln {

std::string SourceLoc::to_string() const {
  if (!valid()) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kCorrupt: return "corrupt";
    case ErrorCode::kOutOfMemory: return "out of memory";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kInternal: return "internal error";
    case ErrorCode::kUntrusted: return "untrusted";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  std::string prefix = loc_.file.empty() ? std::string() : loc_.to_string() + ": ";
  const char* kind = code_ == ErrorCode::kInternal ? "internal error: " : "error: ";
  return prefix + kind + message_;
}

}  // namespace kiln
