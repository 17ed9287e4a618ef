# The sources the parser fuzz target needs (the frontend minus the builder, and the parts of
# ir/ and support/ it uses), shared by the in-tree clang build and the standalone one.
# KILN_ROOT must be set to the repository root.
file(GLOB KILN_FUZZ_SOURCES CONFIGURE_DEPENDS
     ${KILN_ROOT}/support/*.cpp
     ${KILN_ROOT}/ir/dtype.cpp ${KILN_ROOT}/ir/ops.cpp ${KILN_ROOT}/ir/shape.cpp
     ${KILN_ROOT}/ir/tensor.cpp ${KILN_ROOT}/ir/graph.cpp ${KILN_ROOT}/ir/infer*.cpp
     ${KILN_ROOT}/frontend/lexer.cpp ${KILN_ROOT}/frontend/parse*.cpp
     ${KILN_ROOT}/frontend/safetensors.cpp)
set(KILN_FUZZ_FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -O1 -g)
