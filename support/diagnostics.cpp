#include "support/diagnostics.h"

#include <sstream>

namespace kiln {

std::string Diagnostic::to_string() const {
  std::string prefix = loc.file.empty() ? std::string() : loc.to_string() + ": ";
  return prefix + "error: " + message;
}

void Diagnostics::error(SourceLoc loc, std::string message) {
  if (errors_.size() >= limit_) return;
  errors_.push_back({std::move(loc), std::move(message)});
}

void Diagnostics::add(const Status& status) {
  if (status.is_ok()) return;
  error(status.loc(), status.message());
}

std::string Diagnostics::to_string() const {
  std::string out;
  for (const Diagnostic& d : errors_) out += d.to_string() + "\n";
  if (errors_.size() >= limit_) out += "error: too many errors, stopping\n";
  return out;
}

Status Diagnostics::to_status() const {
  if (errors_.empty()) return Status::ok();
  std::string message = errors_.front().message;
  if (errors_.size() > 1) message += " (and " + std::to_string(errors_.size() - 1) + " more errors)";
  return Status(ErrorCode::kInvalidArgument, message, errors_.front().loc);
}

std::string numbered_lines(const std::string& text) {
  std::ostringstream out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) out << n << '\t' << line << '\n';
  return out.str();
}

}  // namespace kiln
