# The fuzz tests' one script (tests/fuzz/CMakeLists.txt registers them), in two modes:
#
#   cmake -DMODE=build -DSOURCE_DIR=tests/fuzz/standalone -DBUILD_DIR=dir [-DGENERATOR=Ninja]
#         -P run_fuzz.cmake
#     configures and builds every libFuzzer target with clang in BUILD_DIR.
#
#   cmake -DMODE=run -DKILN_ROOT=repo -DWORK_DIR=dir -DFUZZER=path -DSEEDS=glob,glob
#         [-DMAX_LEN=4096] [-DKILNC=path -DKILNC_SEEDS=glob,glob] [-DKILNC_CPU_SEEDS=glob,glob]
#         [-DSECONDS=20] -P run_fuzz.cmake
#     runs FUZZER for a bounded time on a fresh corpus in WORK_DIR/corpus: copies of the SEEDS
#     (globs relative to KILN_ROOT, comma-separated: a ';' would split the ctest command) and the
#     artifacts KILNC compiles from the KILNC_SEEDS (and, for the cpu target alone, from the
#     KILNC_CPU_SEEDS). A failing input is left in WORK_DIR.
cmake_policy(SET CMP0007 NEW)  # lists keep empty elements (the variants below)
if(MODE STREQUAL "build")
  find_program(CLANGXX NAMES clang++ clang++-14)
  if(NOT CLANGXX)
    message(FATAL_ERROR "clang++ not found: the libFuzzer targets need clang (apt-get install clang)")
  endif()
  if(NOT GENERATOR)
    set(GENERATOR "Ninja")
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BUILD_DIR} -G ${GENERATOR}
            -DCMAKE_CXX_COMPILER=${CLANGXX} -DCMAKE_BUILD_TYPE=
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configuring the clang build of the fuzz targets failed")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "building the fuzz targets with clang failed")
  endif()
  return()
endif()

if(NOT MODE STREQUAL "run")
  message(FATAL_ERROR "run_fuzz.cmake: MODE must be build or run")
endif()
if(NOT MAX_LEN)
  set(MAX_LEN 4096)
endif()
if(NOT SECONDS)
  set(SECONDS 20)
endif()
if(NOT EXISTS ${FUZZER})
  message(FATAL_ERROR "${FUZZER} does not exist (the fuzz_build test builds it)")
endif()

# A fresh corpus each run: libFuzzer adds the inputs it finds to its first corpus directory.
file(REMOVE_RECURSE ${WORK_DIR}/corpus)
file(MAKE_DIRECTORY ${WORK_DIR}/corpus)
set(seeds)
if(SEEDS)
  string(REPLACE "," ";" seed_globs "${SEEDS}")
  list(TRANSFORM seed_globs PREPEND ${KILN_ROOT}/)
  file(GLOB seeds ${seed_globs})
endif()
foreach(seed ${seeds})
  file(COPY ${seed} DESTINATION ${WORK_DIR}/corpus)
endforeach()
set(graphs)
if(KILNC_SEEDS)
  string(REPLACE "," ";" graph_globs "${KILNC_SEEDS}")
  list(TRANSFORM graph_globs PREPEND ${KILN_ROOT}/)
  file(GLOB graphs ${graph_globs})
endif()
foreach(graph ${graphs})
  # Three artifacts per graph: unfused (-O0) and fused (-O2) graphs without kernels, and -O2 with
  # the opencl target's kernels (OpenCL C text, made without any device or external compiler),
  # kept when it fits MAX_LEN (libFuzzer would truncate a longer seed).
  get_filename_component(stem ${graph} NAME_WE)
  foreach(variant "-O0:" "-O2:" "-O2:opencl")
    string(REPLACE ":" ";" variant "${variant}")
    list(GET variant 0 opt)
    list(LENGTH variant n)
    set(target "")
    if(n GREATER 1)
      list(GET variant 1 target)
    endif()
    set(seed ${WORK_DIR}/corpus/${stem}${opt}${target}.kiln)
    # "${target}" quoted: an empty target list must stay an argument.
    execute_process(COMMAND ${KILNC} ${opt} --target "${target}" --no-cache -j 1 -o ${seed} ${graph}
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "kilnc failed to compile the seed ${graph} (${opt} --target '${target}')")
    endif()
    file(SIZE ${seed} seed_size)
    if(seed_size GREATER MAX_LEN)
      file(REMOVE ${seed})
    endif()
  endforeach()
  list(APPEND seeds ${graph})
endforeach()
# KILNC_CPU_SEEDS: models compiled for the cpu target alone, whose convolutions carry weights
# packed in oneDNN's layout (artifact/packed_layout.h) for the fuzzer to damage.
if(KILNC_CPU_SEEDS)
  string(REPLACE "," ";" cpu_globs "${KILNC_CPU_SEEDS}")
  list(TRANSFORM cpu_globs PREPEND ${KILN_ROOT}/)
  file(GLOB cpu_models ${cpu_globs})
  foreach(model ${cpu_models})
    get_filename_component(stem ${model} NAME_WE)
    set(seed ${WORK_DIR}/corpus/${stem}-O2cpu.kiln)
    execute_process(COMMAND ${KILNC} --target cpu --no-cache -j 1 -o ${seed} ${model} RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "kilnc failed to compile the seed ${model} (--target cpu)")
    endif()
    file(SIZE ${seed} seed_size)
    if(seed_size GREATER MAX_LEN)
      message(FATAL_ERROR "the cpu seed ${seed} has ${seed_size} bytes, over MAX_LEN ${MAX_LEN}")
    endif()
    list(APPEND seeds ${model})
  endforeach()
endif()
if(NOT seeds)
  message(FATAL_ERROR "no seed inputs match ${SEEDS} ${KILNC_SEEDS}")
endif()
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -max_len=${MAX_LEN} -timeout=10 -rss_limit_mb=4096
          -artifact_prefix=${WORK_DIR}/ ${WORK_DIR}/corpus
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the fuzzer found a failure (exit ${rc}); the failing input is in ${WORK_DIR}/")
endif()
