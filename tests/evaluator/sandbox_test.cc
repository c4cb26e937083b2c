// Tests of the sandbox: the real `kiln __sandbox` child on the cpu backend, with host kernels
// compiled by CpuCompiler -- honest ones, and ones that cheat, hang, crash or abort.
#include "evaluator/sandbox.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "evaluator/cpu/cpu_compiler.h"
#include "shared/tensor_map_spec.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

using nlohmann::json;

constexpr uint32_t kCallTimeoutMs = 5000;
constexpr int64_t kN = 1000;
constexpr uint64_t kTensorBytes = kN * sizeof(float);

struct KernelSource {
  const char* name;
  const char* source;
  std::vector<ArgSpec::Kind> signature;
};

using K = ArgSpec::Kind;
const std::vector<KernelSource>& kernel_sources() {
  static const std::vector<KernelSource> kSources = {
      {"add",
       R"(#include <cstdint>
extern "C" void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
})",
       {K::kTensorIn, K::kTensorIn, K::kTensorOut, K::kInt64}},
      // Replays the first result it computed into each output pointer (docs/threats.md row 3).
      {"replay",
       R"(#include <cstdint>
static float* outs[16];
static float results[16][1000];
static int seen = 0;
extern "C" void replay(const float* a, const float* b, float* out, int64_t n) {
  for (int k = 0; k < seen; ++k) {
    if (outs[k] != out) continue;
    for (int64_t i = 0; i < n; ++i) out[i] = results[k][i];
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  if (seen == 16 || n > 1000) return;
  outs[seen] = out;
  for (int64_t i = 0; i < n; ++i) results[seen][i] = out[i];
  ++seen;
})",
       {K::kTensorIn, K::kTensorIn, K::kTensorOut, K::kInt64}},
      {"mutate",
       R"(#include <cstdint>
extern "C" void mutate(const float* a, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i];
  const_cast<float*>(a)[0] = 42.0f;  // cheats by changing its input
})",
       {K::kTensorIn, K::kTensorOut, K::kInt64}},
      {"lazy",
       R"(#include <cstdint>
extern "C" void lazy(const float* a, float* out, int64_t n) {}
)",
       {K::kTensorIn, K::kTensorOut, K::kInt64}},
      {"spin",
       R"(#include <cstdint>
extern "C" void spin(const float* a, float* out, int64_t n) {
  volatile int64_t x = 0;
  for (;;) x = x + 1;
})",
       {K::kTensorIn, K::kTensorOut, K::kInt64}},
      // The address comes in at run time (0), so the compiler cannot turn the store into a trap.
      {"segv",
       R"(#include <cstdint>
extern "C" void segv(const float* a, float* out, int64_t address) {
  *reinterpret_cast<volatile int*>(address) = 1;
})",
       {K::kTensorIn, K::kTensorOut, K::kInt64}},
      {"aborts",
       R"(#include <cstdint>
#include <cstdlib>
extern "C" void aborts(const float* a, float* out, int64_t n) { std::abort(); }
)",
       {K::kTensorIn, K::kTensorOut, K::kInt64}},
  };
  return kSources;
}

class SandboxTest : public ::testing::Test {
 protected:
  // Compiles every kernel once for the suite, in parallel (the compiler is thread-safe).
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    auto compiler = CpuCompiler::create();
    if (!compiler.is_ok()) {
      setup_error_ = compiler.status().to_string();
      return;
    }
    std::vector<std::future<CompileOutput>> outputs;
    for (const KernelSource& k : kernel_sources()) {
      CompileRequest request;
      request.source = k.source;
      request.kernel_name = k.name;
      request.arch = "cpu";
      for (K kind : k.signature) {
        request.signature.push_back(
            {kind, DType::kF32, "p" + std::to_string(request.signature.size())});
      }
      request.signature.back().dtype = DType::kI64;
      outputs.push_back(std::async(std::launch::async, [&c = **compiler, request] {
        return c.compile(request);
      }));
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      CompileOutput out = outputs[i].get();
      if (!out.ok) setup_error_ += std::string(kernel_sources()[i].name) + ": " + out.log;
      paths_[kernel_sources()[i].name] =
          dir_->write(std::string(kernel_sources()[i].name) + ".so", out.binary);
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  static std::unique_ptr<Sandbox> spawn() {
    SandboxOptions options;
    options.kiln_binary = testing::kiln_binary();
    options.backend = "cpu";
    options.arena_bytes = 1 << 20;
    auto sandbox = Sandbox::spawn(options, 10000);
    EXPECT_TRUE(sandbox.is_ok()) << sandbox.status().to_string();
    return sandbox.is_ok() ? std::move(sandbox).value() : nullptr;
  }

  static int64_t load(Sandbox& sandbox, const std::string& kernel) {
    auto reply = sandbox.call({{"op", "load"}, {"path", paths_[kernel]}, {"kernel", kernel}},
                              kCallTimeoutMs);
    EXPECT_TRUE(reply.is_ok()) << reply.status().to_string();
    if (!reply.is_ok()) return -1;
    EXPECT_EQ((*reply)["ok"], true) << reply->dump();
    return reply->value("handle", int64_t{-1});
  }

  // A run request: tensor 0 input at 0 (copied back to `after` 64 KB), tensor 1 output at 128 KB.
  static json run_request(int64_t handle, int64_t scalar, int poison = 0xFF) {
    return {{"op", "run"},
            {"handle", handle},
            {"grid", {1, 1, 1}},
            {"block", {1, 1, 1}},
            {"args", {{{"tensor", 0}}, {{"tensor", 1}}, {{"i64", scalar}}}},
            {"tensors",
             {{{"offset", 0}, {"bytes", kTensorBytes}, {"out", false}, {"after", 64 << 10}},
              {{"offset", 128 << 10}, {"bytes", kTensorBytes}, {"out", true}}}},
            {"poison", poison}};
  }

  static float* floats(Sandbox& sandbox, size_t offset) {
    return reinterpret_cast<float*>(sandbox.arena() + offset);
  }

  static void fill_input(Sandbox& sandbox, size_t offset, float scale) {
    for (int64_t i = 0; i < kN; ++i) floats(sandbox, offset)[i] = scale * static_cast<float>(i) + 1;
  }

  // A fresh sandbox still runs the add kernel correctly (after a crash or timeout).
  static void expect_add_works(Sandbox& sandbox) {
    int64_t handle = load(sandbox, "add");
    fill_input(sandbox, 0, 1.0f);
    fill_input(sandbox, 4096, 2.0f);
    json request = {{"op", "run"}, {"handle", handle}, {"grid", {1, 1, 1}}, {"block", {1, 1, 1}},
                    {"args", {{{"tensor", 0}}, {{"tensor", 1}}, {{"tensor", 2}}, {{"i64", kN}}}},
                    {"tensors",
                     {{{"offset", 0}, {"bytes", kTensorBytes}, {"out", false}, {"after", 64 << 10}},
                      {{"offset", 4096}, {"bytes", kTensorBytes}, {"out", false},
                       {"after", 96 << 10}},
                      {{"offset", 128 << 10}, {"bytes", kTensorBytes}, {"out", true}}}}};
    auto reply = sandbox.call(request, kCallTimeoutMs);
    ASSERT_TRUE(reply.is_ok()) << reply.status().to_string();
    ASSERT_EQ((*reply)["ok"], true) << reply->dump();
    for (int64_t i = 0; i < kN; ++i) {
      ASSERT_EQ(floats(sandbox, 128 << 10)[i], 3.0f * static_cast<float>(i) + 2) << "index " << i;
      ASSERT_EQ(floats(sandbox, 64 << 10)[i], floats(sandbox, 0)[i]) << "index " << i;
      ASSERT_EQ(floats(sandbox, 96 << 10)[i], floats(sandbox, 4096)[i]) << "index " << i;
    }
  }

  inline static testing::TempDir* dir_ = nullptr;
  inline static std::map<std::string, std::string> paths_;  // kernel name -> .so file
  inline static std::string setup_error_;
};

TEST_F(SandboxTest, HelloReportsTheCpuBackend) {
  auto sandbox = spawn();
  ASSERT_NE(sandbox, nullptr);
  EXPECT_TRUE(sandbox->alive());
  EXPECT_EQ(sandbox->backend(), "cpu");
  EXPECT_EQ(sandbox->arch(), "cpu");
  EXPECT_FALSE(sandbox->device_name().empty());
  EXPECT_EQ(sandbox->arena_bytes(), 1u << 20);
  auto reply = sandbox->call({{"op", "hello"}}, kCallTimeoutMs);
  ASSERT_TRUE(reply.is_ok()) << reply.status().to_string();
  EXPECT_EQ((*reply)["backend"], "cpu");
}

TEST_F(SandboxTest, RunsAnAddKernelThroughTheArenaAndCopiesInputsBackUnchanged) {
  auto sandbox = spawn();
  ASSERT_NE(sandbox, nullptr);
  expect_add_works(*sandbox);
}

TEST_F(SandboxTest, InputMutationShowsInTheAfterCopy) {
  auto sandbox = spawn();
  ASSERT_NE(sandbox, nullptr);
  int64_t handle = load(*sandbox, "mutate");
  fill_input(*sandbox, 0, 1.0f);
  auto reply = sandbox->call(run_request(handle, kN), kCallTimeoutMs);
  ASSERT_TRUE(reply.is_ok()) << reply.status().to_string();
  ASSERT_EQ((*reply)["ok"], true) << reply->dump();
  EXPECT_EQ(floats(*sandbox, 0)[0], 1.0f);         // the parent's copy is untouched
  EXPECT_EQ(floats(*sandbox, 64 << 10)[0], 42.0f);  // the device copy shows the mutation
  EXPECT_EQ(floats(*sandbox, 128 << 10)[1], 2.0f);
}

TEST_F(SandboxTest, OutputNeverWrittenKeepsThePoisonPattern) {
  auto sandbox = spawn();
  ASSERT_NE(sandbox, nullptr);
  int64_t handle = load(*sandbox, "lazy");
  std::memset(sandbox->arena() + (128 << 10), 0, kTensorBytes);
  auto reply = sandbox->call(run_request(handle, kN, 0xAB), kCallTimeoutMs);
  ASSERT_TRUE(reply.is_ok()) << reply.status().to_string();
  ASSERT_EQ((*reply)["ok"], true) << reply->dump();
  for (uint64_t i = 0; i < kTensorBytes; ++i) {
    ASSERT_EQ(sandbox->arena()[(128 << 10) + i], 0xAB) << "byte " << i;
  }
}

TEST_F(SandboxTest, InfiniteLoopHitsTheDeadlineAndARespawnedSandboxWorks) {
  auto sandbox = spawn();
  ASSERT_NE(sandbox, nullptr);
  int64_t handle = load(*sandbox, "spin");
  auto start = std::chrono::steady_clock::now();
  auto reply = sandbox->call(run_request(handle, kN), 500);
  double elapsed_ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(reply.is_ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(reply.status().message().find("sandbox phase 'run' exceeded 500 ms; child killed"),
            std::string::npos) << reply.status().message();
  EXPECT_GE(elapsed_ms, 490);
  EXPECT_LT(elapsed_ms, 2500);
  EXPECT_FALSE(sandbox->alive());
  auto again = sandbox->call({{"op", "hello"}}, kCallTimeoutMs);
  EXPECT_EQ(again.status().code(), StatusCode::kUnavailable);

  auto fresh = spawn();
  ASSERT_NE(fresh, nullptr);
  expect_add_works(*fresh);
}

TEST_F(SandboxTest, SegfaultIsUnavailableNamingSignal11AndARespawnedSandboxWorks) {
  auto sandbox = spawn();
  ASSERT_NE(sandbox, nullptr);
  int64_t handle = load(*sandbox, "segv");
  auto reply = sandbox->call(run_request(handle, /*address=*/0), kCallTimeoutMs);
  ASSERT_FALSE(reply.is_ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(reply.status().message().find("killed by signal 11 (Segmentation fault)"),
            std::string::npos) << reply.status().message();
  EXPECT_FALSE(sandbox->alive());
  auto fresh = spawn();
  ASSERT_NE(fresh, nullptr);
  expect_add_works(*fresh);
}

TEST_F(SandboxTest, AbortIsUnavailableNamingSignal6) {
  auto sandbox = spawn();
  ASSERT_NE(sandbox, nullptr);
  int64_t handle = load(*sandbox, "aborts");
  auto reply = sandbox->call(run_request(handle, kN), kCallTimeoutMs);
  ASSERT_FALSE(reply.is_ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(reply.status().message().find("signal 6"), std::string::npos)
      << reply.status().message();
  EXPECT_FALSE(sandbox->alive());
}

TEST_F(SandboxTest, MalformedRequestsGetErrorRepliesAndTheChildGoesOn) {
  auto sandbox = spawn();
  ASSERT_NE(sandbox, nullptr);
  int64_t handle = load(*sandbox, "add");
  json missing_args = run_request(handle, kN);
  missing_args.erase("args");
  json out_of_arena = run_request(handle, kN);
  out_of_arena["tensors"][1]["offset"] = 1 << 20;
  json misspelt = run_request(handle, kN);
  misspelt["poision"] = 1;
  json wrong_arg_count = run_request(handle, kN);  // add takes four arguments
  json malformed_map = run_request(handle, kN);
  malformed_map["args"].push_back({{"tmap", {{"tensor", 0}}}});
  // A well-formed tensor map: the cpu backend has none to encode.
  json map_on_cpu = run_request(handle, kN);
  TensorMapArg map;
  map.dtype = DType::kF32, map.dims = {64}, map.box = {64};
  map_on_cpu["args"].push_back(tensor_map_json(map));
  for (const json& request :
       {json{{"op", "fly"}}, json{{"nop", 1}}, json::array({1, 2}), missing_args, out_of_arena,
        misspelt, wrong_arg_count, malformed_map, map_on_cpu,
        json{{"op", "load"}, {"path", "/nonexistent"}, {"kernel", "k"}},
        json{{"op", "unload"}, {"handle", 999}}}) {
    auto reply = sandbox->call(request, kCallTimeoutMs);
    ASSERT_TRUE(reply.is_ok()) << request.dump() << ": " << reply.status().to_string();
    EXPECT_EQ((*reply)["ok"], false) << request.dump();
    EXPECT_TRUE((*reply)["error"].is_string()) << reply->dump();
    EXPECT_FALSE(reply->contains("fatal")) << reply->dump();
    EXPECT_TRUE(sandbox->alive());
    if (request == map_on_cpu) {
      EXPECT_NE((*reply)["error"].get<std::string>().find("has no tensor maps"), std::string::npos)
          << reply->dump();
    }
  }
  expect_add_works(*sandbox);
}

TEST_F(SandboxTest, TimeReturnsSamplesAndCopiesEachSetsTimedOutputsBack) {
  auto sandbox = spawn();
  ASSERT_NE(sandbox, nullptr);
  int64_t handle = load(*sandbox, "add");
  auto set = [](uint64_t base) {
    return json{{{"offset", base}, {"bytes", kTensorBytes}, {"out", false}},
                {{"offset", base + 4096}, {"bytes", kTensorBytes}, {"out", false}},
                {{"offset", base + 8192}, {"bytes", kTensorBytes}, {"out", true}}};
  };
  for (uint64_t base : {0u, 16384u}) {
    fill_input(*sandbox, base, base == 0 ? 1.0f : 5.0f);
    fill_input(*sandbox, base + 4096, 1.0f);
  }
  json request = {{"op", "time"}, {"handle", handle}, {"grid", {1, 1, 1}}, {"block", {1, 1, 1}},
                  {"args", {{{"tensor", 0}}, {{"tensor", 1}}, {{"tensor", 2}}, {{"i64", kN}}}},
                  {"sets", {set(0), set(16384)}}, {"warmup", 2}, {"min_samples", 6},
                  {"max_samples", 40}, {"max_ms", 3000}, {"target_noise_rel", 0.005},
                  {"flush_l2", false}};
  auto reply = sandbox->call(request, 10000);
  ASSERT_TRUE(reply.is_ok()) << reply.status().to_string();
  ASSERT_EQ((*reply)["ok"], true) << reply->dump();
  const json& samples = (*reply)["samples_us"];
  ASSERT_GE(samples.size(), 6u);
  EXPECT_LE(samples.size(), 40u);
  EXPECT_EQ((*reply)["clocks_mhz"].size(), samples.size());
  for (const json& s : samples) EXPECT_GT(s.get<double>(), 0.0);
  // Without a flush there is no machine probe (its buffer would be read from the cache).
  ASSERT_EQ((*reply)["probes_us"].size(), samples.size());
  for (const json& p : (*reply)["probes_us"]) EXPECT_EQ(p.get<double>(), 0.0);
  // With one, the cpu device reads its probe buffer from memory before every sample.
  request["flush_l2"] = true;
  request["max_samples"] = 8;
  reply = sandbox->call(request, 10000);
  ASSERT_TRUE(reply.is_ok()) << reply.status().to_string();
  ASSERT_EQ((*reply)["ok"], true) << reply->dump();
  ASSERT_EQ((*reply)["probes_us"].size(), (*reply)["samples_us"].size());
  for (const json& p : (*reply)["probes_us"]) EXPECT_GT(p.get<double>(), 0.0) << reply->dump();
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(floats(*sandbox, 8192)[i], 2.0f * static_cast<float>(i) + 2) << "set 0, " << i;
    ASSERT_EQ(floats(*sandbox, 16384 + 8192)[i], 6.0f * static_cast<float>(i) + 2)
        << "set 1, " << i;
  }
}

// Times `kernel` (an add) over two sets at 0 and 16384 (a, b, out at +0, +4096, +8192) and
// returns the reply; the inputs are filled here, differently per set.
json time_two_sets(Sandbox& sandbox, int64_t handle, bool rotate) {
  auto set = [](uint64_t base) {
    return json{{{"offset", base}, {"bytes", kTensorBytes}, {"out", false}},
                {{"offset", base + 4096}, {"bytes", kTensorBytes}, {"out", false}},
                {{"offset", base + 8192}, {"bytes", kTensorBytes}, {"out", true}}};
  };
  for (uint64_t base : {0u, 16384u}) {
    for (int64_t i = 0; i < kN; ++i) {
      reinterpret_cast<float*>(sandbox.arena() + base)[i] = (base == 0 ? 1.0f : 5.0f) * i + 1;
      reinterpret_cast<float*>(sandbox.arena() + base + 4096)[i] = 1.0f;
    }
  }
  json request = {{"op", "time"}, {"handle", handle}, {"grid", {1, 1, 1}}, {"block", {1, 1, 1}},
                  {"args", {{{"tensor", 0}}, {{"tensor", 1}}, {{"tensor", 2}}, {{"i64", kN}}}},
                  {"sets", {set(0), set(16384)}}, {"warmup", 2}, {"min_samples", 6},
                  {"max_samples", 6}, {"max_ms", 3000}, {"flush_l2", false},
                  {"rotate_contents", rotate}};
  auto reply = sandbox.call(request, 10000);
  EXPECT_TRUE(reply.is_ok()) << reply.status().to_string();
  return reply.is_ok() ? *reply : json();
}

// Whether group g's output (at 16384 * g + 8192) is exactly a + b of set `contents`.
bool output_matches_set(Sandbox& sandbox, size_t group, size_t contents) {
  const auto* a = reinterpret_cast<const float*>(sandbox.arena() + 16384 * contents);
  const auto* b = reinterpret_cast<const float*>(sandbox.arena() + 16384 * contents + 4096);
  const auto* out = reinterpret_cast<const float*>(sandbox.arena() + 16384 * group + 8192);
  for (int64_t i = 0; i < kN; ++i) {
    if (out[i] != a[i] + b[i]) return false;
  }
  return true;
}

TEST_F(SandboxTest, RotatedContentsGiveEachPointerFreshInputsAcrossLaunches) {
  // Without rotation each pointer always sees the same contents: the replay looks right.
  auto plain = spawn();
  ASSERT_NE(plain, nullptr);
  json reply = time_two_sets(*plain, load(*plain, "replay"), false);
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  EXPECT_EQ(reply["contents_of_group"], json({0, 1}));
  EXPECT_TRUE(output_matches_set(*plain, 0, 0));
  EXPECT_TRUE(output_matches_set(*plain, 1, 1));

  // With rotation the honest kernel matches the set each group held last, and that set is not
  // the group's own (the loop ends on such a round), so the replay is caught in every group.
  for (const char* kernel : {"add", "replay"}) {
    auto sandbox = spawn();
    ASSERT_NE(sandbox, nullptr);
    reply = time_two_sets(*sandbox, load(*sandbox, kernel), true);
    ASSERT_EQ(reply["ok"], true) << kernel << ": " << reply.dump();
    EXPECT_EQ(reply["samples_us"].size() % 2, 0u) << reply.dump();
    const json& contents = reply["contents_of_group"];
    ASSERT_EQ(contents, json({1, 0})) << kernel << ": " << reply.dump();
    for (size_t g = 0; g < 2; ++g) {
      EXPECT_EQ(output_matches_set(*sandbox, g, contents[g].get<size_t>()),
                std::string(kernel) == "add")
          << kernel << ", group " << g;
    }
  }
}

TEST_F(SandboxTest, RotatingContentsNeedsTwoSets) {
  auto sandbox = spawn();
  ASSERT_NE(sandbox, nullptr);
  json request = {{"op", "time"}, {"handle", load(*sandbox, "add")}, {"grid", {1, 1, 1}},
                  {"block", {1, 1, 1}},
                  {"args", {{{"tensor", 0}}, {{"tensor", 1}}, {{"tensor", 2}}, {{"i64", kN}}}},
                  {"sets",
                   {{{{"offset", 0}, {"bytes", kTensorBytes}, {"out", false}},
                     {{"offset", 4096}, {"bytes", kTensorBytes}, {"out", false}},
                     {{"offset", 8192}, {"bytes", kTensorBytes}, {"out", true}}}}},
                  {"rotate_contents", true}};
  auto reply = sandbox->call(request, kCallTimeoutMs);
  ASSERT_TRUE(reply.is_ok()) << reply.status().to_string();
  EXPECT_EQ((*reply)["ok"], false);
  EXPECT_NE((*reply)["error"].get<std::string>().find("rotate_contents"), std::string::npos)
      << reply->dump();
}

TEST_F(SandboxTest, ExternallyKilledChildIsUnavailableWithoutHanging) {
  auto sandbox = spawn();
  ASSERT_NE(sandbox, nullptr);
  ASSERT_EQ(kill(sandbox->pid(), SIGKILL), 0);
  auto reply = sandbox->call({{"op", "hello"}}, kCallTimeoutMs);
  ASSERT_FALSE(reply.is_ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(reply.status().message().find("signal 9"), std::string::npos)
      << reply.status().message();

  auto other = spawn();
  ASSERT_NE(other, nullptr);
  other->kill_child();
  EXPECT_FALSE(other->alive());
  EXPECT_EQ(other->call({{"op", "hello"}}, kCallTimeoutMs).status().code(),
            StatusCode::kUnavailable);
}

TEST_F(SandboxTest, ExitRequestEndsTheChild) {
  auto sandbox = spawn();
  ASSERT_NE(sandbox, nullptr);
  auto reply = sandbox->call({{"op", "exit"}}, kCallTimeoutMs);
  ASSERT_TRUE(reply.is_ok()) << reply.status().to_string();
  EXPECT_EQ((*reply)["ok"], true);
  EXPECT_FALSE(sandbox->alive());
}

TEST_F(SandboxTest, SpawnFailsClearlyForAMissingBinaryOrAnUnknownBackend) {
  SandboxOptions options;
  options.kiln_binary = "/nonexistent/kiln";
  auto missing = Sandbox::spawn(options, 5000);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(missing.status().message().find("exec /nonexistent/kiln"), std::string::npos)
      << missing.status().message();

  options.kiln_binary = testing::kiln_binary();
  options.backend = "tpu";
  auto unknown = Sandbox::spawn(options, 5000);
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("unknown backend 'tpu'"), std::string::npos)
      << unknown.status().message();
}

}  // namespace
}  // namespace kiln::eval
