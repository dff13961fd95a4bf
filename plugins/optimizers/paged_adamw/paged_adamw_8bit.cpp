// optimizer/paged_adamw_8bit: options, the step (CPU: page by page through
// blockwise8's fused 8-bit Adam kernel; CUDA: per tensor on managed memory
// through ftcore_cuda_kernels), state by name as adamw_8bit's.
#include "paged_adamw_8bit.h"

#include <ATen/ATen.h>

#include "blockwise8.h"
#include "ftcore/sdk/step_guard.h"
#include "optimizer_8bit.h"
#include "state_codec.h"

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
    : PagedOptimizer(groups, std::make_unique<adamw_8bit::AdamW8bitOptions>(options), options.weight_decay,
                     PagedState("paged_adamw_8bit", adamw_8bit_slots(), paging, b8::kStateBlock)),
      options_(options) {
  gnorm_vec_.resize(num_tensors());
  gnorm_scale_.assign(num_tensors(), 1.0f);
}

std::vector<int64_t> PagedAdamW8bit::slot_elements(size_t t) const {
  const int64_t n = param(t).numel();
  if (eight_bit(t)) return {n, n, n, n, 0, 0};
  return {0, 0, 0, 0, n, n};
}

at::Tensor PagedAdamW8bit::step(LossClosure closure) {
  sdk::StepGuard guard(closure);
  const std::vector<char> has_grad = begin_step([&](size_t t) {
    // As adamw_8bit: the last 100 gradient norms of this tensor.
    if (options_.percentile_clipping < 100 && !gnorm_vec_[t].defined())
      gnorm_vec_[t] = at::zeros({100}, at::TensorOptions().dtype(at::kFloat));
    gnorm_scale_[t] =
        b8::gradient_clipping_scale(param(t).grad(), gnorm_vec_[t], steps_[t], options_.percentile_clipping);
  });
  if (has_grad.empty()) return guard.loss();
  if (state_.on_cuda())
    step_cuda(has_grad);
  else
    step_cpu(has_grad);
  end_step();
  return guard.loss();
}

void PagedAdamW8bit::step_cpu(const std::vector<char>& has_grad) {
  PageStore& store = *state_.store();
  std::vector<b8::Adam8bitScalars> scalars(num_tensors());
  for (size_t t = 0; t < num_tensors(); ++t)
    if (has_grad[t])
      scalars[t] = b8::adam8bit_scalars(group_lr(group_of(t)), options_.betas.first, options_.betas.second,
                                        options_.eps, group_info(group_of(t)).weight_decay, steps_[t], gnorm_scale_[t]);
  const std::vector<size_t> order = pages_to_update(has_grad);
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
  for_each_tensor_on_device(has_grad, [&](size_t t) {
    const at::Tensor& p = param(t);
    const double lr = group_lr(group_of(t)), wd = group_info(group_of(t)).weight_decay;
    const b8::Adam8bitScalars sc = b8::adam8bit_scalars(lr, options_.betas.first, options_.betas.second, options_.eps,
                                                        wd, steps_[t], gnorm_scale_[t]);
    b8::CudaAdamState s;
    if (eight_bit(t)) {
      s = {state_.data(t, kCodes1), state_.data(t, kCodes2), reinterpret_cast<float*>(state_.data(t, kAbsmax1)),
           reinterpret_cast<float*>(state_.data(t, kAbsmax2))};
    } else {
      s.exp_avg32 = state_.view(t, kExpAvg32, p.sizes(), at::kFloat);
      s.exp_avg_sq32 = state_.view(t, kExpAvgSq32, p.sizes(), at::kFloat);
    }
    b8::adam8bit_cuda_step(p, s, sc, lr, wd, options_.betas, steps_[t], gnorm_scale_[t], device_maps_);
  });
}

void PagedAdamW8bit::save_tensor(sdk::TensorMap& out, size_t t) const {
  const std::string& n = param_name(t);
  const auto sizes = param(t).sizes();
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

void PagedAdamW8bit::load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) {
  gnorm_vec_.assign(num_tensors(), at::Tensor());
  PagedOptimizer::load_state_by_name(state, conversion);
}

// As adamw_8bit: fp32 moments are quantized, 8-bit ones taken as saved (or
// dequantized for tensors that keep fp32 state).
void PagedAdamW8bit::load_tensor(const sdk::TensorMap& state, size_t t) {
  const std::string& n = param_name(t);
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
  gnorm_vec_[t] = b8::gnorm_history_slot(options_.percentile_clipping, "paged_adamw_8bit").load(state, n, param(t));
}

}  // namespace ftcore::plugins::paged_adamw
