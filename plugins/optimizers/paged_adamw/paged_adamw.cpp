// optimizer/paged_adamw_32bit: options, the paged state, the step (CPU:
// page by page through optimizer/adamw's fused kernel; CUDA: per tensor on
// managed memory), state by name.
#include "paged_adamw.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "adamw_kernel.h"
#include "state_codec.h"

namespace ftcore::plugins::paged_adamw {

void add_paging_params(sdk::ParamSpec& spec) {
  spec.add_int("max_resident_bytes", 0)
      .at_least(0)
      .with_doc("Most bytes of optimizer state in memory at once (CPU: the rest waits in a file under the run "
                "folder; CUDA: on the host). 0: unbounded. At least page_bytes.");
  spec.add_int("page_bytes", 16 << 20)
      .at_least(64 << 10)
      .with_doc("Bytes of state per page, the unit moved in and out (tensors larger than a page are split).");
  spec.add_int("prefetch_pages", 2).at_least(0).with_doc("Pages read ahead of the one being updated.");
}

PagingOptions paging_options_from(const sdk::Options& options) {
  PagingOptions o;
  o.max_resident_bytes = options.get_int("max_resident_bytes");
  o.page_bytes = options.get_int("page_bytes");
  o.prefetch_pages = options.get_int("prefetch_pages");
  return o;
}

sdk::ParamSpec paged_adamw_32bit_param_spec() {
  sdk::ParamSpec s = adamw::adamw_param_spec();
  add_paging_params(s);
  return s;
}

void PagedState::ensure(const std::vector<at::Tensor>& params, const std::vector<std::vector<int64_t>>& elements) {
  if (created()) return;
  if (!params.empty() && params.front().is_cuda()) {
    managed_ = std::make_unique<ManagedState>(slots_, elements, params.front().device().index(),
                                              paging_.max_resident_bytes, paging_.prefetch_pages, owner_);
    return;
  }
  PageStoreOptions o;
  o.page_bytes = paging_.page_bytes;
  o.max_resident_bytes = paging_.max_resident_bytes;
  o.prefetch_pages = paging_.prefetch_pages;
  o.align_elems = align_elems_;
  o.directory = directory_;
  o.file_name = owner_ + ".state";
  o.owner = owner_;
  store_ = std::make_unique<PageStore>(slots_, elements, o);
}

void PagedState::reset() {
  store_.reset();
  managed_.reset();
}

uint8_t* PagedState::data(size_t tensor, size_t slot) const {
  return managed_ ? managed_->data(tensor, slot) : store_->slot_data(tensor, slot);
}

at::Tensor PagedState::view(size_t tensor, size_t slot, at::IntArrayRef sizes, at::ScalarType dtype) const {
  std::shared_ptr<void> owner = managed_ ? managed_->owner() : store_->mapping_owner();
  auto options = at::TensorOptions().dtype(dtype);
  if (managed_) options = options.device(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(managed_->device())));
  return at::from_blob(data(tensor, slot), sizes, [owner](void*) {}, options);
}

void PagedState::release_tensor(size_t tensor) {
  if (store_) store_->release_tensor(tensor);
}

void PagedState::release_all() {
  if (store_) store_->release_all();
}

PagingStats PagedState::stats() const {
  if (store_) return store_->stats();
  if (managed_) return managed_->stats();
  return {};
}

void PagedState::report(int64_t step) const {
  const char* env = std::getenv("FTCORE_PAGED_STATS");
  if (!env || std::string(env) != "1") return;
  const PagingStats s = stats();
  std::fprintf(stderr,
               "paged_stats {\"optimizer\": \"%s\", \"step\": %lld, \"max_resident_bytes\": %lld, \"page_bytes\": %lld, "
               "\"file_bytes\": %lld, \"num_pages\": %lld, \"largest_page_bytes\": %lld, \"pages_in\": %lld, "
               "\"pages_out\": %lld, \"resident_bytes\": %lld, \"resident_high_water\": %lld, "
               "\"measured_high_water\": %lld}\n",
               owner_.c_str(), static_cast<long long>(step), static_cast<long long>(paging_.max_resident_bytes),
               static_cast<long long>(paging_.page_bytes), static_cast<long long>(s.file_bytes),
               static_cast<long long>(s.num_pages), static_cast<long long>(s.largest_page_bytes),
               static_cast<long long>(s.pages_in), static_cast<long long>(s.pages_out),
               static_cast<long long>(s.resident_bytes), static_cast<long long>(s.resident_high_water),
               static_cast<long long>(s.measured_high_water));
}

void check_paging_options(const std::string& owner, const PagingOptions& paging) {
  if (paging.max_resident_bytes > 0 && paging.max_resident_bytes < paging.page_bytes)
    throw std::invalid_argument(owner + ": max_resident_bytes = " + std::to_string(paging.max_resident_bytes) +
                                " is smaller than page_bytes = " + std::to_string(paging.page_bytes) +
                                "; one page must fit (or set max_resident_bytes = 0 for no bound)");
}

void check_same_device(const sdk::Optimizer& optimizer) {
  std::optional<at::Device> first;
  for (size_t g = 0; g < optimizer.num_groups(); ++g) {
    const auto& params = optimizer.param_groups()[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Device d = params[i].device();
      if (!first) first = d;
      if (d != *first)
        throw std::invalid_argument(optimizer.name() + ": parameter " + optimizer.group_info(g).param_names[i] +
                                    " is on " + d.str() + ", the others on " + first->str() +
                                    "; paged state lives on one device");
    }
  }
}

namespace {

std::vector<SlotFormat> adamw_slots(bool amsgrad) {
  return std::vector<SlotFormat>(amsgrad ? 3 : 2, SlotFormat{1, 4});
}

}  // namespace

PagedAdamW::PagedAdamW(const std::vector<sdk::ParamGroupSpec>& groups, const adamw::AdamWOptions& options,
                       const PagingOptions& paging)
    : sdk::Optimizer(groups, std::make_unique<adamw::AdamWOptions>(options), options.weight_decay),
      options_(options),
      state_("paged_adamw_32bit", adamw_slots(options.amsgrad), paging, 1) {
  check_paging_options(name(), paging);
  check_same_device(*this);
  for (size_t g = 0; g < param_groups_.size(); ++g)
    for (size_t i = 0; i < param_groups_[g].params().size(); ++i) where_.emplace_back(g, i);
  steps_.assign(where_.size(), 0);
}

void PagedAdamW::ensure_state() {
  std::vector<at::Tensor> params;
  std::vector<std::vector<int64_t>> elements;
  for (size_t t = 0; t < where_.size(); ++t) {
    params.push_back(param(t));
    elements.emplace_back(options_.amsgrad ? 3 : 2, param(t).numel());
  }
  state_.ensure(params, elements);
}

at::Tensor PagedAdamW::step(LossClosure closure) {
  c10::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    c10::AutoGradMode enable_grad(true);
    loss = closure();
  }
  const auto [beta1, beta2] = options_.betas;
  std::vector<char> has_grad(where_.size(), 0);
  std::vector<adamw::AdamWScalars> scalars(where_.size());
  bool any = false;
  for (size_t t = 0; t < where_.size(); ++t) {
    const at::Tensor& p = param(t);
    if (!p.grad().defined()) continue;
    if (!p.is_cuda()) check_fused_cpu_parameter(where_[t].first, where_[t].second);
    has_grad[t] = 1;
    any = true;
    steps_[t] += 1;
    // The scalars exactly as optimizer/adamw computes them: double, then rounded to fp32.
    const double lr = group_lr(where_[t].first), wd = group_info(where_[t].first).weight_decay;
    const double step = static_cast<double>(steps_[t]);
    const double bias_correction1 = 1.0 - std::pow(beta1, step);
    const double bias_correction2 = 1.0 - std::pow(beta2, step);
    adamw::AdamWScalars& sc = scalars[t];
    sc.decay = static_cast<float>(1.0 - lr * wd);
    sc.one_minus_beta1 = static_cast<float>(1.0 - beta1);
    sc.lerp_from_end = std::abs(1.0 - beta1) >= 0.5;
    sc.beta2 = static_cast<float>(beta2);
    sc.one_minus_beta2 = static_cast<float>(1.0 - beta2);
    sc.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
    sc.eps = static_cast<float>(options_.eps);
    sc.neg_step_size = static_cast<float>(-(lr / bias_correction1));
  }
  if (!any) return loss;
  ensure_state();
  if (views_out_) {  // saved-state views were read since the last step: start within the budget
    state_.release_all();
    views_out_ = false;
  }
  if (state_.on_cuda()) step_cuda(has_grad);
  else step_cpu(scalars, has_grad);
  state_.report(++step_count_);
  return loss;
}

void PagedAdamW::step_cpu(const std::vector<adamw::AdamWScalars>& scalars, const std::vector<char>& has_grad) {
  PageStore& store = *state_.store();
  std::vector<char> needed(store.pages().size(), 0);
  for (size_t t = 0; t < where_.size(); ++t)
    if (has_grad[t])
      for (size_t page : store.pages_of(t)) needed[page] = 1;
  std::vector<size_t> order;
  for (size_t page = 0; page < needed.size(); ++page)
    if (needed[page]) order.push_back(page);
  const bool ams = options_.amsgrad;
  store.for_each_page(order, [&](const Page& page) {
    std::vector<adamw::AdamWTensor> work;
    for (const Piece& piece : page.pieces) {
      if (!has_grad[piece.tensor]) continue;
      const at::Tensor& p = param(piece.tensor);
      const int64_t es = p.element_size();
      auto slot = [&](size_t s) { return reinterpret_cast<float*>(store.slot_data(piece.tensor, s)) + piece.begin; };
      work.push_back({static_cast<char*>(p.data_ptr()) + piece.begin * es,
                      static_cast<const char*>(p.grad().data_ptr()) + piece.begin * es, slot(kExpAvg),
                      slot(kExpAvgSq), ams ? slot(kMaxExpAvgSq) : nullptr, piece.end - piece.begin, p.scalar_type(),
                      scalars[piece.tensor]});
    }
    adamw::fused_adamw_step(work);
  });
}

// torch.optim.AdamW's single-tensor update in ATen ops, on fp32 state in managed memory.
void PagedAdamW::step_cuda(const std::vector<char>& has_grad) {
  const auto [beta1, beta2] = options_.betas;
  std::vector<size_t> order;
  for (size_t t = 0; t < where_.size(); ++t)
    if (has_grad[t]) order.push_back(t);
  for (size_t i = 0; i < order.size(); ++i) {
    state_.managed()->prepare(order, i);
    const size_t t = order[i];
    const at::Tensor& p = param(t);
    const double lr = group_lr(where_[t].first), wd = group_info(where_[t].first).weight_decay;
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
  }
}

sdk::TensorMap PagedAdamW::state_by_name() const {
  sdk::TensorMap out = new_state();
  out.metadata["amsgrad"] = options_.amsgrad ? "true" : "false";
  if (!state_.created()) return out;
  for (size_t t = 0; t < where_.size(); ++t) {
    if (steps_[t] == 0) continue;  // never stepped
    const std::string& n = param_name(t);
    const auto sizes = param(t).sizes();
    out.add(n + ".step", at::scalar_tensor(steps_[t], at::kLong));
    out.add(n + ".exp_avg", state_.view(t, kExpAvg, sizes, at::kFloat));
    out.add(n + ".exp_avg_sq", state_.view(t, kExpAvgSq, sizes, at::kFloat));
    if (options_.amsgrad) out.add(n + ".max_exp_avg_sq", state_.view(t, kMaxExpAvgSq, sizes, at::kFloat));
  }
  views_out_ = true;  // whoever reads them pages them in
  return out;
}

void PagedAdamW::load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) {
  state_.reset();  // fresh zeros, created below or at the first step
  steps_.assign(where_.size(), 0);
  if (!accept_state(state, conversion)) return;  // another family's state, and the recipe says reset
  ensure_state();
  for (size_t t = 0; t < where_.size(); ++t) {
    const std::string& n = param_name(t);
    if (!state.find(n + ".step")) continue;  // a parameter that had not been stepped
    const auto sizes = param(t).sizes();
    steps_[t] = state.find(n + ".step")->item<int64_t>();
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
    state_.release_tensor(t);  // written through the mapping: back to the file, within the budget
  }
}

}  // namespace ftcore::plugins::paged_adamw
