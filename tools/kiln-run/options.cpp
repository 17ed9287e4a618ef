#include "tools/kiln-run/options.h"

#include "tools/common/cli.h"

namespace kiln::tools {

std::optional<int> parse_options(int argc, char** argv, Options& opts) {
  std::unique_ptr<CLI::App> app = make_app(
      "kiln-run", "[options] ARTIFACT.kiln",
      "Runs a compiled Kiln artifact on a device; checks, benchmarks, profiles or describes it.\n"
      "Value options take --opt=V or --opt V; options may come before or after the artifact.",
      "exit status: 0 success, 1 user error (bad option, file, input or device, or a --check FAIL),\n"
      "2 internal error");
  CLI::App& a = *app;
  a.add_option("artifact", opts.artifact, "the .kiln file to run")->type_name("ARTIFACT.kiln");
  a.add_flag("--version", opts.version, "show the version and the artifact format version");
  a.add_flag("--list-devices", opts.list_devices, "print every device any driver can see (id, type, name) and exit");
  CLI::Option* info =
      a.add_flag("--info", opts.info,
                 "describe the artifact and exit: format version, producer (the compiler\n"
                 "that wrote it), targets, kernels, inputs and outputs (symbolic dims by\n"
                 "name), constants and their bytes, the memory plan's arena");
  a.add_option("--info-json", opts.info_json, "with --info, also write the description as JSON to FILE (- for stdout)")
      ->type_name("FILE")
      ->check(output_file_validator())
      ->needs(info);
  a.add_option("--trusted-key", opts.trusted_keys,
               "load the artifact only if it is signed by this public key (a kilnc\n"
               "--new-signing-key .pub file; repeatable: any of them)")
      ->type_name("FILE.pub");
  CLI::Option* device =
      a.add_option("--device", opts.device,
                   "device to run on; default: the fastest available device the artifact\n"
                   "has kernels for (a CUDA GPU, then a discrete Vulkan or OpenCL GPU,\n"
                   "then a CPU implementation such as lavapipe or PoCL); an artifact without\n"
                   "kernels for any present device is an error naming both. `reference` is\n"
                   "the built-in reference interpreter, which runs every artifact")
          ->type_name("ID")
          ->check(CLI::Validator([](std::string& id) { return id.empty() ? std::string("needs a device id") : ""; }, ""));
  CLI::Option* input = add_assignment_option(a, "--input", opts.inputs, "NAME=FILE.npy",
                                             "an input from a NumPy file (repeatable); inputs not given are\n"
                                             "filled with seeded random values");
  CLI::Option* dim = add_dim_option(a, opts.dims, "size of a symbolic dimension for random inputs (repeatable)");
  CLI::Option* seed = a.add_option("--seed", opts.seed, "seed for random inputs (default 0)")
                          ->type_name("N")
                          ->check(non_negative_integer());
  CLI::Option* output_dir =
      a.add_option("--output-dir", opts.output_dir, "write each output as DIR/NAME.npy (otherwise print a summary)")
          ->type_name("DIR")
          ->check(CLI::Validator([](std::string& d) { return d.empty() ? std::string("needs a directory") : ""; }, ""));
  CLI::Option* check = a.add_flag("--check", opts.check,
                                  "also run the reference interpreter on the same inputs and compare:\n"
                                  "max abs / rel error and PASS/FAIL per output; exit 1 on FAIL");
  CLI::Option* check_against =
      a.add_option("--check-against", opts.check_against,
                   "compare each output with DIR/NAME.npy instead of the reference\n"
                   "interpreter's result, with --check's tolerances (e.g. the outputs of\n"
                   "another compile of the same graph); exit 1 on FAIL")
          ->type_name("DIR")
          ->check(CLI::Validator([](std::string& d) { return d.empty() ? std::string("needs a directory") : ""; }, ""))
          ->excludes(check);
  std::string check_reference;
  CLI::Option* check_reference_option =
      a.add_option("--check-reference", check_reference,
                   "with --check, how the reference interpreter computes: `faithful` rounds\n"
                   "as the device kernels do (f32 intermediates and accumulators, so an f32\n"
                   "overflow inside an op is inf/nan there too), `exact` computes in double;\n"
                   "default: faithful, or exact on the reference device")
          ->type_name("MODE")
          ->check(CLI::Validator(
              [](std::string& mode) {
                return ir::parse_interpreter_precision(mode) ? std::string() : std::string("must be exact or faithful");
              },
              ""))
          ->needs(check);
  CLI::Option* bench =
      a.add_option("--bench", opts.bench,
                   "N timed runs after a warm-up: p50/p90/p99, min, mean and max latency and\n"
                   "runs/s of host wall time, and device time per run where the device has\n"
                   "timers (CUDA events, Vulkan timestamps, OpenCL profiling)")
          ->type_name("N")
          ->check(CLI::Range(int64_t(1), int64_t(100000000)).description(""));
  CLI::Option* bench_json =
      a.add_option("--bench-json", opts.bench_json, "with --bench, also write its numbers as JSON to FILE (- for stdout)")
          ->type_name("FILE")
          ->check(output_file_validator())
          ->needs(bench);
  CLI::Option* profile =
      a.add_flag("--profile", opts.profile, "per-kernel times for one run, slowest first, with source nodes");
  CLI::Option* profile_trace =
      a.add_option("--profile-trace", opts.profile_trace,
                   "with --profile, also write the run as a Chrome trace (JSON) to FILE,\n"
                   "for chrome://tracing or ui.perfetto.dev (- for stdout)")
          ->type_name("FILE")
          ->check(output_file_validator())
          ->needs(profile);
  bool no_cuda_graph = false;
  CLI::Option* cuda_graph =
      a.add_flag("--no-cuda-graph", no_cuda_graph,
                 "on a CUDA device, launch the kernels one by one at every run instead\n"
                 "of replaying a captured CUDA graph (for comparison)");
  // --info runs nothing: options that only matter for a run are mistakes beside it.
  for (CLI::Option* run_option :
       {device, input, dim, seed, output_dir, check, check_against, check_reference_option, bench, bench_json, profile,
        profile_trace, cuda_graph})
    info->excludes(run_option);

  std::optional<int> stop = parse_command_line(a, "kiln-run", argc, argv);
  opts.cuda_graphs = !no_cuda_graph;
  if (!check_reference.empty()) opts.check_reference = ir::parse_interpreter_precision(check_reference);
  return stop;
}

}  // namespace kiln::tools
