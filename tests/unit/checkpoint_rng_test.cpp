// The CPU generator's state in checkpoints: written as a uint8 tensor in
// rng_state.safetensors and read back byte for byte; checkpoints from before
// that file (base64 text in trainer_state.json, "rng": {"cpu": ...}) still
// resume with the same bytes. The old form is produced here by Python's
// base64 module from the same bytes, as the old writer encoded them.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <fstream>

#include "../../core/src/train/checkpoint.h"
#include "ftcore/safetensors.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace ftcore::train {
namespace {

at::Tensor current_cpu_rng_state() {
  at::manual_seed(1234);
  at::randn({7});  // move the generator off its seed position
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}

CheckpointContents small_checkpoint(const at::Tensor& rng) {
  CheckpointContents c;
  c.weights_file = "adapter_model.safetensors";
  c.weights.add("w", at::arange(4, at::kFloat));
  c.text_files.emplace_back("adapter_config.json", "{}\n");
  c.optimizer_state.add("w.exp_avg", at::zeros({4}));
  c.state.global_step = 3;
  c.state.total_steps = 10;
  c.state.cpu_rng_state = rng;
  return c;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Rewrites a checkpoint into the form written before rng_state.safetensors.
void make_old_style(const fs::path& dir, const at::Tensor& rng, const std::string& base64_override = "") {
  std::string text = base64_override;
  if (text.empty()) {
    const fs::path raw = dir / "rng.bin";
    std::ofstream(raw, std::ios::binary)
        .write(static_cast<const char*>(rng.data_ptr()), static_cast<std::streamsize>(rng.numel()));
    const auto result = ftcore::testing::run_command(
        ftcore::testing::shell_quote(FTCORE_TEST_PYTHON) +
        " -c 'import base64,sys; print(base64.b64encode(open(sys.argv[1],\"rb\").read()).decode(), end=\"\")' " +
        ftcore::testing::shell_quote(raw.string()));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    text = result.output;
    fs::remove(raw);
  }
  nlohmann::json state = read_json(dir / "trainer_state.json");
  state["rng"] = {{"cpu", text}};
  std::ofstream(dir / "trainer_state.json") << state.dump(2) << "\n";
  fs::remove(dir / "rng_state.safetensors");
}

}  // namespace

TEST(CheckpointRngState, IsATensorInRngStateSafetensorsReadBackExactly) {
  ftcore::testing::TempDir run;
  const at::Tensor rng = current_cpu_rng_state();
  const fs::path dir = write_checkpoint(run.path(), small_checkpoint(rng));
  ASSERT_TRUE(fs::exists(dir / "rng_state.safetensors"));
  EXPECT_FALSE(read_json(dir / "trainer_state.json").contains("rng")) << "no base64 copy in the JSON";
  const at::Tensor stored = *safetensors::File::open(dir / "rng_state.safetensors")->read_all().find("cpu");
  EXPECT_EQ(stored.scalar_type(), at::kByte);
  EXPECT_TRUE(at::equal(stored, rng));
  const LoadedCheckpoint loaded = read_checkpoint(dir, "adapter_model.safetensors");
  EXPECT_TRUE(at::equal(loaded.state.cpu_rng_state, rng));
}

TEST(CheckpointRngState, AnOldCheckpointWithBase64TextStillResumesWithTheSameBytes) {
  ftcore::testing::TempDir run;
  const at::Tensor rng = current_cpu_rng_state();
  ASSERT_NE(rng.numel() % 3, 0) << "the test wants base64 padding";
  const fs::path dir = write_checkpoint(run.path(), small_checkpoint(rng));
  make_old_style(dir, rng);
  ASSERT_FALSE(fs::exists(dir / "rng_state.safetensors"));
  const LoadedCheckpoint loaded = read_checkpoint(dir, "adapter_model.safetensors");
  ASSERT_EQ(loaded.state.cpu_rng_state.numel(), rng.numel());
  EXPECT_TRUE(at::equal(loaded.state.cpu_rng_state, rng));
}

TEST(CheckpointRngState, BadBase64OrNoStateAtAllIsAnErrorNamingTheFile) {
  ftcore::testing::TempDir run;
  const at::Tensor rng = current_cpu_rng_state();
  const fs::path dir = write_checkpoint(run.path(), small_checkpoint(rng));
  make_old_style(dir, rng, "not*base64!");
  try {
    read_checkpoint(dir, "adapter_model.safetensors");
    FAIL() << "bad base64 was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("trainer_state.json: rng state is not base64"), std::string::npos)
        << e.what();
  }
  nlohmann::json state = read_json(dir / "trainer_state.json");
  state.erase("rng");
  std::ofstream(dir / "trainer_state.json") << state.dump(2) << "\n";
  try {
    read_checkpoint(dir, "adapter_model.safetensors");
    FAIL() << "a checkpoint without RNG state was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rng_state.safetensors does not exist"), std::string::npos) << e.what();
  }
}

}  // namespace ftcore::train
