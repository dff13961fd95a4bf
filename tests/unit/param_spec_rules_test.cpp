// ParamSpec list lengths (with_length) and rules across keys (rule):
// validate_table reports them as file:line:col like every other problem,
// at the line a user would edit, and only on tables whose keys are each
// valid; require_rules gives factories the same sentence.
#include <gtest/gtest.h>

#include "ftcore/recipe.h"
#include "ftcore/sdk/option_error.h"

using namespace ftcore;

namespace {

// Adan-like: three betas, and a cross-key rule on two of its keys.
std::shared_ptr<sdk::ParamSpec> adan_like_spec() {
  auto s = std::make_shared<sdk::ParamSpec>();
  s->add_float_list("betas", {0.98, 0.92, 0.99}).with_range(0.0, 1.0, false, true).with_length(3);
  s->add_string_list("tags", {"a"}).with_length(1, 2);
  s->add_float("lr", 1e-3).above(0.0);
  s->add_float("max_lr", 1e-2).above(0.0);
  s->rule({"lr", "max_lr"}, "lr <= max_lr", [](const sdk::Options& o) -> std::string {
    if (o.get_float("lr") <= o.get_float("max_lr")) return "";
    return "lr = " + sdk::format_param_value(o.get_float("lr")) + " exceeds max_lr = " +
           sdk::format_param_value(o.get_float("max_lr"));
  });
  return s;
}

std::vector<std::string> problems(const std::string& text, const sdk::ParamSpec& spec) {
  toml::table table = toml::parse(text, std::string_view("r.toml"));
  std::vector<Diagnostic> diagnostics;
  validate_table(table, spec, "[optimizer] (adan)", {}, diagnostics);
  std::vector<std::string> out;
  for (const auto& d : diagnostics) out.push_back(d.str());
  return out;
}

}  // namespace

TEST(ParamSpecRules, ListLengthsAreCheckedAtTheList) {
  const auto spec = adan_like_spec();
  EXPECT_EQ(problems("betas = [0.9, 0.99]\n", *spec),
            std::vector<std::string>{"r.toml:1:9: betas in [optimizer] (adan) must hold exactly 3 items, got 2"});
  EXPECT_EQ(problems("\ntags = [\"a\", \"b\", \"c\"]\n", *spec),
            std::vector<std::string>{"r.toml:2:8: tags in [optimizer] (adan) must hold 1 to 2 items, got 3"});
  EXPECT_EQ(problems("tags = []\n", *spec),
            std::vector<std::string>{"r.toml:1:8: tags in [optimizer] (adan) must hold 1 to 2 items, got 0"});
  EXPECT_TRUE(problems("betas = [0.9, 0.9, 0.99]\ntags = \"one\"\n", *spec).empty());
  // An element out of range is reported once, not also as a wrong length.
  EXPECT_EQ(problems("betas = [0.9, 1.5]\n", *spec),
            std::vector<std::string>{"r.toml:1:15: betas[1] = 1.5 in [optimizer] (adan) is out of range: must be [0, 1)"});
}

TEST(ParamSpecRules, ABrokenRuleIsReportedAtTheLastKeyTheUserWrote) {
  const auto spec = adan_like_spec();
  EXPECT_EQ(problems("max_lr = 1e-4\nlr = 1e-3\n", *spec),
            std::vector<std::string>{"r.toml:2:1: [optimizer] (adan): lr = 0.001 exceeds max_lr = 1e-04"});
  EXPECT_EQ(problems("lr = 1e-3\n\nmax_lr = 1e-4\n", *spec),
            std::vector<std::string>{"r.toml:3:1: [optimizer] (adan): lr = 0.001 exceeds max_lr = 1e-04"});
  // One key written, the other defaulted (max_lr = 1e-2): at the written one.
  EXPECT_EQ(problems("betas = [0.9, 0.9, 0.9]\nlr = 0.5\n", *spec),
            std::vector<std::string>{"r.toml:2:1: [optimizer] (adan): lr = 0.5 exceeds max_lr = 0.01"});
  EXPECT_TRUE(problems("lr = 1e-3\nmax_lr = 1e-3\n", *spec).empty());
}

TEST(ParamSpecRules, RulesRunOnlyOnTablesWhoseKeysAreEachValid) {
  const auto spec = adan_like_spec();
  // lr is out of range: the rule (which would read it) does not run.
  EXPECT_EQ(problems("lr = -1.0\nmax_lr = -2.0\n", *spec),
            (std::vector<std::string>{"r.toml:1:6: lr = -1.0 in [optimizer] (adan) is out of range: must be > 0",
                                      "r.toml:2:10: max_lr = -2.0 in [optimizer] (adan) is out of range: must be > 0"}));
}

TEST(ParamSpecRules, ARuleThatThrowsIsAFailedRuleNamingIt) {
  sdk::ParamSpec s;
  s.add_int("n", 1);
  s.rule({"n"}, "n is even", [](const sdk::Options& o) -> std::string { return std::string(o.get_string("n")); });
  const auto out = problems("n = 3\n", s);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rfind("r.toml:1:1: [optimizer] (adan): the rule \"n is even\" failed: ", 0), 0u) << out[0];
}

TEST(ParamSpecRules, RequireRulesGivesFactoriesTheSameSentence) {
  auto spec = adan_like_spec();
  sdk::Options ok(spec, {});
  EXPECT_NO_THROW(sdk::require_rules(ok));
  sdk::Options bad(spec, {{"lr", sdk::ParamValue(0.5)}});
  try {
    sdk::require_rules(bad);
    FAIL() << "require_rules accepted lr > max_lr";
  } catch (const sdk::OptionError& e) {
    EXPECT_STREQ(e.what(), "lr = 0.5 exceeds max_lr = 0.01");
  }
}

TEST(ParamSpecRules, SpecsRefuseRulesAndLengthsTheyCannotHonour) {
  sdk::ParamSpec s;
  s.add_float("x", 1.0);
  EXPECT_THROW(s.add_float("y", 1.0).with_length(2), sdk::OptionsError);  // not a list
  EXPECT_THROW(s.add_int_list("z", {}).with_length(3, 2), sdk::OptionsError);
  EXPECT_THROW(s.rule({"x", "nope"}, "x and nope", [](const sdk::Options&) { return std::string(); }),
               sdk::OptionsError);
  EXPECT_EQ(s.add_string_list("l", {}).with_length(2).describe_length(), "exactly 2 items");
  EXPECT_EQ(s.add_string_list("m", {}).with_length(1, 4).describe_length(), "1 to 4 items");
  EXPECT_EQ(s.add_string_list("n", {}).describe_length(), "");
}
