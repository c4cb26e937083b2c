// Static scan of candidate kernel sources: the lexer (source_lex.h) blanks comments and literals
// (keeping every character's original line), then per-backend rule tables run over identifiers,
// tokens, preprocessor directives and, on cuda, the text of joined string literals.
#include "evaluator/source_scan.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "evaluator/source_lex.h"
#include "evaluator/triton/python_scan.h"

namespace kiln::eval {
namespace {

using scan_detail::is_ident_char;
using scan_detail::is_ident_start;
using scan_detail::is_space;
using scan_detail::is_timer_register;
using scan_detail::lex;
using scan_detail::pp_number_end;
using scan_detail::splice_lines;
using scan_detail::SplicedText;
using scan_detail::Views;

constexpr size_t kMaxExcerptChars = 160;
constexpr size_t kMaxRuleDetailChars = 60;

// Names that reach the OS, the dynamic loader, the clock, process control or the caller's stack,
// and attributes that run or redirect code at load time. Whole identifiers only, so `opened` is
// fine. Allowed headers still declare some of these (libstdc++'s <cmath> pulls in <stdlib.h>),
// which is why names are banned and not just headers.
constexpr const char* kCpuBannedIdentifiers[] = {
    "dlopen", "dlsym", "dlvsym", "dlmopen", "dlclose", "dladdr", "dlinfo",
    "fork", "vfork", "clone", "execl", "execlp", "execle", "execv", "execvp", "execvpe", "execve",
    "fexecve", "posix_spawn", "posix_spawnp", "system", "popen", "fopen", "freopen", "fdopen",
    "open", "openat", "creat", "mmap", "munmap", "mprotect", "mremap", "clock_gettime",
    "gettimeofday", "clock", "chrono", "steady_clock", "system_clock", "high_resolution_clock",
    "getenv", "secure_getenv", "setenv", "putenv", "environ", "signal", "sigaction", "raise",
    "kill", "ptrace", "prctl", "socket", "connect", "unlink", "rename", "exit", "_exit", "_Exit",
    "abort", "quick_exit", "atexit", "at_quick_exit", "setjmp", "longjmp", "sigsetjmp",
    "siglongjmp", "__builtin_frame_address", "__builtin_return_address", "constructor",
    "destructor", "__constructor__", "__destructor__", "ifunc", "__ifunc__", "weakref",
    "__weakref__", "alias", "__alias__", "section", "__section__",
};
// Common words banned only where they are called, i.e. followed by '('.
constexpr const char* kCpuBannedCalls[] = {"read", "write", "time", "sleep", "usleep"};
// Any identifier containing one of these: timestamp counters, raw system calls, libc internals.
constexpr const char* kCpuBannedSubstrings[] = {"rdtsc", "rdpmc", "syscall", "pthread_",
                                                "__libc_"};
// Banned when written std::name (threads escape the timed call; a word like `async` is fine alone).
constexpr const char* kStdQualifiedBans[] = {"thread", "jthread", "async"};
constexpr const char* kAsmKeywords[] = {"asm", "__asm", "__asm__"};

constexpr const char* kCpuIncludes[] = {"cstdint", "cmath",     "cstring",     "algorithm",
                                        "immintrin.h", "cstddef", "climits", "limits",
                                        "type_traits", "array"};
constexpr const char* kCudaIncludes[] = {
    "cuda_fp16.h",  "cuda_bf16.h",           "cuda_fp8.h",
    "cuda_pipeline.h", "cuda/barrier",       "cuda/pipeline",
    "mma.h",        "cooperative_groups.h", "cooperative_groups/reduce.h",
    "cstdint"};
// A pragma is allowed when its words start with one of these.
constexpr const char* kCpuPragmas[] = {"once", "unroll", "GCC unroll", "GCC ivdep", "omp simd"};
constexpr const char* kCudaPragmas[] = {"once", "unroll"};
constexpr const char* kKnownDirectives[] = {"",      "define", "undef",   "if",       "ifdef",
                                            "ifndef", "elif",  "elifdef", "elifndef", "else",
                                            "endif", "pragma", "include", "error",    "warning",
                                            "line"};

// Vendor libraries: whole families of names. Device code cannot link them, but a candidate that
// reaches them through some host path is not timing its own kernel (docs/threats.md row 5).
constexpr const char* kCudaVendorPrefixes[] = {"cublas", "cudnn", "cufft", "curand",
                                               "cusparse", "cusolver", "nvrtc"};
// Device-side runtime calls real kernels use (programmatic dependent launch on Hopper).
constexpr const char* kCudaAllowedRuntimeNames[] = {"cudaGridDependencySynchronize",
                                                    "cudaTriggerProgrammaticLaunchCompletion"};

template <typename List>
bool contains(const List& list, std::string_view s) {
  return std::any_of(std::begin(list), std::end(list), [&](const char* e) { return s == e; });
}

std::string clip(std::string_view s, size_t max_chars) {
  return std::string(s.substr(0, max_chars));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (is_space(s.front()) || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (is_space(s.back()) || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

// Words of `s` joined by single spaces.
std::string collapse_spaces(std::string_view s) {
  std::string out;
  bool pending_space = false;
  for (char c : trim(s)) {
    if (is_space(c)) {
      pending_space = true;
      continue;
    }
    if (pending_space && !out.empty()) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

class Scanner {
 public:
  Scanner(std::string_view source, bool cpu)
      : cpu_(cpu), spliced_(splice_lines(source)), views_(lex(spliced_.text)) {
    size_t start = 0;
    while (start <= source.size()) {
      size_t end = std::min(source.find('\n', start), source.size());
      lines_.push_back(source.substr(start, end - start));
      start = end + 1;
    }
  }

  std::vector<ScanFinding> run() {
    scan_tokens();
    scan_directives();
    if (!cpu_) scan_ptx_text();
    std::stable_sort(findings_.begin(), findings_.end(),
                     [](const ScanFinding& a, const ScanFinding& b) { return a.line < b.line; });
    return std::move(findings_);
  }

 private:
  void add(std::string rule, size_t pos) {
    int line = pos < spliced_.line_of.size() ? spliced_.line_of[pos]
                                             : static_cast<int>(lines_.size());
    if (!seen_.insert({rule, line}).second) return;
    std::string_view text = line >= 1 && static_cast<size_t>(line) <= lines_.size()
                                ? lines_[static_cast<size_t>(line) - 1]
                                : std::string_view();
    findings_.push_back({std::move(rule), line, clip(trim(text), kMaxExcerptChars)});
  }

  char next_non_space(size_t i) const {
    const std::string& code = views_.code;
    while (i < code.size() && (is_space(code[i]) || code[i] == '\n')) ++i;
    return i < code.size() ? code[i] : '\0';
  }

  // Whether the identifier starting at `start` is written std::name (spaces allowed around ::).
  bool qualified_by_std(size_t start) const {
    const std::string& code = views_.code;
    size_t i = start;
    auto skip_space_back = [&] {
      while (i > 0 && (is_space(code[i - 1]) || code[i - 1] == '\n')) --i;
    };
    skip_space_back();
    if (i < 2 || code.compare(i - 2, 2, "::") != 0) return false;
    i -= 2;
    skip_space_back();
    if (i < 3 || code.compare(i - 3, 3, "std") != 0) return false;
    return i == 3 || !is_ident_char(code[i - 4]);
  }

  void check_identifier(std::string_view id, size_t start, size_t end) {
    std::string name(id);
    if (name == "_Pragma") add("pragma:_Pragma", start);
    if (contains(kStdQualifiedBans, id) && qualified_by_std(start)) {
      add((cpu_ ? "identifier:std::" : "host-code:std::") + name, start);
    }
    if (cpu_) {
      if (contains(kAsmKeywords, id)) add("asm:" + name, start);
      if (contains(kCpuBannedIdentifiers, id)) add("identifier:" + name, start);
      if (contains(kCpuBannedCalls, id) && next_non_space(end) == '(') {
        add("identifier:" + name, start);
      }
      for (const char* part : kCpuBannedSubstrings) {
        if (name.find(part) != std::string::npos) add("identifier:" + name, start);
      }
      return;
    }
    for (const char* prefix : kCudaVendorPrefixes) {
      if (name.rfind(prefix, 0) == 0) add("identifier:" + name, start);
    }
    // cudaXxx is the runtime API, cuXxx the driver API: host calls, whatever their spelling.
    auto upper_at = [&](size_t k) {
      return name.size() > k && std::isupper(static_cast<unsigned char>(name[k]));
    };
    bool runtime = name.rfind("cuda", 0) == 0 && upper_at(4);
    bool driver = name.rfind("cu", 0) == 0 && upper_at(2);
    if ((runtime || driver) && !contains(kCudaAllowedRuntimeNames, id)) {
      add("identifier:" + name, start);
    }
    if (name == "__host__") add("host-code:__host__", start);
    if (name == "main" && next_non_space(end) == '(') add("host-code:main", start);
    // The SM cycle counter keeps counting across launches, so it times them as well as
    // %globaltimer does (the PTX scan catches every other spelling).
    if (name == "clock" || name == "clock64") add("timer:" + name, start);
  }

  void scan_tokens() {
    const std::string& code = views_.code;
    const size_t n = code.size();
    size_t i = 0;
    while (i < n) {
      char c = code[i];
      if (is_ident_start(c)) {
        size_t e = i;
        while (e < n && is_ident_char(code[e])) ++e;
        check_identifier(std::string_view(code.data() + i, e - i), i, e);
        i = e;
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        i = pp_number_end(code, i);
        continue;
      }
      // Outside literals a backslash can only start a universal character name, which spells
      // an identifier character (\u0064lopen is dlopen): no honest kernel needs one.
      if (c == '\\') add("ucn:\\", i);
      // Token pasting assembles a banned name from allowed pieces (dl ## open).
      if (cpu_ && (code.compare(i, 2, "##") == 0 || code.compare(i, 4, "%:%:") == 0)) {
        add("token-paste:##", i);
      }
      if (!cpu_ && code.compare(i, 3, "<<<") == 0) add("host-code:<<<", i);
      ++i;
    }
  }

  void scan_directives() {
    const std::string& text = views_.directives;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = std::min(text.find('\n', start), text.size());
      std::string_view line(text.data() + start, end - start);
      size_t p = 0;
      while (p < line.size() && is_space(line[p])) ++p;
      size_t hash_len = line.compare(p, 1, "#") == 0 ? 1 : line.compare(p, 2, "%:") == 0 ? 2 : 0;
      if (hash_len > 0) check_directive(line.substr(p + hash_len), start + p);
      start = end + 1;
    }
  }

  void check_directive(std::string_view rest, size_t pos) {
    size_t p = 0;
    while (p < rest.size() && is_space(rest[p])) ++p;
    size_t e = p;
    while (e < rest.size() && is_ident_char(rest[e])) ++e;
    std::string name(rest.substr(p, e - p));
    std::string_view args = trim(rest.substr(e));
    // A GNU line marker (# 12 "f" 1) can claim that the lines after it come from a header, and
    // the scan of the preprocessed source (scan_preprocessed) leaves header lines out. #line
    // cannot carry the flags that do this, so it stays allowed.
    if (!name.empty() && std::isdigit(static_cast<unsigned char>(name[0]))) {
      add("directive:linemarker", pos);
      return;
    }
    if (!contains(kKnownDirectives, name)) {
      add("directive:" + name, pos);
    } else if (name == "include") {
      check_include(args, pos);
    } else if (name == "pragma") {
      check_pragma(args, pos);
    }
  }

  // Only a literal <name> or "name" from the allow-list passes; a macro naming the header does not.
  void check_include(std::string_view args, size_t pos) {
    std::string header;
    if (args.size() >= 2 && ((args.front() == '<' && args.find('>') != std::string_view::npos) ||
                             (args.front() == '"' && args.find('"', 1) != std::string_view::npos))) {
      size_t close = args.find(args.front() == '<' ? '>' : '"', 1);
      header = std::string(args.substr(1, close - 1));
      bool angled = args.front() == '<';
      bool allowed = angled && (cpu_ ? contains(kCpuIncludes, header)
                                     : contains(kCudaIncludes, header));
      if (allowed && trim(args.substr(close + 1)).empty()) return;
      add("include:" + clip(header, kMaxRuleDetailChars), pos);
      return;
    }
    add("include:" + clip(args, kMaxRuleDetailChars), pos);
  }

  void check_pragma(std::string_view args, size_t pos) {
    std::string words = collapse_spaces(args);
    auto allowed = [&](const char* prefix) {
      std::string_view pre(prefix);
      return words.rfind(pre, 0) == 0 && (words.size() == pre.size() || words[pre.size()] == ' ');
    };
    bool ok = cpu_ ? std::any_of(std::begin(kCpuPragmas), std::end(kCpuPragmas), allowed)
                   : std::any_of(std::begin(kCudaPragmas), std::end(kCudaPragmas), allowed);
    if (!ok) add("pragma:" + clip(words, kMaxRuleDetailChars), pos);
  }

  // Inline PTX is allowed on cuda, but not reading a clock or a counter from it. The literals are
  // read as the compiler joins them ("%%global" "timer;" is one string), escapes decoded.
  void scan_ptx_text() {
    const std::string& text = views_.directives;
    for (size_t at = text.find("globaltimer"); at != std::string::npos;
         at = text.find("globaltimer", at + 1)) {
      add("timer:globaltimer", at);
    }
    for (const scan_detail::JoinedString& s :
         scan_detail::join_adjacent_strings(spliced_.text, views_)) {
      for (size_t at = s.text.find("globaltimer"); at != std::string::npos;
           at = s.text.find("globaltimer", at + 1)) {
        add("timer:globaltimer", s.pos[at]);
      }
      for (size_t at = s.text.find('%'); at != std::string::npos; at = s.text.find('%', at + 1)) {
        size_t e = at + 1;
        while (e < s.text.size() && is_ident_char(s.text[e])) ++e;
        std::string name = s.text.substr(at + 1, e - at - 1);
        if (is_timer_register(name) && name.rfind("globaltimer", 0) != 0) {
          add("timer:" + name, s.pos[at]);
        }
      }
    }
  }

  bool cpu_;
  SplicedText spliced_;
  Views views_;
  std::vector<std::string_view> lines_;
  std::vector<ScanFinding> findings_;
  std::set<std::pair<std::string, int>> seen_;
};

}  // namespace

std::vector<ScanFinding> scan_source(std::string_view source, std::string_view backend) {
  if (backend == "triton") return scan_python(source);
  if (backend != "cpu" && backend != "cuda") {
    return {{"backend:" + clip(backend, kMaxRuleDetailChars), 0,
             "no scan rules for this backend; refusing the source"}};
  }
  return Scanner(source, backend == "cpu").run();
}

}  // namespace kiln::eval
