// sdk::parallel_for (sdk/include/ftcore/sdk/parallel.h) from a file compiled
// without OpenMP, as every plugin and core kernel is: it must reach
// libtorch's threads (which at::parallel_for called here would not), cover
// the range once, run serially where at::parallel_for does, and rethrow.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>

#include "ftcore/sdk/parallel.h"

namespace {

struct Pieces {
  std::mutex lock;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::set<std::thread::id> threads;
  void record(int64_t first, int64_t last) {
    std::lock_guard<std::mutex> hold(lock);
    ranges.emplace_back(first, last);
    threads.insert(std::this_thread::get_id());
  }
};

// Each index of [begin, end) in exactly one piece, every piece non-empty.
void expect_cover_once(std::vector<std::pair<int64_t, int64_t>> ranges, int64_t begin, int64_t end) {
  std::sort(ranges.begin(), ranges.end());
  int64_t next = begin;
  for (const auto& [first, last] : ranges) {
    EXPECT_EQ(first, next);
    EXPECT_LT(first, last);
    next = last;
  }
  EXPECT_EQ(next, end);
}

class SdkParallelFor : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = at::get_num_threads(); }
  void TearDown() override { at::set_num_threads(saved_); }
  int saved_ = 1;
};

TEST_F(SdkParallelFor, RunsOnLibtorchsThreadsAndCoversTheRangeOnce) {
  at::set_num_threads(2);
  Pieces pieces;
  ftcore::sdk::parallel_for(3, 1003, 1, [&](int64_t first, int64_t last) {
    pieces.record(first, last);
    // Long enough that one thread cannot take both pieces before the other starts.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  EXPECT_EQ(pieces.threads.size(), 2u) << "pieces ran on " << pieces.threads.size() << " thread(s)";
  EXPECT_EQ(pieces.ranges.size(), 2u);
  expect_cover_once(pieces.ranges, 3, 1003);
}

TEST_F(SdkParallelFor, SerialWithOneThreadOneGrainOrNested) {
  at::set_num_threads(2);
  for (const auto& [threads, grain] : std::vector<std::pair<int, int64_t>>{{1, 1}, {2, 1000}}) {
    at::set_num_threads(threads);
    Pieces pieces;
    ftcore::sdk::parallel_for(0, 1000, grain, [&](int64_t first, int64_t last) { pieces.record(first, last); });
    ASSERT_EQ(pieces.ranges.size(), 1u) << threads << " thread(s), grain " << grain;
    EXPECT_EQ(pieces.ranges[0], std::make_pair(int64_t{0}, int64_t{1000}));
    EXPECT_EQ(*pieces.threads.begin(), std::this_thread::get_id());
  }
  at::set_num_threads(2);
  std::mutex lock;
  std::vector<size_t> inner_pieces;
  ftcore::sdk::parallel_for(0, 2, 1, [&](int64_t, int64_t) {
    Pieces inner;
    ftcore::sdk::parallel_for(0, 100, 1, [&](int64_t first, int64_t last) { inner.record(first, last); });
    std::lock_guard<std::mutex> hold(lock);
    inner_pieces.push_back(inner.ranges.size());
  });
  EXPECT_EQ(inner_pieces, (std::vector<size_t>{1, 1}));
}

TEST_F(SdkParallelFor, RethrowsAPiecesException) {
  at::set_num_threads(2);
  EXPECT_THROW(ftcore::sdk::parallel_for(0, 100, 1,
                                         [](int64_t first, int64_t) {
                                           if (first > 0) throw std::runtime_error("piece failed");
                                         }),
               std::runtime_error);
}

}  // namespace
