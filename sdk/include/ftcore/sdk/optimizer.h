// The optimizer contract: a torch::optim::Optimizer over NAMED parameter
// groups. Groups carry `lr_scale` (LoRA+ puts B matrices in a group with
// lr_scale = loraplus_lr_ratio) and an optional `weight_decay` override.
// The effective lr of a group is base_lr x lr_scale x scheduler factor x
// adapter multiplier; the trainer passes the product of the last three
// factors' base through set_base_lr().
//
// State is saved by parameter NAME (never by tensor address) as a TensorMap:
// tensors "<param name>.<slot>" (e.g. "model.layers.0.mlp.up_proj.weight.exp_avg")
// and metadata with the schema version, optimizer name and family, so a run
// resumes across processes and world sizes, and a family can convert another's
// state (adamw_8bit from adamw) when the recipe changes mid-run.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "ftcore/sdk/tensor_map.h"

namespace ftcore::sdk {

struct NamedParameter {
  std::string name;  // HF module path + tensor, e.g. "model.layers.3.self_attn.q_proj.lora_A.weight"
  at::Tensor tensor;
};

struct ParamGroupSpec {
  std::string name = "default";
  std::vector<NamedParameter> params;
  double lr_scale = 1.0;
  std::optional<double> weight_decay;  // unset: the optimizer's own weight_decay option
};

// What to do when loading state written by another optimizer family.
enum class StateConversion { Convert, Reset };

// Metadata keys and the schema version of saved optimizer state.
inline constexpr int kOptimizerStateSchemaVersion = 1;
inline constexpr const char* kStateSchemaKey = "ftcore.optimizer.schema_version";
inline constexpr const char* kStateOptimizerKey = "ftcore.optimizer.name";
inline constexpr const char* kStateFamilyKey = "ftcore.optimizer.family";

struct GroupInfo {
  std::string name;
  std::vector<std::string> param_names;  // parallel to param_groups()[g].params()
  double lr_scale = 1.0;
  double weight_decay = 0.0;  // resolved: the group's override or the optimizer default
};

class Optimizer : public torch::optim::Optimizer {
 public:
  // `defaults` must implement get_lr/set_lr; `default_weight_decay` is used by
  // groups that do not override it.
  Optimizer(const std::vector<ParamGroupSpec>& groups,
            std::unique_ptr<torch::optim::OptimizerOptions> defaults, double default_weight_decay);

  // e.g. "adamw"; written into saved state.
  virtual std::string name() const = 0;
  // State layout family ("adam", "lion", "adafactor", "sgd"): state converts
  // within a family (32-bit <-> 8-bit), and is reset across families.
  virtual std::string family() const = 0;

  virtual TensorMap state_by_name() const = 0;
  // Throws std::runtime_error naming the tensor when a shape or dtype does not fit.
  virtual void load_state_by_name(const TensorMap& state, StateConversion conversion) = 0;

  // The run folder, given by the trainer before the first step, for
  // optimizers that keep state on disk (the paged optimizers' spill file).
  // Default: ignored.
  virtual void attach_run_folder(const std::string& dir) { (void)dir; }

  double base_lr() const { return base_lr_; }
  // Sets every group's lr to `lr x lr_scale`.
  void set_base_lr(double lr);

  size_t num_groups() const { return group_info_.size(); }
  const GroupInfo& group_info(size_t group) const { return group_info_.at(group); }
  double group_lr(size_t group) const { return param_groups_.at(group).options().get_lr(); }

 protected:
  // For load_state_by_name: checks the schema version and returns true when
  // the state was written by this optimizer's family.
  bool check_state_header(const TensorMap& state) const;
  // The same, deciding what to do with another family's state: false means
  // "reset your state" (conversion == Reset); with Convert it throws a
  // std::runtime_error naming the optimizer that wrote the state.
  bool accept_state(const TensorMap& state, StateConversion conversion) const;
  // An empty state map with this optimizer's metadata (schema, name, family).
  TensorMap new_state() const;
  // What a fused CPU kernel needs of a parameter with a gradient: on the CPU,
  // dense, contiguous, fp32/bf16/fp16, gradient of the same dtype. Throws
  // std::invalid_argument naming the optimizer and the parameter. (Plain std
  // exceptions, built here: a c10::Error would format its source location
  // later, from the plugin's memory.)
  void check_fused_cpu_parameter(size_t group, size_t index) const;

 private:
  std::vector<GroupInfo> group_info_;
  double base_lr_ = 0.0;
};

// Fetches "<param>.<slot>" from a saved state, checking its shape against the
// parameter's; throws with the tensor name on a mismatch or absence.
const at::Tensor& require_state_tensor(const TensorMap& state, const std::string& param_name,
                                       const std::string& slot, at::IntArrayRef expected_shape);

}  // namespace ftcore::sdk
