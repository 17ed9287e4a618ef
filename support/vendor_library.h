// Opening the vendor libraries Kiln may use (cuBLASLt, cuDNN, oneDNN) with dlopen, so that
// the binaries run where they are absent: the first of several sonames, and entry points by name.
//
// Thread-safety: pure functions over the dynamic loader, which is thread-safe.
#pragma once

#include <initializer_list>
#include <string>

#include "support/status.h"

namespace kiln {

struct VendorLibrary {
  void* handle = nullptr;  // never closed: the library stays loaded for the process
  std::string name;        // the soname that opened, for messages
};

// The first of `sonames` that dlopen opens, or kUnavailable listing why each failed. Fails the
// same way, without trying, when the environment variable `switch_variable` is "0" (a way to
// compare with and test the generated kernels), naming `what` and the variable.
Result<VendorLibrary> open_vendor_library(std::initializer_list<const char*> sonames, const char* what,
                                          const char* switch_variable);

// Looks `name` up in `library` into `entry` (a function pointer); kUnavailable when missing.
Status load_entry_point(const VendorLibrary& library, const char* name, void** entry);

template <class Function>
Status load_entry_point(const VendorLibrary& library, const char* name, Function*& entry) {
  void* address = nullptr;
  KILN_RETURN_IF_ERROR(load_entry_point(library, name, &address));
  entry = reinterpret_cast<Function*>(address);
  return Status::ok();
}

// Opens the first of `sonames` (as open_vendor_library) into `api.library` and fills `api`'s entry
// points: `load_all(load)` calls load(name, api.member) for each, and the first one missing is
// the returned error.
template <class Api, class LoadAll>
Status load_vendor_api(std::initializer_list<const char*> sonames, const char* what, const char* switch_variable,
                       Api& api, LoadAll load_all) {
  KILN_ASSIGN_OR_RETURN(VendorLibrary library, open_vendor_library(sonames, what, switch_variable));
  api.library = library.name;
  Status status = Status::ok();
  load_all([&](const char* name, auto& entry) {
    if (status.is_ok()) status = load_entry_point(library, name, entry);
  });
  return status;
}

}  // namespace kiln
