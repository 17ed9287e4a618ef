# Builds the ONNX importer fuzz target with clang (fuzz/, a separate build tree) and runs it for a
# bounded time on a seed corpus of the example models. Invoked by ctest:
#   cmake -DKILN_ROOT=... -DWORK_DIR=... [-DGENERATOR=Ninja] -P run_fuzz_onnx.cmake
find_program(CLANGXX NAMES clang++ clang++-14)
if(NOT CLANGXX)
  message(FATAL_ERROR "clang++ not found: the libFuzzer target needs clang (apt-get install clang)")
endif()
if(NOT GENERATOR)
  set(GENERATOR "Ninja")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${KILN_ROOT}/tests/onnx/fuzz -B ${WORK_DIR}/build -G ${GENERATOR}
          -DCMAKE_CXX_COMPILER=${CLANGXX} -DCMAKE_BUILD_TYPE=
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the clang fuzz build failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the ONNX fuzz target with clang failed")
endif()
# A fresh corpus each run: libFuzzer adds the inputs it finds to its first corpus directory.
file(REMOVE_RECURSE ${WORK_DIR}/corpus)
file(MAKE_DIRECTORY ${WORK_DIR}/corpus)
file(GLOB seeds ${KILN_ROOT}/examples/onnx/*.onnx ${KILN_ROOT}/tests/onnx/seeds/*.onnx)
foreach(seed ${seeds})
  file(COPY ${seed} DESTINATION ${WORK_DIR}/corpus)
endforeach()
execute_process(
  COMMAND ${WORK_DIR}/build/fuzz_onnx_importer -runs=20000 -max_total_time=30 -max_len=16384 -timeout=10
          -rss_limit_mb=4096 -artifact_prefix=${WORK_DIR}/ ${WORK_DIR}/corpus
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the fuzzer found a failure (exit ${rc}); the crashing input is in ${WORK_DIR}/")
endif()
