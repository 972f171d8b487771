#!/usr/bin/env python3
"""docs/model.md's dual-stream model as a plain PyTorch nn.Module, and the interop fixture.

    export_pytorch.py write [--out DIR] [--seed N]
        Builds the model with PyTorch's own seeded initialisation, writes DIR/pytorch_tiny.safetensors
        with the `safetensors` package (parameter names from the module's state_dict, the `config`
        metadata WITHOUT batch/seq_len, as an outside exporter writes it), the two row files
        DIR/pytorch_row{0,1}.bin, and DIR/pytorch_tiny.json with the model's loss on those rows
        (float32 and float64) computed here in PyTorch. DIR defaults to tests/fixtures.

    export_pytorch.py check [--fixtures DIR] [--device cpu|cuda|all] [--dualscope BIN [--engines cpu,gpu]]
        Loads the committed fixture into the module (strict: every name and shape), recomputes the
        loss in float32 and float64 on each device, and compares it with the recorded one
        (relative 1e-5 for float32, 1e-10 for float64). With --dualscope, also runs
        `BIN grads --checkpoint ... --data ... --json` on each engine and compares its loss the same
        way. Prints one JSON line; exits 1 on any mismatch.

The rows are cut as `dualscope grads --data A --data B` cuts them: each file is one row of all its
bytes, rows are padded at the end to the longest, T = longest - 1, and position t of row b counts
when t + 1 < len_b. tests/interop.rs checks dualscope against the recorded losses without PyTorch.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
from torch import nn
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file

# The fixture's model: the tiny preset's shape class, smaller still (a ~15 KB file), and a
# window shorter than the rows so that the context buffer slides.
CONFIG = {"vocab": 256, "d_embed": 4, "hidden": 4, "layers": 2, "attn_dim": 4, "heads": 2, "window": 3}
SEED = 20261201
# Two rows of different lengths (padding and the mask matter), bytes 0 and 255 and UTF-8 included.
ROWS = [b"dualscope reads what PyTorch wrote.\n", b"caf\xc3\xa9 \xff\x00 bytes"]
NAME = "pytorch_tiny"
TOL = {"float32": 1e-5, "float64": 1e-10}


class ContextStream(nn.Module):
    """q, k, v projections (no bias) and causal attention over the last `window` positions."""

    def __init__(self, hidden, attn_dim, heads, window):
        super().__init__()
        self.heads, self.window = heads, window
        self.q = nn.Linear(hidden, attn_dim, bias=False)
        self.k = nn.Linear(hidden, attn_dim, bias=False)
        self.v = nn.Linear(hidden, attn_dim, bias=False)

    def forward(self, s):
        b, t, _ = s.shape
        a = self.q.out_features
        dh = a // self.heads

        def split(x):  # [B, T, A] -> [B, NH, T, dh]
            return x.view(b, t, self.heads, dh).transpose(1, 2)

        q, k, v = split(self.q(s)), split(self.k(s)), split(self.v(s))
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        pos = torch.arange(t, device=s.device)
        j, i = pos[None, :], pos[:, None]
        # J_t = {max(0, t-W+1), ..., t}: never empty, so no row of the softmax is all -inf.
        keep = (j <= i) & (j > i - self.window)
        weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
        return (weights @ v).transpose(1, 2).reshape(b, t, a)


class Head(nn.Module):
    """logits = W_tok s + W_ctx c + b_out."""

    def __init__(self, vocab, hidden, attn_dim):
        super().__init__()
        self.tok = nn.Linear(hidden, vocab, bias=False)
        self.ctx = nn.Linear(attn_dim, vocab, bias=False)
        self.bias = nn.Parameter(torch.empty(vocab))
        bound = 1.0 / math.sqrt(hidden + attn_dim)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, s, c):
        return self.tok(s) + self.ctx(c) + self.bias


class DualStream(nn.Module):
    """Byte embedding -> stacked GRU (nn.GRU: gates r, z, n) -> classifier, plus the context stream.

    Its state_dict names are docs/model.md's: embed.weight, gru.weight_ih_l{l}, gru.weight_hh_l{l},
    gru.bias_ih_l{l}, gru.bias_hh_l{l}, ctx.{q,k,v}.weight, head.tok.weight, head.ctx.weight, head.bias.
    """

    def __init__(self, cfg):
        super().__init__()
        assert cfg["attn_dim"] % cfg["heads"] == 0, "attn_dim must be divisible by heads"
        self.embed = nn.Embedding(cfg["vocab"], cfg["d_embed"])
        self.gru = nn.GRU(cfg["d_embed"], cfg["hidden"], cfg["layers"], batch_first=True)
        self.ctx = ContextStream(cfg["hidden"], cfg["attn_dim"], cfg["heads"], cfg["window"])
        self.head = Head(cfg["vocab"], cfg["hidden"], cfg["attn_dim"])

    def forward(self, inputs):
        s, _ = self.gru(self.embed(inputs))  # s_t: the top layer's h_t; h_{-1} = 0
        return self.head(s, self.ctx(s))

    def loss(self, tokens, lens):
        """Mean over the unmasked positions of -log softmax(logits)[next byte]."""
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        logits = self(inputs)
        t = inputs.shape[1]
        mask = (torch.arange(t, device=tokens.device)[None, :] + 1) < lens[:, None]
        nll = -F.log_softmax(logits, dim=-1).gather(-1, targets[..., None]).squeeze(-1)
        return (nll * mask).sum() / mask.sum(), int(mask.sum())


def cut_rows(rows, device):
    """dualscope's batch of whole-file rows: padded at the end to the longest row."""
    longest = max(len(r) for r in rows)
    tokens = torch.zeros(len(rows), longest, dtype=torch.long)
    for b, r in enumerate(rows):
        tokens[b, : len(r)] = torch.tensor(list(r), dtype=torch.long)
    lens = torch.tensor([len(r) for r in rows])
    return tokens.to(device), lens.to(device)


def model_loss(model, rows, dtype, device):
    m = model.to(device=device, dtype=dtype)
    with torch.no_grad():
        loss, n = m.loss(*cut_rows(rows, device))
    return loss.item(), n


def exact_numerics():
    """No TF32 anywhere (cuDNN's GRU uses it by default), deterministic kernels."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)


def paths(folder):
    return (
        os.path.join(folder, NAME + ".safetensors"),
        [os.path.join(folder, f"pytorch_row{i}.bin") for i in range(len(ROWS))],
        os.path.join(folder, NAME + ".json"),
    )


def cmd_write(args):
    exact_numerics()
    torch.manual_seed(args.seed)
    model = DualStream(CONFIG)
    ckpt, row_files, record = paths(args.out)
    os.makedirs(args.out, exist_ok=True)
    state = {k: v.detach().to(torch.float32).contiguous() for k, v in model.state_dict().items()}
    meta = {"config": json.dumps(CONFIG), "exporter": f"scripts/export_pytorch.py (torch {torch.__version__})"}
    save_file(state, ckpt, metadata=meta)
    for path, row in zip(row_files, ROWS):
        with open(path, "wb") as f:
            f.write(row)
    # The losses of the weights as stored (float32), the float64 one from those values cast up,
    # as `dualscope grads --precision f64` computes it.
    loaded = DualStream(CONFIG)
    loaded.load_state_dict(load_file(ckpt), strict=True)
    loss32, n = model_loss(loaded, ROWS, torch.float32, "cpu")
    loss64, _ = model_loss(loaded, ROWS, torch.float64, "cpu")
    out = {
        "checkpoint": os.path.basename(ckpt),
        "data": [os.path.basename(p) for p in row_files],
        "config": CONFIG,
        "seed": args.seed,
        "torch": torch.__version__,
        "n_targets": n,
        "loss_f32": loss32,
        "loss_f64": loss64,
    }
    with open(record, "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    print(json.dumps(out))


def rel(a, b):
    return abs(a - b) / abs(b)


def dualscope_loss(binary, ckpt, row_files, engine, precision):
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [binary, "grads", "--checkpoint", ckpt, "--out", os.path.join(tmp, "g.safetensors"),
               "--engine", engine, "--precision", precision, "--json"]
        for p in row_files:
            cmd += ["--data", p]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
        return json.loads(r.stdout)["loss"]


def cmd_check(args):
    exact_numerics()
    ckpt, row_files, record_path = paths(args.fixtures)
    with open(record_path) as f:
        record = json.load(f)
    with safe_open(ckpt, framework="pt") as f:
        cfg = json.loads(f.metadata()["config"])
    assert "batch" not in cfg and "seq_len" not in cfg, "the fixture's config must leave out batch/seq_len"
    rows = []
    for p in row_files:
        with open(p, "rb") as f:
            rows.append(f.read())
    model = DualStream(cfg)
    model.load_state_dict(load_file(ckpt), strict=True)
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    if "cuda" in devices and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False")
    results, ok = [], True
    for device in devices:
        for dtype, key in [(torch.float32, "loss_f32"), (torch.float64, "loss_f64")]:
            loss, n = model_loss(model, rows, dtype, device)
            name = str(dtype).removeprefix("torch.")
            good = rel(loss, record[key]) <= TOL[name] and n == record["n_targets"]
            ok &= good
            results.append({"who": "torch", "device": device, "dtype": name, "loss": loss,
                            "expected": record[key], "rel_err": rel(loss, record[key]), "ok": good})
    if args.dualscope:
        for engine in args.engines.split(","):
            for precision, key in [("f32", "loss_f32"), ("f64", "loss_f64")]:
                if engine == "gpu" and precision == "f64":
                    continue  # the GPU engine computes in float32 only
                loss = dualscope_loss(args.dualscope, ckpt, row_files, engine, precision)
                tol = TOL["float32" if precision == "f32" else "float64"]
                good = rel(loss, record[key]) <= tol
                ok &= good
                results.append({"who": "dualscope", "engine": engine, "precision": precision, "loss": loss,
                                "expected": record[key], "rel_err": rel(loss, record[key]), "ok": good})
    print(json.dumps({"torch": torch.__version__, "ok": ok, "results": results}))
    sys.exit(0 if ok else 1)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    fixtures = os.path.join(os.path.dirname(here), "tests", "fixtures")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write the fixture checkpoint, rows and recorded loss")
    w.add_argument("--out", default=fixtures)
    w.add_argument("--seed", type=int, default=SEED)
    c = sub.add_parser("check", help="recompute the fixture's loss and compare with the record")
    c.add_argument("--fixtures", default=fixtures)
    c.add_argument("--device", choices=["cpu", "cuda", "all"], default="cpu")
    c.add_argument("--dualscope", help="a dualscope binary to compare too")
    c.add_argument("--engines", default="cpu", help="dualscope engines, comma-separated (cpu,gpu)")
    args = p.parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    cmd_write(args) if args.cmd == "write" else cmd_check(args)


if __name__ == "__main__":
    main()
