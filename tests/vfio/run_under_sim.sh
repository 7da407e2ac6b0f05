#!/usr/bin/env bash
# Runs a test binary under the VFIO presentation layer:
#   run_under_sim.sh <cxv-sim> [cxv-sim run options] -- <binary> [args]
# The exit status is the binary's (cxv-sim run passes it through).
set -euo pipefail
sim=$1
shift
exec "$sim" run "$@"
