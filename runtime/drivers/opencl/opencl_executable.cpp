// OpenClExecutable: builds the artifact's OpenCL C kernels for one device (through the
// per-device program-binary cache) and uploads its constants once.
#include <atomic>
#include <numeric>
#include <set>

#include "runtime/drivers/opencl/opencl_internal.h"

namespace kiln::runtime::opencl {
namespace {

constexpr std::string_view kTarget = artifact::kOpenClTarget;
constexpr const char* kFormat = "opencl-c";
// Part of the cache key: a binary is only valid for the options it was built with.
constexpr const char* kBuildOptions = "-cl-std=CL1.2";

std::atomic<uint64_t> next_executable_id{1};

std::string build_log(const ClApi& api, cl_program program, cl_device_id device) {
  size_t size = 0;
  if (api.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) != CL_SUCCESS)
    return "(no build log)";
  std::string log(size, '\0');
  if (size > 0 &&
      api.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr) != CL_SUCCESS)
    return "(no build log)";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log.empty() ? "(empty build log)" : log;
}

// The single device's binary of a built program (empty when the implementation gives none).
std::vector<unsigned char> program_binary(const ClApi& api, cl_program program) {
  size_t size = 0;
  if (api.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) != CL_SUCCESS ||
      size == 0)
    return {};
  std::vector<unsigned char> binary(size);
  unsigned char* data = binary.data();
  if (api.clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(data), &data, nullptr) != CL_SUCCESS) return {};
  return binary;
}

// A program built from a cached binary, or nullptr when the binary is rejected (then the caller
// compiles the source again).
cl_program program_from_binary(const ClApi& api, cl_context context, cl_device_id device,
                               const std::vector<unsigned char>& binary) {
  const size_t size = binary.size();
  const unsigned char* data = binary.data();
  cl_int binary_status = CL_SUCCESS;
  cl_int err = CL_SUCCESS;
  cl_program program = api.clCreateProgramWithBinary(context, 1, &device, &size, &data, &binary_status, &err);
  if (err != CL_SUCCESS || binary_status != CL_SUCCESS || !program) {
    if (program) api.clReleaseProgram(program);
    return nullptr;
  }
  if (api.clBuildProgram(program, 1, &device, kBuildOptions, nullptr, nullptr) != CL_SUCCESS) {
    api.clReleaseProgram(program);
    return nullptr;
  }
  return program;
}

}  // namespace

OpenClExecutable::OpenClExecutable(const OpenClDevice& device,
                                   std::shared_ptr<const artifact::LoadedArtifact> artifact)
    : device_(device), artifact_(std::move(artifact)), id_(next_executable_id++) {}

OpenClExecutable::~OpenClExecutable() {
  const ClApi& api = device_.api();
  for (auto& [value, mem] : constants_) api.clReleaseMemObject(mem);
  for (cl_program program : programs_) api.clReleaseProgram(program);
}

Result<std::unique_ptr<OpenClExecutable>> OpenClExecutable::create(
    const OpenClDevice& device, std::shared_ptr<const artifact::LoadedArtifact> artifact) {
  std::unique_ptr<OpenClExecutable> executable(new OpenClExecutable(device, std::move(artifact)));
  const artifact::LoadedArtifact& art = *executable->artifact_;
  const DeviceRecord& record = device.record();
  const std::string device_name = "OpenCL device " + record.info.id + " (" + record.info.description + ")";

  for (const artifact::KernelBinary& binary : art.kernels) {
    if (binary.target != kTarget) continue;
    if (binary.format != kFormat)
      return unsupported("kernel '" + binary.kernel_name + "' has OpenCL format '" + binary.format +
                         "'; this runtime loads only '" + kFormat + "'");
    if (binary.kernel_index >= art.graph.kernels().size())
      return corrupt("OpenCL kernel '" + binary.kernel_name + "' refers to graph kernel " +
                     std::to_string(binary.kernel_index) + " of " + std::to_string(art.graph.kernels().size()));
    for (const std::string& feature : binary.required_features)
      if (!record.has_feature(feature))
        return unsupported("kernel '" + binary.kernel_name + "' needs the device feature '" + feature + "', which " +
                           device_name + " does not support");
    executable->kernels_[binary.kernel_index].binary = &binary;
  }
  if (executable->kernels_.empty()) {
    std::string targets;
    for (const std::string& t : art.targets()) targets += (targets.empty() ? "" : ", ") + t;
    return unsupported("the artifact has no kernels for target 'opencl' (it has kernels for: " +
                       (targets.empty() ? std::string("none") : targets) +
                       "); compile it with kilnc --target=opencl");
  }
  for (const ir::Launch& launch : art.plan.launches)
    if (!executable->kernels_.count(launch.kernel))
      return unsupported("the artifact's OpenCL kernels do not include graph kernel " +
                         std::to_string(launch.kernel) + " that its plan launches");

  // Arena slices become sub-buffers, whose origin must be a multiple of the device's base
  // address alignment. When every planned offset is (the plan aligns all offsets to
  // plan.alignment), the session's arena is used as planned; otherwise streams re-lay it out.
  const uint64_t align = record.base_align_bytes;
  executable->uses_session_arena_ = art.plan.alignment > 0 && uint64_t(art.plan.alignment) % align == 0;

  KILN_RETURN_IF_ERROR(executable->build_programs());
  KILN_RETURN_IF_ERROR(executable->upload_constants());
  return executable;
}

Status OpenClExecutable::build_programs() {
  const ClApi& api = device_.api();
  const DeviceRecord& record = device_.record();
  cl_device_id cl_device = record.device;
  std::map<std::string, cl_program> by_source;
  for (auto& [index, kernel] : kernels_) {
    const artifact::KernelBinary& binary = *kernel.binary;
    std::string source(binary.blob.begin(), binary.blob.end());
    auto found = by_source.find(source);
    if (found != by_source.end()) {
      kernel.program = found->second;
      continue;
    }
    const std::string key = std::string(kBuildOptions) + '\n' + source;
    cl_program program = nullptr;
    if (auto cached = record.program_cache->find(key)) {
      program = program_from_binary(api, device_.context(), cl_device, *cached);
      if (program) ++record.program_cache->binary_loads;
    }
    if (!program) {
      const char* text = source.c_str();
      const size_t length = source.size();
      cl_int err = CL_SUCCESS;
      program = api.clCreateProgramWithSource(device_.context(), 1, &text, &length, &err);
      if (err != CL_SUCCESS || !program)
        return cl_status(err, "kernel '" + binary.kernel_name + "': clCreateProgramWithSource");
      err = api.clBuildProgram(program, 1, &cl_device, kBuildOptions, nullptr, nullptr);
      if (err != CL_SUCCESS) {
        const std::string log = build_log(api, program, cl_device);
        api.clReleaseProgram(program);
        return internal_error("OpenCL build of kernel '" + binary.kernel_name + "' failed on " +
                              record.info.id + " (" + record.info.description + "): " +
                              cl_error_name(err) + "\nbuild log:\n" + log);
      }
      ++record.program_cache->source_builds;
      std::vector<unsigned char> built = program_binary(api, program);
      if (!built.empty()) record.program_cache->insert(key, std::move(built));
    }
    programs_.push_back(program);
    by_source.emplace(std::move(source), program);
    kernel.program = program;
  }
  // Check every entry point and its workgroup size now, so a bad kernel fails the load rather
  // than the first run. Streams create their own cl_kernel objects later.
  for (auto& [index, kernel] : kernels_) {
    const artifact::KernelBinary& binary = *kernel.binary;
    cl_int err = CL_SUCCESS;
    cl_kernel probe = api.clCreateKernel(kernel.program, binary.entry_point.c_str(), &err);
    if (err != CL_SUCCESS || !probe)
      return cl_status(err, "kernel '" + binary.kernel_name + "': clCreateKernel('" + binary.entry_point + "')");
    size_t max_local = 0;
    err = api.clGetKernelWorkGroupInfo(probe, cl_device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(max_local),
                                       &max_local, nullptr);
    api.clReleaseKernel(probe);
    if (err != CL_SUCCESS) max_local = record.max_work_group_size;
    if (binary.dispatch.workgroup_size == 0 || binary.dispatch.workgroup_size > max_local)
      return unsupported("kernel '" + binary.kernel_name + "' needs workgroups of " +
                         std::to_string(binary.dispatch.workgroup_size) + " work-items, but OpenCL device " +
                         record.info.id + " allows at most " + std::to_string(max_local) + " for it");
  }
  return Status::ok();
}

Status OpenClExecutable::upload_constants() {
  const ir::Graph& graph = artifact_->graph;
  for (const ir::BufferAssignment& buffer : artifact_->plan.buffers) {
    if (buffer.storage != ir::Storage::kConstant) continue;
    const ir::Tensor& data = graph.constant_of(buffer.value);
    KILN_ASSIGN_OR_RETURN(cl_mem mem, device_.create_mem(data.size_bytes(), CL_MEM_READ_ONLY,
                                                         data.size_bytes() ? data.data() : nullptr));
    constants_[buffer.value] = mem;
  }
  return Status::ok();
}

const OpenClExecutable::KernelProgram* OpenClExecutable::kernel(uint32_t kernel_index) const {
  auto it = kernels_.find(kernel_index);
  return it == kernels_.end() ? nullptr : &it->second;
}

cl_mem OpenClExecutable::constant(ir::NodeId value) const {
  auto it = constants_.find(value);
  return it == constants_.end() ? nullptr : it->second;
}

}  // namespace kiln::runtime::opencl
