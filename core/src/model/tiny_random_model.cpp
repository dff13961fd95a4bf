// The tiny random Llama of tiny_random_model.h.
#include "ftcore/tiny_random_model.h"

#include <string>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include "ftcore/model_config.h"

namespace ftcore {

std::shared_ptr<Model> tiny_random_llama(bool tied_embeddings) {
  const nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                                 {"model_type", "llama"},
                                 {"vocab_size", 64},
                                 {"hidden_size", 32},
                                 {"intermediate_size", 48},
                                 {"num_hidden_layers", 2},
                                 {"num_attention_heads", 4},
                                 {"num_key_value_heads", 2},
                                 {"max_position_embeddings", 64},
                                 {"rms_norm_eps", 1e-5},
                                 {"attention_bias", true},
                                 {"tie_word_embeddings", tied_embeddings}};
  auto model = std::make_shared<Model>(parse_model_config(config.dump(), "the tiny random Llama"),
                                       at::TensorOptions().dtype(at::kFloat));
  at::Generator gen = at::detail::createCPUGenerator(11);
  at::NoGradGuard no_grad;
  for (auto& p : model->named_parameters()) {
    p.tensor.normal_(0.0, 0.1, gen);
    if (p.name.find("norm") != std::string::npos) p.tensor.add_(1.0);
  }
  return model;
}

at::Tensor tiny_random_llama_logits(sdk::ModelView& view) {
  auto& model = dynamic_cast<Model&>(view);
  model.module().eval();
  ForwardInput input;
  input.input_ids = at::arange(14, at::kLong).reshape({2, 7}).mul(5).remainder(64);
  return model.forward(input);
}

}  // namespace ftcore
