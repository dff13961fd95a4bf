# optimizer/paged_adamw_32bit (and paged_adamw_8bit when built) vs torch.optim.AdamW /
# bitsandbytes, bit-equal to optimizer/adamw (adamw_8bit) with a resident budget of a quarter
# of the state; the budget measured (accounted and mincore), resume, state interchange, bad options.
if(TARGET ftcore_optimizer_paged_adamw)
  add_test(NAME paged_adamw_reference
    COMMAND "${FTCORE_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/paged_adamw_reference.py" $<TARGET_FILE:ftcore>)
  set_tests_properties(paged_adamw_reference PROPERTIES TIMEOUT 900
    ENVIRONMENT "FTCORE_PLUGIN_PATH=;FTCORE_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE")
endif()
# ftcore's side of benchmarks/paged_optimizer.py (step time paged vs unbounded vs adamw on 135M parameters).
if(FTCORE_BUILD_BENCHMARKS AND TARGET ftcore_optimizer_paged_adamw)
  add_executable(paged_optimizer_driver ${CMAKE_SOURCE_DIR}/benchmarks/paged_optimizer_driver.cpp)
  target_link_libraries(paged_optimizer_driver PRIVATE ftcore::core nlohmann_json::nlohmann_json)
  set_target_properties(paged_optimizer_driver PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/benchmarks")
  add_dependencies(paged_optimizer_driver ftcore_optimizer_paged_adamw ftcore_optimizer_adamw ftcore_optimizer_adamw_8bit)
endif()
