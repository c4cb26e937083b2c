// Inputs found by trying to break the `kiln` binary as a hostile user would: each one crashed it,
// aborted it, ran something other than what was asked, or left files behind. Each now gets a
// clear error (exit code 2 for bad usage) and changes nothing.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::kiln_binary;
using testing::run_command;

// `--name=` with nothing after it took the next argument as its value (`export --to= --no-verify`
// wrote a folder named --no-verify); an option given an empty value (an unset shell variable)
// was taken as not given, so `--source ''` evaluated the seed.
TEST(BadInput, AnOptionWithoutAValueIsRefusedNotFilledFromTheNextArgument) {
  testing::TempDir dir;
  std::string text;
  const std::string eval =
      kiln_binary() + " eval reduce --backend cpu --no-time --cache-dir " + dir.file("cache") + " ";
  EXPECT_EQ(run_command(eval + "--dtype= --json 2>&1", &text), 2) << text;
  EXPECT_NE(text.find("--dtype= gives the option no value"), std::string::npos) << text;
  EXPECT_EQ(run_command(eval + "--source '' 2>&1", &text), 2) << text;
  EXPECT_NE(text.find("--source was given an empty value"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(dir.file("cache"))) << "nothing ran: " << text;
}

TEST(BadInput, WhatOneCommandWouldStartIsBounded) {
  testing::TempDir dir;
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " targets --check --backend cpu --jobs 100000 reduce 2>&1",
                        &text),
            2)
      << text;  // was: std::terminate from the 100000th thread
  EXPECT_NE(text.find("--jobs"), std::string::npos) << text;
  for (const char* command :
       {" run --evaluators 100000", " run --islands 5000", " coordinator --in-flight 1000000"}) {
    EXPECT_EQ(run_command(kiln_binary() + command + " --backend cpu --targets reduce --out " +
                              dir.file("run") + " 2>&1",
                          &text),
              2)
        << command << ": " << text;
    EXPECT_NE(text.find("at most"), std::string::npos) << command << ": " << text;
  }
  EXPECT_FALSE(fs::exists(dir.file("run")));
}

TEST(BadInput, EveryCommandRefusesABackendItDoesNotKnow) {
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " targets --check --backend bogus reduce 2>&1", &text), 2)
      << text;  // was: "0 kernel(s) checked: 0 problem(s)", exit 0
  EXPECT_NE(text.find("bogus"), std::string::npos) << text;
  EXPECT_EQ(run_command(kiln_binary() + " eval reduce --backend CPU 2>&1", &text), 2) << text;
  EXPECT_NE(text.find("cuda,cpu,triton"), std::string::npos) << text;
  EXPECT_EQ(run_command(kiln_binary() + " eval rmsnorm --backend cpu --dtype f16 2>&1", &text), 2)
      << text;  // was: result internal_error, exit 1
  EXPECT_NE(text.find("--dtype f16: the cpu kernels of rmsnorm take f32"), std::string::npos)
      << text;
}

// A target whose target.json names another target was listed under a name no lookup finds, and
// evaluated when its folder's name was asked for.
TEST(BadInput, ATargetMustCarryItsFoldersName) {
  testing::TempDir dir;
  const std::string mine = dir.file("mine");
  testing::copy_builtin_target("reduce", mine,
                               [](nlohmann::json& spec) { spec["name"] = "other"; });
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " targets --targets-dir " + mine + " 2>&1", &text), 2)
      << text;
  EXPECT_NE(text.find("'other' is not its folder's name 'reduce'"), std::string::npos) << text;
  EXPECT_EQ(run_command(kiln_binary() + " eval reduce --backend cpu --no-time --targets-dir " +
                            mine + " 2>&1",
                        &text),
            2)
      << text;
  EXPECT_NE(text.find("'other' is not its folder's name 'reduce'"), std::string::npos) << text;
}

TEST(BadInput, ASourceThatIsAFolderEmptyOrFullOfEscapesIsSaidPlainly) {
  testing::TempDir dir;
  const std::string eval = kiln_binary() + " eval reduce --backend cpu --no-time --cache-dir " +
                           dir.file("cache") + " --source ";
  std::string text;
  EXPECT_EQ(run_command(eval + dir.path() + " 2>&1", &text), 2) << text;
  EXPECT_NE(text.find("is a folder; name the kernel's source file"), std::string::npos) << text;
  // An empty file defines no entry point (it was said to "import" it).
  std::ofstream(dir.file("empty.cpp")) << "";
  EXPECT_EQ(run_command(eval + dir.file("empty.cpp") + " 2>&1", &text), 1) << text;
  EXPECT_NE(text.find("does not define the kernel's entry point 'reduce_seed'"), std::string::npos)
      << text;
  // Control characters in the source reach the terminal escaped, not raw.
  std::ofstream(dir.file("esc.cpp")) << "#include <\x1b[31mred\x07>\n";
  EXPECT_EQ(run_command(eval + dir.file("esc.cpp") + " 2>&1", &text), 1) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  EXPECT_NE(text.find("\\x1b[31mred\\x07"), std::string::npos) << text;
}

// A folder with a space in its path: the private Redis's config took the path as two words and
// redis-server refused to start, so no run could start there. Then the run's records, changed by
// hand to hold the wrong types, and a summary that is a folder: each an error that names the
// file, where they were uncaught exceptions.
TEST(BadInput, ARunInAPathWithASpaceAndItsRecordsChangedByHand) {
  testing::TempDir dir;
  const std::string run = dir.file("my runs/first run");
  std::string text;
  // Its output read by a reader that leaves after one line: the run finishes all the same (it
  // died of SIGPIPE, leaving its Redis running and nothing written).
  ASSERT_EQ(
      run_command("{ " + kiln_binary() +
                      " run --backend cpu --targets reduce --budget 5s --patience 2 " +
                      "--cache-dir " + dir.file("cache") + " --out '" + run + "' 2>" +
                      dir.file("run.err") + "; echo $? > " + dir.file("run.rc") + "; } | head -1",
                  &text),
      0)
      << text;
  EXPECT_EQ(testing::read_file(dir.file("run.rc")), "0\n")
      << testing::read_file(dir.file("run.err"));
  ASSERT_TRUE(fs::exists(run + "/best/reduce.json")) << testing::read_file(dir.file("run.err"));
  ASSERT_TRUE(fs::exists(run + "/summary.json")) << testing::read_file(dir.file("run.err"));

  const std::string q = "'" + run + "'";
  EXPECT_EQ(run_command(kiln_binary() + " export reduce --out " + q + " --to " +
                            dir.file("exported") + " --no-verify 2>&1",
                        &text),
            0)
      << text;
  nlohmann::json record = testing::read_json(dir.file("exported/kiln-export.json"));
  nlohmann::json outside = record;  // a file named outside the export (it read /dev/zero)
  outside["files"] = {{"../../../../dev/zero", "x"}};
  std::ofstream(dir.file("exported/kiln-export.json")) << outside.dump(2);
  EXPECT_EQ(run_command(kiln_binary() + " verify " + dir.file("exported") + " 2>&1", &text), 2)
      << text;
  EXPECT_NE(text.find("lists a file outside the export: '../../../../dev/zero'"), std::string::npos)
      << text;
  nlohmann::json other = record;  // a dtype the kernels do not take: was internal_error, exit 1
  other["dtype"] = "f64";
  std::ofstream(dir.file("exported/kiln-export.json")) << other.dump(2);
  EXPECT_EQ(run_command(kiln_binary() + " verify " + dir.file("exported") + " 2>&1", &text), 2)
      << text;
  EXPECT_NE(text.find("dtype f64 is not one the cpu kernels of reduce take"), std::string::npos)
      << text;
  if (record["kernel"]["from"] == "template") {  // values outside the space: it ran, and crashed
    other = record;
    other["params"]["UNROLL"] = "999999999";
    std::ofstream(dir.file("exported/kiln-export.json")) << other.dump(2);
    EXPECT_EQ(run_command(kiln_binary() + " verify " + dir.file("exported") + " 2>&1", &text), 2)
        << text;
    EXPECT_NE(text.find("params are not a configuration of the template: UNROLL=999999999"),
              std::string::npos)
        << text;
  }
  record["dtype"] = 5;
  std::ofstream(dir.file("exported/kiln-export.json")) << record.dump(2);
  EXPECT_EQ(run_command(kiln_binary() + " verify " + dir.file("exported") + " 2>&1", &text), 2)
      << text;
  EXPECT_NE(text.find("kiln-export.json: a field does not hold what kiln writes"),
            std::string::npos)
      << text;

  // A report does not overwrite the run's own files, nor a fifo (it became a regular file).
  const std::string rows = testing::read_file(run + "/results.jsonl");
  EXPECT_EQ(run_command(kiln_binary() + " report " + q + " --out '" + run + "/results.jsonl' 2>&1",
                        &text),
            2)
      << text;
  EXPECT_NE(text.find("the run's own files are not overwritten"), std::string::npos) << text;
  EXPECT_EQ(testing::read_file(run + "/results.jsonl"), rows);
  ASSERT_EQ(run_command("mkfifo " + dir.file("fifo"), &text), 0) << text;
  EXPECT_EQ(
      run_command(kiln_binary() + " report " + q + " --out " + dir.file("fifo") + " 2>&1", &text),
      2)
      << text;
  EXPECT_TRUE(fs::is_fifo(dir.file("fifo")));
  // Output that cannot be written is a failure, said.
  EXPECT_EQ(
      run_command("(" + kiln_binary() + " report " + q + " --format md > /dev/full) 2>&1", &text),
      1)
      << text;
  EXPECT_NE(text.find("writing the output failed"), std::string::npos) << text;
  EXPECT_EQ(run_command(kiln_binary() + " export reduce --out " + q + " --candidate 3 --to " +
                            dir.file("short") + " 2>&1",
                        &text),
            2)
      << text;  // one hex digit matched the best, and could have matched others
  EXPECT_NE(text.find("give at least 8 hex digits"), std::string::npos) << text;

  nlohmann::json best = testing::read_json(run + "/best/reduce.json");
  best["source"] = 5;
  std::ofstream(run + "/best/reduce.json") << best.dump(2);
  EXPECT_EQ(run_command(kiln_binary() + " export reduce --out " + q + " --to " + dir.file("again") +
                            " --no-verify 2>&1",
                        &text),
            2)
      << text;
  EXPECT_NE(text.find("reduce.json: a field does not hold what kiln writes"), std::string::npos)
      << text;
  EXPECT_FALSE(fs::exists(dir.file("again"))) << text;

  fs::remove(run + "/summary.json");
  fs::create_directories(run + "/summary.json");
  EXPECT_EQ(run_command(kiln_binary() + " status --out " + q + " 2>&1", &text), 2) << text;
  EXPECT_NE(text.find("a folder, where a JSON file was expected"), std::string::npos) << text;
}

TEST(BadInput, ARunWhoseLlmConfigCannotBeReadStartsNothing) {
  testing::TempDir dir;
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " run --backend cpu --targets reduce --llm " +
                            dir.file("nope.json") + " --out " + dir.file("run") + " 2>&1",
                        &text),
            2)
      << text;  // was: a run that started the LLM agent again and again
  EXPECT_NE(text.find("--llm: "), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(dir.file("run"))) << text;
}

// Workers' options that made them abort, spin or print escapes, and coordinator options that
// were taken literally: refused before anything starts.
TEST(BadInput, WorkersAndCoordinatorsRefuseOptionsTheyCannotWorkWith) {
  testing::TempDir dir;
  const std::string evaluator =
      kiln_binary() + " evaluator --backend cpu --connect tcp://127.0.0.1:1 ";
  std::string text;
  for (const std::string option :
       {"--compile-threads 0", "--compile-threads 100000", "--heartbeat-ms 0", "--capacity 0"}) {
    EXPECT_EQ(run_command(evaluator + option + " 2>&1", &text), 2)
        << option << ": " << text;  // was: an abort (134), or a reconnect every second
  }
  dir.write("id", "ev\x1b[31m");
  EXPECT_EQ(run_command(evaluator + "--worker-id \"$(cat " + dir.file("id") + ")\" 2>&1", &text), 2)
      << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(
      run_command(kiln_binary() + " evaluator --backend cpu --connect inproc://x 2>&1", &text),
      2)
      << text;  // was: "connected", then "coordinator silent" forever
  EXPECT_NE(text.find("inproc:// reaches only the same process"), std::string::npos) << text;
  EXPECT_EQ(run_command(evaluator + "--targets-dir " + dir.file("nope") + " 2>&1", &text), 2)
      << text;  // was: the built-in targets, silently
  EXPECT_NE(text.find("does not exist (--targets-dir)"), std::string::npos) << text;
  EXPECT_EQ(run_command(evaluator + "--cache-dir /proc/kiln-nope 2>&1", &text), 2) << text;
  EXPECT_NE(text.find("--cache-dir /proc/kiln-nope: cannot create it"), std::string::npos) << text;
  EXPECT_EQ(run_command(kiln_binary() + " agent --connect tcp://127.0.0.1:1 --heartbeat-ms 0 2>&1",
                        &text),
            2)
      << text;
  EXPECT_EQ(run_command(kiln_binary() + " coordinator --backend cpu --bind 'tcp://127.0.0.1:*' " +
                            "--gpu-models auto,any --out " + dir.file("gm") + " 2>&1",
                        &text),
            2)
      << text;  // was: two populations, of models named "auto" and "any"
  EXPECT_NE(text.find("--gpu-models: auto stands alone"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(dir.file("gm"))) << text;
  EXPECT_EQ(run_command(kiln_binary() + " run --backend cpu --targets reduce --cache-dir " +
                            "/proc/kiln-nope --out " + dir.file("q") + " 2>&1",
                        &text),
            2)
      << text;  // was: evaluators failing until the budget was spent, then exit 0
  EXPECT_FALSE(fs::exists(dir.file("q"))) << text;
}

// An --http address in use stopped the run after it was recorded: the next try with the same
// --out was refused as "already holds run".
TEST(BadInput, AnHttpAddressInUseLeavesNoRunBehind) {
  testing::TempDir dir;
  const int busy = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(busy, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(busy, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(busy, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(busy, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " run --backend cpu --targets reduce --http 127.0.0.1:" +
                            port + " --out " + dir.file("hu") + " 2>&1",
                        &text),
            2)
      << text;
  EXPECT_NE(text.find("Address already in use"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(dir.file("hu"))) << text;
  close(busy);
}

// A Redis that holds no kiln run showed an empty table and exit 0.
TEST(BadInput, StatusOfARedisWithoutARunSaysSo) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.started()) << redis.error();
  std::string text;
  EXPECT_EQ(
      run_command(kiln_binary() + " status --redis unix://" + redis.socket_path() + " 2>&1", &text),
      2)
      << text;
  EXPECT_NE(text.find("no kiln run is recorded"), std::string::npos) << text;
}

// A target whose reference.cpp crashes, calls exit() or throws: `kiln eval` died of the signal
// saying nothing, exited 0 with no result at all (exit), or blamed the kernel with a wrong answer
// against outputs left at 0 (throw); `targets --check` passed all three. Now eval says which
// target's reference did what (a throw fails the evaluation and kiln goes on; a crash or exit
// still ends the process, which cannot take the call back), and --check finds each.
TEST(BadInput, AReferenceThatCrashesExitsOrThrowsIsNamed) {
  testing::TempDir dir;
  struct Case {
    std::string body;
    int eval_rc;  // 139: ended by SIGSEGV (the shell's 128 + 11)
    std::string eval_says, check_says;
  };
  const std::string who = "the reference of target 'reduce' (reference.cpp), kiln_reference, ";
  const Case cases[] = {
      {"volatile int* p = nullptr; *p = 1;", 139, "kiln: " + who + "crashed (signal 11)",
       who + "crashed (killed by signal 11"},
      {"std::exit(0);", 1, "kiln: " + who + "called exit() instead of returning",
       who + "ended its process (exited with status 1"},
      {"throw std::runtime_error(\"no reference today\");", 1, who + "threw: no reference today",
       who + "threw: no reference today"}};
  int n = 0;
  for (const Case& c : cases) {
    const std::string mine = dir.file("t" + std::to_string(n++));
    testing::copy_builtin_target("reduce", mine, [](nlohmann::json&) {});
    std::ofstream(mine + "/reduce/reference.cpp")
        << "#include <cstdint>\n#include <cstdlib>\n#include <stdexcept>\n"
           "extern \"C\" void kiln_reference(const double* const*, double* const*, "
           "const int64_t*, const double*) { "
        << c.body << " }\n";
    const std::string args =
        " --backend cpu --targets-dir " + mine + " --cache-dir " + dir.file("cache") + " ";
    std::string text;
    EXPECT_EQ(run_command(kiln_binary() + " eval reduce --no-time" + args, &text), c.eval_rc)
        << text;
    EXPECT_NE(text.find(c.eval_says), std::string::npos) << text;
    EXPECT_EQ(run_command(kiln_binary() + " targets --check reduce" + args, &text), 1) << text;
    EXPECT_NE(text.find("FAIL reference: at M="), std::string::npos) << text;
    EXPECT_NE(text.find(c.check_says), std::string::npos) << text;
  }
}

// Values that meant something other than what was written: a budget of 2^63 s wrapped to a
// negative one and the run started; "," meant every target (run) or no parameters (eval: the
// seed); a malformed --arch failed every compile as the kernels' fault (exit 1); a --shapes file
// whose tensors eval --shape refuses started a run that then failed the seed.
TEST(BadInput, OptionsThatOnceMeantSomethingElseAreRefused) {
  testing::TempDir dir;
  const std::string run = kiln_binary() + " run --backend cpu --cache-dir " + dir.file("cache") +
                          " --out " + dir.file("run") + " ";
  const std::string eval =
      kiln_binary() + " eval reduce --backend cpu --no-time --cache-dir " + dir.file("cache") + " ";
  std::ofstream(dir.file("huge.json")) << R"({"reduce": [{"M": 2147483647, "N": 2147483647}]})";
  for (const auto& [command, says] : std::vector<std::pair<std::string, std::string>>{
           {run + "--targets reduce --budget 9223372036854775807s", "longer than kiln takes"},
           {run + "--targets reduce --budget 0.5s", "not a whole number of seconds"},
           {run + "--targets ,", "--targets: ',' has an empty item"},
           {run + "--targets reduce,,softmax", "has an empty item"},
           {run + "--targets reduce --shapes " + dir.file("huge.json"),
            "kiln takes at most 2^40 per tensor"},
           {eval + "--params ,", "--params: ',' has an empty item"},
           {kiln_binary() + " eval reduce --check --backend cuda --arch sm_xx",
            "expected a real GPU architecture such as sm_90a"},
           {kiln_binary() + " targets --check --backend cuda --arch compute_90 reduce",
            "expected a real GPU architecture such as sm_90a"},
           // Options that contradict or need another were taken silently.
           {kiln_binary() + " export reduce --seed --template --no-verify --to " + dir.file("run"),
            "excludes"},
           {eval + "--limit 5", "requires --sweep"},
           {kiln_binary() + " import-triton " + dir.file("huge.json") + " -k k --timeout 0",
            "not in range"}}) {
    std::string text;
    EXPECT_EQ(run_command(command + " 2>&1", &text), 2) << command << ": " << text;
    EXPECT_NE(text.find(says), std::string::npos) << command << ": " << text;
    EXPECT_FALSE(fs::exists(dir.file("run"))) << command << ": " << text;
  }
}

// A target named twice is listed (and checked) once.
TEST(BadInput, ATargetNamedTwiceIsListedOnce) {
  std::string text;
  ASSERT_EQ(run_command(kiln_binary() + " targets reduce reduce 2>&1", &text), 0) << text;
  EXPECT_NE(text.find("\n1 targets in"), std::string::npos) << text;
}

// A target.json holding a number too large for any type named no file ("a JSON file read here
// does not hold what kiln writes"), and a summary.json whose fields had other types showed a
// target named null and a count of 2^64 - 3.
TEST(BadInput, ANumberTooLargeOrASummaryOfWrongTypesIsSaidWithItsFile) {
  testing::TempDir dir;
  const std::string mine = dir.file("mine");
  testing::copy_builtin_target("reduce", mine, [](nlohmann::json&) {});
  std::string spec = testing::read_file(mine + "/reduce/target.json");
  const size_t at = spec.find("\"benchmark\"");
  ASSERT_NE(at, std::string::npos);
  const size_t m = spec.find("\"M\": ", at);
  ASSERT_NE(m, std::string::npos);
  spec.insert(m + 5, "1" + std::string(400, '0') + ", \"unused\": ");
  std::ofstream(mine + "/reduce/target.json") << spec;
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " targets --targets-dir " + mine + " 2>&1", &text), 2)
      << text;
  EXPECT_NE(text.find(mine + "/reduce/target.json: cannot be read"), std::string::npos) << text;

  for (const auto& [entry, says] : std::vector<std::pair<std::string, std::string>>{
           {R"({"target": "reduce", "evaluations": -3})", "'evaluations' is not a whole number"},
           {R"({"target": null, "evaluations": 4})", "'target' is not a string"},
           {R"({"target": "reduce", "best_us": "fast"})", "'best_us' is not a number"},
           {R"({"evaluations": 4})", "no 'target'"}}) {
    const std::string out = dir.file("run" + std::to_string(says.size()));
    fs::create_directories(out);
    std::ofstream(out + "/summary.json") << "[" << entry << "]";
    EXPECT_EQ(run_command(kiln_binary() + " status --out " + out + " 2>&1", &text), 2) << text;
    EXPECT_NE(text.find("summary.json, entry 0: " + says), std::string::npos) << text;
  }
}

// A binary file as --source gave one scan line of ~60 KB, thousands of findings quoting raw bytes.
TEST(BadInput, TheScanShowsTenFindingsAndCountsTheRest) {
  testing::TempDir dir;
  std::string source;
  for (int i = 0; i < 50; ++i) source += "#include <vector>\n";
  std::ofstream(dir.file("many.cpp")) << source;
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " eval reduce --backend cpu --no-time --cache-dir " +
                            dir.file("cache") + " --source " + dir.file("many.cpp") + " 2>&1",
                        &text),
            1)
      << text;
  EXPECT_NE(text.find("; and 40 more"), std::string::npos) << text;
  EXPECT_LT(text.size(), 4000u) << text;
}

}  // namespace
}  // namespace kiln
