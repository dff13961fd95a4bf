// `ftcore validate` against the recipe corpus in tests/recipes:
//
//   bad/NAME.toml      exits 2, stdout empty, stderr exactly bad/NAME.expected
//                      (run from bad/ with the bare file name, so messages read
//                      "NAME.toml:LINE:COL: ..."); bad/NAME.args, when present,
//                      holds extra arguments, one per line
//   good/NAME.toml     exits 0 (good/NAME.args likewise)
//
// In a .expected file, ${known KIND} (e.g. ${known optimizer}) stands for the
// in-tree plugins of that kind as messages list them ("adamw, lion"), so that
// adding a plugin does not rewrite the corpus; everything else is verbatim.
//
// and that validate never crashes: 200 deterministic mutations of good
// recipes (byte flips, truncations, stray `[` `"` `=` newlines, NUL bytes,
// invalid UTF-8) each exit 0 or 2, never 1 and never on a signal.
//
// The corpus is listed when the test runs, so a new file needs no rebuild.
#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

#include "ftcore/diagnostics.h"
#include "test_support.h"

namespace fs = std::filesystem;
using ftcore::testing::run_command;
using ftcore::testing::shell_quote;

namespace {

const fs::path kCorpus = fs::path(FTCORE_SOURCE_DIR) / "tests" / "recipes";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

void write_file(const fs::path& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

// The NAME.toml files directly in `folder` (not in its subfolders: those
// hold base recipes), sorted.
std::vector<fs::path> recipes_in(const fs::path& folder) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.is_regular_file() && entry.path().extension() == ".toml") out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

// NAME.args: one argument per line, blank lines skipped.
std::vector<std::string> extra_arguments(const fs::path& recipe) {
  std::vector<std::string> args;
  fs::path file = recipe;
  file.replace_extension(".args");
  if (!fs::exists(file)) return args;
  std::istringstream in(read_file(file));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) args.push_back(line);
  return args;
}

// The text of a .expected file with every ${known KIND} replaced.
std::string expand_known_plugins(std::string text) {
  static ftcore::PluginRegistry registry;
  static const bool loaded = (ftcore::testing::load_in_tree_plugins(registry), true);
  (void)loaded;
  const std::string open = "${known ";
  for (size_t at = text.find(open); at != std::string::npos; at = text.find(open, at)) {
    const size_t close = text.find('}', at);
    const std::string kind_name = text.substr(at + open.size(), close - at - open.size());
    ftcore::sdk::ComponentKind kind{};
    if (close == std::string::npos || !ftcore::sdk::parse_component_kind(kind_name, &kind)) {
      ADD_FAILURE() << "bad placeholder in .expected: " << text.substr(at, 40);
      break;
    }
    const std::string names = ftcore::join(registry.names(kind));
    text.replace(at, close + 1 - at, names);
    at += names.size();
  }
  return text;
}

struct Validation {
  int exit_code;
  std::string out, err;
};

// Runs `ftcore validate NAME.toml ARGS...` inside the recipe's folder.
Validation validate(const fs::path& recipe, const std::vector<std::string>& args, const fs::path& stderr_file) {
  std::string command = "cd " + shell_quote(recipe.parent_path().string()) + " && " +
                        shell_quote(ftcore::testing::ftcore_binary()) + " validate " +
                        shell_quote(recipe.filename().string());
  for (const auto& a : args) command += " " + shell_quote(a);
  command += " 2> " + shell_quote(stderr_file.string());
  ftcore::testing::CommandResult r = run_command(command);
  return {r.exit_code, r.output, read_file(stderr_file)};
}

std::string described(const fs::path& recipe, const std::vector<std::string>& args) {
  std::string out = recipe.filename().string();
  for (const auto& a : args) out += " " + a;
  return out;
}

}  // namespace

TEST(RecipeCorpus, EveryBadRecipeHasItsExpectedMessagesAndNothingIsOrphaned) {
  const std::vector<fs::path> bad = recipes_in(kCorpus / "bad");
  EXPECT_GE(bad.size(), 20u);
  EXPECT_GE(recipes_in(kCorpus / "good").size(), 3u);
  for (const auto& recipe : bad) {
    fs::path expected = recipe;
    EXPECT_TRUE(fs::exists(expected.replace_extension(".expected"))) << recipe << " has no .expected";
  }
  for (const char* folder : {"bad", "good"}) {
    for (const auto& entry : fs::directory_iterator(kCorpus / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".expected" && ext != ".args") continue;
      fs::path recipe = entry.path();
      EXPECT_TRUE(fs::exists(recipe.replace_extension(".toml"))) << entry.path() << " belongs to no recipe";
    }
  }
}

TEST(RecipeCorpus, BadRecipesExitTwoWithExactlyTheExpectedMessages) {
  ftcore::testing::TempDir scratch;
  for (const auto& recipe : recipes_in(kCorpus / "bad")) {
    const std::vector<std::string> args = extra_arguments(recipe);
    SCOPED_TRACE("ftcore validate " + described(recipe, args));
    fs::path expected_file = recipe;
    expected_file.replace_extension(".expected");
    const Validation v = validate(recipe, args, scratch / "stderr");
    EXPECT_EQ(v.exit_code, 2);
    EXPECT_EQ(v.out, "");
    EXPECT_EQ(v.err, expand_known_plugins(read_file(expected_file)));
  }
}

TEST(RecipeCorpus, GoodRecipesValidate) {
  ftcore::testing::TempDir scratch;
  for (const auto& recipe : recipes_in(kCorpus / "good")) {
    const std::vector<std::string> args = extra_arguments(recipe);
    SCOPED_TRACE("ftcore validate " + described(recipe, args));
    const Validation v = validate(recipe, args, scratch / "stderr");
    EXPECT_EQ(v.exit_code, 0) << v.err;
    EXPECT_EQ(v.err, "");
    EXPECT_EQ(v.out.rfind(recipe.filename().string() + ": ok (", 0), 0u) << v.out;
  }
}

namespace {

// One random edit of `text`; the kinds a hand-edited or half-written file has.
void mutate(std::string& text, std::mt19937& rng) {
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const size_t at = text.empty() ? 0 : pick(text.size() + 1);
  static const std::vector<std::string> insertions = {
      "[", "]", "\"", "'", "=", "\n", std::string(1, '\0'), "\xff", "\xc3", "\xed\xa0\x80", "\xe2\x82",
      "[[", "{", "}", ",", "#", "\\", "\"\"\"", ".", "\t", "\r", "-", "1e", "inf", "nan", "base = \"x.toml\"\n"};
  switch (pick(6)) {
    case 0:  // flip one bit of one byte
      if (!text.empty()) text[pick(text.size())] ^= static_cast<char>(1u << pick(8));
      break;
    case 1:  // truncate
      text.resize(at);
      break;
    case 2:  // insert a character that matters to TOML, or bad UTF-8
    case 3:
      text.insert(at, insertions[pick(insertions.size())]);
      break;
    case 4:  // delete a short run
      text.erase(at, std::min<size_t>(pick(12) + 1, text.size() - std::min(at, text.size())));
      break;
    case 5: {  // duplicate a line somewhere else (duplicate keys and tables)
      const size_t begin = text.rfind('\n', at == 0 ? 0 : at - 1);
      const size_t start = begin == std::string::npos ? 0 : begin + 1;
      const size_t end = text.find('\n', start);
      const std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start + 1);
      text.insert(pick(text.size() + 1), line);
      break;
    }
  }
}

}  // namespace

TEST(RecipeCorpus, ValidateNeverCrashesOnMangledRecipes) {
  constexpr int kMutants = 200;
  ftcore::testing::TempDir scratch;
  // The base recipes of the good corpus, so that mutants of derived.toml resolve.
  fs::copy(kCorpus / "good" / "parts", scratch / "parts", fs::copy_options::recursive);
  const std::vector<std::string> sources = {read_file(kCorpus / "good" / "full.toml"),
                                            read_file(kCorpus / "good" / "derived.toml"),
                                            read_file(kCorpus / "good" / "minimal.toml")};
  std::mt19937 rng(20240531);
  std::string list;
  for (int i = 0; i < kMutants; ++i) {
    std::string text = sources[i % sources.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) mutate(text, rng);
    const std::string name = "mutant_" + std::to_string(i) + ".toml";
    write_file(scratch / name, text);
    list += name + "\n";
  }
  write_file(scratch / "list", list);
  // Two at a time (the machines running this have few cores); each line of
  // the output is "NAME EXIT_CODE", the shell's 128+N for a signal.
  const std::string command =
      "cd " + shell_quote(scratch.path().string()) + " && xargs -P 2 -I{} sh -c " +
      shell_quote("\"$0\" validate \"$1\" > \"$1.out\" 2> \"$1.err\"; echo \"$1 $?\"") + " " +
      shell_quote(ftcore::testing::ftcore_binary()) + " {} < list";
  const ftcore::testing::CommandResult r = run_command(command);
  std::istringstream lines(r.output);
  int checked = 0, valid = 0;
  for (std::string name; lines >> name;) {
    int code = -1;
    lines >> code;
    ++checked;
    const std::string err = read_file(scratch / (name + ".err"));
    EXPECT_TRUE(code == 0 || code == 2) << name << " exited " << code << "\n" << err << "mutant:\n"
                                        << read_file(scratch / name);
    if (code == 2) {
      // A config error is reported, and located: it starts with a file or --set.
      EXPECT_FALSE(err.empty()) << name;
      EXPECT_TRUE(err.rfind(name, 0) == 0 || err.rfind("parts/", 0) == 0) << name << ": " << err;
    }
    valid += code == 0;
  }
  EXPECT_EQ(checked, kMutants) << r.output;
  // Not a requirement, just a sign the mutations are neither all fatal nor all harmless.
  RecordProperty("valid_mutants", valid);
}
