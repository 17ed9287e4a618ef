#include "vendor/onednn/onednn_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "support/environment.h"
#include "support/vendor_library.h"

namespace kiln::onednn {

Result<const OneDnnApi*> load_onednn() {
  static std::once_flag once;
  static OneDnnApi api;
  static Status status = Status::ok();
  std::call_once(once, [] {
    // Before OpenMP starts (see the header): a short spin unless the user chose a policy. Once
    // libgomp is loaded it has read its settings, and changing the environment would do nothing.
    // Not with setenv, which may free the environment other threads are reading.
    void* started_gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (started_gomp) dlclose(started_gomp);
    else if (!std::getenv("OMP_WAIT_POLICY")) add_to_environment("GOMP_SPINCOUNT=10000");
    status = load_vendor_api({"libdnnl.so.2"}, "oneDNN", "KILN_ONEDNN", api, [](auto load) {
#define KILN_DNNL_LOAD(name) load(#name, api.name);
      KILN_DNNL_FUNCTIONS(KILN_DNNL_LOAD)
#undef KILN_DNNL_LOAD
    });
    if (status.is_ok() && api.dnnl_engine_create(&api.engine, dnnl_cpu, 0) != dnnl_success)
      status = Status(ErrorCode::kUnavailable, "oneDNN: cannot create its CPU engine");
    // Debian's oneDNN runs on libgomp, loaded with it (the handle stays open with the library).
    if (void* gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD))
      api.omp_set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(gomp, "omp_set_num_threads"));
  });
  if (!status.is_ok()) return status;
  return &api;
}

void set_onednn_threads(const OneDnnApi& api, int threads) {
  if (api.omp_set_num_threads && threads > 0) api.omp_set_num_threads(threads);
}

Status dnnl_check(dnnl_status_t s, const char* what) {
  if (s == dnnl_success) return Status::ok();
  return internal_error(std::string("oneDNN: ") + what + " failed (dnnl_status_t " + std::to_string(int(s)) + ")");
}

}  // namespace kiln::onednn
