// optimizer/paged_adamw_32bit: options, the paged state, the step (CPU:
// page by page through optimizer/adamw's fused kernel; CUDA: per tensor on
// managed memory), state by name.
#include "paged_adamw.h"

#include <cmath>

#include <ATen/ATen.h>

#include "ftcore/sdk/slot_optimizer.h"
#include "state_codec.h"

namespace ftcore::plugins::paged_adamw {

sdk::ParamSpec paged_adamw_32bit_param_spec() {
  sdk::ParamSpec s = adamw::adamw_param_spec();
  add_paging_params(s);
  return s;
}

namespace {

std::vector<SlotFormat> adamw_slots(bool amsgrad) { return std::vector<SlotFormat>(amsgrad ? 3 : 2, SlotFormat{1, 4}); }

}  // namespace

PagedAdamW::PagedAdamW(const std::vector<sdk::ParamGroupSpec>& groups, const adamw::AdamWOptions& options,
                       const PagingOptions& paging)
    : PagedOptimizer(groups, std::make_unique<adamw::AdamWOptions>(options), options.weight_decay,
                     PagedState("paged_adamw_32bit", adamw_slots(options.amsgrad), paging, 1)),
      options_(options) {}

std::vector<int64_t> PagedAdamW::slot_elements(size_t t) const {
  return std::vector<int64_t>(options_.amsgrad ? 3 : 2, param(t).numel());
}

at::Tensor PagedAdamW::step(LossClosure closure) {
  sdk::StepGuard guard(closure);
  std::vector<adamw::AdamWScalars> scalars(num_tensors());
  const std::vector<char> has_grad = begin_step([&](size_t t) {
    // The scalars exactly as optimizer/adamw computes them (the same function).
    scalars[t] = adamw::adamw_scalars(group_lr(group_of(t)), group_info(group_of(t)).weight_decay, options_.betas,
                                      options_.eps, steps_[t]);
  });
  if (has_grad.empty()) return guard.loss();
  if (state_.on_cuda())
    step_cuda(has_grad);
  else
    step_cpu(scalars, has_grad);
  end_step();
  return guard.loss();
}

void PagedAdamW::step_cpu(const std::vector<adamw::AdamWScalars>& scalars, const std::vector<char>& has_grad) {
  PageStore& store = *state_.store();
  const std::vector<size_t> order = pages_to_update(has_grad);
  const bool ams = options_.amsgrad;
  store.for_each_page(order, [&](const Page& page) {
    std::vector<adamw::AdamWTensor> work;
    for (const Piece& piece : page.pieces) {
      if (!has_grad[piece.tensor]) continue;
      const at::Tensor& p = param(piece.tensor);
      const int64_t es = p.element_size();
      auto slot = [&](size_t s) { return reinterpret_cast<float*>(store.slot_data(piece.tensor, s)) + piece.begin; };
      work.push_back({static_cast<char*>(p.data_ptr()) + piece.begin * es,
                      static_cast<const char*>(p.grad().data_ptr()) + piece.begin * es, slot(kExpAvg), slot(kExpAvgSq),
                      ams ? slot(kMaxExpAvgSq) : nullptr, piece.end - piece.begin, p.scalar_type(),
                      scalars[piece.tensor]});
    }
    adamw::fused_adamw_step(work);
  });
}

// torch.optim.AdamW's single-tensor update in ATen ops, on fp32 state in managed memory.
void PagedAdamW::step_cuda(const std::vector<char>& has_grad) {
  const auto [beta1, beta2] = options_.betas;
  for_each_tensor_on_device(has_grad, [&](size_t t) {
    const at::Tensor& p = param(t);
    const double lr = group_lr(group_of(t)), wd = group_info(group_of(t)).weight_decay;
    const double step = static_cast<double>(steps_[t]);
    at::Tensor m = state_.view(t, kExpAvg, p.sizes(), at::kFloat);
    at::Tensor v = state_.view(t, kExpAvgSq, p.sizes(), at::kFloat);
    at::Tensor g = p.grad().to(at::kFloat);
    at::Tensor pf = p.scalar_type() == at::kFloat ? p : p.to(at::kFloat);
    pf.mul_(1.0 - lr * wd);
    m.lerp_(g, 1.0 - beta1);
    v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
    at::Tensor second = v;
    if (options_.amsgrad) {
      at::Tensor vmax = state_.view(t, kMaxExpAvgSq, p.sizes(), at::kFloat);
      at::maximum_out(vmax, vmax, v);
      second = vmax;
    }
    at::Tensor denom = (second.sqrt() / std::sqrt(1.0 - std::pow(beta2, step))).add_(options_.eps);
    pf.addcdiv_(m, denom, -(lr / (1.0 - std::pow(beta1, step))));
    if (pf.data_ptr() != p.data_ptr()) p.copy_(pf);
  });
}

sdk::TensorMap PagedAdamW::state_by_name() const {
  sdk::TensorMap out = PagedOptimizer::state_by_name();
  out.metadata["amsgrad"] = options_.amsgrad ? "true" : "false";
  return out;
}

void PagedAdamW::save_tensor(sdk::TensorMap& out, size_t t) const {
  const std::string& n = param_name(t);
  const auto sizes = param(t).sizes();
  out.add(n + ".exp_avg", state_.view(t, kExpAvg, sizes, at::kFloat));
  out.add(n + ".exp_avg_sq", state_.view(t, kExpAvgSq, sizes, at::kFloat));
  if (options_.amsgrad) out.add(n + ".max_exp_avg_sq", state_.view(t, kMaxExpAvgSq, sizes, at::kFloat));
}

void PagedAdamW::load_tensor(const sdk::TensorMap& state, size_t t) {
  const std::string& n = param_name(t);
  const auto sizes = param(t).sizes();
  // fp32 moments as saved, or 8-bit ones dequantized (blockwise8/state_codec.h, as optimizer/adamw reads them).
  auto load = [&](const char* slot, Slot into) {
    state_.view(t, into, sizes, at::kFloat).copy_(blockwise8::read_moment_fp32(state, n, slot, sizes));
  };
  load("exp_avg", kExpAvg);
  load("exp_avg_sq", kExpAvgSq);
  if (options_.amsgrad) {
    // Resuming AMSGrad from plain Adam state starts the maximum at the current moment (as adamw does).
    if (state.find(n + ".max_exp_avg_sq")) {
      state_.view(t, kMaxExpAvgSq, sizes, at::kFloat)
          .copy_(sdk::require_state_tensor(state, n, "max_exp_avg_sq", sizes));
    } else {
      state_.view(t, kMaxExpAvgSq, sizes, at::kFloat).copy_(state_.view(t, kExpAvgSq, sizes, at::kFloat));
    }
  }
}

}  // namespace ftcore::plugins::paged_adamw
