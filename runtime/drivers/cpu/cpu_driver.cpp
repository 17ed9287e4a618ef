// The cpu driver's catalog (one device, when the host is x86-64 Linux) and CpuDevice.
#include "runtime/drivers/cpu/cpu_driver.h"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "runtime/drivers/cpu/cpu_internal.h"
#include "runtime/hal/driver_catalog.h"
#include "runtime/hal/host_buffer.h"

namespace kiln::runtime::cpu {
namespace {

// The kernels are x86-64 ELF shared objects, loaded through Linux's memfd_create and /proc.
#if defined(__x86_64__) && defined(__linux__)
constexpr bool kHostRunsCpuKernels = true;
#else
constexpr bool kHostRunsCpuKernels = false;
#endif

// The most threads cpu.threads may ask for (a typo such as 10000 should be an error, not
// thousands of threads).
constexpr unsigned kMaxThreads = 1024;

unsigned hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? n : 1;  // 0: the standard library could not tell
}

// The value of /proc/cpuinfo's first `key` line (the first processor's), or "" when there is
// none (or no /proc).
std::string cpuinfo_field(std::string_view key) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(name.find_last_not_of(" \t") + 1);
    if (name != key) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t") + 1);
    return value;
  }
  return "";
}

// The CPU's feature flags ("avx2", "fma", ...), as the kernel lists them.
std::set<std::string> cpu_features() {
  std::set<std::string> features;
  // x86 names them "flags", AArch64 "Features".
  std::string listed = cpuinfo_field("flags");
  if (listed.empty()) listed = cpuinfo_field("Features");
  std::istringstream flags(listed);
  for (std::string flag; flags >> flag;) features.insert(flag);
  return features;
}

std::string cpu_model_name() {
  std::string name = cpuinfo_field("model name");
  return name.empty() ? "CPU" : name;
}

// Physical memory in bytes, or 0 when the system does not say.
uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
}

// "<model> (N hardware threads, M GiB)".
std::string device_description() {
  std::string description = cpu_model_name() + " (" + std::to_string(hardware_threads()) + " hardware threads";
  if (const uint64_t bytes = physical_memory_bytes(); bytes > 0)
    description += ", " + std::to_string((bytes + (uint64_t(1) << 29)) >> 30) + " GiB";
  return description + ")";
}

// cpu.threads: a whole number in [0, kMaxThreads]; 0 or unset: one per hardware thread.
Result<unsigned> threads_option(const hal::DeviceOptions& options) {
  constexpr std::string_view kKey = "cpu.threads";
  const std::optional<std::string_view> value = options.get(kKey);
  if (!value) return hardware_threads();
  unsigned threads = 0;
  const char* end = value->data() + value->size();
  const auto [at, error] = std::from_chars(value->data(), end, threads);
  if (value->empty() || error != std::errc() || at != end || threads > kMaxThreads)
    return invalid_argument("device option '" + std::string(kKey) + "' is a number of threads from 0 (one per " +
                            "hardware thread) to " + std::to_string(kMaxThreads) + ", not '" + std::string(*value) +
                            "'");
  return threads == 0 ? hardware_threads() : threads;
}

struct CpuRecord {
  hal::DeviceInfo info;
  std::set<std::string> features;  // /proc/cpuinfo flags
};

class CpuDriver final : public hal::CatalogDriver<CpuRecord> {
 public:
  CpuDriver() : CatalogDriver(std::string(artifact::kCpuTarget), "cpu", {"threads"}) {}

 protected:
  const hal::DeviceCatalog<CpuRecord>& catalog() const override {
    static const hal::DeviceCatalog<CpuRecord> instance = enumerate();
    return instance;
  }
  Result<std::unique_ptr<hal::Device>> open(const CpuRecord& record, const hal::DeviceOptions& options) const override {
    KILN_ASSIGN_OR_RETURN(unsigned threads, threads_option(options));
    return std::unique_ptr<hal::Device>(new CpuDevice(record.info, record.features, threads));
  }

 private:
  static hal::DeviceCatalog<CpuRecord> enumerate() {
    if (!kHostRunsCpuKernels)
      return {{}, "the cpu driver runs x86-64 Linux kernels, and this host is not x86-64 Linux"};
    CpuRecord record;
    record.info.id = "cpu:0";
    record.info.driver = std::string(artifact::kCpuTarget);
    record.info.type = hal::DeviceType::kCpu;
    record.info.description = device_description();
    record.info.priority = 150;  // below every GPU, above PoCL, lavapipe and the reference (types.h)
    record.features = cpu_features();
    return {{std::move(record)}, ""};
  }
};

}  // namespace

Result<std::unique_ptr<hal::Buffer>> CpuDevice::allocate(size_t bytes) {
  return hal::HostBuffer::allocate("cpu device", bytes);
}

Result<std::unique_ptr<hal::Buffer>> CpuDevice::wrap_native(void* native, size_t bytes,
                                                            std::function<void()> on_release) {
  if (!native) return invalid_argument("cpu device: the application's memory pointer is NULL");
  return hal::HostBuffer::borrow(static_cast<std::byte*>(native), bytes, std::move(on_release));
}

Result<std::unique_ptr<hal::Executable>> CpuDevice::load_executable(
    std::shared_ptr<const artifact::LoadedArtifact> artifact) {
  if (!artifact) return invalid_argument("cpu device: no artifact to load");
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutable> executable, CpuExecutable::create(*this, std::move(artifact)));
  return std::unique_ptr<hal::Executable>(std::move(executable));
}

Result<std::unique_ptr<hal::Stream>> CpuDevice::create_stream() { return create_cpu_stream(*this); }

std::unique_ptr<hal::Driver> create_cpu_driver() { return std::make_unique<CpuDriver>(); }

}  // namespace kiln::runtime::cpu
