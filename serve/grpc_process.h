// Process-wide settings for a program that serves or calls gRPC (kiln-serve, kiln-serve-load).
#pragma once

#include <absl/synchronization/mutex.h>

namespace kiln::serve {

// gRPC locks with absl::Mutex, and Debian builds Abseil without NDEBUG, which leaves its
// deadlock detection on: every lock and unlock of every gRPC mutex then also updates a graph of
// lock orders under one process-wide lock, which all of gRPC's threads contend for. A release
// program does not want that check (Abseil's own release default is off). Call at the start of
// main, before any thread.
inline void configure_grpc_process() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

}  // namespace kiln::serve
