#!/usr/bin/env python3
"""What a parallel-in-time GRU forward would cost (issue 19's DEER idea), measured.

    deer_probe.py --checkpoint C.safetensors --text FILE --seq-len T [--offset N] [--full-max-iter K]

Newton's method over the whole sequence (DEER): guess every h_t, linearise the
cell around the guess (h_t = J_t h_{t-1} + c_t) and solve that linear recurrence
with a parallel prefix scan, log2(T) levels. Two variants: the full Jacobian
(J_t dense H x H, each scan level a batched H x H product) and the diagonal one
(quasi-DEER: J_t's diagonal, each level element-wise). For layer 0 and layer 1
of the checkpoint on real text (B = 1, as B=1 T=512 in docs/speed.md) it prints
one JSON line per variant and layer: the iterations until every h_t is within
--tol of the sequential evaluation (float64 on the GPU), and the GPU time of
one iteration in float32 and with TF32 products (CUDA events, median of
5), so that
iterations x time is what the variant would cost against the sequential
recurrence that dualscope runs.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import read_safetensors  # noqa: E402


def weights(P, layer, dtype, dev):
    g = lambda n: P[f"gru.{n}_l{layer}"].to(dev, dtype)  # noqa: E731
    return g("weight_ih"), g("weight_hh"), g("bias_ih"), g("bias_hh")


def cell_parts(gi, h_prev, w_hh, b_hh):
    """The gates of every step at once, for previous states h_prev [T, H]."""
    H = h_prev.shape[1]
    gh = h_prev @ w_hh.T + b_hh
    r = torch.sigmoid(gi[:, :H] + gh[:, :H])
    z = torch.sigmoid(gi[:, H : 2 * H] + gh[:, H : 2 * H])
    n = torch.tanh(gi[:, 2 * H :] + r * gh[:, 2 * H :])
    return gh, r, z, n


def sequential(gi, w_hh, b_hh):
    T, H = gi.shape[0], w_hh.shape[1]
    h = torch.zeros(H, dtype=gi.dtype, device=gi.device)
    out = []
    for t in range(T):
        _, r, z, n = cell_parts(gi[t : t + 1], h[None], w_hh, b_hh)
        h = ((1 - z) * n + z * h[None])[0]
        out.append(h)
    return torch.stack(out)


def jacobian(gh, r, z, n, h_prev, w_hh, full):
    """d h_t / d h_{t-1} of every step: [T, H, H] (full) or its diagonal [T, H]."""
    H = h_prev.shape[1]
    whr, whz, whn = w_hh[:H], w_hh[H : 2 * H], w_hh[2 * H :]
    c_z = (h_prev - n) * z * (1 - z)
    c_r = (1 - z) * (1 - n * n) * gh[:, 2 * H :] * r * (1 - r)
    c_n = (1 - z) * (1 - n * n) * r
    if full:
        J = c_z[:, :, None] * whz + c_r[:, :, None] * whr + c_n[:, :, None] * whn
        return J + torch.diag_embed(z)
    return z + c_z * whz.diagonal() + c_r * whr.diagonal() + c_n * whn.diagonal()


def scan(J, c, full):
    """h_t = J_t h_{t-1} + c_t from h_{-1} = 0, by log2(T) doubling levels."""
    A, b = J.clone(), c.clone()
    T, d = A.shape[0], 1
    while d < T:
        if full:
            nb = torch.bmm(A[d:], b[:-d, :, None])[:, :, 0] + b[d:]
            nA = torch.bmm(A[d:], A[:-d])
        else:
            nb = A[d:] * b[:-d] + b[d:]
            nA = A[d:] * A[:-d]
        A = torch.cat([A[:d], nA])
        b = torch.cat([b[:d], nb])
        d *= 2
    return b


def iteration(gi, h, w_hh, b_hh, full):
    h_prev = torch.cat([torch.zeros_like(h[:1]), h[:-1]])
    gh, r, z, n = cell_parts(gi, h_prev, w_hh, b_hh)
    f = (1 - z) * n + z * h_prev
    J = jacobian(gh, r, z, n, h_prev, w_hh, full)
    Jh = torch.bmm(J, h_prev[:, :, None])[:, :, 0] if full else J * h_prev
    return scan(J, f - Jh, full)


def converge(gi, w_hh, b_hh, h_seq, full, tol, max_iter):
    h = torch.zeros_like(h_seq)
    for k in range(1, max_iter + 1):
        h = iteration(gi, h, w_hh, b_hh, full)
        err = (h - h_seq).abs().max().item()
        if not torch.isfinite(torch.tensor(err)):
            return k, err, False
        if err <= tol:
            return k, err, True
    return max_iter, err, False


def time_iteration(gi, h, w_hh, b_hh, full):
    times = []
    for _ in range(6):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        iteration(gi, h, w_hh, b_hh, full)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times[1:])[2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--full-max-iter", type=int, default=30, help="0: skip the full-Jacobian variant")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"
    P, _ = read_safetensors(a.checkpoint)
    raw = open(a.text, "rb").read()[a.offset : a.offset + a.seq_len]
    if len(raw) < a.seq_len:
        sys.exit(f"--text: {a.text} holds fewer than {a.offset + a.seq_len} bytes")
    x = torch.tensor(list(raw), dtype=torch.long, device=dev)
    u64 = P["embed.weight"].to(dev, torch.float64)[x]
    for layer in range(2):
        w_ih, w_hh, b_ih, b_hh = weights(P, layer, torch.float64, dev)
        gi = u64 @ w_ih.T + b_ih
        h_seq = sequential(gi, w_hh, b_hh)
        w32 = [t.float() for t in (gi, w_hh, b_hh)]
        for full in (False, True) if a.full_max_iter > 0 else (False,):
            # The diagonal variant is exact after T iterations at the latest.
            max_iter = a.full_max_iter if full else a.seq_len + 1
            k, err, ok = converge(gi, w_hh, b_hh, h_seq, full, a.tol, max_iter)
            ms = time_iteration(w32[0], h_seq.float(), w32[1], w32[2], full)
            torch.backends.cuda.matmul.allow_tf32 = True
            ms_tf32 = time_iteration(w32[0], h_seq.float(), w32[1], w32[2], full)
            torch.backends.cuda.matmul.allow_tf32 = False
            print(json.dumps({"layer": layer, "variant": "full" if full else "diagonal", "T": a.seq_len,
                              "iterations": k, "converged": ok, "max_err": err, "iteration_ms_f32": ms,
                              "iteration_ms_tf32": ms_tf32, "estimate_ms": k * ms,
                              "estimate_ms_tf32": k * ms_tf32}), flush=True)
        u64 = h_seq


if __name__ == "__main__":
    main()
