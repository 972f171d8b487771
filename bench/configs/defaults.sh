# shellcheck shell=bash
# The defaults of bench/device.sh's suites. Each is a variable that the
# environment may set instead (`SHAPES="bench small" bench/device.sh speed ...`);
# bench/device.sh sources this file once, before any suite runs.
# shellcheck disable=SC2034  # the variables are read by bench/device.sh

# Every suite: the timed steps of a `bench` run, after its warm-up steps
# (on the GPU at least a second of warm-up, so that an idle card has raised
# its clocks: bench enforces that).
: "${STEPS:=20}" "${WARMUP:=3}"
# Seconds after the driver's start past which no new run starts (a device
# call is cut at 600 s; what ran before the limit keeps its report).
: "${LIMIT:=570}"
# What becomes of the raw logs: tgz (OUT/SUITE-raw.tgz), dir (OUT/SUITE/) or none.
: "${RAW_KEEP:=tgz}"

# speed: the five shapes of the one-run table, the PyTorch peer's CUDA graphs
# (its fastest mode at every shape so far; "eager graph compile" for all of
# them), and the peer's CPU step off (TORCH_CPU=1 adds it).
: "${SPEED_SHAPES:=bench b1t512 b1t4096 b64t256 small}"
: "${TORCH_MODES:=graph}" "${TORCH_CPU:=0}"

# peer: the shapes of the PyTorch peer's full comparison (every mode, CPU included).
: "${PEER_SHAPES:=bench small b1t512}"
: "${PEER_MODES:=eager graph}"
: "${PEER_TRAIN_STEPS:=1000}"

# cpu: the CPU reference's step on all cores.
: "${CPU_SHAPES:=small bench b1t512}"

# floor: where the mixed step's 2x target is missed without a measured floor.
: "${FLOOR_SHAPES:=b64t256 bench small}"

# controller: train's default step (the controller on) against the bare step.
: "${CONTROLLER_SHAPE:=--config bench --batch 16 --seq-len 1024}"
: "${CONTROLLER_STEPS:=40}"

# calibration: the controller's thresholds on clean text, per setting NAME:FLAGS
# (";"-separated; e.g. "z8:--gn-skip-z 8 --gn-spike-z 5").
: "${CAL_SETTINGS:=default:;off:--no-controller}"
: "${CAL_SEEDS:=0}" "${CAL_STEPS:=1500}"
: "${CAL_SHAPE:=--config bench --batch 16 --seq-len 512}"

# triage: the planted events of the capture run (one of each kind) and the scans.
: "${TRIAGE_INJECT:=--inject nan@60 --inject spike@90 --inject transient@120 --inject f16_overflow@150 --inject persistent@250 --capture-at 200}"
: "${TRIAGE_SHAPE:=--config small --batch 16 --seq-len 256}"
: "${TRIAGE_STEPS:=300}"
: "${SCAN_CONFIGS:=small bench}" "${SCAN_WINDOWS:=4000}"

# long-rows, precision: one row of real text (DATA, default the Python standard
# library's sources as JSON lines) from OFFSET.
: "${OFFSET:=100000}"
: "${LONG_CONFIG:=bench}" "${LENS:=4096 16384}" "${PRECISIONS:=f32 f16}" "${MODES:=isolated chained}"
: "${GROWTH_RUNS:=f32-4096 f16-4096 f32-16384 f16-16384 planted-f32-4096}"
: "${GROWTH_ARGS:=--config bench}"
: "${CARRY_STEPS:=400}"
: "${PRECISION_CONFIG:=bench}" "${PRECISION_LEN:=4096}"
: "${HEADROOM_RUNS:=f32}"

# validate: the precision maps the layer checks (each in both ladder modes).
: "${PMAPS:=all=f16,embed.bwd=f32 gru.rec=f32,attn.bwd=f32 embed=f32,gru.l0.input=f16,gru.l1.rec=f16,head=f32 all=f32,gru.l0.rec=f16}"

# ab: TAG:PRECISION pairs, each timed old new new old.
: "${AB_SHAPES:=bench:mixed bench:f32 small:mixed b1t512:mixed b64t256:mixed}"

# info: the steps whose kernels' driver statistics are read, and gemm-bench's paths.
: "${INFO_STEPS:=small:mixed bench:mixed bench:f32 b64t256:mixed}"
: "${GEMM_PATHS:=big coopmat}"
