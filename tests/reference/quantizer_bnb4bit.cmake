# quantizer/nf4 + quantizer/fp4 vs bitsandbytes (included by tests/reference/CMakeLists.txt).
add_executable(quantize_tensors ${CMAKE_SOURCE_DIR}/tests/tools/quantize_tensors.cpp)
target_link_libraries(quantize_tensors PRIVATE ftcore::core nlohmann_json::nlohmann_json)
set_target_properties(quantize_tensors PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests")
if(TARGET ftcore_quantizer_bnb4bit)
  add_dependencies(quantize_tensors ftcore_quantizer_bnb4bit)  # loaded at run time
endif()
# Codes, absmax, nested state and dequantization bit for bit vs bitsandbytes (every ISA),
# files both ways, tiled matmul / matmul_grad_input vs torch, bytes per parameter.
add_test(NAME bnb4bit_reference
  COMMAND "${FTCORE_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/bnb4bit_reference.py" $<TARGET_FILE:quantize_tensors>)
set_tests_properties(bnb4bit_reference PROPERTIES TIMEOUT 1500
  ENVIRONMENT "FTCORE_PLUGIN_PATH=;FTCORE_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE")
