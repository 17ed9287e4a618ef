// hal::Executable: a loaded artifact prepared for one Device (kernels for the device's target
// loaded or compiled, constants uploaded).
//
// Ownership: created by Device::load_executable, owned by the caller through std::unique_ptr and
// destroyed before its Device. It shares the immutable artifact through shared_ptr<const>.
// Thread-safety: immutable after creation; any number of Streams may execute it concurrently.
#pragma once

#include "artifact/reader.h"

namespace kiln::runtime::hal {

class Executable {
 public:
  virtual ~Executable() = default;
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  virtual const artifact::LoadedArtifact& artifact() const = 0;
  // Whether executions need the plan's arena (ExecuteArgs::arena). Devices that execute the
  // graph without the memory plan (the reference interpreter) return false, and sessions skip
  // allocating it.
  virtual bool uses_arena() const = 0;

 protected:
  Executable() = default;
};

}  // namespace kiln::runtime::hal
