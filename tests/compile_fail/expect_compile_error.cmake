# Builds one compile-fail target and passes only when the build fails with the diagnostic
# the case is about: every line "// expected error: <regex>" of the case's source must
# match the compiler's output (CMake regex; GCC's and clang's wordings may be given as
# alternatives). A build that succeeds, or fails for another reason, fails the test.
#
#   cmake -DBINARY=<build dir> -DTARGET=<target> -DSOURCE=<case.cpp> -P expect_compile_error.cmake

file(STRINGS "${SOURCE}" expectation_lines REGEX "^// expected error: ")
if(NOT expectation_lines)
  message(FATAL_ERROR "${SOURCE} names no expected error (a line \"// expected error: <regex>\")")
endif()

execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BINARY}" --target "${TARGET}"
                RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(result EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but must not:\n${output}")
endif()

foreach(line IN LISTS expectation_lines)
  string(REGEX REPLACE "^// expected error: " "" expected "${line}")
  if(NOT output MATCHES "${expected}")
    message(FATAL_ERROR "${TARGET} failed to compile, but not with the expected error\n  ${expected}\n"
                        "Compiler output:\n${output}")
  endif()
  message(STATUS "${TARGET}: found the expected error ${expected}")
endforeach()
