# The libFuzzer targets of tests/fuzz, each linked from only the sources it needs: the shared
# parts (support/ and ir/, the .graph parser, the artifact reader with the reference runtime, the
# ONNX importer) are object libraries compiled once per tree. Included by tests/fuzz/standalone
# (a clang tree of its own, when the main compiler is not clang) and by tests/fuzz/CMakeLists.txt
# (when it is). The includer sets KILN_ROOT (the repository root) and has found flatbuffers,
# nlohmann_json and libsodium (PkgConfig::sodium); the ONNX targets exist when onnx_proto and protobuf::libprotobuf do.
set(KILN_FUZZ_DIR ${KILN_ROOT}/tests/fuzz)
# Objects are instrumented for coverage (fuzzer-no-link) and checked by ASan/UBSan; only the
# executables link libFuzzer's main.
set(KILN_FUZZ_SANITIZERS address,undefined)
set(KILN_FUZZ_COMPILE_FLAGS -fsanitize=fuzzer-no-link,${KILN_FUZZ_SANITIZERS} -fno-sanitize-recover=undefined -O1 -g)
set(KILN_FUZZ_LINK_FLAGS -fsanitize=fuzzer,${KILN_FUZZ_SANITIZERS})

function(kiln_fuzz_objects name)
  add_library(${name} OBJECT ${ARGN})
  target_include_directories(${name} PUBLIC ${KILN_ROOT})
  target_compile_options(${name} PUBLIC ${KILN_FUZZ_COMPILE_FLAGS})
  target_compile_features(${name} PUBLIC cxx_std_20)
endfunction()

# kiln_fuzz_target(NAME SOURCES file... OBJECTS lib...): OBJECTS names every object library
# whose objects the target needs (CMake links only the objects of those named directly).
function(kiln_fuzz_target name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;OBJECTS")
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE ${arg_OBJECTS})
  target_link_options(${name} PRIVATE ${KILN_FUZZ_LINK_FLAGS})
endfunction()

file(GLOB kiln_fuzz_core_sources CONFIGURE_DEPENDS ${KILN_ROOT}/support/*.cpp ${KILN_ROOT}/ir/*.cpp)
kiln_fuzz_objects(kiln_fuzz_core ${kiln_fuzz_core_sources})
target_compile_definitions(kiln_fuzz_core PUBLIC KILN_VERSION_STRING="fuzz")

kiln_fuzz_objects(kiln_fuzz_safetensors ${KILN_ROOT}/frontend/safetensors.cpp)
target_link_libraries(kiln_fuzz_safetensors PUBLIC kiln_fuzz_core nlohmann_json::nlohmann_json)

file(GLOB kiln_fuzz_parser_sources CONFIGURE_DEPENDS ${KILN_ROOT}/frontend/lexer.cpp ${KILN_ROOT}/frontend/parse*.cpp)
kiln_fuzz_objects(kiln_fuzz_parser ${kiln_fuzz_parser_sources})
target_link_libraries(kiln_fuzz_parser PUBLIC kiln_fuzz_safetensors)

# The artifact reader and the reference device (no GPU driver): its FlatBuffers header is
# generated here with the object API and the embedded binary schema, which the structure-aware
# mutator uses; the reader itself uses only the accessors every generation has.
set(kiln_fuzz_fbs_dir ${CMAKE_CURRENT_BINARY_DIR}/kiln_fuzz_generated)
add_custom_command(
  OUTPUT ${kiln_fuzz_fbs_dir}/kiln_generated.h ${kiln_fuzz_fbs_dir}/kiln_bfbs_generated.h
  COMMAND flatbuffers::flatc --cpp --scoped-enums --gen-mutable --gen-object-api --bfbs-gen-embed
          -o ${kiln_fuzz_fbs_dir} ${KILN_ROOT}/artifact/kiln.fbs
  DEPENDS ${KILN_ROOT}/artifact/kiln.fbs
  VERBATIM)
# The reader is every artifact/ source but the writer (artifact/CMakeLists.txt splits them so);
# the runtime is the HAL, the reference driver, the session and the log.
file(GLOB kiln_fuzz_runtime_sources CONFIGURE_DEPENDS ${KILN_ROOT}/artifact/*.cpp ${KILN_ROOT}/runtime/hal/*.cpp
     ${KILN_ROOT}/runtime/drivers/reference/*.cpp)
list(REMOVE_ITEM kiln_fuzz_runtime_sources ${KILN_ROOT}/artifact/writer.cpp)
kiln_fuzz_objects(kiln_fuzz_runtime ${kiln_fuzz_runtime_sources} ${KILN_ROOT}/runtime/session.cpp ${KILN_ROOT}/runtime/log.cpp
  ${kiln_fuzz_fbs_dir}/kiln_generated.h)
target_include_directories(kiln_fuzz_runtime PUBLIC ${kiln_fuzz_fbs_dir})
target_link_libraries(kiln_fuzz_runtime PUBLIC kiln_fuzz_core flatbuffers::flatbuffers PkgConfig::sodium)

kiln_fuzz_target(fuzz_graph_parser SOURCES ${KILN_FUZZ_DIR}/fuzz_graph_parser.cpp
                 OBJECTS kiln_fuzz_core kiln_fuzz_safetensors kiln_fuzz_parser)
kiln_fuzz_target(fuzz_npy SOURCES ${KILN_FUZZ_DIR}/fuzz_npy.cpp OBJECTS kiln_fuzz_core)
kiln_fuzz_target(fuzz_safetensors SOURCES ${KILN_FUZZ_DIR}/fuzz_safetensors.cpp
                 OBJECTS kiln_fuzz_core kiln_fuzz_safetensors)
kiln_fuzz_target(fuzz_artifact
                 SOURCES ${KILN_FUZZ_DIR}/fuzz_artifact.cpp ${KILN_FUZZ_DIR}/artifact_mutator.cpp
                         ${kiln_fuzz_fbs_dir}/kiln_bfbs_generated.h
                 OBJECTS kiln_fuzz_core kiln_fuzz_runtime)
# The mutator (test harness, not code under test) unpacks fuzzed models with FlatBuffers' object
# API, whose generated code reads [long] vectors with 8-byte loads that the verifier does not
# align (it checks 4 bytes); Kiln's reader reads them bytewise (artifact/reader_graph.cpp). Only
# the harness is exempt from UBSan's alignment check.
set_source_files_properties(${KILN_FUZZ_DIR}/artifact_mutator.cpp PROPERTIES COMPILE_OPTIONS -fno-sanitize=alignment)

if(TARGET onnx_proto AND TARGET protobuf::libprotobuf)
  file(GLOB kiln_fuzz_onnx_sources CONFIGURE_DEPENDS ${KILN_ROOT}/frontend/onnx/*.cpp)
  kiln_fuzz_objects(kiln_fuzz_onnx ${kiln_fuzz_onnx_sources})
  target_link_libraries(kiln_fuzz_onnx PUBLIC kiln_fuzz_core onnx_proto protobuf::libprotobuf)
  kiln_fuzz_target(fuzz_onnx_importer SOURCES ${KILN_FUZZ_DIR}/fuzz_onnx_importer.cpp
                   OBJECTS kiln_fuzz_core kiln_fuzz_onnx)
  kiln_fuzz_target(fuzz_onnx_external_data SOURCES ${KILN_FUZZ_DIR}/fuzz_onnx_external_data.cpp
                   OBJECTS kiln_fuzz_core kiln_fuzz_onnx)
endif()
