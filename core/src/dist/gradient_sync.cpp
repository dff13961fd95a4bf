// Bucketed, overlapped gradient all-reduce (gradient_sync.h).
#include "gradient_sync.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace ftcore::dist {

namespace {

// Runs after AccumulateGrad has added this backward's contribution to .grad.
class ReadyHook : public torch::autograd::PostAccumulateGradHook {
 public:
  ReadyHook(GradientSynchronizer* sync, size_t index) : sync_(sync), index_(index) {}
  void operator()(const torch::autograd::Variable& /*tensor*/) override { sync_->on_gradient_ready(index_); }

 private:
  GradientSynchronizer* sync_;
  size_t index_;
};

}  // namespace

GradientSynchronizer::GradientSynchronizer(ProcessGroup& group, std::vector<at::Tensor> trainable,
                                           int64_t bucket_bytes)
    : group_(group), trainable_(std::move(trainable)) {
  bucket_of_.assign(trainable_.size(), 0);
  seen_.assign(trainable_.size(), false);
  // Reverse registration order approximates the order gradients arrive.
  for (size_t k = trainable_.size(); k-- > 0;) {
    const at::Tensor& t = trainable_[k];
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    const bool fits = !buckets_.empty() && buckets_.back().flat.scalar_type() == t.scalar_type() &&
                      (buckets_.back().elements * static_cast<int64_t>(t.element_size()) + bytes <= bucket_bytes);
    if (!fits) {
      buckets_.emplace_back();
      buckets_.back().flat = at::empty({0}, t.options().requires_grad(false));
    }
    Bucket& b = buckets_.back();
    b.members.push_back(k);
    b.elements += t.numel();
    bucket_of_[k] = buckets_.size() - 1;
  }
  for (Bucket& b : buckets_)
    b.flat = at::zeros({b.elements + static_cast<int64_t>(b.members.size())}, b.flat.options());
  for (size_t k = 0; k < trainable_.size(); ++k)
    torch::autograd::impl::set_post_acc_grad_hooks(trainable_[k], std::make_unique<ReadyHook>(this, k));
}

GradientSynchronizer::~GradientSynchronizer() {
  for (const at::Tensor& t : trainable_) torch::autograd::impl::set_post_acc_grad_hooks(t, nullptr);
}

void GradientSynchronizer::arm(int64_t step) {
  armed_ = true;
  step_ = step;
  next_bucket_ = 0;
  seen_.assign(trainable_.size(), false);
  for (Bucket& b : buckets_) b.ready = 0, b.launched = false;
}

void GradientSynchronizer::on_gradient_ready(size_t index) {
  if (!armed_ || seen_[index]) return;
  seen_[index] = true;
  ++buckets_[bucket_of_[index]].ready;
  launch_ready_in_order();
}

void GradientSynchronizer::launch_ready_in_order() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].ready == buckets_[next_bucket_].members.size())
    launch(buckets_[next_bucket_++]);
}

void GradientSynchronizer::launch(Bucket& b) {
  at::NoGradGuard no_grad;
  int64_t offset = 0;
  const int64_t flags = b.elements;
  for (size_t m = 0; m < b.members.size(); ++m) {
    const at::Tensor& t = trainable_[b.members[m]];
    at::Tensor slot = b.flat.narrow(0, offset, t.numel());
    const at::Tensor& grad = t.grad();
    if (grad.defined()) {
      slot.copy_(grad.reshape({-1}));
    } else {
      slot.zero_();
    }
    b.flat.narrow(0, flags + static_cast<int64_t>(m), 1).fill_(grad.defined() ? 1.0 : 0.0);
    offset += t.numel();
  }
  b.pending = group_.all_reduce_sum_async(b.flat, "the all-reduce of gradient bucket " +
                                                      std::to_string(&b - buckets_.data()) + " at step " +
                                                      std::to_string(step_));
  b.launched = true;
}

void GradientSynchronizer::finish() {
  // Tensors that got no gradient in this backward (or a rank with no rows):
  // the rest start now, still in bucket order.
  while (next_bucket_ < buckets_.size()) launch(buckets_[next_bucket_++]);
  armed_ = false;
  at::NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    group_.wait(b.pending);
    const at::Tensor has_grad =
        b.flat.narrow(0, b.elements, static_cast<int64_t>(b.members.size())).to(at::kCPU, at::kFloat);
    const float* flag = has_grad.data_ptr<float>();
    int64_t offset = 0;
    for (size_t m = 0; m < b.members.size(); ++m) {
      at::Tensor& t = trainable_[b.members[m]];
      const bool any_rank_has_grad = flag[m] > 0.0f;
      if (any_rank_has_grad) {
        at::Tensor sum = b.flat.narrow(0, offset, t.numel()).view(t.sizes());
        if (t.grad().defined())
          t.mutable_grad().copy_(sum);
        else
          t.mutable_grad() = sum.clone();
      }
      offset += t.numel();
    }
  }
}

}  // namespace ftcore::dist
