// Prompt building and reply parsing for the LLM proposer: see prompt.h. Everything the model
// returns is untrusted: the parser checks the fences, the size, the entry point and every
// parameter before a candidate leaves the agent.
#include "agent/llm/prompt.h"

#include <cctype>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "evaluator/evaluation.h"
#include "shared/hash.h"
#include "shared/text.h"
#include "shared/triton_settings.h"

namespace kiln::agent::llm {
namespace {

std::string c_type(const std::string& dtype, const std::string& backend) {
  const bool cuda = backend == "cuda";
  if (dtype == "T") return "T";
  if (dtype == "f32") return "float";
  if (dtype == "f64") return "double";
  if (dtype == "f16") return cuda ? "__half" : "_Float16";
  if (dtype == "bf16") return cuda ? "__nv_bfloat16" : "__bf16";
  if (dtype == "i32") return "int";
  if (dtype == "i64") return cuda ? "long long" : "int64_t";
  return dtype;
}

std::string join_values(const std::vector<int64_t>& values) {
  std::string out;
  for (int64_t v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

std::string params_text(const std::map<std::string, std::string>& params) {
  std::string out;
  for (const auto& [k, v] : params) out += (out.empty() ? "" : ", ") + k + "=" + v;
  return out.empty() ? "(none)" : out;
}

// Head and tail of a long log (compilers put the first error first, verifiers the verdict last).
std::string clip(const std::string& text, size_t n) {
  if (text.size() <= n) return text;
  const size_t head = n * 2 / 3;
  return text.substr(0, head) + "\n[... " + std::to_string(text.size() - n) + " bytes left out ...]\n" +
         text.substr(text.size() - (n - head));
}

std::string fence_lang(const std::string& backend) {
  return backend == "cuda" ? "cuda" : backend == "triton" ? "python" : "cpp";
}

std::string metric_lines(const proto::ParentInfo& p) {
  std::ostringstream out;
  for (const auto& [k, v] : p.metrics) out << "  " << k << " = " << v << "\n";
  return out.str();
}

struct Fence {
  std::string lang;
  std::string body;
};

// Every ``` fenced block of `text`, in order. An unterminated last fence runs to the end.
std::vector<Fence> fences(const std::string& text) {
  std::vector<Fence> out;
  size_t pos = 0;
  while ((pos = text.find("```", pos)) != std::string::npos) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) break;
    Fence f;
    f.lang = text.substr(pos + 3, eol - pos - 3);
    while (!f.lang.empty() && std::isspace(static_cast<unsigned char>(f.lang.back()))) f.lang.pop_back();
    for (char& c : f.lang) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t end = text.find("\n```", eol);
    if (end == std::string::npos) {
      f.body = text.substr(eol + 1);
      out.push_back(std::move(f));
      break;
    }
    f.body = text.substr(eol + 1, end + 1 - (eol + 1));
    out.push_back(std::move(f));
    pos = end + 4;
  }
  return out;
}

bool is_code_lang(const std::string& lang, const std::string& backend) {
  if (backend == "triton") return lang == "python" || lang == "py" || lang.empty();
  return lang == "cuda" || lang == "cu" || lang == "cpp" || lang == "c++" || lang == "cxx" || lang == "c" ||
         lang == "cc" || lang.empty();
}

// Whether `source` mentions `name` as a whole identifier followed by '(' (a definition or call).
bool defines_entry(const std::string& source, const std::string& name) {
  size_t pos = 0;
  while ((pos = source.find(name, pos)) != std::string::npos) {
    const bool left_ok = pos == 0 || !(std::isalnum(static_cast<unsigned char>(source[pos - 1])) || source[pos - 1] == '_');
    size_t after = pos + name.size();
    const bool right_ident = after < source.size() &&
                             (std::isalnum(static_cast<unsigned char>(source[after])) || source[after] == '_');
    while (after < source.size() && std::isspace(static_cast<unsigned char>(source[after]))) ++after;
    if (left_ok && !right_ident && after < source.size() && source[after] == '(') return true;
    pos += name.size();
  }
  return false;
}

}  // namespace

// A Triton kernel: the runtime parameters in the calling convention's order (their element types
// come with the pointers), then the template's constexprs.
std::string triton_signature(const TargetSpec& spec, const KernelSpec* tmpl,
                             const std::string& kernel) {
  std::vector<std::string> parts;
  for (const TargetArg& a : spec.args) {
    if (a.role != TargetArg::Role::kScalar) parts.push_back(a.name);
  }
  for (const std::string& d : spec.dims) parts.push_back(d);
  for (const TargetArg& a : spec.args) {
    if (a.role == TargetArg::Role::kScalar) parts.push_back(a.name);
  }
  if (tmpl) {
    std::set<std::string> constexprs;
    for (const auto& [name, values] : tmpl->space) constexprs.insert(name);
    for (const auto& [name, value] : tmpl->defines) constexprs.insert(name);
    for (const std::string& c : constexprs) {
      if (!is_triton_launch_setting(c)) parts.push_back(c + ": tl.constexpr");
    }
  }
  std::string out = "@triton.jit\ndef " + kernel + "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out + ")";
}

std::string entry_signature(const TargetSpec& spec, const std::string& backend,
                            const std::string& kernel, const KernelSpec* tmpl) {
  if (backend == "triton") return triton_signature(spec, tmpl, kernel);
  const bool cuda = backend == "cuda";
  std::string out = cuda ? "extern \"C\" __global__ void " : "extern \"C\" void ";
  out += kernel + "(";
  std::vector<std::string> parts;
  for (const TargetArg& a : spec.args) {
    if (a.role == TargetArg::Role::kScalar) continue;
    const std::string type = c_type(a.dtype, backend);
    parts.push_back((a.role == TargetArg::Role::kInput ? "const " : "") + type + "* " + a.name);
  }
  for (const std::string& d : spec.dims) parts.push_back((cuda ? "long long " : "int64_t ") + d);
  for (const TargetArg& a : spec.args) {
    if (a.role == TargetArg::Role::kScalar) parts.push_back(c_type(a.scalar_type, backend) + " " + a.name);
  }
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out + ")";
}

ChatRequest build_prompt(const PromptInput& in) {
  const TargetSpec& spec = *in.spec;
  const KernelSpec& t = *in.tmpl;
  const bool cuda = in.backend == "cuda";
  const bool triton = in.backend == "triton";
  const std::string lang = fence_lang(in.backend);
  ChatRequest r;
  std::ostringstream sys;
  sys << "You are an expert "
      << (cuda     ? "CUDA kernel"
          : triton ? "Triton kernel"
                   : "C++ performance")
      << " engineer. You make one kernel faster while keeping it exactly correct. kiln compiles "
      << "your kernel, verifies it against a float64 reference on many shapes, adversarial values "
      << "and edge sizes, checks that runs are bitwise deterministic, and times it; only a "
      << "verified kernel that is faster than its parent is kept. Do not special-case the "
      << "benchmark shape, cache results, skip work, or lower precision beyond the tolerance: "
      << "such kernels are detected and discarded.\n\n"
      << "Answer with exactly two fenced blocks and nothing else of substance:\n"
      << "```" << lang
      << "\n<the complete kernel source, including every #include and helper it needs>\n```\n"
      << "```json\n{\"params\": {<every template parameter: integer value>}, \"note\": "
      << "\"<one line: what changed and why it is faster>\"}\n```\n"
      << "Keep the contract's entry point name and signature. Parameters you leave out of "
      << "\"params\" keep the parent's values; use only the parameters listed in the contract "
      << (triton ? "(they are the kernel's constexpr values and Triton's num_warps and num_stages, "
                   "and decide the launch geometry)."
                 : "(they are passed as -D macros and decide the launch geometry).");
  if (triton) {
    sys << " The source is one Python module: import only triton, triton.language (as tl) and "
        << "math; define the entry point as a @triton.jit function, without @triton.autotune or "
        << "@triton.heuristics (the template parameters are the tuning knobs); num_warps and "
        << "num_stages are launch settings, not parameters of the function. No other imports, "
        << "no exec, eval, open, getattr or __dunder__ names: a static scan refuses them. The "
        << "element types come with the pointers; accumulate in float32.";
  } else if (cuda) {
    sys << " The source is device code only: no host code, no <<< >>> launches, no runtime API calls, "
        << "no vendor libraries.";
  } else {
    sys << " The source is plain C++ (no system calls, threads or clocks).";
  }
  if (!triton)
    sys << " kiln defines T (the element type), to_f32(v) and from_f32<T>(f) before your source.";
  r.system = sys.str();

  std::ostringstream u;
  u << "# Target: " << spec.name << " (" << in.backend << " backend)\n" << spec.description << "\n\n";
  u << "## Contract\nEntry point:\n```" << lang << "\n"
    << entry_signature(spec, in.backend, t.kernel_name, &t) << (triton ? ":\n    ...\n" : ";\n")
    << "```\nTensors follow the order above; dims are passed as 64-bit integers.\n";
  u << "Benchmark shape: " << shape_string(spec.benchmark_for(in.backend)) << "\n";
  if (const BackendSpec* b = spec.backend(in.backend)) {
    u << "Dtypes verified:";
    for (DType d : b->dtypes) u << " " << dtype_name(d);
    u << "\n";
  }
  if (!spec.bytes_expr.empty()) u << "Minimum bytes moved: " << spec.bytes_expr << " (S = element bytes)\n";
  if (!t.space.empty()) {
    u << (triton ? "Template parameters (constexprs, num_warps, num_stages)"
                 : "Template parameters (-D macros)")
      << " and the values searched so far:\n";
    for (const auto& [name, values] : t.space) u << "  " << name << ": " << join_values(values) << "\n";
  }
  for (const std::string& c : t.constraints) u << "Constraint: " << c << "\n";
  if (triton) {
    u << "Launch: grid = (" << t.grid[0] << ", " << t.grid[1] << ", " << t.grid[2]
      << ") programs of num_warps warps each (expressions of the dims and the parameters; cdiv = "
      << "ceiling division)\n";
  } else if (cuda) {
    u << "Launch: grid = (" << t.grid[0] << ", " << t.grid[1] << ", " << t.grid[2] << "), block = (" << t.block[0]
      << ", " << t.block[1] << ", " << t.block[2] << "), dynamic shared bytes = " << t.shared_bytes
      << " (expressions of the dims, S and the parameters; cdiv = ceiling division)\n";
  }
  if (in.parent) {
    const proto::ParentInfo& p = *in.parent;
    u << "\n## Parent kernel\nParameters: " << params_text(p.params) << "\n";
    if (p.time_us > 0) u << "Median time at the benchmark shape: " << p.time_us << " us\n";
    if (!p.bottleneck.empty()) u << "Bottleneck (profiler): " << p.bottleneck << "\n";
    if (!p.metrics.empty()) u << "Profile and timing metrics:\n" << metric_lines(p);
    u << "```" << lang << "\n" << p.source << (p.source.empty() || p.source.back() == '\n' ? "" : "\n") << "```\n";
    // The coordinator asks about the seed too; its parameters are no configuration of the template.
    bool seed = false;
    for (const auto& [name, values] : t.space) seed |= !p.params.count(name);
    if (seed) {
      u << "This parent is the target's seed, not the template: it has its own entry point and "
        << "launch. Write your kernel to the contract above (entry point " << t.kernel_name
        << ", the launch and the template parameters), and give a value for every template "
        << "parameter.\n";
    }
  }
  if (!in.recent_failures.empty()) {
    u << "\n## Recent children that failed (do not repeat these mistakes)\n";
    for (const std::string& f : in.recent_failures) u << "- " << f << "\n";
  }
  if (in.repair) {
    const proto::FailedChild& f = *in.repair;
    u << "\n## Repair\nThis child of the parent failed (" << (f.outcome.empty() ? "failed" : f.outcome)
      << ") with parameters " << params_text(f.params) << ". Fix it and keep its idea; answer with the "
      << "corrected complete source.\n```" << lang << "\n" << f.source
      << (f.source.empty() || f.source.back() == '\n' ? "" : "\n") << "```\nLog:\n```\n"
      << clip(f.log, in.log_chars) << "\n```\n";
  } else {
    u << "\n## Task\nWrite one faster variant of the parent.";
    if (!in.operator_hint.empty()) u << " Work on this tier of the playbook first: " << in.operator_hint << ".";
    u << " Explain the change in the note.\n";
  }
  if (!in.previous_rejection.empty()) {
    u << "\nYour previous answer was refused: " << in.previous_rejection << ". Answer again in the required format.\n";
  }
  r.user = u.str();
  return r;
}

Result<ParsedReply> parse_reply(const std::string& text, const TargetSpec& spec, const std::string& backend,
                                const KernelSpec& tmpl, const std::map<std::string, std::string>& parent_params) {
  std::vector<Fence> blocks = fences(text);
  ParsedReply out;
  const Fence* code = nullptr;
  const Fence* json = nullptr;
  for (const Fence& f : blocks) {
    // A bare fence holding the params object is the json block, not code.
    const bool bare_json = f.lang.empty() && [&] {
      nlohmann::json j = nlohmann::json::parse(f.body, nullptr, false);
      return j.is_object() && j.contains("params");
    }();
    if (f.lang == "json" || bare_json) {
      json = &f;
    } else if (is_code_lang(f.lang, backend) && !code) {
      code = &f;
    }
  }
  if (!code) return invalid_argument("no fenced code block in the reply");
  out.source = code->body;
  if (out.source.find_first_not_of(" \t\r\n") == std::string::npos) return invalid_argument("the code block is empty");
  if (out.source.size() > kMaxSourceBytes) {
    return invalid_argument("the source is larger than " + std::to_string(kMaxSourceBytes) + " bytes");
  }
  if (!defines_entry(out.source, tmpl.kernel_name)) {
    return invalid_argument("the source does not define the entry point '" + tmpl.kernel_name + "'");
  }
  for (const auto& [name, values] : tmpl.space) {
    if (auto it = parent_params.find(name); it != parent_params.end()) out.params[name] = it->second;
  }
  if (json) {
    nlohmann::json j = nlohmann::json::parse(json->body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return invalid_argument("the json block is not a JSON object");
    if (j.contains("note") && j["note"].is_string()) out.note = j["note"].get<std::string>().substr(0, 200);
    if (j.contains("params")) {
      if (!j["params"].is_object()) return invalid_argument("\"params\" is not an object");
      for (const auto& [k, v] : j["params"].items()) {
        if (!tmpl.space.count(k)) return invalid_argument("\"params\" names '" + k.substr(0, 40) + "', not a template parameter");
        // An integer, or a string that is one whole ("16"; "1-2", "-" and "16x" are not).
        int64_t value = 0;
        bool whole = false;
        if (v.is_number_unsigned()) {
          whole = v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
          if (whole) value = static_cast<int64_t>(v.get<uint64_t>());
        } else if (v.is_number_integer()) {
          whole = true;
          value = v.get<int64_t>();
        } else if (v.is_string()) {
          const std::optional<int64_t> parsed = parse_int64(v.get_ref<const std::string&>());
          whole = parsed.has_value();
          value = parsed.value_or(0);
        }
        if (!whole) return invalid_argument("\"params\"." + k.substr(0, 40) + " is not an integer");
        out.params[k] = std::to_string(value);
      }
    }
  }
  for (const auto& [name, values] : tmpl.space) {
    if (!out.params.count(name)) return invalid_argument("no value for the template parameter " + name);
  }
  const BackendSpec* b = spec.backend(backend);
  const DType dtype = b && !b->dtypes.empty() ? b->dtypes.front() : DType::kF32;
  Result<bool> ok = eval::satisfies_constraints(tmpl, spec.benchmark_for(backend), dtype, out.params);
  if (!ok.is_ok()) return invalid_argument("parameters not usable: " + ok.status().message());
  if (!*ok) return invalid_argument("parameters " + params_text(out.params) + " break the template's constraints");
  return out;
}

namespace {

// Python (triton): indentation is syntax and // is floor division, so only `#` comments, trailing
// whitespace and blank lines go.
std::string python_normal_form(const std::string& source) {
  std::string out;
  size_t begin = 0;
  while (begin < source.size()) {
    size_t end = source.find('\n', begin);
    if (end == std::string::npos) end = source.size();
    std::string line = source.substr(begin, end - begin);
    char quote = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quote) {
        if (c == '\\')
          ++i;
        else if (c == quote)
          quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '#') {
        line.resize(i);
        break;
      }
    }
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) out += line + "\n";
    begin = end + 1;
  }
  return out;
}

}  // namespace

std::string normal_form(const std::string& source, const std::string& backend) {
  if (backend == "triton") return python_normal_form(source);
  std::string stripped;
  stripped.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    const char c = source[i];
    if (c == '"' || c == '\'') {  // literals are copied whole: a "//" inside one is not a comment
      const size_t start = i;
      for (++i; i < source.size() && source[i] != c && source[i] != '\n'; ++i) {
        if (source[i] == '\\') ++i;
      }
      stripped.append(source, start, std::min(i + 1, source.size()) - start);
    } else if (c == '/' && i + 1 < source.size() && source[i + 1] == '/') {
      while (i < source.size() && source[i] != '\n') ++i;
      stripped += '\n';
    } else if (c == '/' && i + 1 < source.size() && source[i + 1] == '*') {
      const size_t end = source.find("*/", i + 2);
      i = end == std::string::npos ? source.size() : end + 1;
      stripped += ' ';
    } else {
      stripped += c;
    }
  }
  // Collapse whitespace; keep one space only between two word characters (`unsigned int`).
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  bool pending_space = false;
  for (char c : stripped) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      pending_space = true;
      continue;
    }
    if (pending_space && !out.empty() && word(out.back()) && word(c)) out += ' ';
    // Preprocessor lines end at a newline: keep it so that "#define A 1 int x" cannot merge lines.
    if (pending_space && c == '#') out += '\n';
    pending_space = false;
    out += c;
  }
  return out;
}

std::string novelty_key(const std::string& source, const std::map<std::string, std::string>& params,
                        const std::string& backend) {
  Sha256 h;
  h.add(normal_form(source, backend));
  for (const auto& [k, v] : params) h.add(k + "=" + v);
  return h.hex();
}

}  // namespace kiln::agent::llm
