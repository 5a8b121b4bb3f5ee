#!/usr/bin/env bash
# Issue 27's GPU check (docs/scheduler.md "The pre-switch"), one prepared run
# of under 10 minutes on a real NVIDIA GPU, from the repository root after
# `make` (PyTorch with torchvision and transformers for part 2):
#
#   tests/gpu/preswitch.sh [OUTDIR]
#
# 1. Evidence first (switch-probe, on the GPU and on simgpu's h200 preset
#    side by side): does an idle GPU keep the last context resident until
#    another submits (case idle: the penalty against the idle gap before
#    the request, 0 to 20 ms); what makes a context resident cheaply (case
#    resident: an event record, a memset or a 5 µs kernel of its own before
#    the request — the warm-up is the kernel); does another context's event
#    record or memset flip it back (case flip: then the hook would have to
#    gate those too); how much of the penalty is cold caches rather than the
#    switch (case cache: a 40 MB read after the other read 1 GiB; a warm-up
#    that only switches does not refill the L2).
# 2. The periodic pair with PyTorch, pre-switch off vs on: a CUDA-graph
#    ResNet-50 batch 1 HP (a request every 8 ms) beside BERT-base batch 16,
#    under default sharing, fikit, and fikit --variant=fikit+pre-switch (tests/gpu/torch.sh;
#    summary.py's table), with the daemon's pre-switch counters.
# If part 1 shows that a kernel does not make a context resident, or that
# an idle GPU switches in the background, the pre-switch cannot help there:
# say so in the issue, with the tables. Tables in OUTDIR/preswitch.log
# (default gpu-preswitch), raw files in OUTDIR.
set -u
out=$(realpath -m "${1:-gpu-preswitch}")
mkdir -p "$out"
B=$PWD/bin
exec > >(tee "$out/preswitch.log") 2>&1
. "$(dirname "$0")/lib.sh"
sim=(env LD_LIBRARY_PATH="$B/simgpu" FIKIT_SIMGPU_DEVICE=h200 FIKIT_SIMGPU_SHM=/fikit-preswitch-$$)
cases=(--case idle --case resident --case flip --case cache)

say machine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' 2>&1

say "1. evidence: switch-probe on the GPU and on simgpu (h200)"
step 90 "probe gpu" "$B/switch-probe" --json --reps 30 "${cases[@]}" >"$out/probe-gpu.jsonl"
step 90 "probe simgpu" "${sim[@]}" "$B/switch-probe" --json --reps 30 "${cases[@]}" >"$out/probe-sim.jsonl"
rm -f /dev/shm/fikit-preswitch-$$
python3 tests/gpu/calibrate.py probe "$out/probe-gpu.jsonl" "$out/probe-sim.jsonl"

say "2. CUDA-graph ResNet-50 every 8 ms + BERT-base b16: pre-switch off vs on"
TORCH_HP="--model resnet50 --batch 1 --graph" TORCH_LP="--model bert --batch 16" TORCH_EVERY=8 \
	step 420 "torch pair" tests/gpu/torch.sh "$out" sharing fikit:on fikit-pre:on:--variant=fikit+pre-switch
python3 - "$out/torch-status.json" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))["stats"]
except (OSError, ValueError, KeyError) as e:
    print("no daemon status:", e)
    sys.exit(0)
print("pre-switch (fikit-pre's daemon): %d warm-ups, %d hits, %d early, %d misses, %d tasks off" % tuple(
    s.get(k, 0) for k in ("pre_switches", "pre_switch_hits", "pre_switch_early", "pre_switch_misses", "pre_switch_off")))
PY
say done
