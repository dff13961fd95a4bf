// GGUF architectures -> HF: names from gguf-py's tensor map (MODEL_TENSORS of
// each architecture), config keys as transformers' GGUF loader reads them
// (integrations/ggml.py) plus those it leaves to the model's defaults but
// llama.cpp stores (head_dim, softcapping, sliding window, experts).
#include "gguf_architectures.h"

#include <stdexcept>

namespace ftcore::gguf_convert {

namespace {

using Names = std::vector<std::pair<std::string, std::string>>;

Names with(Names base, const Names& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

const Names kAttention = {{"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"},
                          {"attn_v", "self_attn.v_proj"}, {"attn_output", "self_attn.o_proj"}};
const Names kQkNorms = {{"attn_q_norm", "self_attn.q_norm"}, {"attn_k_norm", "self_attn.k_norm"}};
const Names kGatedMlp = {{"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"}, {"ffn_down", "mlp.down_proj"}};
const Names kLlamaNorms = {{"attn_norm", "input_layernorm"}, {"ffn_norm", "post_attention_layernorm"}};
// Gemma 2/3 normalise before and after both attention and the MLP.
const Names kGemmaNorms = {{"attn_norm", "input_layernorm"},
                           {"post_attention_norm", "post_attention_layernorm"},
                           {"ffn_norm", "pre_feedforward_layernorm"},
                           {"post_ffw_norm", "post_feedforward_layernorm"}};

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> all = [] {
    std::vector<Architecture> a;
    a.push_back({"llama", "LlamaForCausalLM", "llama", with(with(kLlamaNorms, kAttention), kGatedMlp), true});
    a.push_back({"qwen2", "Qwen2ForCausalLM", "qwen2", with(with(kLlamaNorms, kAttention), kGatedMlp)});
    a.push_back({"qwen3", "Qwen3ForCausalLM", "qwen3", with(with(with(kLlamaNorms, kAttention), kQkNorms), kGatedMlp)});
    Architecture moe{"qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe",
                     with(with(kLlamaNorms, kAttention), with(kQkNorms, {{"ffn_gate_inp", "mlp.gate"}}))};
    moe.experts = true;
    a.push_back(moe);
    a.push_back({"gemma2", "Gemma2ForCausalLM", "gemma2", with(with(kGemmaNorms, kAttention), kGatedMlp), false, true});
    a.push_back({"gemma3", "Gemma3ForCausalLM", "gemma3_text",
                 with(with(with(kGemmaNorms, kAttention), kQkNorms), kGatedMlp), false, true});
    // Phi-3 keeps HF's fused projections: qkv_proj and gate_up_proj.
    a.push_back({"phi3", "Phi3ForCausalLM", "phi3",
                 with(kLlamaNorms, {{"attn_qkv", "self_attn.qkv_proj"}, {"attn_output", "self_attn.o_proj"},
                                    {"ffn_up", "mlp.gate_up_proj"}, {"ffn_down", "mlp.down_proj"}})});
    return a;
  }();
  return all;
}

std::string supported_names() {
  std::string list;
  for (const Architecture& a : architectures()) list += (list.empty() ? "" : ", ") + a.gguf_name;
  return list;
}

}  // namespace

const Architecture& architecture(const std::string& gguf_name, const std::string& where) {
  for (const Architecture& a : architectures())
    if (a.gguf_name == gguf_name) return a;
  throw std::runtime_error(where + ": architecture '" + gguf_name + "' is not supported by ftcore convert (" +
                           supported_names() + " are)");
}

nlohmann::ordered_json hf_config(const Architecture& arch, const gguf::File& file, bool tied_embeddings,
                                 const std::string& dtype_name) {
  const std::string a = arch.gguf_name + ".";
  auto has = [&](const std::string& key) { return file.find_metadata(a + key) != nullptr; };
  const int64_t heads = file.get_int(a + "attention.head_count");
  const int64_t kv_heads = has("attention.head_count_kv") ? file.get_int(a + "attention.head_count_kv") : heads;
  const int64_t hidden = file.get_int(a + "embedding_length");
  const int64_t layers = file.get_int(a + "block_count");
  // llama.cpp writes key_length when head_dim is not hidden / heads (Qwen3, Gemma).
  const int64_t head_dim = has("attention.key_length") ? file.get_int(a + "attention.key_length") : hidden / heads;
  const auto* vocab = file.find_metadata("tokenizer.ggml.tokens");
  const bool gemma = arch.norms_store_one_plus_weight;
  nlohmann::ordered_json config = {
      {"architectures", {arch.hf_class}},
      {"model_type", arch.model_type},
      {"hidden_size", hidden},
      {"intermediate_size", file.get_int(a + "feed_forward_length")},
      {"num_hidden_layers", layers},
      {"num_attention_heads", heads},
      {"num_key_value_heads", kv_heads},
      {gemma ? "hidden_activation" : "hidden_act", gemma ? "gelu_pytorch_tanh" : "silu"},
      {"max_position_embeddings", file.get_int(a + "context_length")},
      {"rms_norm_eps", file.get_float(a + "attention.layer_norm_rms_epsilon")},
      {"vocab_size", vocab ? static_cast<int64_t>(vocab->strings.size()) : file.get_int(a + "vocab_size")},
      {"tie_word_embeddings", tied_embeddings},
      {"torch_dtype", dtype_name},
  };
  // Qwen2's and Phi-3's HF configs derive head_dim from hidden / heads.
  if (arch.gguf_name != "qwen2" && arch.gguf_name != "phi3") config["head_dim"] = head_dim;
  // Without rope.freq_base the model's default applies (llama.cpp's and HF's agree per family).
  if (has("rope.freq_base")) config["rope_theta"] = file.get_float(a + "rope.freq_base");
  if (arch.gguf_name == "llama" || arch.gguf_name == "qwen3" || arch.gguf_name == "qwen3moe") {
    config["attention_bias"] = file.find_tensor("blk.0.attn_q.bias") != nullptr;
  }
  if (arch.gguf_name == "llama") config["mlp_bias"] = false;
  if (has("attention.sliding_window")) config["sliding_window"] = file.get_int(a + "attention.sliding_window");
  if (arch.gguf_name == "phi3" && has("rope.dimension_count") && file.get_int(a + "rope.dimension_count") != head_dim)
    config["partial_rotary_factor"] =  // Phi-4-mini rotates part of each head
        static_cast<double>(file.get_int(a + "rope.dimension_count")) / static_cast<double>(head_dim);
  if (gemma) {
    // Not stored in GGUF: llama.cpp scales queries by 1/sqrt(head_dim), by
    // 1/sqrt(hidden / heads) for the 27B models (46 layers in Gemma 2, 62 in Gemma 3).
    const bool is_27b = layers == (arch.gguf_name == "gemma2" ? 46 : 62);
    config["query_pre_attn_scalar"] = is_27b ? hidden / heads : head_dim;
    for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"})
      if (has(key)) config[key] = file.get_float(a + key);
  }
  if (arch.experts) {
    config["num_experts"] = file.get_int(a + "expert_count");
    config["num_experts_per_tok"] = file.get_int(a + "expert_used_count");
    config["moe_intermediate_size"] = file.get_int(a + "expert_feed_forward_length");
    config["norm_topk_prob"] = true;  // llama.cpp's qwen3moe renormalises the chosen experts' weights
    config["decoder_sparse_step"] = 1;
    config["mlp_only_layers"] = nlohmann::ordered_json::array();
  }
  return config;
}

}  // namespace ftcore::gguf_convert
