// parse_request_line (io/request_reader.h): one JSONL line into a RequestLine or a
// RequestError, in the native or the OpenAI batch form (docs/input-format.md).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>

#include <simdjson.h>

#include "io/chat_format.h"
#include "io/request_reader.h"
#include "io/tokenizer.h"

namespace deepinfer::io {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

constexpr double kMinTemperature = 1e-6;  // the smallest positive temperature accepted

// Thrown inside parsing, turned into a RequestError before leaving parse_request_line.
struct BadRequest {
  std::string reason;
};

std::string type_name(element_type type) {
  switch (type) {
    case element_type::ARRAY: return "an array";
    case element_type::OBJECT: return "an object";
    case element_type::INT64:
    case element_type::UINT64: return "an integer";
    case element_type::DOUBLE: return "a number";
    case element_type::STRING: return "a string";
    case element_type::BOOL: return "a boolean";
    case element_type::NULL_VALUE: return "null";
  }
  return "unknown";
}

std::string show(element value) {
  std::string text = simdjson::minify(value);
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

// "null", or the type and the value: "string \"x\"".
std::string described(element value) {
  return value.type() == element_type::NULL_VALUE ? "null" : type_name(value.type()) + " " + show(value);
}

[[noreturn]] void bad_type(std::string_view field, element value, const char* expected) {
  throw BadRequest{"field '" + std::string(field) + "' must be " + expected + ", got " + described(value)};
}

int64_t get_int(std::string_view field, element value, int64_t lo, int64_t hi) {
  int64_t number;
  if (value.type() == element_type::UINT64)
    throw BadRequest{"field '" + std::string(field) + "' = " + show(value) + " is out of range [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]"};
  if (value.get(number)) bad_type(field, value, "an integer");
  if (number < lo || number > hi)
    throw BadRequest{"field '" + std::string(field) + "' = " + std::to_string(number) + " is out of range [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]"};
  return number;
}

double get_number(std::string_view field, element value) {
  double number;
  if (value.get(number)) bad_type(field, value, "a number");
  if (!std::isfinite(number)) throw BadRequest{"field '" + std::string(field) + "' must be finite"};
  return number;
}

bool get_bool(std::string_view field, element value) {
  bool flag;
  if (value.get(flag)) bad_type(field, value, "a boolean");
  return flag;
}

std::vector<int32_t> get_token_ids(std::string_view field, element value, int64_t vocab_size) {
  simdjson::dom::array array;
  if (value.get(array)) bad_type(field, value, "an array of token ids");
  const int64_t hi = vocab_size > 0 ? vocab_size - 1 : std::numeric_limits<int32_t>::max();
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  std::size_t index = 0;
  for (element item : array) {
    int64_t id;
    if (item.type() != element_type::INT64 || item.get(id) || id < 0 || id > hi)
      throw BadRequest{"field '" + std::string(field) + "'[" + std::to_string(index) + "] = " + show(item) + " is not a token id in [0, " +
                       std::to_string(hi) + "]"};
    ids.push_back(static_cast<int32_t>(id));
    ++index;
  }
  return ids;
}

void read_prompt(element value, std::string_view field, RequestLine* request, int64_t vocab_size) {
  if (value.type() == element_type::STRING) {
    std::string_view text;
    if (value.get(text)) bad_type(field, value, "a string");
    if (text.empty()) throw BadRequest{"field '" + std::string(field) + "' is an empty prompt"};
    request->prompt_text = std::string(text);
  } else if (value.type() == element_type::ARRAY) {
    request->prompt_token_ids = get_token_ids(field, value, vocab_size);
    if (request->prompt_token_ids.empty()) throw BadRequest{"field '" + std::string(field) + "' is an empty prompt"};
  } else {
    bad_type(field, value, "a string or an array of token ids");
  }
}

// "logit_bias": {"TOKEN_ID": BIAS, ...} as in the OpenAI API (keys are decimal token ids, biases
// in [-100, 100]) or null; sorted by token id.
std::vector<std::pair<int32_t, float>> get_logit_bias(element value, int64_t vocab_size) {
  std::vector<std::pair<int32_t, float>> bias;
  if (value.type() == element_type::NULL_VALUE) return bias;
  object entries;
  if (value.get(entries)) bad_type("logit_bias", value, "an object of token id -> bias");
  const int64_t hi = vocab_size > 0 ? vocab_size - 1 : std::numeric_limits<int32_t>::max();
  for (auto entry : entries) {
    const std::string key(entry.key);
    int64_t id = -1;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (error != std::errc() || end != key.data() + key.size() || key.empty() || id < 0 || id > hi)
      throw BadRequest{"field 'logit_bias' key \"" + key + "\" is not a token id in [0, " + std::to_string(hi) + "]"};
    const double b = get_number("logit_bias[\"" + key + "\"]", entry.value);
    if (b < -100 || b > 100)
      throw BadRequest{"field 'logit_bias[\"" + key + "\"]' = " + show(entry.value) + " is out of range [-100, 100]"};
    bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
  std::sort(bias.begin(), bias.end());
  for (std::size_t i = 1; i < bias.size(); ++i)
    if (bias[i].first == bias[i - 1].first) throw BadRequest{"field 'logit_bias' names token " + std::to_string(bias[i].first) + " twice"};
  return bias;
}

// "stop": a string, an array of strings, or null; each string non-empty.
std::vector<std::string> get_stop_strings(element value) {
  std::vector<std::string> stops;
  auto add = [&](element item, const std::string& name) {  // name: "'stop'" or "'stop'[i]"
    std::string_view text;
    if (item.get(text)) throw BadRequest{"field " + name + " must be a string, got " + described(item)};
    if (text.empty()) throw BadRequest{"field " + name + " is an empty stop string"};
    stops.emplace_back(text);
  };
  if (value.type() == element_type::NULL_VALUE) return stops;
  if (value.type() == element_type::STRING) {
    add(value, "'stop'");
    return stops;
  }
  simdjson::dom::array array;
  if (value.get(array)) bad_type("stop", value, "a string, an array of strings or null");
  std::size_t index = 0;
  for (element item : array) add(item, "'stop'[" + std::to_string(index++) + "]");
  return stops;
}

// A text prompt becomes token ids; every id must be inside the model's vocabulary.
void tokenize_prompt(RequestLine* request, const RequestParseOptions& options) {
  if (!options.tokenizer)
    throw BadRequest{
        "text prompts need the tokenizer (tokenizer.json in the model directory), which this job does not have; give 'prompt_token_ids'"};
  request->prompt_token_ids = options.tokenizer->encode(*request->prompt_text, request->add_special_tokens);
  if (request->add_special_tokens && options.bos_token_id >= 0 && !options.tokenizer->template_adds_tokens()) {
    request->prompt_token_ids.insert(request->prompt_token_ids.begin(), options.bos_token_id);
  }
  if (request->prompt_token_ids.empty()) throw BadRequest{"field 'prompt' encodes to no tokens"};
  if (options.vocab_size <= 0) return;
  for (std::size_t i = 0; i < request->prompt_token_ids.size(); ++i) {
    if (request->prompt_token_ids[i] >= options.vocab_size)
      throw BadRequest{"field 'prompt' encodes to token id " + std::to_string(request->prompt_token_ids[i]) + " (token " +
                       std::to_string(i) + "), outside the model's vocabulary of " + std::to_string(options.vocab_size)};
  }
}

// The fields only a chat request has (or spells its own way), gathered while reading its body.
struct ChatFields {
  std::vector<ChatMessage> messages;
  bool thinking = false;
  bool logprobs = false;
  int64_t top_logprobs = 0;
};

// A message's "content": a string, or an array of {"type": "text", "text": ...} parts (joined).
std::string message_content(element value, const std::string& where) {
  if (value.type() == element_type::STRING) return std::string(value.get_string().value());
  simdjson::dom::array parts;
  if (value.get(parts)) bad_type(where + ".content", value, "a string or an array of text parts");
  std::string text;
  for (element part : parts) {
    std::string_view type, part_text;
    if (part["type"].get(type) || type != "text" || part["text"].get(part_text))
      throw BadRequest{"field '" + where + ".content' has a part that is not {\"type\": \"text\", \"text\": ...}: " + show(part)};
    text += part_text;
  }
  return text;
}

std::vector<ChatMessage> get_messages(element value) {
  simdjson::dom::array array;
  if (value.get(array)) bad_type("messages", value, "an array of messages");
  std::vector<ChatMessage> messages;
  for (element item : array) {
    const std::string where = "messages[" + std::to_string(messages.size()) + "]";
    object message;
    if (item.get(message)) bad_type(where, item, "an object");
    ChatMessage m;
    bool has_content = false;
    for (auto field : message) {
      if (field.key == "role") {
        std::string_view role;
        if (field.value.get(role)) bad_type(where + ".role", field.value, "a string");
        m.role = std::string(role);
      } else if (field.key == "content") {
        m.content = message_content(field.value, where);
        has_content = true;
      } else if (field.key != "name" && field.key != "reasoning_content") {
        throw BadRequest{"unknown field '" + where + "." + std::string(field.key) + "'"};
      }
    }
    if (m.role.empty()) throw BadRequest{"field '" + where + "' has no 'role'"};
    if (!has_content && m.role != "assistant") throw BadRequest{"field '" + where + "' (role '" + m.role + "') has no 'content'"};
    messages.push_back(std::move(m));
  }
  return messages;
}

// A chat body's own fields; false for the others (read as in a completion).
bool read_chat_field(std::string_view key, element value, RequestLine* request, ChatFields* chat) {
  if (key == "messages") {
    chat->messages = get_messages(value);
  } else if (key == "thinking") {
    chat->thinking = get_bool(key, value);
  } else if (key == "logprobs") {
    chat->logprobs = value.type() != element_type::NULL_VALUE && get_bool(key, value);
  } else if (key == "top_logprobs") {
    chat->top_logprobs = get_int(key, value, 0, 20);
  } else if (key == "max_completion_tokens") {
    request->max_tokens = get_int(key, value, 1, 1 << 20);
  } else if (key == "prompt" || key == "prompt_token_ids") {
    throw BadRequest{"field 'body." + std::string(key) + "' is not part of a chat request; give 'messages'"};
  } else {
    return false;
  }
  return true;
}

// The chat request's prompt text in DeepSeek-V4's format (chat_format.h), and its logprobs.
void finish_chat(const ChatFields& chat, RequestLine* request) {
  try {
    request->prompt_text = render_deepseek_chat(chat.messages, chat.thinking);
  } catch (const std::invalid_argument& error) {
    throw BadRequest{error.what()};
  }
  request->add_special_tokens = false;  // the text starts with its BOS
  if (chat.thinking) request->api = kApiChatThinking;
  if (chat.top_logprobs > 0 && !chat.logprobs) throw BadRequest{"field 'top_logprobs' needs 'logprobs': true"};
  if (chat.logprobs) request->logprobs = chat.top_logprobs;
}

// The sampling and prompt fields, shared by the native form and the OpenAI batch body.
void read_fields(object fields, RequestLine* request, const RequestParseOptions& options, bool openai_body) {
  bool have_prompt = false;
  ChatFields chat;
  std::set<std::string_view> seen;
  for (auto field : fields) {
    const std::string_view key = field.key;
    const element value = field.value;
    if (!seen.insert(key).second) throw BadRequest{"field '" + std::string(key) + "' appears twice"};
    if (request->api == kApiChat && read_chat_field(key, value, request, &chat)) {
      have_prompt |= key == "messages";
      continue;
    }
    if (key == "id" || key == "custom_id" || key == "method" || key == "url" || key == "body") {
      if (openai_body) throw BadRequest{"field 'body." + std::string(key) + "' is not allowed inside body"};
      continue;  // handled by the caller
    }
    if (key == "prompt_token_ids" || key == "prompt") {
      if (have_prompt) throw BadRequest{"give only one of 'prompt' and 'prompt_token_ids'"};
      have_prompt = true;
      if (key == "prompt_token_ids") {
        request->prompt_token_ids = get_token_ids(key, value, options.vocab_size);
        if (request->prompt_token_ids.empty()) throw BadRequest{"field 'prompt_token_ids' is an empty prompt"};
      } else {
        read_prompt(value, key, request, options.vocab_size);
      }
    } else if (key == "max_tokens") {
      request->max_tokens = get_int(key, value, 1, options.max_tokens_limit);
    } else if (key == "temperature") {
      request->temperature = get_number(key, value);
      if (request->temperature < 0 || request->temperature > 100)
        throw BadRequest{"field 'temperature' = " + show(value) + " is out of range [0, 100]"};
      // Below this, logits / temperature can overflow float32 to -inf for every token.
      if (request->temperature > 0 && request->temperature < kMinTemperature)
        throw BadRequest{"field 'temperature' = " + show(value) + " is below 1e-6; use 0 for greedy sampling"};
    } else if (key == "top_p") {
      request->top_p = get_number(key, value);
      if (!(request->top_p > 0 && request->top_p <= 1)) throw BadRequest{"field 'top_p' = " + show(value) + " is out of range (0, 1]"};
      if (static_cast<float>(request->top_p) < std::numeric_limits<float>::min())
        throw BadRequest{"field 'top_p' = " + show(value) + " is below the smallest float32 (1.2e-38)"};
    } else if (key == "top_k") {
      request->top_k = get_int(key, value, -1, std::numeric_limits<int32_t>::max());
      if (request->top_k == -1) request->top_k = 0;
    } else if (key == "min_p") {
      request->min_p = get_number(key, value);
      if (request->min_p < 0 || request->min_p > 1) throw BadRequest{"field 'min_p' = " + show(value) + " is out of range [0, 1]"};
    } else if (key == "seed") {
      uint64_t seed;
      if (value.type() == element_type::NULL_VALUE) continue;
      if ((value.type() != element_type::INT64 && value.type() != element_type::UINT64) || value.get(seed))
        throw BadRequest{"field 'seed' = " + show(value) + " must be an integer in [0, 2^64-1]"};
      request->seed = seed;
    } else if (key == "stop_token_ids") {
      request->stop_token_ids = get_token_ids(key, value, options.vocab_size);
    } else if (key == "ignore_eos") {
      request->ignore_eos = get_bool(key, value);
    } else if (key == "min_tokens") {
      request->min_tokens = get_int(key, value, 0, options.max_tokens_limit);
    } else if (key == "logprobs") {
      if (value.type() == element_type::NULL_VALUE) continue;
      request->logprobs = get_int(key, value, 0, 20);
    } else if (key == "prompt_logprobs") {
      if (value.type() == element_type::NULL_VALUE) continue;
      request->prompt_logprobs = get_int(key, value, 0, 20);
    } else if (key == "logit_bias") {
      request->logit_bias = get_logit_bias(value, options.vocab_size);
    } else if (key == "allowed_token_ids" || key == "banned_token_ids") {
      (key == "allowed_token_ids" ? request->allowed_token_ids : request->banned_token_ids) = get_token_ids(key, value, options.vocab_size);
    } else if (key == "model" || key == "user") {
      continue;  // accepted and ignored: the job's model is fixed
    } else if (key == "n") {
      if (get_int(key, value, 1, 1) != 1) throw BadRequest{"field 'n' must be 1"};
    } else if (key == "stream") {
      if (get_bool(key, value)) throw BadRequest{"field 'stream' must be false in a batch job"};
    } else if (key == "stop") {
      request->stop = get_stop_strings(value);
      if (!request->stop.empty() && !options.tokenizer)
        throw BadRequest{
            "field 'stop' (stop strings) needs the tokenizer (tokenizer.json in the model directory), which this job does not have; use "
            "'stop_token_ids'"};
    } else if (key == "add_special_tokens") {
      request->add_special_tokens = get_bool(key, value);
    } else {
      throw BadRequest{"unknown field '" + std::string(openai_body ? "body." : "") + std::string(key) + "'"};
    }
  }
  if (!have_prompt) throw BadRequest{request->api == kApiChat ? "missing 'messages'" : "missing 'prompt_token_ids' (or 'prompt')"};
  // Bans that leave no token to sample (with the eos and stop ids of min_tokens) are admission's
  // check (pipeline/admission.cpp), which knows the model's eos id.
  if (request->min_tokens > request->max_tokens)
    throw BadRequest{"min_tokens = " + std::to_string(request->min_tokens) +
                     " exceeds max_tokens = " + std::to_string(request->max_tokens)};
  if (request->api == kApiChat) finish_chat(chat, request);
  if (request->prompt_text) tokenize_prompt(request, options);
}

// The first integer literal outside strings that no 64-bit type holds (shortened), or "".
// simdjson rejects such a number; this names it instead of calling the line invalid JSON.
std::string oversized_integer(std::string_view line) {
  bool in_string = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c != '-' && (c < '0' || c > '9')) continue;
    std::size_t end = i + (c == '-');
    while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
    const bool integer = end == line.size() || (line[end] != '.' && line[end] != 'e' && line[end] != 'E');
    const std::string_view digits = line.substr(i + (c == '-'), end - i - (c == '-'));
    const std::string_view limit = c == '-' ? "9223372036854775808" : "18446744073709551615";
    const bool too_big =
        !digits.empty() && digits[0] != '0' && (digits.size() > limit.size() || (digits.size() == limit.size() && digits > limit));
    if (integer && too_big) {
      const std::string_view text = line.substr(i, end - i);
      return text.size() > 40 ? std::string(text.substr(0, 37)) + "..." : std::string(text);
    }
    i = end - 1;
  }
  return "";
}

}  // namespace

std::string location_id(const InputLocation& where) { return where.file + ":" + std::to_string(where.line); }

RequestItem parse_request_line(std::string_view line, const InputLocation& where, const RequestParseOptions& options) {
  RequestLine request;
  request.input = where;
  request.id = location_id(where);
  try {
    if (line.size() >= 3 && line.substr(0, 3) == "\xEF\xBB\xBF")
      throw BadRequest{"line starts with a UTF-8 byte order mark; save the file as UTF-8 without BOM"};
    if (!line.empty() && line.back() == '\r') throw BadRequest{"line ends with CRLF; convert the file to LF line endings (e.g. dos2unix)"};
    thread_local simdjson::dom::parser parser;
    simdjson::padded_string padded(line);
    element root;
    if (auto error = parser.parse(padded).get(root)) {
      if (error == simdjson::UTF8_ERROR) throw BadRequest{"invalid UTF-8"};
      const std::string big = error == simdjson::NUMBER_ERROR ? oversized_integer(line) : "";
      if (!big.empty()) throw BadRequest{"integer " + big + " is outside the 64-bit range [-2^63, 2^64-1]"};
      throw BadRequest{std::string("invalid JSON: ") + simdjson::error_message(error)};
    }
    object fields;
    if (root.get(fields)) throw BadRequest{"a request line must be a JSON object, got " + type_name(root.type())};

    element id_value, body;
    const bool openai = fields["custom_id"].get(id_value) == simdjson::SUCCESS || fields["body"].get(body) == simdjson::SUCCESS;
    const char* id_key = openai ? "custom_id" : "id";
    if (fields[id_key].get(id_value) == simdjson::SUCCESS) {
      std::string_view id;
      if (id_value.get(id)) bad_type(id_key, id_value, "a string");
      if (id.empty()) throw BadRequest{std::string("field '") + id_key + "' is empty"};
      request.id = std::string(id);
    }
    if (openai) {
      if (fields["id"].get(id_value) == simdjson::SUCCESS)
        throw BadRequest{fields["custom_id"].error() != simdjson::SUCCESS
                             ? "an OpenAI batch line ('body') takes its id as 'custom_id', not 'id'"
                             : "give 'custom_id' or 'id', not both"};
      element method, url;
      std::string_view text;
      if (fields["method"].get(method) == simdjson::SUCCESS && (method.get(text) || text != "POST"))
        throw BadRequest{"field 'method' must be \"POST\", got " + show(method)};
      if (fields["url"].get(url) || url.get(text)) throw BadRequest{"missing string field 'url' (\"/v1/completions\")"};
      if (text != "/v1/completions" && text != "/v1/chat/completions")
        throw BadRequest{"field 'url' = \"" + std::string(text) +
                         "\" is not supported; only \"/v1/completions\" and \"/v1/chat/completions\""};
      request.api = text == "/v1/completions" ? kApiCompletions : kApiChat;
      object body_fields;
      if (fields["body"].get(body)) throw BadRequest{"missing object field 'body'"};
      if (body.get(body_fields)) bad_type("body", body, "an object");
      for (auto field : fields) {
        const std::string_view key = field.key;
        if (key != "custom_id" && key != "method" && key != "url" && key != "body")
          throw BadRequest{"unknown field '" + std::string(key) + "' next to 'body'"};
      }
      read_fields(body_fields, &request, options, /*openai_body=*/true);
    } else {
      read_fields(fields, &request, options, /*openai_body=*/false);
    }
  } catch (const BadRequest& bad) {
    return RequestError{request.id, where, location_id(where) + ": " + bad.reason};
  } catch (const std::bad_alloc&) {
    return RequestError{request.id, where, location_id(where) + ": line too large to parse"};
  }
  return request;
}

}  // namespace deepinfer::io
