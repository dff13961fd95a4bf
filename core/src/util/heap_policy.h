// glibc's heap settings for a training process, set once at start-up.
//
// By default glibc raises its mmap threshold to the size of the largest
// mapped block freed so far (up to 32 MiB). A training step frees such
// blocks early, so from then on every activation of every step comes from
// the heap, and the freed heap is fragmented and kept: on the default
// model's bf16 LoRA step about 100-400 MB of the peak RSS was freed memory
// never returned (docs/benchmarks.md). A fixed threshold of 1 MiB maps the
// larger tensors (returned to the system when freed) and keeps the many
// smaller ones, which a mapping would make page-fault on every step, on
// the heap; a 64 MiB trim threshold keeps the heap's top for the next
// step instead of returning and re-growing it.
//
// Any MALLOC_*_ or GLIBC_TUNABLES variable in the environment means the
// user chose: then nothing is changed.
#pragma once

namespace ftcore {

// Applies the settings above unless the environment sets glibc's own; returns whether it did.
bool set_training_heap_policy();

}  // namespace ftcore
