// `kiln import-triton` through the real `kiln` binary and the real Triton (the Python that
// scripts/bootstrap sets up, or $KILN_TRITON_PYTHON), without a GPU and without torch: small
// kernel files whose launchers pass tensor-like objects (data_ptr(), dtype, shape, stride()) are
// imported, and the folders they become are checked as any target is (`kiln targets --check`
// compiles the seed and every template configuration; a cpu seed added by hand shows that the
// skeleton reference fails verification until it is written, and passes once it is). Files that
// never launch the kernel, fail at import, hang or use @triton.heuristics fail with a message
// that says so, and write no folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "evaluator/triton/triton_compiler.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using kiln::testing::kiln_binary;
using kiln::testing::run_command;

// What Triton's launcher reads of a tensor, and no more: no torch, no GPU.
constexpr const char* kTensorLike = R"(class Tensor:
    def __init__(self, shape, dtype, strides=None):
        self.shape, self.dtype = tuple(shape), dtype
        if strides is None:
            strides, n = [], 1
            for e in reversed(self.shape):
                strides.insert(0, n)
                n *= e
        self.strides = tuple(strides)

    def data_ptr(self):
        return 0

    def stride(self, dim=None):
        return self.strides if dim is None else self.strides[dim]

    @property
    def T(self):
        return Tensor(self.shape[::-1], self.dtype, self.strides[::-1])
)";

// y = x * w * alpha per row, autotuned over BLOCK and the warps; the store is in a helper.
constexpr const char* kScaleRows = R"(import triton
import triton.language as tl
from tensor_like import Tensor

ACC = tl.float32


@triton.jit
def store_row(ptr, values, mask):
    tl.store(ptr, values.to(ptr.dtype.element_ty), mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=2),
                          triton.Config({"BLOCK": 256}, num_warps=4),
                          triton.Config({"BLOCK": 512}, num_warps=4, num_stages=2)], key=["N"])
@triton.jit
def scale_rows(x_ptr, w_ptr, y_ptr, M, N, stride_xm, stride_ym, alpha, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_xm + cols, mask=mask, other=0.0).to(ACC)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(ACC)
    store_row(y_ptr + row * stride_ym + cols, x * w * alpha, mask)


def scale(x, w, alpha):
    M, N = x.shape
    y = Tensor(x.shape, x.dtype)
    grid = lambda meta: (M, triton.cdiv(N, meta["BLOCK"]))
    scale_rows[grid](x, w, y, M, N, x.stride(0), y.stride(0), alpha)
    return y


if __name__ == "__main__":
    scale(Tensor((300, 1000), "float32"), Tensor((1000,), "float32"), 0.5)
)";

// The cpu seed that the verification test adds by hand (the import writes Triton kernels only).
constexpr const char* kScaleRowsCpu = R"(extern "C" void scale_seed(const T* x, const T* w, T* y,
                                   int64_t M, int64_t N, float alpha) {
  for (int64_t r = 0; r < M; ++r)
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = x[r * N + c] * w[c] * alpha;
}
)";

constexpr const char* kScaleRowsReference = R"(#include <cstdint>
extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double* scalars) {
  const int64_t M = dims[0], N = dims[1];
  for (int64_t r = 0; r < M; ++r)
    for (int64_t c = 0; c < N; ++c) out[0][r * N + c] = in[0][r * N + c] * in[1][c] * scalars[0];
}
)";

// A plain @triton.jit kernel whose launcher computes the grid as a number.
constexpr const char* kVectorAdd = R"(import triton
import triton.language as tl
from tensor_like import Tensor


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(output_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) +
             tl.load(y_ptr + offsets, mask=mask), mask=mask)


if __name__ == "__main__":
    x, y, out = (Tensor((98432,), "fp16") for _ in range(3))
    add_kernel[(triton.cdiv(98432, 1024),)](x, y, out, 98432, BLOCK_SIZE=1024)
)";

// A matmul with strides, a transposed operand and a semantic string constexpr.
constexpr const char* kMatmul = R"(import triton
import triton.language as tl
from tensor_like import Tensor


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
       stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ACT: tl.constexpr):
    pid = tl.program_id(0)
    rm = (pid // tl.cdiv(N, BN)) * BM + tl.arange(0, BM)
    rn = (pid % tl.cdiv(N, BN)) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    if ACT == "relu":
        acc = tl.maximum(acc, 0.0)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


if __name__ == "__main__":
    a, b = Tensor((512, 256), "torch.float16"), Tensor((384, 256), "torch.float16").T
    c = Tensor((512, 384), "torch.float16")
    grid = lambda meta: (triton.cdiv(512, meta["BM"]) * triton.cdiv(384, meta["BN"]),)
    mm[grid](a, b, c, 512, 384, 256, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
             c.stride(0), c.stride(1), BM=64, BN=64, BK=32, ACT="relu")
)";

class ImportTritonCli : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<eval::TritonCompiler>> triton = eval::TritonCompiler::create();
    if (!triton.is_ok()) GTEST_SKIP() << "no Python with Triton: " << triton.status().message();
    dir_.write("tensor_like.py", kTensorLike);
  }

  // Runs `kiln import-triton FILE --kernel KERNEL --out <dir>/mine/<folder> EXTRA`.
  int import(const std::string& file, const std::string& kernel, const std::string& folder,
             const std::string& extra, std::string* text) {
    return run_command(kiln_binary() + " import-triton " + dir_.file(file) + " --kernel " + kernel +
                           " --out " + mine(folder) + " " + extra + " 2>&1",
                       text);
  }
  std::string mine(const std::string& folder) const { return dir_.file("mine/" + folder); }

  testing::TempDir dir_;
};

TEST_F(ImportTritonCli, AnAutotunedKernelBecomesATargetThatTargetsCheckAccepts) {
  dir_.write("scale.py", kScaleRows);
  std::string text;
  ASSERT_EQ(import("scale.py", "scale_rows", "scale_rows", "", &text), 0) << text;
  EXPECT_NE(text.find("the seed compiles"), std::string::npos) << text;
  EXPECT_NE(text.find("kiln targets --check " + mine("scale_rows") + " --backend triton"),
            std::string::npos)
      << text;

  const nlohmann::json t = testing::read_json(mine("scale_rows") + "/target.json");
  EXPECT_EQ(t["dims"], nlohmann::json({"M", "N"})) << t.dump(2);
  const nlohmann::json args = t["args"];
  ASSERT_EQ(args.size(), 4u) << t.dump(2);
  EXPECT_EQ(args[0]["role"], "input");
  EXPECT_EQ(args[1]["shape"], nlohmann::json({"N"}));
  EXPECT_EQ(args[2]["role"], "output") << "y is stored to, through the helper store_row";
  EXPECT_EQ(args[3]["role"], "scalar");
  EXPECT_EQ(args[3]["value"], 0.5);
  EXPECT_EQ(t["dtypes"], nlohmann::json({"f32"}));
  EXPECT_EQ(t["shapes"]["benchmark"], nlohmann::json({{"M", 300}, {"N", 1000}}));
  // Smaller than the launch's, and M != N, so that a kernel or reference that mixes them up fails.
  EXPECT_EQ(t["shapes"]["smoke"], nlohmann::json::parse(R"([{"M": 64, "N": 56}])"));
  EXPECT_EQ(t["shapes"]["edge"][0], nlohmann::json({{"M", 1}, {"N", 1}}));
  const nlohmann::json triton = t["backends"]["triton"];
  EXPECT_EQ(triton["seed"]["grid"], nlohmann::json({"M", "cdiv(N, BLOCK)"}));
  EXPECT_EQ(triton["seed"]["defines"]["BLOCK"], "128");
  EXPECT_EQ(triton["template"]["params"]["BLOCK"], nlohmann::json({128, 256, 512}));
  EXPECT_EQ(triton["template"]["constraints"].size(), 1u) << "exactly the three configs";
  const std::string module = testing::read_file(mine("scale_rows") + "/kernel_triton.py");
  EXPECT_NE(module.find("def kiln_scale_rows(x_ptr, w_ptr, y_ptr, M, N, alpha, BLOCK: "
                        "tl.constexpr):\n    scale_rows(x_ptr, w_ptr, y_ptr, M, N, N, N, alpha, "
                        "BLOCK)"),
            std::string::npos)
      << module;
  EXPECT_NE(module.find("ACC = tl.float32"), std::string::npos) << module;
  EXPECT_NE(module.find("def store_row("), std::string::npos) << module;
  EXPECT_EQ(module.find("tensor_like"), std::string::npos) << "only what the kernel uses";

  ASSERT_EQ(run_command(kiln_binary() + " targets --check " + mine("scale_rows") +
                            " --backend triton --cache-dir " + dir_.file("cache") + " 2>&1",
                        &text),
            0)
      << text;
  EXPECT_NE(text.find("seed and 3 template configurations x 1 dtypes compiled"), std::string::npos)
      << text;
  EXPECT_NE(text.find("0 problem(s)"), std::string::npos) << text;
}

TEST_F(ImportTritonCli, TheSkeletonReferenceFailsVerificationUntilItIsWritten) {
  dir_.write("scale.py", kScaleRows);
  std::string text;
  ASSERT_EQ(import("scale.py", "scale_rows", "scale_rows", "", &text), 0) << text;
  // A cpu seed beside the Triton kernels, so that verification runs here without a GPU.
  const std::string folder = mine("scale_rows");
  nlohmann::json t = testing::read_json(folder + "/target.json");
  t["backends"]["cpu"] = {{"dtypes", {"f32"}},
                          {"seed", {{"source", "seed_cpu.cpp"}, {"kernel", "scale_seed"}}}};
  std::ofstream(folder + "/target.json") << t.dump(2);
  std::ofstream(folder + "/seed_cpu.cpp") << kScaleRowsCpu;
  const std::string eval =
      kiln_binary() + " eval " + folder + " --backend cpu --cache-dir " + dir_.file("cache");
  EXPECT_EQ(run_command(eval + " 2>&1", &text), 1) << text;
  EXPECT_NE(text.find("still the skeleton"), std::string::npos) << text;
  EXPECT_NE(text.find("wrong_answer"), std::string::npos) << text;

  std::ofstream(folder + "/reference.cpp") << kScaleRowsReference;
  EXPECT_EQ(run_command(eval + " 2>&1", &text), 0) << text;
  EXPECT_NE(text.find("result: verified"), std::string::npos) << text;
}

TEST_F(ImportTritonCli, APlainKernelsNumericGridBecomesAnExpressionOfItsDimAndBlock) {
  dir_.write("vadd.py", kVectorAdd);
  std::string text;
  ASSERT_EQ(import("vadd.py", "add_kernel", "vadd", "", &text), 0) << text;
  const nlohmann::json t = testing::read_json(mine("vadd") + "/target.json");
  EXPECT_EQ(t["dims"], nlohmann::json({"n_elements"})) << t.dump(2);
  EXPECT_EQ(t["dtypes"], nlohmann::json({"f16"}));
  const nlohmann::json triton = t["backends"]["triton"];
  EXPECT_EQ(triton["seed"]["grid"], nlohmann::json({"cdiv(n_elements, BLOCK_SIZE)"}));
  EXPECT_EQ(triton["template"]["params"]["BLOCK_SIZE"], nlohmann::json({512, 1024, 2048}));
  EXPECT_EQ(triton["template"]["params"]["num_warps"], nlohmann::json({2, 4, 8}));
  EXPECT_FALSE(triton["template"].contains("constraints"));
}

TEST_F(ImportTritonCli, StridesOfATransposedOperandAreProductsOfDims) {
  dir_.write("mm.py", kMatmul);
  std::string text;
  ASSERT_EQ(import("mm.py", "mm", "mm", "", &text), 0) << text;
  EXPECT_NE(text.find("permuted view"), std::string::npos) << text;
  const nlohmann::json t = testing::read_json(mine("mm") + "/target.json");
  EXPECT_EQ(t["dims"], nlohmann::json({"M", "K", "N"})) << t.dump(2);
  EXPECT_EQ(t["args"][1]["shape"], nlohmann::json({"N", "K"})) << "b's storage: B[N, K]";
  EXPECT_EQ(t["backends"]["triton"]["seed"]["grid"], nlohmann::json({"cdiv(M, BM) * cdiv(N, BN)"}));
  const std::string module = testing::read_file(mine("mm") + "/kernel_triton.py");
  // a[M, K]: K, 1; b = B.T with B[N, K]: 1, K; c[M, N]: N, 1; ACT stays "relu".
  EXPECT_NE(module.find("def kiln_mm(a_ptr, b_ptr, c_ptr, M, K, N, BM: tl.constexpr, BN: "
                        "tl.constexpr, BK: tl.constexpr):\n"
                        "    mm(a_ptr, b_ptr, c_ptr, M, N, K, K, 1, 1, K, N, 1, BM, BN, BK, "
                        "'relu')"),
            std::string::npos)
      << module;
}

TEST_F(ImportTritonCli, AFileThatNeverLaunchesTheKernelFailsAndWritesNothing) {
  dir_.write("quiet.py", std::string(kVectorAdd).substr(0, std::string(kVectorAdd).find("if __")) +
                             "print('nothing launched here')\n");
  std::string text;
  EXPECT_EQ(import("quiet.py", "add_kernel", "quiet", "", &text), 1) << text;
  EXPECT_NE(text.find("never launched the kernel"), std::string::npos) << text;
  EXPECT_NE(text.find("nothing launched here"), std::string::npos) << "the file's output";
  EXPECT_EQ(import("quiet.py", "sub_kernel", "quiet", "", &text), 1) << text;
  EXPECT_NE(text.find("defines no @triton.jit function 'sub_kernel' (it defines: add_kernel)"),
            std::string::npos)
      << text;
  EXPECT_FALSE(fs::exists(mine("quiet")));
}

TEST_F(ImportTritonCli, AFileThatFailsAtImportShowsItsTraceback) {
  dir_.write("broken.py", "import triton\nimport a_module_nobody_has\n");
  std::string text;
  EXPECT_EQ(import("broken.py", "k", "broken", "", &text), 1) << text;
  EXPECT_NE(text.find("failed before it launched 'k'"), std::string::npos) << text;
  EXPECT_NE(text.find("No module named 'a_module_nobody_has'"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(mine("broken")));
}

TEST_F(ImportTritonCli, AFileThatHangsIsStoppedAtItsDeadline) {
  dir_.write("hang.py", "import time\nwhile True:\n    time.sleep(1)\n");
  std::string text;
  EXPECT_EQ(import("hang.py", "k", "hang", "--timeout 2", &text), 1) << text;
  EXPECT_NE(text.find("ran past the 2 s deadline"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(mine("hang")));
}

TEST_F(ImportTritonCli, HeuristicsAreRefusedWithTheReason) {
  std::string heuristics = kVectorAdd;
  heuristics.replace(heuristics.find("@triton.jit"), 0,
                     "@triton.heuristics({'EVEN': lambda a: a['n_elements'] % 1024 == 0})\n");
  heuristics.replace(heuristics.find("BLOCK_SIZE: tl.constexpr)"), 0, "EVEN: tl.constexpr, ");
  dir_.write("heur.py", heuristics);
  std::string text;
  EXPECT_EQ(import("heur.py", "add_kernel", "heur", "", &text), 1) << text;
  EXPECT_NE(text.find("wrapped in @triton.heuristics (EVEN)"), std::string::npos) << text;
}

TEST_F(ImportTritonCli, AReimportKeepsAWrittenReferenceAndNeedsForce) {
  dir_.write("vadd.py", kVectorAdd);
  std::string text;
  ASSERT_EQ(import("vadd.py", "add_kernel", "vadd", "", &text), 0) << text;
  EXPECT_EQ(import("vadd.py", "add_kernel", "vadd", "", &text), 2) << text;
  EXPECT_NE(text.find("--force"), std::string::npos) << text;
  const std::string mine_ref =
      "// mine\n#include <cstdint>\nextern \"C\" void kiln_reference(\n"
      "    const double* const*, double* const*, const int64_t*,\n"
      "    const double*) {}\n";
  std::ofstream(mine("vadd") + "/reference.cpp") << mine_ref;
  ASSERT_EQ(import("vadd.py", "add_kernel", "vadd", "--force", &text), 0) << text;
  EXPECT_EQ(testing::read_file(mine("vadd") + "/reference.cpp"), mine_ref);
  EXPECT_NE(text.find("kept the folder's own reference.cpp"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln
