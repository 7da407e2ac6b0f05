#!/usr/bin/env bash
# cxv's raw Ethernet queue against Linux's own network stack: ordinary UDP sockets in a
# QEMU guest (udp_guest, statically linked into its initramfs) whose e1000 is cabled to the
# model's Ethernet port on a fabric directory, and eth_guest_peer (cxv's eth API) on that
# port. Both directions, IPv4 and IPv6, unicast and multicast; the device's checksums
# accepted by Linux, a wrong one counted by Linux and dropped; a rule for one UDP port
# never sees another's. The capture of the guest's NIC (eth-guest.pcap in the test's
# outputs) is read by tshark with checksum validation on: no malformed frame, no bad IPv4
# header checksum, and exactly the deliberate bad UDP checksums.
# Skipped only when the guest's prerequisites are absent (rxe_guest.sh check); once the
# guest is started, a failing side fails the test, the cxv side checked first.
#
#   eth_guest_test.sh LAUNCHER CXV_SIM ETH_GUEST_PEER UDP_GUEST
set -uo pipefail

# skip, fail, require_guest, guest_test_dirs: guest_test_lib.sh, next to the launcher.
. "$(dirname "${1:?usage: $0 rxe_guest.sh cxv-sim eth_guest_peer udp_guest}")/guest_test_lib.sh"

launcher=$(realpath "$1")
sim=$(realpath "${2:?}")
peer=$(realpath "${3:?}")
guest_prog=$(realpath "${4:?}")
count=20
bad=5
# The model's first port's defaults (sim/device_config.h): its MAC, the IPv4 address
# device::open programs as GID 1 (169.254.(1 + mac[4] % 254).mac[5]) and the link-local
# IPv6 address of GID 0 (the MAC's EUI-64).
cxv_mac=02:c5:00:00:00:01
cxv_ip4=169.254.1.1
cxv_ip6=fe80::c5:ff:fe00:1
require_guest "$launcher"
command -v tshark >/dev/null || skip "tshark is not installed (tools/setup installs it)"
guest_test_dirs eth-guest

start=$(date +%s)
# cxv first: its rules are in place long before the guest has booted.
host_side_start "$work/peer.out" timeout 300 "$sim" run --fabric "$fabric" --set fabric_index=0 --port-type eth -- \
    "$peer" 0000:c5:00.0 "$count" "$bad" 240
"$launcher" run --name G --mac 52:54:00:00:00:01 --ip 169.254.100.1/16 \
    --fabric "$fabric" --peer-mac "$cxv_mac" --pcap "$out/eth-guest.pcap" \
    --file "$guest_prog:/bin/udp_guest" --work "$work" --timeout 240 -- \
    "udp_guest eth0 $cxv_ip4 $cxv_ip6 $count $bad" >"$work/G.out" 2>&1 &
gpid=$!
guest_and_host_wait  # (the peer has answered the guest's report by then, or never will)
((rc_host == 0)) || fail "eth_guest_peer (cxv) exited $rc_host (its log: the [cxv] lines above)"
((rc_guest == 0)) || fail "the guest's udp_guest exited $rc_guest (the [G] lines above)"
grep -q '^\[G\] udp_guest: ok' "$work/G.out" || fail "the guest did not report ok"

# The capture, with tshark's checksum validation (a status of 0 is bad, 1 good). Port 5001
# would be decoded as CPFI (its "end" then malformed): plain data, as for the others.
tsh=(tshark -r "$out/eth-guest.pcap" -o udp.check_checksum:TRUE -o ip.check_checksum:TRUE -d udp.port==5001,data)
count_of() { "${tsh[@]}" -Y "$1" 2>/dev/null | wc -l; }
n_udp=$(count_of udp)
n_bad_udp=$(count_of 'udp.checksum.status == 0')
n_bad_ip=$(count_of 'ip.checksum.status == 0')
n_good_ip=$(count_of "ip.checksum.status == 1 && ip.src == $cxv_ip4")
n_malformed=$(count_of '_ws.malformed')
n_cxv_v6=$(count_of "ipv6.src == $cxv_ip6 && udp && udp.checksum.status == 1")
echo "tshark: $n_udp UDP frames, $n_bad_udp with a bad UDP checksum, $n_bad_ip with a bad IPv4 header checksum" \
    "($n_good_ip good from cxv), $n_malformed malformed; $n_cxv_v6 IPv6 datagrams from cxv with a good UDP checksum"
((n_udp >= 4 * count)) || fail "the capture holds $n_udp UDP frames"
((n_bad_udp == bad)) || fail "tshark found $n_bad_udp bad UDP checksums, not the $bad sent on purpose"
((n_bad_ip == 0)) || fail "tshark found $n_bad_ip bad IPv4 header checksums"
((n_good_ip >= 2 * count + bad)) || fail "tshark verified $n_good_ip IPv4 header checksums of cxv's frames"
((n_malformed == 0)) || fail "tshark found $n_malformed malformed frames"
((n_cxv_v6 >= 2 * count)) || fail "tshark verified $n_cxv_v6 IPv6 UDP checksums of cxv's, not ${count}+ echoes and ${count} group datagrams"
echo "[doctest] test cases: 1 | 1 passed | 0 failed | 0 skipped"
