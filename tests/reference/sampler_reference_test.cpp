// Reference test of sampler/standard (plugins/samplers): the micro-batches
// of every sampler it registers, for every (rank, epoch) of several
// configurations, must EQUAL what PyTorch and transformers give, computed at
// test time by tests/reference/sampler_reference.py in the venv:
//   sequential/random  torch DistributedSampler (shuffle off/on, set_epoch)
//   group_by_length    transformers' (Distributed)LengthGroupedSampler
// each batched by torch's BatchSampler. Multipack has no installable
// reference: the script packs with its own first-fit-decreasing, written
// independently of the C++, and shards the rows with DistributedSampler.
// The comparison is exact (indices are integers; the one float, multipack's
// packing efficiency, is a ratio of integers computed on both sides: 1e-12).
//
// Then properties no reference states: every rank gets the same number of
// batches; determinism in (seed, epoch); multipack covers every example once
// per epoch apart from the documented padding, never overfills a row,
// refuses too-long examples by index, and packs short Q/A-like examples
// (20..120 tokens into 512) at an efficiency of at least 0.95.
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ftcore/sdk/packing_efficiency.h"
#include "test_support.h"

namespace ftcore {
namespace {

using nlohmann::json;
using Rows = std::vector<std::vector<int64_t>>;
using Batches = std::vector<Rows>;  // micro-batches of rows of example indices

constexpr const char* kLibrary = "libftcore_sampler_standard.so";
const std::vector<std::string> kSamplers = {"sequential", "random", "group_by_length", "multipack"};

// n lengths in [lo, hi], the same on every platform (mt19937_64's output is
// specified by the standard; <random>'s distributions are not).
std::vector<int64_t> lengths_between(int64_t n, int64_t lo, int64_t hi, uint64_t salt) {
  std::mt19937_64 bits(salt);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(lo + static_cast<int64_t>(bits() % static_cast<uint64_t>(hi - lo + 1)));
  return out;
}

struct Case {
  std::string sampler;
  std::vector<int64_t> lengths;
  int64_t batch_size;
  int64_t sequence_len;
  uint64_t seed;
  int64_t world_size;
  std::vector<int64_t> epochs;
  json options;  // only what a recipe would set
};

// n divisible by W and not, n < W (padding repeats the order whole), short
// last batches kept and dropped, seeds above 2^32, and for length grouping
// many ties (lengths 1..20) and every branch of the default mega_batch_mult.
const std::vector<Case>& cases() {
  static const json none = json::object();
  static const std::vector<Case> all = {
      {"sequential", lengths_between(10, 1, 50, 1), 3, 0, 0, 1, {0}, none},
      {"sequential", lengths_between(12, 1, 50, 2), 2, 0, 0, 3, {0, 1}, none},
      {"sequential", lengths_between(11, 1, 50, 3), 3, 0, 0, 4, {0}, {{"drop_last", true}}},
      {"sequential", lengths_between(3, 1, 50, 4), 2, 0, 0, 4, {0}, none},
      {"sequential", lengths_between(101, 1, 50, 5), 4, 0, 7, 8, {2}, none},
      {"random", lengths_between(17, 1, 50, 6), 4, 0, 0, 1, {0, 1, 2}, none},
      {"random", lengths_between(103, 1, 50, 7), 5, 0, 42, 4, {0, 1, 7}, none},
      {"random", lengths_between(50, 1, 50, 8), 8, 0, 1234, 3, {0, 5}, {{"drop_last", true}}},
      {"random", lengths_between(3, 1, 50, 9), 1, 0, 9, 5, {0, 1}, none},
      {"random", lengths_between(1000, 1, 50, 10), 16, 0, 4294967301ull, 2, {0, 3}, none},
      {"group_by_length", lengths_between(200, 1, 20, 11), 4, 0, 0, 1, {0, 1}, none},
      {"group_by_length", lengths_between(1000, 1, 512, 12), 8, 0, 42, 4, {0, 3}, none},
      {"group_by_length", lengths_between(301, 5, 40, 13), 2, 0, 7, 3, {0, 1}, {{"mega_batch_mult", 5}}},
      {"group_by_length", lengths_between(64, 1, 30, 14), 16, 0, 3, 1, {0, 2}, none},
      {"group_by_length", lengths_between(30, 1, 10, 15), 8, 0, 5, 2, {0}, none},
      {"group_by_length", lengths_between(500, 10, 300, 16), 4, 0, 99, 2, {0, 1},
       {{"grouping_batch_size", 16}, {"drop_last", true}}},
      {"group_by_length", lengths_between(5000, 1, 2048, 17), 4, 0, 4294967301ull, 1, {0}, none},
      {"multipack", lengths_between(300, 20, 120, 21), 2, 512, 0, 1, {0, 1}, none},
      {"multipack", lengths_between(1000, 1, 256, 22), 4, 256, 5, 3, {0, 4}, none},
      {"multipack", lengths_between(57, 10, 128, 23), 3, 128, 8, 4, {0}, {{"drop_last", true}}},
      {"multipack", lengths_between(5, 40, 100, 24), 1, 100, 2, 8, {0, 1}, none},
      {"multipack", {300, 200, 100, 400, 512, 0, 212, 300}, 2, 512, 3, 2, {0}, none},
  };
  return all;
}

PluginRegistry& registry() { return testing::in_tree_registry(); }

const RegistryEntry& entry_for(const std::string& name) {
  return testing::in_tree_entry(sdk::ComponentKind::Sampler, name);
}

std::shared_ptr<sdk::Sampler> make_sampler(const std::string& name, const json& options = json::object()) {
  const RegistryEntry& entry = entry_for(name);
  std::map<std::string, sdk::ParamValue> values;
  for (const auto& [key, value] : options.items()) {
    if (value.is_boolean()) values[key] = value.get<bool>();
    else values[key] = value.get<int64_t>();
  }
  return registry().create_sampler(entry, testing::options_for(entry, std::move(values)));
}

sdk::SamplerInput input_of(std::vector<int64_t> lengths, int64_t batch_size, int64_t sequence_len, uint64_t seed,
                           int64_t rank, int64_t world_size) {
  return sdk::SamplerInput{std::move(lengths), batch_size, sequence_len, seed, rank, world_size};
}

Batches nested(const std::vector<sdk::Batch>& batches) {
  Batches out;
  for (const sdk::Batch& b : batches) out.push_back(b.rows);
  return out;
}

// Where two batch lists first differ, in words; empty when they are equal.
std::string first_difference(const Batches& ours, const Batches& expected) {
  if (ours == expected) return "";
  for (size_t b = 0; b < std::min(ours.size(), expected.size()); ++b)
    if (ours[b] != expected[b])
      return "batch " + std::to_string(b) + ": ftcore " + json(ours[b]).dump() + ", reference " + json(expected[b]).dump();
  return "ftcore has " + std::to_string(ours.size()) + " batches, the reference " + std::to_string(expected.size());
}

void expect_matches_reference(const std::string& sampler) {
  json request = json::array();
  for (size_t i = 0; i < cases().size(); ++i) {
    const Case& c = cases()[i];
    if (c.sampler != sampler) continue;
    request.push_back({{"id", std::to_string(i)}, {"sampler", c.sampler}, {"lengths", c.lengths},
                       {"batch_size", c.batch_size}, {"sequence_len", c.sequence_len}, {"seed", c.seed},
                       {"world_size", c.world_size}, {"epochs", c.epochs}, {"options", c.options}});
  }
  ASSERT_FALSE(request.empty()) << "no cases for " << sampler;
  json reply;
  ASSERT_NO_THROW(reply = json::parse(testing::run_python("reference/sampler_reference.py",
                                                          testing::shell_quote(request.dump()))));
  size_t runs = 0;
  for (const json& r : reply) {
    const Case& c = cases()[std::stoul(r.at("id").get<std::string>())];
    const std::shared_ptr<sdk::Sampler> ours = make_sampler(sampler, c.options);
    ASSERT_EQ(r.at("runs").size(), c.epochs.size() * static_cast<size_t>(c.world_size));
    for (const json& run : r.at("runs")) {
      const int64_t rank = run.at("rank"), epoch = run.at("epoch");
      SCOPED_TRACE(sampler + " case " + r.at("id").get<std::string>() + " n=" + std::to_string(c.lengths.size()) +
                   " B=" + std::to_string(c.batch_size) + " W=" + std::to_string(c.world_size) + " rank " +
                   std::to_string(rank) + " epoch " + std::to_string(epoch) + " " + c.options.dump());
      const sdk::SamplerInput input = input_of(c.lengths, c.batch_size, c.sequence_len, c.seed, rank, c.world_size);
      const std::vector<sdk::Batch> batches = ours->batches(input, epoch);
      EXPECT_EQ(first_difference(nested(batches), run.at("batches").get<Batches>()), "");
      if (run.contains("efficiency")) {
        EXPECT_NEAR(sdk::packing_efficiency(batches, c.lengths, c.sequence_len),
                    run.at("efficiency").get<double>(), 1e-12);
      }
      ++runs;
    }
  }
  std::printf("%s: %zu configurations, %zu (rank, epoch) runs compared\n", sampler.c_str(), reply.size(), runs);
}

TEST(SamplerReference, SequentialMatchesDistributedSampler) { expect_matches_reference("sequential"); }
TEST(SamplerReference, RandomMatchesDistributedSamplerShuffled) { expect_matches_reference("random"); }
TEST(SamplerReference, GroupByLengthMatchesTransformers) { expect_matches_reference("group_by_length"); }
TEST(SamplerReference, MultipackMatchesIndependentFirstFitDecreasing) { expect_matches_reference("multipack"); }

// Every rank's batches for one epoch.
std::vector<std::vector<sdk::Batch>> every_rank(const sdk::Sampler& sampler, sdk::SamplerInput input, int64_t epoch) {
  std::vector<std::vector<sdk::Batch>> out;
  for (input.rank = 0; input.rank < input.world_size; ++input.rank) out.push_back(sampler.batches(input, epoch));
  return out;
}

TEST(SamplerProperties, EveryRankGetsTheSameNumberOfBatches) {
  for (const std::string& name : kSamplers) {
    for (bool drop_last : {false, true}) {
      const auto sampler = make_sampler(name, {{"drop_last", drop_last}});
      for (int64_t n : {0, 1, 5, 37, 100}) {
        for (int64_t world : {1, 2, 3, 8}) {
          for (int64_t batch_size : {1, 3}) {
            SCOPED_TRACE(name + " n=" + std::to_string(n) + " W=" + std::to_string(world) +
                         " B=" + std::to_string(batch_size) + (drop_last ? " drop_last" : ""));
            const auto ranks = every_rank(*sampler, input_of(lengths_between(n, 1, 64, n), batch_size, 64, 1, 0, world), 1);
            for (const auto& batches : ranks) EXPECT_EQ(batches.size(), ranks[0].size());
            if (n == 0) EXPECT_TRUE(ranks[0].empty());
            if (n > 0 && !drop_last) EXPECT_FALSE(ranks[0].empty());
          }
        }
      }
    }
  }
}

TEST(SamplerProperties, DeterministicInSeedAndEpoch) {
  const std::vector<int64_t> lengths = lengths_between(200, 20, 120, 31);
  for (const std::string& name : kSamplers) {
    SCOPED_TRACE(name);
    const auto sampler = make_sampler(name);
    const auto at = [&](uint64_t seed, int64_t epoch) {
      return nested(sampler->batches(input_of(lengths, 2, 256, seed, 1, 2), epoch));
    };
    EXPECT_EQ(at(3, 2), at(3, 2));
    EXPECT_EQ(at(3, 2), nested(make_sampler(name)->batches(input_of(lengths, 2, 256, 3, 1, 2), 2)));
    if (name == "sequential") {
      EXPECT_EQ(at(3, 0), at(4, 1));  // the order is the dataset's, whatever the seed and epoch
    } else {
      EXPECT_NE(at(3, 0), at(3, 1));
      EXPECT_NE(at(3, 0), at(4, 0));
    }
  }
}

TEST(SamplerProperties, RefusesImpossibleInputWithASentence) {
  const auto sampler = make_sampler("random");
  const std::vector<int64_t> lengths = {5, 6, 7};
  EXPECT_THROW(sampler->batches(input_of(lengths, 2, 0, 0, 2, 2), 0), std::invalid_argument);
  EXPECT_THROW(sampler->batches(input_of(lengths, 0, 0, 0, 0, 1), 0), std::invalid_argument);
  EXPECT_THROW(sampler->batches(input_of(lengths, 1, 0, 0, 0, 1), -1), std::invalid_argument);
  EXPECT_THROW(make_sampler("multipack")->batches(input_of(lengths, 1, 0, 0, 0, 1), 0), std::invalid_argument);
}

TEST(SamplerMultipack, CoversEveryExampleOncePerEpochApartFromPadding) {
  const std::vector<int64_t> lengths = lengths_between(997, 20, 120, 41);
  const auto sampler = make_sampler("multipack");
  const size_t packed_rows = nested(sampler->batches(input_of(lengths, 1, 512, 0, 0, 1), 0)).size();
  for (int64_t world : {1, 2, 3, 8}) {
    for (int64_t epoch : {0, 1}) {
      SCOPED_TRACE("W=" + std::to_string(world) + " epoch " + std::to_string(epoch));
      std::map<std::vector<int64_t>, int> row_count;
      size_t rows = 0;
      for (const auto& batches : every_rank(*sampler, input_of(lengths, 2, 512, 5, 0, world), epoch))
        for (const sdk::Batch& b : batches)
          for (const auto& row : b.rows) ++row_count[row], ++rows;
      // DistributedSampler-style padding repeats fewer than W rows, each once.
      const size_t padded = (packed_rows + world - 1) / world * world;
      EXPECT_EQ(row_count.size(), packed_rows);
      EXPECT_EQ(rows, padded);
      std::vector<int> seen(lengths.size(), 0);
      for (const auto& [row, count] : row_count) {
        EXPECT_LE(count, 2);
        for (int64_t example : row) ++seen[example];
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(lengths.size())) << "each in one row";
    }
  }
}

TEST(SamplerMultipack, DropLastKeepsOnlyFullBatches) {
  const std::vector<int64_t> lengths = lengths_between(500, 20, 120, 42);
  const auto sampler = make_sampler("multipack", {{"drop_last", true}});
  for (const auto& batches : every_rank(*sampler, input_of(lengths, 4, 512, 0, 0, 3), 0))
    for (const sdk::Batch& b : batches) EXPECT_EQ(b.rows.size(), 4u);
}

TEST(SamplerMultipack, NoRowExceedsSequenceLen) {
  for (int64_t sequence_len : {16, 100, 512, 2048}) {
    for (uint64_t salt : {1, 2, 3}) {
      const std::vector<int64_t> lengths = lengths_between(700, 0, sequence_len, salt);  // exact fits included
      for (const sdk::Batch& b : make_sampler("multipack")->batches(input_of(lengths, 3, sequence_len, salt, 0, 1), 0)) {
        for (const auto& row : b.rows) {
          int64_t tokens = 0;
          for (int64_t example : row) tokens += lengths[example];
          EXPECT_LE(tokens, sequence_len) << json(row).dump();
          EXPECT_FALSE(row.empty());
        }
      }
    }
  }
}

TEST(SamplerMultipack, RefusesAnExampleLongerThanSequenceLenByIndex) {
  const std::vector<int64_t> lengths = {10, 20, 600, 30, 700};
  try {
    make_sampler("multipack")->batches(input_of(lengths, 1, 512, 0, 0, 1), 0);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("example 2 has 600 tokens"), std::string::npos) << message;
    EXPECT_NE(message.find("sequence_len = 512"), std::string::npos) << message;
    EXPECT_NE(message.find("2 example(s) too long"), std::string::npos) << message;
  }
}

TEST(SamplerMultipack, PackingEfficiencyIsTokensOverRowBudget) {
  // FFD: 400 opens row 0 (room 112), 300 row 1 (212), 200 joins row 1, 100 row 0.
  const std::vector<int64_t> lengths = {300, 200, 100, 400};
  const auto batches = make_sampler("multipack")->batches(input_of(lengths, 2, 512, 0, 0, 1), 0);
  EXPECT_EQ(sdk::packing_efficiency(batches, lengths, 512), 1000.0 / 1024.0);
  EXPECT_EQ(sdk::packing_efficiency({}, lengths, 512), 0.0);
}

TEST(SamplerMultipack, EfficiencyOnShortQaPairsIsAtLeast95Percent) {
  // Short Q/A pairs: 20..120 tokens, packed into rows of 512.
  for (int64_t n : {1000, 10000}) {
    const std::vector<int64_t> lengths = lengths_between(n, 20, 120, 51);
    const auto sampler = make_sampler("multipack");
    for (int64_t world : {1, 8}) {
      std::vector<sdk::Batch> all;
      for (const auto& batches : every_rank(*sampler, input_of(lengths, 4, 512, 0, 0, world), 0))
        all.insert(all.end(), batches.begin(), batches.end());
      const double efficiency = sdk::packing_efficiency(all, lengths, 512);
      std::printf("multipack efficiency, n=%lld lengths 20..120, sequence_len 512, W=%lld: %.5f\n",
                  static_cast<long long>(n), static_cast<long long>(world), efficiency);
      EXPECT_GE(efficiency, 0.95) << "n=" << n << " W=" << world;
    }
  }
}

TEST(SamplerSpec, RegistersTheFourSamplersWithDocumentedKeys) {
  std::set<std::string> registered;
  for (const RegistryEntry* e : registry().entries(sdk::ComponentKind::Sampler)) {
    if (e->library_path().filename() != kLibrary) continue;
    registered.insert(e->name);
    EXPECT_FALSE(e->summary.empty()) << e->key();
    ASSERT_NE(e->params->find("drop_last"), nullptr) << e->key();
    for (const sdk::Param& p : e->params->params()) {
      EXPECT_FALSE(p.doc.empty()) << e->key() << "." << p.key;
      if (p.type == sdk::ParamType::Int) EXPECT_TRUE(p.range.has_value()) << e->key() << "." << p.key;
    }
  }
  EXPECT_EQ(registered, std::set<std::string>(kSamplers.begin(), kSamplers.end()));
}

}  // namespace
}  // namespace ftcore
