// Cache files: "<split>.input_ids" / ".labels" (int32, concatenated),
// "<split>.offsets" (int64, n+1) and "<split>.lines" (int64), plus counts in
// the metadata. Written atomically by the safetensors writer.
#include "example_cache.h"

#include <ATen/ATen.h>

#include "ftcore/safetensors.h"

namespace ftcore::data {

namespace {

void add_split(sdk::TensorMap& out, const std::string& name, const std::vector<Example>& examples) {
  std::vector<int32_t> ids, labels;
  std::vector<int64_t> offsets = {0}, lines;
  for (const auto& e : examples) {
    ids.insert(ids.end(), e.input_ids.begin(), e.input_ids.end());
    labels.insert(labels.end(), e.labels.begin(), e.labels.end());
    offsets.push_back(static_cast<int64_t>(ids.size()));
    lines.push_back(e.source_line);
  }
  auto i32 = at::TensorOptions().dtype(at::kInt), i64 = at::TensorOptions().dtype(at::kLong);
  out.add(name + ".input_ids", at::tensor(ids, i32));
  out.add(name + ".labels", at::tensor(labels, i32));
  out.add(name + ".offsets", at::tensor(offsets, i64));
  out.add(name + ".lines", at::tensor(lines, i64));
}

std::vector<Example> read_split(const safetensors::File& f, const std::string& name) {
  at::Tensor ids = f.tensor(name + ".input_ids"), labels = f.tensor(name + ".labels");
  at::Tensor offsets = f.tensor(name + ".offsets"), lines = f.tensor(name + ".lines");
  const auto* id = ids.data_ptr<int32_t>();
  const auto* label = labels.data_ptr<int32_t>();
  const auto* off = offsets.data_ptr<int64_t>();
  const int64_t n = lines.numel();
  if (offsets.numel() != n + 1 || off[n] != ids.numel() || labels.numel() != ids.numel())
    throw DataError(f.entries().empty() ? "empty cache" : "inconsistent tokenized cache " + name);
  std::vector<Example> out(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    if (off[k] > off[k + 1]) throw DataError("inconsistent tokenized cache offsets in " + name);
    out[k].input_ids.assign(id + off[k], id + off[k + 1]);
    out[k].labels.assign(label + off[k], label + off[k + 1]);
    out[k].source_line = lines.data_ptr<int64_t>()[k];
  }
  return out;
}

}  // namespace

void save_cache(const std::filesystem::path& file, const PreparedData& data) {
  std::filesystem::create_directories(file.parent_path());
  sdk::TensorMap out;
  add_split(out, "train", data.train);
  add_split(out, "validation", data.validation);
  out.metadata = {{"ftcore.data.key", data.cache_key},
                  {"rows", std::to_string(data.rows)},
                  {"skipped_rows", std::to_string(data.skipped_rows)},
                  {"truncated", std::to_string(data.truncated)}};
  safetensors::write_file(file, out);
}

void load_cache(const std::filesystem::path& file, PreparedData& data) {
  auto f = safetensors::File::open(file);
  data.train = read_split(*f, "train");
  data.validation = read_split(*f, "validation");
  data.rows = std::stoll(f->metadata().at("rows"));
  data.skipped_rows = std::stoll(f->metadata().at("skipped_rows"));
  data.truncated = std::stoll(f->metadata().at("truncated"));
}

}  // namespace ftcore::data
