// The static scan of Triton sources: what may be imported, which names are refused, and that
// comments and string contents neither trigger nor hide findings (f-strings are code).
#include "evaluator/triton/python_scan.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "evaluator/source_scan.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

std::vector<std::string> rules(std::string_view source) {
  std::vector<std::string> r;
  for (const ScanFinding& f : scan_python(source))
    r.push_back(f.rule + "@" + std::to_string(f.line));
  return r;
}

using V = std::vector<std::string>;

TEST(PythonScan, AcceptsTritonMathAndEveryBuiltInTritonKernel) {
  EXPECT_EQ(rules("import triton\nimport triton.language as tl\nimport math\n"
                  "from triton.language.extra import libdevice\nfrom triton import language\n"),
            V{});
  for (const char* file : {"seed_triton.py", "template_triton.py"}) {
    std::ifstream in(testing::builtin_targets_dir() + "/rmsnorm/" + file);
    std::stringstream text;
    text << in.rdbuf();
    ASSERT_FALSE(text.str().empty()) << file;
    EXPECT_EQ(rules(text.str()), V{}) << file;
  }
}

TEST(PythonScan, RefusesEveryOtherImportWhereverItStands) {
  EXPECT_EQ(rules("import os\n"), V{"import:os@1"});
  EXPECT_EQ(rules("import triton, subprocess as sp\n"), V{"import:subprocess@1"});
  EXPECT_EQ(rules("from os import path\n"), V{"import:os@1"});
  EXPECT_EQ(rules("x = 1; import ctypes\n"), V{"import:ctypes@1"});
  EXPECT_EQ(rules("def f():\n    import socket\n"), V{"import:socket@2"});
  EXPECT_EQ(rules("import tritonx\n"), V{"import:tritonx@1"});
  EXPECT_FALSE(rules("from . import sibling\n").empty());
  EXPECT_EQ(rules("import (\n"), V{"import:?@1"});
}

TEST(PythonScan, RefusesTheInterpretersMachineryAndDunderNames) {
  EXPECT_EQ(rules("exec('x')\n"), V{"identifier:exec@1"});
  EXPECT_EQ(rules("f = eval\n"), V{"identifier:eval@1"});
  EXPECT_EQ(rules("open('/etc/passwd')\n"), V{"identifier:open@1"});
  EXPECT_EQ(rules("getattr(tl, 'x')\n"), V{"identifier:getattr@1"});
  EXPECT_EQ(rules("m = __import__('os')\n"), V{"identifier:__import__@1"});
  EXPECT_EQ(rules("c = ().__class__.__base__\n"),
            (V{"identifier:__class__@1", "identifier:__base__@1"}));
  EXPECT_EQ(rules("b = __builtins__\n"), V{"identifier:__builtins__@1"});
}

TEST(PythonScan, CommentsAndStringsNeitherTriggerNorHide) {
  EXPECT_EQ(
      rules("# import os; exec(x)\nx = 'import os; open(f)'\ny = \"\"\"eval\n__import__\"\"\"\n"),
      V{});
  // Lines after a multi-line string keep their numbers.
  EXPECT_EQ(rules("s = '''a\nb\nc'''\nexec(s)\n"), V{"identifier:exec@4"});
  // An f-string's {expressions} run: they are code.
  EXPECT_EQ(rules("s = f\"{__import__('os').system('x')}\"\n"), V{"identifier:__import__@1"});
  EXPECT_EQ(rules("s = rb'\\x00' + b\"exec\"\n"), V{});
  // A line continuation does not start a statement.
  EXPECT_EQ(rules("x = 1 + \\\n  2\nimport os\n"), V{"import:os@3"});
  EXPECT_EQ(rules("s = 'never closed\nexec(x)\n"), V{"syntax:unterminated-string@1"});
}

TEST(PythonScan, IsTheTritonBackendsSourceScan) {
  EXPECT_EQ(scan_source("import os\n", "triton").size(), 1u);
  EXPECT_EQ(scan_source("import os\n", "triton")[0].rule, "import:os");
}

}  // namespace
}  // namespace kiln::eval
