# Quantized bases end to end: QLoRA on nf4 vs transformers + bitsandbytes + PEFT,
# `ftcore quantize` (nf4, gptq) and `ftcore merge` on quantized folders, LoRA on a
# GPTQ base, ReLoRA on nf4 (tests/reference/quantized_model_reference.py).
add_test(NAME quantized_model_reference
  COMMAND "${FTCORE_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/quantized_model_reference.py" $<TARGET_FILE:ftcore>)
set_tests_properties(quantized_model_reference PROPERTIES TIMEOUT 2400 SKIP_RETURN_CODE 77
  ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1;FTCORE_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE")
# QLoRA on the default model: nf4 and gptq bases vs the dense base, eval loss within 20% (40 steps each).
add_test(NAME qlora_default_model
  COMMAND "${FTCORE_PYTHON}" "${CMAKE_SOURCE_DIR}/tests/integration/qlora_default_test.py" $<TARGET_FILE:ftcore>)
set_tests_properties(qlora_default_model PROPERTIES TIMEOUT 2400 SKIP_RETURN_CODE 77
  ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1;FTCORE_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE")
