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
# QLoRA bases on Qwen3, Gemma 3, Phi-3 (fused projections) and Mixtral (fused experts):
# nf4/fp4 slots, bytes and logits vs transformers + bitsandbytes; gptq folders of each
# family vs gptq_layout's unpacking (tests/reference/quantized_families_reference.py).
ftcore_add_gtest(NAME quantized_families_test SOURCES quantized_families_test.cpp
  LINK_LIBRARIES nlohmann_json::nlohmann_json)
target_include_directories(quantized_families_test PRIVATE "${CMAKE_SOURCE_DIR}/tests/unit")
add_dependencies(quantized_families_test ftcore ftcore_quantizer_bnb4bit ftcore_quantizer_gptq)  # run / loaded at run time
# `ftcore run`: 10 QLoRA steps (nf4) on a tiny Qwen3, Gemma 3 and Mixtral: the loss falls; the adapter
# loads in PEFT on transformers' nf4 model; ftcore merge into the bnb-saved base (dense and --requantize).
add_test(NAME family_qlora_training_reference
  COMMAND "${FTCORE_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/family_training.py" $<TARGET_FILE:ftcore> qlora)
set_tests_properties(family_qlora_training_reference PROPERTIES TIMEOUT 600
  ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1;FTCORE_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE")
