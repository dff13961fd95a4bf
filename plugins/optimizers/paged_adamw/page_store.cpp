// The page plan, the state file and its mapping, and the reader and writer threads that
// reads pages ahead and writes finished ones back (page_store.h).
#include "page_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <stdexcept>

namespace ftcore::plugins::paged_adamw {
namespace {

constexpr int64_t kOsPage = 4096;
constexpr int64_t kTensorAlign = 64;  // start of a tensor inside a page, per slot

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }
int64_t round_down(int64_t x, int64_t to) { return x / to * to; }

std::string errno_text() { return std::strerror(errno); }

}  // namespace

int64_t slot_bytes(const SlotFormat& f, int64_t elements) {
  return (elements + f.block_elems - 1) / f.block_elems * f.bytes_per_block;
}

// The state file, mapped; removed (with its temporary folder) when the last
// owner goes. Unbounded (in_file false), plain anonymous memory: nothing is
// ever paged out, and a file would only add the kernel's periodic write-back.
class Mapping {
 public:
  Mapping(const std::string& directory, const std::string& file_name, int64_t bytes, const std::string& owner,
          bool in_file) {
    namespace fs = std::filesystem;
    bytes_ = bytes;
    if (bytes_ == 0) return;
    if (!in_file) {
      void* addr = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (addr == MAP_FAILED)
        throw std::runtime_error(owner + ": cannot allocate " + std::to_string(bytes_) + " bytes of state: " + errno_text());
      base_ = static_cast<uint8_t*>(addr);
      return;
    }
    fs::path dir = directory;
    if (dir.empty()) {
      std::string tmpl = (fs::temp_directory_path() / "ftcore-paged-XXXXXX").string();
      if (!mkdtemp(tmpl.data())) throw std::runtime_error(owner + ": cannot create a temporary folder: " + errno_text());
      dir = temp_dir_ = tmpl;
    }
    path_ = (dir / file_name).string();
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) throw std::runtime_error(owner + ": cannot create the state file " + path_ + ": " + errno_text());
    // Reserve the blocks now: running out of disk later would be a SIGBUS in the middle of a step.
    if (int err = posix_fallocate(fd_, 0, bytes_); err != 0) {
      close_and_remove();
      throw std::runtime_error(owner + ": cannot reserve " + std::to_string(bytes_) + " bytes for the state file " +
                               path_ + ": " + std::strerror(err));
    }
    void* addr = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (addr == MAP_FAILED) {
      close_and_remove();
      throw std::runtime_error(owner + ": cannot map the state file " + path_ + ": " + errno_text());
    }
    base_ = static_cast<uint8_t*>(addr);
  }
  ~Mapping() {
    if (base_) ::munmap(base_, bytes_);
    close_and_remove();
  }
  uint8_t* base() const { return base_; }
  int fd() const { return fd_; }
  int64_t bytes() const { return bytes_; }

 private:
  void close_and_remove() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove(path_, ec);
    if (!temp_dir_.empty()) std::filesystem::remove(temp_dir_, ec);
  }
  std::string path_, temp_dir_;
  int fd_ = -1;
  int64_t bytes_ = 0;
  uint8_t* base_ = nullptr;
};

PageStore::PageStore(std::vector<SlotFormat> slots, const std::vector<std::vector<int64_t>>& elements,
                     const PageStoreOptions& options)
    : slots_(std::move(slots)), options_(options) {
  plan(elements);
  int64_t file_bytes = region_offset_.back();
  region_offset_.pop_back();
  mapping_ = std::make_shared<Mapping>(options_.directory, options_.file_name, file_bytes, options_.owner, bounded());
  stats_.file_bytes = file_bytes;
  stats_.num_pages = static_cast<int64_t>(pages_.size());
  for (const Page& p : pages_) stats_.largest_page_bytes = std::max(stats_.largest_page_bytes, p.footprint);
  if (bounded() && stats_.largest_page_bytes > options_.max_resident_bytes)
    throw std::invalid_argument(options_.owner + ": max_resident_bytes = " + std::to_string(options_.max_resident_bytes) +
                                " is smaller than one page (" + std::to_string(stats_.largest_page_bytes) +
                                " bytes); raise it or lower page_bytes");
  const char* env = std::getenv("FTCORE_PAGED_STATS");
  measure_ = env && std::string(env) == "1";
  if (bounded() && file_bytes > 0) {
    // No read-around on faults: a page is read exactly, by read_page.
    ::madvise(mapping_->base(), file_bytes, MADV_RANDOM);
    reader_ = std::thread([this] { read_loop(); });
    writer_ = std::thread([this] { write_loop(); });
  }
}

PageStore::~PageStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (reader_.joinable()) reader_.join();
  if (writer_.joinable()) writer_.join();
}

// Pages in tensor order; see the header for the rules.
void PageStore::plan(const std::vector<std::vector<int64_t>>& elements) {
  const size_t S = slots_.size();
  const int64_t page_bytes = options_.page_bytes;
  // Element slots (fp32 moments, codes) start every page on 4 KiB; block slots (absmax,
  // 1/64 of the codes) follow on contiguously, so a page's absmax may share its first and
  // last 4 KiB with its neighbours': the footprint counts every 4 KiB touched, a shared one
  // in both pages, so the accounted bytes never undercount what is resident.
  auto page_aligned = [&](size_t s) { return slots_[s].block_elems == 1; };
  auto footprint_at = [&](const std::vector<int64_t>& offset, const std::vector<int64_t>& used) {
    int64_t sum = 0;
    for (size_t s = 0; s < S; ++s)
      if (used[s] > 0) sum += round_up(offset[s] + used[s], kOsPage) - round_down(offset[s], kOsPage);
    return sum;
  };
  // The largest piece of a tensor using these slots that fits an empty page. Piece
  // boundaries fall on 4 KiB in every slot used, and on whole quantization blocks.
  auto largest_piece = [&](const std::vector<int64_t>& slot_elements) {
    int64_t granule = std::max<int64_t>(1, options_.align_elems);
    double bytes_per_element = 0;
    for (size_t s = 0; s < S; ++s) {
      if (slot_elements[s] == 0) continue;
      const SlotFormat& f = slots_[s];
      granule = std::lcm(granule, page_aligned(s) ? kOsPage / std::gcd(kOsPage, f.bytes_per_block) : f.block_elems);
      bytes_per_element += static_cast<double>(f.bytes_per_block) / f.block_elems;
    }
    std::vector<int64_t> whole(S), worst_offset(S, 0);
    for (size_t s = 0; s < S; ++s)
      if (!page_aligned(s)) worst_offset[s] = kOsPage - 4;  // a block slot may start anywhere
    auto fits = [&](int64_t n) {
      for (size_t s = 0; s < S; ++s) whole[s] = slot_elements[s] ? slot_bytes(slots_[s], n) : 0;
      return footprint_at(worst_offset, whole) <= page_bytes;
    };
    int64_t n = round_down(static_cast<int64_t>(page_bytes / bytes_per_element), granule);
    while (n > 0 && !fits(n)) n -= granule;
    if (n <= 0)
      throw std::invalid_argument(options_.owner + ": page_bytes = " + std::to_string(page_bytes) +
                                  " is too small: a page must hold " + std::to_string(granule) +
                                  " elements of every state slot");
    return n;
  };
  std::vector<int64_t> cursor(S, 0), used(S, 0);
  Page page;
  bool open = false;
  auto open_page = [&] {
    page = Page{};
    for (size_t s = 0; s < S; ++s) page.offset.push_back(page_aligned(s) ? round_up(cursor[s], kOsPage) : cursor[s]);
    std::fill(used.begin(), used.end(), 0);
    open = true;
  };
  auto close_page = [&] {
    if (!open) return;
    page.length = used;
    page.footprint = footprint_at(page.offset, used);
    for (size_t s = 0; s < S; ++s) cursor[s] = page.offset[s] + used[s];
    for (const Piece& p : page.pieces) pages_of_[p.tensor].push_back(pages_.size());
    pages_.push_back(std::move(page));
    open = false;
  };
  // Tries to add elements [begin, end) of tensor t to the open page; fills offsets on success.
  auto try_add = [&](size_t t, int64_t begin, int64_t end) {
    std::vector<int64_t> next = used, at = used;
    for (size_t s = 0; s < S; ++s) {
      if (elements[t][s] == 0) continue;
      at[s] = page_aligned(s) ? round_up(used[s], kTensorAlign) : used[s];
      next[s] = at[s] + slot_bytes(slots_[s], end - begin);
    }
    if (footprint_at(page.offset, next) > page_bytes) return false;
    if (begin == 0)
      for (size_t s = 0; s < S; ++s) tensor_offset_[t][s] = page.offset[s] + at[s];
    used = next;
    page.pieces.push_back({t, begin, end});
    return true;
  };

  tensor_offset_.assign(elements.size(), std::vector<int64_t>(S, 0));
  tensor_bytes_.assign(elements.size(), std::vector<int64_t>(S, 0));
  pages_of_.assign(elements.size(), {});
  for (size_t t = 0; t < elements.size(); ++t) {
    if (elements[t].size() != S) throw std::logic_error(options_.owner + ": element counts for every slot expected");
    const int64_t n = *std::max_element(elements[t].begin(), elements[t].end());
    for (size_t s = 0; s < S; ++s) tensor_bytes_[t][s] = slot_bytes(slots_[s], elements[t][s]);
    if (n == 0) continue;
    if (!open) open_page();
    if (try_add(t, 0, n)) continue;
    if (!page.pieces.empty()) {  // try a fresh page
      close_page();
      open_page();
      if (try_add(t, 0, n)) continue;
    }
    const int64_t piece_elems = largest_piece(elements[t]);
    for (int64_t b = 0; b < n; b += piece_elems) {  // larger than a page: one piece per page
      if (b > 0) {
        close_page();
        open_page();
      }
      try_add(t, b, std::min(n, b + piece_elems));  // fits: sized for an empty page
    }
  }
  close_page();
  // Regions one after another, each 4 KiB aligned; the last entry is the file size.
  region_offset_.assign(S + 1, 0);
  for (size_t s = 0; s < S; ++s) region_offset_[s + 1] = region_offset_[s] + round_up(cursor[s], kOsPage);
  for (Page& p : pages_)
    for (size_t s = 0; s < S; ++s) p.offset[s] += region_offset_[s];
  for (auto& offsets : tensor_offset_)
    for (size_t s = 0; s < S; ++s) offsets[s] += region_offset_[s];
}

uint8_t* PageStore::slot_data(size_t tensor, size_t slot) const {
  return mapping_->base() + tensor_offset_.at(tensor).at(slot);
}

int64_t PageStore::tensor_bytes(size_t tensor, size_t slot) const { return tensor_bytes_.at(tensor).at(slot); }

std::shared_ptr<void> PageStore::mapping_owner() const { return mapping_; }

void PageStore::read_page(const Page& page) {
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (page.length[s] == 0) continue;
    const int64_t begin = round_down(page.offset[s], kOsPage);
    uint8_t* addr = mapping_->base() + begin;
    const int64_t len = round_up(page.offset[s] + page.length[s], kOsPage) - begin;
    ::madvise(addr, len, MADV_WILLNEED);  // one large read request for the whole extent
#ifdef MADV_POPULATE_WRITE
    if (::madvise(addr, len, MADV_POPULATE_WRITE) == 0) continue;
#endif
    for (int64_t i = 0; i < len; i += kOsPage) {  // older kernels: fault each page in for writing
      volatile uint8_t* b = addr + i;
      *b = *b;
    }
  }
}

void PageStore::write_back(int64_t offset, int64_t length) {
  const int64_t begin = round_down(offset, kOsPage);
  const int64_t end = std::min(round_up(offset + length, kOsPage), mapping_->bytes());
  if (end <= begin) return;
  // Unmap (the page tables' dirty bits go to the page cache), write, then drop the cached pages.
  ::madvise(mapping_->base() + begin, end - begin, MADV_DONTNEED);
  ::sync_file_range(mapping_->fd(), begin, end - begin,
                    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
  ::posix_fadvise(mapping_->fd(), begin, end - begin, POSIX_FADV_DONTNEED);
}

void PageStore::write_back_page(const Page& page) {
  for (size_t s = 0; s < slots_.size(); ++s)
    if (page.length[s] > 0) write_back(page.offset[s], page.length[s]);
}

void PageStore::release_tensor(size_t tensor) {
  if (!bounded()) return;
  for (size_t s = 0; s < slots_.size(); ++s) write_back(tensor_offset_[tensor][s], tensor_bytes_[tensor][s]);
}

void PageStore::release_all() {
  if (bounded() && mapping_->bytes() > 0) write_back(0, mapping_->bytes());
}

void PageStore::measure_resident() {
  std::vector<unsigned char> in_core(static_cast<size_t>(mapping_->bytes() / kOsPage));
  if (::mincore(mapping_->base(), mapping_->bytes(), in_core.data()) != 0) return;
  int64_t pages = 0;
  for (unsigned char c : in_core) pages += c & 1;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.measured_high_water = std::max(stats_.measured_high_water, pages * kOsPage);
}

// Reads pages ahead while the budget has room; one thread, so reads go to the disk in page order.
void PageStore::read_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  auto can_read = [&] {
    if (!order_ || next_read_ >= order_->size()) return false;
    if (next_read_ > consumed_ + static_cast<size_t>(options_.prefetch_pages)) return false;
    const Page& p = pages_[(*order_)[next_read_]];
    return stats_.resident_bytes + p.footprint <= options_.max_resident_bytes;
  };
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || can_read(); });
    if (stop_) return;
    const size_t position = next_read_++;
    const Page& p = pages_[(*order_)[position]];
    stats_.resident_bytes += p.footprint;  // counted from the start of the read
    stats_.resident_high_water = std::max(stats_.resident_high_water, stats_.resident_bytes);
    lock.unlock();
    read_page(p);
    if (measure_) measure_resident();
    lock.lock();
    ready_[position] = 1;
    ++stats_.pages_in;
    cv_.notify_all();
  }
}

// Writes finished pages back and drops them, concurrently with the reads.
void PageStore::write_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !to_write_.empty(); });
    if (to_write_.empty()) return;  // stopping, nothing left
    const Page& p = pages_[to_write_.front()];
    to_write_.erase(to_write_.begin());
    ++writes_in_flight_;
    lock.unlock();
    write_back_page(p);
    lock.lock();
    --writes_in_flight_;
    stats_.resident_bytes -= p.footprint;  // until here
    ++stats_.pages_out;
    cv_.notify_all();
  }
}

void PageStore::for_each_page(const std::vector<size_t>& order, const std::function<void(const Page&)>& update) {
  if (!bounded()) {  // everything stays mapped; the kernel writes dirty pages back when it likes
    for (size_t p : order) update(pages_[p]);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    order_ = &order;
    next_read_ = consumed_ = 0;
    ready_.assign(order.size(), 0);
  }
  cv_.notify_all();
  auto finish = [&](size_t from) {  // hand every page read and not yet written back to the writer; wait
    std::unique_lock<std::mutex> lock(mu_);
    const size_t reads_started = next_read_;
    next_read_ = order.size();  // no further reads
    cv_.wait(lock, [&] {
      for (size_t i = from; i < reads_started; ++i)
        if (!ready_[i]) return false;
      return true;
    });
    for (size_t i = from; i < reads_started; ++i) to_write_.push_back(order[i]);
    cv_.notify_all();
    cv_.wait(lock, [&] { return to_write_.empty() && writes_in_flight_ == 0; });
    order_ = nullptr;
  };
  for (size_t i = 0; i < order.size(); ++i) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return ready_[i] != 0; });
    }
    try {
      update(pages_[order[i]]);
    } catch (...) {
      finish(i);
      throw;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      consumed_ = i + 1;
      to_write_.push_back(order[i]);
    }
    cv_.notify_all();
  }
  finish(order.size());
}

PagingStats PageStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace ftcore::plugins::paged_adamw
