// SHA-256 through OpenSSL's EVP interface.
#include "shared/hash.h"

#include <openssl/evp.h>

#include <array>
#include <cstdint>

#include "shared/status.h"

namespace kiln {
namespace {

std::string to_hex(const unsigned char* bytes, unsigned len) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(static_cast<size_t>(len) * 2, '0');
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xF];
  }
  return out;
}

}  // namespace

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
  ~Impl() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  KILN_CHECK(impl_->ctx != nullptr, "EVP_MD_CTX_new failed (out of memory)");
  KILN_CHECK(EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) == 1, "EVP_DigestInit_ex failed");
}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

Sha256& Sha256::add(std::string_view field) {
  std::array<unsigned char, 8> len{};
  uint64_t n = field.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  EVP_DigestUpdate(impl_->ctx, len.data(), len.size());
  EVP_DigestUpdate(impl_->ctx, field.data(), field.size());
  return *this;
}

std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  KILN_CHECK(EVP_DigestFinal_ex(impl_->ctx, md, &len) == 1, "EVP_DigestFinal_ex failed");
  return to_hex(md, len);
}

std::string sha256_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  KILN_CHECK(EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) == 1,
             "EVP_Digest failed");
  return to_hex(md, len);
}

}  // namespace kiln
