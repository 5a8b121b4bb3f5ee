#!/usr/bin/env bash
# tests/busy.sh CMD...: run CMD with two busy loops spinning on the host's
# CPUs, as a loaded machine would (issue 32: the suite must pass so), and
# print how long it took. The loops are this script's children, killed by
# their ids when CMD ends, whatever its exit. `make test-busy` runs make
# test so; BUSY_LOOPS sets how many loops (2).
set -u
loops=()
stop() {
	[ ${#loops[@]} -gt 0 ] && kill "${loops[@]}" 2>/dev/null
	wait "${loops[@]}" 2>/dev/null
	loops=()
}
trap stop EXIT
trap 'exit 130' INT TERM
for _ in $(seq "${BUSY_LOOPS:-2}"); do
	(while :; do :; done) &
	loops+=($!)
done
echo "== busy host: ${#loops[@]} busy loops (pids ${loops[*]}) while: $*" >&2
start=$(date +%s)
"$@"
rc=$?
echo "== busy host: exit $rc after $(($(date +%s) - start)) s: $*" >&2
exit $rc
