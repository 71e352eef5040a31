# The moe-route commands: the tool's binary and the in-process tool fuzzer
# (tests/fuzz/tool_fuzzer.cpp) compile the same files and link the same range-v3
# (range-v3::range-v3: host-side views in the sweep's grid expansion and printers).
# Found here because both include this file, from directories whose imported targets
# do not see each other.
find_package(range-v3 REQUIRED)
set(MOE_ROUTE_COMMAND_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/run.cpp ${CMAKE_CURRENT_LIST_DIR}/route_command.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gen_command.cpp ${CMAKE_CURRENT_LIST_DIR}/replay_command.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sweep_command.cpp ${CMAKE_CURRENT_LIST_DIR}/batch_command.cpp)
