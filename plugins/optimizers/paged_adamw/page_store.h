// The CPU page store of the paged optimizers: the optimizer state of every
// parameter in one file, memory-mapped (MAP_SHARED), of which at most
// `max_resident_bytes` is resident in memory at any time (0: unbounded, the
// same layout in anonymous memory, no file).
//
// Why: bitsandbytes' paged optimizers (Dettmers et al., "QLoRA: Efficient
// Finetuning of Quantized LLMs", 2023, section 2 "Paged Optimizers",
// https://arxiv.org/abs/2305.14314) keep optimizer state in CUDA unified
// memory so that it is paged out to the CPU when the GPU runs short, instead
// of failing the run. On the CPU the fast memory is RAM and the backing
// store is this file: the state of a model larger than the RAM left over
// after parameters and activations still fits.
//
// File layout. State is a list of slots (AdamW: exp_avg, exp_avg_sq[,
// max_exp_avg_sq] in fp32; 8-bit: codes and absmax); each slot has its own
// region of the file, and in every region the tensors follow in parameter
// order, so a tensor's slot is one contiguous run of bytes (saved state is a
// zero-copy view). Tensors are grouped into pages of at most `page_bytes`
// (summed over slots, counting every 4 KiB a slot's extent touches):
// consecutive small tensors share a page; a tensor larger than a page is cut
// into pieces whose boundaries fall on 4 KiB in every element slot (fp32
// moments, codes) and on the caller's quantization block. In element slots
// every page starts on 4 KiB, so paging it in or out touches no other page's
// memory; block slots (absmax, 1/64 of the codes) run on contiguously, and a
// 4 KiB they share with a neighbour is counted in both pages' footprints.
//
// Budget invariant: the sum of the footprints of pages between "being read"
// and "written back and dropped" never exceeds max_resident_bytes. A step
// walks its pages in order (for_each_page): a reader thread reads up to
// `prefetch_pages` pages ahead (madvise WILLNEED + POPULATE_WRITE) while the
// caller updates the current one, starting a read only when the page fits
// into the budget left; a writer thread writes back and drops each finished
// page (MADV_DONTNEED, sync_file_range, POSIX_FADV_DONTNEED) meanwhile. The accounted
// high-water mark is kept in stats(); with FTCORE_PAGED_STATS=1 the store
// also measures the resident pages of the whole mapping with mincore() after
// every read (the kernel's own count, page cache included) and prints a line
// per pass to stderr.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ftcore::plugins::paged_adamw {

// A slot's storage: `bytes_per_block` bytes per `block_elems` elements
// (fp32 moment: 4 per 1; 8-bit codes: 1 per 1; absmax: 4 per 256).
struct SlotFormat {
  int64_t block_elems = 1;
  int64_t bytes_per_block = 4;
};
int64_t slot_bytes(const SlotFormat& f, int64_t elements);

// Elements [begin, end) of tensor `tensor` (its index in the store).
struct Piece {
  size_t tensor = 0;
  int64_t begin = 0, end = 0;
};

struct Page {
  std::vector<Piece> pieces;
  std::vector<int64_t> offset;  // per slot: file offset of the page's first byte (4 KiB aligned)
  std::vector<int64_t> length;  // per slot: bytes of state in the page
  int64_t footprint = 0;        // bytes resident while paged in: lengths rounded up to 4 KiB
};

struct PageStoreOptions {
  int64_t page_bytes = 16 << 20;
  int64_t max_resident_bytes = 0;  // 0: unbounded (anonymous memory, no file, no paging)
  int64_t prefetch_pages = 2;
  int64_t align_elems = 1;    // pieces of a tensor start on a multiple of this (quantization block)
  std::string directory;      // where the state file goes; empty: a fresh temporary folder
  std::string file_name = "paged_optimizer_state.bin";
  std::string owner = "paged optimizer";  // for error messages
};

struct PagingStats {
  int64_t file_bytes = 0;
  int64_t num_pages = 0;
  int64_t largest_page_bytes = 0;   // footprint of the largest page
  int64_t pages_in = 0;             // reads, all passes
  int64_t pages_out = 0;            // write-backs, all passes
  int64_t resident_bytes = 0;       // accounted, now
  int64_t resident_high_water = 0;  // accounted, since creation
  int64_t measured_high_water = -1; // mincore() of the mapping, bytes; -1 unless FTCORE_PAGED_STATS=1
};

class Mapping;  // the file and its mapping; outlives the store while views of it exist

class PageStore {
 public:
  // `elements[t][s]`: tensor t's element count in slot s, its numel or 0 for
  // a slot it does not use (8-bit: small tensors keep fp32 state instead);
  // tensors are laid out in this order.
  PageStore(std::vector<SlotFormat> slots, const std::vector<std::vector<int64_t>>& elements,
            const PageStoreOptions& options);
  ~PageStore();
  PageStore(const PageStore&) = delete;
  PageStore& operator=(const PageStore&) = delete;

  // Start of tensor t's bytes in slot s, in the mapping.
  uint8_t* slot_data(size_t tensor, size_t slot) const;
  int64_t tensor_bytes(size_t tensor, size_t slot) const;
  // Keeps the mapping alive (for tensors viewing it past the store's life).
  std::shared_ptr<void> mapping_owner() const;

  const std::vector<Page>& pages() const { return pages_; }
  // Indices of the pages holding any element of tensor t.
  const std::vector<size_t>& pages_of(size_t tensor) const { return pages_of_[tensor]; }

  // Calls update(page) for every page in `order`, each one resident while it
  // runs, within the budget; returns when every page is written back.
  void for_each_page(const std::vector<size_t>& order, const std::function<void(const Page&)>& update);
  // Writes back and drops tensor t's bytes (after writing state in place); no-op when unbounded.
  void release_tensor(size_t tensor);
  // Writes back and drops everything (e.g. after saved-state views were read); no-op when unbounded.
  void release_all();

  bool bounded() const { return options_.max_resident_bytes > 0; }
  PagingStats stats() const;

 private:
  void plan(const std::vector<std::vector<int64_t>>& elements);
  void read_page(const Page& page);
  void write_back(int64_t offset, int64_t length);
  void write_back_page(const Page& page);
  void measure_resident();
  void read_loop();
  void write_loop();

  std::vector<SlotFormat> slots_;
  PageStoreOptions options_;
  std::vector<Page> pages_;
  std::vector<std::vector<size_t>> pages_of_;
  std::vector<std::vector<int64_t>> tensor_offset_;  // [tensor][slot]
  std::vector<std::vector<int64_t>> tensor_bytes_;   // [tensor][slot]
  std::vector<int64_t> region_offset_;               // per slot
  std::shared_ptr<Mapping> mapping_;
  bool measure_ = false;

  // The pass shared with the reader and writer threads (guarded by mu_).
  mutable std::mutex mu_;
  std::condition_variable cv_;
  const std::vector<size_t>* order_ = nullptr;
  size_t next_read_ = 0;     // position in order_ of the next page to read
  size_t consumed_ = 0;      // positions finished by the caller
  std::vector<char> ready_;  // per position: read and resident
  std::vector<size_t> to_write_;  // pages finished, to write back
  int64_t writes_in_flight_ = 0;
  bool stop_ = false;
  PagingStats stats_;
  std::thread reader_, writer_;
};

}  // namespace ftcore::plugins::paged_adamw
