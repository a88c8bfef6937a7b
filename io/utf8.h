#pragma once
// UTF-8 and GPT-2 byte-level helpers shared by the tokenizer and its detokenizer.
// Owns: the byte <-> unicode-char mapping of byte-level BPE, strict UTF-8 stepping
// (for holding back a partial character) and lossy repair of invalid UTF-8.
// Does not own: tokenization itself (io/tokenizer.h).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::io {

// GPT-2 bytes_to_unicode: byte b maps to one code point (printable bytes to themselves,
// the others to 256 + n). Returns the code point for each byte.
const std::array<char32_t, 256>& byte_level_chars();

// Inverse of byte_level_chars(): code point -> byte, or -1 when cp is not a byte char.
int byte_level_byte(char32_t cp);

// Appends the UTF-8 encoding of cp.
void append_utf8(std::string& out, char32_t cp);

// The string of byte-level chars for raw bytes ("a b" -> "aĠb").
std::string to_byte_level(std::string_view bytes);

// Raw bytes of a byte-level token string; false when some char is not a byte char
// (then `out` is unspecified) or the string is not valid UTF-8.
bool from_byte_level(std::string_view token, std::string& out);

// One step of strict UTF-8 decoding at text[pos]:
//   > 0: a complete, valid character of that many bytes;
//   0: a valid but truncated prefix that reaches the end of text (more bytes may complete it);
//   < 0: invalid; -n is the length of the maximal invalid subpart to replace by U+FFFD.
int utf8_step(std::string_view text, std::size_t pos);

// Replaces each maximal invalid subpart with U+FFFD (like Rust's from_utf8_lossy).
std::string to_valid_utf8(std::string_view text);

}  // namespace deepinfer::io
