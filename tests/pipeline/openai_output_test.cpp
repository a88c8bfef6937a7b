// `cat --format openai` lines from result records: completions, chat with and without
// thinking, logprobs, prompt logprobs, and failed records.
#include "pipeline/openai_output.h"

#include <gtest/gtest.h>

#include "io/chat_format.h"

namespace deepinfer::pipeline {
namespace {

std::string record(const std::string& api, const std::string& finish, const std::string& text, const std::string& logprobs = "null") {
  return R"({"id":"q1","input":{"file":"in.jsonl","line":3},"seed":7,"finish_reason":")" + finish + R"(","stop_reason":null,"error":)" +
         (finish == "error" ? R"("in.jsonl:3: bad")" : "null") + R"(,"num_prompt_tokens":5,"output_token_ids":[4,9],"text":)" + text +
         R"(,"logprobs":)" + logprobs + R"(,"api":")" + api +
         R"(","steps":{"prefill_chunks":1,"first_token_step":0,"finish_step":1,"preemptions":0}})";
}

TEST(OpenAiOutputTest, CompletionLine) {
  EXPECT_EQ(
      openai_batch_line(record("completions", "length", "\"ab\""), 3),
      R"({"id":"batch_req_3","custom_id":"q1","response":{"status_code":200,"request_id":"req_3","body":{"id":"cmpl-3",)"
      R"("object":"text_completion","model":"deepinfer","choices":[{"index":0,"text":"ab","logprobs":null,"finish_reason":"length"}],)"
      R"("usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}},"error":null})");
}

TEST(OpenAiOutputTest, ChatSplitsReasoningAtTheEndOfThinking) {
  const std::string thinking = openai_batch_line(record("chat-thinking", "stop", "\"let me see</think>It is 4.\""), 1);
  EXPECT_NE(thinking.find(R"("object":"chat.completion")"), std::string::npos) << thinking;
  EXPECT_NE(thinking.find(R"("message":{"role":"assistant","content":"It is 4.","reasoning_content":"let me see"})"), std::string::npos)
      << thinking;
  const std::string cut = openai_batch_line(record("chat-thinking", "length", "\"still thinking\""), 1);
  EXPECT_NE(cut.find(R"("content":"","reasoning_content":"still thinking")"), std::string::npos) << cut;
  const std::string plain = openai_batch_line(record("chat", "stop", "\"Hi</think>x\""), 1);
  EXPECT_NE(plain.find(R"("content":"Hi</think>x","reasoning_content":null)"), std::string::npos) << plain;
}

TEST(OpenAiOutputTest, LogprobsAndFailures) {
  const std::string lp = openai_batch_line(
      record("completions", "stop", "null", R"([{"token":4,"logprob":-0.5,"top":[[4,-0.5],[2,-1.25]]},{"token":9,"logprob":-2,"top":[]}])"),
      2);
  EXPECT_NE(lp.find(R"("text":"")"), std::string::npos) << "no tokenizer: empty text: " << lp;
  EXPECT_NE(lp.find(R"("logprobs":{"token_ids":[4,9],"token_logprobs":[-0.5,-2],"top_logprobs":[[{"token_id":4,"logprob":-0.5},)"
                    R"({"token_id":2,"logprob":-1.25}],[]]})"),
            std::string::npos)
      << lp;
  std::string scored = record("completions", "stop", "null");
  scored.insert(scored.find(R"(,"api")"), R"(,"prompt_logprobs":[null,{"token":3,"logprob":-1.5,"top":[]}])");
  const std::string with_prompt = openai_batch_line(scored, 4);
  EXPECT_NE(with_prompt.find(R"("prompt_logprobs":[null,{"token":3,"logprob":-1.5,"top":[]}],"finish_reason")"), std::string::npos)
      << with_prompt;
  EXPECT_EQ(openai_batch_line(record("chat", "error", "null"), 9),
            R"({"id":"batch_req_9","custom_id":"q1","response":{"status_code":400,"request_id":"req_9","body":{"error":)"
            R"({"message":"in.jsonl:3: bad","type":"invalid_request_error"}}},"error":null})");
  EXPECT_THROW(openai_batch_line("[1]", 1), std::runtime_error);
}

TEST(ChatFormatTest, RendersTheDeepSeekTemplate) {
  using io::ChatMessage;
  const std::vector<ChatMessage> messages = {
      {"system", "Be brief."}, {"system", "Answer in English."}, {"user", "hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}};
  EXPECT_EQ(io::render_deepseek_chat(messages, /*thinking=*/false),
            "<｜begin▁of▁sentence｜>Be brief.\n\nAnswer in English.<｜User｜>hi<｜Assistant｜></think>Hello!<｜end▁of▁sentence｜>"
            "<｜User｜>2+2?<｜Assistant｜></think>");
  EXPECT_EQ(io::render_deepseek_chat({{"user", "x"}}, /*thinking=*/true), "<｜begin▁of▁sentence｜><｜User｜>x<｜Assistant｜><think>");
  EXPECT_THROW(io::render_deepseek_chat({}, false), std::invalid_argument);
  EXPECT_THROW(io::render_deepseek_chat({{"user", "x"}, {"system", "late"}, {"user", "y"}}, false), std::invalid_argument);
  EXPECT_THROW(io::render_deepseek_chat({{"tool", "x"}}, false), std::invalid_argument);
  EXPECT_THROW(io::render_deepseek_chat({{"user", "x"}, {"assistant", "y"}}, false), std::invalid_argument);
}

}  // namespace
}  // namespace deepinfer::pipeline
