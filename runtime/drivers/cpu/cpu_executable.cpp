// CpuExecutable: loads the artifact's cpu modules (ELF shared objects) from memory and finds
// every kernel's entry point in them.
//
// Trust: dlopen runs the module's initializers, and its kernels run in this process with its
// privileges, like any native code the application loads. The artifact reader checks the file's
// structure, not what its machine code does: run cpu artifacts only from trusted compilers, and
// require signatures where artifacts come from elsewhere (docs/security.md).
#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "runtime/drivers/cpu/cpu_internal.h"

namespace kiln::runtime::cpu {
namespace {

// A failed system call while loading a module: out of memory when the system says so, else
// unavailable (a process out of descriptors, a kernel without memfd_create).
Status system_error(const std::string& what, int error) {
  const ErrorCode code = error == ENOMEM || error == ENOSPC ? ErrorCode::kOutOfMemory : ErrorCode::kUnavailable;
  return Status(code, "cpu device: " + what + ": " + std::strerror(error));
}

#if defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
constexpr const char* kHostArchitecture = "aarch64";
#else
constexpr uint16_t kHostMachine = EM_X86_64;
constexpr const char* kHostArchitecture = "x86-64";
#endif

// What dlopen would trip over rather than report: the loader maps a module's segments straight
// from the file, so a truncated one faults (SIGBUS) on the first page past its end instead of
// failing. Checks that `bytes` are a 64-bit little-endian shared object for this machine's
// architecture whose program headers and loaded segments lie within it; "" when they do, else
// what is wrong.
std::string shared_object_fault(std::span<const uint8_t> bytes) {
  Elf64_Ehdr header;
  if (bytes.size() < sizeof(header)) return "shorter than an ELF header";
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) return "not an ELF file";
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB || header.e_machine != kHostMachine)
    return std::string("not a 64-bit ") + kHostArchitecture + " ELF file";
  if (header.e_type != ET_DYN) return "not a shared object (ELF type " + std::to_string(header.e_type) + ")";
  if (header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phoff > bytes.size() ||
      uint64_t(header.e_phnum) * sizeof(Elf64_Phdr) > bytes.size() - header.e_phoff)
    return "its program headers lie outside the file";
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    std::memcpy(&segment, bytes.data() + header.e_phoff + i * sizeof(Elf64_Phdr), sizeof(segment));
    if (segment.p_type != PT_LOAD && segment.p_type != PT_DYNAMIC) continue;
    if (segment.p_offset > bytes.size() || segment.p_filesz > bytes.size() - segment.p_offset)
      return "segment " + std::to_string(i) + " ends past the end of the file (truncated?)";
  }
  return "";
}

std::string dl_error() {
  const char* message = dlerror();
  return message ? message : "no reason given";
}

}  // namespace

CpuExecutable::~CpuExecutable() {
  for (LoadedModule& module : modules_) {
    if (module.handle) dlclose(module.handle);
    if (module.fd >= 0) close(module.fd);
  }
}

Result<std::unique_ptr<CpuExecutable>> CpuExecutable::create(
    const CpuDevice& device, std::shared_ptr<const artifact::LoadedArtifact> artifact) {
  std::unique_ptr<CpuExecutable> executable(new CpuExecutable(device, std::move(artifact)));
  const artifact::LoadedArtifact& art = *executable->artifact_;

  // Code for another architecture (kilnc --cpu=aarch64 run on x86-64, or the reverse) is refused
  // by its modules' format, before its kernels' CPU features (that architecture's) are compared
  // with this CPU's.
  std::set<std::string> formats;
  for (const artifact::ModuleBinary& module : art.modules)
    if (module.target == artifact::kCpuTarget) formats.insert(module.format);
  if (!formats.empty() && !formats.count(std::string(artifact::kHostCpuModuleFormat))) {
    std::string listed;
    for (const std::string& f : formats) listed += (listed.empty() ? "'" : ", '") + f + "'";
    return unsupported("the artifact's cpu code is built as " + listed + "; this runtime loads only '" +
                       std::string(artifact::kHostCpuModuleFormat) +
                       "' (compile with kilnc --target=cpu for this machine's architecture)");
  }
  // Each kernel runs its first variant, in file order, whose required CPU features this CPU has.
  bool has_cpu_kernels = false;
  std::map<uint32_t, std::string> unmet;  // graph kernel index -> a feature its variants lack
  for (const artifact::KernelBinary& binary : art.kernels) {
    if (binary.target != artifact::kCpuTarget) continue;
    has_cpu_kernels = true;
    if (binary.format != artifact::kModuleFormat)
      return unsupported("cpu kernel '" + binary.kernel_name + "' has format '" + binary.format +
                         "'; this runtime loads only '" + artifact::kModuleFormat + "' (a function of a cpu module)");
    if (binary.kernel_index >= art.graph.kernels().size())
      return corrupt("cpu kernel '" + binary.kernel_name + "' refers to graph kernel " +
                     std::to_string(binary.kernel_index) + " of " + std::to_string(art.graph.kernels().size()));
    if (executable->kernels_.count(binary.kernel_index)) continue;
    auto missing = std::find_if(binary.required_features.begin(), binary.required_features.end(),
                                [&](const std::string& feature) { return !device.has_feature(feature); });
    if (missing != binary.required_features.end()) {
      unmet.emplace(binary.kernel_index, "cpu kernel '" + binary.kernel_name + "' needs the CPU feature '" +
                                             *missing + "', which " + device.info().description + " lacks");
      continue;
    }
    executable->kernels_.emplace(binary.kernel_index, Kernel{&binary, nullptr});
  }
  if (!has_cpu_kernels) {
    std::string targets;
    for (const std::string& t : art.targets()) targets += (targets.empty() ? "" : ", ") + t;
    return unsupported("the artifact has no kernels for target 'cpu' (it has kernels for: " +
                       (targets.empty() ? std::string("none") : targets) + "); compile it with kilnc --target=cpu");
  }
  for (const ir::Launch& launch : art.plan.launches) {
    if (executable->kernels_.count(launch.kernel)) continue;
    auto why = unmet.find(launch.kernel);
    if (why != unmet.end()) return unsupported(why->second);
    return unsupported("the artifact's cpu kernels do not include graph kernel " + std::to_string(launch.kernel) +
                       " that its plan launches");
  }

  std::set<uint32_t> module_ids;
  for (const auto& [index, kernel] : executable->kernels_) module_ids.insert(kernel.binary->module_id);
  for (uint32_t id : module_ids) KILN_RETURN_IF_ERROR(executable->load_module(id));
  KILN_RETURN_IF_ERROR(executable->resolve_entry_points());
  KILN_RETURN_IF_ERROR(executable->map_constants());
  KILN_RETURN_IF_ERROR(executable->bind_library_calls());
  return executable;
}

Status CpuExecutable::load_module(uint32_t module_id) {
  const std::string what = "cpu module " + std::to_string(module_id);
  const artifact::ModuleBinary* found = nullptr;
  std::string other_formats;
  for (const artifact::ModuleBinary& module : artifact_->modules) {
    if (module.target != artifact::kCpuTarget || module.id != module_id) continue;
    if (module.format == artifact::kHostCpuModuleFormat) {
      found = &module;
      break;
    }
    other_formats += (other_formats.empty() ? "'" : ", '") + module.format + "'";
  }
  if (!found && !other_formats.empty())
    return unsupported(what + " is stored as " + other_formats + "; this runtime loads only '" +
                       std::string(artifact::kHostCpuModuleFormat) + "'");
  if (!found) return corrupt("the artifact's cpu kernels name " + what + ", which it does not hold");
  if (std::string fault = shared_object_fault(found->blob); !fault.empty())
    return corrupt(what + " (" + std::to_string(found->blob.size()) + " bytes) is not a loadable " +
                   kHostArchitecture + " shared object: " + fault);

  // An anonymous in-memory file: dlopen needs a path, and nothing should reach the disk.
  const int fd = memfd_create("kiln-cpu-module", MFD_CLOEXEC);
  if (fd < 0) return system_error("memfd_create for " + what, errno);
  modules_.push_back(LoadedModule{module_id, fd, nullptr});  // the destructor closes it from here on
  const uint8_t* data = found->blob.data();
  size_t left = found->blob.size();
  while (left > 0) {
    const ssize_t written = write(fd, data, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return system_error("writing " + what + " to its in-memory file", written < 0 ? errno : EIO);
    data += written;
    left -= size_t(written);
  }

  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  dlerror();  // clear an earlier message
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return corrupt(what + " (" + std::to_string(found->blob.size()) +
                   " bytes) is not a loadable " + std::string(kHostArchitecture) + " shared object: " + dl_error());
  modules_.back().handle = handle;
  return Status::ok();
}

void* CpuExecutable::module_handle(uint32_t module_id) const {
  for (const LoadedModule& module : modules_)
    if (module.id == module_id) return module.handle;
  return nullptr;
}

Status CpuExecutable::resolve_entry_points() {
  for (auto& [index, kernel] : kernels_) {
    const artifact::KernelBinary& binary = *kernel.binary;
    void* handle = module_handle(binary.module_id);
    if (!handle) return internal_error("cpu module " + std::to_string(binary.module_id) + " was not loaded");
    dlerror();
    void* symbol = dlsym(handle, binary.entry_point.c_str());
    if (!symbol)
      return corrupt("cpu kernel '" + binary.kernel_name + "': module " + std::to_string(binary.module_id) +
                     " exports no function '" + binary.entry_point + "' (" + dl_error() + ")");
    kernel.entry = reinterpret_cast<KernelEntry>(symbol);
  }
  return Status::ok();
}

Status CpuExecutable::map_constants() {
  const ir::Graph& graph = artifact_->graph;
  for (const ir::BufferAssignment& buffer : artifact_->plan.buffers) {
    if (buffer.storage != ir::Storage::kConstant) continue;
    if (buffer.value >= graph.num_nodes() || graph.node(buffer.value).op != ir::OpKind::kConstant)
      return corrupt("the plan stores value " + std::to_string(buffer.value) + " as a constant, which it is not");
    // The kernels' ABI passes every buffer as void*; constants are only ever read through it.
    constants_[buffer.value] = const_cast<std::byte*>(graph.constant_of(buffer.value).data());
  }
  return Status::ok();
}

Status CpuExecutable::bind_library_calls() {
  Result<const OneDnnApi*> api = load_onednn();
  if (!api.is_ok()) return Status::ok();  // the generated kernels run everything
  for (auto& [index, kernel] : kernels_) {
    const artifact::KernelBinary& binary = *kernel.binary;
    const artifact::LibraryEpilogue* rest = nullptr;
    if (binary.gemm && onednn_runs(*binary.gemm)) {
      kernel.library = Kernel::Library::kGemm;
      rest = &binary.gemm->in_place_epilogue;
    } else if (binary.conv && onednn_runs(*binary.conv)) {
      // The reordered weights are kept: only constant weights may be reordered once.
      const ir::BufferAssignment* w = artifact_->plan.find_buffer(binary.args[binary.conv->w_arg].value);
      if (!w || w->storage != ir::Storage::kConstant) continue;
      kernel.library = Kernel::Library::kConv;
      rest = &binary.conv->in_place_epilogue;
    } else {
      continue;
    }
    if (rest->empty()) continue;
    const std::string name = binary.entry_point + artifact::kLibraryEpilogueSuffix;
    dlerror();
    void* symbol = dlsym(module_handle(binary.module_id), name.c_str());
    if (!symbol)
      return corrupt("cpu kernel '" + binary.kernel_name + "': module " + std::to_string(binary.module_id) +
                     " exports no function '" + name + "' for its library call's epilogue (" + dl_error() + ")");
    kernel.library_epilogue = reinterpret_cast<KernelEntry>(symbol);
  }
  onednn_ = *api;
  return Status::ok();
}

Result<const OneDnnConvolution*> CpuExecutable::convolution(uint32_t kernel_index, int64_t batch) const {
  std::lock_guard<std::mutex> lock(library_calls_mutex_);
  std::unique_ptr<OneDnnConvolution>& slot = convolutions_[{kernel_index, batch}];
  if (!slot) {
    const artifact::KernelBinary& binary = *kernels_.at(kernel_index).binary;
    std::optional<void*> weights = constant(binary.args[binary.conv->w_arg].value);
    if (!weights) return internal_error("cpu kernel '" + binary.kernel_name + "': its convolution weights are not a constant");
    KILN_ASSIGN_OR_RETURN(slot, OneDnnConvolution::create(*onednn_, *binary.conv, batch, *weights));
  }
  return slot.get();
}

std::optional<void*> CpuExecutable::constant(ir::NodeId value) const {
  auto it = constants_.find(value);
  if (it == constants_.end()) return std::nullopt;
  return it->second;
}

const CpuExecutable::Kernel* CpuExecutable::kernel(uint32_t kernel_index) const {
  auto it = kernels_.find(kernel_index);
  return it == kernels_.end() ? nullptr : &it->second;
}

Result<const OneDnnMatmul*> CpuExecutable::matmul(uint32_t kernel_index, const OneDnnMatmul::Key& key) const {
  std::lock_guard<std::mutex> lock(library_calls_mutex_);
  std::unique_ptr<OneDnnMatmul>& slot = matmuls_[{kernel_index, key}];
  if (!slot) {
    const artifact::KernelBinary& binary = *kernels_.at(kernel_index).binary;
    const std::optional<void*> b = constant(binary.args[binary.gemm->b_arg].value);
    KILN_ASSIGN_OR_RETURN(slot, OneDnnMatmul::create(*onednn_, *binary.gemm, key, b ? *b : nullptr));
  }
  return slot.get();
}

}  // namespace kiln::runtime::cpu
