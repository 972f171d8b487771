"""Prints a `dualscope bench --engine gpu --json` report's GPU step in a few
lines: replayed and recorded medians (wall, device), how the recurrences ran
(mode, products, operand loads, fallback), the first loss, and the per-kernel
ms of the kernels whose names match KERNELS (a regex; default the recurrence
kernels). Used by the device scripts in bench/.
Usage: python3 bench/bench_summary.py REPORT.json LABEL [KERNELS]"""
import json
import re
import sys

f = lambda x: "-" if x is None else f"{x:.3f}"
try:
    g = [e for e in json.load(open(sys.argv[1]))["engines"] if e.get("engine") == "gpu"][0]
    rec = g.get("recurrence") or {}
    print(f"  {sys.argv[2]:<28} replay {f(g.get('replay_median_ms'))} ms, device {f(g.get('replay_device_median_ms'))};"
          f" wall {f(g.get('median_ms'))}, device {f(g.get('device_median_ms'))}; mode {rec.get('mode')},"
          f" product {rec.get('product')}, grid loads {rec.get('grid_loads')}, waves {rec.get('wave_loads')};"
          f" recurrence kernels {f(rec.get('recurrence_ms'))} ms; fallback {rec.get('fallback')}; first loss {g.get('first_loss')}")
    for k in g.get("kernels_ms", []):
        if re.search(sys.argv[3] if len(sys.argv) > 3 else "recurrence", k["kernel"]):
            print(f"      {k['ms']:8.4f} ms  {k['kernel']}")
except (OSError, ValueError, KeyError, IndexError, TypeError, re.error) as e:
    print(f"  {sys.argv[2]}: no report ({e})")
