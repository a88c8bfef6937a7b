#pragma once
// DeepSeek-V4's chat format: the prompt text of an OpenAI chat request (`messages`), in the
// form of the DeepSeek-V3.1/V3.2 chat template (thinking and non-thinking):
//
//   <｜begin▁of▁sentence｜>SYSTEM                 system messages first, joined by "\n\n"
//   <｜User｜>CONTENT                              each user message
//   <｜Assistant｜></think>CONTENT<｜end▁of▁sentence｜>   each earlier assistant message (its
//                                                  reasoning is dropped, as the template does)
//   <｜Assistant｜><think>                         the turn to generate, thinking
//   <｜Assistant｜></think>                        ... or non-thinking
//
// The special tokens are the tokenizer's added tokens, so the text is encoded without the
// template's BOS (it is written out). Owns: the rendering and its rules. Does not own: parsing
// the request line (request_reader.cpp), tokenization.

#include <string>
#include <vector>

namespace deepinfer::io {

inline constexpr const char* kChatBos = "<｜begin▁of▁sentence｜>";
inline constexpr const char* kChatEos = "<｜end▁of▁sentence｜>";
inline constexpr const char* kChatUser = "<｜User｜>";
inline constexpr const char* kChatAssistant = "<｜Assistant｜>";
inline constexpr const char* kThinkStart = "<think>";
inline constexpr const char* kThinkEnd = "</think>";

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// The prompt text. Throws std::invalid_argument naming the message when the conversation
// breaks a rule: no messages, a role other than the three, a system message after another
// role, or a last message that is not the user's.
std::string render_deepseek_chat(const std::vector<ChatMessage>& messages, bool thinking);

}  // namespace deepinfer::io
