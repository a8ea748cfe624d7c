// SHA-256 through OpenSSL's libcrypto (EVP). Used for content-addressed identities
// ("sha256:<hex>") of callables, build inputs and dump files.
#ifndef HYPER_PARALLEL_COMMON_SHA256_H_
#define HYPER_PARALLEL_COMMON_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/api.h"
#include "common/status.h"

namespace hp {

using Sha256Digest = std::array<std::uint8_t, 32>;

// Incremental hashing: update() any number of times, then finish(); finish() also starts a new
// message, so the object can be reused. Throws std::bad_alloc only when OpenSSL cannot
// allocate.
class HP_API Sha256 {
 public:
  Sha256();
  ~Sha256() noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(std::span<const std::byte> bytes);
  void update(std::string_view text);
  Sha256Digest finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

HP_API Sha256Digest sha256(std::span<const std::byte> bytes);
HP_API Sha256Digest sha256(std::string_view text);
HP_API std::string to_hex(const Sha256Digest& digest);
// "sha256:<64 hex digits>"
HP_API std::string to_hashid(const Sha256Digest& digest);
HP_API Status parse_hashid(std::string_view hashid, Sha256Digest* digest);

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_SHA256_H_
