// SHA-256 (FIPS 180-4), for content hashes: the tokenized-data cache key,
// file hashes in recipe.lock.toml. Incremental: update() any number of times.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace ftcore {

class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view text) { return update(text.data(), text.size()); }
  std::string hex_digest();  // finishes the hash; the object is then spent

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view text);
// Streams the file; throws std::runtime_error naming it when unreadable.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace ftcore
