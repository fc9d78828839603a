#pragma once
// UTF-8 <-> code points, strict (RFC 3629: no overlong forms, surrogates or values past U+10FFFF).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tnt::data::detail {

// The code points of `text`, or nullopt if it is not valid UTF-8 (`bad_at` gets the byte offset).
inline std::optional<std::u32string> decode_utf8(std::string_view text, std::size_t* bad_at = nullptr) {
  std::u32string out;
  out.reserve(text.size());
  std::size_t i = 0;
  auto bad = [&] {
    if (bad_at != nullptr) *bad_at = i;
    return std::nullopt;
  };
  while (i < text.size()) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    std::size_t n = 0;
    char32_t c = 0, min = 0;
    if (b0 < 0x80) {
      n = 1, c = b0;
    } else if ((b0 & 0xe0) == 0xc0) {
      n = 2, c = b0 & 0x1f, min = 0x80;
    } else if ((b0 & 0xf0) == 0xe0) {
      n = 3, c = b0 & 0x0f, min = 0x800;
    } else if ((b0 & 0xf8) == 0xf0) {
      n = 4, c = b0 & 0x07, min = 0x10000;
    } else {
      return bad();
    }
    if (i + n > text.size()) return bad();
    for (std::size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xc0) != 0x80) return bad();
      c = (c << 6) | (b & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return bad();
    out.push_back(c);
    i += n;
  }
  return out;
}

inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
}

inline std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) append_utf8(out, c);
  return out;
}

// Whether `text` is valid UTF-8 (no allocation); `bad_at` gets the offset of the first bad byte.
inline bool valid_utf8(std::string_view text, std::size_t* bad_at = nullptr) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = (b0 & 0xe0) == 0xc0 ? 2 : (b0 & 0xf0) == 0xe0 ? 3 : (b0 & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || i + n > text.size() || !decode_utf8(text.substr(i, n))) {
      if (bad_at != nullptr) *bad_at = i;
      return false;
    }
    i += n;
  }
  return true;
}

// Number of code points in valid UTF-8 (continuation bytes are not counted).
inline std::size_t count_code_points(std::string_view text) {
  std::size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

}  // namespace tnt::data::detail
