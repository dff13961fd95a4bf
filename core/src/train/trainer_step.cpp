// One optimizer step of the Trainer:
//
//   N = target tokens of all the step's micro-batches (of every rank)
//   for each micro-batch b:  ((summed_loss(b) / N + aux term) * loss_scale).backward()
//   g = sum over ranks of g_rank          (one all-reduce per step, dist/gradient_sync.h)
//   grad_norm = ||g||_2 over every trainable tensor (logged before clipping)
//   g *= min(1, max_grad_norm / (grad_norm + 1e-6))        (torch's clip_grad_norm_)
//   lr = base_lr x scheduler.factor(step, total) x adapter.lr_multiplier(step)
//   optimizer.step() with each group at lr x lr_scale
//
// so the logged loss of a step is its mean per-target-token loss whatever the
// micro-batch size or the number of ranks, as transformers'
// num_items_in_batch (and average_tokens_across_devices) normalisation gives.
//
// A sampler batch is a GLOBAL micro-batch of micro_batch_size x world_size
// rows; rank r takes the r-th contiguous share of its rows, so the data of
// step k never depends on how many processes compute it.
#include <cmath>
#include <cstdlib>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include "ftcore/safetensors.h"
#include "../util/all_finite.h"
#include "next_token_loss.h"
#include "ftcore/stop_request.h"
#include "trainer.h"

namespace fs = std::filesystem;

namespace ftcore::train {

namespace {

// FTCORE_DEBUG_DUMP_BATCHES=DIR writes each micro-batch as
// DIR/step-<k>-micro-<i>.safetensors: reference tests replay the exact
// batches through transformers + PEFT.
void dump_batches(const std::vector<TrainBatch>& batches, int64_t step) {
  static const char* dir = std::getenv("FTCORE_DEBUG_DUMP_BATCHES");
  if (!dir) return;
  for (size_t i = 0; i < batches.size(); ++i) {
    sdk::TensorMap m;
    m.add("input_ids", batches[i].input_ids);
    m.add("labels", batches[i].labels);
    m.add("position_ids", batches[i].position_ids);
    m.add("sequence_ids", batches[i].sequence_ids);
    safetensors::write_file(fs::path(dir) / ("step-" + std::to_string(step) + "-micro-" + std::to_string(i) + ".safetensors"), m);
  }
}

// Rows [begin, end) of a global batch of `rows` rows that rank `rank` of `world` takes.
std::pair<size_t, size_t> rank_share(size_t rows, int rank, int world) {
  const size_t per_rank = (rows + static_cast<size_t>(world) - 1) / static_cast<size_t>(world);
  const size_t begin = std::min(rows, per_rank * static_cast<size_t>(rank));
  return {begin, std::min(rows, begin + per_rank)};
}

// FNV-1a over the token ids of a step's micro-batches, cut to 48 bits so the
// logged value is an exact double: two runs that saw the same batches at a
// step log the same batch_hash (what `ftcore ab` pairing is checked with).
double batch_hash(const std::vector<TrainBatch>& batches) {
  uint64_t h = 14695981039346656037ull;
  for (const TrainBatch& b : batches) {
    const at::Tensor ids = b.input_ids.to(at::kCPU, at::kLong).contiguous();
    const int64_t* p = ids.data_ptr<int64_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) h = (h ^ static_cast<uint64_t>(p[i])) * 1099511628211ull;
  }
  return static_cast<double>(h >> 16);
}

// The name of the first trainable tensor (or its gradient) holding a NaN or
// an Inf; "" when all are finite. One device sync when all are finite.
std::string first_non_finite(const std::vector<sdk::ParamGroupSpec>& groups, bool gradients) {
  std::vector<at::Tensor> tensors;
  std::vector<const std::string*> names;
  for (const auto& group : groups)
    for (const auto& p : group.params) {
      const at::Tensor t = gradients ? p.tensor.grad() : p.tensor;
      if (!t.defined()) continue;
      tensors.push_back(t);
      names.push_back(&p.name);
    }
  const std::optional<size_t> bad = first_non_finite_index(tensors);
  return bad ? *names[*bad] : "";
}

}  // namespace

std::vector<TrainBatch> Trainer::collate_step(const StepSlice& slice) const {
  const std::vector<sdk::Batch>& epoch = plan_.batches(slice.epoch);
  std::vector<TrainBatch> out;
  for (int64_t b = slice.first_batch; b < slice.end_batch; ++b) {
    const auto& all_rows = epoch[static_cast<size_t>(b)].rows;
    const auto [first, last] = rank_share(all_rows.size(), s_.distributed.rank(), s_.distributed.world_size());
    const size_t rows = last - first;
    if (rows == 0) continue;  // a short last batch leaves this rank nothing
    // auto_micro_batch splits each share into equal parts of its rows.
    const auto splits = static_cast<size_t>(std::min<int64_t>(state_.micro_batch_splits, rows));
    const size_t per_part = (rows + splits - 1) / splits;
    for (size_t start = first; start < last; start += per_part) {
      std::vector<std::vector<const Example*>> part;
      for (size_t r = start; r < std::min(last, start + per_part); ++r) {
        std::vector<const Example*> row;
        for (int64_t index : all_rows[r]) row.push_back(&s_.data.train.at(static_cast<size_t>(index)));
        part.push_back(std::move(row));
      }
      out.push_back(collate(part, s_.collate));
    }
  }
  return out;
}

void Trainer::all_reduce_counts(int64_t& targets, int64_t& tokens) {
  if (!s_.distributed.group) return;
  at::Tensor counts = at::tensor({targets, tokens}, at::kLong).to(s_.distributed.group->device());
  s_.distributed.group->all_reduce_sum(counts, "the target-token count of step " + std::to_string(state_.global_step + 1));
  counts = counts.to(at::kCPU);
  targets = counts[0].item<int64_t>();
  tokens = counts[1].item<int64_t>();
}

// Returns this rank's summed loss. The gradient synchronizer is armed before
// the last backward so its all-reduce overlaps it.
//
// A mixture-of-experts model adds coef x its load-balancing loss per
// micro-batch, averaged over the step's micro-batches of every rank (with
// one micro-batch and one rank: transformers' loss + coef x aux_loss).
double Trainer::run_micro_batches(const std::vector<TrainBatch>& batches, int64_t targets, double* aux_seen) {
  dump_batches(batches, state_.global_step + 1);
  const double normaliser = static_cast<double>(std::max<int64_t>(targets, 1));
  const double aux_batches = static_cast<double>(std::max<size_t>(batches.size(), 1) * s_.distributed.world_size());
  double loss_sum = 0.0, aux_sum = 0.0;
  for (size_t i = 0; i < batches.size(); ++i) {
    // One process stops inside a step (its ranks would not agree on where).
    if (!s_.distributed.group) throw_if_stop_requested("a training step");
    if (gradient_sync_ && i + 1 == batches.size()) gradient_sync_->arm(state_.global_step + 1);
    at::Tensor loss, aux;
    {
      RECORD_USER_SCOPE("ftcore::forward_loss");
      AutocastScope autocast(s_.precision, s_.base.model->device());
      loss = summed_next_token_loss(*s_.base.model, batches[i], &aux);
    }
    at::Tensor objective = loss * (scaler_.scale() / normaliser);
    if (aux.defined()) {
      objective = objective + aux * (s_.base.model->config().router_aux_loss_coef / aux_batches * scaler_.scale());
      aux_sum += aux.item<double>();
    }
    {
      RECORD_USER_SCOPE("ftcore::backward");
      objective.backward();
    }
    loss_sum += loss.item<double>();
  }
  if (aux_seen) *aux_seen = aux_sum / static_cast<double>(std::max<size_t>(batches.size(), 1));
  if (gradient_sync_) {
    if (batches.empty()) gradient_sync_->arm(state_.global_step + 1);
    gradient_sync_->finish();
  }
  return loss_sum;
}

double Trainer::clip_gradients() {
  std::vector<at::Tensor> norms;
  for (const at::Tensor& p : s_.trainable.tensors)
    if (p.grad().defined()) norms.push_back(at::linalg_vector_norm(p.grad().to(at::kFloat), 2));
  if (norms.empty()) return 0.0;
  const at::Tensor total = at::linalg_vector_norm(at::stack(norms), 2);
  const double norm = total.item<double>();
  if (s_.options.max_grad_norm > 0.0) {
    const double coefficient = s_.options.max_grad_norm / (norm + 1e-6);
    if (coefficient < 1.0)
      for (const at::Tensor& p : s_.trainable.tensors)
        if (p.grad().defined()) p.grad().mul_(coefficient);
  }
  return norm;
}

StepResult Trainer::train_step() {
  const StepSlice slice = plan_.slice(state_.global_step);
  for (const at::Tensor& p : s_.trainable.tensors) p.mutable_grad() = at::Tensor();
  if (!s_.distributed.group) remember_step_start_rng();
  StepResult r;
  double loss_sum = 0.0;
  int64_t targets = 0;
  while (true) {
    std::vector<TrainBatch> batches;
    {
      RECORD_USER_SCOPE("ftcore::collate");
      batches = collate_step(slice);
    }
    targets = 0;
    r.tokens = 0;
    for (const auto& b : batches) targets += b.target_tokens, r.tokens += b.tokens;
    r.batch_hash = batch_hash(batches);
    all_reduce_counts(targets, r.tokens);
    try {
      loss_sum = run_micro_batches(batches, targets, &r.router_aux_loss);
      step_start_rng_ = at::Tensor();  // past the last point a signal cuts the step
      break;
    } catch (const c10::OutOfMemoryError& e) {
      // Ranks retry in lockstep only within one process.
      const int64_t rows = s_.options.micro_batch_size / state_.micro_batch_splits;
      if (!s_.options.auto_micro_batch || rows <= 1 || s_.distributed.group) throw;
      for (const at::Tensor& p : s_.trainable.tensors) p.mutable_grad() = at::Tensor();
      state_.micro_batch_splits *= 2;
      spdlog::warn("out of memory at step {}: micro_batch_size {} -> {}, gradient_accumulation_steps {} -> {} "
                   "(same effective batch); retrying the step",
                   state_.global_step + 1, rows, rows / 2,
                   s_.options.gradient_accumulation_steps * state_.micro_batch_splits / 2,
                   s_.options.gradient_accumulation_steps * state_.micro_batch_splits);
    }
  }
  // The loss and any rank's stop signal, summed in one small all-reduce, so
  // every rank takes the same decisions after this step.
  r.signal_seen = stop_signal_received() != 0;
  if (s_.distributed.group) {
    at::Tensor shared = at::tensor({loss_sum, r.signal_seen ? 1.0 : 0.0}, at::kDouble).to(s_.distributed.group->device());
    s_.distributed.group->all_reduce_sum(shared, "the loss of step " + std::to_string(state_.global_step + 1));
    shared = shared.to(at::kCPU);
    loss_sum = shared[0].item<double>();
    r.signal_seen = shared[1].item<double>() > 0.0;
  }
  r.loss = loss_sum / static_cast<double>(std::max<int64_t>(targets, 1));
  if (!std::isfinite(r.loss)) {
    r.finite = false;
    return r;
  }
  const bool finite_grads = scaler_.unscale(s_.trainable.tensors);
  {
    RECORD_USER_SCOPE("ftcore::clip_gradients");
    r.grad_norm = finite_grads ? clip_gradients() : std::numeric_limits<double>::infinity();
  }
  const double learning_rate =
      s_.components.base_lr * s_.components.scheduler->factor(state_.global_step, state_.total_steps) *
      (s_.trainable.adapter ? s_.trainable.adapter->lr_multiplier(state_.global_step) : 1.0);
  // Without loss scaling a non-finite gradient is not an overflow to skip
  // (fp16's scaler does that): the step is refused, with the first culprit.
  if (!scaler_.enabled() && !std::isfinite(r.grad_norm)) {
    const std::string name = first_non_finite(s_.trainable.groups, true);
    r.non_finite = name.empty() ? "the gradient norm (" + std::to_string(r.grad_norm) + ")" : "the gradient of " + name;
    return r;
  }
  if (!std::isfinite(learning_rate)) {
    r.non_finite = "the learning rate (" + std::to_string(learning_rate) + ")";
    return r;
  }
  state_.learning_rate = learning_rate;
  s_.components.optimizer->set_base_lr(state_.learning_rate);
  if (finite_grads) {
    {
      RECORD_USER_SCOPE("ftcore::optimizer");
      s_.components.optimizer->step();
    }
    if (s_.distributed.sharding) s_.distributed.sharding->broadcast_updated(state_.global_step + 1);
    const std::string name = first_non_finite(s_.trainable.groups, false);
    if (!name.empty()) {
      r.non_finite = name + " after the update";
      r.update_applied = true;
      return r;
    }
  }
  scaler_.update(!finite_grads);
  return r;
}

}  // namespace ftcore::train
