#!/usr/bin/env bash
# Paired benchmark of `memplan plan --planner search` against MiniMalloc (issue #19).
#
#   scripts/bench_search.sh MINIMALLOC_BINARY [TIMEOUT_S] [SEEDS]
#
# 1. Each challenging instance at its best known peak (known_results.csv), one thread:
#    MiniMalloc `--capacity=C` and memplan `--capacity C --threads 1` (decision mode),
#    run back to back, then memplan's optimisation mode (no capacity) until its progress
#    line first shows an arena <= C. Wall and user (CPU) seconds; "-" when the timeout
#    ran out first.
# 2. D and J in optimisation mode, SEEDS seeds (default 5): `--threads 2 --time-limit 5`
#    and `--threads 1 --time-limit 10`: the arena and when it was found.
# Build memplan first: cargo build --release -p memplan-cli. MiniMalloc is not part of
# this repository: build it from its public source in a temporary folder.
set -euo pipefail
MM=${1:?usage: scripts/bench_search.sh MINIMALLOC_BINARY [TIMEOUT_S] [SEEDS]}
TIMEOUT=${2:-30}
SEEDS=${3:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MEMPLAN=${MEMPLAN:-$ROOT/target/release/memplan}
BENCH=${BENCH:-$ROOT/../shared/benchmarks/minimalloc}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Runs a command under /usr/bin/time; prints "wall user status".
timed() {
    local status=0
    /usr/bin/time -f '%e %U' -o "$TMP/time" "$@" >"$TMP/out" 2>"$TMP/err" || status=$?
    echo "$(cat "$TMP/time" | tail -1) $status"
}

# The first time (seconds) a search progress line in FILE shows best <= CAP, or "-".
reached() {
    awk -v cap="$2" '/^search: best/ { if ($3 + 0 <= cap) { print $(NF-1); found = 1; exit } }
        END { if (!found) print "-" }' "$1"
}

echo "# uptime before: $(uptime)"
echo
echo "## Time to the best known peak, one thread (timeout ${TIMEOUT} s)"
echo
echo "| instance | best known | MiniMalloc wall | MiniMalloc user | memplan --capacity wall | memplan --capacity user | memplan optimising: reached at | speed-up (wall) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for name in A B C D E F G H I J K; do
    file=$BENCH/challenging/$name.1048576.csv
    cap=$(awk -F, -v f="challenging/$name.1048576.csv" '$1 == f { print $5 }' "$BENCH/known_results.csv")
    read -r mw mu ms < <(timed timeout "$TIMEOUT" "$MM" --capacity="$cap" --input="$file" --output="$TMP/mm.csv")
    [ "$ms" = 0 ] || { mw="-"; mu="-"; }
    read -r pw pu ps < <(timed "$MEMPLAN" plan "$file" --planner search --threads 1 \
        --time-limit "$TIMEOUT" --capacity "$cap" --format json -o "$TMP/plan.json")
    [ "$ps" = 0 ] || { pw="-"; pu="-"; }
    "$MEMPLAN" plan "$file" --planner search --threads 1 --time-limit "$TIMEOUT" \
        --format json -o "$TMP/opt.json" 2>"$TMP/opt.err" || true
    opt=$(reached "$TMP/opt.err" "$cap")
    ratio=$(awk -v a="$mw" -v b="$pw" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.1fx", a / b }')
    echo "| $name | $cap | $mw | $mu | $pw | $pu | $opt | $ratio |"
done
echo
echo "# uptime: $(uptime)"
echo
echo "## D and J, optimisation mode, seeds 0..$((SEEDS - 1))"
echo
echo "| instance | threads | limit | seed | arena | best known | found at (s) | wall | user |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for name in D J; do
    file=$BENCH/challenging/$name.1048576.csv
    cap=$(awk -F, -v f="challenging/$name.1048576.csv" '$1 == f { print $5 }' "$BENCH/known_results.csv")
    for setting in "2 5" "1 10"; do
        read -r threads limit <<<"$setting"
        for seed in $(seq 0 $((SEEDS - 1))); do
            read -r w u s < <(timed "$MEMPLAN" plan "$file" --planner search --threads "$threads" \
                --time-limit "$limit" --seed "$seed" --format json -o "$TMP/plan.json")
            arena=$(grep -o '"arena_bytes": *[0-9]*' "$TMP/plan.json" | head -1 | grep -o '[0-9]*$')
            at=$(reached "$TMP/err" "$cap")
            echo "| $name | $threads | $limit s | $seed | $arena | $cap | $at | $w | $u |"
        done
    done
done
echo
echo "# uptime after: $(uptime)"
