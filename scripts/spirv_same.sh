#!/usr/bin/env bash
# Compares the SPIR-V of two builds byte for byte: every `*.spv` of OLD_OUT
# against the file of the same name in NEW_OUT, or where NEW_OUT has none of
# that name, against any of NEW_OUT's files with the same bytes (a kernel
# renamed). Prints one line per file that is not the same under its own name
# and a summary; exits 1 if a file differs, 0 otherwise (files absent from
# one side are listed, not failed: the lab's probe variants are built only
# with `--features lab`).
#
#   scripts/spirv_same.sh OLD_OUT NEW_OUT
#
# OLD_OUT and NEW_OUT are build script output folders, e.g.
#   find "$CARGO_TARGET_DIR" -path '*/build/dualscope-*/out' -name '*.spv' -printf '%h\n' | sort -u
set -euo pipefail
[ $# -eq 2 ] && [ -d "$1" ] && [ -d "$2" ] || { echo "usage: $0 OLD_OUT NEW_OUT (two folders)" >&2; exit 2; }
old=$1 new=$2
same=0 renamed=0 differ=0 absent=0 added=0
declare -A matched
for f in "$old"/*.spv; do
  [ -e "$f" ] || { echo "spirv_same: no .spv files in $old" >&2; exit 2; }
  name=$(basename "$f")
  if [ -e "$new/$name" ]; then
    matched[$name]=1
    if cmp -s "$f" "$new/$name"; then
      same=$((same + 1))
    else
      echo "differs:  $name"
      differ=$((differ + 1))
    fi
    continue
  fi
  twin=""
  for g in "$new"/*.spv; do
    gname=$(basename "$g")
    if [ ! -e "$old/$gname" ] && cmp -s "$f" "$g"; then
      twin=$gname
      break
    fi
  done
  if [ -n "$twin" ]; then
    matched[$twin]=1
    echo "renamed:  $name -> $twin (the same bytes)"
    renamed=$((renamed + 1))
  else
    echo "absent:   $name (only in $old)"
    absent=$((absent + 1))
  fi
done
for g in "$new"/*.spv; do
  gname=$(basename "$g")
  if [ -z "${matched[$gname]:-}" ]; then
    echo "added:    $gname (only in $new)"
    added=$((added + 1))
  fi
done
echo "spirv_same: $same identical, $renamed renamed with the same bytes, $differ differ, $absent only in OLD_OUT, $added only in NEW_OUT"
[ "$differ" -eq 0 ]
