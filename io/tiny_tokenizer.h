#pragma once
// A small but valid Hugging Face tokenizer.json for the tiny test model, so text prompts
// work on the embedded default checkpoint. Byte-level BPE: id 0 "<｜begin▁of▁sentence｜>"
// (BOS), id 1 "<｜end▁of▁sentence｜>" (EOS), ids 2..257 the 256 bytes (byte b -> 2 + b),
// then merges learned greedily (most frequent adjacent pair, ties to the smallest id pair)
// from a fixed built-in English/code corpus until vocab_size ids are used or no adjacent
// pair is left. Pre-tokenizer: the DeepSeek-V3-style Split sequence + ByteLevel (see the .cpp).
// Deterministic: the same vocab_size always gives the same bytes.

#include <cstdint>
#include <string>

namespace deepinfer::io {

inline constexpr int32_t kTinyBosId = 0;
inline constexpr int32_t kTinyEosId = 1;
inline constexpr int32_t kTinyMinVocabSize = 258;  // the two special tokens and 256 bytes

// The tokenizer.json text; every id is < vocab_size. Throws std::invalid_argument when
// vocab_size < kTinyMinVocabSize.
std::string tiny_tokenizer_json(int32_t vocab_size);

// Writes tiny_tokenizer_json(vocab_size) to path atomically.
void write_tiny_tokenizer(const std::string& path, int32_t vocab_size);

}  // namespace deepinfer::io
