// The cpu target's clang module: libkiln_cpu_clang.so, the one part of Kiln that links clang
// and LLVM 14, loaded by cpu_toolchain.cpp with dlopen(RTLD_LOCAL) the first time kilnc
// compiles for the cpu target. Why a module: Debian's libclang-cpp exports its symbols without
// versions, so a libclang-cpp.so.14 linked into a program would stand in for the
// libclang-cpp.so.15 that PoCL loads into the same process (and crash it); loaded locally, its
// symbols are seen by nothing else. The interface is plain C (cpu_clang_module.h).
#include "codegen/cpu/cpu_clang_module.h"

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

// cc1 flags besides the triple, CPU and optimization level. -vectorize-*: the clang driver adds
// them at -O2 and above, cc1 does not. No -fmath-errno: sqrt and friends become instructions.
// -ffp-contract=on: a * b + c within one expression may fuse, as on every GPU target.
// -w: generated code; a loop the vectorizer declines (-Wpass-failed) is not the user's business.
constexpr const char* kFixedFlags[] = {
    "-x", "c++", "-std=c++17", "-fno-rtti", "-mrelocation-model", "pic", "-pic-level", "2",
    "-fvisibility", "hidden", "-ffp-contract=on", "-vectorize-loops", "-vectorize-slp",
    "-nostdsysteminc", "-nobuiltininc", "-fno-common", "-mframe-pointer=none", "-w", "-Wno-pass-failed",
};
// x86-64 only: vectorized loops call glibc's vector expf (the module then needs libmvec). LLVM 14
// maps libmvec's x86 variants only.
constexpr const char* kX86Flags[] = {"-fveclib=libmvec"};

bool is_x86(const std::string& triple) { return triple.rfind("x86_64", 0) == 0; }

// Every back end the cpu target cross-compiles for (x86-64 and AArch64), not only the host's.
void initialize_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
  });
}

void emit(kiln_cpu_sink sink, void* context, const std::string& text) { sink(context, text.data(), text.size()); }

}  // namespace

extern "C" __attribute__((visibility("default"))) const char* kiln_cpu_clang_identity(void) {
  static const std::string id = [] {
    std::string text = "clang " LLVM_VERSION_STRING;
    for (const char* f : kFixedFlags) text += std::string(" ") + f;
    text += " x86:";
    for (const char* f : kX86Flags) text += std::string(" ") + f;
    return text;
  }();
  return id.c_str();
}

extern "C" __attribute__((visibility("default"))) void kiln_cpu_clang_host_cpu(kiln_cpu_sink sink, void* context) {
  emit(sink, context, llvm::sys::getHostCPUName().str());
}

namespace {

std::unique_ptr<llvm::MCSubtargetInfo> subtarget(const std::string& triple, const std::string& cpu) {
  initialize_llvm();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) return nullptr;
  return std::unique_ptr<llvm::MCSubtargetInfo>(target->createMCSubtargetInfo(triple, cpu, ""));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int kiln_cpu_clang_is_known_cpu(const char* triple, const char* cpu) {
  std::unique_ptr<llvm::MCSubtargetInfo> info = subtarget(triple, "");
  return info && info->isCPUStringValid(cpu) ? 1 : 0;
}

extern "C" __attribute__((visibility("default"))) void kiln_cpu_clang_required_flags(const char* triple, const char* cpu,
                                                                                     kiln_cpu_sink sink, void* context) {
  std::unique_ptr<llvm::MCSubtargetInfo> info = subtarget(triple, cpu);
  if (!info) return;
  // LLVM feature -> the Linux /proc/cpuinfo flag that announces it.
  static const std::pair<const char*, const char*> kX86[] = {
      {"sse4.1", "sse4_1"}, {"sse4.2", "sse4_2"}, {"popcnt", "popcnt"}, {"avx", "avx"}, {"avx2", "avx2"},
      {"fma", "fma"}, {"f16c", "f16c"}, {"bmi", "bmi1"}, {"bmi2", "bmi2"}, {"avx512f", "avx512f"},
      {"avx512bw", "avx512bw"}, {"avx512dq", "avx512dq"}, {"avx512vl", "avx512vl"}, {"avx512cd", "avx512cd"}};
  static const std::pair<const char*, const char*> kAarch64[] = {
      {"fp-armv8", "fp"}, {"neon", "asimd"}, {"fullfp16", "asimdhp"}, {"dotprod", "asimddp"}, {"rdm", "asimdrdm"},
      {"lse", "atomics"}, {"crc", "crc32"}, {"rcpc", "lrcpc"}, {"sve", "sve"}, {"sve2", "sve2"},
      {"i8mm", "i8mm"}, {"bf16", "bf16"}};
  auto list = [&](const auto& table) {
    for (const auto& [feature, flag] : table)
      if (info->checkFeatures(std::string("+") + feature)) emit(sink, context, std::string(flag) + "\n");
  };
  if (is_x86(triple)) list(kX86);
  else list(kAarch64);
}

extern "C" __attribute__((visibility("default"))) int kiln_cpu_clang_compile(const char* source, size_t size,
                                                                              const char* triple, const char* cpu,
                                                                              int opt_level, kiln_cpu_sink object_sink,
                                                                              void* object_context, kiln_cpu_sink log,
                                                                              void* log_context) {
  initialize_llvm();
  const std::string opt = "-O" + std::to_string(opt_level);
  std::vector<const char*> args = {"-triple", triple, "-target-cpu", cpu, opt.c_str(), "-emit-obj"};
  for (const char* f : kFixedFlags) args.push_back(f);
  if (is_x86(triple))
    for (const char* f : kX86Flags) args.push_back(f);
  args.push_back("kiln_kernel.cpp");

  std::string diagnostics;
  llvm::raw_string_ostream diag_stream(diagnostics);
  auto diag_options = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  auto* printer = new clang::TextDiagnosticPrinter(diag_stream, diag_options.get());
  clang::CompilerInstance compiler;
  compiler.createDiagnostics(printer, /*ShouldOwnClient=*/true);

  auto invocation = std::make_shared<clang::CompilerInvocation>();
  if (!clang::CompilerInvocation::CreateFromArgs(*invocation, args, compiler.getDiagnostics())) {
    diag_stream.flush();
    emit(log, log_context, "clang rejected its flags:\n" + diagnostics);
    return 1;
  }
  // The source never touches the file system.
  invocation->getPreprocessorOpts().addRemappedFile(
      "kiln_kernel.cpp",
      llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(source, size), "kiln_kernel.cpp").release());
  invocation->getFrontendOpts().OutputFile = "-";
  compiler.setInvocation(std::move(invocation));
  // clang's summary ("1 warning generated.") goes to stderr unless its verbose stream is moved.
  compiler.setVerboseOutputStream(std::make_unique<llvm::raw_null_ostream>());
  llvm::SmallString<0> object;
  compiler.setOutputStream(std::make_unique<llvm::raw_svector_ostream>(object));
  clang::EmitObjAction action;
  const bool ok = compiler.ExecuteAction(action) && !compiler.getDiagnostics().hasErrorOccurred();
  diag_stream.flush();
  if (!ok || object.empty()) {
    emit(log, log_context, diagnostics);
    return 1;
  }
  object_sink(object_context, object.data(), object.size());
  return 0;
}
