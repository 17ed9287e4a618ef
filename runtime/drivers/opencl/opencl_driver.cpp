// The OpenCL driver, its devices and buffers, and the program-binary cache. Executables are in
// opencl_executable.cpp, streams in opencl_stream.cpp.
#include "runtime/drivers/opencl/opencl_driver.h"

#include <functional>
#include <sstream>

#include "runtime/drivers/opencl/opencl_internal.h"
#include "runtime/hal/driver_catalog.h"

namespace kiln::runtime::opencl {

// ---- ProgramBinaryCache ----

std::shared_ptr<const std::vector<unsigned char>> ProgramBinaryCache::find(const std::string& key) const {
  const uint64_t hash = std::hash<std::string>{}(key);
  std::lock_guard<std::mutex> lock(mutex_);
  auto [begin, end] = entries_.equal_range(hash);
  for (auto it = begin; it != end; ++it)
    if (it->second.key == key) return it->second.binary;
  return nullptr;
}

void ProgramBinaryCache::insert(const std::string& key, std::vector<unsigned char> binary) {
  const uint64_t hash = std::hash<std::string>{}(key);
  std::lock_guard<std::mutex> lock(mutex_);
  auto [begin, end] = entries_.equal_range(hash);
  for (auto it = begin; it != end; ++it)
    if (it->second.key == key) return;  // another session built it meanwhile
  entries_.emplace(hash, Entry{key, std::make_shared<const std::vector<unsigned char>>(std::move(binary))});
}

bool DeviceRecord::has_feature(const std::string& feature) const {
  if (extensions.count(feature)) return true;
  if (feature == "cl_khr_int64") return full_profile;
  if (feature == "cl_khr_fp64") return has_fp64;
  return false;
}

namespace {

// ---- enumeration ----

std::string platform_string(const ClApi& api, cl_platform_id platform, cl_platform_info what) {
  size_t size = 0;
  if (api.clGetPlatformInfo(platform, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  if (api.clGetPlatformInfo(platform, what, size, s.data(), nullptr) != CL_SUCCESS) return "";
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string device_string(const ClApi& api, cl_device_id device, cl_device_info what) {
  size_t size = 0;
  if (api.clGetDeviceInfo(device, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  if (api.clGetDeviceInfo(device, what, size, s.data(), nullptr) != CL_SUCCESS) return "";
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

template <class T>
T device_value(const ClApi& api, cl_device_id device, cl_device_info what, T fallback) {
  T value{};
  if (api.clGetDeviceInfo(device, what, sizeof(T), &value, nullptr) != CL_SUCCESS) return fallback;
  return value;
}

using Catalog = hal::DeviceCatalog<DeviceRecord>;

Catalog enumerate() {
  Catalog catalog;
  Result<const ClApi*> loaded = cl_api();
  if (!loaded.is_ok()) {
    catalog.unavailable_reason = loaded.status().message();
    return catalog;
  }
  const ClApi& api = **loaded;
  cl_uint num_platforms = 0;
  cl_int err = api.clGetPlatformIDs(0, nullptr, &num_platforms);
  if (err != CL_SUCCESS || num_platforms == 0) {
    // The ICD loader reports CL_PLATFORM_NOT_FOUND_KHR (-1001) when no driver is installed.
    catalog.unavailable_reason =
        "no OpenCL platform is installed (clGetPlatformIDs: " + cl_error_name(err) + ")";
    return catalog;
  }
  std::vector<cl_platform_id> platforms(num_platforms);
  if (api.clGetPlatformIDs(num_platforms, platforms.data(), nullptr) != CL_SUCCESS) {
    catalog.unavailable_reason = "clGetPlatformIDs failed";
    return catalog;
  }
  for (cl_platform_id platform : platforms) {
    cl_uint num_devices = 0;
    if (api.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &num_devices) != CL_SUCCESS ||
        num_devices == 0)
      continue;
    std::vector<cl_device_id> ids(num_devices);
    if (api.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, num_devices, ids.data(), nullptr) != CL_SUCCESS)
      continue;
    const std::string platform_name = platform_string(api, platform, CL_PLATFORM_NAME);
    for (cl_device_id id : ids) {
      DeviceRecord record;
      record.platform = platform;
      record.device = id;
      const cl_device_type type = device_value<cl_device_type>(api, id, CL_DEVICE_TYPE, CL_DEVICE_TYPE_CPU);
      std::string description = platform_name + " / " + device_string(api, id, CL_DEVICE_NAME);
      if (type & CL_DEVICE_TYPE_GPU) {
        const bool unified = device_value<cl_bool>(api, id, CL_DEVICE_HOST_UNIFIED_MEMORY, CL_FALSE);
        record.info.type = unified ? hal::DeviceType::kIntegratedGpu : hal::DeviceType::kDiscreteGpu;
        record.info.priority = unified ? 200 : 300;
      } else if (type & CL_DEVICE_TYPE_ACCELERATOR) {
        record.info.type = hal::DeviceType::kDiscreteGpu;
        record.info.priority = 250;
        description += " (accelerator)";
      } else {
        record.info.type = hal::DeviceType::kCpu;
        record.info.priority = 100;
      }
      record.info.id = "opencl:" + std::to_string(catalog.devices.size());
      record.info.driver = "opencl";
      record.info.description = description;
      std::istringstream extensions(device_string(api, id, CL_DEVICE_EXTENSIONS));
      for (std::string ext; extensions >> ext;) record.extensions.insert(ext);
      record.full_profile = device_string(api, id, CL_DEVICE_PROFILE) != "EMBEDDED_PROFILE";
      record.has_fp64 = device_value<cl_device_fp_config>(api, id, CL_DEVICE_DOUBLE_FP_CONFIG, 0) != 0;
      record.max_alloc_bytes = device_value<cl_ulong>(api, id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, 0);
      const cl_uint align_bits = device_value<cl_uint>(api, id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, 8);
      record.base_align_bytes = align_bits >= 8 ? align_bits / 8 : 1;
      record.max_work_group_size = device_value<size_t>(api, id, CL_DEVICE_MAX_WORK_GROUP_SIZE, 1);
      catalog.devices.push_back(std::move(record));
    }
  }
  if (catalog.devices.empty()) catalog.unavailable_reason = "no OpenCL platform reports a device";
  return catalog;
}

// Enumerated once per process: OpenCL's platform and device lists are fixed for the process
// lifetime (ICDs are read at first use), and one catalog means one program cache per device.
const Catalog& process_catalog() {
  static const Catalog instance = enumerate();
  return instance;
}

class OpenClDriver final : public hal::CatalogDriver<DeviceRecord> {
 public:
  OpenClDriver() : CatalogDriver("opencl", "OpenCL") {}

 protected:
  const Catalog& catalog() const override { return process_catalog(); }
  Result<std::unique_ptr<hal::Device>> open(const DeviceRecord& record, const hal::DeviceOptions&) const override {
    KILN_ASSIGN_OR_RETURN(const ClApi* api, cl_api());
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<OpenClDevice> device, OpenClDevice::open(*api, record));
    return std::unique_ptr<hal::Device>(std::move(device));
  }
};

}  // namespace

// ---- OpenClDevice ----

Result<std::unique_ptr<OpenClDevice>> OpenClDevice::open(const ClApi& api, DeviceRecord record) {
  std::unique_ptr<OpenClDevice> device(new OpenClDevice(api, std::move(record)));
  cl_int err = CL_SUCCESS;
  const cl_context_properties properties[] = {
      CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(device->record_.platform), 0};
  device->context_ = api.clCreateContext(properties, 1, &device->record_.device, nullptr, nullptr, &err);
  if (err != CL_SUCCESS || !device->context_)
    return cl_status(err, "OpenCL device " + device->record_.info.id + ": clCreateContext");
  device->copy_queue_ = api.clCreateCommandQueue(device->context_, device->record_.device, 0, &err);
  if (err != CL_SUCCESS || !device->copy_queue_)
    return cl_status(err, "OpenCL device " + device->record_.info.id + ": clCreateCommandQueue");
  return device;
}

OpenClDevice::~OpenClDevice() {
  if (copy_queue_) api_.clReleaseCommandQueue(copy_queue_);
  if (context_) api_.clReleaseContext(context_);
}

Result<cl_mem> OpenClDevice::create_mem(size_t bytes, cl_mem_flags flags, const void* initial) const {
  const std::string what = "OpenCL device " + record_.info.id + " (" + record_.info.description +
                           "): cannot allocate " + std::to_string(bytes) + " bytes";
  if (record_.max_alloc_bytes > 0 && bytes > record_.max_alloc_bytes)
    return Status(ErrorCode::kOutOfMemory,
                  what + ": above CL_DEVICE_MAX_MEM_ALLOC_SIZE (" +
                      std::to_string(record_.max_alloc_bytes) + " bytes)");
  // OpenCL has no empty buffers; a zero-byte HAL buffer is backed by one byte nobody reads.
  cl_int err = CL_SUCCESS;
  if (initial) flags |= CL_MEM_COPY_HOST_PTR;
  cl_mem mem = api_.clCreateBuffer(context_, flags, bytes > 0 ? bytes : 1,
                                   bytes > 0 ? const_cast<void*>(initial) : nullptr, &err);
  if (bytes == 0 && initial) {
    // CL_MEM_COPY_HOST_PTR with no bytes: create it plain instead.
    if (mem) api_.clReleaseMemObject(mem);
    mem = api_.clCreateBuffer(context_, flags & ~cl_mem_flags(CL_MEM_COPY_HOST_PTR), 1, nullptr, &err);
  }
  if (err != CL_SUCCESS || !mem) {
    if (err == CL_INVALID_BUFFER_SIZE) return Status(ErrorCode::kOutOfMemory, what + ": " + cl_error_name(err));
    return cl_status(err, what);
  }
  return mem;
}

Result<std::unique_ptr<hal::Buffer>> OpenClDevice::allocate(size_t bytes) {
  KILN_ASSIGN_OR_RETURN(cl_mem mem, create_mem(bytes, CL_MEM_READ_WRITE, nullptr));
  return std::unique_ptr<hal::Buffer>(new OpenClBuffer(*this, mem, bytes));
}

Result<std::unique_ptr<hal::Executable>> OpenClDevice::load_executable(
    std::shared_ptr<const artifact::LoadedArtifact> artifact) {
  if (!artifact) return invalid_argument("OpenCL device: no artifact to load");
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<OpenClExecutable> executable,
                        OpenClExecutable::create(*this, std::move(artifact)));
  return std::unique_ptr<hal::Executable>(std::move(executable));
}

Result<std::unique_ptr<hal::Stream>> OpenClDevice::create_stream() { return create_opencl_stream(*this); }

// ---- OpenClBuffer ----

OpenClBuffer::~OpenClBuffer() {
  if (mem_) device_.api().clReleaseMemObject(mem_);
}

Status OpenClBuffer::check_range(size_t offset, size_t count) const {
  if (offset > size_ || count > size_ - offset)
    return invalid_argument("buffer access of " + std::to_string(count) + " bytes at offset " +
                            std::to_string(offset) + " is outside the " + std::to_string(size_) +
                            "-byte buffer");
  return Status::ok();
}

Status OpenClBuffer::write(size_t offset, std::span<const std::byte> data) {
  KILN_RETURN_IF_ERROR(check_range(offset, data.size()));
  if (data.empty()) return Status::ok();
  const cl_int err = device_.api().clEnqueueWriteBuffer(device_.copy_queue(), mem_, CL_TRUE, offset,
                                                        data.size(), data.data(), 0, nullptr, nullptr);
  if (err != CL_SUCCESS) return cl_status(err, "OpenCL buffer write of " + std::to_string(data.size()) + " bytes");
  return Status::ok();
}

Status OpenClBuffer::read(size_t offset, std::span<std::byte> out) const {
  KILN_RETURN_IF_ERROR(check_range(offset, out.size()));
  if (out.empty()) return Status::ok();
  const cl_int err = device_.api().clEnqueueReadBuffer(device_.copy_queue(), mem_, CL_TRUE, offset,
                                                       out.size(), out.data(), 0, nullptr, nullptr);
  if (err != CL_SUCCESS) return cl_status(err, "OpenCL buffer read of " + std::to_string(out.size()) + " bytes");
  return Status::ok();
}

// ---- public ----

std::unique_ptr<hal::Driver> create_opencl_driver() { return std::make_unique<OpenClDriver>(); }

Result<ProgramCacheStats> program_cache_stats(const hal::Device& device) {
  const auto* cl_device = dynamic_cast<const OpenClDevice*>(&device);
  if (!cl_device) return invalid_argument("device '" + device.info().id + "' is not an OpenCL device");
  const ProgramBinaryCache& cache = *cl_device->record().program_cache;
  return ProgramCacheStats{cache.source_builds.load(), cache.binary_loads.load()};
}

}  // namespace kiln::runtime::opencl
