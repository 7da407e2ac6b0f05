#!/usr/bin/env bash
# The fast-path benchmark's short run (CI): builds the rings, measures every operation
# (ns and callgrind instructions), prints the table with the reference and targets, and
# fails when an operation is above its instruction target (callgrind counts are
# repeatable; the sanitizer build measures ns only and checks nothing).
set -uo pipefail
bin=$1
shift
"$bin" --short --check-targets --json "${TEST_UNDECLARED_OUTPUTS_DIR:-/tmp}/fastpath.json" "$@"
