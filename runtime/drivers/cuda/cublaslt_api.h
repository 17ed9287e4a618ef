// The cuBLASLt entry points the CUDA driver uses to run matrix products (artifact::GemmCall),
// loaded at run time with dlopen: libcublasLt.so.13, else libcublasLt.so.12. Without either the
// driver runs the generated GEMM kernels instead; nothing fails.
//
// Handles and enum values are declared here, not included: the values are those of CUDA 13.0's
// cublasLt.h, cublas_api.h and library_types.h (/usr/local/cuda/include/), which are the same
// in CUDA 12. Each constant names the header enum it comes from.
//
// Ownership and thread-safety: loaded once per process on first use and never unloaded;
// immutable afterwards. cuBLASLt handles are used by one stream (one thread) at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/drivers/cuda/cuda_api.h"
#include "support/status.h"

namespace kiln::runtime::cuda {

using cublasStatus_t = int;
using cublasLtHandle_t = struct cublasLtContext*;
// cublasLt.h: cublasLtMatmulDesc_t / cublasLtMatrixLayout_t / cublasLtMatmulPreference_t are
// pointers to semi-opaque structs; only the library dereferences them.
using cublasLtMatmulDesc_t = struct KilnCublasLtMatmulDesc*;
using cublasLtMatrixLayout_t = struct KilnCublasLtMatrixLayout*;
using cublasLtMatmulPreference_t = struct KilnCublasLtMatmulPreference*;

// cublasLt.h: typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
// cublasLt.h: cublasLtMatmulHeuristicResult_t (algo, workspaceSize, state, wavesCount,
// reserved[4]).
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
static_assert(sizeof(cublasLtMatmulHeuristicResult_t) == 96, "layout of cublasLt.h's struct");

inline constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;  // cublas_api.h cublasStatus_t
// library_types.h cudaDataType_t
inline constexpr int CUDA_R_32F = 0;
inline constexpr int CUDA_R_16F = 2;
inline constexpr int CUDA_R_16BF = 14;
// cublas_api.h cublasComputeType_t
inline constexpr int CUBLAS_COMPUTE_32F = 68;
inline constexpr int CUBLAS_COMPUTE_32F_FAST_TF32 = 77;
// cublas_api.h cublasOperation_t
inline constexpr int32_t CUBLAS_OP_N = 0;
// cublasLt.h cublasLtMatmulDescAttributes_t
inline constexpr int CUBLASLT_MATMUL_DESC_TRANSA = 3;
inline constexpr int CUBLASLT_MATMUL_DESC_TRANSB = 4;
inline constexpr int CUBLASLT_MATMUL_DESC_EPILOGUE = 7;
inline constexpr int CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8;
inline constexpr int CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10;
// cublasLt.h cublasLtEpilogue_t
inline constexpr uint32_t CUBLASLT_EPILOGUE_DEFAULT = 1;
inline constexpr uint32_t CUBLASLT_EPILOGUE_RELU = 2;
inline constexpr uint32_t CUBLASLT_EPILOGUE_BIAS = 4;
inline constexpr uint32_t CUBLASLT_EPILOGUE_RELU_BIAS = 6;   // RELU | BIAS
inline constexpr uint32_t CUBLASLT_EPILOGUE_GELU = 32;
inline constexpr uint32_t CUBLASLT_EPILOGUE_GELU_BIAS = 36;  // GELU | BIAS
// cublasLt.h cublasLtMatrixLayoutAttribute_t
inline constexpr int CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5;           // int32_t
inline constexpr int CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6;  // int64_t, elements
// cublasLt.h cublasLtMatmulPreferenceAttributes_t
inline constexpr int CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1;   // uint64_t
inline constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5;  // uint32_t (B, C, D: 6, 7, 8)
inline constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6;
inline constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7;
inline constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8;

struct CublasLtApi {
  std::string library;  // the file that was loaded, for messages
  size_t version = 0;   // cublasLtGetVersion()
  cublasStatus_t (*cublasLtCreate)(cublasLtHandle_t* handle) = nullptr;
  cublasStatus_t (*cublasLtDestroy)(cublasLtHandle_t handle) = nullptr;
  size_t (*cublasLtGetVersion)() = nullptr;
  cublasStatus_t (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t* desc, int compute_type, int scale_type) = nullptr;
  cublasStatus_t (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t desc) = nullptr;
  cublasStatus_t (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t desc, int attribute, const void* value,
                                                   size_t size) = nullptr;
  cublasStatus_t (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t* layout, int type, uint64_t rows,
                                               uint64_t cols, int64_t ld) = nullptr;
  cublasStatus_t (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t layout) = nullptr;
  cublasStatus_t (*cublasLtMatrixLayoutSetAttribute)(cublasLtMatrixLayout_t layout, int attribute,
                                                     const void* value, size_t size) = nullptr;
  cublasStatus_t (*cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference_t* pref) = nullptr;
  cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t pref) = nullptr;
  cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t pref, int attribute,
                                                         const void* value, size_t size) = nullptr;
  cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                                   cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                   cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                                   cublasLtMatmulPreference_t pref, int requested,
                                                   cublasLtMatmulHeuristicResult_t* results,
                                                   int* returned) = nullptr;
  cublasStatus_t (*cublasLtMatmul)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                                   const void* a, cublasLtMatrixLayout_t a_layout, const void* b,
                                   cublasLtMatrixLayout_t b_layout, const void* beta, const void* c,
                                   cublasLtMatrixLayout_t c_layout, void* d, cublasLtMatrixLayout_t d_layout,
                                   const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                                   CUstream stream) = nullptr;
};

// The process-wide table, or kUnavailable saying why (no library, a missing entry point).
// Safe to call concurrently. KILN_CUBLASLT=0 in the environment disables the library (the
// generated kernels run instead), for comparisons and for testing the fallback.
Result<const CublasLtApi*> cublaslt_api();

// "CUBLAS_STATUS_NOT_SUPPORTED (15)".
std::string cublas_status_name(cublasStatus_t status);

}  // namespace kiln::runtime::cuda
