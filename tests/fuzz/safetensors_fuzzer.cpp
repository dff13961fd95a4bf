// libFuzzer target: any bytes as a safetensors file. The reader must either
// refuse them with safetensors::FormatError or give tensors whose every byte
// lies inside the file (read them all: ASan catches any stray access).
#include <ATen/ATen.h>

#include "ftcore/safetensors.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ftcore::fuzz::write_input(data, size, ".safetensors");
  try {
    auto file = ftcore::safetensors::File::open(path);
    for (const auto& e : file->entries()) {
      at::Tensor t = file->tensor(e.name);
      if (t.numel() > 0) (void)t.view(at::kByte).sum().item<int64_t>();
    }
  } catch (const ftcore::safetensors::FormatError&) {
  }
  return 0;
}
