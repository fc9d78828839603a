# Runs a training program and passes only if it exits 0 and prints "test accuracy: A" with A at
# least MIN_ACCURACY (a PASS_REGULAR_EXPRESSION alone ignores the exit status and passes on any
# accuracy). Usage: cmake -DMIN_ACCURACY=0.9 -DCOMMAND="prog;arg;..." -P check_accuracy.cmake
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "exited with status ${status}")
endif()
if(NOT out MATCHES "test accuracy: ([0-9]+\\.[0-9]+)")
  message(FATAL_ERROR "no 'test accuracy: A' line")
endif()
set(accuracy ${CMAKE_MATCH_1})
if(accuracy LESS MIN_ACCURACY)
  message(FATAL_ERROR "test accuracy ${accuracy} is below ${MIN_ACCURACY}")
endif()
message("test accuracy ${accuracy} >= ${MIN_ACCURACY}")
