// The adapter contract (LoRA, LoRA+, ReLoRA, DoRA): apply() replaces targeted
// Linear slots and returns the trainable parameter groups; weights save and
// load in PEFT's format (names "base_model.model.<path>.lora_A.weight" and an
// adapter_config.json); merge() folds the adapter into the base; on_event()
// and lr_multiplier() let ReLoRA-style adapters act on trainer events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ftcore/sdk/model_view.h"
#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/tensor_map.h"

namespace ftcore::sdk {

struct TrainerEvent {
  enum class Type { StepEnd, EpochEnd, Evaluation };
  Type type = Type::StepEnd;
  int64_t step = 0;         // optimizer steps completed
  int64_t total_steps = 0;
  Optimizer* optimizer = nullptr;  // e.g. for pruning state at a restart
};

class Adapter {
 public:
  virtual ~Adapter() = default;
  virtual std::vector<ParamGroupSpec> apply(ModelView& model) = 0;
  virtual TensorMap save() const = 0;
  virtual std::string peft_config_json() const = 0;
  virtual void load(const TensorMap& weights) = 0;
  virtual void merge(ModelView& model) = 0;
  // A PEFT adapter folder to start from (LoRA's lora_model_dir): after
  // apply(), the core reads its adapter_model.safetensors and calls load().
  // Empty: start from the adapter's own initialisation.
  virtual std::string initial_weights_dir() const { return {}; }
  virtual void on_event(const TrainerEvent& event, ModelView& model) { (void)event; (void)model; }
  // Multiplies the scheduled lr (ReLoRA's jagged re-warmup); 1 by default.
  virtual double lr_multiplier(int64_t step) const { (void)step; return 1.0; }
};

// Optional for adapters; the core finds it with dynamic_cast, so adapters
// built without it keep working and count as answering true. It says whether
// the adapter, after apply(), still reads or writes a dense Linear slot's
// base weight itself (LinearModule::dense_weight / set_dense_weight: DoRA's
// weight norm in every forward, ReLoRA's merges) rather than only through
// the slot's forward. When it does not and the run computes under bf16 or
// fp16 autocast, the core keeps frozen dense weights in that dtype only:
// the products autocast computes are the same, without the fp32 copy
// (docs/architecture.md, "Frozen weights under autocast").
class BaseWeightUse {
 public:
  virtual ~BaseWeightUse() = default;
  virtual bool uses_base_weights_after_apply() const = 0;
};

inline bool uses_base_weights_after_apply(const Adapter& adapter) {
  const auto* declared = dynamic_cast<const BaseWeightUse*>(&adapter);
  return !declared || declared->uses_base_weights_after_apply();
}

}  // namespace ftcore::sdk
