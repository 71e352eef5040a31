# The moe-route commands: the tool's binary and the in-process tool fuzzer
# (tests/fuzz/tool_fuzzer.cpp) compile the same files.
set(MOE_ROUTE_COMMAND_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/run.cpp ${CMAKE_CURRENT_LIST_DIR}/route_command.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gen_command.cpp ${CMAKE_CURRENT_LIST_DIR}/replay_command.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sweep_command.cpp ${CMAKE_CURRENT_LIST_DIR}/batch_command.cpp)
