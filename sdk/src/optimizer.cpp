// Base of every ftcore optimizer: named groups, lr scaling, state headers.
#include "ftcore/sdk/optimizer.h"

#include <sstream>
#include <stdexcept>

namespace ftcore::sdk {


Optimizer::Optimizer(const std::vector<ParamGroupSpec>& groups,
                     std::unique_ptr<torch::optim::OptimizerOptions> defaults, double default_weight_decay)
    : torch::optim::Optimizer(std::vector<torch::optim::OptimizerParamGroup>{}, std::move(defaults)) {
  base_lr_ = defaults_->get_lr();
  for (const auto& g : groups) {
    std::vector<at::Tensor> tensors;
    for (const auto& p : g.params) tensors.push_back(p.tensor);
    auto options = defaults_->clone();
    options->set_lr(base_lr_ * g.lr_scale);
    add_param_group(torch::optim::OptimizerParamGroup(std::move(tensors), std::move(options)));

    GroupInfo info;
    info.name = g.name;
    info.lr_scale = g.lr_scale;
    info.weight_decay = g.weight_decay.value_or(default_weight_decay);
    for (const auto& p : g.params) {
      if (p.name.empty()) throw std::invalid_argument("parameter in group '" + g.name + "' has no name");
      info.param_names.push_back(p.name);
    }
    group_info_.push_back(std::move(info));
  }
}

void Optimizer::set_base_lr(double lr) {
  base_lr_ = lr;
  for (size_t g = 0; g < group_info_.size(); ++g)
    param_groups_[g].options().set_lr(lr * group_info_[g].lr_scale);
}

bool Optimizer::check_state_header(const TensorMap& state) const {
  auto schema = state.metadata.find(kStateSchemaKey);
  if (schema == state.metadata.end())
    throw std::runtime_error("optimizer state has no " + std::string(kStateSchemaKey) + " metadata");
  if (schema->second != std::to_string(kOptimizerStateSchemaVersion))
    throw std::runtime_error("optimizer state schema version " + schema->second + " is not supported (this build reads " +
                             std::to_string(kOptimizerStateSchemaVersion) + ")");
  auto family = state.metadata.find(kStateFamilyKey);
  return family != state.metadata.end() && family->second == this->family();
}

bool Optimizer::accept_state(const TensorMap& state, StateConversion conversion) const {
  if (check_state_header(state)) return true;
  if (conversion == StateConversion::Reset) return false;
  auto writer = state.metadata.find(kStateOptimizerKey);
  throw std::runtime_error(name() + " cannot convert optimizer state written by " +
                           (writer == state.metadata.end() ? std::string("an unknown optimizer") : writer->second) +
                           "; set train.state_conversion = \"reset\" to start its state afresh");
}

TensorMap Optimizer::new_state() const {
  TensorMap out;
  out.metadata[kStateSchemaKey] = std::to_string(kOptimizerStateSchemaVersion);
  out.metadata[kStateOptimizerKey] = name();
  out.metadata[kStateFamilyKey] = family();
  return out;
}

void Optimizer::check_fused_cpu_parameter(size_t group, size_t index) const {
  const at::Tensor& p = param_groups_.at(group).params().at(index);
  const std::string& n = group_info(group).param_names.at(index);
  auto fail = [&](const std::string& what) { throw std::invalid_argument(name() + ": parameter " + n + " " + what); };
  std::ostringstream device;
  device << p.device();
  if (!p.device().is_cpu()) fail("is on " + device.str() + "; this build updates CPU tensors only");
  if (p.grad().is_sparse()) fail("has a sparse gradient, which is not supported");
  if (!p.is_contiguous() || !p.grad().is_contiguous()) fail("or its gradient is not contiguous");
  const auto dtype = p.scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf)
    fail(std::string("has dtype ") + c10::toString(dtype) + "; supported: float32, bfloat16, float16");
  if (p.grad().scalar_type() != dtype)
    fail(std::string("has a ") + c10::toString(p.grad().scalar_type()) + " gradient for " + c10::toString(dtype) +
         " values");
}

const at::Tensor& require_state_tensor(const TensorMap& state, const std::string& param_name,
                                       const std::string& slot, at::IntArrayRef expected_shape) {
  const std::string key = param_name + "." + slot;
  const at::Tensor* t = state.find(key);
  if (!t) throw std::runtime_error("optimizer state has no tensor " + key);
  if (t->sizes() != expected_shape) {
    std::ostringstream msg;
    msg << "optimizer state tensor " << key << " has shape " << t->sizes() << ", the parameter has " << expected_shape;
    throw std::runtime_error(msg.str());
  }
  return *t;
}

}  // namespace ftcore::sdk
