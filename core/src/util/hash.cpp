// SHA-256 through OpenSSL's libcrypto (EVP): the content hashes in the data
// cache key and recipe.lock.toml (checked against Python's hashlib in tests).
#include "ftcore/hash.h"

#include <openssl/evp.h>

#include <fstream>
#include <stdexcept>

namespace ftcore {

namespace {

[[noreturn]] void throw_openssl_failure(const char* call) {
  throw std::runtime_error(std::string("SHA-256: OpenSSL ") + call + " failed");
}

}  // namespace

void Sha256::ContextDeleter::operator()(evp_md_ctx_st* context) const { EVP_MD_CTX_free(context); }

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (!context_) throw_openssl_failure("EVP_MD_CTX_new");
  if (EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1) throw_openssl_failure("EVP_DigestInit_ex");
}

Sha256& Sha256::update(const void* data, size_t size) {
  if (!context_) throw std::logic_error("Sha256::update after hex_digest");
  if (size > 0 && EVP_DigestUpdate(context_.get(), data, size) != 1) throw_openssl_failure("EVP_DigestUpdate");
  return *this;
}

std::string Sha256::hex_digest() {
  if (!context_) throw std::logic_error("Sha256::hex_digest called twice");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_.get(), digest, &length) != 1) throw_openssl_failure("EVP_DigestFinal_ex");
  context_.reset();
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

std::string sha256_hex(std::string_view text) { return Sha256().update(text).hex_digest(); }

std::string sha256_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string() + " to hash it");
  Sha256 h;
  char buffer[1 << 16];
  while (in) {
    in.read(buffer, sizeof(buffer));
    h.update(buffer, static_cast<size_t>(in.gcount()));
  }
  return h.hex_digest();
}

}  // namespace ftcore
