// Structured logging for kiln-serve: one JSON object per line on stderr
// ({"ts": "...", "level": "info", "msg": "...", <fields>}), or plain text with --log-format=text.
// The runtime's own messages (kiln_set_log_callback) come through here too.
//
// Thread-safety: every function may be called from any thread; lines never interleave.
#pragma once

#include <initializer_list>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace kiln::serve {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kVerbose = 3 };
enum class LogFormat { kJson, kText };

// Process-wide settings; call before the server starts its threads.
void configure_logging(LogFormat format, LogLevel max_level);
// Sends the Kiln runtime's log messages to this log (at most `max_level`).
void forward_runtime_log();

using LogFields = std::initializer_list<std::pair<std::string_view, nlohmann::json>>;
void log(LogLevel level, std::string_view message, LogFields fields = {});
inline void log_info(std::string_view message, LogFields fields = {}) { log(LogLevel::kInfo, message, fields); }
inline void log_warning(std::string_view message, LogFields fields = {}) { log(LogLevel::kWarning, message, fields); }
inline void log_error(std::string_view message, LogFields fields = {}) { log(LogLevel::kError, message, fields); }
inline void log_verbose(std::string_view message, LogFields fields = {}) { log(LogLevel::kVerbose, message, fields); }

}  // namespace kiln::serve
