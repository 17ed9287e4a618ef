# KILN_SANITIZE: builds every Kiln target (libraries, tools, tests) with the compiler's sanitizers.
#   ""                   no sanitizer (the default)
#   "address,undefined"  AddressSanitizer + UndefinedBehaviorSanitizer (scripts/sanitize.sh asan)
#   "address", "undefined"  one of the two
#   "thread"             ThreadSanitizer (scripts/sanitize.sh tsan); cannot be combined with address
# A sanitizer tree is its own build folder (build-asan, build-tsan): the flags change every object.
# Undefined behaviour aborts at the first report (-fno-sanitize-recover), so a test fails on it;
# frame pointers and -g give reports whole stacks with file:line. Code built outside this project
# (the system's libraries, the GPU drivers) is not instrumented.
set(KILN_SANITIZE "" CACHE STRING "Sanitizers for every Kiln target: address,undefined | thread | empty")
set_property(CACHE KILN_SANITIZE PROPERTY STRINGS "" "address,undefined" "address" "undefined" "thread")
if(KILN_SANITIZE)
  set(KILN_SANITIZE_ALLOWED "address,undefined" "undefined,address" "address" "undefined" "thread")
  if(NOT KILN_SANITIZE IN_LIST KILN_SANITIZE_ALLOWED)
    message(FATAL_ERROR "KILN_SANITIZE=${KILN_SANITIZE}: expected one of address,undefined | address | "
                        "undefined | thread (thread cannot be combined with address)")
  endif()
  set(KILN_SANITIZE_FLAGS -fsanitize=${KILN_SANITIZE} -fno-omit-frame-pointer -g)
  if(KILN_SANITIZE MATCHES "undefined")
    list(APPEND KILN_SANITIZE_FLAGS -fno-sanitize-recover=undefined)
  endif()
  # Unoptimized sanitized code runs the interpreter tests several times slower; -O1 is the
  # optimization level the sanitizers' documentation recommends (it keeps reports exact). It
  # overrides a Debug build's -O0 only: an explicit RelWithDebInfo tree keeps its -O2.
  if(CMAKE_BUILD_TYPE STREQUAL "Debug")
    list(APPEND KILN_SANITIZE_FLAGS -O1)
  endif()
  add_compile_options(${KILN_SANITIZE_FLAGS})
  add_link_options(-fsanitize=${KILN_SANITIZE})
  message(STATUS "kiln: sanitizers ${KILN_SANITIZE} (${KILN_SANITIZE_FLAGS})")
endif()
