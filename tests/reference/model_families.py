"""The tiny random configs of every supported model family, shared by the
reference tests (model_reference.py: logits, generation; lora_reference.py:
LoRA against PEFT; family_training.py: `ftcore run`).

Each entry is built with transformers' own config and model classes; each
switches on the family's optional features so that the reference exercises
them: q/k norms, sliding windows shorter than the test sequences (T = 20),
no-RoPE layers, soft-capping, local/global RoPE bases, partial rotary,
longrope beyond original_max_position_embeddings, Granite's multipliers.
"""
from transformers import (Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig, GraniteConfig,
                          GraniteForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Olmo2Config, Olmo2ForCausalLM, Phi3Config, Phi3ForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM, SmolLM3Config, SmolLM3ForCausalLM)

COMMON = dict(vocab_size=96, hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.1,
              pad_token_id=0, bos_token_id=1, eos_token_id=2)

# Phi-3 longrope: 8 rotary dims (partial 0.5 of head_dim 16) -> 4 factors each.
_LONGROPE = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
             "original_max_position_embeddings": 8, "short_factor": [1.0, 1.3, 1.9, 2.6],
             "long_factor": [1.5, 3.0, 7.5, 16.0]}

# name -> (model class, config); each Llama-family entry exercises one feature beyond the first.
TINY = {
    "llama_gqa_tied": (LlamaForCausalLM, LlamaConfig(**COMMON, tie_word_embeddings=True)),
    "llama_mha_bias": (LlamaForCausalLM, LlamaConfig(**{**COMMON, "num_key_value_heads": 4}, attention_bias=True,
                                                     mlp_bias=True, head_dim=32)),
    "llama_rope_linear": (LlamaForCausalLM, LlamaConfig(**COMMON, rope_scaling={"rope_type": "linear", "factor": 2.5})),
    # max_position_embeddings below the sequence so dynamic NTK really rescales.
    "llama_rope_dynamic": (LlamaForCausalLM, LlamaConfig(**{**COMMON, "max_position_embeddings": 12},
                                                         rope_scaling={"rope_type": "dynamic", "factor": 3.0})),
    # original context 64 puts head_dim 16's wavelengths in all three llama3 bands.
    "llama_rope_llama3": (LlamaForCausalLM, LlamaConfig(**COMMON, rope_theta=500000.0, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64})),
    "qwen2_bias": (Qwen2ForCausalLM, Qwen2Config(**COMMON, rope_theta=1000000.0, tie_word_embeddings=False)),
    "mistral_window": (MistralForCausalLM, MistralConfig(**COMMON, sliding_window=6)),
    # Per-head q/k norms; layers from 1 on slide with a 6-token window.
    "qwen3_qk_norm": (Qwen3ForCausalLM, Qwen3Config(**COMMON, head_dim=16, use_sliding_window=True, sliding_window=6,
                                                    max_window_layers=1, tie_word_embeddings=False)),
    # Layer 1 without RoPE.
    "smollm3_nope": (SmolLM3ForCausalLM, SmolLM3Config(**COMMON, no_rope_layers=[1, 0, 1])),
    # Post-norms, q/k norms over the whole projection.
    "olmo2_post_norm": (Olmo2ForCausalLM, Olmo2Config(**COMMON)),
    "granite_multipliers": (GraniteForCausalLM, GraniteConfig(**COMMON, embedding_multiplier=6.0,
                                                              residual_multiplier=0.3, attention_multiplier=0.09,
                                                              logits_scaling=4.0)),
    # Caps low enough that tanh bends the scores and logits; sliding layers 0 and 2.
    "gemma2_softcap": (Gemma2ForCausalLM, Gemma2Config(**COMMON, head_dim=16, query_pre_attn_scalar=24,
                                                       sliding_window=6, attn_logit_softcapping=1.5,
                                                       final_logit_softcapping=3.0)),
    # Local (theta 1e4) and global (linear-scaled, theta 1e6) RoPE, q/k norms, two sliding layers then a global one.
    "gemma3_local_global": (Gemma3ForCausalLM, Gemma3TextConfig(
        **COMMON, head_dim=16, query_pre_attn_scalar=16, sliding_window=6,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"], final_logit_softcapping=4.0,
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})),
    # Fused qkv_proj / gate_up_proj, partial rotary, longrope past 8 positions.
    "phi3_longrope": (Phi3ForCausalLM, Phi3Config(**COMMON, original_max_position_embeddings=8,
                                                  rope_parameters=_LONGROPE)),
}

# The new families (issue #17), each once: the greedy-generation and training checks run on these.
FAMILIES = ["qwen3_qk_norm", "smollm3_nope", "olmo2_post_norm", "granite_multipliers", "gemma2_softcap",
            "gemma3_local_global", "phi3_longrope"]
