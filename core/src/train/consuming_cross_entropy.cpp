// consuming_cross_entropy_sum (consuming_cross_entropy.h).
#include "consuming_cross_entropy.h"

#include <algorithm>
#include <stdexcept>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "ftcore/dataset.h"

namespace ftcore::train {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;


// Rows per block: about 8 MB of [rows, V] fp32 temporaries.
int64_t block_rows(int64_t vocab) { return std::max<int64_t>(1, (int64_t{2} << 20) / std::max<int64_t>(vocab, 1)); }

// Calls f(block, first row) on `buffer` [N, V] block by block.
template <typename F>
void by_blocks(at::Tensor& buffer, F&& f) {
  const int64_t rows = buffer.size(0), step = block_rows(buffer.size(1));
  for (int64_t start = 0; start < rows; start += step) {
    at::Tensor block = buffer.narrow(0, start, std::min(step, rows - start));
    f(block, start);
  }
}

class ConsumingCrossEntropy : public torch::autograd::Function<ConsumingCrossEntropy> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& targets) {
    at::Tensor buffer = logits.detach();  // the logits' storage becomes log-probabilities
    // libtorch's CPU last-dimension kernels read a row's max and sum before
    // writing it, and each element before overwriting it, so `out` may be
    // the input (consuming_cross_entropy_test holds the results bit-equal to
    // the out-of-place ops; CUDA keeps at::cross_entropy_loss).
    by_blocks(buffer, [](at::Tensor& block, int64_t) { at::_log_softmax_out(block, block, 1, false); });
    const at::Tensor loss = at::nll_loss(buffer, targets, {}, at::Reduction::Sum, kIgnoreLabel);
    // Not save_for_backward: that would refuse the in-place use backward makes of it.
    ctx->saved_data["log_probs"] = buffer;
    ctx->saved_data["targets"] = targets;
    ctx->saved_data["consumed"] = false;
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    TORCH_CHECK(!at::GradMode::is_enabled(), "consuming_cross_entropy_sum: no double backward (create_graph)");
    if (ctx->saved_data["consumed"].toBool())
      throw std::logic_error("consuming_cross_entropy_sum: backward ran twice (retain_graph); its buffer is spent");
    ctx->saved_data["consumed"] = true;
    at::Tensor buffer = ctx->saved_data["log_probs"].toTensor();
    const at::Tensor targets = ctx->saved_data["targets"].toTensor();
    const at::Tensor& grad = grad_outputs[0];
    const at::Tensor total_weight = at::scalar_tensor(static_cast<double>(targets.numel()), buffer.options());
    by_blocks(buffer, [&](at::Tensor& log_probs, int64_t start) {
      const at::Tensor t = targets.narrow(0, start, log_probs.size(0));
      const at::Tensor grad_nll =
          at::nll_loss_backward(grad, log_probs, t, {}, at::Reduction::Sum, kIgnoreLabel, total_weight);
      at::_log_softmax_backward_data_out(log_probs, grad_nll, log_probs, 1, at::kFloat);
    });
    ctx->saved_data.erase("log_probs");
    return {buffer, at::Tensor()};
  }
};

}  // namespace

at::Tensor consuming_cross_entropy_sum(const at::Tensor& logits, const at::Tensor& targets) {
  const bool shapes = logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0);
  if (!shapes || logits.scalar_type() != at::kFloat || !logits.is_contiguous() || !logits.is_cpu())
    throw std::invalid_argument("consuming_cross_entropy_sum: needs contiguous fp32 CPU logits [N, V] and targets [N], "
                                "got logits " + logits.toString() + " " + c10::str(logits.sizes()) +
                                (logits.is_contiguous() ? "" : " (not contiguous)") + " and targets " +
                                c10::str(targets.sizes()));
  // Overwriting a leaf would overwrite the parameter itself.
  if (logits.requires_grad() && logits.is_leaf())
    throw std::invalid_argument("consuming_cross_entropy_sum: the logits are a leaf that requires grad");
  return ConsumingCrossEntropy::apply(logits, targets);
}

}  // namespace ftcore::train
