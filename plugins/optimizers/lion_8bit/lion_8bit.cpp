// optimizer/lion_8bit: options, lazy state, the step (CPU kernel or CUDA
// launcher), state by name with 32-bit <-> 8-bit conversion.
#include "lion_8bit.h"

#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "blockwise8.h"
#include "optim8bit_kernel.h"
#include "state_codec.h"
#if FTCORE_CUDA_KERNELS
#include "cuda_kernels.h"
#endif

namespace ftcore::plugins::lion_8bit {

namespace b8 = blockwise8;

sdk::ParamSpec lion_8bit_param_spec() {
  sdk::ParamSpec s;
  s.add_float("lr", 1e-4).above(0.0).with_doc(
      "Base learning rate (scaled per group by lr_scale and the scheduler); Lion wants 3-10x less than AdamW.");
  s.add_pair("betas", sdk::FloatPair{0.9, 0.99})
      .with_range(0.0, 1.0)
      .with_doc("beta1 interpolates the update direction, beta2 decays the momentum.");
  s.add_float("weight_decay", 0.0).at_least(0.0).with_doc(
      "Decoupled weight decay, p *= 1 - lr * weight_decay (groups may override).");
  s.add_int("min_8bit_size", 4096).at_least(0).with_doc(
      "Tensors with fewer elements keep fp32 state (bitsandbytes' min_8bit_size).");
  s.add_int("percentile_clipping", 100).with_range(1, 100).with_doc(
      "Scale each gradient down to this percentile of its last 100 norms; 100 = off (bitsandbytes' rule).");
  s.add_bool("block_wise", true).with_doc("Blockwise quantization (256 elements per absmax); must be true.");
  return s;
}

Lion8bitOptions lion_8bit_options_from(const sdk::Options& options) {
  if (!options.get_bool("block_wise"))
    throw std::invalid_argument("lion_8bit: option block_wise = false is not supported (only blockwise quantization is implemented)");
  Lion8bitOptions o;
  o.lr = options.get_float("lr");
  o.betas = options.get_pair("betas");
  o.weight_decay = options.get_float("weight_decay");
  o.min_8bit_size = options.get_int("min_8bit_size");
  o.percentile_clipping = options.get_int("percentile_clipping");
  return o;
}

Lion8bit::Lion8bit(const std::vector<sdk::ParamGroupSpec>& groups, const Lion8bitOptions& options)
    : sdk::Optimizer(groups, std::make_unique<Lion8bitOptions>(options), options.weight_decay), options_(options) {
  for (const auto& g : param_groups_) state_.emplace_back(g.params().size());
}

Lion8bit::ParamState& Lion8bit::state_for(size_t group, size_t index) {
  ParamState& s = state_[group][index];
  if (!s.started()) {
    const at::Tensor& p = param_groups_[group].params()[index];
    if (eight_bit(p)) {  // bitsandbytes starts from zero codes and zero absmax
      s.q1 = at::zeros(p.sizes(), p.options().dtype(at::kByte));
      s.absmax1 = at::zeros({b8::num_blocks(p.numel(), b8::kStateBlock)}, p.options().dtype(at::kFloat));
    } else {
      s.m32 = at::zeros(p.sizes(), p.options().dtype(at::kFloat));
    }
  }
  if (options_.percentile_clipping < 100 && !s.gnorm_vec.defined())
    s.gnorm_vec = at::zeros({100}, at::TensorOptions().dtype(at::kFloat));
  return s;
}

at::Tensor Lion8bit::step(LossClosure closure) {
  c10::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    c10::AutoGradMode enable_grad(true);
    loss = closure();
  }
  const auto [beta1, beta2] = options_.betas;
  std::vector<b8::Lion8bitTensor> work;
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
        throw std::invalid_argument("lion_8bit: parameter " + n + " is on CUDA but this build has no CUDA kernels");
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
      const b8::Lion8bitScalars sc = b8::lion8bit_scalars(lr, beta1, beta2, wd, gnorm_scale);
      if (on_cuda) {
#if FTCORE_CUDA_KERNELS
        const at::Tensor grad = p.grad().contiguous();
        if (!s.q1.defined()) {  // fp32 state: bitsandbytes' 32-bit rule in ATen ops on the device
          const at::Tensor gf = grad.to(at::kFloat) * gnorm_scale;
          at::Tensor pf = p.to(at::kFloat);
          if (wd > 0.0) pf.mul_(sc.decay);
          pf.add_(s.m32.mul(sc.beta1).add_(gf, sc.one_minus_beta1).sign_(), sc.neg_lr);
          s.m32.mul_(sc.beta2).add_(gf, sc.one_minus_beta2);
          if (pf.data_ptr() != p.data_ptr()) p.copy_(pf);
          continue;
        }
        if (!device_map_.defined() || device_map_.device() != p.device()) {
          const auto& m1 = b8::signed_quant_map().code;
          at::Tensor map = at::empty({256}, at::TensorOptions().dtype(at::kFloat));
          std::copy(m1.begin(), m1.end(), map.data_ptr<float>());
          device_map_ = map.to(p.device());
        }
        cuda::Lion8bitArgs a;
        a.param = p.data_ptr();
        a.grad = grad.data_ptr();
        a.dtype = p.scalar_type() == at::kFloat ? cuda::DType::F32
                  : p.scalar_type() == at::kBFloat16 ? cuda::DType::BF16 : cuda::DType::F16;
        a.numel = p.numel();
        a.state1 = s.q1.data_ptr<uint8_t>();
        a.absmax1 = s.absmax1.data_ptr<float>();
        a.qmap1 = device_map_.data_ptr<float>();
        a.beta1 = sc.beta1;
        a.beta2 = sc.beta2;
        a.lr = static_cast<float>(lr);
        a.weight_decay = static_cast<float>(wd);
        a.gnorm_scale = gnorm_scale;
        cuda::lion8bit_blockwise_step(a, nullptr);
#endif
        continue;
      }
      b8::Lion8bitTensor t;
      t.param = p.data_ptr();
      t.grad = p.grad().data_ptr();
      t.numel = p.numel();
      t.dtype = p.scalar_type();
      if (s.q1.defined()) {
        t.state1 = s.q1.data_ptr<uint8_t>();
        t.absmax1 = s.absmax1.data_ptr<float>();
      } else {
        t.exp_avg32 = s.m32.data_ptr<float>();
      }
      t.scalars = sc;
      work.push_back(t);
    }
  }
  b8::fused_lion8bit_step(work);
  return loss;
}

sdk::TensorMap Lion8bit::state_by_name() const {
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
      } else {
        out.add(n + ".exp_avg", s.m32);
      }
      if (s.gnorm_vec.defined()) out.add(n + ".gnorm_vec", s.gnorm_vec);
    }
  }
  return out;
}

void Lion8bit::load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) {
  if (!accept_state(state, conversion)) {  // another family's state, and the recipe says reset
    for (auto& group : state_)
      for (auto& s : group) s = ParamState{};
    return;
  }
  // Same family: lion's fp32 momentum is quantized, 8-bit taken as saved.
  for (size_t g = 0; g < state_.size(); ++g) {
    const auto& params = param_groups_[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string& n = group_info(g).param_names[i];
      const at::Tensor& p = params[i];
      ParamState s;
      if (!b8::has_moment(state, n, "exp_avg")) {  // a parameter that had not been stepped
        state_[g][i] = s;
        continue;
      }
      // optimizer/lion saves no step count; it only indexes the clipping history.
      const at::Tensor* step = state.find(n + ".step");
      s.step = step ? step->item<int64_t>() : 0;
      if (eight_bit(p)) {
        b8::Moment8bit m = b8::read_moment_8bit(state, n, "exp_avg", p.sizes());
        s.q1 = m.codes.to(p.device());
        s.absmax1 = m.absmax.to(p.device());
      } else {
        s.m32 = b8::read_moment_fp32(state, n, "exp_avg", p.sizes()).to(p.device());
      }
      if (const at::Tensor* gv = state.find(n + ".gnorm_vec")) {
        if (gv->numel() != 100 || gv->scalar_type() != at::kFloat)
          throw std::runtime_error("lion_8bit: state tensor " + n + ".gnorm_vec must be fp32[100]");
        s.gnorm_vec = gv->to(at::kCPU).contiguous().clone();
      }
      state_[g][i] = std::move(s);
    }
  }
}

}  // namespace ftcore::plugins::lion_8bit
