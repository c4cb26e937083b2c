// `kiln report`: see report_cmd.h. Loads the run (report/run_folder.h), renders it
// (report/html.h or report/markdown.h) and writes the file, or prints markdown to stdout.
#include "cli/report_cmd.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/redis_password.h"
#include "cli/report_redis.h"
#include "report/html.h"
#include "report/markdown.h"
#include "report/run_folder.h"
#include "shared/atomic_file.h"
#include "shared/fatal.h"
#include "shared/text.h"

namespace kiln::cli {
namespace fs = std::filesystem;
namespace {

constexpr const char* kDefaultRunFolder = "kiln-run";  // `kiln run --out`'s default

struct ReportArgs {
  std::string run;         // --run DIR
  std::string positional;  // or DIR as the first argument
  std::string out;         // the report file
  std::string format = "html";
  std::string redis;  // --redis URL: the run's Redis instead of a folder (cli/report_redis.h)
  std::string redis_password_file;
};

// Writes the report through a temporary file renamed over it (shared/atomic_file.h), so that a
// browser reloading it never reads half of one.
Status write_report(const std::string& path, const std::string& text) {
  std::error_code ec;
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  Status written = write_file_atomically(path, text);
  if (!written.is_ok()) {
    return unavailable(written.message() +
                       ": check that its folder exists and is writable, or pass another --out");
  }
  return Status::ok();
}

// Where the report may go: `out` itself, or the file a link there points to. Not a device, fifo
// or folder (it would be replaced by a file), and inside the run folder `run_dir` only a file
// named *.html or *.md: the run's own files (results.jsonl, summary.json, best/) are not a
// report's to overwrite.
Result<std::string> report_destination(const std::string& out, const std::string& run_dir) {
  std::error_code ec;
  fs::path target(out);
  const fs::file_status st = fs::symlink_status(target, ec);
  if (fs::is_symlink(st)) {
    target = fs::canonical(target, ec);
    if (ec) return invalid_argument("--out " + out + " is a link to nothing; name a file");
  }
  if (fs::exists(target, ec) && !fs::is_regular_file(target, ec)) {
    return invalid_argument("--out " + out +
                            " is not a regular file (a folder, device or fifo); name a file");
  }
  if (!run_dir.empty()) {
    const fs::path run = fs::weakly_canonical(run_dir, ec);
    const fs::path at = fs::weakly_canonical(target, ec);
    const auto [end, _] = std::mismatch(run.begin(), run.end(), at.begin(), at.end());
    const std::string ext = at.extension().string();
    if (end == run.end() && ext != ".html" && ext != ".md") {
      return invalid_argument("--out " + out +
                              " is in the run's folder and is not a report (*.html, *.md): "
                              "the run's own files are not overwritten");
    }
  }
  return target.string();
}

Result<report::RunData> from_redis(const ReportArgs& a) {
  redis::RedisOptions o;
  o.url = a.redis;
  if (!a.redis_password_file.empty())
    KILN_RETURN_IF_ERROR(apply_redis_password_file(a.redis_password_file, o));
  o.connect_timeout_ms = 2000;
  o.max_reconnect_attempts = 1;
  Result<redis::RedisClient> client = redis::RedisClient::connect(o);
  if (!client.is_ok()) {
    return client.status().with_context(
        "--redis " + redis_url_for_display(a.redis) +
        " (is the run's Redis up? a private one lives in <out>/redis)");
  }
  redis::Store store(*client);
  return load_run_redis(store, redis_url_for_display(a.redis));
}

int run_report(const ReportArgs& a) {
  auto fail = [](const std::string& msg, int code) {
    report_fatal("kiln report: " + msg);
    return code;
  };
  if (!a.run.empty() && !a.positional.empty() && a.run != a.positional)
    return fail("two run folders given (" + a.positional + " and --run " + a.run + "): pass one",
                2);
  const std::string dir = !a.run.empty()          ? a.run
                          : !a.positional.empty() ? a.positional
                                                  : kDefaultRunFolder;
  Result<report::RunData> run = a.redis.empty() ? report::load_run_folder(dir) : from_redis(a);
  if (!run.is_ok()) return fail(run.status().message(), 2);

  const bool html = a.format == "html";
  const std::string text = html ? report::render_html(*run) : report::render_markdown(*run);
  if (!html && a.out.empty()) {  // to a terminal: what the run's records hold, escaped
    std::fputs(terminal_safe(text).c_str(), stdout);
    return 0;
  }
  if (!a.redis.empty() && a.out.empty() && a.run.empty() && a.positional.empty()) {
    return fail(
        "--redis: say where the report goes with --out FILE (or --run DIR for DIR/report.html)", 2);
  }
  Result<std::string> dest = report_destination(
      a.out.empty() ? (fs::path(dir) / "report.html").string() : a.out, a.redis.empty() ? dir : "");
  if (!dest.is_ok()) return fail(dest.status().message(), 2);
  const std::string out = a.out.empty() ? *dest : a.out;
  if (Status s = write_report(*dest, text); !s.is_ok()) return fail(s.message(), 1);
  std::error_code ec;
  const fs::path abs = fs::absolute(out, ec);
  std::printf("kiln report: wrote %s (%zu target%s, %zu result%s)\n", out.c_str(),
              run->units.size(), run->units.size() == 1 ? "" : "s", run->rows.size(),
              run->rows.size() == 1 ? "" : "s");
  if (html) std::printf("open it in a browser: file://%s\n", abs.string().c_str());
  return 0;
}

}  // namespace

void add_report_command(CLI::App& app, std::function<int()>& action) {
  auto a = std::make_shared<ReportArgs>();
  CLI::App* sub = app.add_subcommand(
      "report",
      "Write a run's report, read from its output folder (kiln run --out):\n"
      "  html (default)  one self-contained page (no script, nothing fetched from outside):\n"
      "                  a summary table of every target and GPU model; per target the best\n"
      "                  time against wall time and against evaluations, the throughput of\n"
      "                  each candidate against the measured peak (the roof), the lineage of\n"
      "                  the best from the seed with each step's gain, the winning\n"
      "                  configuration with the kiln export commands, and failures by reason;\n"
      "                  evaluations per evaluator over time with busy and idle times; and the\n"
      "                  LLM models' calls, tokens and cost per kept child\n"
      "  md              the same figures as markdown tables, without the charts\n"
      "Examples:\n"
      "  kiln report                               # kiln-run/ -> kiln-run/report.html\n"
      "  kiln report runs/night1                   # runs/night1/report.html\n"
      "  kiln report --run runs/night1 --out night1.html\n"
      "  kiln report runs/night1 --format md       # markdown on stdout\n"
      "  kiln report --redis redis://farm-redis:6379 --out now.html   # a farm's run, live\n"
      "Exit code 0 when written, 1 when the file cannot be written, 2 when the folder cannot be\n"
      "read as a run.");
  sub->add_option("dir", a->positional, "The run's output folder (as --run)");
  sub->add_option("--run", a->run,
                  "The run's output folder: what `kiln run --out` was given (default: kiln-run)");
  sub->add_option(
      "--redis", a->redis,
      "Read the run from its Redis (redis://host:port or unix:///path) instead of a folder,\n"
      "while it runs or after; needs --out FILE. LLM calls, tokens and cost are in the\n"
      "folder's llm-usage.json only");
  add_redis_password_option(sub, a->redis_password_file);
  sub->add_option("--out", a->out,
                  "The report file to write (default: DIR/report.html for html; for md, stdout)");
  sub->add_option("--format", a->format, "html or md")
      ->check(CLI::IsMember({"html", "md"}))
      ->capture_default_str();
  sub->callback([&action, a] { action = [a] { return run_report(*a); }; });
}

}  // namespace kiln::cli
