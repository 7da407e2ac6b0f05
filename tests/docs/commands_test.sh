#!/usr/bin/env bash
# The command blocks of README.md and docs/*.md, run as a reader would run them on the
# model. Every ```sh block is marked, on the line before its fence, with an HTML comment
# (invisible when the page is rendered) that says how it is checked:
#   <!-- docs-test: run -->          its commands run one after the other; each must
#                                     succeed (exit status 0)
#   <!-- docs-test: pairs -->        its commands come in pairs, a server and then its
#                                     client, as a reader runs them in two terminals: the
#                                     server in the background until its port listens,
#                                     then the client; both must succeed. `export` lines
#                                     hold for the pairs after them; `bazel build` lines
#                                     run where they stand.
#   <!-- docs-test: skip REASON -->  not run here, and why (a card, a guest, minutes)
# A block without a mark fails the test, so a new block is run or its reason written.
#
# What the commands name is what this test has built (tests/docs/BUILD's data, given as
# LABEL=PATH arguments): `bazel build LABEL...` checks that each label is one of them (a
# label the docs name that does not exist fails), `bazel-bin/PATH` and the bare program
# names (cxv, cxv-sim, cxv-perf, cxvd) are those binaries. /tmp/fab becomes a directory
# of the test's own, and every port after -p, -lp, -B, -P or --port a free one, so that
# parallel tests cannot collide. Each command is bounded in time; a server left running
# is killed by its process id.
set -uo pipefail

here=$(dirname "$0")
# skip, fail, free_ports: the tests' shared reporting (one test case, in doctest's words).
. "$here/../qemu/guest_test_lib.sh"

root=$(pwd)  # the runfiles tree: README.md and docs/ are here
scratch=$(mktemp -d /tmp/cxv-docs-test-XXXXXX)
servers=()
cleanup() {
    for p in "${servers[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null; done
    rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# The binaries: LABEL=PATH arguments.
mkdir -p "$scratch/bin" "$scratch/work/bazel-bin"
: >"$scratch/labels"
for a in "$@"; do
    label=${a%%=*}
    path=${a#*=}
    [ -e "$path" ] || fail "$label: $path is not in the runfiles"
    echo "$label" >>"$scratch/labels"
    mkdir -p "$scratch/work/bazel-bin/$(dirname "$path")"
    ln -sf "$(realpath "$path")" "$scratch/work/bazel-bin/$path"
    case $(basename "$path") in
        cxv | cxv-sim | cxv-perf | cxvd) ln -sf "$(realpath "$path")" "$scratch/bin/$(basename "$path")" ;;
    esac
done
# `bazel build`: the labels must be ones this test built (the options are the reader's).
cat >"$scratch/bin/bazel" <<EOF
#!/usr/bin/env bash
[ "\${1:-}" = build ] || { echo "bazel (the docs test): only 'bazel build' is known here, not: \$*" >&2; exit 2; }
shift
for a in "\$@"; do
    case \$a in
        //*:*) p=\${a%%:*}; [ "\${a##*:}" = "\${p##*/}" ] && a=\$p ;;  # //pkg/x:x is //pkg/x
    esac
    case \$a in
        //*) grep -qxF -- "\$a" "$scratch/labels" || { echo "bazel (the docs test): \$a is not a target the test built" >&2; exit 1; } ;;
    esac
done
EOF
chmod +x "$scratch/bin/bazel"
export PATH="$scratch/bin:$PATH"
# In the sanitizer build ASan's runtime comes into every program under cxv-sim: what
# libfabric, UCX and the others still hold at their exit is theirs to free, not cxv's.
if [ -n "${ASAN_OPTIONS:-}" ] && [[ $ASAN_OPTIONS != *detect_leaks=0* ]]; then
    export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
fi

# Every ```sh block: FILE LINE MARK, then its lines, into block.N.
n=0
for md in README.md docs/*.md; do
    [ -f "$root/$md" ] || fail "$md is not in the runfiles"
    k=$(awk -v md="$md" -v out="$scratch/block" -v start="$n" '
        /^```/ {
            if (inb) { inb = 0; close(f); next }
            if ($0 == "```sh") {
                inb = 1; k++
                f = out "." (start + k)
                mark = prev ~ /^<!-- docs-test: .* -->$/ ? prev : "-"
                sub(/^<!-- docs-test: /, "", mark); sub(/ -->$/, "", mark)
                print md " " NR " " mark > f
                next
            }
            inb = 2  # another language: not ours
            next
        }
        inb == 1 { print > f }
        inb == 2 { next }
        { if ($0 != "") prev = $0 }
        END { print k + 0 }
    ' "$root/$md")
    n=$((n + k))
done
[ "$n" -gt 0 ] || fail "no sh block found in README.md and docs/"

# The options that name a port, and the ports a command line names with them, in order.
port_options='-p|-lp|-B|-P|--port'
ports_in() {
    grep -oE -- "(^| )($port_options) [0-9]{4,5}" <<<"$1" | awk '{print $2}'
}

# The block's commands, one per line: continuation lines joined, comments and blank
# lines dropped, /tmp/fab and the ports replaced. (Not in a subshell: the ports' locks
# stay with this shell.)
commands() {
    local file=$1
    local body
    body=$(tail -n +2 "$file" | sed -e ':a' -e '/\\$/N; s/\\\n */ /; ta' | sed -e 's/^ *//' -e '/^#/d' -e '/^$/d' \
        -e 's/  *#.*$//')
    local p
    for p in $(ports_in "$body" | sort -u); do
        free_ports 1
        body=$(sed -E "s/(^| )($port_options) $p( |\$)/\1\2 ${ports[0]}\3/g" <<<"$body")
    done
    sed "s|/tmp/fab|$scratch/fab|g" <<<"$body"
}

# The port a server command listens on (after the substitution), or nothing.
port_of() {
    ports_in "$1" | head -1
}

# Whether a socket listens on TCP port $1 (state 0A), without connecting to it.
listening() {
    awk -v p="$(printf ':%04X' "$1")" 'substr($2, length($2) - 4) == p && $4 == "0A" { found = 1 }
        END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# run_one LIMIT COMMAND: in the work directory; output to the log; exit status back.
run_one() {
    (cd "$scratch/work" && timeout -k 5 "$1" bash -c "$2") >>"$scratch/log" 2>&1
}

# failed WHAT STATUS: the block's output so far, then the failure.
failed() {
    cat "$scratch/log"
    fail "$1 failed (status $2)"
}

ran=0 skipped=0
for ((i = 1; i <= n; i++)); do
    f="$scratch/block.$i"
    read -r md line mark rest <"$f"
    where="$md:$line"
    case $mark in
        skip)
            [ -n "$rest" ] || fail "$where: 'docs-test: skip' without the reason"
            echo "$where: not run: $rest"
            skipped=$((skipped + 1))
            continue
            ;;
        run | pairs) ;;
        *) fail "$where: an sh block without its mark; put <!-- docs-test: run -->, <!-- docs-test: pairs --> or <!-- docs-test: skip REASON --> on the line before its fence" ;;
    esac
    rm -rf "$scratch/fab" && mkdir -p "$scratch/fab"
    : >"$scratch/log"
    commands "$f" >"$scratch/commands"
    mapfile -t cmds <"$scratch/commands"
    ((${#cmds[@]} > 0)) || fail "$where: no command in the block"
    if [ "$mark" = run ]; then
        for c in "${cmds[@]}"; do
            echo "\$ $c" >>"$scratch/log"
            run_one 180 "$c" || failed "$where: '$c'" $?
        done
    else
        exports=""
        server=""
        for c in "${cmds[@]}"; do
            if [[ $c == export\ * ]]; then
                exports+="$c; "
            elif [[ $c == bazel\ * ]]; then  # the build before the pairs
                echo "\$ $c" >>"$scratch/log"
                run_one 60 "$c" || failed "$where: '$c'" $?
            elif [ -z "$server" ]; then
                server=$c
            else
                rm -rf "$scratch/fab" && mkdir -p "$scratch/fab"  # each pair on a fabric of its own
                port=$(port_of "$server")
                [ -n "$port" ] || fail "$where: the server '$server' names no port to wait for"
                echo "\$ $server &" >>"$scratch/log"
                (cd "$scratch/work" && exec setsid timeout -k 5 180 bash -c "$exports$server") >>"$scratch/log" 2>&1 &
                spid=$!
                servers+=("$spid")
                for _ in $(seq 1 300); do
                    listening "$port" && break
                    kill -0 "$spid" 2>/dev/null || break
                    sleep 0.1
                done
                listening "$port" || { cat "$scratch/log"; fail "$where: '$server' did not listen on $port in 30 s"; }
                echo "\$ $c" >>"$scratch/log"
                run_one 180 "$exports$c" || failed "$where: the client '$c'" $?
                wait "$spid" || failed "$where: the server '$server'" $?
                server=""
            fi
        done
        [ -z "$server" ] || fail "$where: a server without its client: '$server'"
    fi
    echo "$where: ran ${#cmds[@]} command(s)"
    ran=$((ran + 1))
done
echo "$ran blocks run, $skipped not run (their reasons above), of $n"
echo "[doctest] test cases: 1 | 1 passed | 0 failed | 0 skipped"
