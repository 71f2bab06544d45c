#!/usr/bin/env bash
# The preloaded pool against plain glibc on crates/memplan-preload/tests/stress.c: wall time
# and minor faults, median of REPEATS runs each, runs of the allocators interleaved.
#
#   scripts/bench_preload_stress.sh [LIBRARY] [REPEATS] [STRESS ARGS...]
#
# LIBRARY defaults to target/release/libmemplan_preload.so (else target/debug/...).
# STRESS ARGS default to "8 4000 0 0 1": 8 threads, 4000 rounds each, no warm-up and no
# fork, a program the pool cannot plan. "8 2000 40 250 1" adds the plannable warm-up
# iterations and forks (the integration test's program). STRESS_CFLAGS=-DPOW2_ONLY builds a
# program that asks only power-of-two alignments (for libraries that refuse memalign(24, n)).
# A run that fails (no "stress: wall" line) stops the script.
set -euo pipefail
cd "$(dirname "$0")/.."
lib="${1:-}"
if [ -z "$lib" ]; then
    lib=target/release/libmemplan_preload.so
    [ -f "$lib" ] || lib=target/debug/libmemplan_preload.so
fi
repeats="${2:-5}"
shift $(( $# > 2 ? 2 : $# ))
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(8 4000 0 0 1)
bin="$(mktemp -d)/stress"
cc -O2 -pthread -w ${STRESS_CFLAGS:-} -o "$bin" crates/memplan-preload/tests/stress.c
lib="$(realpath "$lib")"
echo "library: $lib"
echo "stress ${args[*]}, median of $repeats"
declare -A walls faults
modes=(glibc memplan-default memplan-heap)
for ((r = 0; r < repeats; r++)); do
    for mode in "${modes[@]}"; do
        case "$mode" in
            glibc) line=$("$bin" "${args[@]}" 2>&1 >/dev/null | grep 'stress: wall') ;;
            memplan-default) line=$(LD_PRELOAD="$lib" "$bin" "${args[@]}" 2>&1 >/dev/null | grep 'stress: wall') ;;
            memplan-heap) line=$(MEMPLAN_POOL_UNPLANNED=heap LD_PRELOAD="$lib" "$bin" "${args[@]}" 2>&1 >/dev/null | grep 'stress: wall') ;;
        esac
        walls[$mode]+="$(sed -E 's/.*wall ([0-9.]+) s.*/\1/' <<<"$line") "
        faults[$mode]+="$(sed -E 's/.*minor faults ([0-9]+).*/\1/' <<<"$line") "
    done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
g_wall=$(median <<<"${walls[glibc]}")
g_faults=$(median <<<"${faults[glibc]}")
printf '%-16s %10s %8s %12s %8s\n' allocator "wall s" "x glibc" "min faults" "x glibc"
for mode in "${modes[@]}"; do
    w=$(median <<<"${walls[$mode]}")
    f=$(median <<<"${faults[$mode]}")
    printf '%-16s %10s %8.2f %12s %8.2f\n' "$mode" "$w" "$(echo "$w / $g_wall" | bc -l)" "$f" "$(echo "$f / $g_faults" | bc -l)"
done
