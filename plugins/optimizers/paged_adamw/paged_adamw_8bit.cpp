// optimizer/paged_adamw_8bit: options, the step (CPU: page by page through
// blockwise8's fused 8-bit Adam kernel; CUDA: per tensor on managed memory
// through ftcore_cuda_kernels), state by name as adamw_8bit's.
#include "paged_adamw_8bit.h"

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

namespace ftcore::plugins::paged_adamw {

namespace b8 = blockwise8;

sdk::ParamSpec paged_adamw_8bit_param_spec() {
  sdk::ParamSpec s = adamw_8bit::adamw_8bit_param_spec();
  add_paging_params(s);
  return s;
}

namespace {

std::vector<SlotFormat> adamw_8bit_slots() {
  const SlotFormat codes{1, 1}, absmax{b8::kStateBlock, 4}, fp32{1, 4};
  return {codes, codes, absmax, absmax, fp32, fp32};
}

}  // namespace

PagedAdamW8bit::PagedAdamW8bit(const std::vector<sdk::ParamGroupSpec>& groups,
                               const adamw_8bit::AdamW8bitOptions& options, const PagingOptions& paging)
    : sdk::Optimizer(groups, std::make_unique<adamw_8bit::AdamW8bitOptions>(options), options.weight_decay),
      options_(options),
      state_("paged_adamw_8bit", adamw_8bit_slots(), paging, b8::kStateBlock) {
  check_paging_options(name(), paging);
  check_same_device(*this);
  for (size_t g = 0; g < param_groups_.size(); ++g)
    for (size_t i = 0; i < param_groups_[g].params().size(); ++i) where_.emplace_back(g, i);
  steps_.assign(where_.size(), 0);
  gnorm_vec_.resize(where_.size());
  gnorm_scale_.assign(where_.size(), 1.0f);
}

void PagedAdamW8bit::ensure_state() {
  std::vector<at::Tensor> params;
  std::vector<std::vector<int64_t>> elements;
  for (size_t t = 0; t < where_.size(); ++t) {
    params.push_back(param(t));
    const int64_t n = param(t).numel();
    if (eight_bit(t)) elements.push_back({n, n, n, n, 0, 0});
    else elements.push_back({0, 0, 0, 0, n, n});
  }
  state_.ensure(params, elements);
}

at::Tensor PagedAdamW8bit::step(LossClosure closure) {
  c10::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    c10::AutoGradMode enable_grad(true);
    loss = closure();
  }
  std::vector<char> has_grad(where_.size(), 0);
  bool any = false;
  for (size_t t = 0; t < where_.size(); ++t) {
    const at::Tensor& p = param(t);
    if (!p.grad().defined()) continue;
    if (!p.is_cuda()) check_fused_cpu_parameter(where_[t].first, where_[t].second);
    has_grad[t] = 1;
    any = true;
    steps_[t] += 1;
    gnorm_scale_[t] = 1.0f;
    if (options_.percentile_clipping < 100) {  // as adamw_8bit: the last 100 gradient norms of this tensor
      if (!gnorm_vec_[t].defined()) gnorm_vec_[t] = at::zeros({100}, at::TensorOptions().dtype(at::kFloat));
      const at::Tensor& g = p.grad();
      const double n2 = p.is_cuda() ? g.to(at::kDouble).square().sum().item<double>()
                                    : b8::grad_square_sum(g.data_ptr(), g.numel(), g.scalar_type());
      gnorm_scale_[t] = b8::percentile_clipping_scale(gnorm_vec_[t].data_ptr<float>(), steps_[t],
                                                      options_.percentile_clipping, n2);
    }
  }
  if (!any) return loss;
  ensure_state();
  if (views_out_) {  // saved-state views were read since the last step: start within the budget
    state_.release_all();
    views_out_ = false;
  }
  if (state_.on_cuda()) step_cuda(has_grad);
  else step_cpu(has_grad);
  state_.report(++step_count_);
  return loss;
}

void PagedAdamW8bit::step_cpu(const std::vector<char>& has_grad) {
  PageStore& store = *state_.store();
  const auto [beta1, beta2] = options_.betas;
  std::vector<b8::Adam8bitScalars> scalars(where_.size());
  std::vector<char> needed(store.pages().size(), 0);
  for (size_t t = 0; t < where_.size(); ++t) {
    if (!has_grad[t]) continue;
    scalars[t] = b8::adam8bit_scalars(group_lr(where_[t].first), beta1, beta2, options_.eps,
                                      group_info(where_[t].first).weight_decay, steps_[t], gnorm_scale_[t]);
    for (size_t page : store.pages_of(t)) needed[page] = 1;
  }
  std::vector<size_t> order;
  for (size_t page = 0; page < needed.size(); ++page)
    if (needed[page]) order.push_back(page);
  store.for_each_page(order, [&](const Page& page) {
    std::vector<b8::Adam8bitTensor> work;
    for (const Piece& piece : page.pieces) {
      const size_t t = piece.tensor;
      if (!has_grad[t]) continue;
      const at::Tensor& p = param(t);
      const int64_t es = p.element_size();
      b8::Adam8bitTensor w;
      w.param = static_cast<char*>(p.data_ptr()) + piece.begin * es;
      w.grad = static_cast<const char*>(p.grad().data_ptr()) + piece.begin * es;
      w.numel = piece.end - piece.begin;
      w.dtype = p.scalar_type();
      if (eight_bit(t)) {  // piece.begin is a multiple of the 256-element block
        w.state1 = store.slot_data(t, kCodes1) + piece.begin;
        w.state2 = store.slot_data(t, kCodes2) + piece.begin;
        w.absmax1 = reinterpret_cast<float*>(store.slot_data(t, kAbsmax1)) + piece.begin / b8::kStateBlock;
        w.absmax2 = reinterpret_cast<float*>(store.slot_data(t, kAbsmax2)) + piece.begin / b8::kStateBlock;
      } else {
        w.exp_avg32 = reinterpret_cast<float*>(store.slot_data(t, kExpAvg32)) + piece.begin;
        w.exp_avg_sq32 = reinterpret_cast<float*>(store.slot_data(t, kExpAvgSq32)) + piece.begin;
      }
      w.scalars = scalars[t];
      work.push_back(w);
    }
    b8::fused_adam8bit_step(work);
  });
}

// adamw_8bit's CUDA update (the 8-bit launcher, or bitsandbytes' 32-bit rule in
// ATen ops for small tensors) on state in managed memory.
void PagedAdamW8bit::step_cuda(const std::vector<char>& has_grad) {
#if FTCORE_CUDA_KERNELS
  const auto [beta1, beta2] = options_.betas;
  std::vector<size_t> order;
  for (size_t t = 0; t < where_.size(); ++t)
    if (has_grad[t]) order.push_back(t);
  for (size_t i = 0; i < order.size(); ++i) {
    state_.managed()->prepare(order, i);
    const size_t t = order[i];
    const at::Tensor& p = param(t);
    const double lr = group_lr(where_[t].first), wd = group_info(where_[t].first).weight_decay;
    const b8::Adam8bitScalars sc = b8::adam8bit_scalars(lr, beta1, beta2, options_.eps, wd, steps_[t], gnorm_scale_[t]);
    const at::Tensor grad = p.grad().contiguous();
    if (!eight_bit(t)) {
      at::Tensor m = state_.view(t, kExpAvg32, p.sizes(), at::kFloat);
      at::Tensor v = state_.view(t, kExpAvgSq32, p.sizes(), at::kFloat);
      const at::Tensor gf = grad.to(at::kFloat) * gnorm_scale_[t];
      m.mul_(sc.beta1).add_(gf, sc.one_minus_beta1);
      v.mul_(sc.beta2).addcmul_(gf, gf, sc.one_minus_beta2);
      at::Tensor pf = p.to(at::kFloat);
      if (wd > 0.0) pf.mul_(sc.decay);
      pf.add_(m / (v.sqrt() + sc.eps_bc2), sc.step_size32);
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
    a.dtype = p.scalar_type() == at::kFloat      ? cuda::DType::F32
              : p.scalar_type() == at::kBFloat16 ? cuda::DType::BF16
                                                 : cuda::DType::F16;
    a.numel = p.numel();
    a.state1 = state_.data(t, kCodes1);
    a.state2 = state_.data(t, kCodes2);
    a.absmax1 = reinterpret_cast<float*>(state_.data(t, kAbsmax1));
    a.absmax2 = reinterpret_cast<float*>(state_.data(t, kAbsmax2));
    a.qmap1 = device_maps_.data_ptr<float>();
    a.qmap2 = device_maps_.data_ptr<float>() + 256;
    a.beta1 = sc.beta1;
    a.beta2 = sc.beta2;
    a.eps = sc.eps;
    a.lr = static_cast<float>(lr);
    a.weight_decay = static_cast<float>(wd);
    a.bias_correction1 = static_cast<float>(1.0 - std::pow(beta1, static_cast<double>(steps_[t])));
    a.bias_correction2 = static_cast<float>(1.0 - std::pow(beta2, static_cast<double>(steps_[t])));
    a.gnorm_scale = gnorm_scale_[t];
    cuda::adam8bit_blockwise_step(a, nullptr);
  }
#else
  (void)has_grad;
  throw std::invalid_argument("paged_adamw_8bit: parameters are on CUDA, but this build has no CUDA kernels");
#endif
}

sdk::TensorMap PagedAdamW8bit::state_by_name() const {
  sdk::TensorMap out = new_state();
  if (!state_.created()) return out;
  for (size_t t = 0; t < where_.size(); ++t) {
    if (steps_[t] == 0) continue;  // never stepped
    const std::string& n = param_name(t);
    const auto sizes = param(t).sizes();
    out.add(n + ".step", at::scalar_tensor(steps_[t], at::kLong));
    if (eight_bit(t)) {
      const int64_t blocks = b8::num_blocks(param(t).numel(), b8::kStateBlock);
      out.add(b8::q8_key(n, "exp_avg"), state_.view(t, kCodes1, sizes, at::kByte));
      out.add(b8::absmax_key(n, "exp_avg"), state_.view(t, kAbsmax1, {blocks}, at::kFloat));
      out.add(b8::q8_key(n, "exp_avg_sq"), state_.view(t, kCodes2, sizes, at::kByte));
      out.add(b8::absmax_key(n, "exp_avg_sq"), state_.view(t, kAbsmax2, {blocks}, at::kFloat));
    } else {
      out.add(n + ".exp_avg", state_.view(t, kExpAvg32, sizes, at::kFloat));
      out.add(n + ".exp_avg_sq", state_.view(t, kExpAvgSq32, sizes, at::kFloat));
    }
    if (gnorm_vec_[t].defined()) out.add(n + ".gnorm_vec", gnorm_vec_[t]);
  }
  views_out_ = true;  // whoever reads them pages them in
  return out;
}

void PagedAdamW8bit::load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) {
  state_.reset();  // fresh zeros
  steps_.assign(where_.size(), 0);
  gnorm_vec_.assign(where_.size(), at::Tensor());
  if (!accept_state(state, conversion)) return;  // another family's state, and the recipe says reset
  ensure_state();
  // As adamw_8bit: fp32 moments are quantized, 8-bit ones taken as saved (or
  // dequantized for tensors that keep fp32 state).
  for (size_t t = 0; t < where_.size(); ++t) {
    const std::string& n = param_name(t);
    const at::Tensor* step = state.find(n + ".step");
    if (!step) continue;  // a parameter that had not been stepped
    steps_[t] = step->item<int64_t>();
    const auto sizes = param(t).sizes();
    if (eight_bit(t)) {
      const int64_t blocks = b8::num_blocks(param(t).numel(), b8::kStateBlock);
      b8::Moment8bit m = b8::read_moment_8bit(state, n, "exp_avg", sizes);
      b8::Moment8bit v = b8::read_moment_8bit(state, n, "exp_avg_sq", sizes);
      state_.view(t, kCodes1, sizes, at::kByte).copy_(m.codes);
      state_.view(t, kAbsmax1, {blocks}, at::kFloat).copy_(m.absmax);
      state_.view(t, kCodes2, sizes, at::kByte).copy_(v.codes);
      state_.view(t, kAbsmax2, {blocks}, at::kFloat).copy_(v.absmax);
    } else {
      state_.view(t, kExpAvg32, sizes, at::kFloat).copy_(b8::read_moment_fp32(state, n, "exp_avg", sizes));
      state_.view(t, kExpAvgSq32, sizes, at::kFloat).copy_(b8::read_moment_fp32(state, n, "exp_avg_sq", sizes));
    }
    if (const at::Tensor* gv = state.find(n + ".gnorm_vec")) {
      if (gv->numel() != 100 || gv->scalar_type() != at::kFloat)
        throw std::runtime_error("paged_adamw_8bit: state tensor " + n + ".gnorm_vec must be fp32[100]");
      gnorm_vec_[t] = gv->to(at::kCPU).contiguous().clone();
    }
    state_.release_tensor(t);  // written through the mapping: back to the file, within the budget
  }
}

}  // namespace ftcore::plugins::paged_adamw
