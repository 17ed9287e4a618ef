// The runtime's log: messages worth telling an application that are not errors of a call (those
// are statuses): which device a default choice picked, a session opened, a fast path that fell
// back (cuBLASLt missing, a CUDA graph capture that failed).
//
// An application installs a sink with kiln_set_log_callback (set_log_sink here). Without one,
// messages up to the level in the environment variable KILN_LOG_LEVEL (error, warning, info,
// debug or off; default warning) go to stderr as "kiln: <level>: <message>".
// Thread-safety: log() and set_log_sink() may be called from any threads at once; the sink is
// called under a lock, so it never runs twice at the same time.
#pragma once

#include <string_view>

namespace kiln::runtime {

enum class LogLevel : int { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

using LogSink = void (*)(void* user_data, int level, const char* message);

// Replaces the sink; a null sink restores the default (stderr, KILN_LOG_LEVEL).
void set_log_sink(LogSink sink, void* user_data, LogLevel max_level);
// Whether a message of `level` goes anywhere (to skip building messages nobody reads).
bool log_enabled(LogLevel level);
void log(LogLevel level, std::string_view message);

}  // namespace kiln::runtime
