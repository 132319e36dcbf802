# optimizer_comparison.cmake: the CTest driver of sample_optimizer_comparison (cmake -P).
# 1. a short run with --check-gradients: the hand-written backward of every network must
#    match central finite differences in double, and every loss curve must fall;
# 2. check_optimizer_comparison.py parses the SVG and CSV it wrote;
# 3. the same gradient check with --break-backward (a 1% error in one gradient) must
#    fail, so the check is known to catch a wrong backward.
# Inputs: -DPROGRAM=... -DCHECKER=... -DPYTHON=... -DWORK_DIR=...
foreach(variable PROGRAM CHECKER PYTHON WORK_DIR)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "optimizer_comparison.cmake: -D${variable}= is required")
  endif()
endforeach()

set(steps 60)
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

execute_process(
  COMMAND "${PROGRAM}" --steps ${steps} --images 2560 --check-gradients --check
          --csv "${WORK_DIR}/losses.csv" --svg "${WORK_DIR}/losses.svg"
  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE errors)
message("${output}${errors}")
if(errors MATCHES "Fashion-MNIST not found")
  return()  # reported as skipped (SKIP_REGULAR_EXPRESSION)
endif()
if(NOT result EQUAL 0)
  message(FATAL_ERROR "sample_optimizer_comparison failed (exit ${result})")
endif()

execute_process(
  COMMAND "${PYTHON}" "${CHECKER}" "${WORK_DIR}/losses.svg" "${WORK_DIR}/losses.csv" ${steps}
  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE errors)
message("${output}${errors}")
if(NOT result EQUAL 0)
  message(FATAL_ERROR "check_optimizer_comparison.py rejected the output (exit ${result})")
endif()

execute_process(
  COMMAND "${PROGRAM}" --steps 1 --images 2560 --check-gradients --break-backward
          --csv "${WORK_DIR}/broken.csv" --svg "${WORK_DIR}/broken.svg"
  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE errors)
if(result EQUAL 0 OR NOT errors MATCHES "disagrees with finite differences")
  message(FATAL_ERROR "the gradient check accepted a deliberately wrong backward (exit ${result}):\n${output}${errors}")
endif()
message("a deliberately wrong backward was rejected, as it must be")
