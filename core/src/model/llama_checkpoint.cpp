// Per-layer gradient checkpointing (Chen et al., https://arxiv.org/abs/1604.06174):
// forward runs a decoder layer without recording its graph and keeps only
// the layer's input; backward re-runs the layer with grad on and
// differentiates that recomputation. Activation memory drops from every
// intermediate of every layer to one [B, T, C] tensor per layer, for one
// extra layer forward in backward. The recomputation replays what the
// forward saw: the CPU generator's state (so a LoRA dropout draws the same
// mask) and the autocast state (backward runs outside the trainer's autocast
// scope), so the recomputed activations, and hence the gradients, are the
// ones a plain backward would use.
//
// The layer's trainable parameters are inputs of the autograd node, so their
// gradients flow out of it like any other (torch.autograd.grad works too,
// not only .backward()).
// Shapes: B batch, T tokens, C hidden.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "ftcore/model_layers.h"
#include "short_row_attention.h"

namespace ftcore::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What backward needs besides tensors: the layer and this forward's masks and rotary tables.
struct CheckpointState : torch::CustomClassHolder {
  std::shared_ptr<DecoderLayer> layer;
  AttentionInputs inputs;
  std::vector<at::Tensor> params;  // the layer's trainable parameters at forward, in node-input order
  at::Tensor cpu_rng_state;        // the default CPU generator before the forward
  bool autocast = false;           // CPU autocast during the forward, and its dtype
  at::ScalarType autocast_dtype = at::kBFloat16;
};

// Puts the forward's generator and autocast state in place for the
// recomputation and restores the caller's afterwards.
class ReplayForwardState {
 public:
  explicit ReplayForwardState(const CheckpointState& state)
      : generator_(at::detail::getDefaultCPUGenerator()),
        saved_rng_(generator_.get_state()),
        saved_autocast_(at::autocast::is_autocast_enabled(at::kCPU)),
        saved_dtype_(at::autocast::get_autocast_dtype(at::kCPU)) {
    {
      std::lock_guard<std::mutex> lock(generator_.mutex());
      generator_.set_state(state.cpu_rng_state);
    }
    at::autocast::set_autocast_enabled(at::kCPU, state.autocast);
    at::autocast::set_autocast_dtype(at::kCPU, state.autocast_dtype);
  }
  ~ReplayForwardState() {
    at::autocast::set_autocast_enabled(at::kCPU, saved_autocast_);
    at::autocast::set_autocast_dtype(at::kCPU, saved_dtype_);
    if (!saved_autocast_) at::autocast::clear_cache();
    std::lock_guard<std::mutex> lock(generator_.mutex());
    generator_.set_state(saved_rng_);
  }

 private:
  at::Generator generator_;
  at::Tensor saved_rng_;
  bool saved_autocast_;
  at::ScalarType saved_dtype_;
};

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  // `params` only connect the node to the parameters; the layer reads its own.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList params,
                            const c10::intrusive_ptr<CheckpointState>& state) {
    (void)params;
    ctx->save_for_backward({x});
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    ctx->saved_data["x_requires_grad"] = x.requires_grad();
    CheckpointPassScope first_forward(CheckpointPass::first_forward);
    return state->layer->forward(x, state->inputs, nullptr);  // grad mode is off inside Function::forward
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(ctx->saved_data["state"].toCapsule());
    const bool x_requires_grad = ctx->saved_data["x_requires_grad"].toBool();
    const std::vector<at::Tensor>& params = state->params;
    variable_list result(params.size() + 2);  // x, each parameter, the state
    if (!grad_outputs[0].defined()) return result;

    at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(x_requires_grad);
    variable_list wrt;
    if (x_requires_grad) wrt.push_back(x);
    wrt.insert(wrt.end(), params.begin(), params.end());
    at::Tensor out;
    {
      at::AutoGradMode enable_grad(true);
      ReplayForwardState replay(*state);
      CheckpointPassScope recomputation(CheckpointPass::recomputation);
      out = state->layer->forward(x, state->inputs, nullptr);
    }
    variable_list grads = torch::autograd::grad({out}, wrt, {grad_outputs[0]}, /*retain_graph=*/false,
                                                /*create_graph=*/false, /*allow_unused=*/true);
    size_t next = 0;
    if (x_requires_grad) result[0] = grads[next++];
    for (size_t i = 0; i < params.size(); ++i) result[1 + i] = grads[next++];
    return result;
  }

  static std::vector<at::Tensor> trainable_parameters(DecoderLayer& layer) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& p : layer.parameters())
      if (p.requires_grad()) out.push_back(p);
    return out;
  }
};

}  // namespace

at::Tensor checkpoint_layer(const std::shared_ptr<DecoderLayer>& layer, const at::Tensor& x,
                            const AttentionInputs& inputs) {
  auto state = c10::make_intrusive<CheckpointState>();
  state->layer = layer;
  state->inputs = inputs;
  state->params = CheckpointFunction::trainable_parameters(*layer);
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    state->cpu_rng_state = generator.get_state();
  }
  state->autocast = at::autocast::is_autocast_enabled(at::kCPU);
  state->autocast_dtype = at::autocast::get_autocast_dtype(at::kCPU);
  return CheckpointFunction::apply(x, at::TensorList(state->params), state);
}

}  // namespace ftcore::model
