# MOE_ROUTING_BUILD_PYTHON: the `moe_routing` Python package (tools/python), on by default
# for the top-level project where pybind11 and the interpreter's headers are found; left
# out with one line otherwise. The PyTorch operator (torch.ops.moe_routing.route) is built
# into it where libtorch's headers match the interpreter's torch.
#
# The interpreter is /usr/bin/python3 where it exists, explicitly: Debian's python3-torch
# and python3-numpy are installed for it, and a python3 earlier on PATH (pyenv, conda) may
# have neither, or another ABI. -DMOE_ROUTING_PYTHON=/path/to/python3 chooses another.
if(EXISTS /usr/bin/python3)
  set(moe_routing_default_python /usr/bin/python3)
else()
  find_program(moe_routing_found_python python3)
  set(moe_routing_default_python "${moe_routing_found_python}")
endif()
set(MOE_ROUTING_PYTHON "${moe_routing_default_python}" CACHE FILEPATH
    "The Python interpreter the moe_routing module is built for and tested with")
option(MOE_ROUTING_BUILD_PYTHON "Build the moe_routing Python module (needs pybind11 and the Python headers)"
       ${MOE_ROUTING_TOP_LEVEL})

set(moe_routing_python_missing "")
if(MOE_ROUTING_BUILD_PYTHON)
  if(NOT MOE_ROUTING_PYTHON)
    set(moe_routing_python_missing "no python3 interpreter found")
  else()
    set(Python_EXECUTABLE ${MOE_ROUTING_PYTHON})
    find_package(Python 3.8 QUIET COMPONENTS Interpreter Development.Module)
    if(NOT Python_Development.Module_FOUND)
      set(moe_routing_python_missing "the headers of ${MOE_ROUTING_PYTHON} not found (apt-get install python3-dev)")
    else()
      set(PYBIND11_FINDPYTHON ON)
      find_package(pybind11 2.6 CONFIG QUIET)
      if(NOT pybind11_FOUND)
        set(moe_routing_python_missing "pybind11 not found (apt-get install pybind11-dev)")
      endif()
    endif()
  endif()
  if(moe_routing_python_missing)
    message(STATUS "moe_routing: the Python module is left out: ${moe_routing_python_missing}")
    set(MOE_ROUTING_BUILD_PYTHON OFF)
  endif()
endif()

# The operator links the system's libtorch, so the interpreter must import that very torch
# (Debian's python3-torch with libtorch-dev); a pip wheel of another version would load two.
set(MOE_ROUTING_TORCH_OPS OFF)
if(MOE_ROUTING_BUILD_PYTHON)
  find_path(MOE_ROUTING_TORCH_INCLUDE_DIR torch/library.h)
  find_library(MOE_ROUTING_TORCH_LIBRARY torch)
  find_library(MOE_ROUTING_TORCH_CPU_LIBRARY torch_cpu)
  find_library(MOE_ROUTING_C10_LIBRARY c10)
  execute_process(COMMAND ${MOE_ROUTING_PYTHON} -c "import torch; print(torch.__version__)"
                  OUTPUT_VARIABLE moe_routing_python_torch OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET RESULT_VARIABLE moe_routing_python_torch_result)
  set(moe_routing_headers_torch "")
  if(MOE_ROUTING_TORCH_INCLUDE_DIR
     AND EXISTS ${MOE_ROUTING_TORCH_INCLUDE_DIR}/torch/csrc/api/include/torch/version.h)
    file(STRINGS ${MOE_ROUTING_TORCH_INCLUDE_DIR}/torch/csrc/api/include/torch/version.h moe_routing_torch_version_lines
         REGEX "#define TORCH_VERSION_(MAJOR|MINOR) ")
    string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*" "\\1.\\2" moe_routing_headers_torch
           "${moe_routing_torch_version_lines}")
  endif()
  if(NOT moe_routing_python_torch_result EQUAL 0)
    message(STATUS "moe_routing: the PyTorch operator is left out: ${MOE_ROUTING_PYTHON} cannot import torch "
                   "(apt-get install python3-torch libtorch-dev); the module routes NumPy arrays")
  elseif(NOT moe_routing_headers_torch OR NOT MOE_ROUTING_TORCH_LIBRARY OR NOT MOE_ROUTING_TORCH_CPU_LIBRARY
         OR NOT MOE_ROUTING_C10_LIBRARY)
    message(STATUS "moe_routing: the PyTorch operator is left out: libtorch's headers and libraries not found "
                   "(apt-get install libtorch-dev); route() still takes torch tensors")
  elseif(NOT moe_routing_python_torch MATCHES "^${moe_routing_headers_torch}[.]")
    message(STATUS "moe_routing: the PyTorch operator is left out: libtorch's headers are ${moe_routing_headers_torch}, "
                   "${MOE_ROUTING_PYTHON} imports torch ${moe_routing_python_torch}")
  else()
    set(MOE_ROUTING_TORCH_OPS ON)
    message(STATUS "moe_routing: Python module for ${MOE_ROUTING_PYTHON}, with the PyTorch operator "
                   "(torch ${moe_routing_python_torch})")
  endif()
endif()
