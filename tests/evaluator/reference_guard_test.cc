// A target's reference is called in the evaluating process (evaluator/reference.cc): a throw
// fails the call and the process goes on; a crash, exit() or a call past its deadline ends the
// process, which says first which target's reference did what (evaluator/reference_watch.h).
// `kiln targets --check` runs it in a forked child instead (evaluator/forked_call.h), where each
// of those fails only the call. A real reference.cpp, compiled by the system compiler as for any
// target.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>

#include "evaluator/forked_call.h"
#include "evaluator/reference.h"
#include "evaluator/shared_pages.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

// What the reference does is chosen by its first input: 0 doubles every input into the output;
// 1 dereferences null, 2 calls exit(0), 3 throws, 4 loops for ever, 5 aborts, 6 throws from a
// second thread (the rows entry point only: rows are split over threads).
constexpr const char* kMoody = R"(
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
static void act(const double* in, double* out, int64_t n) {
  const int what = static_cast<int>(in[0]);
  if (what == 1) { volatile int* p = nullptr; *p = 1; }
  if (what == 2) std::exit(0);
  if (what == 3) throw std::runtime_error("the reference gave up on purpose");
  if (what == 4) { volatile bool forever = true; while (forever) {} }
  if (what == 5) std::abort();
  for (int64_t i = 0; i < n; ++i) out[i] = 2 * in[i];
}
extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double*) {
  act(in[0], out[0], dims[0]);
}
extern "C" void kiln_reference_rows(const double* const* in, double* const* out,
                                    const int64_t* dims, const double*, const int64_t* rows,
                                    int64_t nrows) {
  if (in[0][0] == 6 && rows[0] != 0) throw std::runtime_error("from a worker thread");
  for (int64_t r = 0; r < nrows; ++r) out[0][rows[r]] = 2 * in[0][rows[r]];
  act(in[0], out[0], 0);
}
)";

class ReferenceGuard : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    target_.name = "moody";
    target_.reference_file = "reference.cpp";
    target_.reference_source = kMoody;
    auto built = Reference::build(target_, dir_.path());
    ASSERT_TRUE(built.is_ok()) << built.status().to_string();
    ref_ = std::move(*built);
    ref_->set_deadline(std::chrono::milliseconds(300));
  }
  // The reference on {what, 1, 2, 3}; `out` receives its outputs.
  Status run(double what, std::vector<double>& out) {
    in_ = {what, 1, 2, 3};
    out.assign(4, -1.0);
    return ref_->compute({in_.data()}, {out.data()}, {4}, {});
  }
  void run_and_die(double what) {
    std::vector<double> out;
    (void)run(what, out);
  }

  testing::TempDir dir_;
  TargetSpec target_;
  std::unique_ptr<Reference> ref_;
  std::vector<double> in_;
};

constexpr const char* kWho =
    "kiln: the reference of target 'moody' \\(reference.cpp\\), kiln_reference, ";

TEST_F(ReferenceGuard, AThrowFailsTheCallAndTheProcessGoesOn) {
  std::vector<double> out;
  ASSERT_TRUE(run(0, out).is_ok());
  EXPECT_EQ(out, (std::vector<double>{0, 2, 4, 6}));
  Status st = run(3, out);
  EXPECT_EQ(st.code(), StatusCode::kInternal) << st.to_string();
  EXPECT_EQ(st.message(),
            "the reference of target 'moody' (reference.cpp), kiln_reference, threw: the "
            "reference gave up on purpose");
  ASSERT_TRUE(run(0, out).is_ok());  // the same reference, in the same process, still answers
  EXPECT_EQ(out[3], 6);
}

TEST_F(ReferenceGuard, ACrashSaysWhichReferenceBeforeTheProcessEnds) {
  EXPECT_DEATH(run_and_die(1), std::string(kWho) + "crashed \\(signal 11\\)");
  EXPECT_DEATH(run_and_die(5), std::string(kWho) + "crashed \\(signal 6\\)");
}

TEST_F(ReferenceGuard, ExitAndAnEndlessCallEndTheProcessWithStatus1AndSaySo) {
  EXPECT_EXIT(run_and_die(2), ::testing::ExitedWithCode(1),
              std::string(kWho) + "called exit\\(\\) instead of returning");
  EXPECT_EXIT(run_and_die(4), ::testing::ExitedWithCode(1),
              std::string(kWho) + "did not return within its deadline \\(0.3 s\\)");
}

TEST_F(ReferenceGuard, RowsComeBackAndAThrowInAWorkerThreadFailsTheCall) {
  ref_->set_threads(4);
  std::vector<double> in(64);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i + 7);
  std::vector<double> out(64, -1.0);
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < 64; r += 2) rows.push_back(r);
  ASSERT_TRUE(ref_->compute_rows({in.data()}, {out.data()}, {64}, {}, rows).is_ok());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], i % 2 == 0 ? 2 * in[i] : -1.0) << i;

  in[0] = 6;  // the threads other than the caller's throw
  Status st = ref_->compute_rows({in.data()}, {out.data()}, {64}, {}, rows);
  EXPECT_EQ(st.code(), StatusCode::kInternal) << st.to_string();
  EXPECT_NE(st.message().find("kiln_reference_rows, threw: from a worker thread"),
            std::string::npos)
      << st.message();
}

// In a forked child (`kiln targets --check`), each way of not returning fails only the call.
TEST(ForkedCall, EveryWayOfNotReturningFailsTheCallAndTheCallerGoesOn) {
  struct Case {
    std::function<void()> call;
    StatusCode code;
    std::string says;
  };
  const Case cases[] = {
      {[] {
         volatile int* p = nullptr;
         *p = 1;
       },
       StatusCode::kInternal, "x crashed (killed by signal 11"},
      {[] { std::exit(0); }, StatusCode::kInternal, "x ended its process (exited with status 0"},
      {[] { throw std::runtime_error("no"); }, StatusCode::kInternal, "x threw: no"},
      {[] { throw std::runtime_error("x, said in full"); }, StatusCode::kInternal,
       "x, said in full"},
      {[] {
         volatile bool forever = true;
         while (forever) {
         }
       },
       StatusCode::kDeadlineExceeded, "x did not return within 0.3 s and was stopped"},
      {[] { std::abort(); }, StatusCode::kInternal, "x crashed (killed by signal 6"},
  };
  for (const Case& c : cases) {
    Status st = run_forked(c.call, std::chrono::milliseconds(300), "x");
    EXPECT_EQ(st.code(), c.code) << st.to_string();
    EXPECT_EQ(st.message().rfind(c.says, 0), 0u) << st.message();
  }
  SharedDoubles shared(3, 0.0);
  ASSERT_TRUE(run_forked([&] { shared[1] = 42; }, std::chrono::seconds(10), "x").is_ok());
  EXPECT_EQ(shared[1], 42);  // what the child wrote to shared pages, the caller reads
}

}  // namespace
}  // namespace kiln::eval
