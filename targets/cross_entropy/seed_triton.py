# cross_entropy seed (Triton): one program per row; the row max, then the sum of exp(x - max),
# in chunks of BLOCK columns, fp32; loss = (max + log(sum)) - x[label], the reference's formula
# (NaN or +Inf in a row, or an all -Inf row, give NaN); a label outside [0, V) gives NaN.
import triton
import triton.language as tl


@triton.jit
def cross_entropy_seed(logits, labels, loss, M, V, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = logits + row * V
    mx = tl.full([BLOCK], float("-inf"), tl.float32)
    for c in range(0, V, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(xr + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        mx = tl.maximum(mx, v)
    m = tl.max(mx, axis=0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, V, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(xr + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        acc += tl.where(cols < V, tl.exp(v - m), 0.0)
    label = tl.load(labels + row).to(tl.int64)
    ok = (label >= 0) & (label < V)
    picked = tl.load(xr + label, mask=ok, other=0.0).to(tl.float32)
    result = (m + tl.log(tl.sum(acc, axis=0))) - picked
    tl.store(loss + row, tl.where(ok, result, float("nan")))
