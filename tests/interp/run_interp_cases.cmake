# ctest driver for the interpreter cases: generate with NumPy, then run. Fails if either step does.
execute_process(COMMAND ${PYTHON} ${GENERATOR} ${CASES_DIR} RESULT_VARIABLE gen_status)
if(NOT gen_status EQUAL 0)
  message(FATAL_ERROR "gen_cases.py failed (${gen_status}); it needs python3 with numpy")
endif()
execute_process(COMMAND ${RUNNER} ${CASES_DIR} RESULT_VARIABLE run_status)
if(NOT run_status EQUAL 0)
  message(FATAL_ERROR "kiln-interp-cases reported failures")
endif()
