# The program behind bench/results/2026-11-25-H100-profile-nvtx-shapes.md: GEMMs, an RMSNorm and a
# cross-entropy loss of known shapes under emit_nvtx(record_shapes=True), for `kiln profile` to
# recover their shapes.
import torch
import torch.nn.functional as F

dev, dt = "cuda", torch.float16
x = torch.randn(128, 4096, device=dev, dtype=dt)
w = torch.randn(6144, 4096, device=dev, dtype=dt)
b = torch.randn(6144, device=dev, dtype=dt)
a = torch.randn(512, 14336, device=dev, dtype=dt)
w2 = torch.randn(14336, 4096, device=dev, dtype=dt)
h = torch.randn(2, 64, 4096, device=dev, dtype=dt)
g = torch.ones(4096, device=dev, dtype=dt)
logits = torch.randn(128, 32000, device=dev, dtype=dt)
labels = torch.randint(0, 32000, (128,), device=dev)
torch.cuda.synchronize()
with torch.autograd.profiler.emit_nvtx(record_shapes=True):
    for _ in range(3):
        F.linear(x, w, b)
        torch.mm(a, w2)
        F.rms_norm(h, (4096,), g)
        F.cross_entropy(logits, labels)
    torch.cuda.synchronize()
print("done")
