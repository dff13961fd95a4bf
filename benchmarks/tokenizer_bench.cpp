// ftcore's side of tokenizer_bench.py: encodes every sample of a corpus
// (JSON {"samples": [...]}) with the tokenizer of a folder, single-threaded,
// several rounds, and prints the fastest round as JSON. Loading is not timed.
//
// usage: tokenizer_bench TOKENIZER_DIR CORPUS.json ROUNDS
#include <chrono>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "ftcore/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: tokenizer_bench TOKENIZER_DIR CORPUS.json ROUNDS\n";
    return 2;
  }
  auto tok = ftcore::Tokenizer::from_folder(argv[1]);
  std::ifstream in(argv[2]);
  const auto samples = nlohmann::json::parse(in).at("samples").get<std::vector<std::string>>();
  const int rounds = std::stoi(argv[3]);
  size_t bytes = 0;
  for (const auto& s : samples) bytes += s.size();
  double best = 1e30;
  size_t tokens = 0;
  for (int r = 0; r < rounds; ++r) {
    // The first round also fills the word cache, as HF's first encode fills its own.
    const auto start = std::chrono::steady_clock::now();
    size_t n = 0;
    for (const auto& s : samples) n += tok->encode(s).size();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, seconds);
    tokens = n;
  }
  std::cout << nlohmann::json{{"tokens", tokens}, {"bytes", bytes}, {"samples", samples.size()}, {"seconds", best}}.dump()
            << "\n";
  return 0;
}
