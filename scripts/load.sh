#!/usr/bin/env bash
# load.sh runs a command while busy loops keep the CPU cores loaded, to
# check that the tests judge order and causality rather than timing luck.
#
#   scripts/load.sh [-l LOOPS] [-r RUNS] [-t SECONDS] [--] COMMAND [ARG...]
#
#   -l LOOPS    busy loops to start (default 2: both cores of a 2-core box)
#   -r RUNS     run COMMAND up to RUNS times in a row, stopping at the first
#               failure (default 1)
#   -t SECONDS  the most the loops run (default 3600): each loop ends by
#               itself then, even if this script was killed
#
# Without COMMAND it only loads the cores for -t SECONDS (Ctrl-C stops it).
# The loops are this script's own children, stopped by their pids when the
# command ends or the script exits; nothing is stopped by name. It prints one
# line per run and a summary: runs passed, the first failure, the load.
# Example: scripts/load.sh -r 10 -- make test-short
set -euo pipefail

loops=2 runs=1 limit=3600
while getopts "l:r:t:h" opt; do
	case $opt in
	l) loops=$OPTARG ;;
	r) runs=$OPTARG ;;
	t) limit=$OPTARG ;;
	*) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "${1-}" = -- ] && shift
for v in "$loops" "$runs" "$limit"; do
	[[ $v =~ ^[0-9]+$ ]] && [ "$v" -gt 0 ] || { echo "load.sh: -l, -r and -t take positive integers" >&2; exit 2; }
done

pids=()
stop() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	pids=()
}
trap stop EXIT
trap 'exit 130' INT TERM

for _ in $(seq "$loops"); do
	# A busy loop that ends by itself after $limit seconds at most.
	bash -c 'end=$((SECONDS + $1)); while ((SECONDS < end)); do :; done' load-loop "$limit" &
	pids+=($!)
done
echo "load.sh: $loops busy loops (pids ${pids[*]}), at most ${limit}s" >&2

if [ $# -eq 0 ]; then
	wait "${pids[@]}" 2>/dev/null || true
	exit 0
fi

passed=0 status=0
for run in $(seq "$runs"); do
	start=$SECONDS
	if "$@"; then
		passed=$((passed + 1))
		echo "load.sh: run $run/$runs passed in $((SECONDS - start))s: $*" >&2
	else
		status=$?
		echo "load.sh: run $run/$runs FAILED (exit $status) after $((SECONDS - start))s: $*" >&2
		break
	fi
done
echo "load.sh: $passed of $runs runs passed under $loops busy loops; load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)" >&2
exit $status
