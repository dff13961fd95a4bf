// Checkpoint folders: writing (through ftcore/atomic_file.h), reading back
// (old checkpoints with base64 RNG state included), rotation.
#include "checkpoint.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

#include <ATen/ATen.h>
#include <openssl/evp.h>

#include "ftcore/atomic_file.h"
#include "ftcore/safetensors.h"
#include "ftcore/stop_request.h"

namespace fs = std::filesystem;

namespace ftcore::train {

namespace {

constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kRngStateFile = "rng_state.safetensors";  // tensor "cpu": the CPU generator's state

// Checkpoints written before rng_state.safetensors kept the CPU generator's
// state as base64 text in trainer_state.json ("rng": {"cpu": "..."}); they
// still resume. Decoded by OpenSSL, which also hashes (util/hash.cpp).
at::Tensor decode_base64_rng_state(const std::string& text, const std::string& origin) {
  const auto fail = [&] { return std::runtime_error(origin + ": rng state is not base64"); };
  if (text.size() % 4 != 0) throw fail();
  std::vector<unsigned char> bytes(text.size() / 4 * 3);
  const int decoded = EVP_DecodeBlock(bytes.data(), reinterpret_cast<const unsigned char*>(text.data()),
                                      static_cast<int>(text.size()));
  if (decoded < 0) throw fail();
  // EVP_DecodeBlock decodes the '=' padding as zero bytes; they are not data.
  size_t size = static_cast<size_t>(decoded);
  for (size_t i = text.size(); i > 0 && text[i - 1] == '=' && size > 0; --i) --size;
  at::Tensor state = at::empty({static_cast<int64_t>(size)}, at::kByte);
  std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size), state.data_ptr<uint8_t>());
  return state;
}

at::Tensor read_rng_state_file(const fs::path& path) {
  const sdk::TensorMap tensors = safetensors::File::open(path)->read_all();
  const at::Tensor* cpu = tensors.find("cpu");
  if (!cpu) throw std::runtime_error(path.string() + ": no tensor 'cpu' (the CPU generator's state)");
  if (cpu->scalar_type() != at::kByte || cpu->dim() != 1)
    throw std::runtime_error(path.string() + ": tensor 'cpu' must be a 1-D uint8 tensor, got " +
                             std::string(c10::toString(cpu->scalar_type())) + " with " + std::to_string(cpu->dim()) +
                             " dimensions");
  return cpu->clone();
}

// Tests inject a kill in the middle of a checkpoint write with
// FTCORE_FAULT_KILL_IN_CHECKPOINT=<step>.
void maybe_inject_fault(int64_t step) {
  const char* v = std::getenv("FTCORE_FAULT_KILL_IN_CHECKPOINT");
  if (v && std::atoll(v) == step) std::raise(SIGKILL);
}

// FTCORE_FAULT_SIGINT_AGAIN_IN_CHECKPOINT=1: once a SIGINT asked for a stop,
// the checkpoint that stop writes receives the user's second SIGINT before
// it is renamed into place. Two SIGINTs sent from outside a few ms apart can
// merge into one pending signal on a loaded machine, so tests cannot place
// the second one themselves (tests/integration/run_safety_test.py).
void maybe_inject_second_sigint() {
  const char* v = std::getenv("FTCORE_FAULT_SIGINT_AGAIN_IN_CHECKPOINT");
  if (v && std::strcmp(v, "1") == 0 && stop_signal_received() == SIGINT) std::raise(SIGINT);
}

std::optional<int64_t> checkpoint_step(const fs::path& dir) {
  const std::string name = dir.filename().string();
  const std::string prefix = "checkpoint-";
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  const std::string digits = name.substr(prefix.size());
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoll(digits);
}

// Complete checkpoints (a trainer_state.json is the last file written), by step.
std::vector<std::pair<int64_t, fs::path>> complete_checkpoints(const fs::path& run_dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    auto step = checkpoint_step(entry.path());
    if (step && fs::exists(entry.path() / kStateFile)) out.emplace_back(*step, entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& origin) {
  if (!j.contains(key)) throw std::runtime_error(origin + ": missing field '" + key + "'");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(origin + ": field '" + key + "': " + e.what());
  }
}

// A hand-edited or corrupted trainer_state.json must not reach the loop: a
// negative step divided by, a step of 1e18 walked to, a negative cursor
// indexed with. Each field's own range is checked here; resume_from checks
// the step against the recipe's plan.
class StateFieldCheck {
 public:
  explicit StateFieldCheck(const std::string& origin) : origin_(origin) {}

  void at_least(const char* field, int64_t value, int64_t min) const {
    if (value < min) fail(field, std::to_string(value) + ", must be >= " + std::to_string(min));
  }
  void finite_at_least(const char* field, double value, double min) const {
    if (!std::isfinite(value) || value < min) fail(field, number(value) + ", must be a finite number >= " + number(min));
  }
  void finite_above(const char* field, double value, double min) const {
    if (!std::isfinite(value) || value <= min) fail(field, number(value) + ", must be a finite number > " + number(min));
  }
  [[noreturn]] void fail(const char* field, const std::string& what) const {
    throw std::runtime_error(origin_ + ": field '" + field + "' is " + what);
  }

 private:
  static std::string number(double v) { return nlohmann::json(v).dump(); }
  const std::string& origin_;
};

void check_state_fields(const TrainerState& s, const std::string& origin) {
  const StateFieldCheck check(origin);
  check.at_least("total_steps", s.total_steps, 1);
  check.at_least("global_step", s.global_step, 1);  // a checkpoint follows a step
  if (s.global_step > s.total_steps)
    check.fail("global_step", std::to_string(s.global_step) + ", past its own total_steps (" +
                                  std::to_string(s.total_steps) + ")");
  check.finite_at_least("epoch", s.epoch, 0.0);
  if (s.epoch > static_cast<double>(s.global_step))  // every epoch takes at least one step
    check.fail("epoch", nlohmann::json(s.epoch).dump() + ", more epochs than its " + std::to_string(s.global_step) +
                            " steps can make");
  check.at_least("cursor.epoch", s.cursor_epoch, 0);
  check.at_least("cursor.batch", s.cursor_batch, 0);
  check.finite_at_least("learning_rate", s.learning_rate, 0.0);
  if (s.best_metric && !std::isfinite(*s.best_metric)) check.fail("best_metric", "not a finite number");
  if (!s.best_checkpoint.empty() && s.best_checkpoint.rfind("checkpoint-", 0) != 0)
    check.fail("best_checkpoint", "\"" + s.best_checkpoint + "\", not a checkpoint-<step> folder name");
  check.at_least("evals_without_improvement", s.evals_without_improvement, 0);
  check.at_least("watchdog_strikes", s.watchdog_strikes, 0);
  check.finite_above("loss_scale.scale", s.loss_scale, 0.0);
  check.at_least("loss_scale.clean_steps", s.loss_scale_clean_steps, 0);
  check.at_least("micro_batch_splits", s.micro_batch_splits, 1);
  check.at_least("log_window.steps", s.window_steps, 0);
  check.at_least("log_window.tokens", s.window_tokens, 0);
  check.finite_at_least("log_window.loss", s.window_loss, -std::numeric_limits<double>::infinity());
  if (!s.log_history.is_array()) check.fail("log_history", "not an array");
}

}  // namespace

std::string checkpoint_name(int64_t step) { return "checkpoint-" + std::to_string(step); }

nlohmann::json TrainerState::to_json() const {
  nlohmann::ordered_json j;
  j["version"] = kTrainerStateVersion;
  j["global_step"] = global_step;
  j["total_steps"] = total_steps;
  j["epoch"] = epoch;
  j["cursor"] = {{"epoch", cursor_epoch}, {"batch", cursor_batch}};
  j["scheduler"] = {{"name", scheduler}, {"step", global_step}, {"total_steps", total_steps}};
  j["learning_rate"] = learning_rate;
  j["best_metric"] = best_metric ? nlohmann::json(*best_metric) : nlohmann::json(nullptr);
  j["best_checkpoint"] = best_checkpoint;
  j["evals_without_improvement"] = evals_without_improvement;
  j["watchdog_strikes"] = watchdog_strikes;
  j["loss_scale"] = {{"scale", loss_scale}, {"clean_steps", loss_scale_clean_steps}};
  j["micro_batch_splits"] = micro_batch_splits;
  j["log_window"] = {{"loss", window_loss}, {"steps", window_steps}, {"tokens", window_tokens}};
  j["recipe_sha256"] = recipe_sha256;
  j["log_history"] = log_history;
  return nlohmann::json(j);
}

TrainerState TrainerState::from_json(const nlohmann::json& j, const std::string& origin) {
  const int version = field<int>(j, "version", origin);
  if (version != kTrainerStateVersion)
    throw std::runtime_error(origin + ": trainer state version " + std::to_string(version) + ", this build reads " +
                             std::to_string(kTrainerStateVersion));
  TrainerState s;
  s.global_step = field<int64_t>(j, "global_step", origin);
  s.total_steps = field<int64_t>(j, "total_steps", origin);
  s.epoch = field<double>(j, "epoch", origin);
  const auto cursor = field<nlohmann::json>(j, "cursor", origin);
  s.cursor_epoch = field<int64_t>(cursor, "epoch", origin);
  s.cursor_batch = field<int64_t>(cursor, "batch", origin);
  s.scheduler = field<std::string>(field<nlohmann::json>(j, "scheduler", origin), "name", origin);
  s.learning_rate = field<double>(j, "learning_rate", origin);
  if (j.contains("rng"))  // an older checkpoint; newer ones have rng_state.safetensors (read_checkpoint)
    s.cpu_rng_state =
        decode_base64_rng_state(field<std::string>(field<nlohmann::json>(j, "rng", origin), "cpu", origin), origin);
  if (j.contains("best_metric") && !j["best_metric"].is_null()) s.best_metric = field<double>(j, "best_metric", origin);
  s.best_checkpoint = field<std::string>(j, "best_checkpoint", origin);
  s.evals_without_improvement = field<int64_t>(j, "evals_without_improvement", origin);
  s.watchdog_strikes = field<int64_t>(j, "watchdog_strikes", origin);
  const auto scale = field<nlohmann::json>(j, "loss_scale", origin);
  s.loss_scale = field<double>(scale, "scale", origin);
  s.loss_scale_clean_steps = field<int64_t>(scale, "clean_steps", origin);
  s.micro_batch_splits = field<int64_t>(j, "micro_batch_splits", origin);
  const auto window = field<nlohmann::json>(j, "log_window", origin);
  s.window_loss = field<double>(window, "loss", origin);
  s.window_steps = field<int64_t>(window, "steps", origin);
  s.window_tokens = field<int64_t>(window, "tokens", origin);
  s.recipe_sha256 = field<std::string>(j, "recipe_sha256", origin);
  s.log_history = field<nlohmann::json>(j, "log_history", origin);
  check_state_fields(s, origin);
  return s;
}

fs::path write_checkpoint(const fs::path& run_dir, const CheckpointContents& c) {
  const fs::path final_dir = run_dir / checkpoint_name(c.state.global_step);
  // Saved again at the same step (a resumed run stopping where it started),
  // the old folder is swapped out and dropped once the new one is in place.
  write_folder_atomically(final_dir, [&](const fs::path& tmp_dir) {
    safetensors::write_file(tmp_dir / c.weights_file, c.weights);
    for (const auto& [name, text] : c.text_files) write_file_atomically(tmp_dir / name, text);
    maybe_inject_fault(c.state.global_step);
    safetensors::write_file(tmp_dir / kOptimizerFile, c.optimizer_state);
    sdk::TensorMap rng;
    rng.add("cpu", c.state.cpu_rng_state);
    safetensors::write_file(tmp_dir / kRngStateFile, rng);
    write_file_atomically(tmp_dir / kStateFile, c.state.to_json().dump(2) + "\n");
    maybe_inject_second_sigint();
  });
  return final_dir;
}

LoadedCheckpoint read_checkpoint(const fs::path& dir, const std::string& weights_file) {
  LoadedCheckpoint c;
  c.dir = dir;
  const fs::path state_path = dir / kStateFile;
  std::ifstream in(state_path);
  if (!in) throw std::runtime_error("resume: " + state_path.string() + " does not exist (not a complete checkpoint)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(state_path.string() + ": byte " + std::to_string(e.byte) + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    throw std::runtime_error(state_path.string() + ": " + e.what());
  }
  c.state = TrainerState::from_json(j, state_path.string());
  if (fs::exists(dir / kRngStateFile)) {
    c.state.cpu_rng_state = read_rng_state_file(dir / kRngStateFile);
  } else if (!c.state.cpu_rng_state.defined()) {
    throw std::runtime_error("resume: " + (dir / kRngStateFile).string() + " does not exist and " +
                             state_path.string() + " has no 'rng' field (the CPU generator's state)");
  }
  const fs::path weights = dir / weights_file;
  if (!fs::exists(weights))
    throw std::runtime_error("resume: " + weights.string() +
                             " does not exist (a checkpoint of another kind of run: adapter vs full fine-tune?)");
  c.weights = safetensors::File::open(weights)->read_all();
  c.optimizer_state = safetensors::File::open(dir / kOptimizerFile)->read_all();
  return c;
}

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
  auto all = complete_checkpoints(run_dir);
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

void rotate_checkpoints(const fs::path& run_dir, int64_t limit, const std::string& keep) {
  auto all = complete_checkpoints(run_dir);
  auto excess = static_cast<int64_t>(all.size()) - limit;
  // The newest is what a resume needs and the best what the run is for: with
  // limit 1 and an older best, both stay (as HF Trainer does).
  if (!all.empty()) all.pop_back();
  for (const auto& [step, path] : all) {
    if (excess <= 0) break;
    if (path.filename() == keep) continue;
    fs::remove_all(path);
    --excess;
  }
}

void remove_partial_checkpoints(const fs::path& run_dir) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return;
  std::vector<fs::directory_entry> entries(fs::directory_iterator(run_dir), fs::directory_iterator{});
  for (const auto& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("checkpoint-", 0) != 0) continue;
    if (name.ends_with(".old")) {
      // Killed while swapping in a re-saved checkpoint: the old one is still whole.
      const fs::path original = run_dir / name.substr(0, name.size() - 4);
      if (!fs::exists(original)) fs::rename(entry.path(), original);
      else fs::remove_all(entry.path());
    } else if (name.ends_with(".tmp")) {
      fs::remove_all(entry.path());
    }
  }
}

}  // namespace ftcore::train
