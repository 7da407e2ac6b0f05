#!/usr/bin/env bash
# bench/perf/compare.sh where it cannot compare: a host without the kernel RDMA device it
# is given says so and exits 77 without running anything; usage errors exit 2.
set -uo pipefail
compare=$1
failures=0
expect() {  # <what> <expected status> <status> [<text that must be in the output> <output>]
    if [ "$2" != "$3" ] || { [ $# -ge 5 ] && [[ "$5" != *"$4"* ]]; }; then
        echo "FAIL: $1: status $3 (want $2)${4:+, output must say \"$4\"}: ${5:-}" >&2
        failures=$((failures + 1))
    else
        echo "ok: $1"
    fi
}
out=$("$compare" --ib-dev cxv-no-such-device0 2>&1)
expect "no kernel RDMA device" 77 $? "no kernel RDMA device on this host" "$out"
[[ "$out" == *"/sys/class/infiniband/cxv-no-such-device0"* ]] || { echo "FAIL: the message names the device" >&2; failures=$((failures + 1)); }
out=$("$compare" --tests bogus_lat 2>&1)
expect "unknown test" 2 $? "unknown test bogus_lat" "$out"
out=$("$compare" --bogus 2>&1)
expect "unknown option" 2 $? "unknown option --bogus" "$out"
out=$("$compare" --iters many 2>&1)
expect "--iters not a number" 2 $? "--iters takes a number" "$out"
((failures == 0)) || exit 1
echo "all compare.sh checks passed"
