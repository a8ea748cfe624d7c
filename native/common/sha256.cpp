#include "common/sha256.h"

#include <openssl/evp.h>

#include <new>

namespace hp {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

namespace {

// OpenSSL fails these only when it cannot allocate: report it as C++ does.
void check(int ok) {
  if (ok != 1) throw std::bad_alloc();
}

}  // namespace

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  if (impl_->ctx == nullptr) throw std::bad_alloc();
  check(EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr));
}

Sha256::~Sha256() noexcept { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::update(std::span<const std::byte> bytes) {
  check(EVP_DigestUpdate(impl_->ctx, bytes.data(), bytes.size()));
}

void Sha256::update(std::string_view text) {
  check(EVP_DigestUpdate(impl_->ctx, text.data(), text.size()));
}

Sha256Digest Sha256::finish() {
  Sha256Digest digest{};
  unsigned int length = 0;
  check(EVP_DigestFinal_ex(impl_->ctx, digest.data(), &length));
  check(EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr));  // ready for a new message
  return digest;
}

Sha256Digest sha256(std::span<const std::byte> bytes) {
  Sha256 h;
  h.update(bytes);
  return h.finish();
}

Sha256Digest sha256(std::string_view text) {
  Sha256 h;
  h.update(text);
  return h.finish();
}

std::string to_hex(const Sha256Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(digest.size() * 2, '0');
  for (std::size_t i = 0; i < digest.size(); ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  return out;
}

std::string to_hashid(const Sha256Digest& digest) { return "sha256:" + to_hex(digest); }

Status parse_hashid(std::string_view hashid, Sha256Digest* digest) {
  constexpr std::string_view kPrefix = "sha256:";
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  Sha256Digest parsed{};
  bool ok = hashid.size() == kPrefix.size() + 64 && hashid.substr(0, kPrefix.size()) == kPrefix;
  for (std::size_t i = 0; ok && i < 32; ++i) {
    int hi = nibble(hashid[kPrefix.size() + 2 * i]),
        lo = nibble(hashid[kPrefix.size() + 2 * i + 1]);
    ok = hi >= 0 && lo >= 0;
    parsed[i] = std::uint8_t(hi << 4 | lo);
  }
  HP_ENSURE(ok, ErrorCode::kInvalidArgument,
            "'{}' is not a hashid: expected 'sha256:' and 64 lower-case hex digits", hashid);
  *digest = parsed;
  return Status::ok();
}

}  // namespace hp
