// Shapes from NVTX range texts: see op_shapes.h.
#include "evaluator/profile/op_shapes.h"

#include <cctype>
#include <limits>

namespace kiln::profile {
namespace {

// Parses "[[1, 2], [], [3]]" from the start of `s`; advances `s` past it.
bool parse_lists(std::string_view& s, std::vector<std::vector<int64_t>>* out) {
  auto skip = [&] {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  };
  auto eat = [&](char c) {
    skip();
    if (s.empty() || s.front() != c) return false;
    s.remove_prefix(1);
    return true;
  };
  if (!eat('[')) return false;
  if (eat(']')) return true;
  do {
    if (!eat('[')) return false;
    std::vector<int64_t> dims;
    if (!eat(']')) {
      do {
        skip();
        if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return false;
        int64_t v = 0;
        while (!s.empty() && std::isdigit(static_cast<unsigned char>(s.front()))) {
          if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return false;
          v = v * 10 + (s.front() - '0');
          s.remove_prefix(1);
        }
        dims.push_back(v);
      } while (eat(','));
      if (!eat(']')) return false;
    }
    out->push_back(std::move(dims));
  } while (eat(','));
  return eat(']');
}

bool positive(int64_t v) { return v > 0 && v < (int64_t{1} << 31); }

// [..., N] -> {M: product of the leading sizes (1 when none), N}.
std::optional<Shape> rows_shape(const std::vector<int64_t>& x) {
  if (x.empty()) return std::nullopt;
  int64_t m = 1;
  for (size_t i = 0; i + 1 < x.size(); ++i) {
    if (!positive(x[i]) || m > (int64_t{1} << 31) / x[i]) return std::nullopt;
    m *= x[i];
  }
  if (!positive(m) || !positive(x.back())) return std::nullopt;
  return Shape{{"M", m}, {"N", x.back()}};
}

std::optional<Shape> gemm_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != 2 || b.size() != 2 || a[1] != b[0]) return std::nullopt;
  if (!positive(a[0]) || !positive(a[1]) || !positive(b[1])) return std::nullopt;
  return Shape{{"M", a[0]}, {"N", b[1]}, {"K", a[1]}};
}

// The target that computes PyTorch operator `op`, or "".
std::string target_of_op(const std::string& op) {
  if (op == "aten::mm" || op == "aten::addmm") return "matmul";
  if (op == "aten::rms_norm" || op == "aten::_fused_rms_norm") return "rmsnorm";
  if (op == "aten::layer_norm" || op == "aten::native_layer_norm") return "layernorm";
  if (op == "aten::softmax" || op == "aten::_softmax") return "softmax";
  // The pieces of a cross-entropy loss over [..., V] logits (PyTorch's cross_entropy runs
  // log_softmax, then nll_loss).
  if (op == "aten::cross_entropy_loss" || op == "aten::log_softmax" || op == "aten::_log_softmax" ||
      op == "aten::nll_loss" || op == "aten::nll_loss_forward" || op == "aten::nll_loss_nd")
    return "cross_entropy";
  return "";
}

}  // namespace

std::optional<RangeOp> parse_range_op(std::string_view text) {
  constexpr std::string_view kSizes = "sizes = ";
  const size_t at = text.find(kSizes);
  if (at == std::string_view::npos) return std::nullopt;
  RangeOp r;
  const size_t comma = text.find(',');
  r.op = std::string(text.substr(0, comma == std::string_view::npos ? text.size() : comma));
  std::string_view rest = text.substr(at + kSizes.size());
  if (!parse_lists(rest, &r.sizes)) return std::nullopt;
  return r;
}

std::string target_of_range(std::string_view text) {
  std::optional<RangeOp> r = parse_range_op(text);
  return r ? target_of_op(r->op) : "";
}

RangeShape shape_of_range(std::string_view text) {
  RangeShape out;
  std::optional<RangeOp> r = parse_range_op(text);
  if (!r) return out;
  out.target = target_of_op(r->op);
  const auto& in = r->sizes;
  if (out.target == "matmul") {
    if (r->op == "aten::mm" && in.size() >= 2) {
      out.shape = gemm_shape(in[0], in[1]);
    } else if (r->op == "aten::addmm" && in.size() >= 3) {
      out.shape = gemm_shape(in[1], in[2]);  // bias first
    }
  } else if (!out.target.empty() && !in.empty()) {
    out.shape = rows_shape(in[0]);
    if (out.shape && out.target == "cross_entropy") {
      out.shape = Shape{{"M", out.shape->at("M")}, {"V", out.shape->at("N")}};
    }
  }
  return out;
}

std::optional<Shape> shape_from_range(std::string_view target, std::string_view text) {
  RangeShape r = shape_of_range(text);
  if (target.empty() || r.target != target) return std::nullopt;
  return r.shape;
}

}  // namespace kiln::profile
