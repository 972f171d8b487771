#!/usr/bin/env python3
"""Writes the Python standard library's sources as JSON lines, one document
per .py file in path order: {"text": ..., "path": ...}. Clean real text for
controller calibration (docs/training.md). Usage: pystdlib_jsonl.py OUT.jsonl"""
import json
import os
import sys
import sysconfig

root = sysconfig.get_paths()["stdlib"]
n = size = 0
with open(sys.argv[1], "w", encoding="utf-8") as out:
    for d, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        if "site-packages" in d or "__pycache__" in d:
            continue
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            p = os.path.join(d, f)
            try:
                text = open(p, encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            if len(text) < 2:
                continue
            out.write(json.dumps({"text": text, "path": os.path.relpath(p, root)}) + "\n")
            n += 1
            size += len(text.encode("utf-8"))
print(f"{sys.argv[1]}: {n} documents, {size} bytes of text from {root}", file=sys.stderr)
