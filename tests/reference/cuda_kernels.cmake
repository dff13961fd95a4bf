# ftcore_cuda_kernels (plugins/cuda) against bitsandbytes and a host fp32
# reference; the kernel tests skip without a CUDA device, the host-reference
# tests against bitsandbytes run everywhere. `cuda_kernels_test --benchmark`
# measures bandwidth on a GPU. Only when the kernels are built.
if(TARGET ftcore_cuda_kernels)
  ftcore_add_gtest(NAME cuda_kernels_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/unit/cuda_kernels_test.cpp ${CMAKE_SOURCE_DIR}/tests/unit/cuda_kernels_bench.cpp
    LINK_LIBRARIES ftcore_cuda_kernels nlohmann_json::nlohmann_json)
  # Bit-exact comparisons need the host reference's fp32 operations unfused,
  # as the kernels' (--fmad=false).
  target_compile_options(cuda_kernels_test PRIVATE -ffp-contract=off)
endif()
