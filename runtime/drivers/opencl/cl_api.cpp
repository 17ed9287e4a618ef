#include "runtime/drivers/opencl/cl_api.h"

#include <dlfcn.h>

#include <mutex>

namespace kiln::runtime::opencl {
namespace {

struct LoadedApi {
  ClApi api;
  Status status;
};

LoadedApi load_api() {
  LoadedApi loaded;
  // RTLD_LOCAL: the ICD loader's symbols stay out of the global namespace of the process.
  void* library = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    loaded.status = Status(ErrorCode::kUnavailable,
                           std::string("libOpenCL.so.1 not found (") + (why ? why : "dlopen failed") +
                               ")");
    return loaded;
  }
#define KILN_CL_LOAD(name)                                                                    \
  loaded.api.name = reinterpret_cast<decltype(loaded.api.name)>(dlsym(library, #name));      \
  if (!loaded.api.name) {                                                                     \
    loaded.status = Status(ErrorCode::kUnavailable, "libOpenCL.so.1 lacks the entry point " #name); \
    return loaded;                                                                            \
  }
  KILN_CL_FUNCTIONS(KILN_CL_LOAD)
#undef KILN_CL_LOAD
  return loaded;
}

}  // namespace

Result<const ClApi*> cl_api() {
  // A function-local static is initialized once, thread-safely; the library stays loaded.
  static const LoadedApi loaded = load_api();
  if (!loaded.status.is_ok()) return loaded.status;
  return &loaded.api;
}

std::string cl_error_name(cl_int code) {
  const char* name = nullptr;
  switch (code) {
#define KILN_CL_ERROR(e) \
  case e:                \
    name = #e;           \
    break;
    KILN_CL_ERROR(CL_SUCCESS)
    KILN_CL_ERROR(CL_DEVICE_NOT_FOUND)
    KILN_CL_ERROR(CL_DEVICE_NOT_AVAILABLE)
    KILN_CL_ERROR(CL_COMPILER_NOT_AVAILABLE)
    KILN_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    KILN_CL_ERROR(CL_OUT_OF_RESOURCES)
    KILN_CL_ERROR(CL_OUT_OF_HOST_MEMORY)
    KILN_CL_ERROR(CL_PROFILING_INFO_NOT_AVAILABLE)
    KILN_CL_ERROR(CL_MEM_COPY_OVERLAP)
    KILN_CL_ERROR(CL_IMAGE_FORMAT_MISMATCH)
    KILN_CL_ERROR(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    KILN_CL_ERROR(CL_BUILD_PROGRAM_FAILURE)
    KILN_CL_ERROR(CL_MAP_FAILURE)
    KILN_CL_ERROR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    KILN_CL_ERROR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    KILN_CL_ERROR(CL_COMPILE_PROGRAM_FAILURE)
    KILN_CL_ERROR(CL_LINKER_NOT_AVAILABLE)
    KILN_CL_ERROR(CL_LINK_PROGRAM_FAILURE)
    KILN_CL_ERROR(CL_DEVICE_PARTITION_FAILED)
    KILN_CL_ERROR(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    KILN_CL_ERROR(CL_INVALID_VALUE)
    KILN_CL_ERROR(CL_INVALID_DEVICE_TYPE)
    KILN_CL_ERROR(CL_INVALID_PLATFORM)
    KILN_CL_ERROR(CL_INVALID_DEVICE)
    KILN_CL_ERROR(CL_INVALID_CONTEXT)
    KILN_CL_ERROR(CL_INVALID_QUEUE_PROPERTIES)
    KILN_CL_ERROR(CL_INVALID_COMMAND_QUEUE)
    KILN_CL_ERROR(CL_INVALID_HOST_PTR)
    KILN_CL_ERROR(CL_INVALID_MEM_OBJECT)
    KILN_CL_ERROR(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    KILN_CL_ERROR(CL_INVALID_IMAGE_SIZE)
    KILN_CL_ERROR(CL_INVALID_SAMPLER)
    KILN_CL_ERROR(CL_INVALID_BINARY)
    KILN_CL_ERROR(CL_INVALID_BUILD_OPTIONS)
    KILN_CL_ERROR(CL_INVALID_PROGRAM)
    KILN_CL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
    KILN_CL_ERROR(CL_INVALID_KERNEL_NAME)
    KILN_CL_ERROR(CL_INVALID_KERNEL_DEFINITION)
    KILN_CL_ERROR(CL_INVALID_KERNEL)
    KILN_CL_ERROR(CL_INVALID_ARG_INDEX)
    KILN_CL_ERROR(CL_INVALID_ARG_VALUE)
    KILN_CL_ERROR(CL_INVALID_ARG_SIZE)
    KILN_CL_ERROR(CL_INVALID_KERNEL_ARGS)
    KILN_CL_ERROR(CL_INVALID_WORK_DIMENSION)
    KILN_CL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
    KILN_CL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
    KILN_CL_ERROR(CL_INVALID_GLOBAL_OFFSET)
    KILN_CL_ERROR(CL_INVALID_EVENT_WAIT_LIST)
    KILN_CL_ERROR(CL_INVALID_EVENT)
    KILN_CL_ERROR(CL_INVALID_OPERATION)
    KILN_CL_ERROR(CL_INVALID_GL_OBJECT)
    KILN_CL_ERROR(CL_INVALID_BUFFER_SIZE)
    KILN_CL_ERROR(CL_INVALID_MIP_LEVEL)
    KILN_CL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
    KILN_CL_ERROR(CL_INVALID_PROPERTY)
    KILN_CL_ERROR(CL_INVALID_IMAGE_DESCRIPTOR)
    KILN_CL_ERROR(CL_INVALID_COMPILER_OPTIONS)
    KILN_CL_ERROR(CL_INVALID_LINKER_OPTIONS)
    KILN_CL_ERROR(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef KILN_CL_ERROR
    default:
      break;
  }
  return std::string(name ? name : "CL error") + " (" + std::to_string(code) + ")";
}

Status cl_status(cl_int code, const std::string& what) {
  const bool out_of_memory = code == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
                             code == CL_OUT_OF_RESOURCES || code == CL_OUT_OF_HOST_MEMORY;
  return Status(out_of_memory ? ErrorCode::kOutOfMemory : ErrorCode::kInternal,
                what + ": " + cl_error_name(code));
}

}  // namespace kiln::runtime::opencl
