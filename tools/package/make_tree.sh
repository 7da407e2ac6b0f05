#!/usr/bin/env bash
# Lays out cxv's installed tree (docs/install.md) and packs it as a tar whose paths are
# relative to the prefix: everything in it finds the rest relative to itself (pkg-config's
# ${pcfiledir}, CMake's CMAKE_CURRENT_LIST_DIR, cxv exec's BIN/../lib/cxv, cxv-sim's
# BIN/../lib/cxv), so one tree serves any prefix. Run by //tools/install:tree:
#
#   make_tree.sh OUT.tar VERSION KEY=FILE...
#
# KEYs: bin (a program), lib (libcxv.so.0), archive (libcxv.a), flags (its link flags),
# exec (a library for lib/cxv/), header (a header with its source-tree path), service
# (cxvd.service), doc (a file for share/doc/cxv).
set -euo pipefail

out=$1
version=$2
shift 2

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
tree=$stage/tree
headers=$stage/headers
mkdir -p "$tree"/{bin,lib/cxv,lib/pkgconfig,lib/cmake/cxv,include/cxv,share/man/man1,share/doc/cxv} \
    "$tree"/lib/systemd/system "$headers"

link_flags=""
for arg in "$@"; do
    key=${arg%%=*}
    file=${arg#*=}
    case "$key" in
    bin) install -m 0755 "$file" "$tree/bin/" && strip --strip-debug "$tree/bin/$(basename "$file")" ;;
    lib) install -m 0644 "$file" "$tree/lib/libcxv.so.0" && strip --strip-debug "$tree/lib/libcxv.so.0" ;;
    archive) install -m 0644 "$file" "$tree/lib/libcxv.a" && strip --strip-debug "$tree/lib/libcxv.a" ;;
    flags) link_flags=$(cat "$file") ;;
    exec) install -m 0644 "$file" "$tree/lib/cxv/" && strip --strip-debug "$tree/lib/cxv/$(basename "$file")" ;;
    header) mkdir -p "$headers/$(dirname "$file")" && cp "$file" "$headers/$file" ;;
    service) install -m 0644 "$file" "$tree/lib/systemd/system/cxvd.service" ;;
    doc) install -m 0644 "$file" "$tree/share/doc/cxv/" ;;
    *) echo "make_tree.sh: unknown key $key" >&2; exit 2 ;;
    esac
done
ln -s libcxv.so.0 "$tree/lib/libcxv.so"

# The public headers and exactly what they include of the source tree, so that they
# compile with the prefix's include/cxv on the include path and nothing else.
for h in api/cxv.h api/cxv_verbs.h; do
    lang=c++
    [ "$h" = api/cxv_verbs.h ] && lang=c
    g++ -x "$lang" -std=$([ $lang = c ] && echo c11 || echo c++20) -I"$headers" -MM "$headers/$h" |
        tr ' \\' '\n\n' | grep "^$headers/" | sort -u |
        while read -r f; do
            rel=${f#"$headers"/}
            mkdir -p "$tree/include/cxv/$(dirname "$rel")"
            cp "$f" "$tree/include/cxv/$rel"
        done
done

# pkg-config: cxv (the C++ API; its header needs C++20) and cxv-verbs (the C API).
# Static linking (pkg-config --static) adds the libraries libcxv.a leaves open.
for pc in cxv cxv-verbs; do
    if [ $pc = cxv ]; then
        desc="cxv's C++ API: user-space ConnectX (mlx5) over VFIO"
        cflags='-I${includedir} -std=c++20'
        private="$link_flags"
    else
        desc="cxv's verbs-compatible C API: user-space ConnectX (mlx5) over VFIO"
        cflags='-I${includedir}'
        private="$link_flags -lstdc++ -lm"
    fi
    cat >"$tree/lib/pkgconfig/$pc.pc" <<EOF
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include/cxv

Name: $pc
Description: $desc
Version: $version
URL: https://github.com/cxv/cxv
Cflags: $cflags
Libs: -L\${libdir} -lcxv
Libs.private: $private
EOF
done

# CMake: find_package(cxv) gives cxv::cxv (C++ API, shared), cxv::verbs (C API, shared)
# and cxv::cxv_static (both APIs, static).
cmake_libs=""
for f in $link_flags; do
    case "$f" in
    -pthread) cmake_libs="$cmake_libs Threads::Threads" ;;
    -l*) cmake_libs="$cmake_libs ${f#-l}" ;;
    esac
done
cat >"$tree/lib/cmake/cxv/cxvConfig.cmake" <<EOF
# cxv's CMake package (docs/install.md): find_package(cxv REQUIRED), then link
# cxv::cxv (the C++ API, api/cxv.h), cxv::verbs (the C API, api/cxv_verbs.h) or
# cxv::cxv_static. The prefix is found from this file's place, so the tree may move.
get_filename_component(_cxv_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
include(CMakeFindDependencyMacro)
find_dependency(Threads)
if(NOT TARGET cxv::cxv)
  add_library(cxv::cxv SHARED IMPORTED)
  set_target_properties(cxv::cxv PROPERTIES
    IMPORTED_LOCATION "\${_cxv_prefix}/lib/libcxv.so.0"
    IMPORTED_SONAME "libcxv.so.0"
    INTERFACE_INCLUDE_DIRECTORIES "\${_cxv_prefix}/include/cxv"
    INTERFACE_COMPILE_FEATURES cxx_std_20)
  add_library(cxv::verbs SHARED IMPORTED)
  set_target_properties(cxv::verbs PROPERTIES
    IMPORTED_LOCATION "\${_cxv_prefix}/lib/libcxv.so.0"
    IMPORTED_SONAME "libcxv.so.0"
    INTERFACE_INCLUDE_DIRECTORIES "\${_cxv_prefix}/include/cxv")
  add_library(cxv::cxv_static STATIC IMPORTED)
  set_target_properties(cxv::cxv_static PROPERTIES
    IMPORTED_LOCATION "\${_cxv_prefix}/lib/libcxv.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES CXX
    INTERFACE_INCLUDE_DIRECTORIES "\${_cxv_prefix}/include/cxv"
    INTERFACE_COMPILE_FEATURES cxx_std_20
    INTERFACE_LINK_LIBRARIES "$(echo $cmake_libs | sed 's/ /;/g')")
endif()
set(cxv_VERSION "$version")
unset(_cxv_prefix)
EOF
cat >"$tree/lib/cmake/cxv/cxvConfigVersion.cmake" <<EOF
# Compatible when the major version matches and this one is at least the one asked for.
set(PACKAGE_VERSION "$version")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  string(REGEX MATCH "^[0-9]+" _have "\${PACKAGE_VERSION}")
  string(REGEX MATCH "^[0-9]+" _want "\${PACKAGE_FIND_VERSION}")
  if(PACKAGE_FIND_VERSION STREQUAL "" OR _have STREQUAL _want)
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  else()
    set(PACKAGE_VERSION_COMPATIBLE FALSE)
  endif()
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
EOF

# Man pages, from each program's own --help (help2man).
declare -A names=(
    [cxv]="list, inspect and run programs on ConnectX functions over VFIO"
    [cxvd]="the cxv driver daemon: owns ConnectX functions and serves client processes"
    [cxv-sim]="a software model of a ConnectX, presented as a VFIO PCI device"
    [cxv-perf]="perftest-compatible latency and bandwidth tests on cxv"
)
for prog in "${!names[@]}"; do
    [ -x "$tree/bin/$prog" ] || continue
    PATH="$tree/bin:$PATH" help2man --no-info --no-discard-stderr --version-string="$version" \
        --name="${names[$prog]}" --output="$tree/share/man/man1/$prog.1" "$prog"
done

tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$tree" -cf "$out" .
