#!/usr/bin/env bash
# Boots Debian's kernel in QEMU (TCG, q35, emulated Intel IOMMU with interrupt
# remapping) with the edu device, binds edu to vfio-pci and runs the static test
# program on it. The guest's doctest summary is this test's result. When the guest
# cannot run here (no QEMU, no busybox, no prepared kernel or a module it needs) the test
# says why ("SKIPPED: why") and reports itself skipped — never passed. Once the guest is
# being built and started, whatever goes wrong is a failure: an initramfs that cannot be
# built, a boot that never reaches the program (its console is shown).
#
#   vfio_guest_test.sh TEST_PROGRAM
#   vfio_guest_test.sh --skip=REASON   the build cannot run the test (the sanitizer build):
#                                      "SKIPPED in this build: REASON", one case skipped
set -uo pipefail

# skip, skip_in_build, fail: guest_test_lib.sh, next to this script.
. "$(dirname "$0")/guest_test_lib.sh"

case "${1:-}" in
--skip=*) skip_in_build "${1#--skip=}" ;;
"") echo "usage: $0 TEST_PROGRAM" >&2; exit 2 ;;
esac
program=$(realpath "$1")
cache=${CXV_QEMU_CACHE:-/var/cache/cxv/qemu}
qemu=$(command -v qemu-system-x86_64) || skip "qemu-system-x86_64 is not installed (tools/setup installs it)"
busybox=$(command -v busybox) || skip "busybox is not installed (tools/setup installs busybox-static)"
[ -r "$cache/vmlinux" ] && [ -r "$cache/version" ] || skip "no guest kernel in $cache (tools/setup prepares it)"
version=$(cat "$cache/version")
modules="$cache/root/lib/modules/$version/kernel"
vfio_modules=(virt/lib/irqbypass drivers/vfio/vfio drivers/vfio/vfio_iommu_type1 drivers/vfio/vfio_virqfd
    drivers/vfio/pci/vfio-pci-core drivers/vfio/pci/vfio-pci)
for m in "${vfio_modules[@]}"; do
    [ -r "$modules/$m.ko" ] || skip "module $m.ko missing from $modules (tools/setup prepares it)"
done
# Everything is here: from now on what goes wrong is a failure.

work=${TEST_TMPDIR:-$(mktemp -d)}/guest
rm -rf "$work"
mkdir -p "$work"/root/{bin,dev,proc,sys,modules,tmp}
cp "$busybox" "$work/root/bin/busybox" || fail "cannot build the initramfs: cannot copy $busybox"
for tool in sh mount insmod cat echo ls poweroff sleep grep; do ln -s busybox "$work/root/bin/$tool"; done
for m in "${vfio_modules[@]}"; do
    cp "$modules/$m.ko" "$work/root/modules/" || fail "cannot build the initramfs: cannot copy $m.ko"
done
cp "$program" "$work/root/edu_test" || fail "cannot build the initramfs: cannot copy $program"
cat >"$work/root/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo 4 > /proc/sys/vm/nr_hugepages
for m in irqbypass vfio vfio_iommu_type1 vfio_virqfd vfio-pci-core; do insmod /modules/$m.ko; done
insmod /modules/vfio-pci.ko ids=1234:11e8
bdf=
for d in /sys/bus/pci/devices/*; do
    if [ "$(cat $d/vendor)" = 0x1234 ] && [ "$(cat $d/device)" = 0x11e8 ]; then bdf=${d##*/}; fi
done
echo "guest: edu at ${bdf:-nowhere}, driver $(ls -l /sys/bus/pci/devices/$bdf/driver 2>/dev/null | sed 's|.*/||')"
echo "guest: program starts"
CXV_EDU_BDF=$bdf /edu_test --no-colors
echo "guest: program exit $?"
poweroff -f
INIT
chmod +x "$work/root/init"
(cd "$work/root" && find . | cpio -o -H newc --quiet | gzip -1 >"$work/initrd.gz") || fail "cannot build the initramfs (the errors above)"

start=$(date +%s)
timeout 240 "$qemu" -accel tcg -M q35 -m 192M -smp 1 -device intel-iommu,intremap=on -device edu \
    -kernel "$cache/vmlinux" -initrd "$work/initrd.gz" \
    -append "console=ttyS0 intel_iommu=on panic=-1 quiet" \
    -nographic -no-reboot -nodefaults -serial stdio -monitor none >"$work/console.log" 2>&1
rc=$?
echo "QEMU exit $rc after $(($(date +%s) - start)) s"
# The guest's own output, without the kernel's.
sed -n '/guest: edu at/,$p' "$work/console.log" | tr -d '\r' | grep -v '^\[ *[0-9.]*\] '
grep -q 'guest: program starts' "$work/console.log" || {
    echo "the end of the guest's console:"
    tail -40 "$work/console.log" | tr -d '\r' | sed 's/^/console: /'
    fail "the guest did not reach the test program (QEMU exit $rc)"
}
if ! grep -q 'guest: program exit 0' "$work/console.log"; then
    echo "the test program failed in the guest"
    exit 1
fi
# The blocked DMA is visible on the host side too: QEMU's IOMMU refused the translation.
if ! grep -q 'translation failure' "$work/console.log"; then
    echo "QEMU's IOMMU reported no blocked DMA: the unmapped-IOVA check proved nothing"
    exit 1
fi
echo "QEMU's IOMMU blocked the DMA to the unmapped IOVA: $(grep -m1 'translation failure' "$work/console.log")"
