// libFuzzer target: any bytes as a GGUF file. Either gguf::FormatError or
// metadata and tensors that dequantize from bytes inside the file.
#include <ATen/ATen.h>

#include "ftcore/gguf.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ftcore::fuzz::write_input(data, size, ".gguf");
  try {
    auto file = ftcore::gguf::File::open(path);
    for (const auto& t : file->tensors()) {
      if (t.nbytes > (64u << 20)) continue;  // a valid but huge tensor: skip, not a bug
      (void)file->dequantize(t.name).sum().item<float>();
    }
  } catch (const ftcore::gguf::FormatError&) {
  }
  return 0;
}
