# Build conveniences for this project's own targets (never imposed on consumers).
include(GNUInstallDirs)

find_program(MOE_ROUTING_CCACHE ccache)
if(MOE_ROUTING_CCACHE AND MOE_ROUTING_TOP_LEVEL AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${MOE_ROUTING_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${MOE_ROUTING_CCACHE})
endif()

if(MOE_ROUTING_TOP_LEVEL AND NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

# Warnings for the project's own executables.
add_library(moe_routing_warnings INTERFACE)
target_compile_options(moe_routing_warnings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>)

# Tune for the machine the build runs on (benchmarks, demo); tests stay portable so
# that every x86-64 build is checked against the same plain code.
option(MOE_ROUTING_NATIVE "Compile benchmarks and examples with -march=native" ON)
add_library(moe_routing_native INTERFACE)
if(MOE_ROUTING_NATIVE)
  include(CheckCXXCompilerFlag)
  check_cxx_compiler_flag(-march=native MOE_ROUTING_HAS_MARCH_NATIVE)
  if(MOE_ROUTING_HAS_MARCH_NATIVE)
    target_compile_options(moe_routing_native INTERFACE -march=native)
  endif()
endif()

# Sanitized builds of the project's own targets: MOE_ROUTING_SANITIZE=address,undefined
# or thread. UBSan findings abort, so a test run fails on any of them.
set(MOE_ROUTING_SANITIZE "" CACHE STRING "Sanitizers for the project's own targets (e.g. address,undefined or thread)")
if(MOE_ROUTING_SANITIZE AND MOE_ROUTING_TOP_LEVEL)
  add_compile_options(-fsanitize=${MOE_ROUTING_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${MOE_ROUTING_SANITIZE})
endif()
