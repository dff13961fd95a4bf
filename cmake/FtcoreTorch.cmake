# Finds libtorch inside the pinned torch wheel of third_party/venv (or the
# Python named by FTCORE_PYTHON), through torch.utils.cmake_prefix_path.
set(FTCORE_PYTHON "${CMAKE_SOURCE_DIR}/third_party/venv/bin/python" CACHE FILEPATH
    "Python whose torch package provides libtorch (and runs the reference tests)")
if(NOT EXISTS "${FTCORE_PYTHON}")
  message(FATAL_ERROR "ftcore: ${FTCORE_PYTHON} not found; run third_party/bootstrap.sh first")
endif()
execute_process(
  COMMAND "${FTCORE_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path, end='')"
  OUTPUT_VARIABLE _torch_prefix RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "ftcore: ${FTCORE_PYTHON} cannot import torch; run third_party/bootstrap.sh")
endif()
list(APPEND CMAKE_PREFIX_PATH "${_torch_prefix}")

# The CUDA wheel's CMake config wants the toolkit (present on build machines)
# and an explicit arch list; H100/H200 are sm_90.
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST} AND NOT TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "9.0" CACHE STRING "CUDA archs for torch's CMake config")
endif()
if(NOT CUDAToolkit_ROOT AND EXISTS "/usr/local/cuda")
  set(CUDAToolkit_ROOT "/usr/local/cuda")
endif()
find_package(Torch REQUIRED)
get_filename_component(FTCORE_TORCH_LIB_DIR "${TORCH_LIBRARY}" DIRECTORY)
message(STATUS "ftcore: libtorch ${Torch_VERSION} from ${FTCORE_TORCH_LIB_DIR}")
