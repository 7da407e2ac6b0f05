#!/usr/bin/env bash
# The fast-path benchmark's short run (CI): builds the rings, measures every operation
# (ns and callgrind instructions), prints the table with the reference and targets, and
# fails when an operation is above its instruction target (callgrind counts are
# repeatable; the sanitizer build measures ns only and checks nothing).
#
# First, --rdma-core's refusals: CI has no rdma-core source tree (docs/performance.md
# shows a run with one), but a directory that is not one must be refused clearly, by
# build.sh found in the runfiles, before anything is measured.
set -uo pipefail
bin=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$("$bin" --rdma-core "$tmp/missing" 2>&1)
rc=$?
if [[ $rc -ne 1 || "$out" != *"not a directory"* ]]; then
    echo "FAIL: --rdma-core of a missing directory: exit $rc: $out" >&2
    exit 1
fi
out=$("$bin" --rdma-core "$tmp" 2>&1)
rc=$?
if [[ $rc -ne 1 || "$out" != *"is not an rdma-core source tree (no providers/mlx5/qp.c)"* ]]; then
    echo "FAIL: --rdma-core of an empty directory: exit $rc: $out" >&2
    exit 1
fi
echo "ok: --rdma-core refuses a missing directory and one that is not an rdma-core tree"
"$bin" --short --check-targets --json "${TEST_UNDECLARED_OUTPUTS_DIR:-/tmp}/fastpath.json" "$@"
