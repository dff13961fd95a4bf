// blockwise8_tool: runs optimizer/blockwise8's quantization on tensors
// prepared by tests/reference/blockwise8_reference.py, so Python can compare
// codes, absmax and dequantized values with bitsandbytes' functions.
//
//   blockwise8_tool --blocksize N --map signed|unsigned IN.safetensors OUT.safetensors
//
// OUT holds, for every tensor X of IN (any float dtype, taken as fp32):
// "X.codes" (uint8), "X.absmax" (fp32) and "X.dequant" (fp32, from those
// codes), plus "map.signed" and "map.unsigned" (the dynamic maps).
#include <iostream>
#include <string>

#include <ATen/ATen.h>

#include "blockwise8.h"
#include "dynamic_map.h"
#include "ftcore/safetensors.h"

using namespace ftcore;
namespace b8 = ftcore::plugins::blockwise8;

int main(int argc, char** argv) {
  try {
    int64_t blocksize = 256;
    std::string map_name = "signed", in, out;
    for (int i = 1; i < argc; ++i) {
      const std::string k = argv[i];
      if (k == "--blocksize" && i + 1 < argc) blocksize = std::stoll(argv[++i]);
      else if (k == "--map" && i + 1 < argc) map_name = argv[++i];
      else if (in.empty()) in = k;
      else if (out.empty()) out = k;
      else throw std::invalid_argument("unexpected argument " + k);
    }
    if (in.empty() || out.empty() || (map_name != "signed" && map_name != "unsigned"))
      throw std::invalid_argument("usage: blockwise8_tool --blocksize N --map signed|unsigned IN OUT");
    const b8::QuantMap& map = b8::quant_map(map_name == "signed");
    auto file = safetensors::File::open(in);
    sdk::TensorMap result;
    for (const auto& e : file->entries()) {
      const at::Tensor x = file->tensor(e.name).to(at::kFloat);
      auto [codes, absmax] = b8::quantize_blockwise(x, blocksize, map);
      result.add(e.name + ".codes", codes);
      result.add(e.name + ".absmax", absmax);
      result.add(e.name + ".dequant", b8::dequantize_blockwise(codes, absmax, blocksize, map));
    }
    for (bool s : {true, false}) {
      const auto& m = b8::dynamic_map(s);
      at::Tensor t = at::empty({256}, at::TensorOptions().dtype(at::kFloat));
      std::copy(m.begin(), m.end(), t.data_ptr<float>());
      result.add(s ? "map.signed" : "map.unsigned", t);
    }
    safetensors::write_file(out, result);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "blockwise8_tool: " << e.what() << "\n";
    return 1;
  }
}
