#include "io/utf8.h"

#include <unordered_map>

namespace deepinfer::io {

const std::array<char32_t, 256>& byte_level_chars() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      t[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

int byte_level_byte(char32_t cp) {
  static const std::unordered_map<char32_t, int> inverse = [] {
    std::unordered_map<char32_t, int> m;
    for (int b = 0; b < 256; ++b) m.emplace(byte_level_chars()[b], b);
    return m;
  }();
  const auto it = inverse.find(cp);
  return it == inverse.end() ? -1 : it->second;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) append_utf8(out, byte_level_chars()[static_cast<unsigned char>(c)]);
  return out;
}

namespace {

// Decodes the valid character at text[pos] whose length utf8_step returned.
char32_t decode_at(std::string_view text, std::size_t pos, int len) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  if (len == 1) return byte(0);
  char32_t cp = byte(0) & (0xFF >> (len + 1));
  for (int i = 1; i < len; ++i) cp = (cp << 6) | (byte(i) & 0x3F);
  return cp;
}

}  // namespace

bool from_byte_level(std::string_view token, std::string& out) {
  out.clear();
  for (std::size_t pos = 0; pos < token.size();) {
    const int len = utf8_step(token, pos);
    if (len <= 0) return false;
    const int b = byte_level_byte(decode_at(token, pos, len));
    if (b < 0) return false;
    out.push_back(static_cast<char>(b));
    pos += static_cast<std::size_t>(len);
  }
  return true;
}

int utf8_step(std::string_view text, std::size_t pos) {
  const auto at = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = at(pos);
  if (b0 < 0x80) return 1;
  int need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int i = 1; i < need; ++i) {
    if (pos + i >= text.size()) return 0;  // valid so far, truncated at the end
    const unsigned char b = at(pos + i);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return -i;
  }
  return need;
}

std::string to_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const int len = utf8_step(text, pos);
    if (len > 0) {
      out.append(text.substr(pos, static_cast<std::size_t>(len)));
      pos += static_cast<std::size_t>(len);
    } else {
      out += "\xEF\xBF\xBD";
      pos += len == 0 ? text.size() - pos : static_cast<std::size_t>(-len);
    }
  }
  return out;
}

}  // namespace deepinfer::io
