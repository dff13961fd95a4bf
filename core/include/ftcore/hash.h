// SHA-256 for content hashes: the tokenized-data cache key, file hashes in
// recipe.lock.toml. Computed by OpenSSL's libcrypto (core/src/util/hash.cpp).
// Incremental: update() any number of times.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header

namespace ftcore {

class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view text) { return update(text.data(), text.size()); }
  std::string hex_digest();  // finishes the hash; the object is then spent

 private:
  struct ContextDeleter {
    void operator()(evp_md_ctx_st* context) const;
  };
  std::unique_ptr<evp_md_ctx_st, ContextDeleter> context_;
};

std::string sha256_hex(std::string_view text);
// Streams the file; throws std::runtime_error naming it when unreadable.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace ftcore
