#include "serve/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

#include "kiln/runtime.h"

namespace kiln::serve {

namespace {

std::mutex g_mutex;  // one line at a time
LogFormat g_format = LogFormat::kJson;
LogLevel g_max_level = LogLevel::kInfo;

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kInfo: return "info";
    case LogLevel::kVerbose: return "verbose";
  }
  return "info";
}

// RFC 3339 UTC time with milliseconds: "2026-11-27T20:51:03.123Z".
std::string timestamp() {
  auto now = std::chrono::system_clock::now();
  std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[80];
  std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(millis));
  return buffer;
}

void runtime_log(void*, kiln_log_level level, const char* message) {
  LogLevel mapped = level == KILN_LOG_ERROR     ? LogLevel::kError
                    : level == KILN_LOG_WARNING ? LogLevel::kWarning
                    : level == KILN_LOG_INFO    ? LogLevel::kInfo
                                                : LogLevel::kVerbose;
  log(mapped, message, {{"source", "runtime"}});
}

}  // namespace

void configure_logging(LogFormat format, LogLevel max_level) {
  std::lock_guard lock(g_mutex);
  g_format = format;
  g_max_level = max_level;
}

void forward_runtime_log() {
  LogLevel max_level;
  {
    std::lock_guard lock(g_mutex);
    max_level = g_max_level;
  }
  kiln_set_log_callback(runtime_log, nullptr, static_cast<kiln_log_level>(static_cast<int>(max_level)));
}

void log(LogLevel level, std::string_view message, LogFields fields) {
  LogFormat format;
  {
    std::lock_guard lock(g_mutex);
    if (level > g_max_level) return;
    format = g_format;
  }
  std::string line;
  if (format == LogFormat::kJson) {
    nlohmann::ordered_json object;
    object["ts"] = timestamp();
    object["level"] = level_name(level);
    object["msg"] = message;
    for (const auto& [key, value] : fields) object[std::string(key)] = value;
    // Invalid UTF-8 in a message (a client's model name, say) is replaced, never thrown on.
    line = object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = timestamp() + " " + level_name(level) + ": " + std::string(message);
    for (const auto& [key, value] : fields)
      line += " " + std::string(key) + "=" +
              (value.is_string() ? value.get<std::string>()
                                 : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  line += '\n';
  std::lock_guard lock(g_mutex);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace kiln::serve
