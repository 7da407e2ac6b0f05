#!/bin/sh
# PID 1 of the User-Mode Linux kernel that tools/uml/kernel builds. The host's root is
# UML's root, read-only through hostfs:
#
#   vmlinux mem=512M root=/dev/root rootfstype=hostfs rootflags=/ ro \
#       init=/path/to/tools/uml/init.sh cxv.cmd=/abs/host/path/cmd.sh con=null con0=fd:0,fd:1
#
# Mounts proc, sysfs, devtmpfs and a tmpfs on /tmp (the one writable place), runs the
# command file named by cxv.cmd= with /bin/sh, its output on the console, then prints
#   cxv-uml: exit STATUS
# and powers the machine off, which ends the vmlinux process (exit status 0; the command's
# status is only in that line). Without cxv.cmd= it only prints that line (status 0).
# The command file is opened before the tmpfs covers /tmp, so it may live in the host's
# /tmp; it then runs from a copy in the tmpfs, and nothing else of the host's /tmp is
# visible. Root stays read-only (the kernel's default; `rw` would let the guest write the
# host's files as root).

# This powers off the machine it runs on: only ever as PID 1 (of a UML guest).
if [ "$$" != 1 ]; then
    echo "init.sh: not PID 1; this is the init of the cxv UML guest, see tools/uml/kernel" >&2
    exit 1
fi

# The kernel starts init with no PATH.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

say() { echo "cxv-uml: $*"; }

# The console is a tty: without this, every line the host reads ends in \r\n.
stty -onlcr 2>/dev/null

mounted() { grep -q "^[^ ]* $1 " /proc/mounts 2>/dev/null; }

mount -t proc proc /proc || say "cannot mount /proc"
mount -t sysfs sysfs /sys || say "cannot mount /sys"
# DEVTMPFS_MOUNT may already have put devtmpfs on /dev; otherwise the host's /dev shows
# through hostfs, whose device numbers need not mean the same in UML.
if ! mounted /dev && grep -qw devtmpfs /proc/filesystems; then
    mount -t devtmpfs devtmpfs /dev || say "cannot mount devtmpfs on /dev"
fi

# cxv.cmd=PATH from the kernel command line (a dotted parameter is not passed to init).
cmd=""
set -f  # the words are not file patterns
for word in $(cat /proc/cmdline); do
    case "$word" in
    cxv.cmd=*) cmd=${word#cxv.cmd=} ;;
    esac
done
set +f
status=0
if [ -n "$cmd" ]; then
    # fd 3: the command file, opened while the host's /tmp is still visible. Tried in a
    # subshell first: a failed `exec` redirection would end this shell, and with it PID 1.
    if (exec 3<"$cmd") 2>/dev/null; then
        exec 3<"$cmd"
    else
        say "cannot read the command file $cmd"
        status=127
        cmd=""
    fi
fi

mount -t tmpfs -o mode=1777 tmpfs /tmp || say "cannot mount a tmpfs on /tmp"

if [ -n "$cmd" ]; then
    case "$cmd" in
    /tmp/*)
        run=/tmp/cxv-cmd.sh
        cat <&3 >"$run"
        ;;
    *) run=$cmd ;;
    esac
    exec 3<&-
    # Its own process, so that `exit` or a failure in it still comes back here. CXV_CMD is
    # the path it was given as. stdout and stderr are the console; stdin is /dev/null,
    # since the UML console never reports end of input (from /dev/null or a pipe that
    # was written before boot, a read waits forever).
    cd /
    CXV_CMD=$cmd /bin/sh "$run" </dev/null
    status=$?
fi

say "exit $status"
sync
# Debian 12's poweroff (systemd's, or busybox's where that is all there is): -f goes
# straight to the reboot(2) system call without asking an init; -d skips the wtmp record
# on the read-only root. SysRq o is the last resort; returning from PID 1 would panic.
poweroff -f -d 2>/dev/null || busybox poweroff -f 2>/dev/null || echo o >/proc/sysrq-trigger
sleep 5
say "could not power off"
