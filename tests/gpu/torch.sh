#!/usr/bin/env bash
# PyTorch services under fikit on a real GPU (tests/gpu/check.sh, part 3):
#
#   tests/gpu/torch.sh WORKDIR [MODE…]
#
# A high-priority (HP) resnet50 (batch 1, a request every 10 ms) and a
# low-priority (LP) resnet101 (batch 16, back to back), random weights. First
# both are profiled under the hook, alone, and the HP runs alone without the
# hook (the baseline); then each MODE runs the pair, the LP started first:
#   sharing[-trace]      no hook: the GPU's default time-slicing
#   NAME:BOARD[:FLAG…]   both hooked, FIKIT_BOARD=BOARD (on or off), the
#                        daemon restarted with FLAGs (comma-separated
#                        `fikit serve` flags) when they differ from the
#                        last mode's
#   alone[-…][:BOARD]    the HP alone (no LP): without the hook, or hooked
#                        with BOARD
# A NAME ending in -trace also records the GPU's kernels with torch.profiler
# (torch_service.py --trace-dir) into WORKDIR/trace-NAME/.
# Default modes: sharing fikit:on fikit-udp:off. Every service runs with a
# time limit; results are WORKDIR/t-*.jsonl, summarised by summary.py.
# TORCH_HP and TORCH_LP replace the services' torch_service.py arguments,
# TORCH_EVERY the HP's request interval in ms (10), TORCH_RUNS the HP's
# requests per mode (300).
set -u
work=$1
shift
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(sharing fikit:on fikit-udp:off)
B=$PWD/bin
svc=tests/gpu/torch_service.py
read -r -a HP <<<"${TORCH_HP:---model resnet50 --batch 1}"
read -r -a LP <<<"${TORCH_LP:---model resnet101 --batch 16}"
every=${TORCH_EVERY:-10}
hp_runs=${TORCH_RUNS:-300}
sched=127.0.0.1:7171
data=$work/data
served=
serve_flags=unset
say() { printf '\n== %s  [%s]\n' "$*" "$(date +%T)"; }
serve() { # FLAGS (comma-separated): (re)start the daemon if they changed
	[ "$1" = "$serve_flags" ] && return 0
	[ -n "$served" ] && { kill -TERM "$served"; wait "$served"; }
	serve_flags=$1
	local extra=()
	[ -n "$1" ] && IFS=, read -r -a extra <<<"$1"
	"$B/fikit" serve --data-dir "$data" --listen $sched --record "$work/torch-decisions.jsonl" \
		--profile-runs 30 --log-level warn "${extra[@]}" >>"$work/serve.log" 2>&1 &
	served=$!
	for _ in $(seq 50); do [ -S "$data/fikit.sock" ] && break; sleep 0.1; done
	echo "daemon: ${extra[*]:-(defaults)}"
}
run() { # OUT HOOK(hp|lp|no) BOARD ARGS…: one service in the foreground
	local o=$1 hook=$2 board=$3
	shift 3
	if [ "$hook" = no ]; then
		timeout -k 5 100 python3 $svc "$@" >"$o" 2>"$o.err"
	else
		local prio=0
		[ "$hook" = lp ] && prio=5
		FIKIT_BOARD=$board timeout -k 5 100 "$B/fikit" run -p $prio --task-key "torch-$hook" --scheduler $sched \
			-- python3 $svc "$@" >"$o" 2>"$o.err"
	fi
	local rc=$?
	[ $rc -eq 0 ] || { echo "!! $(basename "$o"): exit $rc"; tail -5 "$o.err"; }
}
lp_start() { # OUT HOOK BOARD ARGS…: the LP in the background; returns once it runs
	run "$1" "$2" "$3" "${LP[@]}" --runs 1000000 --warmup 5 "${@:4}" &
	lp_pid=$!
	for _ in $(seq 600); do
		[ "$(grep -c '"run"' "$1" 2>/dev/null)" -ge 3 ] && return 0
		kill -0 $lp_pid 2>/dev/null || break
		sleep 0.1
	done
	echo "!! LP did not start"
}
lp_stop() {
	pkill -TERM -f "^[^ ]*python3 $svc ${LP[*]}"
	wait $lp_pid
}

serve ""
say "profile HP and LP under the hook (alone)"
run "$work/t-profile-hp.jsonl" hp on "${HP[@]}" --runs 50 --warmup 3
run "$work/t-profile-lp.jsonl" lp on "${LP[@]}" --runs 45 --warmup 3
"$B/fikit" profile ls --data-dir "$data"
say "HP alone without the hook; LP alone for 3 s"
run "$work/t-hp-alone-nohook.jsonl" no on "${HP[@]}" --runs $hp_runs --interval $every
lp_start "$work/t-lp-alone.jsonl" no on
sleep 3
lp_stop
for mode in "${modes[@]}"; do
	IFS=: read -r name board flags <<<"$mode"
	say "HP + LP: $mode"
	LPT=() HPT=()
	if [[ $name == *-trace ]]; then
		LPT=(--trace-dir "$work/trace-$name")
		HPT=(--trace-dir "$work/trace-$name" --trace-lead)
	fi
	if [[ $name == alone* ]]; then
		[ -z "$board" ] && hook=no || hook=hp
		[ -n "$board" ] && serve "$flags"
		run "$work/t-$name-hp.jsonl" $hook "${board:-on}" "${HP[@]}" --runs $hp_runs --interval $every "${HPT[@]}"
		continue
	elif [[ $name == sharing* ]]; then
		lp_start "$work/t-$name-lp.jsonl" no on "${LPT[@]}"
		run "$work/t-$name-hp.jsonl" no on "${HP[@]}" --runs $hp_runs --interval $every "${HPT[@]}"
	else
		serve "$flags"
		lp_start "$work/t-$name-lp.jsonl" lp "$board" "${LPT[@]}"
		run "$work/t-$name-hp.jsonl" hp "$board" "${HP[@]}" --runs $hp_runs --interval $every "${HPT[@]}"
	fi
	lp_stop
done
"$B/fikit" status --data-dir "$data" --json >"$work/torch-status.json"
kill -TERM "$served"
wait "$served"
python3 tests/gpu/summary.py "$work" "${modes[@]%%:*}"
