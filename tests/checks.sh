# What the shell tests share (sourced, from the runfiles root: `source tests/checks.sh`):
# fail() counts a failed check, expect_eq() compares, finish() ends the test with the
# count. Each check says what it checked, so a failure's line is enough to read.
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

expect_eq() {  # <what> <expected> <actual>
    [ "$2" == "$3" ] || fail "$1: expected [$2], got [$3]"
}

# Exits 1 with the count when a check failed, else 0 saying so: finish <what was checked>.
finish() {
    if ((failures > 0)); then
        echo "$failures failure(s)" >&2
        exit 1
    fi
    echo "all $1 checks passed"
    exit 0
}
