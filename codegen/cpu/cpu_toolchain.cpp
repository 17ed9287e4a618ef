// The cpu target's compilers (cpu_toolchain.h): clang through libkiln_cpu_clang.so
// (cpu_clang_module.h), opened once with dlopen(RTLD_LOCAL), and lld as a program.
#include "codegen/cpu/cpu_toolchain.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

#include "codegen/cpu/cpu_clang_module.h"
#include "support/diagnostics.h"

namespace kiln::codegen {
namespace {

// The module's functions (cpu_clang_module.h).
struct ClangModule {
  decltype(&kiln_cpu_clang_identity) identity = nullptr;
  decltype(&kiln_cpu_clang_host_cpu) host_cpu = nullptr;
  decltype(&kiln_cpu_clang_is_known_cpu) is_known_cpu = nullptr;
  decltype(&kiln_cpu_clang_required_flags) required_flags = nullptr;
  decltype(&kiln_cpu_clang_compile) compile = nullptr;
};

// Where the module is: KILN_CPU_CLANG_MODULE; else next to the binary holding this code, as
// installed: <prefix>/lib/kiln/ for <prefix>/bin/kilnc, or the same folder for the Python
// package's extension (kiln/_kiln*.so beside kiln/libkiln_cpu_clang.so); else where this build
// made it.
std::vector<std::string> module_paths() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("KILN_CPU_CLANG_MODULE"); env && *env) return {env};
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&module_paths), &self) && self.dli_fname && *self.dli_fname) {
    std::error_code ec;
    std::filesystem::path image = std::filesystem::canonical(self.dli_fname, ec);
    if (ec) image = std::filesystem::read_symlink("/proc/self/exe", ec);  // the main program's "name" may be bare
    if (!ec) {
      paths.push_back((image.parent_path() / KILN_CPU_CLANG_MODULE_NAME).string());
      paths.push_back((image.parent_path().parent_path() / "lib" / "kiln" / KILN_CPU_CLANG_MODULE_NAME).string());
    }
  }
  paths.push_back(KILN_CPU_CLANG_MODULE_PATH);
  return paths;
}

Result<const ClangModule*> clang_module() {
  static std::once_flag once;
  static ClangModule module;
  static Status status = Status::ok();
  std::call_once(once, [] {
    std::string tried;
    void* handle = nullptr;
    for (const std::string& path : module_paths()) {
      if ((handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
      const char* why = dlerror();
      tried += "\n  " + path + ": " + (why ? why : "dlopen failed");
    }
    if (!handle) {
      status = Status(ErrorCode::kUnavailable,
                      "cpu target: cannot load Kiln's clang module (set KILN_CPU_CLANG_MODULE to its path):" + tried);
      return;
    }
    auto load = [&](const char* name, auto& entry) {
      void* symbol = dlsym(handle, name);
      if (!symbol && status.is_ok()) status = Status(ErrorCode::kUnavailable, std::string("cpu target: the clang module lacks ") + name);
      entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(symbol);
    };
    load("kiln_cpu_clang_identity", module.identity);
    load("kiln_cpu_clang_host_cpu", module.host_cpu);
    load("kiln_cpu_clang_is_known_cpu", module.is_known_cpu);
    load("kiln_cpu_clang_required_flags", module.required_flags);
    load("kiln_cpu_clang_compile", module.compile);
  });
  if (!status.is_ok()) return status;
  return &module;
}

void append(void* context, const char* data, size_t size) { static_cast<std::string*>(context)->append(data, size); }

constexpr const char* kX86Triple = "x86_64-pc-linux-gnu";
constexpr const char* kAarch64Triple = "aarch64-unknown-linux-gnu";
#if defined(__aarch64__)
const CpuSelection kHostDefault{"aarch64", kAarch64Triple, "generic"};
#else
const CpuSelection kHostDefault{"x86_64", kX86Triple, "x86-64-v3"};
#endif

// A private temporary folder, removed with everything in it when the object goes.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln-link-XXXXXX").string();
    if (mkdtemp(pattern.data())) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  bool ok() const { return !path_.empty(); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

Status write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!out) return internal_error("cpu target: cannot write the temporary file " + path);
  return Status::ok();
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

// Told from the files when it can be: the module, and the LLVM libraries it was linked against
// where this build found them. Loading the module maps LLVM (about 50 MB, for good: it cannot be
// unloaded), which a compile should not hold beside the weights before it reaches the cpu
// target's code generation. Elsewhere (LLVM installed in another place, or not at all) the
// module is loaded to find out.
bool cpu_toolchain_present() {
  auto readable = [](const std::string& path) { return access(path.c_str(), R_OK) == 0; };
  const std::vector<std::string> paths = module_paths();
  const bool module_found = std::any_of(paths.begin(), paths.end(), readable);
  if (module_found && readable(KILN_CPU_LLVM_LIBRARY) && readable(KILN_CPU_CLANG_LIBRARY)) return true;
  return clang_module().is_ok();
}

Result<std::string> cpu_toolchain_identity() {
  KILN_ASSIGN_OR_RETURN(const ClangModule* m, clang_module());
  return std::string(m->identity()) + ", " + KILN_LLD_PATH;
}

Result<CpuSelection> select_cpu(std::string_view option) {
  KILN_ASSIGN_OR_RETURN(const ClangModule* m, clang_module());
  if (option.empty()) return kHostDefault;
  if (option == "native") {
    CpuSelection host = kHostDefault;
    host.cpu.clear();
    m->host_cpu(&append, &host.cpu);
    return host;
  }
  if (option == "aarch64") return CpuSelection{"aarch64", kAarch64Triple, "generic"};
  const std::string name(option);
  if (m->is_known_cpu(kX86Triple, name.c_str())) return CpuSelection{"x86_64", kX86Triple, name};
  if (m->is_known_cpu(kAarch64Triple, name.c_str())) return CpuSelection{"aarch64", kAarch64Triple, name};
  return invalid_argument("unknown CPU '" + name +
                          "' for --cpu (expected an LLVM CPU name of x86-64, such as x86-64-v2, x86-64-v3, "
                          "skylake-avx512 or znver3, or of AArch64, such as neoverse-n1 or cortex-a76; aarch64 for a "
                          "generic AArch64 CPU; or native)");
}

Result<std::vector<std::string>> cpu_required_flags(const CpuSelection& cpu) {
  KILN_ASSIGN_OR_RETURN(const ClangModule* m, clang_module());
  std::string text;
  m->required_flags(cpu.triple.c_str(), cpu.cpu.c_str(), &append, &text);
  std::vector<std::string> flags;
  std::istringstream in(text);
  for (std::string flag; std::getline(in, flag);) flags.push_back(flag);
  return flags;
}

Result<std::vector<uint8_t>> compile_object(const std::string& source, const CpuSelection& cpu, int opt_level) {
  KILN_ASSIGN_OR_RETURN(const ClangModule* m, clang_module());
  std::string object, log;
  if (m->compile(source.data(), source.size(), cpu.triple.c_str(), cpu.cpu.c_str(), opt_level, &append, &object,
                 &append, &log) != 0 ||
      object.empty())
    return internal_error("cpu target: clang failed to compile a generated kernel:\n" + log + "\n--- source ---\n" +
                          numbered_lines(source));
  return std::vector<uint8_t>(object.begin(), object.end());
}

Result<std::vector<uint8_t>> link_shared_object(const std::vector<std::vector<uint8_t>>& objects, const std::string& arch) {
  TempDir dir;
  if (!dir.ok()) return internal_error("cpu target: cannot create a temporary folder for the link");
  std::vector<std::string> args = {KILN_LLD_PATH, "-shared", "--build-id=none", "-z", "noexecstack", "-z", "relro",
                                   "--hash-style=gnu", "-O1", "-o", dir.file("kernels.so")};
  for (size_t i = 0; i < objects.size(); ++i) {
    args.push_back(dir.file("k" + std::to_string(i) + ".o"));
    KILN_RETURN_IF_ERROR(write_file(args.back(), objects[i]));
  }
  // The kernels call libm (expf, tanhf, ...; on x86-64 also libmvec's vector functions): the
  // module names them as dependencies, by soname only, so the loader finds the target machine's
  // own. lld reads the sonames from a copy for `arch`: the host's, or a cross C library's.
  std::vector<std::string> lib_dirs = {"/lib/" + arch + "-linux-gnu", "/usr/lib/" + arch + "-linux-gnu",
                                       "/usr/" + arch + "-linux-gnu/lib"};
  if (arch == "x86_64") lib_dirs.insert(lib_dirs.end(), {"/lib64", "/usr/lib64"});
  bool found_libm = false;
  for (const std::string& lib_dir : lib_dirs) {
    std::error_code ec;
    if (!std::filesystem::exists(lib_dir + "/libm.so.6", ec)) continue;
    args.insert(args.end(), {"-L", lib_dir});
    found_libm = true;
  }
  if (!found_libm)
    return Status(ErrorCode::kUnavailable, "cpu target: cannot link for " + arch + ": no " + arch +
                                               " libm.so.6 in " + lib_dirs.front() + " or " + lib_dirs[2] +
                                               " (cross-compiling needs the target's C library; Debian: "
                                               "apt-get install libc6-arm64-cross)");
  args.insert(args.end(), {"--no-as-needed", "-l:libm.so.6"});
  if (arch == "x86_64") args.push_back("-l:libmvec.so.1");

  // lld runs as its own process: lld 14 as a library keeps global state between links (a second
  // link in one process fails), and it would bring unversioned copies of LLVM's templates into
  // the program, where they would stand in for those of another LLVM in the process (PoCL's).
  const std::string log_path = dir.file("lld.log");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // lld gets an empty environment: it needs none, and passing `environ` would read the process's
  // environment while another thread may change it (support/environment.h: a setenv, such as
  // PoCL's when it enumerates devices, frees the array it replaces; posix_spawn then reported
  // EFAULT).
  char* no_environment[] = {nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), no_environment);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    return Status(ErrorCode::kUnavailable,
                  "cpu target: cannot run the linker " + std::string(KILN_LLD_PATH) + ": " + std::strerror(spawned));
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    const std::vector<uint8_t> log = read_file(log_path);
    return internal_error("cpu target: lld failed to link the kernels:\n" + std::string(log.begin(), log.end()));
  }
  std::vector<uint8_t> so = read_file(dir.file("kernels.so"));
  if (so.empty()) return internal_error("cpu target: lld wrote no shared object");
  return so;
}

}  // namespace kiln::codegen
