// Gradient all-reduce of data-parallel training, once per optimizer step
// (DDP's no_sync for every micro-batch but the last).
//
// The trainable tensors are laid out in buckets of at most bucket_bytes,
// in reverse order (the order backward produces their gradients), one dtype
// per bucket. During the step's last backward, a post-accumulate-grad hook
// on each tensor marks it ready; a bucket whose tensors are all ready is
// copied into one flat buffer and its all-reduce starts at once, in bucket
// order (every rank issues the same collectives in the same order), so
// communication overlaps the rest of the backward. finish() starts what is
// left, waits, and writes the sums back into .grad. A LoRA adapter's
// gradients fit one bucket: one flat all-reduce per step.
//
// The sums are SUMS, not means: the loss of every rank is already divided by
// the target tokens of the whole global batch, so the summed gradient is the
// gradient one process would get for that batch. Each bucket also carries
// one flag per tensor ("this rank has a gradient"), so a tensor without a
// gradient on every rank keeps none, as in one process.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "process_group.h"

namespace ftcore::dist {

class GradientSynchronizer {
 public:
  GradientSynchronizer(ProcessGroup& group, std::vector<at::Tensor> trainable, int64_t bucket_bytes);
  ~GradientSynchronizer();

  // Before the step's last backward (or, on a rank whose shard of the last
  // micro-batch is empty, instead of it): buckets start as gradients land.
  void arm(int64_t step);
  // After it: every bucket reduced, .grad holds the sums.
  void finish();

  size_t bucket_count() const { return buckets_.size(); }

  // Called from the autograd hook of tensor `index`.
  void on_gradient_ready(size_t index);

 private:
  struct Bucket {
    std::vector<size_t> members;  // indices into trainable_
    int64_t elements = 0;
    at::Tensor flat;  // elements + one flag per member
    PendingCollective pending;
    size_t ready = 0;
    bool launched = false;
  };
  void launch(Bucket& bucket);
  void launch_ready_in_order();

  ProcessGroup& group_;
  std::vector<at::Tensor> trainable_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<bool> seen_;
  size_t next_bucket_ = 0;
  bool armed_ = false;
  int64_t step_ = 0;
};

}  // namespace ftcore::dist
