#!/usr/bin/env python3
"""The PyTorch peer of docs/model.md: times the same training step dualscope times.

    dualscope bench --config bench --save-batch b.json --save-checkpoint c.safetensors --json
    torch_peer.py --checkpoint c.safetensors --batch b.json --device cuda --mode eager|graph [--expect-loss L]
        [--tf32] [--amp f16|bf16]

nn.GRU (cuDNN on CUDA), the sliding-window attention as a banded dense softmax,
the two-stream classifier, masked mean cross-entropy, clip_grad_norm_ and
torch.optim.AdamW with docs/model.md's parameter groups. Prints one JSON line:
median ms per step (CUDA events on the GPU, perf_counter on the CPU; on the GPU
also `wall_median_ms`, launch to synchronize, by perf_counter), the first
step's loss, and its relative difference from --expect-loss (dualscope's
`first_loss` on the same checkpoint and batch).
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import read_safetensors  # noqa: E402


class DualStream(torch.nn.Module):
    def __init__(self, cfg, tensors):
        super().__init__()
        self.cfg = cfg
        V, D, H, L, A = cfg["vocab"], cfg["d_embed"], cfg["hidden"], cfg["layers"], cfg["attn_dim"]
        self.embed = torch.nn.Embedding(V, D)
        self.gru = torch.nn.GRU(D, H, L, batch_first=True)
        self.q = torch.nn.Linear(H, A, bias=False)
        self.k = torch.nn.Linear(H, A, bias=False)
        self.v = torch.nn.Linear(H, A, bias=False)
        self.tok = torch.nn.Linear(H, V, bias=False)
        self.ctx = torch.nn.Linear(A, V, bias=False)
        self.bias = torch.nn.Parameter(torch.zeros(V))
        names = {"embed.weight": self.embed.weight, "ctx.q.weight": self.q.weight, "ctx.k.weight": self.k.weight,
                 "ctx.v.weight": self.v.weight, "head.tok.weight": self.tok.weight,
                 "head.ctx.weight": self.ctx.weight, "head.bias": self.bias}
        for n, p in self.gru.named_parameters():
            names["gru." + n] = p
        with torch.no_grad():
            for n, p in names.items():
                p.copy_(tensors[n].float())
        self.by_name = names

    def forward(self, x, mask):
        cfg = self.cfg
        NH, W, A = cfg["heads"], cfg["window"], cfg["attn_dim"]
        dh = A // NH
        inp, tgt = x[:, :-1], x[:, 1:]
        B, T = inp.shape
        s, _ = self.gru(self.embed(inp))
        q = self.q(s).view(B, T, NH, dh).transpose(1, 2)
        k = self.k(s).view(B, T, NH, dh).transpose(1, 2)
        v = self.v(s).view(B, T, NH, dh).transpose(1, 2)
        t = torch.arange(T, device=x.device)
        band = (t[None, :] <= t[:, None]) & (t[None, :] > t[:, None] - W)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
        a = torch.softmax(scores.masked_fill(~band, float("-inf")), dim=-1)
        c = (a @ v).transpose(1, 2).reshape(B, T, A)
        logits = self.tok(s) + self.ctx(c) + self.bias
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="none")
        return (ce.view(B, T) * mask).sum() / mask.sum()


def load_batch(path, device):
    b = json.load(open(path))
    rows, lens = b["tokens"], b["lens"]
    T = max(lens) - 1
    x = torch.zeros(len(rows), T + 1, dtype=torch.long)
    for i, r in enumerate(rows):
        x[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    mask = ((torch.arange(T)[None, :] + 1) < torch.tensor(lens)[:, None]).float()
    return x.to(device), mask.to(device)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--mode", default="eager", choices=["eager", "graph", "compile"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--expect-loss", type=float)
    ap.add_argument("--tf32", action="store_true", help="allow TF32 matmuls (off: plain float32, like dualscope)")
    ap.add_argument("--amp", choices=["f16", "bf16"],
                    help="automatic mixed precision (autocast; f16 with a dynamic GradScaler), the peer of "
                         "dualscope's --precision mixed")
    a = ap.parse_args()
    if a.amp and a.device != "cuda":
        ap.error("--amp needs --device cuda")
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    dev = torch.device(a.device)
    tensors, meta = read_safetensors(a.checkpoint)
    cfg = json.loads(meta["config"])
    model = DualStream(cfg, tensors).to(dev)
    x, mask = load_batch(a.batch, dev)
    decay = [p for n, p in model.by_name.items() if p.dim() == 2 and n != "embed.weight"]
    rest = [p for n, p in model.by_name.items() if not (p.dim() == 2 and n != "embed.weight")]
    cuda = dev.type == "cuda"
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.95), eps=1e-8,
                            capturable=(a.mode == "graph"), fused=cuda or None)
    params = list(model.parameters())
    fwd = torch.compile(model) if a.mode == "compile" else model

    amp_dtype = {"f16": torch.float16, "bf16": torch.bfloat16}.get(a.amp)
    # f16 needs loss scaling; GradScaler's unscale, inf check, skip and scale
    # update all run on the device (fused AdamW takes found_inf), so the step
    # still captures into a CUDA graph.
    scaler = torch.amp.GradScaler("cuda") if a.amp == "f16" else None

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            loss = fwd(x, mask)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
        return loss

    first = step().item()  # the loss of the untouched checkpoint, before any update
    if a.mode == "graph":
        assert cuda, "CUDA graphs need --device cuda"
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=False)
        with torch.cuda.graph(g):
            static_loss = step()
        run = g.replay
    else:
        run = step
    for _ in range(a.warmup):
        run()
    times = []
    # On the GPU also the wall time of each step, launch to synchronize
    # (what dualscope's `median_ms` measures; its device time compares with
    # the CUDA events').
    walls = []
    for _ in range(a.steps):
        if cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            w0 = time.perf_counter()
            e0.record()
            run()
            e1.record()
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - w0) * 1e3)
            times.append(e0.elapsed_time(e1))
        else:
            t0 = time.perf_counter()
            run()
            times.append((time.perf_counter() - t0) * 1e3)
    def median_of(v):
        v = sorted(v)
        n = len(v)
        return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])

    median = median_of(times)
    out = {"peer": "pytorch", "torch": torch.__version__, "device": str(dev), "mode": a.mode, "tf32": a.tf32,
           "amp": a.amp,
           "threads": torch.get_num_threads(), "batch": int(x.shape[0]), "seq_len": int(x.shape[1] - 1),
           "steps": a.steps, "median_ms": median, "first_loss": first}
    if walls:
        out["wall_median_ms"] = median_of(walls)
    if a.expect_loss is not None:
        out["expect_loss"] = a.expect_loss
        out["loss_rel_diff"] = abs(first - a.expect_loss) / abs(a.expect_loss)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
