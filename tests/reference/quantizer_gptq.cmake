# quantizer/gptq: the test tool, and the reference test against an independent
# float64 GPTQ, round-to-nearest, an independent AutoGPTQ-layout (un)packer and torch.
add_executable(gptq_tool ${CMAKE_SOURCE_DIR}/tests/tools/gptq_tool.cpp)
target_link_libraries(gptq_tool PRIVATE ftcore::core nlohmann_json::nlohmann_json)
set_target_properties(gptq_tool PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests")
add_dependencies(gptq_tool ftcore_quantizer_gptq)  # loaded at run time
add_test(NAME quantizer_gptq_reference
  COMMAND "${FTCORE_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/gptq_reference.py" $<TARGET_FILE:gptq_tool>)
set_tests_properties(quantizer_gptq_reference PROPERTIES TIMEOUT 900
  ENVIRONMENT "FTCORE_PLUGIN_PATH=;FTCORE_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1")
