// Tests of hp::Sha256 and the "sha256:<hex>" hashids (native/common/sha256.h).
#include "common/sha256.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "printers.h"

namespace hp {
namespace {

using ::testing::HasSubstr;

// FIPS 180-2 test vectors.
constexpr const char* kEmptyHex =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr const char* kAbcHex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char* kTwoBlockText = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
constexpr const char* kTwoBlockHex =
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
constexpr const char* kMillionAHex =
    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

TEST(Sha256, EmptyInput) {
  EXPECT_EQ(to_hex(sha256(std::string_view())), kEmptyHex);
  EXPECT_EQ(to_hex(sha256(std::span<const std::byte>())), kEmptyHex);
  Sha256 h;
  EXPECT_EQ(to_hex(h.finish()), kEmptyHex);
}

TEST(Sha256, Abc) { EXPECT_EQ(to_hex(sha256("abc")), kAbcHex); }

TEST(Sha256, TwoBlockMessage) { EXPECT_EQ(to_hex(sha256(kTwoBlockText)), kTwoBlockHex); }

TEST(Sha256, MillionAIncrementally) {
  Sha256 h;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) h.update(chunk);
  EXPECT_EQ(to_hex(h.finish()), kMillionAHex);
}

TEST(Sha256, MillionAOneShot) {
  EXPECT_EQ(to_hex(sha256(std::string(1000000, 'a'))), kMillionAHex);
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += static_cast<char>('!' + (i * 7) % 90);
  const Sha256Digest expected = sha256(text);
  // Splits before, at and across the 64-byte block boundaries and the padding boundary (56).
  for (std::size_t split : {0, 1, 55, 56, 63, 64, 65, 128, 999, 1000}) {
    Sha256 h;
    h.update(std::string_view(text).substr(0, split));
    h.update(std::string_view(text).substr(split));
    EXPECT_EQ(h.finish(), expected) << "split at " << split;
  }
  Sha256 bytewise;
  for (char c : text) bytewise.update(std::string_view(&c, 1));
  EXPECT_EQ(bytewise.finish(), expected);
}

TEST(Sha256, BytesAndTextAgree) {
  const std::string text = "hyper parallel";
  const auto bytes = std::as_bytes(std::span(text.data(), text.size()));
  EXPECT_EQ(sha256(bytes), sha256(text));
  Sha256 mixed;
  mixed.update(bytes.first(5));
  mixed.update(std::string_view(text).substr(5));
  EXPECT_EQ(mixed.finish(), sha256(text));
}

TEST(Sha256, EmbeddedNulBytesAreHashed) {
  const std::string with_nul("a\0b", 3);
  EXPECT_NE(sha256(with_nul), sha256("a"));
  EXPECT_NE(sha256(with_nul), sha256(std::string("a\0c", 3)));
}

// finish() starts a new message: reusing the object hashes the next message alone.
TEST(Sha256, ReuseAfterFinishHashesTheNextMessage) {
  Sha256 h;
  h.update("abc");
  EXPECT_EQ(to_hex(h.finish()), kAbcHex);
  h.update("abc");
  EXPECT_EQ(to_hex(h.finish()), kAbcHex);
  EXPECT_EQ(h.finish(), sha256(""));
}

TEST(Sha256, DifferentInputsDiffer) { EXPECT_NE(sha256("abc"), sha256("abd")); }

// ---- hex and hashids ----

TEST(Sha256Hex, ToHexIsLowerCaseAndInOrder) {
  Sha256Digest digest{};
  for (std::size_t i = 0; i < digest.size(); ++i) digest[i] = static_cast<std::uint8_t>(i * 8 + 7);
  EXPECT_EQ(to_hex(digest), "070f171f272f373f474f575f676f777f878f979fa7afb7bfc7cfd7dfe7eff7ff");
  EXPECT_EQ(to_hex(Sha256Digest{}), std::string(64, '0'));
}

TEST(Sha256Hex, ToHashid) { EXPECT_EQ(to_hashid(sha256("abc")), std::string("sha256:") + kAbcHex); }

TEST(Sha256Hex, ParseHashidRoundTrips) {
  for (const char* text : {"", "abc", "another input"}) {
    const Sha256Digest digest = sha256(text);
    Sha256Digest parsed{};
    const Status status = parse_hashid(to_hashid(digest), &parsed);
    ASSERT_TRUE(status.is_ok()) << status.to_string();
    EXPECT_EQ(parsed, digest) << text;
  }
  Sha256Digest all_ff;
  all_ff.fill(0xff);
  Sha256Digest parsed{};
  ASSERT_TRUE(parse_hashid("sha256:" + std::string(64, 'f'), &parsed).is_ok());
  EXPECT_EQ(parsed, all_ff);
}

TEST(Sha256Hex, ParseHashidRejectsMalformed) {
  const std::string good = std::string("sha256:") + kAbcHex;
  std::string upper = good;
  upper[7] = 'B';  // "ba78..." -> "Ba78..."
  std::string non_hex = good;
  non_hex[20] = 'g';
  const std::vector<std::string> bad = {
      "",
      kAbcHex,                           // no prefix
      std::string("sha1:") + kAbcHex,    // wrong prefix
      std::string("SHA256:") + kAbcHex,  // upper-case prefix
      std::string("sha256 ") + kAbcHex,  // wrong separator
      upper,                             // upper-case digit
      non_hex,                           // not hex
      good.substr(0, good.size() - 1),   // short
      good + "0",                        // long
      "sha256:",                         // no digits
      std::string("sha256:") + std::string(64, ' '),
  };
  for (const auto& text : bad) {
    Sha256Digest parsed{};
    const Status status = parse_hashid(text, &parsed);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << "'" << text << "'";
    EXPECT_THAT(status.message(), HasSubstr("'" + text + "'"));
  }
}

}  // namespace
}  // namespace hp
