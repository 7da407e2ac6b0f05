#!/bin/sh
# Builds rdma-core's mlx5 fast path (providers/mlx5/qp.c, cq.c, srq.c, unchanged) from a
# user's rdma-core source tree, with harness.c, into OUT/rc_fastpath: what
# `fastpath --rdma-core DIR` runs beside cxv's own loops (docs/performance.md). Nothing
# of rdma-core is kept in this repository; the tree is read where it is.
#
#   build.sh RDMA_CORE_DIR OUT_DIR
#
# CC and CFLAGS come from the environment: fastpath passes the compiler and the flags it
# was built with. Needs python3 (the tree's own buildlib/make_abi_structs.py). Prints
# what it built with on OUT/INFO's lines; exits non-zero with the reason on stderr.
#
# What the tree's CMake would do, done here by hand:
#  - config.h: the few definitions the provider's and libibverbs' headers test, for
#    x86-64 Linux with gcc;
#  - include/{infiniband,rdma,linux,util,ccan}: links into the tree, as CMake publishes
#    the public and internal headers;
#  - include/kernel-abi/{ib_user_verbs,mlx5-abi}.h: generated from the tree's kernel
#    headers by its make_abi_structs.py;
#  - valgrind/memcheck.h: the system's, as CMake's default (ENABLE_VALGRIND) takes it when
#    present, else the tree's stand-in.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 2 ] || { echo "usage: build.sh RDMA_CORE_DIR OUT_DIR" >&2; exit 2; }
tree=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
cc=${CC:-gcc}
cflags=${CFLAGS:--O2}
python=${PYTHON:-python3}

for f in providers/mlx5/qp.c providers/mlx5/cq.c providers/mlx5/srq.c providers/mlx5/mlx5.h \
         libibverbs/verbs.h buildlib/make_abi_structs.py kernel-headers/rdma/ib_user_verbs.h CMakeLists.txt; do
    [ -f "$tree/$f" ] || { echo "build.sh: $tree is not an rdma-core source tree (no $f)" >&2; exit 2; }
done
command -v "$python" >/dev/null || { echo "build.sh: $python is needed (rdma-core's make_abi_structs.py)" >&2; exit 2; }

inc=$out/include
rm -rf "$inc" "$out/obj"
mkdir -p "$inc/infiniband" "$inc/rdma" "$inc/linux" "$inc/util" "$inc/ccan" "$inc/kernel-abi" "$out/obj"
for h in "$tree"/libibverbs/*.h; do ln -s "$h" "$inc/infiniband/"; done
ln -s "$tree/providers/mlx5/mlx5dv.h" "$inc/infiniband/"
[ -f "$tree/providers/mlx5/mlx5_api.h" ] && ln -s "$tree/providers/mlx5/mlx5_api.h" "$inc/infiniband/"
for h in "$tree"/kernel-headers/rdma/*.h; do ln -s "$h" "$inc/rdma/"; done
for h in mlx5_user_ioctl_verbs ib_user_ioctl_verbs; do
    [ -f "$tree/kernel-headers/rdma/$h.h" ] && ln -sf "$tree/kernel-headers/rdma/$h.h" "$inc/infiniband/"
done
[ -f "$tree/kernel-headers/linux/stddef.h" ] && ln -s "$tree/kernel-headers/linux/stddef.h" "$inc/linux/"
for h in "$tree"/util/*.h; do ln -s "$h" "$inc/util/"; done
for h in "$tree"/ccan/*.h; do ln -s "$h" "$inc/ccan/"; done
for h in ib_user_verbs mlx5-abi; do
    (cd "$tree/kernel-headers" && "$python" "$tree/buildlib/make_abi_structs.py" "rdma/$h.h" "$inc/kernel-abi/$h.h")
done
if [ ! -f /usr/include/valgrind/memcheck.h ]; then
    mkdir -p "$inc/valgrind"
    ln -s "$tree/buildlib/fixup-include/valgrind-memcheck.h" "$inc/valgrind/memcheck.h"
    ln -s "$tree/buildlib/fixup-include/valgrind-drd.h" "$inc/valgrind/drd.h"
fi

version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' "$tree/CMakeLists.txt")
cat > "$inc/config.h" <<EOF
/* Written by cxv's bench/rdma_core/build.sh for x86-64 Linux and gcc: what the tree's
 * config.h would say with CMake's defaults (both command modes, no tracing). */
#ifndef CONFIG_H_IN
#define CONFIG_H_IN
#define HAVE_STATEMENT_EXPR 1
#define HAVE_BUILTIN_TYPES_COMPATIBLE_P 1
#define HAVE_TYPEOF 1
#define HAVE_ISBLANK 1
#define HAVE_BUILTIN_CLZ 1
#define HAVE_BUILTIN_CLZL 1
#define HAVE_FUNC_ATTRIBUTE_ALWAYS_INLINE 1
#define HAVE_FUNC_ATTRIBUTE_IFUNC 1
#define HAVE_FUNC_ATTRIBUTE_SYMVER 1
#define HAVE_WORKING_IF_H 1
#define HAVE_FULL_SYMBOL_VERSIONS 1
#define PACKAGE_VERSION "$version"
#define STREAM_CLOEXEC "e"
#define RDMA_CDEV_DIR "/dev/infiniband"
#define IBV_CONFIG_DIR "/etc/libibverbs.d"
#define VERBS_PROVIDER_DIR "/usr/lib/x86_64-linux-gnu/libibverbs"
#define VERBS_PROVIDER_SUFFIX "-rdmav34.so"
#define IBVERBS_PABI_VERSION 34
#define SIZEOF_LONG 8
#define VERBS_IOCTL_ONLY 0
#define VERBS_WRITE_ONLY 0
#endif
EOF

# Fields the harness sets that came or changed with a release.
features=""
grep -q free_wqe_bitmap "$tree/providers/mlx5/mlx5.h" && features="$features -DRC_HAVE_SRQ_BITMAP"
grep -q "struct ibv_buf[[:space:]]*ibv_buf;" "$tree/providers/mlx5/mlx5.h" && features="$features -DRC_HAVE_IBV_BUF"
grep -q qp_state_max_gs "$tree/providers/mlx5/mlx5.h" && features="$features -DRC_HAVE_QP_STATE_MAX_GS"

described=$(git -C "$tree" describe --tags 2>/dev/null || echo "not a git checkout")
{
    echo "rdma-core $version ($described) at $tree"
    echo "$cc $($cc -dumpfullversion) $cflags"
} > "$out/INFO"

includes="-I$inc -I$tree -I$tree/providers/mlx5"
# -std=gnu11 as rdma-core builds itself; its own warnings are its business (-w).
for f in qp cq srq; do
    # shellcheck disable=SC2086
    $cc -std=gnu11 $cflags $includes -w -c "$tree/providers/mlx5/$f.c" -o "$out/obj/mlx5_$f.o"
done
# shellcheck disable=SC2086
$cc -std=gnu11 $cflags $includes $features -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare \
    -Wno-unused-function -c "$here/harness.c" -o "$out/obj/harness.o"

# What the three files still name outside themselves and glibc once unused sections are
# dropped: symbols of the provider's cold paths (rdma-core 64: mlx5_find_mkey and
# mlx5_freeze_on_error_cqe, on poll_cq's error paths). Each becomes a stand-in that stops
# the program if it is ever reached (a variable: zero). Untyped, as their signatures
# change between releases.
data_symbols=" mlx5_freeze_on_error_cqe mlx5_debug_mask mlx5_single_threaded "
undefined=$($cc -Wl,--gc-sections -o "$out/obj/probe" "$out"/obj/mlx5_*.o "$out/obj/harness.o" -lpthread 2>&1 |
            sed -n "s/.*undefined reference to \`\([^']*\)'.*/\1/p" | sort -u || true)
rm -f "$out/obj/probe"
{
    echo "/* Written by build.sh: what providers/mlx5/{qp,cq,srq}.c name outside themselves."
    echo " * Never reached on the measured paths: a function that is stops the program. */"
    echo "#include <stdio.h>"
    echo "#include <stdlib.h>"
    for sym in $undefined; do
        case "$data_symbols" in
            *" $sym "*) echo "int $sym;" ;;
            *) printf 'void %s(void) { fputs("rc_fastpath: %s reached\\n", stderr); abort(); }\n' "$sym" "$sym" ;;
        esac
    done
} > "$out/stubs.c"
# shellcheck disable=SC2086
$cc $cflags -w -c "$out/stubs.c" -o "$out/obj/stubs.o"
$cc -Wl,--gc-sections -o "$out/rc_fastpath" "$out"/obj/*.o -lpthread
echo "stand-ins: ${undefined:-none}" | tr '\n' ' ' >> "$out/INFO"
echo >> "$out/INFO"
