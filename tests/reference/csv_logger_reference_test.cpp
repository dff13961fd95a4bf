// Reference test of logger/csv (plugins/loggers/csv): the files it writes are
// read back by Python's csv.DictReader (tests/reference/csv_reference.py) and
// must hold exactly what was logged: every double bit for bit (shortest
// round-trip formatting), non-finite values as nan/inf, names with commas,
// quotes and line breaks quoted, multi-line texts as one field.
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ftcore/sdk/logger.h"
#include "test_support.h"

namespace ftcore {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

std::shared_ptr<sdk::Logger> make_logger(std::map<std::string, sdk::ParamValue> options = {}) {
  const RegistryEntry& entry = testing::in_tree_entry(sdk::ComponentKind::Logger, "csv");
  return testing::in_tree_registry().create_logger(entry, testing::options_for(entry, std::move(options)));
}

json read_back(const fs::path& metrics, const fs::path& text = {}) {
  std::string args = testing::shell_quote(metrics.string());
  if (!text.empty()) args += " " + testing::shell_quote(text.string());
  return json::parse(testing::run_python("reference/csv_reference.py", args));
}

json as_read(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CsvLogger, DictReaderReadsBackExactlyWhatWasLogged) {
  TempDir dir;
  auto logger = make_logger();
  logger->open({"csv-run", dir.path().string(), {{"recipe_sha256", "abc"}}});

  const double kInf = std::numeric_limits<double>::infinity();
  const std::vector<sdk::MetricRecord> records = {
      {0, "train", 1764470000.25, {{"total_steps", 500}}},
      {10, "train", 1764470010.123456789, {{"loss", 0.1 + 0.2}, {"lr", 2e-4}, {"grad_norm", 1.0 / 3.0}}},
      {20, "train", 1764470020.5, {{"loss", 1e-300}, {"lr", -0.0}, {"acc,\"top1\"", 4.9406564584124654e-324}}},
      {20, "eval", 1764470021.75, {{"loss", std::nan("")}, {"perplexity", kInf}, {"delta", -kInf}}},
      {30, "train", 1764470030.0, {{"tokens_per_second", 123456.789}, {"multi\nline", 1.7976931348623157e308}}},
  };
  for (const auto& r : records) logger->log_metrics(r);
  const std::string sample = "Q: 2, 3?\nA: \"5\"\r\nend";
  logger->log_text(20, "sample, quiz", sample);
  logger->log_text(30, "plain", "x");
  logger->close();

  const json got = read_back(dir / "metrics.csv", dir / "text.csv");
  EXPECT_EQ(got["metrics_fields"], json::parse(R"(["step","phase","time","name","value"])"));
  json expected = json::array();
  for (const auto& r : records)
    for (const auto& [name, value] : r.values)
      expected.push_back({{"step", r.step}, {"phase", r.phase}, {"time", as_read(r.wall_time)}, {"name", name},
                          {"value", as_read(value)}});
  EXPECT_EQ(got["metrics"], expected);
  // By hand, in case as_read() and the plugin shared a mistake.
  EXPECT_EQ(got["metrics"][1]["value"], 0.30000000000000004);
  EXPECT_EQ(got["metrics"][6]["name"], "acc,\"top1\"");
  EXPECT_EQ(got["metrics"][7]["value"], "nan");
  EXPECT_EQ(got["metrics"][9]["value"], "-inf");

  EXPECT_EQ(got["text_fields"], json::parse(R"(["step","time","tag","text"])"));
  ASSERT_EQ(got["texts"].size(), 2u);
  EXPECT_EQ(got["texts"][0]["step"], 20);
  EXPECT_EQ(got["texts"][0]["tag"], "sample, quiz");
  EXPECT_EQ(got["texts"][0]["text"], sample);
  EXPECT_EQ(got["texts"][1]["text"], "x");

  // The exact bytes of the quoting and number forms, as Python's csv writer would produce them.
  const std::string text = file_text(dir / "metrics.csv");
  EXPECT_EQ(text.substr(0, text.find('\n', text.find('\n') + 1) + 1),
            "step,phase,time,name,value\n0,train,1764470000.25,total_steps,500\n");
  EXPECT_NE(text.find("\n20,train,1764470020.5,\"acc,\"\"top1\"\"\",5e-324\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n20,eval,1764470021.75,loss,nan\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n30,train,1764470030,\"multi\nline\",1.7976931348623157e+308\n"), std::string::npos) << text;
}

// A resumed run (metadata resumed_at_step) appends to the same file under the one header.
TEST(CsvLogger, ReopeningAppendsWithoutASecondHeader) {
  TempDir dir;
  for (int64_t step : {1, 2}) {
    auto logger = make_logger({{"text_file", std::string("")}});
    std::map<std::string, std::string> metadata;
    if (step == 2) metadata[ftcore::sdk::kResumedAtStep] = "1";
    logger->open({"csv-run", dir.path().string(), metadata});
    logger->log_metrics({step, "train", 1764470000.0, {{"loss", 1.0 * step}}});
    logger->log_text(step, "dropped", "texts are off");
    logger->close();
  }
  EXPECT_FALSE(fs::exists(dir / "text.csv"));
  const json got = read_back(dir / "metrics.csv");
  ASSERT_EQ(got["metrics"].size(), 2u) << got.dump();
  EXPECT_EQ(got["metrics"][1]["value"], 2.0);
}

TEST(CsvLogger, FlushMakesRowsVisibleAndFileNameIsAnOption) {
  TempDir dir;
  auto logger = make_logger({{"file", std::string("m.csv")}});
  logger->open({"csv-run", dir.path().string(), {}});
  logger->log_metrics({3, "eval", 1764470000.0, {{"loss", 0.5}}});
  logger->flush();
  EXPECT_EQ(read_back(dir / "m.csv")["metrics"].size(), 1u);
  logger->close();
}

TEST(CsvLogger, RefusesAFileWithAnotherHeader) {
  TempDir dir;
  std::ofstream(dir / "metrics.csv") << "epoch,loss\n1,2\n";
  auto logger = make_logger();
  EXPECT_THROW(logger->open({"csv-run", dir.path().string(), {{ftcore::sdk::kResumedAtStep, "1"}}}), std::runtime_error);
  EXPECT_EQ(file_text(dir / "metrics.csv"), "epoch,loss\n1,2\n");  // untouched
}

}  // namespace
}  // namespace ftcore
