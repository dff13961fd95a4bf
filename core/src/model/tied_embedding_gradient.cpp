// The tied embedding / lm_head gradient (tied_embedding_gradient.h).
#include "tied_embedding_gradient.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/graph_task.h>

namespace ftcore::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using WeakTensor = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

struct Offer {
  int graph_task;
  WeakTensor gradient;  // weak: the offer must not keep G1 alive, nor stop AccumulateGrad taking it without a copy
};

// By the weight's TensorImpl (a parameter: saved for backward as itself).
std::mutex offers_mutex;
std::unordered_map<const c10::TensorImpl*, Offer> offers;
std::atomic<int64_t> sums_taken{0};

// The offered gradient of `weight` from this backward, if autograd still holds it; the offer is used up.
at::Tensor take_offer(const at::Tensor& weight) {
  const int task = torch::autograd::get_current_graph_task_id();
  std::lock_guard<std::mutex> lock(offers_mutex);
  const auto found = offers.find(weight.unsafeGetTensorImpl());
  if (found == offers.end()) return at::Tensor();
  Offer offer = std::move(found->second);
  offers.erase(found);
  if (task < 0 || offer.graph_task != task) return at::Tensor();
  auto held = offer.gradient.lock();
  if (!held) return at::Tensor();
  at::Tensor gradient(std::move(held));
  // Writable only while autograd's input buffer is its one holder (besides
  // this handle) and nothing else shares its storage: the rule autograd's own
  // in-place accumulation follows. Otherwise a hook or another node could see
  // the sum change, or the buffer may hold a different tensor by now.
  if (gradient.use_count() != 2 || gradient.storage().use_count() != 1) return at::Tensor();
  return gradient;
}

class TiedEmbedding : public torch::autograd::Function<TiedEmbedding> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& weight, const at::Tensor& ids) {
    ctx->save_for_backward({weight, ids});
    return at::embedding(weight, ids);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    if (!ctx->needs_input_grad(0)) return {at::Tensor(), at::Tensor()};
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& weight = saved[0];
    const at::Tensor& ids = saved[1];
    const at::Tensor& grad = grad_outputs[0];
    at::Tensor head_gradient = take_offer(weight);
    // Under create_graph the sum must be a recorded op: the dense path is.
    const bool summable = head_gradient.defined() && !at::GradMode::is_enabled() &&
                          head_gradient.scalar_type() == grad.scalar_type() && head_gradient.sizes() == weight.sizes() &&
                          head_gradient.is_contiguous() && head_gradient.device() == grad.device();
    if (!summable)  // EmbeddingBackward0's own gradient
      return {at::embedding_dense_backward(grad, ids, weight.size(0), /*padding_idx=*/-1, /*scale_grad_by_freq=*/false),
              at::Tensor()};
    add_embedding_gradient_into(head_gradient, grad, ids);
    ++sums_taken;
    return {at::Tensor(), at::Tensor()};  // the sum is already in the buffer autograd passes to the weight
  }
};

}  // namespace

void add_embedding_gradient_into(at::Tensor& head_gradient, const at::Tensor& grad, const at::Tensor& ids) {
  const auto [unique_ids, compact_ids] = at::_unique(ids, /*sorted=*/true, /*return_inverse=*/true);
  const at::Tensor present = unique_ids.to(at::kLong);  // index_copy_ takes int64 indices only; ids may be int32
  // embedding_dense_backward over [present rows]: each row summed over its positions in position order.
  const at::Tensor rows = at::embedding_dense_backward(grad, compact_ids, present.size(0), -1, false);
  at::Tensor summed = head_gradient.index_select(0, present).add_(rows);  // G1[k] + G2[k]
  head_gradient.add_(0.0);                                                // G1[k] + 0 elsewhere
  head_gradient.index_copy_(0, present, summed);
}

int64_t tied_gradient_sums_taken() { return sums_taken.load(); }

void offer_tied_head_gradient(const at::Tensor& weight, const at::Tensor& head_gradient) {
  const int task = torch::autograd::get_current_graph_task_id();
  if (task < 0) return;
  std::lock_guard<std::mutex> lock(offers_mutex);
  offers.insert_or_assign(weight.unsafeGetTensorImpl(), Offer{task, WeakTensor(head_gradient.getIntrusivePtr())});
}

at::Tensor embedding_summing_into_tied_head(const at::Tensor& weight, const at::Tensor& ids) {
  return TiedEmbedding::apply(weight, ids);
}

}  // namespace ftcore::model
