# Configures this project as the top level with one of its own test dependencies hidden
# (-DHIDE=doctest|benchmark|range-v3) and checks that configuring succeeds and leaves the part
# out with one warning naming it. Invoked by CTest: -DSOURCE=<repo> -DWORK=<scratch dir> -DHIDE=...
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK} -G Ninja -DMOE_ROUTING_BUILD_CUDA=OFF
                        -DCMAKE_DISABLE_FIND_PACKAGE_${HIDE}=TRUE
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "configuring without ${HIDE} failed:\n${err}")
endif()
set(expected_doctest "the tests (doctest not found)")
set(expected_benchmark "the benchmarks (Google Benchmark not found)")
set(expected_range-v3 "the moe-route tool (range-v3 not found)")
string(REGEX REPLACE "[ \n]+" " " flat "${err}")  # CMake wraps a warning's lines
string(FIND "${flat}" "${expected_${HIDE}}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "configuring without ${HIDE} did not say \"left out ${expected_${HIDE}}\":\n${err}")
endif()
string(REGEX MATCHALL "moe_routing: left out" warnings "${flat}")
list(LENGTH warnings count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "expected one warning, got ${count}:\n${err}")
endif()
