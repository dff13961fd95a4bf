// `ftcore convert IN.gguf OUT_DIR [--dtype fp32|bf16|fp16] [--overwrite]`: a
// GGUF model to an HF folder (see ftcore/gguf_convert.h). OUT_DIR is replaced
// whole, so a non-empty one needs --overwrite and one holding IN is refused.
#include <filesystem>
#include <iostream>

#include <boost/program_options.hpp>

#include "command_line.h"
#include "commands.h"
#include "ftcore/gguf_convert.h"

namespace po = boost::program_options;

namespace ftcore::cli {

int convert_command(const std::vector<std::string>& args) {
  po::options_description visible(
      "Usage: ftcore convert IN.gguf OUT_DIR [options]\n\nWrites an HF model folder (safetensors, config.json, "
      "tokenizer.json, tokenizer_config.json) from a GGUF file.\n\nOptions");
  std::string dtype_text = "fp32";
  std::vector<std::string> paths;
  bool overwrite = false;
  visible.add_options()("dtype", po::value(&dtype_text), "weights dtype: fp32 (default, exact), bf16 or fp16")(
      "overwrite", po::bool_switch(&overwrite), "replace a non-empty OUT_DIR");
  if (!parse_subcommand(args, visible, paths, 2)) return kExitOk;
  if (paths.size() != 2) throw po::error("convert needs IN.gguf and OUT_DIR");
  if (!std::filesystem::is_regular_file(paths[0])) throw po::error("IN.gguf: " + paths[0] + " is not a file");
  check_output_folder(paths[1], "OUT_DIR", overwrite, {paths[0]});
  at::ScalarType dtype;
  if (dtype_text == "fp32") dtype = at::kFloat;
  else if (dtype_text == "bf16") dtype = at::kBFloat16;
  else if (dtype_text == "fp16") dtype = at::kHalf;
  else throw po::error("--dtype must be fp32, bf16 or fp16, got '" + dtype_text + "'");
  ConvertReport r = convert_gguf_to_hf(paths[0], paths[1], dtype);
  std::cout << "converted " << paths[0] << " (" << r.architecture << ", " << r.tensors << " tensors, "
            << r.parameters << " parameters" << (r.tied_embeddings ? ", tied embeddings" : "") << ") -> "
            << paths[1] << "\n";
  return kExitOk;
}

}  // namespace ftcore::cli
