# The 8-bit optimizers (optimizer/adamw_8bit, lion_8bit) and their blockwise8
# library against bitsandbytes 0.50 (CPU backend), and the family test through `ftcore run`.
add_executable(blockwise8_tool ${CMAKE_SOURCE_DIR}/tests/tools/blockwise8_tool.cpp)
target_link_libraries(blockwise8_tool PRIVATE ftcore::core ftcore_blockwise8)
set_target_properties(blockwise8_tool PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests")
# The reference scripts load these plugins at run time through `ftcore plugin steps`.
add_dependencies(blockwise8_tool ftcore ftcore_optimizer_adamw_8bit ftcore_optimizer_lion_8bit
  ftcore_optimizer_adamw ftcore_optimizer_lion)
# Dynamic maps, codes, absmax and dequantized values bit-equal to bitsandbytes'.
add_test(NAME blockwise8_reference
  COMMAND "${FTCORE_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/blockwise8_reference.py" $<TARGET_FILE:blockwise8_tool>)
set_tests_properties(blockwise8_reference PROPERTIES TIMEOUT 600 ENVIRONMENT "FTCORE_PLUGIN_PATH=;FTCORE_NUM_THREADS=2")
# adamw_8bit vs bitsandbytes.optim.AdamW8bit (50 steps, every ISA), resume, state bytes, adamw <-> adamw_8bit conversion.
add_test(NAME adamw_8bit_reference
  COMMAND "${FTCORE_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/adamw_8bit_reference.py" $<TARGET_FILE:ftcore>)
set_tests_properties(adamw_8bit_reference PROPERTIES TIMEOUT 900 ENVIRONMENT "FTCORE_PLUGIN_PATH=;FTCORE_NUM_THREADS=2")
# lion_8bit vs bitsandbytes.optim.Lion8bit, the same checks with lion <-> lion_8bit.
add_test(NAME lion_8bit_reference
  COMMAND "${FTCORE_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/lion_8bit_reference.py" $<TARGET_FILE:ftcore>)
set_tests_properties(lion_8bit_reference PROPERTIES TIMEOUT 900 ENVIRONMENT "FTCORE_PLUGIN_PATH=;FTCORE_NUM_THREADS=2")
# ftcore's side of benchmarks/optimizer_step.py (step time and bandwidth vs torch.optim.AdamW and a STREAM triad).
if(FTCORE_BUILD_BENCHMARKS)
  add_executable(optimizer_step_driver ${CMAKE_SOURCE_DIR}/benchmarks/optimizer_step_driver.cpp)
  target_link_libraries(optimizer_step_driver PRIVATE ftcore::core nlohmann_json::nlohmann_json)
  set_target_properties(optimizer_step_driver PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/benchmarks")
  add_dependencies(optimizer_step_driver ftcore_optimizer_adamw ftcore_optimizer_adamw_8bit ftcore_optimizer_lion
    ftcore_optimizer_lion_8bit ftcore_optimizer_adafactor)
endif()
# The families through `ftcore run` (tiny model, full fine-tune): 8-bit/paged/adafactor losses within stated
# bands of adamw's/lion's, paged_adamw_32bit = adamw exactly; adamw -> adamw_8bit -> adamw resume without a
# spike; lion -> adamw_8bit refused with "convert" (exit 1), trained with "reset".
add_test(NAME optimizer_family
  COMMAND "${FTCORE_PYTHON}" "${CMAKE_SOURCE_DIR}/tests/integration/optimizer_family_test.py" $<TARGET_FILE:ftcore>)
set_tests_properties(optimizer_family PROPERTIES TIMEOUT 1200 SKIP_RETURN_CODE 77
  ENVIRONMENT "FTCORE_PLUGIN_PATH=;FTCORE_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;HF_HUB_OFFLINE=1")
if(FTCORE_BUILD_BENCHMARKS)  # the driver also times the paged optimizers (unbounded)
  add_dependencies(optimizer_step_driver ftcore_optimizer_paged_adamw)
endif()
