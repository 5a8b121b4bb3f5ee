#!/usr/bin/env bash
# What the hook costs, on a lent GPU machine (issue 37; docs/bench.md "On a
# real GPU"): one call of about four minutes, with bin/ built elsewhere and
# carried (nothing is built here; PyTorch and torchvision for part 2):
#
#   tests/gpu/costs.sh OUTDIR
#
# 1. The replayer on the real driver: --help with no driver on the library
#    path (it loads libcuda.so.1 only to replay), then resnet50's trace
#    alone, un-hooked and hooked (a daemon of its own), 50 runs each.
# 2. tests/gpu/overhead.sh: a PyTorch resnet50 un-hooked, hooked while
#    profiled and hooked while sharing, interleaved repetitions.
# 3. `fikit bench --quick` on simgpu, using the machine's idle cores as a
#    quiet host (the development VM has two, shared): the overhead rows
#    p1_overhead_pct and p2_overhead_pct among the rest.
# Every step has its own time limit (COSTS_BENCH=0 leaves part 3 out);
# OUTDIR gets costs.log, the summaries and raw.tgz (everything else).
set -u
out=$(realpath -m "${1:?usage: costs.sh OUTDIR}")
mkdir -p "$out"
B=$PWD/bin
exec > >(tee "$out/costs.log") 2>&1
. "$(dirname "$0")/lib.sh"

say machine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
nproc
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1

say "1. the replayer on the real driver"
env LD_LIBRARY_PATH=/nonexistent "$B/fikit-replay" --help >/dev/null 2>&1 && echo "--help without a driver on the path: ok" ||
	echo "!! --help without a driver on the path failed"
step 60 "replay un-hooked" "$B/fikit-replay" --trace h100/resnet50_4_fwd --runs 50 --warmup 5 --json -q >"$out/replay-nohook.jsonl"
"$B/fikit" serve --data-dir "$out/replay-data" --listen 127.0.0.1:7191 --log-level warn >"$out/replay-serve.log" 2>&1 &
served=$!
for _ in $(seq 50); do [ -S "$out/replay-data/fikit.sock" ] && break; sleep 0.1; done
step 60 "replay hooked" "$B/fikit" run -p 0 --task-key costs-replay --scheduler 127.0.0.1:7191 -- \
	"$B/fikit-replay" --trace h100/resnet50_4_fwd --runs 50 --warmup 5 --json -q >"$out/replay-hook.jsonl"
kill -TERM $served
wait $served
"$B/fikit" profile ls --data-dir "$out/replay-data"
python3 - "$out" <<'PY'
import json, statistics as st, sys
out = sys.argv[1]
for name in ("nohook", "hook"):
    try:
        j = [json.loads(l)["jct_ns"] for l in open(f"{out}/replay-{name}.jsonl") if l.startswith('{"run"')]
    except (OSError, ValueError, KeyError) as e:
        print(name, "no runs:", e); continue
    print(f"replay {name:7} runs {len(j):3}  p50 {st.median(j)/1e6:.3f} ms" if j else f"replay {name}: no runs")
PY

say "2. a PyTorch service's hook cost (overhead.sh)"
step 150 overhead tests/gpu/overhead.sh "$out/overhead"

say "3. fikit bench --quick on simgpu, on this machine's idle cores"
[ "${COSTS_BENCH:-1}" = 1 ] && step 240 bench "$B/fikit" bench --quick --out "$out/bench" --json "$out/bench.json" 2>"$out/bench.err"
python3 - "$out/bench.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    sys.exit(f"no bench results: {e}")
s = r.get("summary") or {}
print({k: s.get(k) for k in ("p1_overhead_pct", "p2_overhead_pct", "p6_lp_cv", "p7_hook_ns", "p5_fill_pct")})
PY
grep -i -A12 "overhead" "$out/bench/report.md" 2>/dev/null | head -60
say done
# The device returns a few files: the log and the summaries stay, the rest
# goes into raw.tgz.
cd "$out" && mkdir -p keep && mv costs.log bench.json keep/ 2>/dev/null
cp overhead/summary.txt keep/overhead-summary.txt 2>/dev/null
cp bench/report.md keep/bench-report.md 2>/dev/null
tar -czf keep/raw.tgz --exclude=keep --exclude='*/data-*' --exclude=replay-data . 2>/dev/null
find . -mindepth 1 -maxdepth 1 ! -name keep -exec rm -rf {} +
mv keep/* . && rmdir keep
ls -la "$out"
