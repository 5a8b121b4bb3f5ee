#!/usr/bin/env bash
# What the hook costs a PyTorch service on a real GPU (issue 37, item 3):
#
#   tests/gpu/overhead.sh OUTDIR
#
# resnet50 (batch 1, random weights, requests back to back: torch_service.py)
# alone on the GPU, in repetitions of: no hook, hooked while profiled (a
# daemon whose T exceeds the runs: every run measured), hooked while sharing
# (a daemon that holds its profile: one run in 16 sampled), no hook; each
# repetition's profiling task is new (T 1000: it stays profiling). The
# overhead of a phase is its p50 (and mean) JCT against the mean of the two
# un-hooked runs of the same repetition; the un-hooked pair's own difference
# is the noise floor. About 60-90 s (each service imports torch). Needs
# `make all`. Results: OUTDIR/*.jsonl, OUTDIR/summary.txt.
# OVERHEAD_REPS (2) and OVERHEAD_RUNS (150) change the repetitions and runs.
set -u
out=${1:?usage: tests/gpu/overhead.sh OUTDIR}
mkdir -p "$out"
. tests/gpu/lib.sh
B=$PWD/bin
svc=tests/gpu/torch_service.py
reps=${OVERHEAD_REPS:-2}
runs=${OVERHEAD_RUNS:-150}
args=(--model resnet50 --batch 1 --warmup 10)
prof=127.0.0.1:7181 # T beyond the runs: the service stays profiling
share=127.0.0.1:7182 # T 30: profiled first, then sharing
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; wait; }
trap cleanup EXIT
"$B/fikit" serve --data-dir "$out/data-prof" --listen $prof --profile-runs 1000 --log-level warn \
	>"$out/serve-prof.log" 2>&1 &
pids+=($!)
"$B/fikit" serve --data-dir "$out/data-share" --listen $share --profile-runs 30 --log-level warn \
	>"$out/serve-share.log" 2>&1 &
pids+=($!)
for d in data-prof data-share; do
	for _ in $(seq 50); do [ -S "$out/$d/fikit.sock" ] && break; sleep 0.1; done
	[ -S "$out/$d/fikit.sock" ] || { echo "!! the daemon of $d did not start:"; cat "$out/serve-${d#data-}.log"; exit 1; }
done
svc_run() { # OUT (no|prof|share) KEY RUNS: one service, time-limited
	local o=$1 mode=$2 key=$3 n=$4 cmd=()
	case $mode in
	prof) cmd=("$B/fikit" run -p 0 --task-key "$key" --scheduler $prof --) ;;
	share) cmd=("$B/fikit" run -p 0 --task-key "$key" --scheduler $share --) ;;
	esac
	timeout -k 5 60 "${cmd[@]}" python3 $svc "${args[@]}" --runs "$n" >"$o" 2>"$o.err" ||
		{ echo "!! $(basename "$o"): exit $?"; tail -3 "$o.err"; }
}
say "profile the sharing phase's service (T 30)"
svc_run "$out/pre-share.jsonl" share overhead-share 60
"$B/fikit" status --data-dir "$out/data-share" --json >"$out/status-share.json" 2>&1
for r in $(seq "$reps"); do
	say "repetition $r: no hook, profiling, sharing, no hook ($runs runs each)"
	svc_run "$out/a$r.jsonl" no - "$runs"
	svc_run "$out/prof$r.jsonl" prof "overhead-prof-$r" "$runs"
	svc_run "$out/share$r.jsonl" share overhead-share "$runs"
	svc_run "$out/b$r.jsonl" no - "$runs"
done
python3 - "$out" "$reps" <<'PY' | tee "$out/summary.txt"
import json, statistics as st, sys
out, reps = sys.argv[1], int(sys.argv[2])
def jcts(name):
    try:
        return [json.loads(l)["jct_ns"] for l in open(f"{out}/{name}.jsonl") if '"jct_ns"' in l]
    except OSError:
        return []
print("rep  phase      p50 ms  vs no hook   mean ms  vs no hook   noise floor (p50)")
for r in range(1, reps + 1):
    a, b = jcts(f"a{r}"), jcts(f"b{r}")
    if not a or not b:
        print(f"{r}    (an un-hooked run failed)"); continue
    base50, basem = (st.median(a) + st.median(b)) / 2, (st.mean(a) + st.mean(b)) / 2
    noise = 100 * abs(st.median(b) / st.median(a) - 1)
    for ph in ("prof", "share"):
        h = jcts(f"{ph}{r}")
        if not h:
            print(f"{r}    {ph:9}  (failed)"); continue
        print(f"{r}    {'profiling' if ph == 'prof' else 'sharing':9}  {st.median(h)/1e6:6.3f}  {100*(st.median(h)/base50-1):+8.2f} %"
              f"  {st.mean(h)/1e6:7.3f}  {100*(st.mean(h)/basem-1):+8.2f} %   {noise:.2f} %")
PY
