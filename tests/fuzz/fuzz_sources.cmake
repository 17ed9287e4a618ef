# The sources the parser fuzz target needs (the frontend minus the builder, ir/ — whose operator
# table names the shape rules and the interpreter's evaluators — and support/), shared by the
# in-tree clang build and the standalone one.
# KILN_ROOT must be set to the repository root.
file(GLOB KILN_FUZZ_SOURCES CONFIGURE_DEPENDS
     ${KILN_ROOT}/support/*.cpp
     ${KILN_ROOT}/ir/*.cpp
     ${KILN_ROOT}/frontend/lexer.cpp ${KILN_ROOT}/frontend/parse*.cpp
     ${KILN_ROOT}/frontend/safetensors.cpp)
set(KILN_FUZZ_FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -O1 -g)
