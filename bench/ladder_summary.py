"""Prints a `dualscope ladder --json` report in a few lines: its status, the
validation verdict and recurrence kernels, each rung's worst case against its
tolerance and the end-to-end gate. Used by the device scripts in bench/.
Usage: python3 bench/ladder_summary.py REPORT.json LABEL"""
import json
import sys

r = json.load(open(sys.argv[1]))
v = r.get("validation") or {}
gru = [k for k in v.get("kernels", []) if k.startswith("gru_")]
print(f"  {sys.argv[2]}; status {r['status']}; validation on {v.get('on')}, errors {v.get('errors')}; recurrence kernels {gru}")
for x in r["rungs"]:
    worst = max(x["cases"], key=lambda c: float(c["rel_l2"]) / max(float(c["tolerance"]), 1e-30)) if x["cases"] else None
    w = f"worst {worst['name']}: {float(worst['rel_l2']):.2e} of {float(worst['tolerance']):.1e}" if worst else ""
    print(f"    {x['id']:<10} {x['status']:<5} {w}")
e = r.get("end_to_end")
if e:
    print(f"    end_to_end {e['status']}: loss rel {float(e['loss_rel_err']):.2e} (gate {float(e['loss_tolerance']):.1e})")
