// The data pipeline against HF tokenizers / transformers (data_reference.py):
// every format's token ids and loss masks, truncation, train_on_inputs; bad
// rows named by file:line and field; the seeded split; the cache; collation
// with padding and packing.
#include <fstream>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ftcore/collate.h"
#include "ftcore/dataset.h"
#include "ftcore/tokenizer.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ftcore;

namespace {

class DataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ftcore::testing::run_python("unit/data_reference.py", "make-tokenizer " + (dir_ / "tok").string());
    tokenizer_ = Tokenizer::from_folder(dir_ / "tok");
  }

  fs::path write_rows(const std::string& name, const std::vector<std::string>& lines) {
    fs::path p = dir_ / name;
    std::ofstream out(p);
    for (const auto& l : lines) out << l << "\n";
    return p;
  }

  DataConfig config(const fs::path& rows, const std::string& format) {
    DataConfig c;
    c.path = rows;
    c.format = format;
    c.sequence_len = 512;
    return c;
  }

  void expect_matches_reference(const DataConfig& c) {
    std::string args = (dir_ / "tok").string() + " " + c.path.string() + " " + c.format + " " +
                       std::to_string(c.sequence_len) + " " + (c.train_on_inputs ? "1" : "0");
    if (c.format == "template") args += " " + ftcore::testing::shell_quote(c.prompt_template);
    auto want = nlohmann::json::parse(ftcore::testing::run_python("unit/data_reference.py", "expect " + args));
    PreparedData got = prepare_data(c, *tokenizer_, dir_ / "tok" / "tokenizer.json");
    ASSERT_EQ(got.train.size(), want.size()) << c.format;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got.train[i].input_ids, want[i]["input_ids"].get<std::vector<int32_t>>()) << c.format << " row " << i;
      EXPECT_EQ(got.train[i].labels, want[i]["labels"].get<std::vector<int32_t>>()) << c.format << " row " << i;
    }
  }

  ftcore::testing::TempDir dir_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

const std::vector<std::string> kAlpacaRows = {
    R"({"instruction": "What is the capital of France?", "input": "", "output": "Paris"})",
    R"({"instruction": "Translate", "input": "quick brown fox", "output": "renard brun rapide"})",
    R"({"instruction": "Count", "output": "0123456789"})",
};

}  // namespace

TEST_F(DataTest, AlpacaCompletionTemplateAndChatMatchTheReference) {
  expect_matches_reference(config(write_rows("alpaca.jsonl", kAlpacaRows), "alpaca"));
  DataConfig on_inputs = config(write_rows("alpaca2.jsonl", kAlpacaRows), "alpaca");
  on_inputs.train_on_inputs = true;
  expect_matches_reference(on_inputs);
  expect_matches_reference(config(
      write_rows("completion.jsonl", {R"({"text": "The quick brown fox."})", R"({"text": "jumps  over\nthe lazy dog"})"}),
      "completion"));
  DataConfig templ = config(write_rows("template.jsonl", kAlpacaRows), "template");
  templ.prompt_template = "Q: {instruction} ({input})\nA: ";
  expect_matches_reference(templ);
  expect_matches_reference(config(
      write_rows("chat.jsonl",
                 {R"({"messages": [{"role": "user", "content": "What is the capital of France?"}, {"role": "assistant", "content": "Paris."}]})",
                  R"({"conversations": [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "Count"}, {"from": "gpt", "value": "0123"}, {"from": "human", "value": "More"}, {"from": "gpt", "value": "456"}]})"}),
      "chat"));
}

TEST_F(DataTest, TruncatesToSequenceLen) {
  DataConfig c = config(write_rows("long.jsonl", kAlpacaRows), "alpaca");
  c.sequence_len = 20;
  c.train_on_inputs = true;  // 20 tokens leave no answer token; an example without targets is left out
  expect_matches_reference(c);
  PreparedData got = prepare_data(c, *tokenizer_, {});
  EXPECT_EQ(got.truncated, 3);
  for (const auto& e : got.train) EXPECT_EQ(e.input_ids.size(), 20u);
}

TEST_F(DataTest, ABadRowNamesFileLineAndFieldOrIsSkippedAndCounted) {
  fs::path rows = write_rows("bad.jsonl", {kAlpacaRows[0], "", R"({"instruction": "no output"})", "{not json", kAlpacaRows[1]});
  DataConfig c = config(rows, "alpaca");
  try {
    prepare_data(c, *tokenizer_, {});
    FAIL() << "a bad row was accepted";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), rows.string() + ":3: missing field 'output'");
  }
  c.skip_bad_rows = true;
  PreparedData got = prepare_data(c, *tokenizer_, {});
  EXPECT_EQ(got.rows, 4);
  EXPECT_EQ(got.skipped_rows, 2);
  ASSERT_EQ(got.train.size(), 2u);
  EXPECT_EQ(got.train[1].source_line, 5);

  DataConfig chat = config(write_rows("badchat.jsonl", {R"({"messages": [{"role": "robot", "content": "x"}]})"}), "chat");
  try {
    prepare_data(chat, *tokenizer_, {});
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("badchat.jsonl:1: unknown chat role 'robot'"), std::string::npos) << e.what();
  }
}

TEST_F(DataTest, TheValidationSplitIsSeededAndTheCacheRoundTrips) {
  std::vector<std::string> lines;
  for (int i = 0; i < 50; ++i)
    lines.push_back(R"({"instruction": "Question )" + std::to_string(i) + R"(", "output": "Answer"})");
  DataConfig c = config(write_rows("many.jsonl", lines), "alpaca");
  c.val_set_size = 0.2;
  c.dataset_prepared_path = (dir_ / "cache").string();
  PreparedData first = prepare_data(c, *tokenizer_, dir_ / "tok" / "tokenizer.json");
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.validation.size(), 10u);
  EXPECT_EQ(first.train.size(), 40u);
  PreparedData again = prepare_data(c, *tokenizer_, dir_ / "tok" / "tokenizer.json");
  EXPECT_TRUE(again.from_cache);
  ASSERT_EQ(again.validation.size(), first.validation.size());
  for (size_t i = 0; i < first.validation.size(); ++i) {
    EXPECT_EQ(again.validation[i].input_ids, first.validation[i].input_ids);
    EXPECT_EQ(again.validation[i].labels, first.validation[i].labels);
    EXPECT_EQ(again.validation[i].source_line, first.validation[i].source_line);
  }
  c.seed = 7;
  PreparedData other = prepare_data(c, *tokenizer_, dir_ / "tok" / "tokenizer.json");
  EXPECT_FALSE(other.from_cache) << "the seed is part of the cache key";
  std::vector<int64_t> a, b;
  for (const auto& e : first.validation) a.push_back(e.source_line);
  for (const auto& e : other.validation) b.push_back(e.source_line);
  EXPECT_NE(a, b) << "another seed, another split";
}

TEST(Collate, PadsRightOrLeftAndPacksWithRestartingPositions) {
  Example a{{11, 12, 13}, {-100, 12, 13}, 1};
  Example b{{21, 22}, {21, 22}, 2};
  CollateOptions o;
  o.sequence_len = 8;
  o.pad_id = 0;
  TrainBatch right = collate({{&a}, {&b}}, o);
  EXPECT_TRUE(at::equal(right.input_ids, at::tensor({11, 12, 13, 21, 22, 0}, at::kLong).reshape({2, 3})));
  EXPECT_TRUE(at::equal(right.labels, at::tensor({-100, 12, 13, 21, 22, -100}, at::kLong).reshape({2, 3})));
  EXPECT_TRUE(at::equal(right.attention_mask, at::tensor({1, 1, 1, 1, 1, 0}, at::kLong).reshape({2, 3})));
  EXPECT_EQ(right.target_tokens, 3);  // labels[:, 1:]: 12, 13 and 22

  o.pad_left = true;
  o.pad_to_sequence_len = true;
  TrainBatch left = collate({{&b}}, o);
  EXPECT_TRUE(at::equal(left.input_ids, at::tensor({0, 0, 0, 0, 0, 0, 21, 22}, at::kLong).reshape({1, 8})));
  EXPECT_TRUE(at::equal(left.sequence_ids, at::tensor({-1, -1, -1, -1, -1, -1, 0, 0}, at::kInt).reshape({1, 8})));

  o.pad_left = false;
  o.pad_to_sequence_len = false;
  TrainBatch packed = collate({{&a, &b}}, o);
  EXPECT_TRUE(at::equal(packed.input_ids, at::tensor({11, 12, 13, 21, 22}, at::kLong).reshape({1, 5})));
  EXPECT_TRUE(at::equal(packed.position_ids, at::tensor({0, 1, 2, 0, 1}, at::kLong).reshape({1, 5})));
  EXPECT_TRUE(at::equal(packed.sequence_ids, at::tensor({0, 0, 0, 1, 1}, at::kInt).reshape({1, 5})));
  // The second sequence's first token is not predicted from the first sequence.
  EXPECT_TRUE(at::equal(packed.labels, at::tensor({-100, 12, 13, -100, 22}, at::kLong).reshape({1, 5})));
  EXPECT_EQ(packed.target_tokens, 3);
}
