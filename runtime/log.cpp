#include "runtime/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace kiln::runtime {
namespace {

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
  }
  return "log";
}

// The default sink's level: KILN_LOG_LEVEL, read once; -1 is "off".
int default_max_level() {
  static const int level = [] {
    const char* env = std::getenv("KILN_LOG_LEVEL");
    if (!env) return int(LogLevel::kWarning);
    for (int l = 0; l <= int(LogLevel::kDebug); ++l)
      if (std::strcmp(env, level_name(LogLevel(l))) == 0) return l;
    return std::strcmp(env, "off") == 0 ? -1 : int(LogLevel::kWarning);
  }();
  return level;
}

struct SinkState {
  std::mutex mutex;
  LogSink sink = nullptr;
  void* user_data = nullptr;
  std::atomic<int> max_level{-2};  // -2: the default sink, whose level is read lazily
};

SinkState& state() {
  static SinkState* s = new SinkState();  // never destroyed: logging may happen during exit
  return *s;
}

int max_level() {
  const int level = state().max_level.load(std::memory_order_relaxed);
  return level == -2 ? default_max_level() : level;
}

}  // namespace

void set_log_sink(LogSink sink, void* user_data, LogLevel level) {
  SinkState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.sink = sink;
  s.user_data = user_data;
  s.max_level.store(sink ? int(level) : -2, std::memory_order_relaxed);
}

bool log_enabled(LogLevel level) { return int(level) <= max_level(); }

void log(LogLevel level, std::string_view message) {
  if (!log_enabled(level)) return;
  SinkState& s = state();
  const std::string text(message);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.sink) s.sink(s.user_data, int(level), text.c_str());
  else std::fprintf(stderr, "kiln: %s: %s\n", level_name(level), text.c_str());
}

}  // namespace kiln::runtime
