#include "io/chat_format.h"

#include <stdexcept>

namespace deepinfer::io {

std::string render_deepseek_chat(const std::vector<ChatMessage>& messages, bool thinking) {
  if (messages.empty()) throw std::invalid_argument("'messages' is empty");
  std::string text = kChatBos;
  std::size_t i = 0;
  for (; i < messages.size() && messages[i].role == "system"; ++i) text += (i ? "\n\n" : "") + messages[i].content;
  for (; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string where = "'messages'[" + std::to_string(i) + "]";
    if (m.role == "user") {
      text += kChatUser + m.content;
    } else if (m.role == "assistant") {
      text += std::string(kChatAssistant) + kThinkEnd + m.content + kChatEos;
    } else if (m.role == "system") {
      throw std::invalid_argument(where + ": a system message must come before the others");
    } else {
      throw std::invalid_argument(where + ": role '" + m.role + "' is not system, user or assistant");
    }
  }
  if (messages.back().role != "user")
    throw std::invalid_argument("the last message must be the user's (got '" + messages.back().role + "')");
  return text + kChatAssistant + (thinking ? kThinkStart : kThinkEnd);
}

}  // namespace deepinfer::io
