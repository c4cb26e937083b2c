#!/usr/bin/env python3
"""A small transformer training step for bench/profile_vs_torch.sh.

A 4-layer pre-norm transformer (d=512, 8 heads, FFN 2048, GELU, causal SDPA), vocabulary 32,000,
AdamW, bf16 autocast, random tokens generated on the GPU each step. Two modes:

  --mode plain   run --warmup + --steps steps and nothing else (what `kiln profile` watches);
                 prints the median step time to stderr so the batch can be sized (~50 ms/step).
  --mode torch   run --warmup steps, then --steps steps under torch.profiler (CUDA activity) and
                 print the sum of the CUDA kernel durations as JSON: {"torch_kernel_ns": ...}.
                 Memcpy/memset are not kernels and are left out, as kiln profile leaves them out.

Usage: profile_step.py --mode plain|torch [--steps N] [--warmup W] [--batch B] [--seq S]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, vocab, d, layers, heads, ffn, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(seq, d))
        layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq),
                             persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        x = self.blocks(x, mask=self.mask, is_causal=True)
        return self.head(self.norm(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["plain", "torch"], required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=48)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=32000)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("profile_step: no CUDA device", file=sys.stderr)
        return 2

    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = Model(args.vocab, 512, 4, 8, 2048, args.seq).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, args.vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()

    if args.mode == "plain":
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        if times:
            print(f"profile_step: {args.steps} steps, median {1e3 * statistics.median(times):.1f} ms/step "
                  f"(batch {args.batch}, seq {args.seq})", file=sys.stderr)
        return 0

    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
    # The Chrome trace is the stable interface across torch versions: kernels have cat "kernel"
    # and "dur" in microseconds (with ns decimals).
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)
    events = events.get("traceEvents", events) if isinstance(events, dict) else events
    kernels = [e for e in events if isinstance(e, dict) and e.get("cat") == "kernel" and "dur" in e]
    total_ns = sum(float(e["dur"]) for e in kernels) * 1e3
    print(json.dumps({"torch_kernel_ns": round(total_ns), "kernel_launches": len(kernels),
                      "steps": args.steps}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
