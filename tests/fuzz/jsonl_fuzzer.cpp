// libFuzzer target: any bytes as a JSONL dataset (and as a .json one). The
// reader returns rows, each parsed or carrying its syntax error, or throws
// DataError for a malformed .json file; nothing else.
#include "ftcore/dataset.h"
#include "fuzz_file.h"
#include "rows.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const char* suffix : {".jsonl", ".json"}) {
    const std::string path = ftcore::fuzz::write_input(data, size, suffix);
    try {
      auto rows = ftcore::data::read_rows(path);
      for (const auto& r : rows) (void)r.value.dump();
    } catch (const ftcore::DataError&) {
    }
  }
  return 0;
}
