#!/usr/bin/env bash
# The fast-path benchmark's short run (CI): builds the rings, measures every operation
# (ns and callgrind instructions) and prints the table with the reference and targets.
set -uo pipefail
bin=$1
shift
"$bin" --short --json "${TEST_UNDECLARED_OUTPUTS_DIR:-/tmp}/fastpath.json" "$@"
