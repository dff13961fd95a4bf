// optimizer/adamw_8bit: options, lazy state, the step (CPU kernel or CUDA
// launcher), state by name with 32-bit <-> 8-bit conversion.
#include "adamw_8bit.h"

#include <cmath>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "blockwise8.h"
#include "optim8bit_kernel.h"
#include "state_codec.h"
#if FTCORE_CUDA_KERNELS
#include "cuda_kernels.h"
#endif

namespace ftcore::plugins::adamw_8bit {

namespace b8 = blockwise8;

sdk::ParamSpec adamw_8bit_param_spec() {
  sdk::ParamSpec s;
  s.add_float("lr", 1e-3).above(0.0).with_doc("Base learning rate (scaled per group by lr_scale and the scheduler).");
  s.add_pair("betas", sdk::FloatPair{0.9, 0.999})
      .with_range(0.0, 1.0, false, true)
      .with_doc("Decay rates of the first and second moment estimates.");
  s.add_float("eps", 1e-8).above(0.0).with_doc("Added to the denominator for numerical stability.");
  s.add_float("weight_decay", 0.01).at_least(0.0).with_doc(
      "Decoupled weight decay, p *= 1 - lr * weight_decay (groups may override); 0.01 as torch's AdamW and bitsandbytes'.");
  s.add_int("min_8bit_size", 4096).at_least(0).with_doc(
      "Tensors with fewer elements keep fp32 state (bitsandbytes' min_8bit_size).");
  s.add_int("percentile_clipping", 100).with_range(1, 100).with_doc(
      "Scale each gradient down to this percentile of its last 100 norms; 100 = off (bitsandbytes' rule).");
  s.add_bool("block_wise", true).with_doc("Blockwise quantization (256 elements per absmax); must be true.");
  return s;
}

AdamW8bitOptions adamw_8bit_options_from(const sdk::Options& options) {
  if (!options.get_bool("block_wise"))
    throw std::invalid_argument("adamw_8bit: option block_wise = false is not supported (only blockwise quantization is implemented)");
  AdamW8bitOptions o;
  o.lr = options.get_float("lr");
  o.betas = options.get_pair("betas");
  o.eps = options.get_float("eps");
  o.weight_decay = options.get_float("weight_decay");
  o.min_8bit_size = options.get_int("min_8bit_size");
  o.percentile_clipping = options.get_int("percentile_clipping");
  return o;
}

AdamW8bit::AdamW8bit(const std::vector<sdk::ParamGroupSpec>& groups, const AdamW8bitOptions& options)
    : sdk::Optimizer(groups, std::make_unique<AdamW8bitOptions>(options), options.weight_decay), options_(options) {
  for (const auto& g : param_groups_) state_.emplace_back(g.params().size());
}

AdamW8bit::ParamState& AdamW8bit::state_for(size_t group, size_t index) {
  ParamState& s = state_[group][index];
  if (!s.started()) {
    const at::Tensor& p = param_groups_[group].params()[index];
    if (eight_bit(p)) {  // bitsandbytes starts from zero codes and zero absmax
      const auto bytes = p.options().dtype(at::kByte);
      const auto f32 = p.options().dtype(at::kFloat);
      const int64_t blocks = b8::num_blocks(p.numel(), b8::kStateBlock);
      s.q1 = at::zeros(p.sizes(), bytes);
      s.q2 = at::zeros(p.sizes(), bytes);
      s.absmax1 = at::zeros({blocks}, f32);
      s.absmax2 = at::zeros({blocks}, f32);
    } else {
      s.m32 = at::zeros(p.sizes(), p.options().dtype(at::kFloat));
      s.v32 = at::zeros(p.sizes(), p.options().dtype(at::kFloat));
    }
  }
  if (options_.percentile_clipping < 100 && !s.gnorm_vec.defined())
    s.gnorm_vec = at::zeros({100}, at::TensorOptions().dtype(at::kFloat));
  return s;
}

at::Tensor AdamW8bit::step(LossClosure closure) {
  c10::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    c10::AutoGradMode enable_grad(true);
    loss = closure();
  }
  const auto [beta1, beta2] = options_.betas;
  std::vector<b8::Adam8bitTensor> work;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    const double lr = param_groups_[g].options().get_lr();
    const double wd = group_info(g).weight_decay;
    auto& params = param_groups_[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor& p = params[i];
      if (!p.grad().defined()) continue;
      const std::string& n = group_info(g).param_names[i];
      const bool on_cuda = p.is_cuda();
      if (on_cuda) {
#if !FTCORE_CUDA_KERNELS
        throw std::invalid_argument("adamw_8bit: parameter " + n + " is on CUDA but this build has no CUDA kernels");
#endif
      } else {
        check_fused_cpu_parameter(g, i);
      }
      ParamState& s = state_for(g, i);
      s.step += 1;
      float gnorm_scale = 1.0f;
      if (options_.percentile_clipping < 100) {
        const at::Tensor& gr = p.grad();
        const double n2 = on_cuda ? gr.to(at::kDouble).square().sum().item<double>()
                                  : b8::grad_square_sum(gr.data_ptr(), gr.numel(), gr.scalar_type());
        gnorm_scale = b8::percentile_clipping_scale(s.gnorm_vec.data_ptr<float>(), s.step,
                                                    options_.percentile_clipping, n2);
      }
      const b8::Adam8bitScalars sc = b8::adam8bit_scalars(lr, beta1, beta2, options_.eps, wd, s.step, gnorm_scale);
      if (on_cuda) {
#if FTCORE_CUDA_KERNELS
        const at::Tensor grad = p.grad().contiguous();
        if (!s.q1.defined()) {  // fp32 state: bitsandbytes' 32-bit rule in ATen ops on the device
          const at::Tensor gf = grad.to(at::kFloat) * gnorm_scale;
          s.m32.mul_(sc.beta1).add_(gf, sc.one_minus_beta1);
          s.v32.mul_(sc.beta2).addcmul_(gf, gf, sc.one_minus_beta2);
          at::Tensor pf = p.to(at::kFloat);
          if (wd > 0.0) pf.mul_(sc.decay);
          pf.add_(s.m32 / (s.v32.sqrt() + sc.eps_bc2), sc.step_size32);
          if (pf.data_ptr() != p.data_ptr()) p.copy_(pf);
          continue;
        }
        if (!device_maps_.defined() || device_maps_.device() != p.device()) {
          const auto& m1 = b8::signed_quant_map().code;
          const auto& m2 = b8::unsigned_quant_map().code;
          at::Tensor maps = at::empty({2, 256}, at::TensorOptions().dtype(at::kFloat));
          std::copy(m1.begin(), m1.end(), maps.data_ptr<float>());
          std::copy(m2.begin(), m2.end(), maps.data_ptr<float>() + 256);
          device_maps_ = maps.to(p.device());
        }
        cuda::Adam8bitArgs a;
        a.param = p.data_ptr();
        a.grad = grad.data_ptr();
        a.dtype = p.scalar_type() == at::kFloat ? cuda::DType::F32
                  : p.scalar_type() == at::kBFloat16 ? cuda::DType::BF16 : cuda::DType::F16;
        a.numel = p.numel();
        a.state1 = s.q1.data_ptr<uint8_t>();
        a.state2 = s.q2.data_ptr<uint8_t>();
        a.absmax1 = s.absmax1.data_ptr<float>();
        a.absmax2 = s.absmax2.data_ptr<float>();
        a.qmap1 = device_maps_.data_ptr<float>();
        a.qmap2 = device_maps_.data_ptr<float>() + 256;
        a.beta1 = sc.beta1;
        a.beta2 = sc.beta2;
        a.eps = sc.eps;
        a.lr = static_cast<float>(lr);
        a.weight_decay = static_cast<float>(wd);
        a.bias_correction1 = static_cast<float>(1.0 - std::pow(beta1, static_cast<double>(s.step)));
        a.bias_correction2 = static_cast<float>(1.0 - std::pow(beta2, static_cast<double>(s.step)));
        a.gnorm_scale = gnorm_scale;
        cuda::adam8bit_blockwise_step(a, nullptr);
#endif
        continue;
      }
      b8::Adam8bitTensor t;
      t.param = p.data_ptr();
      t.grad = p.grad().data_ptr();
      t.numel = p.numel();
      t.dtype = p.scalar_type();
      if (s.q1.defined()) {
        t.state1 = s.q1.data_ptr<uint8_t>();
        t.state2 = s.q2.data_ptr<uint8_t>();
        t.absmax1 = s.absmax1.data_ptr<float>();
        t.absmax2 = s.absmax2.data_ptr<float>();
      } else {
        t.exp_avg32 = s.m32.data_ptr<float>();
        t.exp_avg_sq32 = s.v32.data_ptr<float>();
      }
      t.scalars = sc;
      work.push_back(t);
    }
  }
  b8::fused_adam8bit_step(work);
  return loss;
}

sdk::TensorMap AdamW8bit::state_by_name() const {
  sdk::TensorMap out = new_state();
  for (size_t g = 0; g < state_.size(); ++g) {
    for (size_t i = 0; i < state_[g].size(); ++i) {
      const ParamState& s = state_[g][i];
      if (!s.started()) continue;  // never stepped
      const std::string& n = group_info(g).param_names[i];
      out.add(n + ".step", at::scalar_tensor(s.step, at::kLong));
      if (s.q1.defined()) {
        out.add(b8::q8_key(n, "exp_avg"), s.q1);
        out.add(b8::absmax_key(n, "exp_avg"), s.absmax1);
        out.add(b8::q8_key(n, "exp_avg_sq"), s.q2);
        out.add(b8::absmax_key(n, "exp_avg_sq"), s.absmax2);
      } else {
        out.add(n + ".exp_avg", s.m32);
        out.add(n + ".exp_avg_sq", s.v32);
      }
      if (s.gnorm_vec.defined()) out.add(n + ".gnorm_vec", s.gnorm_vec);
    }
  }
  return out;
}

void AdamW8bit::load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) {
  if (!accept_state(state, conversion)) {  // another family's state, and the recipe says reset
    for (auto& group : state_)
      for (auto& s : group) s = ParamState{};
    return;
  }
  // Same family: adamw's fp32 moments are quantized, 8-bit ones taken as saved
  // (or dequantized for tensors that keep fp32 state here).
  for (size_t g = 0; g < state_.size(); ++g) {
    const auto& params = param_groups_[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string& n = group_info(g).param_names[i];
      const at::Tensor& p = params[i];
      ParamState s;
      const at::Tensor* step = state.find(n + ".step");
      if (!step) {  // a parameter that had not been stepped
        state_[g][i] = s;
        continue;
      }
      s.step = step->item<int64_t>();
      if (eight_bit(p)) {
        b8::Moment8bit m = b8::read_moment_8bit(state, n, "exp_avg", p.sizes());
        b8::Moment8bit v = b8::read_moment_8bit(state, n, "exp_avg_sq", p.sizes());
        s.q1 = m.codes.to(p.device());
        s.absmax1 = m.absmax.to(p.device());
        s.q2 = v.codes.to(p.device());
        s.absmax2 = v.absmax.to(p.device());
      } else {
        s.m32 = b8::read_moment_fp32(state, n, "exp_avg", p.sizes()).to(p.device());
        s.v32 = b8::read_moment_fp32(state, n, "exp_avg_sq", p.sizes()).to(p.device());
      }
      if (const at::Tensor* gv = state.find(n + ".gnorm_vec")) {
        if (gv->numel() != 100 || gv->scalar_type() != at::kFloat)
          throw std::runtime_error("adamw_8bit: state tensor " + n + ".gnorm_vec must be fp32[100]");
        s.gnorm_vec = gv->to(at::kCPU).contiguous().clone();
      }
      state_[g][i] = std::move(s);
    }
  }
}

}  // namespace ftcore::plugins::adamw_8bit
