// TrainingPlan (core/src/train/training_plan.h): steps per epoch, totals
// with fractional epochs and max_steps, each step's micro-batches, and
// checkpoint rotation; evaluation's exact-match rule. Expected values are
// worked out by hand in the comments.
#include <gtest/gtest.h>

#include <fstream>

#include "../../core/src/train/checkpoint.h"
#include "../../core/src/train/evaluation.h"
#include "../../core/src/train/training_plan.h"
#include "test_support.h"

namespace ftcore::train {
namespace {

// Epoch e has 10 + e micro-batches (a packing sampler's count varies per epoch).
class GrowingSampler : public sdk::Sampler {
 public:
  std::vector<sdk::Batch> batches(const sdk::SamplerInput&, int64_t epoch) const override {
    return std::vector<sdk::Batch>(static_cast<size_t>(10 + epoch), sdk::Batch{{{0}}});
  }
};

TrainingPlan make_plan(double epochs, std::optional<int64_t> max_steps, int64_t accumulation = 4) {
  return TrainingPlan(std::make_shared<GrowingSampler>(), sdk::SamplerInput{}, accumulation, epochs, max_steps);
}

TEST(TrainingPlan, CountsEachEpochsOwnBatches) {
  // accumulation 4: epoch 0 has 10 batches -> ceil(10/4) = 3 steps; epoch 1: 11 -> 3; epoch 2: 12 -> 3.
  EXPECT_EQ(make_plan(1.0, std::nullopt).total_steps(), 3);
  EXPECT_EQ(make_plan(3.0, std::nullopt).total_steps(), 9);
  // 1.5 epochs: 3 + ceil(0.5 * 3) = 5.
  EXPECT_EQ(make_plan(1.5, std::nullopt).total_steps(), 5);
  EXPECT_EQ(make_plan(1.0, 7).total_steps(), 7);  // max_steps wins
}

TEST(TrainingPlan, SlicesStepsIntoMicroBatches) {
  const TrainingPlan plan = make_plan(3.0, std::nullopt);
  // Epoch 0: steps 0,1,2 take batches [0,4) [4,8) [8,10) (the last one short).
  StepSlice s = plan.slice(2);
  EXPECT_EQ(s.epoch, 0);
  EXPECT_EQ(s.first_batch, 8);
  EXPECT_EQ(s.end_batch, 10);
  // Step 3 opens epoch 1; step 5 is its last: [8, 11).
  s = plan.slice(3);
  EXPECT_EQ(s.epoch, 1);
  EXPECT_EQ(s.first_batch, 0);
  s = plan.slice(5);
  EXPECT_EQ(s.epoch, 1);
  EXPECT_EQ(s.first_batch, 8);
  EXPECT_EQ(s.end_batch, 11);
  // Progress after 4 steps: 1 epoch + 1/3 of epoch 1.
  EXPECT_DOUBLE_EQ(plan.epoch_progress(4), 1.0 + 1.0 / 3.0);
}

TEST(TrainingPlan, RefusesAnEmptyTrainingSet) {
  class Empty : public sdk::Sampler {
   public:
    std::vector<sdk::Batch> batches(const sdk::SamplerInput&, int64_t) const override { return {}; }
  };
  EXPECT_THROW(TrainingPlan(std::make_shared<Empty>(), sdk::SamplerInput{}, 1, 1.0, std::nullopt), std::invalid_argument);
}

TEST(Checkpoints, RotationKeepsTheBestAndTheNewest) {
  testing::TempDir dir;
  for (int step : {2, 4, 6, 8}) {
    std::filesystem::create_directories(dir / checkpoint_name(step));
    std::ofstream(dir / checkpoint_name(step) / "trainer_state.json") << "{}";
  }
  std::filesystem::create_directories(dir / "checkpoint-10.tmp");  // a killed write: not a checkpoint
  rotate_checkpoints(dir.path(), 1, "checkpoint-4");
  EXPECT_FALSE(std::filesystem::exists(dir / "checkpoint-2"));
  EXPECT_TRUE(std::filesystem::exists(dir / "checkpoint-4"));  // best
  EXPECT_FALSE(std::filesystem::exists(dir / "checkpoint-6"));
  EXPECT_TRUE(std::filesystem::exists(dir / "checkpoint-8"));  // newest
  EXPECT_EQ(latest_checkpoint(dir.path())->filename(), "checkpoint-8");
  remove_partial_checkpoints(dir.path());
  EXPECT_FALSE(std::filesystem::exists(dir / "checkpoint-10.tmp"));
}

TEST(Evaluation, ExactMatchTrimsAndFoldsCase) {
  EXPECT_TRUE(answers_match("  Algiers\n", "algiers"));
  EXPECT_FALSE(answers_match("Algiers.", "Algiers"));
  EXPECT_FALSE(answers_match("The capital is Algiers", "Algiers"));
}

}  // namespace
}  // namespace ftcore::train
