#!/usr/bin/env bash
# A QEMU guest (TCG) running Debian's kernel with Linux's Soft-RoCE (rdma_rxe) on an
# e1000 NIC whose Ethernet frames travel as datagrams on AF_UNIX sockets (QEMU's
# `-netdev dgram`, one frame per datagram, no FCS): the cable to another guest or to a
# port of the model's fabric. The guest sets its link-local IPv4 address, creates rxe0
# on the NIC, runs one shell command, prints its output and powers off. Bounded: QEMU is
# killed by its PID on timeout, failure or signal.
#
#   rxe_guest.sh check
#       prints why a guest cannot run here and exits 77, or exits 0 silently.
#   rxe_guest.sh initrd OUT.cpio.gz
#       builds the shared part of the initramfs (busybox, the modules, the RDMA tools
#       with their libraries and the rxe provider) once, for several guests.
#   rxe_guest.sh run [options] -- 'COMMAND'
#       --mac MAC               the RoCE NIC's MAC (default 52:54:00:00:00:01)
#       --ip ADDR/LEN           its IPv4 address, link-local (default 169.254.1.1/16)
#       --local PATH --remote PATH
#                               the datagram sockets: the guest binds PATH (local) and
#                               sends every frame to the remote one
#       --fabric DIR --peer-mac MAC
#                               the same as --local DIR/eth-<mac> --remote
#                               DIR/eth-<peer mac> (12 lowercase hex digits): a cable to
#                               the port with that MAC on the fabric in DIR
#       --pcap FILE             capture the NIC's frames (QEMU filter-dump)
#       --forward HOST:GUEST    forward 127.0.0.1:HOST to the guest's TCP port GUEST, over
#                               a second NIC on a closed link-local user-mode network
#                               (repeatable); the guest is 169.254.77.15 there
#       --guest-forward GUEST:HOST
#                               the other way on that network: a guest's connection to
#                               169.254.77.100:GUEST reaches 127.0.0.1:HOST (QEMU's guestfwd,
#                               a bash /dev/tcp relay per connection; repeatable)
#       --file HOST:GUEST       put the host's file HOST into the guest at GUEST (a static
#                               program, say; repeatable)
#       --initrd FILE           from `initrd` (built in the work directory if absent)
#       --work DIR              logs and the per-guest initramfs (default: a temp dir)
#       --name NAME             prefix of the printed guest lines (default guest)
#       --timeout SECONDS       whole run, boot included (default 120)
#   The command runs under busybox sh in the guest, after rxe0 is up, with
#   ibv_rc_pingpong, ibv_ud_pingpong, ibv_devinfo, ibv_devices, rdma, ip, perftest's
#   ib_write_lat, ib_read_lat and ib_atomic_lat (when installed) and
#   `retry-connect CMD...` (reruns a pingpong client while its server is not yet
#   listening). Exit status: the command's; 77 only when something the guest needs is
#   absent here (QEMU, busybox, the prepared kernel or one of its modules, the RDMA tools;
#   the reason follows "SKIPPED: "). Once that check passed, anything that goes wrong is a
#   failure, status 1 with the guest's console shown: an initramfs that cannot be built, a
#   guest that does not reach its command, a command that does not finish, and a command
#   that itself exits 77 (so 77 keeps its one meaning).
#
# Sourcing the script defines the functions without running anything; rxe_guest_run sets
# EXIT/INT/TERM traps while its guest runs, so call it in a subshell.
set -uo pipefail

rxe_guest_cache=${CXV_QEMU_CACHE:-/var/cache/cxv/qemu}
# Loaded in this order by busybox insmod (no modprobe in the guest): rxe asks the crypto
# API for "crc32", which nothing loads on demand; ib_uverbs needs ib_core; rdma_rxe needs
# both and the UDP tunnel helpers (modinfo's "depends").
rxe_guest_modules=(crypto/crc32_generic drivers/net/ethernet/intel/e1000/e1000
    drivers/infiniband/core/ib_core drivers/infiniband/core/ib_uverbs
    net/ipv4/udp_tunnel net/ipv6/ip6_udp_tunnel drivers/infiniband/sw/rxe/rdma_rxe)
rxe_guest_programs=(ibv_rc_pingpong ibv_ud_pingpong ibv_devinfo ibv_devices rdma)
# perftest's latency tools, copied when installed (tools/setup installs perftest); a
# command that needs them checks for them in the guest.
rxe_guest_optional_programs=(ib_write_lat ib_read_lat ib_atomic_lat)
rxe_guest_provider=/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
rxe_guest_exit_skip=77

# Prints why the guest cannot run here and returns non-zero; nothing when it can.
rxe_guest_check() {
    command -v qemu-system-x86_64 >/dev/null ||
        { echo "qemu-system-x86_64 is not installed (tools/setup installs it)"; return 1; }
    command -v busybox >/dev/null ||
        { echo "busybox is not installed (tools/setup installs busybox-static)"; return 1; }
    [ -r "$rxe_guest_cache/vmlinux" ] && [ -r "$rxe_guest_cache/version" ] ||
        { echo "no guest kernel in $rxe_guest_cache (tools/setup prepares it)"; return 1; }
    local m modules=$rxe_guest_cache/root/lib/modules/$(cat "$rxe_guest_cache/version")/kernel
    for m in "${rxe_guest_modules[@]}"; do
        [ -r "$modules/$m.ko" ] ||
            { echo "$m.ko is not in $modules (an older tools/setup made it: run tools/setup)"; return 1; }
    done
    for m in "${rxe_guest_programs[@]}"; do
        command -v "$m" >/dev/null ||
            { echo "$m is not installed (tools/setup installs ibverbs-utils and iproute2)"; return 1; }
    done
    [ -r "$rxe_guest_provider" ] && [ -r /etc/libibverbs.d/rxe.driver ] ||
        { echo "the rxe verbs provider is not installed (ibverbs-providers)"; return 1; }
}

# Copies FILE to the same path under ROOT, and for a symlink its target too.
rxe_guest_copy() {
    local root=$1 f=$2
    while :; do
        mkdir -p "$root$(dirname "$f")"
        cp -a "$f" "$root$f" 2>/dev/null || return 1
        [ -L "$f" ] || return 0
        local t
        t=$(readlink "$f")
        case $t in /*) f=$t ;; *) f=$(dirname "$f")/$t ;; esac
    done
}

# rxe_guest_initrd OUT: the initramfs every rxe guest shares (gzip'd newc cpio).
rxe_guest_initrd() {
    local out=$1 root lib m p version
    root=$(mktemp -d) || return 1
    version=$(cat "$rxe_guest_cache/version")
    mkdir -p "$root"/{bin,dev,proc,sys,tmp,modules,etc/libibverbs.d}
    cp "$(command -v busybox)" "$root/bin/busybox" || return 1
    for m in sh mount insmod cat echo ls poweroff sleep grep ip sed cut tr head date seq nc timeout uname; do
        ln -s busybox "$root/bin/$m"
    done
    for m in "${rxe_guest_modules[@]}"; do
        cp "$rxe_guest_cache/root/lib/modules/$version/kernel/$m.ko" "$root/modules/" || return 1
    done
    # The programs and the provider at their own paths, with every library ldd lists and
    # the loader; libibverbs finds the provider through rxe.driver.
    local -a programs=("${rxe_guest_programs[@]}")
    for p in "${rxe_guest_optional_programs[@]}"; do
        command -v "$p" >/dev/null && programs+=("$p")
    done
    for p in "${programs[@]}"; do
        p=$(readlink -f "$(command -v "$p")")
        rxe_guest_copy "$root" "$p" || return 1
        ln -sf "$p" "$root/bin/${p##*/}"
    done
    rxe_guest_copy "$root" "$rxe_guest_provider" || return 1
    rxe_guest_copy "$root" /etc/libibverbs.d/rxe.driver || return 1
    for lib in $( (for p in "${programs[@]}"; do ldd "$(command -v "$p")"; done
                   ldd "$rxe_guest_provider") | awk '/=> \// {print $3} /^\t\// {print $1}' | sort -u); do
        rxe_guest_copy "$root" "$lib" || return 1
    done
    cat >"$root/bin/retry-connect" <<'RETRY'
#!/bin/sh
# Runs a pingpong client until it gets past the out-of-band connection (its server may
# still be booting), for RETRY_SECONDS (default 60).
end=$(( $(cut -d. -f1 /proc/uptime) + ${RETRY_SECONDS:-60} ))
while :; do
    out=$("$@" 2>&1)
    rc=$?
    case $out in
    *"Couldn't connect to"*)
        if [ "$(cut -d. -f1 /proc/uptime)" -lt "$end" ]; then sleep 1; continue; fi ;;
    esac
    echo "$out"
    exit $rc
done
RETRY
    cat >"$root/init" <<'INIT'
#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
. /etc/guest.conf
for m in crc32_generic e1000 ib_core ib_uverbs udp_tunnel ip6_udp_tunnel rdma_rxe; do
    insmod /modules/$m.ko || echo "guest: insmod $m failed"
done
nic=; oob=
for d in /sys/class/net/*; do
    case $(cat $d/address) in
    "$GUEST_MAC") nic=${d##*/} ;;
    "$OOB_MAC") oob=${d##*/} ;;
    esac
done
# No duplicate address detection: the IPv6 link-local address (the source of GID 0's
# RoCEv2 packets) is then usable at once rather than "tentative" for a second or two,
# during which a QP cannot reach RTR with GID 0.
echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad
echo 0 > /proc/sys/net/ipv6/conf/"$nic"/accept_dad
ip link set lo up
ip link set "$nic" up
ip addr add "$GUEST_IP" dev "$nic"
if [ -n "$oob" ]; then
    ip link set "$oob" up
    ip addr add 169.254.77.15/24 dev "$oob"
fi
rdma link add rxe0 type rxe netdev "$nic" || echo "guest: rdma link add failed"
# The port turns ACTIVE once the NIC has carrier (a moment after "up").
for i in $(seq 50); do
    grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null && break
    sleep 0.2
done
echo "guest: rxe0 port 1 $(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)"
echo "guest: $GUEST_MAC on ${nic:-no NIC} $GUEST_IP${oob:+, out-of-band $oob 169.254.77.15}, $(ls /sys/class/infiniband 2>/dev/null)"
for g in 0 1; do
    echo "guest: rxe0 GID $g $(cat /sys/class/infiniband/rxe0/ports/1/gids/$g 2>/dev/null)"
done
echo "guest: command starts"
sh /cmd.sh 2>&1
echo "guest: command exit $?"
poweroff -f
INIT
    chmod +x "$root/init" "$root/bin/retry-connect"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1 >"$out")
    local rc=$?
    rm -rf "$root"
    return $rc
}

# rxe_guest_console_tail NAME FILE: the end of a failed guest's console, kernel lines included.
rxe_guest_console_tail() {
    if [ -s "$2" ]; then
        tail -40 "$2" | tr -d '\r' | sed 's/^/['"$1"'] console: /'
    else
        echo "[$1] console: (empty)"
    fi
}

# A MAC as the fabric names its sockets: 12 lowercase hex digits.
rxe_guest_mac_hex() { echo "$1" | tr -d ':' | tr 'A-F' 'a-f'; }

rxe_guest_run() {
    local mac=52:54:00:00:00:01 ip=169.254.1.1/16 local_path= remote_path= fabric= peer_mac=
    local pcap= initrd= work= name=guest limit=120 cmd
    local -a forwards=() guest_forwards=() files=()
    while (($#)); do
        case $1 in
        --mac) mac=$2; shift 2 ;;
        --ip) ip=$2; shift 2 ;;
        --local) local_path=$2; shift 2 ;;
        --remote) remote_path=$2; shift 2 ;;
        --fabric) fabric=$2; shift 2 ;;
        --peer-mac) peer_mac=$2; shift 2 ;;
        --pcap) pcap=$2; shift 2 ;;
        --forward) forwards+=("$2"); shift 2 ;;
        --guest-forward) guest_forwards+=("$2"); shift 2 ;;
        --file) files+=("$2"); shift 2 ;;
        --initrd) initrd=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --name) name=$2; shift 2 ;;
        --timeout) limit=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "rxe_guest.sh: unknown option $1" >&2; return 2 ;;
        esac
    done
    (($# == 1)) || { echo "rxe_guest.sh run: one command after --" >&2; return 2; }
    cmd=$1
    mac=$(echo "$mac" | tr 'A-F' 'a-f')
    if [ -n "$fabric" ]; then
        [ -n "$peer_mac" ] || { echo "rxe_guest.sh: --fabric needs --peer-mac" >&2; return 2; }
        local_path=$fabric/eth-$(rxe_guest_mac_hex "$mac")
        remote_path=$fabric/eth-$(rxe_guest_mac_hex "$peer_mac")
    fi
    [ -n "$local_path" ] && [ -n "$remote_path" ] ||
        { echo "rxe_guest.sh: --local and --remote (or --fabric and --peer-mac) are needed" >&2; return 2; }
    local why
    why=$(rxe_guest_check) || { echo "SKIPPED: $why"; return $rxe_guest_exit_skip; }

    [ -n "$work" ] || work=$(mktemp -d)
    mkdir -p "$work"
    if [ -z "$initrd" ]; then
        initrd=$work/rxe-initrd.cpio.gz
        rxe_guest_initrd "$initrd" || { echo "[$name] cannot build the initramfs (the errors above)"; return 1; }
    fi
    # This guest's part, an uncompressed cpio put before the shared compressed one (the
    # kernel unpacks a concatenation of archives, as for early microcode).
    local conf=$work/$name.conf
    rm -rf "$conf"
    mkdir -p "$conf/etc"
    local oob_mac=52:54:00:77:00:15
    {
        echo "GUEST_MAC=$mac"
        echo "GUEST_IP=$ip"
        ((${#forwards[@]} + ${#guest_forwards[@]})) && echo "OOB_MAC=$oob_mac" || echo "OOB_MAC=none"
    } >"$conf/etc/guest.conf"
    printf '%s\n' "$cmd" >"$conf/cmd.sh"
    local file
    for file in "${files[@]}"; do
        mkdir -p "$conf/$(dirname "${file#*:}")" && cp "${file%%:*}" "$conf/${file#*:}" ||
            { echo "[$name] cannot put ${file%%:*} into the guest"; return 1; }
    done
    (cd "$conf" && find . | cpio -o -H newc --quiet) >"$work/$name.initrd" &&
        cat "$initrd" >>"$work/$name.initrd" || { echo "[$name] cannot build the initramfs (the errors above)"; return 1; }

    local -a args=(-accel tcg -M pc -m 256M -smp 1 -kernel "$rxe_guest_cache/vmlinux"
        -initrd "$work/$name.initrd" -append "console=ttyS0 panic=-1 quiet"
        -display none -no-reboot -nodefaults -monitor none -serial "file:$work/$name.console"
        -netdev "dgram,id=n0,local.type=unix,local.path=$local_path,remote.type=unix,remote.path=$remote_path"
        -device "e1000,netdev=n0,mac=$mac")
    [ -n "$pcap" ] && args+=(-object "filter-dump,id=f0,netdev=n0,file=$pcap")
    if ((${#forwards[@]} + ${#guest_forwards[@]})); then
        # Link-local and closed (restrict=on): never QEMU's default user network, whose
        # addresses are a private range; no IPv6 (its default prefix is site-local).
        local f user="user,id=oob,net=169.254.77.0/24,host=169.254.77.2,dhcpstart=169.254.77.16,restrict=on,ipv6=off"
        for f in "${forwards[@]}"; do user+=",hostfwd=tcp:127.0.0.1:${f%%:*}-169.254.77.15:${f##*:}"; done
        # restrict=on leaves explicit forwards working. Each connection runs the relay:
        # the guest's bytes to the host port and back.
        # A clean environment: nothing the caller exports (BASH_ENV, say) may write into
        # the connection before the peer does.
        local bash_path env_path
        bash_path=$(command -v bash) env_path=$(command -v env)
        for f in "${guest_forwards[@]}"; do
            user+=",guestfwd=tcp:169.254.77.100:${f%%:*}-cmd:$env_path -i $bash_path --norc --noprofile -c 'exec 2>/dev/null 3<>/dev/tcp/127.0.0.1/${f##*:} && { cat <&3 & exec cat >&3; }'"
        done
        args+=(-netdev "$user" -device "e1000,netdev=oob,mac=$oob_mac")
    fi
    rm -f "$local_path"

    local start qpid rc
    start=$(date +%s)
    qemu-system-x86_64 "${args[@]}" </dev/null >"$work/$name.qemu.log" 2>&1 &
    qpid=$!
    # Whatever ends this shell ends QEMU: the PID, not a name.
    trap 'kill $qpid 2>/dev/null; rm -f "'"$local_path"'"' EXIT
    trap 'exit 1' INT TERM HUP
    local deadline=$((start + limit))
    while kill -0 $qpid 2>/dev/null && (($(date +%s) < deadline)); do sleep 0.5; done
    if kill -0 $qpid 2>/dev/null; then
        kill $qpid 2>/dev/null
        sleep 1
        kill -9 $qpid 2>/dev/null
        echo "[$name] QEMU killed after the ${limit} s limit"
    fi
    wait $qpid 2>/dev/null
    rc=$?
    trap - EXIT INT TERM HUP
    rm -f "$local_path"
    echo "[$name] QEMU exit $rc after $(($(date +%s) - start)) s"
    sed 's/^/['"$name"'] qemu: /' "$work/$name.qemu.log"
    # The guest's own lines, without the kernel's.
    sed -n '/guest: /,$p' "$work/$name.console" 2>/dev/null | tr -d '\r' | grep -v '^\[ *[0-9.]*\] ' |
        sed 's/^/['"$name"'] /'
    # The guest was started: from here on whatever goes wrong is a failure, not a skip.
    grep -q 'guest: command starts' "$work/$name.console" 2>/dev/null || {
        rxe_guest_console_tail "$name" "$work/$name.console"
        echo "[$name] the guest did not reach its command (QEMU exit $rc)"
        return 1
    }
    rc=$(sed -n 's/.*guest: command exit \([0-9]*\).*/\1/p' "$work/$name.console" | tail -1)
    [ -n "$rc" ] || {
        rxe_guest_console_tail "$name" "$work/$name.console"
        echo "[$name] the command did not finish"
        return 1
    }
    if ((rc == rxe_guest_exit_skip)); then
        echo "[$name] the command exited $rc: reported as 1 ($rc means a guest that cannot run here)"
        return 1
    fi
    return "$rc"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    case ${1:-} in
    check)
        [ $# = 1 ] || { echo "usage: $0 check" >&2; exit 2; }
        why=$(rxe_guest_check) || { echo "SKIPPED: $why"; exit $rxe_guest_exit_skip; }
        ;;
    initrd)
        [ $# = 2 ] || { echo "usage: $0 initrd OUT" >&2; exit 2; }
        why=$(rxe_guest_check) || { echo "SKIPPED: $why"; exit $rxe_guest_exit_skip; }
        # After the check, a build that fails is a failure (1), never 77.
        rxe_guest_initrd "$2" || { echo "cannot build the initramfs $2 (the errors above)"; exit 1; }
        ;;
    run) shift; rxe_guest_run "$@" ;;
    *) echo "usage: $0 check | initrd OUT | run [options] -- COMMAND (see the header)" >&2; exit 2 ;;
    esac
fi
