#include "runtime/drivers/cuda/cublaslt_api.h"

#include "support/vendor_library.h"

namespace kiln::runtime::cuda {
namespace {

struct LoadedLt {
  CublasLtApi api;
  Status status;
};

LoadedLt load_lt() {
  LoadedLt loaded;
  loaded.status = load_vendor_api({"libcublasLt.so.13", "libcublasLt.so.12"}, "cuBLASLt", "KILN_CUBLASLT", loaded.api,
                                  [&](auto&& load) {
#define KILN_LT_LOAD(name) load(#name, loaded.api.name);
    KILN_LT_LOAD(cublasLtCreate)
    KILN_LT_LOAD(cublasLtDestroy)
    KILN_LT_LOAD(cublasLtGetVersion)
    KILN_LT_LOAD(cublasLtMatmulDescCreate)
    KILN_LT_LOAD(cublasLtMatmulDescDestroy)
    KILN_LT_LOAD(cublasLtMatmulDescSetAttribute)
    KILN_LT_LOAD(cublasLtMatrixLayoutCreate)
    KILN_LT_LOAD(cublasLtMatrixLayoutDestroy)
    KILN_LT_LOAD(cublasLtMatrixLayoutSetAttribute)
    KILN_LT_LOAD(cublasLtMatmulPreferenceCreate)
    KILN_LT_LOAD(cublasLtMatmulPreferenceDestroy)
    KILN_LT_LOAD(cublasLtMatmulPreferenceSetAttribute)
    KILN_LT_LOAD(cublasLtMatmulAlgoGetHeuristic)
    KILN_LT_LOAD(cublasLtMatmul)
#undef KILN_LT_LOAD
  });
  if (loaded.status.is_ok()) loaded.api.version = loaded.api.cublasLtGetVersion();
  return loaded;
}

}  // namespace

Result<const CublasLtApi*> cublaslt_api() {
  static const LoadedLt loaded = load_lt();  // once per process, thread-safe
  if (!loaded.status.is_ok()) return loaded.status;
  return &loaded.api;
}

std::string cublas_status_name(cublasStatus_t status) {
  const char* name = nullptr;
  switch (status) {  // cublas_api.h cublasStatus_t
    case 0: name = "CUBLAS_STATUS_SUCCESS"; break;
    case 1: name = "CUBLAS_STATUS_NOT_INITIALIZED"; break;
    case 3: name = "CUBLAS_STATUS_ALLOC_FAILED"; break;
    case 7: name = "CUBLAS_STATUS_INVALID_VALUE"; break;
    case 8: name = "CUBLAS_STATUS_ARCH_MISMATCH"; break;
    case 11: name = "CUBLAS_STATUS_MAPPING_ERROR"; break;
    case 13: name = "CUBLAS_STATUS_EXECUTION_FAILED"; break;
    case 14: name = "CUBLAS_STATUS_INTERNAL_ERROR"; break;
    case 15: name = "CUBLAS_STATUS_NOT_SUPPORTED"; break;
    case 16: name = "CUBLAS_STATUS_LICENSE_ERROR"; break;
    default: break;
  }
  return std::string(name ? name : "cuBLAS status") + " (" + std::to_string(status) + ")";
}

}  // namespace kiln::runtime::cuda
