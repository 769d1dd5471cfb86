# embedstack_target_flags_change_nothing(<out> <flags>...): TRUE when the C++ compiler, given
# <flags>, predefines the same macros (sorted) as without them, its own arguments and
# CMAKE_CXX_FLAGS counted on both sides; FALSE when they differ or either probe fails. The
# baseline prebuilt binary leaves its -march/-mtune out then (CMakeLists.txt).
function(embedstack_predefined_macros out)
  separate_arguments(user_flags UNIX_COMMAND "${CMAKE_CXX_COMPILER_ARG1} ${CMAKE_CXX_FLAGS}")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} ${user_flags} ${ARGN} -dM -E -x c++ -
                  INPUT_FILE /dev/null OUTPUT_VARIABLE macros RESULT_VARIABLE status ERROR_QUIET)
  if(NOT status EQUAL 0 OR macros STREQUAL "")
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  string(REPLACE "\n" ";" macros "${macros}")
  list(SORT macros)
  set(${out} "${macros}" PARENT_SCOPE)
endfunction()

function(embedstack_target_flags_change_nothing out)
  embedstack_predefined_macros(without)
  embedstack_predefined_macros(with ${ARGN})
  if(NOT without STREQUAL "" AND without STREQUAL with)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()
