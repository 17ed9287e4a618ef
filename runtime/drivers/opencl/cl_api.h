// The OpenCL entry points the OpenCL driver uses, loaded from libOpenCL.so.1 (the ICD loader)
// with dlopen/dlsym at run time, so the Kiln runtime has no link-time dependency on OpenCL and
// loads on machines without it (the driver then reports itself unavailable).
//
// Only the headers are used at build time (package opencl-headers, OpenCL 1.2 API level): each
// table member has the type of the header's declaration (decltype of the prototype, which does
// not reference the symbol).
//
// Ownership and thread-safety: the library is loaded once per process, on first use, and never
// unloaded (ICD loaders and vendor drivers do not support being unloaded while their threads
// run). The table is immutable after loading; OpenCL itself makes every entry point used here
// thread-safe except clSetKernelArg on one cl_kernel, which the driver confines to one stream.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <string>

#include "support/status.h"

namespace kiln::runtime::opencl {

struct ClApi {
#define KILN_CL_FUNCTIONS(X)                                                                     \
  X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo)                  \
  X(clCreateContext) X(clReleaseContext) X(clCreateCommandQueue) X(clReleaseCommandQueue)        \
  X(clCreateBuffer) X(clCreateSubBuffer) X(clRetainMemObject) X(clReleaseMemObject)              \
  X(clEnqueueWriteBuffer) X(clEnqueueReadBuffer) X(clEnqueueCopyBuffer)                          \
  X(clCreateProgramWithSource) X(clCreateProgramWithBinary) X(clBuildProgram)                    \
  X(clGetProgramBuildInfo) X(clGetProgramInfo) X(clReleaseProgram) X(clCreateKernel)             \
  X(clReleaseKernel) X(clSetKernelArg) X(clGetKernelWorkGroupInfo) X(clEnqueueNDRangeKernel)     \
  X(clFinish) X(clFlush) X(clGetEventProfilingInfo) X(clRetainEvent) X(clReleaseEvent)
#define KILN_CL_DECLARE(name) decltype(&::name) name = nullptr;
  KILN_CL_FUNCTIONS(KILN_CL_DECLARE)
#undef KILN_CL_DECLARE
};

// The process-wide table, loading the library on the first call. kUnavailable (saying which
// library or symbol is missing) when OpenCL is not installed. Safe to call concurrently.
Result<const ClApi*> cl_api();

// "CL_OUT_OF_RESOURCES (-5)" for an OpenCL error code.
std::string cl_error_name(cl_int code);

// A Status for a failed OpenCL call: "<what>: <CL error name>", kOutOfMemory for the
// allocation errors (CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_RESOURCES,
// CL_OUT_OF_HOST_MEMORY), kInternal otherwise.
Status cl_status(cl_int code, const std::string& what);

}  // namespace kiln::runtime::opencl
