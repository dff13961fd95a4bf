// The readers under fuzzing take file paths (they mmap), so each input is
// written to one scratch file per process first.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace ftcore::fuzz {

inline std::string write_input(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = "/tmp/ftcore-fuzz-" + std::to_string(::getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

}  // namespace ftcore::fuzz
