#pragma once
// A StepExecutor over engine::FakeExecutor (CPU, no model): the pipeline's tests run the
// whole job with it. on_execute runs before each step (tests use it to inject a stop).

#include <functional>
#include <memory>

#include "engine/fake_executor.h"
#include "engine/step_executor.h"

namespace deepinfer::pipeline::testing {

class FakeStepExecutor final : public engine::StepExecutor {
 public:
  explicit FakeStepExecutor(engine::FakeExecutor::Options options) : fake_(options) {}

  std::unique_ptr<engine::PendingStep> execute(const engine::SchedulerOutput& out) override {
    if (on_execute) on_execute(out);
    ++executed;
    auto result = fake_.execute(out);
    if (!result) throw std::logic_error("FakeStepExecutor needs delay_steps = 0");
    return std::make_unique<Ready>(std::move(*result));
  }

  std::function<void(const engine::SchedulerOutput&)> on_execute;
  int64_t executed = 0;

 private:
  struct Ready final : engine::PendingStep {
    explicit Ready(engine::StepResult r) : result(std::move(r)) {}
    engine::ExecutedStep wait() override { return engine::ExecutedStep{std::move(result), {}}; }
    engine::StepResult result;
  };
  engine::FakeExecutor fake_;
};

}  // namespace deepinfer::pipeline::testing
