// Named tensors plus string metadata: what components hand to the core to be
// written as safetensors (optimizer state, adapter weights, quantization
// state) and get back on load. Order is kept so files are reproducible.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace ftcore::sdk {

struct TensorMap {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::map<std::string, std::string> metadata;  // safetensors __metadata__

  void add(std::string name, at::Tensor tensor) { tensors.emplace_back(std::move(name), std::move(tensor)); }
  const at::Tensor* find(const std::string& name) const {
    for (const auto& [n, t] : tensors)
      if (n == name) return &t;
    return nullptr;
  }
};

}  // namespace ftcore::sdk
