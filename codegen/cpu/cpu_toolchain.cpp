// clang and lld as libraries (cpu_toolchain.h).
#include "codegen/cpu/cpu_toolchain.h"

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <lld/Common/CommonLinkerContext.h>
#include <lld/Common/Driver.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

namespace kiln::codegen {
namespace {

// cc1 flags besides the triple, CPU and optimization level. -vectorize-*: the clang driver adds
// them at -O2 and above, cc1 does not. No -fmath-errno: sqrt and friends become instructions.
// -ffp-contract=on: a * b + c within one expression may fuse, as on every GPU target.
constexpr const char* kFixedFlags[] = {
    "-x", "c++", "-std=c++17", "-fno-rtti", "-mrelocation-model", "pic", "-pic-level", "2",
    "-fvisibility", "hidden", "-ffp-contract=on", "-vectorize-loops", "-vectorize-slp",
    "-nostdsysteminc", "-nobuiltininc", "-fno-common", "-mframe-pointer=none",
};

void initialize_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

std::string numbered(const std::string& source) {
  std::ostringstream out;
  std::istringstream in(source);
  std::string text;
  for (int n = 1; std::getline(in, text); ++n) out << n << "\t" << text << "\n";
  return out.str();
}

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

}  // namespace

std::string cpu_toolchain_identity() {
  std::string id = "clang+lld " LLVM_VERSION_STRING;
  for (const char* f : kFixedFlags) id += std::string(" ") + f;
  return id;
}

std::string host_cpu_name() { return llvm::sys::getHostCPUName().str(); }

std::vector<std::string> cpu_required_flags(const std::string& cpu) {
  initialize_llvm();
  std::string error;
  const std::string triple = "x86_64-pc-linux-gnu";
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) return {};
  std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(triple, cpu, ""));
  if (!info) return {};
  // LLVM feature -> the Linux /proc/cpuinfo flag that announces it.
  static const std::pair<const char*, const char*> kFlags[] = {
      {"sse4.1", "sse4_1"}, {"sse4.2", "sse4_2"}, {"popcnt", "popcnt"}, {"avx", "avx"}, {"avx2", "avx2"},
      {"fma", "fma"}, {"f16c", "f16c"}, {"bmi", "bmi1"}, {"bmi2", "bmi2"}, {"avx512f", "avx512f"},
      {"avx512bw", "avx512bw"}, {"avx512dq", "avx512dq"}, {"avx512vl", "avx512vl"}, {"avx512cd", "avx512cd"}};
  std::vector<std::string> flags;
  for (const auto& [feature, flag] : kFlags)
    if (info->checkFeatures(std::string("+") + feature)) flags.emplace_back(flag);
  return flags;
}

bool is_known_cpu(std::string_view cpu) {
  initialize_llvm();
  std::string error;
  const std::string triple = llvm::sys::getDefaultTargetTriple();
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) return false;
  std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(triple, "", ""));
  return info && info->isCPUStringValid(llvm::StringRef(cpu.data(), cpu.size()));
}

Result<std::vector<uint8_t>> compile_object(const std::string& source, const CpuCodeOptions& options) {
  initialize_llvm();
  const std::string opt = "-O" + std::to_string(options.opt_level);
  std::vector<const char*> args = {"-triple", options.triple.c_str(), "-target-cpu", options.cpu.c_str(),
                                   opt.c_str(), "-emit-obj"};
  for (const char* f : kFixedFlags) args.push_back(f);
  args.push_back("kiln_kernel.cpp");

  std::string diagnostics;
  llvm::raw_string_ostream diag_stream(diagnostics);
  auto diag_options = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  auto* printer = new clang::TextDiagnosticPrinter(diag_stream, diag_options.get());
  clang::CompilerInstance compiler;
  compiler.createDiagnostics(printer, /*ShouldOwnClient=*/true);

  auto invocation = std::make_shared<clang::CompilerInvocation>();
  if (!clang::CompilerInvocation::CreateFromArgs(*invocation, args, compiler.getDiagnostics()))
    return internal_error("cpu target: clang rejected its own flags:\n" + diag_stream.str());
  // The source never touches the file system.
  invocation->getPreprocessorOpts().addRemappedFile(
      "kiln_kernel.cpp", llvm::MemoryBuffer::getMemBufferCopy(source, "kiln_kernel.cpp").release());
  invocation->getFrontendOpts().OutputFile = "-";
  compiler.setInvocation(std::move(invocation));
  llvm::SmallString<0> object;
  compiler.setOutputStream(std::make_unique<llvm::raw_svector_ostream>(object));
  clang::EmitObjAction action;
  const bool ok = compiler.ExecuteAction(action) && !compiler.getDiagnostics().hasErrorOccurred();
  diag_stream.flush();
  if (!ok || object.empty())
    return internal_error("cpu target: clang failed to compile a generated kernel:\n" + diagnostics +
                          "\n--- source ---\n" + numbered(source));
  return std::vector<uint8_t>(object.begin(), object.end());
}

Result<std::vector<uint8_t>> link_shared_object(const std::vector<std::vector<uint8_t>>& objects) {
  TempDir dir;
  if (!dir.ok()) return internal_error("cpu target: cannot create a temporary folder for the link");
  std::vector<std::string> inputs;
  for (size_t i = 0; i < objects.size(); ++i) {
    inputs.push_back(dir.file("k" + std::to_string(i) + ".o"));
    KILN_RETURN_IF_ERROR(write_file(inputs.back(), objects[i]));
  }
  const std::string output = dir.file("kernels.so");
  // The kernels call libm (expf, tanhf, ...): the module names libm.so.6 as a dependency, by
  // soname only, so the loader finds the target machine's own. lld reads that soname from the
  // compiling machine's copy.
  std::vector<const char*> args = {"ld.lld", "-shared", "--build-id=none", "-z", "noexecstack", "-z", "relro",
                                   "--hash-style=gnu", "-O1", "-o", output.c_str()};
  for (const std::string& in : inputs) args.push_back(in.c_str());
  for (const char* dir : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64"}) {
    args.push_back("-L");
    args.push_back(dir);
  }
  args.push_back("--no-as-needed");
  args.push_back("-l:libm.so.6");

  std::string log;
  {
    static std::mutex lld_mutex;  // lld 14 keeps global state during a link
    std::lock_guard<std::mutex> lock(lld_mutex);
    llvm::raw_string_ostream out(log), err(log);
    const bool ok = lld::elf::link(args, out, err, /*exitEarly=*/false, /*disableOutput=*/false);
    // What lld's own main does after a link: without it the next link in this process reuses
    // the last one's state (and fails), and exit frees it twice.
    lld::CommonLinkerContext::destroy();
    out.flush();
    err.flush();
    if (!ok) return internal_error("cpu target: lld failed to link the kernels:\n" + log);
  }
  std::ifstream in(output, std::ios::binary);
  std::vector<uint8_t> so((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (so.empty()) return internal_error("cpu target: lld wrote no shared object");
  return so;
}

}  // namespace kiln::codegen
