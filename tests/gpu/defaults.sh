#!/usr/bin/env bash
# The GPU run whose figures set the defaults (issue 36; docs/simgpu.md
# "Presets", docs/scheduler.md "The pre-switch", docs/bench.md "On a real
# GPU"): one call of about five minutes on a lent GPU machine, with bin/
# built elsewhere and carried (nothing is built here; PyTorch, torchvision
# and transformers for part 2):
#
#   tests/gpu/defaults.sh OUTDIR
#
# 1. calibrate.sh's part 1 on the GPU only: switch-probe's cases (the switch
#    against the idle gap and the memory held, what makes a context
#    resident, whether another's event record or memset flips it back, a
#    CUDA graph's delay, cold L2, the time slice). simgpu's side of the same
#    table needs no GPU: run it where the script was prepared and compare
#    (calibrate.py probe GPU.jsonl SIM.jsonl).
# 2. The CUDA-graph pair of tests/gpu/torch.sh: ResNet-50 batch 1 (one graph
#    replay a request, a request every 8 ms, open loop) beside BERT-base
#    batch 16 back to back, in two interleaved rounds of default sharing,
#    fikit with the defaults and fikit --variant=fikit+pre-switch (TORCH_RUNS requests of
#    the HP a mode and round: 2 x 600 = 1200 a mode, 9.6 s of arrivals),
#    then the HP alone again, so that drift of the GPU over the run shows.
#    The last daemon's status (the switch its hooks measured, the pre-switch
#    counters) is kept.
# Every step has its own time limit; OUTDIR gets the log, the probe's
# lines, the summaries and raw.tgz (every service's lines, the decisions).
set -u
out=$(realpath -m "${1:?usage: defaults.sh OUTDIR}")
mkdir -p "$out"
B=$PWD/bin
exec > >(tee "$out/defaults.log") 2>&1
. "$(dirname "$0")/lib.sh"
runs=${TORCH_RUNS:-600}

say machine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
nvidia-smi -q | grep -iE 'compute mode|mig mode' | head -4
uname -r
nproc
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1
ldd "$B/fikit-replay" "$B/libfikit_hook.so" | grep -i "cuda\|not found"

say "1. switch-probe on the GPU"
step 90 "probe gpu" "$B/switch-probe" --json --reps 30 --footprint-mb 4096 >"$out/probe-gpu.jsonl"
python3 tests/gpu/calibrate.py probe "$out/probe-gpu.jsonl" "$out/probe-gpu.jsonl" | cut -c1-72

say "2. CUDA-graph ResNet-50 b1 every 8 ms + BERT-base b16: two rounds"
TORCH_HP="--model resnet50 --batch 1 --graph" TORCH_LP="--model bert --batch 16" TORCH_EVERY=8 TORCH_RUNS=$runs \
	step 300 "torch pair" tests/gpu/torch.sh "$out" \
	sharing fikit:on fikit-pre:on:--variant=fikit+pre-switch \
	sharing2 fikit2:on fikit-pre2:on:--variant=fikit+pre-switch alone-end
python3 - "$out/torch-status.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    sys.exit(f"no daemon status: {e}")
for g in d.get("gpus") or []:
    print("gpu (switch the hooks measured):", json.dumps(g))
s = d.get("stats", {})
print("pre-switch (fikit-pre2's daemon):", {k: s.get(k) for k in
      ("pre_switches", "pre_switch_hits", "pre_switch_early", "pre_switch_misses", "pre_switch_off")})
PY
say done
# The store is large and was read above. The device tool returns a few
# files only: the raw ones go into one archive beside the log.
rm -rf "$out/data"
(cd "$out" && tar -czf raw.tgz --remove-files t-*.jsonl* torch-decisions.jsonl serve.log 2>/dev/null)
ls -la "$out"
