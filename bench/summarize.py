#!/usr/bin/env python3
"""Summaries of bench/device.sh's suites: reads one suite's raw folder and
prints the lines of its results file (bench/device.sh appends them to
OUT/SUITE.txt, after the header).

    summarize.py SUITE RAW          the whole suite's summary
    summarize.py bench REPORT LABEL [KERNELS]
                                    one `bench --json` report's GPU step in a
                                    few lines (KERNELS: a regex of kernel names
                                    whose per-kernel medians to print)

RAW holds what the driver's `run` wrote: NAME.out (stdout: a JSON report for
most commands), NAME.err (stderr), runs.tsv (name, exit code, seconds, one run
a line, in the order they ran) and, per suite, the few files named below.
Standard library only: the device host's Python has no extra packages beyond
PyTorch, and this machine's none."""
import collections
import glob
import json
import math
import os
import re
import statistics
import sys

RAW = "."


def num(x):
    """A JSON number, or a string such as "inf" / "NaN" (serde's non-finite)."""
    if isinstance(x, (int, float)):
        return float(x)
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def f(x, digits=2):
    return "-" if x is None else f"{num(x):.{digits}f}"


def load(name, ext=".out"):
    """The JSON in RAW/NAME.out (or the last JSON line of it), or None."""
    path = os.path.join(RAW, name + ext)
    try:
        text = open(path).read()
    except OSError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        for line in reversed(text.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    pass
    return None


def jsonl(name):
    rows = []
    try:
        for line in open(os.path.join(RAW, name + ".out")):
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return rows


def runs():
    """(name, rc, seconds) of every run, in order."""
    out = []
    try:
        for line in open(os.path.join(RAW, "runs.tsv")):
            p = line.rstrip("\n").split("\t")
            if len(p) >= 3:
                out.append((p[0], p[1], p[2]))
    except OSError:
        pass
    return out


def rc_of(name):
    for n, rc, secs in runs():
        if n == name:
            return rc, secs
    return "-", "-"


def err_tail(name, n=1):
    try:
        lines = [l.strip() for l in open(os.path.join(RAW, name + ".err")) if l.strip()]
    except OSError:
        return "no stderr"
    return " | ".join(lines[-n:]) if lines else "empty stderr"


def gpu(report):
    """The GPU engine's block of a `bench --json` report."""
    return engine(report, "gpu")


def engine(report, which):
    if not report:
        return None
    if report.get("engine") == which:  # an older one-engine report
        return report
    for e in report.get("engines", []):
        if e.get("engine") == which:
            return e
    return None


def tags():
    """(tag, flags) of the shapes the driver ran, from RAW/shapes.tsv."""
    out = []
    try:
        for line in open(os.path.join(RAW, "shapes.tsv")):
            p = line.rstrip("\n").split("\t")
            if len(p) == 2:
                out.append((p[0], p[1]))
    except OSError:
        pass
    return out


# ---------------------------------------------------------------- bench, ab


def bench_lines(path, label, kernels="recurrence"):
    try:
        g = gpu(json.load(open(path)))
    except (OSError, ValueError) as e:
        return [f"  {label}: no report ({e})"]
    if g is None:
        return [f"  {label}: no GPU engine in the report"]
    rec = g.get("recurrence") or {}
    out = [f"  {label:<28} replay {f(g.get('replay_median_ms'), 3)} ms, device {f(g.get('replay_device_median_ms'), 3)};"
           f" wall {f(g.get('median_ms'), 3)}, device {f(g.get('device_median_ms'), 3)}; mode {rec.get('mode')},"
           f" product {rec.get('product')}, grid loads {rec.get('grid_loads')}, waves {rec.get('wave_loads')};"
           f" recurrence kernels {f(rec.get('recurrence_ms'), 3)} ms; fallback {rec.get('fallback')};"
           f" first loss {g.get('first_loss')}"]
    try:
        pat = re.compile(kernels)
    except re.error:
        pat = re.compile("recurrence")
    for k in g.get("kernels_ms", []):
        if pat.search(k.get("kernel", "")):
            out.append(f"      {num(k['ms']):8.4f} ms  {k['kernel']}")
    return out


def summary_bench(argv):
    print("\n".join(bench_lines(argv[0], argv[1], argv[2] if len(argv) > 2 else "recurrence")))


# ---------------------------------------------------------------- speed


def torch_rows(tag):
    rows = []
    for name, _rc, _s in runs():
        if name.startswith(tag + "-torch-"):
            rows.extend(jsonl(name))
    return rows


def summary_speed():
    print("Milliseconds per training step, medians; dualscope's step replayed, wall (device);")
    print("PyTorch's figures are CUDA events (the CPU's perf_counter).")
    print()
    print("| shape | dualscope CPU | f32 | f32 / CPU | mixed | PyTorch f32 | TF32 | AMP f16 | mixed against PyTorch's best |")
    print("|---|---|---|---|---|---|---|---|---|")
    details = []
    for tag, flags in tags():
        both = load(tag + "-f32")
        mixed = gpu(load(tag + "-mixed"))
        cpu, g = engine(both, "cpu"), engine(both, "gpu")
        shape = f"{tag} ({flags})"
        if both:
            shape = f"{tag} B={both.get('batch')} T={both.get('seq_len')}"
        rows = torch_rows(tag)
        cuda = [r for r in rows if r.get("device") == "cuda"]

        def best(pred):
            xs = [r for r in cuda if pred(r)]
            return min(xs, key=lambda r: r["median_ms"]) if xs else None
        t32 = best(lambda r: not r.get("tf32") and not r.get("amp"))
        ttf = best(lambda r: r.get("tf32") and not r.get("amp"))
        tamp = best(lambda r: r.get("amp") == "f16")
        tbest = min(cuda, key=lambda r: r["median_ms"]) if cuda else None
        cpu_ms = cpu.get("median_ms") if cpu else None
        f32_ms = g.get("replay_median_ms") if g else None
        mx_ms = mixed.get("replay_median_ms") if mixed else None
        ratio = f"{num(cpu_ms) / num(f32_ms):.1f}×" if cpu_ms and f32_ms else "-"
        vs = f"{num(tbest['median_ms']) / num(mx_ms):.2f}×" if tbest and mx_ms else "-"
        cell = lambda e: f"{f(e.get('replay_median_ms'))} ({f(e.get('replay_device_median_ms'))})" if e else "-"
        tc = lambda r: (f"{num(r['median_ms']):.2f}" + ("" if r.get("mode") == "graph" else f" {r.get('mode')}")) if r else "-"
        print(f"| {shape} | {f(cpu_ms, 1)} | {cell(g)} | {ratio} | {cell(mixed)} | {tc(t32)} | {tc(ttf)} | {tc(tamp)} | {vs} |")
        # The detail lines: what the old one-run table printed per shape.
        if both and cpu and g:
            details.append(
                f"{tag}: cpu {f(cpu_ms, 1)} ms (p10 {f(cpu.get('p10_ms'), 1)}, p90 {f(cpu.get('p90_ms'), 1)}); "
                f"f32 recorded {f(g.get('median_ms'))} (device {f(g.get('device_median_ms'))}), replayed "
                f"{f(f32_ms)} (device {f(g.get('replay_device_median_ms'))}); speedup {f(both.get('speedup'), 1)}x, "
                f"replayed {f(both.get('speedup_replay'), 1)}x; timed per kernel {f(g.get('instrumented_median_ms'))} "
                f"(device sum {f(g.get('instrumented_device_median_ms'))}); first loss {g.get('first_loss')}; "
                f"recurrence {json.dumps(g.get('recurrence'))}")
        else:
            details.append(f"{tag}: no `bench --engine both` report (exit {rc_of(tag + '-f32')[0]}: {err_tail(tag + '-f32')})")
        for r in rows:
            flags_ = (" tf32" if r.get("tf32") else "") + (f" amp {r['amp']}" if r.get("amp") else "")
            wall = f", wall {num(r['wall_median_ms']):.2f}" if "wall_median_ms" in r else ""
            details.append(f"   torch {r.get('device')} {r.get('mode')}{flags_}: {num(r['median_ms']):.2f} ms{wall} "
                           f"(loss rel diff {num(r.get('loss_rel_diff', float('nan'))):.1e})")
        if mixed:
            details.append(
                f"   dualscope mixed: recorded {f(mixed.get('median_ms'))} (device {f(mixed.get('device_median_ms'))}), "
                f"replayed {f(mx_ms)} (device {f(mixed.get('replay_device_median_ms'))}); timed per kernel "
                f"{f(mixed.get('instrumented_median_ms'))} (device sum {f(mixed.get('instrumented_device_median_ms'))}); "
                f"first loss {mixed.get('first_loss')}; recurrence {json.dumps(mixed.get('recurrence'))}")
        else:
            details.append(f"   dualscope mixed: missing (exit {rc_of(tag + '-mixed')[0]}: {err_tail(tag + '-mixed')})")
    print()
    print("\n".join(details))


# ---------------------------------------------------------------- floor


def products(g):
    return sum(num(k["ms"]) for k in g.get("kernels_ms", []) if k["kernel"].startswith("gemm"))


def rec_kernels(g):
    return sum(num(k["ms"]) for k in g.get("kernels_ms", []) if "recurrence" in k["kernel"])


def speed_targets():
    """PyTorch's best per shape from a `speed` suite run beside this one (`speed,floor`), or {}."""
    global RAW
    here = RAW
    RAW = os.path.join(os.path.dirname(os.path.abspath(here)), "speed")
    out = {}
    try:
        if os.path.isdir(RAW):
            for tag, _flags in tags():
                cuda = [r for r in torch_rows(tag) if r.get("device") == "cuda"]
                if cuda:
                    out[tag] = min(num(r["median_ms"]) for r in cuda)
    finally:
        RAW = here
    return out


def summary_floor():
    for tag, best in speed_targets().items():
        print(f"{tag}: PyTorch's best on this card {best:.2f} ms (the speed suite beside this one): 2× needs ≤ {best / 2:.2f} ms")
    def eng(name):
        r = load(name)
        if r is None:
            print(f"{name}: no report (exit {rc_of(name)[0]}: {err_tail(name)})")
            return None, None
        return r, (r.get("engines") or [None])[0]
    probes_seen = False
    for tag, _flags in tags():
        _top, plain = eng(tag + "-probe")
        _t2, ng = eng(tag + "-noglobal")
        if plain and ng:
            print(f"{tag}: step replayed {f(plain.get('replay_median_ms'), 3)} ms; recurrences {rec_kernels(plain):.3f}; "
                  f"products {products(plain):.3f} ms, without global loads {products(ng):.3f} ms")
    for tag, _flags in tags():
        top, g = eng(tag + "-probe")
        _t2, ng = eng(tag + "-noglobal")
        if not g:
            continue
        r = g.get("recurrence") or {}
        T, layers = top.get("seq_len", 0), 2
        print(f"{tag}: barrier {r.get('barrier_us')} us x {r.get('barriers_per_step')} = floor {r.get('floor_ms')} ms")
        grid = r.get("grid_cm_probe") or {}
        fw, bw = r.get("fwd_wave_probe") or {}, r.get("bwd_wave_probe") or {}
        if grid or fw or bw:
            probes_seen = True
        for k in sorted(grid):
            print(f"  {k:36s} {num(grid[k]):7.3f} us/step")
        if "fwd_no_products_us" in grid and "bwd_no_products_us" in grid:
            nop = layers * T * (grid["fwd_no_products_us"] + grid["bwd_no_products_us"]) / 1e3
            whole = layers * T * (grid.get("fwd_whole_us", 0) + grid.get("bwd_whole_us", 0)) / 1e3
            print(f"{tag} recurrences from the probe (per-layer grid kernels): whole {whole:.3f} ms, products off {nop:.3f} ms")
            if ng:
                print(f"{tag} floor: recurrences without products {nop:.3f} + products without global loads "
                      f"{products(ng):.3f} = {nop + products(ng):.3f} ms")
            if "fwd_no_operand_loads_us" in grid and "bwd_no_operand_loads_us" in grid:
                nol = layers * T * (grid["fwd_no_operand_loads_us"] + grid["bwd_no_operand_loads_us"]) / 1e3
                print(f"{tag} recurrences without their operand loads (products on zeros): {nol:.3f} ms")
        for name, d in [("fwd", fw), ("bwd", bw)]:
            for k in sorted(d):
                print(f"  {name}_{k:32s} {num(d[k]):7.3f} us/interval")
        # T + 1 forward intervals, T + 2 backward (FWD_WAVE_LAG, BWD_WAVE_LAG);
        # the backward's parts on its probe variant (the one the step runs) where measured.
        for part in ["no_products_us", "operand_loads_only_us", "no_operand_loads_us", "whole_us"]:
            bpart = "probe_" + part if "probe_" + part in bw else part
            if part in fw and bpart in bw:
                wave = ((T + 1) * fw[part] + (T + 2) * bw[bpart]) / 1e3
                extra = f" + products without global loads {products(ng):.3f} = {wave + products(ng):.3f} ms" if ng else ""
                print(f"{tag} wavefronts, {part[:-3]}: {wave:.3f} ms{extra}")
    if not probes_seen:
        print("No probe figures in the reports: the probes (DUALSCOPE_GRID_PROBE, DUALSCOPE_COOPMAT_PROBE)")
        print("are built only with `cargo build --release --features lab`; rebuild the binary with it.")


# ---------------------------------------------------------------- controller


def median_log(name):
    v = load(name)
    try:
        ms = sorted(num(e["ms"]) for e in v["log"][5:] if isinstance(e.get("ms"), (int, float)))
        return f"{ms[len(ms) // 2]:.2f}" if ms else "-"
    except (TypeError, KeyError):
        return "-"


def summary_controller():
    shape = open(os.path.join(RAW, "shape.txt")).read().strip() if os.path.exists(os.path.join(RAW, "shape.txt")) else "?"
    print(f"{shape}; ms per step (medians; train: the log's, the first 5 steps left out)")
    print()
    print("| precision | bare (wall / device) | replayed (wall / device) | controller's path, bench (wall / device) | train, split (default) | train, DUALSCOPE_HOST_NORMS=1 | train --no-controller |")
    print("|---|---|---|---|---|---|---|")
    over = []
    for p in ["mixed", "f32"]:
        g = gpu(load(f"bench-{p}")) or {}
        pair = lambda a, b: f"{f(g.get(a))} / {f(g.get(b))}"
        print(f"| {p} | {pair('median_ms', 'device_median_ms')} | {pair('replay_median_ms', 'replay_device_median_ms')} | "
              f"{pair('controller_median_ms', 'controller_device_median_ms')} | {median_log(f'train-{p}-split')} | "
              f"{median_log(f'train-{p}-host')} | {median_log(f'train-{p}-none')} |")
        rep, split = g.get("replay_median_ms"), median_log(f"train-{p}-split")
        if rep and split != "-":
            over.append(f"{p} {100 * (float(split) / num(rep) - 1):+.1f} %")
    print()
    print("train's default path over the replayed step: " + (", ".join(over) or "-"))


def summary_calibration():
    for d in sorted(glob.glob(os.path.join(RAW, "cal-*"))):
        if not os.path.isdir(d):
            continue
        name = os.path.basename(d)
        rc, secs = rc_of(name)
        try:
            steps = [json.loads(l) for l in open(f"{d}/log.jsonl") if l.strip()]
        except OSError:
            print(f"{name}: no log (exit {rc}: {err_tail(name)})")
            continue
        try:
            acts = [json.loads(l) for l in open(f"{d}/controller.jsonl") if l.strip()]
        except OSError:
            acts = []
        kinds = collections.Counter(a["action"] for a in acts)
        last = sum(s["loss"] for s in steps[-50:]) / max(1, len(steps[-50:]))
        minf = min((a.get("lr_factor") for a in acts if a.get("lr_factor") is not None), default=1.0)
        print(f"{name} exit {rc}: {len(steps)} steps in {secs} s, mean loss of the last 50 {last:.4f}, "
              f"actions {len(acts)} {dict(kinds)}, lowest lr factor {minf}")
        zs = sorted(s["risk_z"] for s in steps if s.get("risk_z") is not None)
        if zs:
            q = lambda x: zs[min(len(zs) - 1, int(x * len(zs)))]
            above = {t: sum(z > t for z in zs) for t in (3.5, 4, 5, 6, 7, 8, 10, 12)}
            print(f"    risk z over {len(zs)} judged steps: median {q(0.5):.2f}, p99 {q(0.99):.2f}, max {zs[-1]:.2f}; "
                  f"steps above z: {above}")
            worst = sorted((s for s in steps if s.get("risk_z") is not None), key=lambda s: -s["risk_z"])[:5]
            print("    largest: " + ", ".join(f"step {s['step']} z {s['risk_z']:.2f} ({s.get('risk_of')})" for s in worst))
        for a in acts[:40]:
            print(f"    step {a['step']:>5} {a['action']}: {a['reason'][:150]}")


# ---------------------------------------------------------------- validate


def validation_line(name):
    try:
        lines = [l.strip() for l in open(os.path.join(RAW, name + ".err")) if l.startswith("dualscope: validation")]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def ids(name):
    try:
        text = open(os.path.join(RAW, name + ".err")).read()
    except OSError:
        return ""
    c = collections.Counter(re.findall(r"VUID-[A-Za-z0-9_-]*|SYNC-[A-Za-z0-9_-]*", text))
    return " ".join(f"{n} {k}" for k, n in sorted(c.items()))


def summary_validate():
    total_err, nonzero, lines = 0, [], []
    for name, rc, secs in runs():
        v = validation_line(name)
        m = re.search(r"(\d+) error\(s\)", v)
        if m:
            total_err += int(m.group(1))
        status = ""
        r = load(name)
        if isinstance(r, dict) and "rungs" in r:
            status = f" ladder {r.get('status')}"
        if name.startswith("test-"):
            try:
                res = [l.strip() for l in open(os.path.join(RAW, name + ".out")) if l.startswith("test result")]
            except OSError:
                res = []
            status = " " + ("; ".join(res) or "no test result line")
        if rc != "0":
            nonzero.append(f"{name} ({rc})")
        lines.append(f"{name:<44} rc={rc:<3} {secs:>5}s ids:[{ids(name)}]{status} {v or 'no validation line: ' + err_tail(name)}")
    print("\n".join(lines))
    print()
    print(f"{len(lines)} runs, {total_err} validation error(s) in all; non-zero exits: {', '.join(nonzero) or 'none'}"
          " (a replay of a capture taken on a planted event exits 1 by design)")


# ---------------------------------------------------------------- peer, cpu


def rows_of(prefix):
    """The JSON lines of every run whose name starts with PREFIX, each with "run": its name."""
    out = []
    for name, _rc, _s in runs():
        if name.startswith(prefix):
            for r in jsonl(name):
                r["run"] = name
                out.append(r)
    return out


def loss_rel(r):
    return abs(r["loss_dualscope"] - r["loss_torch"]) / abs(r["loss_torch"])


def train_compare():
    g, c = load("train-gpu"), load("train-cpu")
    if not (g and c):
        return
    gl = [s["loss"] for s in g["log"]]
    cl = [s["loss"] for s in c["log"]]
    med = lambda v: sorted(s["ms"] for s in v["log"])[len(v["log"]) // 2]
    print(f"train, {len(gl)} steps on both engines: mean loss of the first ten GPU {g['mean_loss_first10']:.3f} / "
          f"CPU {c['mean_loss_first10']:.3f}, of the last ten {g['mean_loss_last10']:.3f} / {c['mean_loss_last10']:.3f}; "
          f"skipped {g['skipped']} / {c['skipped']}; largest per-step loss difference "
          f"{max(abs(a - b) for a, b in zip(gl, cl)):.3f}; median ms/step {med(g):.1f} / {med(c):.1f}")


def summary_peer():
    vs_cpu = rows_of("grads-gpu-vs-cpu-")
    if vs_cpu:
        w = max(vs_cpu, key=lambda r: r["worst_rel_l2"])
        print(f"grads --engine gpu against --engine cpu: worst per-tensor rel L2 {w['worst_rel_l2']:.1e} "
              f"({w['worst_tensor']}, {w['run']}; contract 1e-4), {len(vs_cpu)} checkpoints")
    g = rows_of("grads-gpu-vs-torch-")
    if g:
        print(f"GPU gradients against bench/torch_reference.py (float64), {len(g)} checkpoints: worst per-tensor rel L2 "
              f"{max(r['max_rel_l2'] for r in g):.1e}; loss rel error {max(loss_rel(r) for r in g):.1e}")
    s = rows_of("step-gpu-vs-torch-")
    if s:
        print(f"step --engine gpu against torch.optim.AdamW fed the same gradients: max abs difference "
              f"{max(r['same_grads_max_abs_diff'] for r in s):.1e} (with torch's own f32 gradients "
              f"{max(r['own_grads_max_abs_diff'] for r in s):.1e})")
    train_compare()
    for tag, _flags in tags():
        both = load(tag + "-both")
        if not both:
            continue
        cpu, g = engine(both, "cpu"), engine(both, "gpu")
        print(f"{tag} B={both.get('batch')} T={both.get('seq_len')}: dualscope CPU {f(cpu and cpu.get('median_ms'), 1)} ms, "
              f"GPU f32 replayed {f(g and g.get('replay_median_ms'))}")
        for r in torch_rows(tag):
            flags_ = (" tf32" if r.get("tf32") else "") + (f" amp {r['amp']}" if r.get("amp") else "")
            wall = f", wall {num(r['wall_median_ms']):.2f}" if "wall_median_ms" in r else ""
            print(f"   torch {r.get('device')} {r.get('mode')}{flags_}: {num(r['median_ms']):.2f} ms{wall} "
                  f"(first loss rel diff {num(r.get('loss_rel_diff', float('nan'))):.1e})")


def summary_cpu():
    try:
        print(open(os.path.join(RAW, "host.txt")).read().strip())
    except OSError:
        pass
    for prec in ("f32", "f64"):
        rs = rows_of(f"grads-check-{prec}-")
        if rs:
            print(f"grads {prec} against torch float64 ({len(rs)} checkpoints): worst per-tensor rel L2 "
                  f"{max(r['max_rel_l2'] for r in rs):.1e}, loss rel error {max(loss_rel(r) for r in rs):.1e}")
    s = rows_of("step-check-")
    if s:
        print(f"step against torch.optim.AdamW fed the same gradients: max abs difference "
              f"{max(r['same_grads_max_abs_diff'] for r in s):.1e}; with torch's own f32 gradients "
              f"{max(r['own_grads_max_abs_diff'] for r in s):.1e}")
    for tag, _flags in tags():
        b = load(tag + "-cpu")
        c = engine(b, "cpu")
        if c:
            print(f"bench --engine cpu {tag} B={b.get('batch', c.get('batch'))} T={b.get('seq_len', c.get('seq_len'))}: "
                  f"median {f(c.get('median_ms'), 1)} ms (p10 {f(c.get('p10_ms'), 1)}, p90 {f(c.get('p90_ms'), 1)}), "
                  f"{b.get('threads', c.get('threads'))} threads")
        else:
            print(f"bench --engine cpu {tag}: no report (exit {rc_of(tag + '-cpu')[0]}: {err_tail(tag + '-cpu')})")


# ---------------------------------------------------------------- triage


def summary_triage():
    for name, rc, secs in runs():
        if name.startswith("captures-replay-") or name.startswith("trained-replay-"):
            cap = load(name, ".capture.json")
            v = load(name)
            head = f"{name}: exit {rc}, {secs} s"
            if cap:
                head += f"; step {cap.get('step')} [{','.join(cap.get('triggers', []))}] planted {cap.get('planted')}"
            if v:
                print(f"{head}: {v.get('verdict')} (rule {v.get('rule')}) — {str(v.get('reason'))[:200]}")
            else:
                print(f"{head}: {err_tail(name)}")
        elif name.startswith("drift-"):
            r = load(name)
            print(f"{name}: exit {rc}, {secs} s")
            if not r:
                print(f"  {err_tail(name)}")
                continue
            steps = r["steps"]
            ratio = lambda s: num(s["divergence"][s["worst"]]) / num(s["envelope"][s["worst"]])
            w = max(steps, key=ratio)
            o = r.get("first_outside")
            print(f"  {len(steps)} steps, {r['precision']} on {r['gemm_path']}, envelope K={r['envelope']['k']} x ratio {r['envelope']['ratio']}")
            print("  first outside: " + ("none" if o is None else
                  f"step {o['step']}, {o['tensor']}: {num(o['divergence']):.2e} > {num(o['envelope']):.2e} ({len(o['tensors'])} tensors outside)"))
            print(f"  worst divergence/envelope: {ratio(w):.3f} at step {w['step']} ({r['tensors'][w['worst']]['name']})")
            print(f"  largest divergence {max(max(map(num, s['divergence'])) for s in steps):.2e}, "
                  f"largest reference {max(max(map(num, s['reference'])) for s in steps):.2e}, "
                  f"largest envelope {max(max(map(num, s['envelope'])) for s in steps):.2e}")
            last = steps[-1]
            print(f"  last loss: gpu {num(last['loss_gpu']):.4f}  cpu32 {num(last['loss_cpu32']):.4f}  cpu64 {num(last['loss_cpu64']):.4f}")
        elif name.startswith("scan-") or name == "trained-scan":
            r = load(name)
            rss = "-"
            try:
                m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(os.path.join(RAW, name + ".err")).read())
                rss = f"{int(m.group(1)) // 1024} MB" if m else "-"
            except OSError:
                pass
            if not r or "report" not in r:
                print(f"{name}: exit {rc}: {err_tail(name)}")
                continue
            rep = r["report"]
            print(f"{name}: exit {rc}, {secs} s; {rep.get('done')} windows, {rep.get('tokens')} tokens; "
                  f"{num(rep.get('tokens_per_s')):.0f} tokens/s, engine alone {num(rep.get('engine_tokens_per_s')):.0f}; peak RSS {rss}")
            for i, w in enumerate(rep.get("ranking", [])[:8]):
                print(f"  rank {i + 1}: {json.dumps(w)[:240]}")
        elif name in ("captures-train", "trained-train"):
            print(f"{name}: exit {rc}, {secs} s; {len(glob.glob(os.path.join(RAW, name.split('-')[0] + '-replay-*.capture.json')))} captures replayed")


# ---------------------------------------------------------------- long-rows


def worst_case(r):
    worst, where = 0.0, "-"
    for rung in r.get("rungs", []):
        for c in rung.get("cases", []):
            tol, err = num(c["tolerance"]), num(c["rel_l2"])
            ratio = err / tol if tol > 0 else (0.0 if err == 0 else float("inf"))
            if ratio > worst:
                worst, where = ratio, f"{rung['id']}:{c['name']}"
    return worst, where


def ladder_line(name, r, rc, secs):
    s = r.get("summary") or {}
    worst, where = worst_case(r)
    e = r.get("end_to_end") or {}
    gate = (f"end-to-end {e['status']} (loss rel {num(e['loss_rel_err']):.1e} / {num(e['loss_tolerance']):.1e})" if e else "end-to-end -")
    cases = s.get("cases") or {}
    rungs = s.get("rungs") or {}
    rs = ", ".join(f"{v} {k}" for k, v in rungs.items())
    return (f"{name}: exit {rc}, {secs} s; rungs {rs}; "
            f"cases {cases.get('pass')}/{sum(v for v in cases.values() if isinstance(v, int))} pass; worst rel_l2/tol "
            f"{worst:.3f} ({where}); {gate}; validation errors {(r.get('validation') or {}).get('errors', '-')}; status {r.get('status')}")


def summary_long_rows():
    for name, rc, secs in runs():
        if name.startswith("ladder-"):
            r = load(name)
            print(ladder_line(name, r, rc, secs) if r else f"{name}: exit {rc}, {secs} s, no report ({err_tail(name)})")
        elif name.startswith("growth-"):
            print(f"{name}: exit {rc} (0: none outside, 1: one outside), {secs} s")
            try:
                for line in open(os.path.join(RAW, name + ".out")):
                    if line.startswith(("growth:", "planted:", "reference rounds", "loss ")):
                        print("  " + line.strip()[:300])
            except OSError:
                pass
            r = load(name, ".json")
            if not r:
                print(f"  {err_tail(name, 3)}")
                continue
            for s in r["series"]:
                d = list(map(num, s["difference"]))
                e = list(map(num, s["envelope"]))
                ref = list(map(num, s["reference"]))
                first = s["first_outside"]
                print(f"  {s['name']:<12} {s['direction']:<8} worst {num(s['worst_ratio']):8.3f} x envelope at {s['worst']:>6}; "
                      f"max diff {max(d):.2e}, max ref {max(ref):.2e}, envelope {min(e):.1e}..{max(e):.1e}; "
                      f"outside from {'none' if first is None else first} ({s['n_outside']} positions)")
            o = r["first_outside"]
            print("  first outside: " + ("none" if o is None else
                  f"{o['position']} ({o['series']}: {num(o['difference']):.2e} > {num(o['envelope']):.2e})"))
            for n in r.get("notes", []):
                print(f"  note: {n}")
        elif name.startswith("carry-check-"):
            r = load(name)
            print(f"{name}: exit {rc}")
            if not r:
                print(f"  {err_tail(name)}")
                continue
            for c in r["per_chunk"]:
                z = c["from_zero_head"]["rel_l2"] if c["from_zero_head"] else None
                print(f"  chunk {c['chunk']}: logits {num(c['logits']['rel_l2']):.2e}, loss {num(c['token_loss']['rel_l2']):.2e}, from zero {z}")
            g = max(r["last_chunk_grads"], key=lambda g: num(g["cmp"]["rel_l2"]))
            print(f"  last chunk's worst gradient {g['tensor']} {num(g['cmp']['rel_l2']):.2e}; passed {r['passed']}; not run: {r['not_run']}")
            if r.get("gpu"):
                for c in r["gpu"]["per_chunk"]:
                    print(f"  gpu chunk {c['chunk']}: logits {num(c['logits']['rel_l2']):.2e}, loss {num(c['loss_rel']):.2e}")
        elif name.startswith("carry-"):
            r = load(name)
            if not r:
                print(f"{name}: exit {rc}: {err_tail(name)}")
                continue
            l = [e["loss"] for e in r["log"]]
            tail = l[-50:]
            print(f"{name}: exit {rc}, {secs} s; {len(l)} steps: first {l[0]:.4f}, final {l[-1]:.4f}, "
                  f"mean of the last {len(tail)} {sum(tail) / len(tail):.4f}, skipped {r.get('skipped')}")
        elif name == "gui-frames":
            try:
                print(open(os.path.join(RAW, "gui_frames.txt")).read().strip())
            except OSError:
                print(f"gui-frames: exit {rc}: {err_tail(name)}")


# ---------------------------------------------------------------- precision


def summary_precision():
    for name, rc, secs in runs():
        r = load(name)
        if name.startswith("maps-"):
            print(f"{name}: exit {rc}, {secs} s")
            if not r:
                print(f"  {err_tail(name)}")
                continue
            print(f"  precision map: {r.get('precision_map')}")
            for x in r["rungs"]:
                bad = [c for c in x["cases"] if c["status"] != "pass"]
                w = max(x["cases"], key=lambda c: num(c["rel_l2"]) / max(num(c["tolerance"]), 1e-30)) if x["cases"] else None
                ws = f"worst {w['name']}: {num(w['rel_l2']):.2e} of {num(w['tolerance']):.1e}" if w else ""
                print(f"  {x['id']:<10} {x['status']:<5} {ws}" + (f"  ({len(bad)} not pass: {bad[0]['name']})" if bad else ""))
            e = r.get("end_to_end")
            if e:
                print(f"  end_to_end {e['status']}: loss rel {num(e['loss_rel_err']):.2e} (gate {num(e['loss_tolerance']):.1e})")
            print(f"  status {r.get('status')}")
        elif name.startswith("bisect"):
            print(f"{name}: exit {rc}, {secs} s")
            rep = (r or {}).get("report")
            if not rep:
                print(f"  {err_tail(name)}")
                continue
            print(f"  candidates: {', '.join(rep['candidates'])}")
            for i, p in enumerate(rep["probes"], 1):
                at = f" -> {p['rung']}: {p['tensor']}" if p.get("rung") else ""
                print(f"  {i:>2} {p['phase']:<9} {'pass' if p['pass'] else 'FAIL'} {num(p['ms']) / 1e3:7.1f} s  "
                      f"f32: {', '.join(p['f32_stages']) or 'none'}{at}")
            print(f"  outcome {rep['outcome']}; keep f32: {', '.join(rep['keep_f32']) or 'nothing'}; map: {rep['map']}")
        elif name.startswith("headroom-"):
            print(f"{name}: exit {rc}, {secs} s")
            if not r:
                print(f"  {err_tail(name)}")
                continue
            print(f"  {r['precision']} {r['mode']} on {r['gemm_path']}, batch {r['batch']['rows']}x{r['batch']['seq_len']}; "
                  f"status {r['status']}; summary {r['summary']['cases']}")
            rows = []
            for rung in r["rungs"]:
                for c in rung["cases"]:
                    h = c.get("headroom")
                    # The optimizer's f32 state and the synthetic attention stress case are left out (docs/headroom.md).
                    if not h or rung["id"] == "optim" or "(stress:" in c["name"]:
                        continue
                    bits = [s["headroom_bits"] for s in (h["cpu"], h["gpu"]) if s["headroom_bits"] is not None]
                    rows.append((rung["id"], c["name"], h["scale"], min(bits) if bits else float("inf"),
                                 max(h["cpu"]["subnormal_share"], h["gpu"]["subnormal_share"]),
                                 [n for n in c["notes"] if n.startswith("f16 headroom:")]))
            print(f"  {len(rows)} tensors with headroom figures; least headroom (bits, lower of CPU and GPU):")
            for rung, n, s, bits, sub, _ in sorted(rows, key=lambda x: x[3])[:10]:
                print(f"    {bits:8.2f} bits  subnormal {100 * sub:6.2f}%  scale {s:<8g} {rung:<9} {n}")
            print("  largest subnormal share:")
            for rung, n, s, bits, sub, _ in sorted(rows, key=lambda x: -x[4])[:10]:
                print(f"    {100 * sub:6.2f}%  {bits:8.2f} bits  scale {s:<8g} {rung:<9} {n}")
            warned = [x for x in rows if x[5]]
            print(f"  warned: {len(warned)}")
            for rung, _n, *_r, notes in warned:
                for n in notes:
                    print(f"    {rung}: {n}")


def summary_determinism():
    print("| options | products on (`gemm_path`) | exit | repeat |")
    print("|---|---|---|---|")
    for name, rc, _secs in runs():
        r = load(name)
        rep = (r or {}).get("repeat") or {}
        keep = {k: rep[k] for k in rep if k in ("bit_identical", "gpu_differing", "cpu_differing", "end_to_end_identical")}
        print(f"| {name} | {(r or {}).get('gemm_path')} | {rc} | {keep or err_tail(name)} |")


# ---------------------------------------------------------------- ab


def summary_ab():
    groups = collections.OrderedDict()
    for name, rc, _secs in runs():
        m = re.match(r"time-(.+)-(old|new)-(\d+)$", name)
        if not m:
            continue
        g = gpu(load(name))
        groups.setdefault(m.group(1), []).append((m.group(2), g, name))
    kernels = os.environ.get("KERNELS", "recurrence")
    for key, rows in groups.items():
        for which, g, name in rows:
            print("\n".join(bench_lines(os.path.join(RAW, name + ".out"), f"{key} {which}", kernels)))
        line = []
        for which in ("old", "new"):
            gs = [g for w, g, _ in rows if w == which and g]
            if gs:
                line.append(f"{which} replayed {statistics.median(num(g['replay_median_ms']) for g in gs):.3f} "
                            f"(device {statistics.median(num(g['replay_device_median_ms']) for g in gs):.3f})")
        losses = {w: {g.get("first_loss") for ww, g, _ in rows if ww == w and g} for w in ("old", "new")}
        same = losses["old"] == losses["new"] and len(losses["old"]) == 1
        print(f"summary {key}: " + "; ".join(line) + f"; first losses {'the same bits' if same else 'differ: ' + str(losses)}")
    pairs = collections.OrderedDict()
    for name, rc, _secs in runs():
        m = re.match(r"same-(.+)-(old|new)$", name)
        if m:
            pairs.setdefault(m.group(1), {})[m.group(2)] = (load(name) or {}, rc)
    for key, d in pairs.items():
        (o, orc), (n, nrc) = d.get("old", ({}, "-")), d.get("new", ({}, "-"))
        if "rungs" in o or "rungs" in n:
            ro = {r["id"]: (r["status"], r.get("rel_l2")) for r in o.get("rungs", [])}
            rn = {r["id"]: (r["status"], r.get("rel_l2")) for r in n.get("rungs", [])}
            print(f"same {key}: exit {orc} / {nrc}; status {o.get('status')} / {n.get('status')}; rungs identical: {ro == rn}")
        else:
            lo = [e["loss"] for e in o.get("log", [])]
            ln = [e["loss"] for e in n.get("log", [])]
            print(f"same {key}: exit {orc} / {nrc}; steps {len(lo)} / {len(ln)}; losses identical: {lo == ln}")


# ---------------------------------------------------------------- info


def summary_info():
    g = load("gpu-info")
    if g:
        keep = ["name", "driver_name", "driver_info", "api_version", "subgroup_size", "max_shared_memory",
                "timestamp_period_ns", "validation"]
        print("gpu-info: " + json.dumps({k: g.get(k) for k in keep}))
        print("features: " + json.dumps(g.get("features")))
    else:
        print(f"gpu-info: {err_tail('gpu-info')}")
    stats = {}
    for path in sorted(glob.glob(os.path.join(RAW, "stats-*.err"))):
        for line in open(path):
            m = re.match(r"dualscope: pipeline (\S+): (.*)", line.strip())
            if m:
                stats[m.group(1)] = dict(kv.split("=", 1) for kv in m.group(2).split(", ") if "=" in kv)
    if stats:
        print()
        print("| kernel | registers a lane | spilled bytes an invocation | shared memory |")
        print("|---|---|---|---|")
        for k in sorted(stats):
            s = stats[k]
            local = s.get("Local Memory Size")
            spill = int(local) - 2 ** 36 if local and local.isdigit() and int(local) >= 2 ** 36 else local
            print(f"| {k} | {s.get('Register Count')} | {spill} | {s.get('Shared Memory Size')} |")
    for name, rc, _secs in runs():
        if name.startswith("gemm-"):
            r = load(name)
            if not r:
                print(f"{name}: exit {rc}: {err_tail(name)}")
                continue
            print(f"{name} ({r.get('path')}):")
            for s in r.get("shapes", []):
                print(f"  {s['m']}x{s['n']}x{s['k']}: {num(s['median_ms']):.3f} ms, {num(s['tflops']):.1f} TFLOP/s")


SUITES = {
    "speed": summary_speed, "floor": summary_floor, "controller": summary_controller,
    "calibration": summary_calibration, "validate": summary_validate, "peer": summary_peer,
    "cpu": summary_cpu, "triage": summary_triage, "long-rows": summary_long_rows,
    "precision": summary_precision, "determinism": summary_determinism, "ab": summary_ab,
    "info": summary_info, "gui-frames": summary_long_rows,
}

if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "bench":
        summary_bench(sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] in SUITES:
        RAW = sys.argv[2]
        try:
            SUITES[sys.argv[1]]()
        except Exception as e:  # a report of an unexpected shape: say so, keep what was printed
            print(f"(the summary stopped at {type(e).__name__}: {e}; the raw logs have every report)")
    else:
        print(__doc__)
        sys.exit(2)
