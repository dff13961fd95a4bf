// Reference test of logger/tensorboard (plugins/loggers/tensorboard): event
// files it writes are read back by the tensorboard package
// (tests/reference/tensorboard_reference.py: EventAccumulator, EventFileLoader
// with tensorboard's record reader, and an independent CRC-32C), and what
// TensorBoard sees must equal what was logged.
//
// Exact comparison: scalars are float32 in the file, so a logged double v
// must read back as exactly double(float(v)) (0.1 -> 0.10000000149011612);
// wall times and steps are exact. Python prints floats in shortest
// round-trip form and nlohmann parses them correctly rounded, so the JSON
// path adds no error.
#include <fstream>
#include <limits>
#include <regex>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../plugins/loggers/tensorboard/crc32c.h"
#include "ftcore/sdk/logger.h"
#include "test_support.h"

namespace ftcore {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

std::shared_ptr<sdk::Logger> make_logger(std::map<std::string, sdk::ParamValue> options = {}) {
  const RegistryEntry& entry = testing::in_tree_entry(sdk::ComponentKind::Logger, "tensorboard");
  return testing::in_tree_registry().create_logger(entry, testing::options_for(entry, std::move(options)));
}

json read_back(const fs::path& dir) {
  return json::parse(testing::run_python("reference/tensorboard_reference.py", testing::shell_quote(dir.string())));
}

// What TensorBoard must report for a logged value: float32, non-finite as text.
json as_read(double value) {
  const float f = static_cast<float>(value);
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  return static_cast<double>(f);
}

std::string hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// The published check value and the RFC 3720 (iSCSI) B.4 vectors.
TEST(Crc32c, MatchesPublishedVectors) {
  using tensorboard::crc32c;
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, '\0'), down(32, '\0');
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<char>(i);
    down[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
}

struct Logged {
  std::string tag;
  int64_t step;
  double wall_time;
  double value;
};

TEST(TensorboardLogger, ScalarsTextAndMetadataReadBackByTensorboard) {
  TempDir dir;
  auto logger = make_logger();
  logger->open({"tb-run", dir.path().string(), {{"recipe_sha256", "0123abcd"}, {"note", "a|b\nc"}}});

  std::vector<Logged> logged;
  auto log = [&](int64_t step, const std::string& phase, double t, std::vector<std::pair<std::string, double>> v) {
    for (const auto& [name, value] : v) logged.push_back({phase + "/" + name, step, t, value});
    logger->log_metrics({step, phase, t, std::move(v)});
  };
  const double kInf = std::numeric_limits<double>::infinity();
  log(0, "train", 1764470000.25, {{"total_steps", 30}});
  log(10, "train", 1764470010.123456, {{"loss", 2.5}, {"lr", 0.1}, {"grad_norm", 1.0 / 3.0}});
  log(20, "train", 1764470020.5, {{"loss", 1.8342}, {"lr", 3e-4}, {"grad_norm", 1e39}, {"peak_rss_mb", 512.25}});
  log(20, "eval", 1764470021.75, {{"loss", 1.9}, {"perplexity", 6.6858944422792685}});
  log(30, "train", 1764470030.0, {{"loss", std::nan("")}, {"lr", -kInf}, {"grad_norm", 0.0}});
  const std::string sample = "Q: 2 + 2?\nA: 4 \xe2\x9c\x93 | \"quoted\"";
  logger->log_text(20, "sample", sample);
  logger->close();

  const json got = read_back(dir.path());
  ASSERT_EQ(got["files"].size(), 1u) << got.dump();
  const std::string file = got["files"][0];
  EXPECT_TRUE(std::regex_match(file, std::regex(R"(events\.out\.tfevents\.\d{10}\.)" + hostname()))) << file;

  // file_version first, then START and the metadata at the first step, then one event per record.
  const json& events = got["events"];
  ASSERT_EQ(events.size(), 9u) << events.dump();
  EXPECT_EQ(got["records"], 9);
  EXPECT_EQ(events[0]["kind"], "file_version");
  EXPECT_EQ(events[0]["file_version"], "brain.Event:2");
  EXPECT_EQ(events[1]["kind"], "session_log");
  EXPECT_EQ(events[1]["status"], 1);  // START
  EXPECT_EQ(events[1]["step"], 0);
  EXPECT_EQ(events[2]["tags"], json::array({"run/metadata"}));
  EXPECT_EQ(events[4]["tags"], json::array({"train/loss", "train/lr", "train/grad_norm"}));
  EXPECT_EQ(events[4]["wall_time"], 1764470010.123456);
  EXPECT_EQ(events[8]["tags"], json::array({"sample"}));

  // Every logged value, in order, under its tag.
  std::map<std::string, json> expected;
  for (const Logged& l : logged) {
    if (!expected.count(l.tag)) expected[l.tag] = json::array();
    expected[l.tag].push_back({l.step, l.wall_time, as_read(l.value)});
  }
  EXPECT_EQ(got["scalars"].size(), expected.size()) << got["scalars"].dump();
  for (const auto& [tag, rows] : expected) EXPECT_EQ(got["scalars"][tag], rows) << tag;
  // Spot checks written out by hand, in case as_read() and the plugin shared a mistake.
  EXPECT_EQ(got["scalars"]["train/lr"][0][2], 0.10000000149011612);
  EXPECT_EQ(got["scalars"]["train/grad_norm"][1][2], "inf");  // 1e39 > FLT_MAX
  EXPECT_EQ(got["scalars"]["train/loss"][2][2], "nan");
  EXPECT_EQ(got["scalars"]["eval/loss"][0][0], 20);

  ASSERT_EQ(got["texts"]["sample"].size(), 1u);
  EXPECT_EQ(got["texts"]["sample"][0][0], 20);
  EXPECT_EQ(got["texts"]["sample"][0][2], sample);
  EXPECT_EQ(got["text_plugin"]["sample"], "text");
  EXPECT_EQ(got["text_plugin"]["run/metadata"], "text");
  ASSERT_EQ(got["texts"]["run/metadata"].size(), 1u);
  EXPECT_EQ(got["texts"]["run/metadata"][0][0], 0);
  // std::map order: note before recipe_sha256; '|' escaped, the line break a space.
  EXPECT_EQ(got["texts"]["run/metadata"][0][2],
            "| key | value |\n|---|---|\n| run_name | tb-run |\n| note | a\\|b c |\n| recipe_sha256 | 0123abcd |\n");
}

TEST(TensorboardLogger, FlushMakesRecordsVisibleWhileTheFileStaysOpen) {
  TempDir dir;
  auto logger = make_logger({{"run_metadata", false}});
  logger->open({"tb-run", dir.path().string(), {}});
  logger->log_metrics({5, "train", 1764470000.5, {{"loss", 3.0}}});
  logger->flush();
  json got = read_back(dir.path());
  EXPECT_EQ(got["scalars"]["train/loss"], json::array({json::array({5, 1764470000.5, 3.0})}));
  EXPECT_FALSE(got["texts"].contains("run/metadata"));

  logger->log_metrics({6, "train", 1764470001.5, {{"loss", 2.0}}});
  logger->close();
  got = read_back(dir.path());
  EXPECT_EQ(got["scalars"]["train/loss"].size(), 2u);
  EXPECT_EQ(got["files"].size(), 1u);  // the same file, not a new one per flush
}

TEST(TensorboardLogger, LogDirIsRelativeToTheRunFolder) {
  TempDir dir;
  auto logger = make_logger({{"log_dir", std::string("tb/sub")}});
  logger->open({"tb-run", dir.path().string(), {}});
  logger->log_metrics({1, "eval", 1764470000.0, {{"loss", 1.5}}});
  logger->close();
  EXPECT_TRUE(read_back(dir.path())["files"].empty());
  const json got = read_back(dir / "tb/sub");
  EXPECT_EQ(got["scalars"]["eval/loss"], json::array({json::array({1, 1764470000.0, 1.5})}));
}

// A process killed after step 30 and resumed from its step-20 checkpoint:
// the second file's SessionLog START at 20 makes TensorBoard drop the first
// process's steps >= 20, so the curve has no doubled tail.
TEST(TensorboardLogger, ResumedRunReplacesTheStepsItRedoes) {
  TempDir dir;
  auto first = make_logger();
  first->open({"tb-run", dir.path().string(), {}});
  for (int64_t step : {0, 10, 20, 30}) first->log_metrics({step, "train", 1764470000.0 + step, {{"loss", 10.0 - step / 10}}});
  first->close();
  auto second = make_logger();
  second->open({"tb-run", dir.path().string(), {}});
  for (int64_t step : {20, 30, 40}) second->log_metrics({step, "train", 1764480000.0 + step, {{"loss", 1.0 * step}}});
  second->close();

  const json got = read_back(dir.path());
  ASSERT_EQ(got["files"].size(), 2u) << got.dump();
  EXPECT_EQ(got["scalars"]["train/loss"],
            json::parse("[[0, 1764470000.0, 10.0], [10, 1764470010.0, 9.0], [20, 1764480020.0, 20.0],"
                        " [30, 1764480030.0, 30.0], [40, 1764480040.0, 40.0]]"));
}

// The readers really check the CRCs: one flipped bit in a record's data fails it.
TEST(TensorboardLogger, ReaderRejectsACorruptedRecord) {
  TempDir dir;
  auto logger = make_logger();
  logger->open({"tb-run", dir.path().string(), {}});
  logger->log_metrics({1, "train", 1764470000.0, {{"loss", 1.25}}});
  logger->close();
  const json ok = read_back(dir.path());
  const fs::path file = dir / ok["files"][0].get<std::string>();
  const auto size = fs::file_size(file);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(size) - 8);  // inside the last record's data
    char c = 0;
    f.read(&c, 1);
    c ^= 0x01;
    f.seekp(static_cast<std::streamoff>(size) - 8);
    f.write(&c, 1);
  }
  try {
    read_back(dir.path());
    FAIL() << "a corrupted record was accepted";
  } catch (const std::runtime_error& e) {
    // Both readers stop there: ours (an independent CRC-32C) and tensorboard's.
    EXPECT_TRUE(std::regex_search(std::string(e.what()),
                                  std::regex(R"(bad data CRC at byte \d+; tensorboard's reader yielded (\d+) records, \1 precede)")))
        << e.what();
  }
}

}  // namespace
}  // namespace ftcore
