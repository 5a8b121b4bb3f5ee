#!/usr/bin/env bash
# fikit on a real NVIDIA GPU: the checks simgpu cannot make (docs/bench.md
# "On a real GPU"). Run from the repository root after `make` (the binaries
# in bin/ are all it needs; PyTorch for the last part):
#
#   tests/gpu/check.sh [OUTDIR]
#
# 1. the replayer's spin kernels against their traces' durations;
# 2. fikit demo --gpu: replayed traces alone, default sharing and fikit, the
#    board gate on and off, and a sparse high-priority service;
# 3. PyTorch services (random weights) under the hook: alone, default
#    sharing, fikit with the board, fikit with FIKIT_BOARD=off;
# 4. hook-bench on the real driver (the hook's cost per launch and per
#    CUDA-graph or eager request);
# 5. switch-aware gating (docs/scheduler.md "Switches, bounds and
#    arrivals"): a CUDA-graph ResNet-50 batch 1 every 8 ms beside BERT-base
#    batch 16, default sharing, today's gate and all mechanisms together,
#    and the switch the hooks' probe measured (fikit status gpus[]).
# Every step has a time limit and the script goes on after a failure; the
# figures land in OUTDIR (default gpu-out) as results.tgz and check.log
# (tests/gpu/summary.py tabulates the PyTorch part; docs/bench.md "On a real
# GPU" has one run's figures).
set -u
out=$(realpath -m "${1:-gpu-out}")
mkdir -p "$out"
work=$(mktemp -d /tmp/fikit-gpu-XXXXXX)
B=$PWD/bin
exec > >(tee "$out/check.log") 2>&1
. "$(dirname "$0")/lib.sh"

say machine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
nproc; ldd bin/fikit-replay bin/libfikit_hook.so | grep -i "cuda\|not found"
uname -r
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' 2>&1

say "1. replayer alone: measured vs analytic JCT"
for t in h100/resnet50_4_fwd h100/bert_2_fwd h100/mobilenet_4_fwd; do
	step 30 "replay $t" "$B/fikit-replay" --trace "$t" --runs 50 --warmup 5
done

say "2. fikit demo --gpu"
demo() { # NAME ARGS…
	local name=$1
	shift
	step 90 "demo $name" "$B/fikit" demo --gpu --json --keep "$work/demo-$name" "$@" >"$work/demo-$name.json"
	python3 - "$work/demo-$name.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("alone", "default_sharing", "fikit"):
    m = r[k]
    print(f"{r['board']:>3} {k:16} HP p50 {m['hp_p50_ns']/1e6:7.3f} ms p99 {m['hp_p99_ns']/1e6:7.3f} ms "
          f"x{m['hp_p50_vs_alone']:.3f}  LP {m['lp_runs_per_s']:.1f}/s")
print("LP alone", round(r["lp_alone_runs_per_s"], 1), "/s; device", r["device"])
EOF
}
demo resnet50-bert-on --runs 400 --interval 5ms
demo resnet50-bert-off --runs 400 --interval 5ms --board off
demo mobilenet-resnet101-on --hp-trace h100/mobilenet_4_fwd --lp-trace h100/resnet101_4_fwd --runs 400 --interval 8ms
demo mobilenet-resnet101-off --hp-trace h100/mobilenet_4_fwd --lp-trace h100/resnet101_4_fwd --runs 400 --interval 8ms --board off
demo sparse-on --runs 6 --interval 1500ms --record

say "3. PyTorch services"
tests/gpu/torch.sh "$work"

say "4. hook-bench"
step 150 hook-bench "$B/hook-bench" --json --hook "$B/libfikit_hook.so" --ptx hookclient/test/data/kernels.ptx \
	--rounds 5 --launches 50000 >"$work/hook-bench.json"
cat "$work/hook-bench.json"

say "5. switch-aware gating: CUDA-graph HP every 8 ms + BERT-16 LP"
today=--variant=today
mkdir -p "$work/gating"
TORCH_HP="--model resnet50 --batch 1 --graph" TORCH_LP="--model bert --batch 16" TORCH_EVERY=8 \
	step 300 gating tests/gpu/torch.sh "$work/gating" sharing "today:on:$today" fikit:on
python3 -c 'import json,sys; [print("switch", g) for g in json.load(open(sys.argv[1])).get("gpus") or []]' \
	"$work/gating/torch-status.json"

say done
tar -C "$work" -czf "$out/results.tgz" --exclude='timeline.jsonl' .
ls -la "$out"
