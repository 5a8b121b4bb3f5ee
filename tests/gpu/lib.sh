# lib.sh — what the GPU scripts share (sourced by check.sh, calibrate.sh,
# preswitch.sh): section headers and time-limited steps in their logs.

# say TEXT: a section header with the time.
say() { printf '\n== %s  [%s]\n' "$*" "$(date +%T)"; }

# step LIMIT_S NAME CMD…: run CMD with a time limit, report its status.
step() {
	local lim=$1 name=$2
	shift 2
	timeout -k 5 "$lim" "$@"
	local rc=$?
	[ $rc -eq 0 ] || echo "!! $name: exit $rc"
	return $rc
}
