# Builds a libFuzzer target with clang in its own tree (unless FUZZER points at one the main
# build already has, when the main compiler is clang), then runs it for a bounded time on a fresh
# seed corpus. Shared by every fuzz test; invoked by ctest:
#   cmake -DKILN_ROOT=... -DWORK_DIR=... -DSOURCE_DIR=... -DTARGET=name -DSEEDS=glob,glob
#         [-DMAX_LEN=4096] [-DFUZZER=path] [-DGENERATOR=Ninja] -P run_fuzz.cmake
# SEEDS are globs relative to KILN_ROOT, comma-separated (a ';' would split the ctest command).
if(NOT MAX_LEN)
  set(MAX_LEN 4096)
endif()
if(NOT FUZZER)
  find_program(CLANGXX NAMES clang++ clang++-14)
  if(NOT CLANGXX)
    message(FATAL_ERROR "clang++ not found: the libFuzzer target needs clang (apt-get install clang)")
  endif()
  if(NOT GENERATOR)
    set(GENERATOR "Ninja")
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
            -DCMAKE_CXX_COMPILER=${CLANGXX} -DCMAKE_BUILD_TYPE=
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configuring the clang build of ${TARGET} failed")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "building ${TARGET} with clang failed")
  endif()
  set(FUZZER ${WORK_DIR}/build/${TARGET})
endif()

# A fresh corpus each run: libFuzzer adds the inputs it finds to its first corpus directory.
file(REMOVE_RECURSE ${WORK_DIR}/corpus)
file(MAKE_DIRECTORY ${WORK_DIR}/corpus)
string(REPLACE "," ";" seed_globs "${SEEDS}")
list(TRANSFORM seed_globs PREPEND ${KILN_ROOT}/)
file(GLOB_RECURSE seeds ${seed_globs})
if(NOT seeds)
  message(FATAL_ERROR "no seed inputs match ${SEEDS}")
endif()
foreach(seed ${seeds})
  file(COPY ${seed} DESTINATION ${WORK_DIR}/corpus)
endforeach()
execute_process(
  COMMAND ${FUZZER} -runs=20000 -max_total_time=30 -max_len=${MAX_LEN} -timeout=10 -rss_limit_mb=4096
          -artifact_prefix=${WORK_DIR}/ ${WORK_DIR}/corpus
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the fuzzer found a failure (exit ${rc}); the crashing input is in ${WORK_DIR}/")
endif()
