# Sourced by the guest tests: how a shell test reports its one test case in doctest's
# words, so that tools/test counts it (and tells a skip from a pass).
skip() {
    echo "SKIPPED: $*"
    echo "[doctest] test cases: 1 | 0 passed | 0 failed | 1 skipped"
    exit 0
}
fail() {
    echo "FAILED: $*"
    echo "[doctest] test cases: 1 | 0 passed | 1 failed | 0 skipped"
    exit 1
}
