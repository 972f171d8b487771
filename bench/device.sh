#!/usr/bin/env bash
# bench/device.sh: every measurement this project makes on a lent GPU host, as
# named suites of one driver. See `bench/device.sh --help`, docs/results/README.md
# (what each suite's results file holds, and the ledgers they feed) and
# ../shared/GPU.md (building and carrying the binary). Lint: shellcheck -x bench/device.sh.
set -euo pipefail

SUITES="speed peer cpu validate controller calibration triage long-rows precision determinism floor ab info gui-frames"

usage() {
  cat <<'EOF'
Usage: bench/device.sh SUITE[,SUITE...] BIN OUT
       bench/device.sh --help

Runs on the device host, in the repository (the device tool's working copy; the
driver moves to its root), with the stripped release binary BIN (a plain file or
BIN.xz) carried in .device/. Several suites separated by commas run one after the other on the
same card in one call (`speed,floor`). Each suite writes ONE results file,
OUT/SUITE.txt (a header naming the card, its driver, the binary's hash, the
commit and the command, then the suite's summary), and its raw logs, which are
not for git, as OUT/SUITE-raw.tgz (RAW_KEEP=dir keeps the folder OUT/SUITE/,
RAW_KEEP=none drops them). The figures that docs cite go into the ledgers in
docs/results/ by hand.

Set-up, once per call: on the device host (nvidia-smi there), the .device/lib*.deb
packages (the Vulkan loader and the glvnd libraries the NVIDIA driver needs) unpacked
into / and ldconfig; with
VALIDATION=core|sync|gpu (the `validate` suite's default is core), the Khronos
layer 1.4.309 from .device/vvl14.deb unpacked into /tmp/v14 and put on
VK_LAYER_PATH / LD_LIBRARY_PATH, DUALSCOPE_VK_VALIDATION set to the mode.

Suites:
  speed        the one-run table: at bench, B=1 T=512, B=1 T=4096, B=64 T=256 and
               small, `bench --engine both` (the CPU step and the f32 step) and
               `bench --precision mixed`, then the PyTorch peer
               (bench/torch_peer.py) on the same checkpoint and batch in f32,
               TF32 and AMP f16, CUDA graphs (TORCH_MODES, TORCH_CPU=1)
  peer         the Vulkan engine against bench/torch_reference.py (f64
               gradients, AdamW) and the CPU engine, a 1000-step training run on
               both engines, and the PyTorch peer in every mode (CPU, eager,
               CUDA graph, torch.compile at bench; f32, TF32, AMP) at bench,
               small and B=1 T=512
  cpu          the CPU reference against bench/torch_reference.py (gradients in
               f32 and f64, the AdamW step) and its step on all cores
  validate     under the validation layer (VALIDATION, default core): the f32
               and f16 ladders at small, bench, B=1 T=512 and B=64 T=256, small
               at T=4096, training, the controller's path, triage (captures,
               replays, drift, scan), the precision maps and precision-bisect,
               the carried-state check; TESTS: test executables to run under
               the layer too. PARTS: ladders shapes long train controller
               triage pmap carry tests
  controller   train's default step (the controller on) against the bare and
               the replayed step, `bench --controller`, DUALSCOPE_HOST_NORMS=1
               and --no-controller, f16 and f32 (CONTROLLER_SHAPE)
  calibration  the controller's actions and risk z-scores on clean text per
               setting (CAL_SETTINGS, CAL_SEEDS, CAL_STEPS)
  triage       on the device: a training run with planted events and captures
               and `replay` of each capture; `drift` (f32, f16, a planted
               fault); `scan` rates (small, bench, f32, f16); a trained run's
               scan and the replay of its top windows. PARTS: captures drift
               scan trained
  long-rows    one long row of real text: the ladder at T=4096 and 16384 (f32,
               f16, isolated, chained), `growth`, and `train --carry-state`
               with `ladder --carry-check`. PARTS: ladder growth carry
  precision    the ladder with the default precision map and all-f16, both
               modes, at T=4096; precision-bisect (clean, and with a planted
               f16 fault); the f16 headroom figures. PARTS: maps bisect headroom
  determinism  `ladder --repeat 5` in f32, f16, bf16, both modes and kernels
  floor        the probes' floors of the mixed step at B=64 T=256, bench and
               small: DUALSCOPE_GRID_PROBE=1 (the recurrences with parts switched
               off) and DUALSCOPE_COOPMAT_PROBE=no_global (the products without
               their global loads). The probes are built only with
               `cargo build --release --features lab`: BIN must be such a
               build. Run as `speed,floor` to get the 2x targets of the same card
  ab           the GPU step of OLD (a second binary, environment) against BIN,
               old new new old at AB_SHAPES, with the per-kernel medians of
               KERNELS (a regex); PARTS=time same (same: ladders and training
               runs compared bit for bit)
  info         gpu-info, the driver's statistics of every kernel of the steps
               (DUALSCOPE_PIPELINE_STATS=1: registers, spills, shared memory),
               gemm-bench rates (GEMM_PATHS)
  gui-frames   the GUI's frame times on a 16384-position row: BIN is the
               `long_rows` test executable (`cargo test --release --test
               long_rows --no-run`), not dualscope

Environment (defaults in bench/configs/defaults.sh, shapes in
bench/configs/shapes.tsv): SHAPES (tags, replaces a suite's shapes), STEPS,
WARMUP, LIMIT (seconds after which no run starts, default 570), DATA (a text
file; default the repository's docs and sources, or for triage, long-rows,
precision and calibration the Python standard library's sources as JSON lines,
scripts/pystdlib_jsonl.py), PARTS, VALIDATION, RAW_KEEP, COMMIT (the commit BIN
was built from; else .device/COMMIT, else git).
EOF
}

die() { echo "bench/device.sh: $*" >&2; exit 2; }

if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then usage; exit 0; fi
[ $# -eq 3 ] || { usage >&2; exit 2; }
SUITE_LIST=$1 BIN=$2 OUT=$3

# Paths the caller gave stay the caller's: made absolute before moving to the root.
abs() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
BIN=$(abs "$BIN") OUT=$(abs "$OUT")
if [ -n "${OLD:-}" ]; then OLD=$(abs "$OLD"); fi
if [ -n "${DATA:-}" ]; then DATA=$(abs "$DATA"); fi
if [ -n "${TESTS:-}" ]; then
  t=""
  for x in $TESTS; do t+=" $(abs "$x")"; done
  TESTS=${t# }
fi
cd "$(dirname "$0")/.."
# What the caller set (not what defaults.sh fills in) goes on the results' command line.
CALLER_SET=()
for v in $(sed -n 's/^: "\${\([A-Z0-9_]*\):=.*/\1/p; s/^: "\${\([A-Z0-9_]*\):=.*"\${\([A-Z0-9_]*\):=.*/\2/p' bench/configs/defaults.sh) \
         SHAPES PARTS DATA VALIDATION OLD KERNELS TESTS COMMIT; do
  if printenv "$v" > /dev/null 2>&1; then CALLER_SET+=("$v"); fi
done
# shellcheck source=bench/configs/defaults.sh
. bench/configs/defaults.sh

for s in ${SUITE_LIST//,/ }; do
  case " $SUITES " in *" $s "*) ;; *) die "unknown suite '$s' (bench/device.sh --help lists them)" ;; esac
done

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d /tmp/dualscope-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
RAW="" RES="" RC=0

# ------------------------------------------------------------------ helpers

# say LINE...: a line of the current suite's results file (and of stdout).
say() { printf '%s\n' "$*" | tee -a "$RES"; }

# flags TAG: the shape's flags from bench/configs/shapes.tsv, into the array FL.
flags() {
  local line
  line=$(awk -F'\t' -v t="$1" '$1 == t { print $2; exit }' bench/configs/shapes.tsv)
  [ -n "$line" ] || die "no shape '$1' in bench/configs/shapes.tsv"
  read -ra FL <<< "$line"
}

# shape TAG: flags TAG, and the tag and its flags recorded for the summary.
shape() {
  flags "$1"
  printf '%s\t%s\n' "$1" "${FL[*]}" >> "$RAW/shapes.tsv"
}

# words VALUE: a variable holding a list of flags, into the array W.
words() { read -ra W <<< "$1"; }

# run NAME CMD...: stdout to RAW/NAME.out, stderr to RAW/NAME.err, the exit
# code in RC and one line in RAW/runs.tsv. Past LIMIT the run is skipped; a
# run still going at LIMIT is stopped (exit 124).
run() {
  local name=$1 left t0
  shift
  left=$((LIMIT - SECONDS))
  if [ "$left" -lt 15 ]; then
    printf '%s\tskipped\t0\n' "$name" >> "$RAW/runs.tsv"
    echo "$name: skipped (LIMIT=$LIMIT s reached)"
    RC=skipped
    return 0
  fi
  t0=$SECONDS
  RC=0
  timeout -k 5 "$left" "$@" > "$RAW/$name.out" 2> "$RAW/$name.err" || RC=$?
  printf '%s\t%s\t%s\n' "$name" "$RC" "$((SECONDS - t0))" >> "$RAW/runs.tsv"
  echo "$name: exit $RC, $((SECONDS - t0)) s"
}

# part NAME: whether PARTS (default: the suite's own list) names it.
part() { case " ${PARTS:-$DEFAULT_PARTS} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# first_loss REPORT: the first engine's first loss of a `bench --json` report.
first_loss() {
  python3 -c 'import json, sys
try:
    print(next(e["first_loss"] for e in json.load(open(sys.argv[1]))["engines"] if "first_loss" in e))
except Exception:
    pass' "$1"
}

# unpack PATH: a binary as given, or decompressed from PATH.xz into WORK.
unpack() {
  case $1 in
    *.xz)
      local to
      to=$WORK/$(basename "$1" .xz)
      xz -dc "$1" > "$to" && chmod +x "$to"
      printf '%s\n' "$to" ;;
    *) printf '%s\n' "$1" ;;
  esac
}

# The texts the suites train and scan on (made once, in WORK).
text_repo() {
  local t=$WORK/repo-text.txt
  [ -s "$t" ] || cat README.md docs/*.md docs/*/*.md src/*/*.rs > "$t" 2> /dev/null || true
  printf '%s\n' "$t"
}
text_pystdlib() {
  local t=$WORK/pystdlib.jsonl
  if [ ! -s "$t" ]; then
    python3 scripts/pystdlib_jsonl.py "$t" > /dev/null
    # One document of a rare byte: a genuine data outlier among ordinary text.
    python3 -c 'import json; print(json.dumps({"text": "\u0001" * 600, "path": "outlier"}))' >> "$t"
  fi
  printf '%s\n' "$t"
}

setup_host() {
  # The packages go into / on the device host only (it has the NVIDIA driver and no
  # Vulkan loader); elsewhere (lavapipe here) the system's loader serves.
  if compgen -G ".device/lib*.deb" > /dev/null && { command -v nvidia-smi > /dev/null || [ -d /usr/local/nvidia ]; }; then
    for f in .device/lib*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  BIN=$(unpack "$BIN")
  [ -x "$BIN" ] || die "BIN '$BIN' is not an executable"
  if [ -n "${OLD:-}" ]; then OLD=$(unpack "$OLD"); fi
  local icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  if [ "$SUITE_LIST" != gui-frames ] && ! "$BIN" gpu-info > /dev/null 2>&1 && [ -f "$icd" ]; then
    export VK_DRIVER_FILES=$icd
  fi
}

layer_on() { # MODE
  [ -f .device/vvl14.deb ] || die "VALIDATION=$1 needs .device/vvl14.deb (Debian 13's layer 1.4.309; ../shared/GPU.md)"
  mkdir -p /tmp/v14
  dpkg -x .device/vvl14.deb /tmp/v14
  export VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d
  export LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export DUALSCOPE_VK_VALIDATION=$1
}

commit() {
  if [ -n "${COMMIT:-}" ]; then printf '%s\n' "$COMMIT"
  elif [ -s .device/COMMIT ]; then head -1 .device/COMMIT
  elif git rev-parse --short HEAD > /dev/null 2>&1; then git rev-parse --short HEAD
  else echo "unknown (set COMMIT, or write it to .device/COMMIT when building)"; fi
}

header() { # SUITE
  local card vk="-" cpu overrides="" v
  card=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2> /dev/null | head -1 || true)
  if [ "$1" != gui-frames ]; then
    vk=$("$BIN" gpu-info --json 2> /dev/null | python3 -c 'import json, sys
try:
    d = json.load(sys.stdin)
    print(", ".join(str(d.get(k)) for k in ("name", "driver_name", "driver_info", "api_version")))
except Exception:
    print("-")' 2> /dev/null || true)
  fi
  cpu=$(grep -m1 'model name' /proc/cpuinfo 2> /dev/null | cut -d: -f2 | xargs || true)
  for v in $(printf '%s\n' "${CALLER_SET[@]}" | sort); do overrides+=" $v=\"${!v}\""; done
  {
    echo "# bench/device.sh $1"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "card: ${card:-no nvidia-smi}"
    echo "vulkan device: ${vk:--}"
    echo "host: $(nproc) CPU cores, ${cpu:--}"
    echo "binary: $BIN, sha256 $(sha256sum "$BIN" | cut -c1-16)"
    if [ -n "${OLD:-}" ]; then echo "old binary: $OLD, sha256 $(sha256sum "$OLD" | cut -c1-16)"; fi
    echo "commit: $(commit)"
    echo "command:${overrides} bench/device.sh $1 BIN OUT"
    if [ -n "${DUALSCOPE_VK_VALIDATION:-}" ] && [ "$DUALSCOPE_VK_VALIDATION" != 0 ]; then
      echo "validation: $DUALSCOPE_VK_VALIDATION (layers from ${VK_LAYER_PATH:-the system})"
    fi
    echo
  } > "$RES"
}

# ------------------------------------------------------------------ suites

suite_speed() {
  local tag loss m
  for tag in ${SHAPES:-$SPEED_SHAPES}; do
    shape "$tag"
    run "$tag-f32" "$BIN" bench --engine both "${FL[@]}" --steps "$STEPS" --warmup "$WARMUP" --json \
      --save-batch "$WORK/$tag.batch.json" --save-checkpoint "$WORK/$tag.safetensors"
    loss=$(first_loss "$RAW/$tag-f32.out")
    if [ -n "$loss" ]; then
      local peer=(python3 bench/torch_peer.py --checkpoint "$WORK/$tag.safetensors" --batch "$WORK/$tag.batch.json" --expect-loss "$loss")
      if [ "$TORCH_CPU" = 1 ]; then run "$tag-torch-cpu" "${peer[@]}" --device cpu --steps 10 --warmup 2; fi
      for m in $TORCH_MODES; do
        run "$tag-torch-$m" "${peer[@]}" --device cuda --mode "$m"
        run "$tag-torch-$m-tf32" "${peer[@]}" --device cuda --mode "$m" --tf32
        run "$tag-torch-$m-amp" "${peer[@]}" --device cuda --mode "$m" --amp f16
      done
    fi
    run "$tag-mixed" "$BIN" bench --engine gpu "${FL[@]}" --precision mixed --steps "$STEPS" --warmup "$WARMUP" --json
  done
}

# Rows of different lengths for the reference checks: prose, Rust, ELF bytes, two bytes.
rows() {
  head -c 700 README.md > "$WORK/prose"
  head -c 333 src/cpu/forward.rs > "$WORK/code"
  head -c 129 "$BIN" | tail -c 97 > "$WORK/binary"
  printf 'ab' > "$WORK/two"
  ROWS=("$WORK/prose" "$WORK/code" "$WORK/binary" "$WORK/two")
  DATA4=(--data "$WORK/prose" --data "$WORK/code" --data "$WORK/binary" --data "$WORK/two")
  DATA2=(--data "$WORK/prose" --data "$WORK/code")
}

suite_peer() {
  DEFAULT_PARTS="grads step train torch"
  local cfg seed c w tag loss m modes
  rows
  for cfg in small bench; do
    for seed in 1 2; do
      c=$WORK/$cfg-$seed
      run "init-$cfg-s$seed" "$BIN" init --config "$cfg" --seed "$seed" --out "$c.safetensors"
      if part grads; then
        run "grads-gpu-$cfg-s$seed" "$BIN" grads --engine gpu --checkpoint "$c.safetensors" "${DATA4[@]}" --out "$c.gpu-grads.safetensors" --json
        run "grads-cpu-$cfg-s$seed" "$BIN" grads --engine cpu --checkpoint "$c.safetensors" "${DATA4[@]}" --out "$c.cpu-grads.safetensors" --json
        run "grads-gpu-vs-torch-$cfg-s$seed" python3 bench/torch_reference.py grads "$c.safetensors" "$c.gpu-grads.safetensors" "${ROWS[@]}"
        run "grads-gpu-vs-cpu-$cfg-s$seed" python3 bench/torch_reference.py compare "$c.gpu-grads.safetensors" "$c.cpu-grads.safetensors"
      fi
      if part step; then
        run "step-gpu-$cfg-s$seed" "$BIN" step --engine gpu --checkpoint "$c.safetensors" "${DATA2[@]}" --out "$c.stepped.safetensors" --json
        run "step-grads-gpu-$cfg-s$seed" "$BIN" grads --engine gpu --checkpoint "$c.safetensors" "${DATA2[@]}" --out "$c.step-grads.safetensors" --json
        run "step-gpu-vs-torch-$cfg-s$seed" python3 bench/torch_reference.py step "$c.safetensors" "$c.stepped.safetensors" "$c.step-grads.safetensors" "$WORK/prose" "$WORK/code"
      fi
    done
  done
  if part train; then
    # Mixed real text: prose, Rust and 20 KB of the binary's bytes.
    cat README.md docs/*.md src/cpu/*.rs src/vk/*.rs > "$WORK/mixed.txt" 2> /dev/null || true
    head -c 20000 "$BIN" >> "$WORK/mixed.txt"
    for w in gpu cpu; do
      run "train-$w" "$BIN" train --engine "$w" --data "$WORK/mixed.txt" --config small --steps "$PEER_TRAIN_STEPS" \
        --log-every 100 --seed 3 --json
    done
  fi
  if part torch; then
    for tag in ${SHAPES:-$PEER_SHAPES}; do
      shape "$tag"
      run "$tag-both" "$BIN" bench --engine both "${FL[@]}" --steps "$STEPS" --warmup "$WARMUP" --json \
        --save-batch "$WORK/$tag.batch.json" --save-checkpoint "$WORK/$tag.safetensors"
      loss=$(first_loss "$RAW/$tag-both.out")
      if [ -z "$loss" ]; then continue; fi
      local peer=(python3 bench/torch_peer.py --checkpoint "$WORK/$tag.safetensors" --batch "$WORK/$tag.batch.json" --expect-loss "$loss")
      run "$tag-torch-cpu" "${peer[@]}" --device cpu --steps 10 --warmup 2
      modes=$PEER_MODES
      if [ "$tag" = bench ]; then modes="$modes compile"; fi
      for m in $modes; do run "$tag-torch-$m" "${peer[@]}" --device cuda --mode "$m"; done
      for m in $PEER_MODES; do
        run "$tag-torch-$m-tf32" "${peer[@]}" --device cuda --mode "$m" --tf32
        run "$tag-torch-$m-amp" "${peer[@]}" --device cuda --mode "$m" --amp f16
      done
    done
  fi
}

suite_cpu() {
  local cfg seed c tag
  rows
  { nproc; lscpu | grep -E "Model name|^CPU\(s\)" | cut -c1-200; } > "$RAW/host.txt" 2> /dev/null || true
  for cfg in small bench; do
    for seed in 1 2; do
      c=$WORK/$cfg-$seed
      run "init-$cfg-s$seed" "$BIN" init --config "$cfg" --seed "$seed" --out "$c.safetensors"
      run "grads-$cfg-s$seed" "$BIN" grads --checkpoint "$c.safetensors" "${DATA4[@]}" --out "$c.grads.safetensors" --json
      run "grads-check-f32-$cfg-s$seed" python3 bench/torch_reference.py grads "$c.safetensors" "$c.grads.safetensors" "${ROWS[@]}"
      run "grads64-$cfg-s$seed" "$BIN" grads --precision f64 --checkpoint "$c.safetensors" "${DATA4[@]}" --out "$c.grads64.safetensors" --json
      run "grads-check-f64-$cfg-s$seed" python3 bench/torch_reference.py grads "$c.safetensors" "$c.grads64.safetensors" "${ROWS[@]}"
      run "step-$cfg-s$seed" "$BIN" step --checkpoint "$c.safetensors" "${DATA2[@]}" --out "$c.stepped.safetensors" --json
      run "step-grads-$cfg-s$seed" "$BIN" grads --checkpoint "$c.safetensors" "${DATA2[@]}" --out "$c.step-grads.safetensors" --json
      run "step-check-$cfg-s$seed" python3 bench/torch_reference.py step "$c.safetensors" "$c.stepped.safetensors" "$c.step-grads.safetensors" "$WORK/prose" "$WORK/code"
    done
  done
  for tag in ${SHAPES:-$CPU_SHAPES}; do
    shape "$tag"
    run "$tag-cpu" "$BIN" bench --engine cpu "${FL[@]}" --steps "$STEPS" --warmup "$WARMUP" --json
  done
}

# The triage runs under the layer (validate's triage part): a planted f16 run
# with captures, the replay of each capture, drift and a scan.
validate_triage() {
  local text=$1 r c
  r=$WORK/triage-run
  run train60-captures "$BIN" train --config small --engine gpu --precision f16 --data "$text" --steps 60 --out "$r" \
    --inject f16_overflow@30 --inject persistent@50 --capture-at 40
  for c in "$r"/captures/step_*; do
    if [ -d "$c" ]; then run "replay-$(basename "$c")" "$BIN" replay "$c" --json; fi
  done
  run drift-small-f32 "$BIN" drift --config small --data "$text" --steps 20 --json
  run drift-small-f16 "$BIN" drift --config small --precision f16 --data "$text" --steps 20 --json
  run scan-small-f16 "$BIN" scan --config small --engine gpu --precision f16 --data "$text" --seq-len 256 \
    --max-windows 400 --out "$r/scan" --json
}

suite_validate() {
  DEFAULT_PARTS="ladders shapes long train controller triage pmap carry tests"
  local text p c tag m md t
  text=$(text_repo)
  if part ladders; then
    for p in f32 f16; do for c in small bench; do run "ladder-$c-$p" "$BIN" ladder --config "$c" --precision "$p" --json; done; done
  fi
  if part shapes; then
    for p in f32 f16; do
      for tag in b1t512 b64t256; do
        flags "$tag"
        run "ladder-$tag-$p" "$BIN" ladder "${FL[@]}" --precision "$p" --json
      done
    done
  fi
  if part long; then
    for p in f32 f16; do run "ladder-small-$p-T4096" "$BIN" ladder --config small --precision "$p" --data "$text" --len 4096 --json; done
  fi
  if part train; then
    for p in f32 f16; do
      run "train50-small-$p" "$BIN" train --config small --engine gpu --precision "$p" --data "$text" --steps 50 --out "$WORK/train-$p"
    done
  fi
  if part controller; then
    for p in f32 f16; do
      run "bench-controller-small-$p" "$BIN" bench --engine gpu --config small --precision "$p" --controller --steps 5 --warmup 1 --json
      run "train20-hostnorms-small-$p" env DUALSCOPE_HOST_NORMS=1 "$BIN" train --config small --engine gpu --precision "$p" \
        --data "$text" --steps 20 --out "$WORK/host-$p"
    done
  fi
  if part triage; then validate_triage "$text"; fi
  if part pmap; then
    for m in $PMAPS; do
      t=$(printf '%s' "$m" | tr '=,.' '-__')
      for md in isolated chained; do
        run "ladder-bench-$t-$md" "$BIN" ladder --config bench --precision f16 --precision-map "$m" --mode "$md" --json
      done
    done
    run train30-small-pmap "$BIN" train --config small --engine gpu --precision f16 --precision-map gru.rec=f32,head.bwd=f32 \
      --data "$text" --steps 30 --out "$WORK/pmap"
    run pbisect-bench "$BIN" precision-bisect --config bench --data "$text" --len 1024 --json
  fi
  if part carry; then
    run carry-check-small-f16 "$BIN" ladder --config small --precision f16 --data "$text" --len 600 --carry-check 3 --json
  fi
  if part tests; then
    for t in ${TESTS:-}; do
      t=$(unpack "$t")
      run "test-$(basename "$t")" "$t" --test-threads 1 --nocapture
    done
  fi
}

suite_controller() {
  local text p mode pre extra
  text=${DATA:-$(text_repo)}
  printf '%s\n' "$CONTROLLER_SHAPE" > "$RAW/shape.txt"
  words "$CONTROLLER_SHAPE"
  for p in mixed f32; do
    run "bench-$p" "$BIN" bench --engine gpu "${W[@]}" --precision "$p" --steps 30 --warmup 5 --controller --json
    # split: the default (the controller on); host: every gradient read back; none: --no-controller.
    for mode in split host none; do
      pre=() extra=()
      if [ "$mode" = host ]; then pre=(env DUALSCOPE_HOST_NORMS=1); fi
      if [ "$mode" = none ]; then extra=(--no-controller); fi
      run "train-$p-$mode" "${pre[@]}" "$BIN" train --engine gpu "${W[@]}" --precision "${p/mixed/f16}" --data "$text" \
        --steps "$CONTROLLER_STEPS" --out "$WORK/train-$p-$mode" "${extra[@]}" --json
    done
  done
}

suite_calibration() {
  local data s name seed d settings setting
  data=${DATA:-$(text_pystdlib)}
  IFS=';' read -ra settings <<< "$CAL_SETTINGS"
  words "$CAL_SHAPE"
  for s in "${settings[@]}"; do
    name=${s%%:*}
    read -ra setting <<< "${s#*:}"
    for seed in $CAL_SEEDS; do
      d=cal-$name-s$seed
      run "$d" "$BIN" train --data "$data" "${W[@]}" --precision f16 --engine gpu --steps "$CAL_STEPS" --seed "$seed" \
        --out "$WORK/$d" --log-every 500 "${setting[@]}"
      mkdir -p "$RAW/$d"
      cp "$WORK/$d"/log.jsonl "$WORK/$d"/controller.jsonl "$RAW/$d/" 2> /dev/null || true
    done
  done
}

# replays PREFIX DIR [N]: `replay` of the first N (default all) captures under DIR/captures.
replays() {
  local prefix=$1 dir=$2 n=${3:-100000} i=0 c step
  for c in "$dir"/captures/step_*; do
    [ -d "$c" ] || continue
    i=$((i + 1))
    if [ "$i" -gt "$n" ]; then break; fi
    step=$(basename "$c")
    cp "$c/capture.json" "$RAW/$prefix-replay-$step.capture.json" 2> /dev/null || true
    run "$prefix-replay-$step" "$BIN" replay "$c" --json
  done
}

suite_triage() {
  DEFAULT_PARTS="captures drift scan trained"
  local data name extra c p time_v=() inject
  data=${DATA:-$(text_pystdlib)}
  if [ -x /usr/bin/time ]; then time_v=(/usr/bin/time -v); fi
  words "$TRIAGE_SHAPE"
  read -ra inject <<< "$TRIAGE_INJECT"
  if part captures; then
    run captures-train "$BIN" train --data "$data" "${W[@]}" --precision f16 --engine gpu --steps "$TRIAGE_STEPS" \
      --out "$WORK/captures" --log-every 50 "${inject[@]}"
    replays captures "$WORK/captures"
  fi
  if part drift; then
    for name in f32 f16 planted-f32; do
      case $name in
        f32) extra=(--precision f32) ;;
        f16) extra=(--precision f16) ;;
        planted-f32) extra=(--precision f32 --inject persistent@100 --stop-at-first) ;;
      esac
      run "drift-$name" "$BIN" drift --data "$data" --config small --steps 200 "${extra[@]}" --out "$WORK/drift-$name" --json
    done
  fi
  if part scan; then
    for c in $SCAN_CONFIGS; do
      for p in f32 f16; do
        run "scan-$c-$p" "${time_v[@]}" "$BIN" scan --data "$data" --config "$c" --engine gpu --precision "$p" --seq-len 512 \
          --batch 16 --top 16 --out "$WORK/scan-$c-$p" --json --max-windows "$SCAN_WINDOWS"
      done
    done
  fi
  if part trained; then
    run trained-train "$BIN" train --data "$data" "${W[@]}" --engine gpu --steps "$TRIAGE_STEPS" --out "$WORK/trained"
    run trained-scan "${time_v[@]}" "$BIN" scan --data "$data" --checkpoint "$WORK/trained/last.safetensors" --engine gpu \
      --seq-len 256 --batch 16 --top 8 --out "$WORK/trained-scan" --json
    replays trained "$WORK/trained-scan" 3
  fi
}

suite_long_rows() {
  DEFAULT_PARTS="ladder growth carry"
  local data len p mode name extra prec spec t k cfg
  data=${DATA:-$(text_pystdlib)}
  if part ladder; then
    for len in $LENS; do for p in $PRECISIONS; do for mode in $MODES; do
      run "ladder-T$len-$p-$mode" "$BIN" ladder --config "$LONG_CONFIG" --data "$data" --offset "$OFFSET" --len "$len" \
        --precision "$p" --mode "$mode" --json
    done; done; done
  fi
  if part growth; then
    for name in $GROWTH_RUNS; do
      len=${name##*-}
      case $name in
        planted-f32-*) extra=(--precision f32 --len "$len" --plant-token-at "$((len / 2))") ;;
        f32-* | f16-*) extra=(--precision "${name%%-*}" --len "$len") ;;
        *) die "unknown growth run $name (f32-LEN, f16-LEN, planted-f32-LEN)" ;;
      esac
      words "$GROWTH_ARGS"
      run "growth-$name" "$BIN" growth --data "$data" "${W[@]}" "${extra[@]}" --out "$RAW/growth-$name.json"
    done
  fi
  if part carry; then
    for prec in f32 f16; do
      # NAME:WINDOWS: a carried state over that many windows (0: random windows from zero).
      for spec in carry-128:8 zero-128:0 carry-32:16 zero-32:0; do
        name=${spec%%:*} k=${spec##*:} t=${name##*-}
        extra=()
        if [ "$k" != 0 ]; then extra=(--carry-state --carry-windows "$k"); fi
        run "carry-$prec-$name" "$BIN" train --data "$data" --config small --batch 8 --seq-len "$t" --steps "$CARRY_STEPS" \
          --seed 1 --json --engine gpu --precision "$prec" "${extra[@]}"
      done
    done
    for cfg in small bench; do
      run "carry-check-$cfg" "$BIN" ladder --config "$cfg" --data "$data" --carry-check 3 --len 100 --json
    done
  fi
}

suite_precision() {
  DEFAULT_PARTS="maps bisect headroom"
  local data row mode name extra
  data=${DATA:-$(text_pystdlib)}
  row=(--data "$data" --offset "$OFFSET" --len "$PRECISION_LEN")
  if part maps; then
    for mode in isolated chained; do
      for name in default all-f16; do
        extra=(--precision f16)
        if [ "$name" = all-f16 ]; then extra+=(--precision-map "all=f16,embed.bwd=f32"); fi
        run "maps-$name-$mode" "$BIN" ladder --config "$PRECISION_CONFIG" "${row[@]}" --mode "$mode" "${extra[@]}" --json
      done
    done
  fi
  if part bisect; then
    run bisect "$BIN" precision-bisect --config "$PRECISION_CONFIG" "${row[@]}" --json
    run bisect-planted "$BIN" precision-bisect --config "$PRECISION_CONFIG" --data "$data" --offset "$OFFSET" --len 1024 \
      --fault f16_stage_skip_slice=head.bwd --json
  fi
  if part headroom; then
    for name in $HEADROOM_RUNS; do
      case $name in
        f16) extra=(--precision f16 --mode isolated) ;;
        chained-f16) extra=(--precision f16 --mode chained) ;;
        f32) extra=(--precision f32 --mode isolated) ;;
        *) die "unknown headroom run $name (f16, chained-f16, f32)" ;;
      esac
      run "headroom-$name" "$BIN" ladder --config bench "${row[@]}" "${extra[@]}" --json
    done
  fi
}

suite_determinism() {
  local spec name extra
  for spec in "small-f32:--config small" "small-f32-chained:--config small --mode chained" \
              "small-f16:--config small --precision f16" "small-f16-chained:--config small --precision f16 --mode chained" \
              "small-bf16:--config small --precision bf16" "small-f16-coopmat64:--config small --precision f16 --gemm-path coopmat64" \
              "bench-f16:--config bench --precision f16"; do
    name=${spec%%:*}
    words "${spec#*:}"
    run "repeat-$name" "$BIN" ladder --repeat 5 "${W[@]}" --json
  done
}

suite_floor() {
  local tag
  for tag in ${SHAPES:-$FLOOR_SHAPES}; do
    shape "$tag"
    run "$tag-probe" env DUALSCOPE_GRID_PROBE=1 "$BIN" bench --engine gpu "${FL[@]}" --precision mixed --steps "$STEPS" \
      --warmup "$WARMUP" --json
    run "$tag-noglobal" env DUALSCOPE_COOPMAT_PROBE=no_global "$BIN" bench --engine gpu "${FL[@]}" --precision mixed --steps "$STEPS" \
      --warmup "$WARMUP" --json
  done
}

suite_ab() {
  DEFAULT_PARTS="time"
  [ -n "${OLD:-}" ] || die "the ab suite needs OLD=the binary to compare BIN with"
  local spec tag prec i which b text
  if part time; then
    for spec in $AB_SHAPES; do
      tag=${spec%%:*} prec=${spec#*:} i=0
      shape "$tag"
      for which in old new new old; do
        i=$((i + 1)) b=$BIN
        if [ "$which" = old ]; then b=$OLD; fi
        run "time-$tag-$prec-$which-$i" "$b" bench --engine gpu "${FL[@]}" --precision "$prec" --steps "$STEPS" --warmup "$WARMUP" --json
      done
    done
  fi
  if part same; then
    text=$(text_repo)
    for which in old new; do
      b=$BIN
      if [ "$which" = old ]; then b=$OLD; fi
      run "same-ladder-bench-f16-$which" "$b" ladder --config bench --precision f16 --json
      run "same-ladder-small-f32-$which" "$b" ladder --config small --json
      run "same-ladder-b1t512-f16-chained-$which" "$b" ladder --config bench --precision f16 --mode chained --len 512 --json
      run "same-train-bench-f16-$which" "$b" train --engine gpu --config bench --precision f16 --steps 30 --log-every 10 --data "$text" --json
      run "same-train-bench-f32-$which" "$b" train --engine gpu --config bench --steps 20 --data "$text" --json
    done
  fi
}

suite_info() {
  local spec tag prec p
  run gpu-info "$BIN" gpu-info --json
  for spec in $INFO_STEPS; do
    tag=${spec%%:*} prec=${spec#*:}
    flags "$tag"
    run "stats-$tag-$prec" env DUALSCOPE_PIPELINE_STATS=1 "$BIN" bench --engine gpu "${FL[@]}" --precision "$prec" \
      --steps 3 --warmup 1 --json
  done
  for p in $GEMM_PATHS; do run "gemm-$p" "$BIN" gemm-bench --path "$p" --json; done
}

suite_gui_frames() {
  local rt
  rt=$WORK/xdg
  mkdir -p "$rt"
  chmod 700 "$rt"
  run gui-frames env XDG_RUNTIME_DIR="$rt" WGPU_BACKEND="${WGPU_BACKEND:-vulkan}" GUI_FRAMES_OUT="$RAW/gui_frames.txt" \
    "$BIN" gui_frame_times_at_16k_positions --ignored --nocapture --test-threads 1
}

# ------------------------------------------------------------------ main


setup_host
for SUITE in ${SUITE_LIST//,/ }; do
  RAW=$OUT/$SUITE RES=$OUT/$SUITE.txt DEFAULT_PARTS=""
  rm -rf "$RAW"
  mkdir -p "$RAW"
  : > "$RAW/runs.tsv"
  : > "$RAW/shapes.tsv"
  mode=${VALIDATION:-}
  [ "$SUITE" = validate ] && mode=${VALIDATION:-core}
  if [ "$SUITE" = gui-frames ]; then
    mode=""
  fi
  if [ -n "$mode" ] && [ "$mode" != 0 ] && [ "$mode" != off ]; then
    layer_on "$mode"
  else
    export DUALSCOPE_VK_VALIDATION=0
  fi
  header "$SUITE"
  if [ "$SUITE" = floor ]; then say "note: the probes need a binary built with \`cargo build --release --features lab\`."; fi
  if [ "$DUALSCOPE_VK_VALIDATION" != 0 ] && [ "$SUITE" != validate ]; then
    say "note: validation on: the times below are not speed figures."
  fi
  "suite_${SUITE//-/_}"
  say "## summary"
  python3 bench/summarize.py "$SUITE" "$RAW" | tee -a "$RES" || say "(summarize.py failed: the raw logs have everything)"
  echo "results: $RES"
done
# The raw logs are packed last, so that a later suite's summary may read an
# earlier one's (floor reads speed's PyTorch figures).
for SUITE in ${SUITE_LIST//,/ }; do
  case $RAW_KEEP in
    tgz) tar czf "$OUT/$SUITE-raw.tgz" -C "$OUT" "$SUITE" && rm -rf "${OUT:?}/$SUITE" ;;
    none) rm -rf "${OUT:?}/$SUITE" ;;
    *) ;;
  esac
done
