// JobConfig::parse: the CUDA-graphs (issue 19) and batch-invariance (issue 20) settings and the
// shape of their errors.
#include "pipeline/job_config.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace deepinfer::pipeline {
namespace {

TEST(JobConfigTest, CudaGraphsAreOnUnlessTheJobTurnsThemOff) {
  EXPECT_TRUE(JobConfig{}.cuda_graphs);
  EXPECT_TRUE(JobConfig::parse(R"({"overlap": false})", "job.json").cuda_graphs);
  EXPECT_FALSE(JobConfig::parse(R"({"cuda_graphs": false})", "job.json").cuda_graphs);
  EXPECT_TRUE(JobConfig::parse(R"({"cuda_graphs": true, "overlap": false})", "job.json").cuda_graphs);
}

TEST(JobConfigTest, BatchInvarianceIsOffUnlessTheJobTurnsItOn) {
  EXPECT_FALSE(JobConfig{}.batch_invariant);
  EXPECT_FALSE(JobConfig::parse(R"({"cuda_graphs": false})", "job.json").batch_invariant);
  const JobConfig on = JobConfig::parse(R"({"batch_invariant": true})", "job.json");
  EXPECT_TRUE(on.batch_invariant);
  EXPECT_TRUE(on.cuda_graphs) << "one setting does not move another";
  EXPECT_TRUE(on.overlap);
  try {
    JobConfig::parse(R"({"batch_invariant": 1})", "jobs/y.json");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'batch_invariant' must be true or false, got 1"), std::string::npos) << e.what();
  }
}

TEST(JobConfigTest, KeptFp8LinearsAreOptInAndExcludeBatchInvariance) {
  EXPECT_FALSE(JobConfig{}.keep_fp8_linears);
  EXPECT_TRUE(JobConfig::parse(R"({"keep_fp8_linears": true})", "job.json").keep_fp8_linears);
  try {
    JobConfig::parse(R"({"keep_fp8_linears": true, "batch_invariant": true})", "jobs/z.json");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("batch_invariant and keep_fp8_linears exclude each other"), std::string::npos) << e.what();
  }
}

TEST(JobConfigTest, ABadValueNamesTheFileTheKeyAndTheValue) {
  try {
    JobConfig::parse(R"({"cuda_graphs": "yes"})", "jobs/x.json");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("jobs/x.json"), std::string::npos) << what;
    EXPECT_NE(what.find("'cuda_graphs' must be true or false, got \"yes\""), std::string::npos) << what;
  }
  try {
    JobConfig::parse(R"({"cuda_graph": false})", "jobs/x.json");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cuda_graphs"), std::string::npos) << "the known keys are listed: " << e.what();
  }
}

}  // namespace
}  // namespace deepinfer::pipeline
