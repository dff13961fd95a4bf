// Restarting ftcore with glibc's malloc on transparent huge pages, for the
// commands that compute for long (run, generate, quantize).
//
// Why: a training step allocates its gradients, weight casts and activations
// afresh, and glibc gives large blocks back to the kernel between steps
// (munmap above its mmap threshold, heap trimming below), so each step
// first-touches them again, one 4 KiB page fault at a time: 1.95 million faults
// in 12 steps of the bf16 full fine-tune of train_vs_hf.py. With the tunable
// glibc.malloc.hugetlb=1, glibc advises its heap and its mappings
// MADV_HUGEPAGE and the same memory faults in 2 MiB pages (42-45 thousand
// faults): the run's kernel time halves (4.0 -> 1.9 s), the peak RSS and the
// numbers stay the same; a wall-clock gain was within the measuring host's
// noise (docs/benchmarks.md). Kernels commonly set THP to "madvise" (Debian,
// Ubuntu): nothing is a huge page unless advised, as glibc's default is not.
// (A libtorch CPU allocator that mapped large tensors on huge pages itself
// was tried first: fresh mappings are zeroed on every fault, and it ran slower
// than glibc's default, which reuses its heap.)
//
// How: glibc reads GLIBC_TUNABLES once, as the process starts, so ftcore
// execs itself (/proc/self/exe, same arguments, same pid) with the tunable
// put before the caller's GLIBC_TUNABLES, and the restarted process puts the
// caller's value back at once, so processes it starts (torchrun, A/B arms,
// Python) get the environment the user gave. The restart costs one more load
// of the libraries (tenths of a second).
//
// When: only with FTCORE_HUGE_PAGES=1 (unset or 0: never). It was the
// default where the kernel offers THP until stop 29, when whole runs on the
// 2-core machines without AMX measured slower with it: step 1 of the bf16
// full fine-tune took 7.2-7.8 s against 2.7-2.9 s, 12-step runs 31-35 s
// against 24-25 s, 30-step LoRA fp32 runs 32-34 s against 26-29 s, while the
// steps after the first gained nothing separable from the host's noise on
// either machine type (docs/benchmarks.md). The kernel must offer THP
// (/sys/kernel/mm/transparent_hugepage/enabled "always" or "madvise") for the
// tunable to do anything. A caller's GLIBC_TUNABLES that sets
// glibc.malloc.hugetlb already is the caller's choice and is left alone.
#pragma once

namespace ftcore::cli {

// Returns when no restart is due (or this process is the restart, whose
// environment it restores); otherwise does not return. A malformed
// FTCORE_HUGE_PAGES is a ConfigError naming it; a failed exec is a warning,
// and the command runs on without huge pages.
void restart_with_huge_page_malloc(char** argv);

}  // namespace ftcore::cli
