#!/usr/bin/env bash
# What simgpu's h200 preset assumes, checked on a real NVIDIA GPU in about
# three minutes (docs/simgpu.md "What a GPU run would settle"). Separate
# from the long check.sh. Run from the repository root after `make` (PyTorch
# with torchvision and transformers for parts 2 and 3):
#
#   tests/gpu/calibrate.sh [OUTDIR]
#
# 1. switch-probe on the GPU and on simgpu (h200 preset), side by side: a
#    context's first kernel after another's work against the idle gap
#    before it (0 to 20 ms) and the memory both hold (0 or 4 GiB); which
#    commands load a context (event record, memset, kernel); whether
#    another's event record loads it back; a CUDA graph's delay; how much
#    slower a 40 MB read is after the other read 1 GiB (cold L2); the
#    time slice.
# 2. The switch from a framework's context: switch-probe requests at random
#    times beside a PyTorch BERT-base batch 16 (a request every 30 ms),
#    beside the replayer on its trace (no footprint, and 4 GiB), and alone.
# 3. Record on the GPU, replay anywhere: a CUDA-graph ResNet-50 batch 1 and a
#    BERT-base batch 16 traced alone with torch.profiler, converted with
#    fikit-replay convert, then replayed as a pair (a request every 8 ms)
#    with fikit demo on the GPU and on simgpu: predicted against measured.
# Every step has a time limit and the script goes on after a failure; the
# tables are in OUTDIR/calibrate.log (default gpu-cal), the raw files in
# OUTDIR/calibrate.tgz. tests/gpu/calibrate.py makes the tables.
set -u
out=$(realpath -m "${1:-gpu-cal}")
mkdir -p "$out"
work=$(mktemp -d /tmp/fikit-cal-XXXXXX)
B=$PWD/bin
py=tests/gpu/calibrate.py
svc=tests/gpu/torch_service.py
exec > >(tee "$out/calibrate.log") 2>&1
. "$(dirname "$0")/lib.sh"
# A command prefix: on a private simgpu device with the h200 preset.
sim=(env LD_LIBRARY_PATH="$B/simgpu" FIKIT_SIMGPU_DEVICE=h200 FIKIT_SIMGPU_SHM=/fikit-cal-$$)

say machine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' 2>&1

say "1. switch-probe: GPU and simgpu (h200)"
fp=${CAL_FOOTPRINT_MB:-4096} # the footprint case's MiB (simgpu holds them in host memory)
step 60 "probe gpu" "$B/switch-probe" --json --reps 30 --footprint-mb "$fp" >"$work/probe-gpu.jsonl"
step 90 "probe simgpu" "${sim[@]}" "$B/switch-probe" --json --reps 30 --footprint-mb "$fp" >"$work/probe-sim.jsonl"
rm -f /dev/shm/fikit-cal-$$
python3 $py probe "$work/probe-gpu.jsonl" "$work/probe-sim.jsonl"

say "2. the switch from a framework's context (switch-probe --free beside an LP)"
beside() { # NAME LP-CMD…: the probe's random requests for 8 s beside the LP (none without one)
	local name=$1
	shift
	if [ $# -gt 0 ]; then
		"$@" >"$work/free-$name-lp.jsonl" 2>"$work/free-$name-lp.err" &
		local lp=$!
		for _ in $(seq 300); do
			[ "$(grep -c '"run"' "$work/free-$name-lp.jsonl" 2>/dev/null)" -ge 3 ] && break
			sleep 0.1
		done
	fi
	step 20 "free $name" "$B/switch-probe" --free 8 >"$work/free-$name.jsonl"
	[ $# -gt 0 ] && { kill -TERM $lp 2>/dev/null; wait $lp; }
}
beside alone
beside torch-bert16 timeout 90 python3 $svc --model bert --batch 16 --interval 30 --runs 100000 --warmup 5
beside replay-bert16 timeout 30 "$B/fikit-replay" --trace scenario/bert_base_b16 --interval 30ms --runs 100000 --json -q
beside replay-bert16-4g timeout 30 "$B/fikit-replay" --trace scenario/bert_base_b16 --interval 30ms --runs 100000 --json -q \
	--footprint-mb 4096
python3 $py free "$work" alone torch-bert16 replay-bert16 replay-bert16-4g

say "3. record on the GPU, replay on the GPU and on simgpu"
rec() { # NAME TRACE-FROM ARGS…: trace a service alone, convert its typical run
	local name=$1 from=$2
	shift 2
	rm -rf "$work/rec-$name"
	step 120 "record $name" python3 $svc "$@" --warmup 10 --runs $((from + 12)) \
		--trace-dir "$work/rec-$name" --trace-lead --trace-from "$from" --trace-runs 10 >"$work/rec-$name.jsonl" &&
		step 30 "convert $name" "$B/fikit-replay" convert --torch-profile "$(ls "$work"/rec-$name/*.json | head -1)" \
			--out "$work/$name.trace"
}
rec graph 20 --model resnet50 --batch 1 --graph
rec bert16 5 --model bert --batch 16
pair=(--json --runs 200 --interval 8ms --profile-runs 20 --hp-trace "$work/graph.trace" --hp-graph --hp-cpu-ns -1
	--lp-trace "$work/bert16.trace" --lp-cpu-ns -1)
if [ -s "$work/graph.trace" ] && [ -s "$work/bert16.trace" ]; then
	step 120 "pair gpu" "$B/fikit" demo --gpu "${pair[@]}" >"$work/pair-gpu.json"
	step 120 "pair simgpu" "$B/fikit" demo --device h200 "${pair[@]}" >"$work/pair-sim.json"
	python3 $py pair "$work/pair-gpu.json" "$work/pair-sim.json" "$work/rec-graph.jsonl"
else
	echo "!! no recorded traces: the pair is not replayed"
fi

say done
tar -C "$work" -czf "$out/calibrate.tgz" --exclude='timeline.jsonl' .
ls -la "$out"
