// Keeping the memory a training step frees in glibc's heap, for the next step
// to reuse, in the commands that compute for long (run, generate, quantize).
//
// Why: a step allocates its gradients, weight casts and activations afresh.
// glibc's default hands large blocks back to the kernel when they are freed:
// blocks above its mmap threshold are unmapped, and the heap's top is trimmed
// once more than the trim threshold is free there. Both thresholds start low
// (128 KiB) and only follow the largest freed mapping (the mmap threshold up
// to 32 MiB, the trim threshold twice that), so every step faulted much of
// its memory in again, 4 KiB at a time: 2.1 million minor faults in 12 steps
// of train_vs_hf.py's bf16 full fine-tune, of which the heap's first growth
// is about 0.7 million. With the mmap threshold fixed at glibc's largest
// (32 MiB) and no trimming, 0.9 million remain (the first growth and the
// blocks above 32 MiB: the tied embedding's casts and gradient), the kernel
// time halves and the steps run 10-14% faster with the same peak RSS
// (docs/benchmarks.md, stop 30). The peak is reached in every step anyway;
// what is kept between steps is what the next step takes again. LoRA runs
// allocate little per step and are unchanged.
//
// How: mallopt, from the executable's .preinit_array, which glibc calls
// before any library's initializer: libtorch allocates as it loads, and every
// allocation of the process then follows one policy. (mallopt from main(),
// after those, measured worse: 1.16 million faults and +140 MB peak RSS in
// the same run. mallopt merges glibc's small free chunks as it is called, and
// the heap's layout, hence its fragmentation, follows from such details.)
// Both thresholds are set: setting one turns off glibc's dynamic thresholds,
// so the trim threshold alone left the mmap threshold at 128 KiB for good
// (10.7 million faults).
//
// When: every ftcore command (the short ones allocate little);
// FTCORE_HEAP_REUSE=0 turns it off (A/B). A caller's GLIBC_TUNABLES that sets
// glibc.malloc.mmap_threshold or trim_threshold is the caller's choice and is
// left alone.
#pragma once

namespace ftcore::cli {

// For the commands that compute for long, once logging is set up: a
// malformed FTCORE_HEAP_REUSE (not 0 or 1) is a ConfigError naming it, and a
// mallopt that glibc refused at load is a warning (the command runs on with
// glibc's defaults).
void check_heap_reuse();

}  // namespace ftcore::cli
