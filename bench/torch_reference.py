#!/usr/bin/env python3
"""An independent PyTorch implementation of docs/model.md, used to check dualscope.

    torch_reference.py grads CKPT GRADS DATA [DATA ...]   compare `dualscope grads` output
    torch_reference.py step  CKPT CKPT2 GRADS DATA [...]  compare `dualscope step` output
                                                        (GRADS: `dualscope grads` of the same rows)
    torch_reference.py compare GRADS_A GRADS_B            per-tensor relative L2 of two gradient files
                                                        (`grads --engine gpu` against `--engine cpu`)

It reads safetensors with its own small reader (no extra packages), runs the
model with torch.nn.GRU in float64 on the CPU (or float32 for the AdamW step,
as torch.optim.AdamW would run in training), and prints one JSON line with the
per-tensor relative L2 errors.
"""
import json
import math
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F64": np.float64}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    body = raw[8 + n :]
    out = {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        arr = np.frombuffer(body[a:b], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out, meta


def batch(paths):
    rows = [open(p, "rb").read() for p in paths]
    T = max(len(r) for r in rows) - 1
    x = torch.zeros(len(rows), T + 1, dtype=torch.long)
    for i, r in enumerate(rows):
        x[i, : len(r)] = torch.tensor(list(r), dtype=torch.long)
    lens = torch.tensor([len(r) for r in rows])
    mask = (torch.arange(T)[None, :] + 1) < lens[:, None]
    return x, mask


def loss_fn(P, cfg, x, mask):
    L, H, A, NH, W = cfg["layers"], cfg["hidden"], cfg["attn_dim"], cfg["heads"], cfg["window"]
    dh = A // NH
    inp, tgt = x[:, :-1], x[:, 1:]
    B, T = inp.shape
    e = P["embed.weight"][inp]
    gru = torch.nn.GRU(cfg["d_embed"], H, L, batch_first=True).to(e.dtype)
    with torch.no_grad():
        for name, p in gru.named_parameters():
            p.copy_(P["gru." + name])
    # Make the GRU use our leaf tensors so their gradients can be read.
    s, _ = torch.func.functional_call(gru, {k: P["gru." + k] for k, _ in gru.named_parameters()}, (e,))
    q = (s @ P["ctx.q.weight"].T).view(B, T, NH, dh).transpose(1, 2)
    k = (s @ P["ctx.k.weight"].T).view(B, T, NH, dh).transpose(1, 2)
    v = (s @ P["ctx.v.weight"].T).view(B, T, NH, dh).transpose(1, 2)
    scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
    t = torch.arange(T)
    band = (t[None, :] <= t[:, None]) & (t[None, :] > t[:, None] - W)
    scores = scores.masked_fill(~band, float("-inf"))
    a = torch.softmax(scores, dim=-1)
    c = (a @ v).transpose(1, 2).reshape(B, T, A)
    logits = s @ P["head.tok.weight"].T + c @ P["head.ctx.weight"].T + P["head.bias"]
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), tgt.reshape(-1), reduction="none").view(B, T)
    return (ce * mask).sum() / mask.sum()


def rel_l2(a, b):
    a, b = a.double(), b.double()
    den = b.norm().item()
    return (a - b).norm().item() / den if den > 0 else (a - b).norm().item()


def cmd_grads(ckpt, grads_path, data):
    P, meta = read_safetensors(ckpt)
    cfg = json.loads(meta["config"])
    P = {k: v.double().requires_grad_(True) for k, v in P.items()}
    x, mask = batch(data)
    loss = loss_fn(P, cfg, x, mask)
    loss.backward()
    G, gmeta = read_safetensors(grads_path)
    errs = {k: rel_l2(G[k], P[k].grad) for k in P}
    norm = math.sqrt(sum((P[k].grad.double() ** 2).sum().item() for k in P))
    out = {
        "loss_torch": loss.item(),
        "loss_dualscope": float(gmeta.get("loss", "nan")),
        "grad_norm_torch": norm,
        "grad_norm_dualscope": float(gmeta.get("grad_norm", "nan")),
        "max_rel_l2": max(errs.values()),
        "rel_l2": errs,
    }
    out["loss_rel_err"] = abs(out["loss_torch"] - out["loss_dualscope"]) / abs(out["loss_torch"])
    print(json.dumps(out))


def adamw_step(P, grads, lr, clip, wd):
    """torch.optim.AdamW with docs/model.md's groups, after clip_grad_norm_."""
    for k, p in P.items():
        p.grad = grads[k].clone()
    decay = [p for k, p in P.items() if p.dim() == 2 and k != "embed.weight"]
    rest = [p for k, p in P.items() if not (p.dim() == 2 and k != "embed.weight")]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}],
        lr=lr, betas=(0.9, 0.95), eps=1e-8, foreach=False,
    )
    norm = torch.nn.utils.clip_grad_norm_(list(P.values()), clip)
    opt.step()
    return norm.item()


def cmd_step(ckpt, ckpt2, grads_path, data, lr=3e-3, clip=1.0, wd=0.01):
    """Two comparisons with dualscope's `step` output CKPT2:
    own: torch computes its own float32 gradients, then AdamW;
    same_grads: torch's AdamW is fed dualscope's gradients (GRADS), which
    isolates the optimizer from gradient rounding."""
    P0, meta = read_safetensors(ckpt)
    cfg = json.loads(meta["config"])
    Q, _ = read_safetensors(ckpt2)
    P = {k: v.float().clone().requires_grad_(True) for k, v in P0.items()}
    x, mask = batch(data)
    loss = loss_fn(P, cfg, x, mask)
    loss.backward()
    own = {k: p.grad.clone() for k, p in P.items()}
    with torch.no_grad():
        norm_own = adamw_step(P, own, lr, clip, wd)
    diff_own = {k: (Q[k].double() - P[k].detach().double()).abs().max().item() for k in P}
    G, _ = read_safetensors(grads_path)
    R = {k: v.float().clone().requires_grad_(True) for k, v in P0.items()}
    with torch.no_grad():
        adamw_step(R, {k: G[k].float() for k in R}, lr, clip, wd)
    diff_same = {k: (Q[k].double() - R[k].detach().double()).abs().max().item() for k in R}
    ulp = {k: (Q[k].double() - R[k].detach().double()).abs().div(
        torch.finfo(torch.float32).eps * R[k].detach().double().abs().clamp_min(1e-30)).max().item() for k in R}
    moved = max((Q[k].double() - P0[k].double()).abs().max().item() for k in P0)
    print(json.dumps({"loss_torch": loss.item(), "grad_norm_torch": norm_own,
                      "max_abs_update": moved,
                      "own_grads_max_abs_diff": max(diff_own.values()),
                      "same_grads_max_abs_diff": max(diff_same.values()),
                      "same_grads_max_rel_eps": max(ulp.values()),
                      "same_grads_abs_diff": diff_same}))


def cmd_compare(a_path, b_path):
    """Per-tensor relative L2 of gradient file A against B (B the reference)."""
    a, _ = read_safetensors(a_path)
    b, _ = read_safetensors(b_path)
    per = {k: rel_l2(a[k].double(), b[k].double()) for k in b}
    print(json.dumps({"worst_rel_l2": max(per.values()), "worst_tensor": max(per, key=per.get), "per_tensor": per}))


if __name__ == "__main__":
    torch.set_num_threads(max(1, torch.get_num_threads()))
    cmd, *args = sys.argv[1:]
    if cmd == "grads":
        cmd_grads(args[0], args[1], args[2:])
    elif cmd == "step":
        cmd_step(args[0], args[1], args[2], args[3:])
    elif cmd == "compare":
        cmd_compare(args[0], args[1])
    else:
        sys.exit(f"unknown command {cmd}")
