// TensorMap broadcast (tensor_map_broadcast.h).
#include "tensor_map_broadcast.h"

#include <cstring>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

namespace ftcore::dist {

namespace {

std::string encode_header(const sdk::TensorMap& map) {
  nlohmann::json header = {{"metadata", map.metadata}, {"tensors", nlohmann::json::array()}};
  for (const auto& [name, t] : map.tensors)
    header["tensors"].push_back({{"name", name}, {"dtype", static_cast<int>(t.scalar_type())}, {"shape", t.sizes().vec()}});
  return header.dump();
}

}  // namespace

sdk::TensorMap broadcast_tensor_map(ProcessGroup& group, const sdk::TensorMap& map, int root, const std::string& what) {
  const bool is_root = group.rank() == root;
  const auto on_device = at::TensorOptions().device(group.device());
  const std::string text = is_root ? encode_header(map) : std::string();
  at::Tensor length = at::full({1}, static_cast<int64_t>(text.size()), on_device.dtype(at::kLong));
  group.broadcast(length, root, "the header size of " + what);
  const int64_t n = length.to(at::kCPU).item<int64_t>();
  at::Tensor bytes = at::empty({n}, at::TensorOptions().dtype(at::kByte));
  if (is_root) std::memcpy(bytes.data_ptr(), text.data(), text.size());
  bytes = bytes.to(group.device());
  group.broadcast(bytes, root, "the header of " + what);
  bytes = bytes.to(at::kCPU);
  const nlohmann::json header =
      nlohmann::json::parse(std::string(reinterpret_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(n)));

  sdk::TensorMap out;
  out.metadata = header.at("metadata").get<std::map<std::string, std::string>>();
  size_t index = 0;
  for (const auto& entry : header.at("tensors")) {
    const std::string name = entry.at("name").get<std::string>();
    at::Tensor t;
    if (is_root) {
      t = map.tensors[index].second.detach().contiguous().to(group.device());
    } else {
      t = at::empty(entry.at("shape").get<std::vector<int64_t>>(),
                    on_device.dtype(static_cast<at::ScalarType>(entry.at("dtype").get<int>())));
    }
    if (t.numel() > 0) group.broadcast(t, root, what + " (" + name + ")");
    out.add(name, t);
    ++index;
  }
  return out;
}

}  // namespace ftcore::dist
