#!/usr/bin/env bash
# bench/perf/compare.sh --perftest-on-model at tiny sizes: Debian's unmodified perftest
# (ib_send_lat, ib_write_bw, ib_read_lat) on the model under `cxv exec`, two processes
# each under its own `cxv-sim run --fabric DIR`, beside cxv-perf on the model; the
# side-by-side table must hold figures from both harnesses for every row. perftest links
# rdma-core's libmlx5.so.1 and libefa.so.1: cxv exec's own copies answer it, with
# nothing on LD_LIBRARY_PATH (an LD_LIBRARY_PATH the test inherits is cleared).
#   perftest_on_model_test.sh COMPARE CXV-SIM CXV CXV-PERF
set -uo pipefail
compare=$1 sim=$2 cxv=$3 perf=$4
unset LD_LIBRARY_PATH
if [ ! -x /usr/bin/ib_send_lat ]; then
    echo "perftest is not installed (tools/setup installs it): nothing to run" >&2
    exit 1
fi
# Under --config=san cxv's libraries bring ASan into perftest's processes, whose leak
# check then reports the buffers Debian's perftest never frees before it exits: not
# ours to find here (cxv-perf's are checked by perf_test and rdma_cm_test).
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
abs() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }
out=$(mktemp /tmp/cxv-pt-model.XXXXXX)
trap 'rm -f "$out"' EXIT
timeout 600 "$compare" --perftest-on-model --cxv-sim "$(abs "$sim")" --cxv "$(abs "$cxv")" \
    --cxv-perf "$(abs "$perf")" --tests "send_lat write_bw read_lat" --sizes "8 1024" \
    --iters 100 --out "$out"
status=$?
failures=0
[ "$status" = 0 ] || { echo "FAIL: compare.sh exited $status" >&2; failures=$((failures + 1)); }
rows=0
# | test (unit) | bytes | perftest (a (b)) | cxv-perf (c (d)) | ratio |
while IFS='|' read -r _ test bytes pt cx ratio _; do
    [[ "$bytes" =~ ^\ *[0-9]+\ *$ ]] || continue
    rows=$((rows + 1))
    # The figure in parentheses: the 99th percentile, or the message rate (MB/s of 8-byte
    # messages may round to 0.00 on the model).
    p=$(echo "$pt" | tr -d '()' | awk '{print $2}') c=$(echo "$cx" | tr -d '()' | awk '{print $2}')
    if ! awk -v a="$p" -v b="$c" 'BEGIN { exit !(a + 0 > 0 && b + 0 > 0) }'; then
        echo "FAIL: row$test|$bytes: perftest '$pt', cxv-perf '$cx'" >&2
        failures=$((failures + 1))
    fi
done <"$out"
[ "$rows" = 6 ] || { echo "FAIL: $rows rows, want 6" >&2; failures=$((failures + 1)); }
grep -q "software model's, not a card's (perftest under cxv exec)" "$out" ||
    { echo "FAIL: the table does not say the figures are the model's" >&2; failures=$((failures + 1)); }
((failures == 0)) || exit 1
echo "perftest and cxv-perf both ran on the model: $rows rows"
