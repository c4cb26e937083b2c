// Content hashing (SHA-256 via OpenSSL). Candidate ids and cache keys are hex digests of content.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace kiln {

// Lower-case hex SHA-256 of `data` (64 characters).
std::string sha256_hex(std::string_view data);

// Incremental SHA-256. Each add() is length-prefixed, so ("ab","c") and ("a","bc") differ: use it
// to hash tuples of fields (e.g. a candidate's spec hash, backend, source, params, toolchain).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  Sha256& add(std::string_view field);
  std::string hex();  // finishes the hash; the object must not be used afterwards

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
