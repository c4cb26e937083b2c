// Shapes of a real program's kernels, recovered from the NVTX range their launch ran in
// (`kiln profile` records the innermost range of every launch). PyTorch names its ranges after
// the operator and, under `torch.autograd.profiler.emit_nvtx(record_shapes=True)`, its inputs'
// sizes: "aten::addmm, seq = 12, op_id = 40, sizes = [[6144], [128, 4096], [4096, 6144]], ...".
// The rules below turn the operators kiln has targets for into that target's dims; anything else
// (another operator, a range without sizes, a malformed text) recovers nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shared/target_spec.h"

namespace kiln::profile {

// A range text taken apart: the operator ("aten::mm": the text before the first comma) and the
// list after "sizes = " (one list of sizes per input; [] for a non-tensor input). nullopt when the
// text has no sizes list or the list does not parse.
struct RangeOp {
  std::string op;
  std::vector<std::vector<int64_t>> sizes;
};
std::optional<RangeOp> parse_range_op(std::string_view text);

// The target that computes the operator named by the range `text` ("aten::addmm, ..." -> matmul),
// or "" when kiln has none for it or the text names no operator with sizes. A launch inside such a
// range belongs to that target whatever its kernel is called: PyTorch runs aten::rms_norm on its
// layer-norm kernel, and the time is rmsnorm's (trace_targets.h, map_launch_to_target).
std::string target_of_range(std::string_view text);

// What a kernel launched in the range `text` computes: the operator's target (target_of_range)
// and the shape it ran at, when the sizes fit the operator. matmul: aten::mm [[M, K], [K, N]] and
// aten::addmm [bias, [M, K], [K, N]]. rmsnorm (aten::rms_norm, aten::_fused_rms_norm), layernorm
// (aten::layer_norm, aten::native_layer_norm) and softmax (aten::softmax, aten::_softmax): input
// [..., N], M the product of the leading sizes; cross_entropy (aten::cross_entropy_loss and its
// pieces aten::log_softmax, aten::_log_softmax, aten::nll_loss, aten::nll_loss_forward,
// aten::nll_loss_nd): logits [..., V] the same way. The dims are named as the built-in targets name
// them (matmul M, N, K; cross_entropy M, V; the others M, N). The text is parsed once.
struct RangeShape {
  std::string target;          // "" when the range names no operator kiln computes
  std::optional<Shape> shape;  // nullopt also when the sizes do not fit the operator
};
RangeShape shape_of_range(std::string_view text);

// shape_of_range's shape, when the range's operator is one that `target` computes.
std::optional<Shape> shape_from_range(std::string_view target, std::string_view text);

}  // namespace kiln::profile
