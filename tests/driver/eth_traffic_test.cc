// Raw Ethernet between two functions of the model on one fabric, through cxv's driver
// (driver/res/eth.h, flow.h): function 0 sends UDP frames from an SQ (WQEs written here
// as a raw fast path writes them: control segment, Ethernet segment with the L2 header
// inline, a data segment for the rest, checksums left to the device); function 1 steers
// the feed's UDP port to an RQ through its root flow table and counts it. What arrives is
// read from the RQ's buffers and CQEs; the other port's frames are not delivered.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "driver/res/cq.h"
#include "driver/res/eth.h"
#include "driver/res/flow.h"
#include "driver/res/pd_mr.h"
#include "hw/barrier.h"
#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/wqe.h"
#include "tests/driver/test_util.h"

using namespace cxv;
using namespace cxv::driver;
using namespace std::chrono_literals;
using test::check_ok;
using test::take;

namespace {

constexpr std::uint16_t kFeedPort = 31337;

// An IPv4/UDP frame from `src` to `dst` with both checksums left 0 (the device fills them).
std::vector<std::byte> udp_frame(const std::array<std::uint8_t, 6>& dst, const std::array<std::uint8_t, 6>& src,
                                 std::uint16_t dport, std::size_t payload, std::uint8_t seq) {
    std::vector<std::uint8_t> f(dst.begin(), dst.end());
    f.insert(f.end(), src.begin(), src.end());
    f.insert(f.end(), {0x08, 0x00});
    const std::size_t total = 28 + payload;
    f.insert(f.end(), {0x45, 0, static_cast<std::uint8_t>(total >> 8), static_cast<std::uint8_t>(total), 0, seq, 0x40, 0,
                       64, 17, 0, 0, 169, 254, 0, 1, 169, 254, 0, 2});
    const std::size_t ulen = 8 + payload;
    f.insert(f.end(), {0xc0, 0x00, static_cast<std::uint8_t>(dport >> 8), static_cast<std::uint8_t>(dport),
                       static_cast<std::uint8_t>(ulen >> 8), static_cast<std::uint8_t>(ulen), 0, 0});
    for (std::size_t i = 0; i < payload; ++i) f.push_back(static_cast<std::uint8_t>(seq + i));
    std::vector<std::byte> out(f.size());
    std::memcpy(out.data(), f.data(), f.size());
    return out;
}

// One function's send side: a TIS, an SQ in RDY, a buffer registered for the frames.
struct sender {
    std::unique_ptr<hca> h = test::bring_up({}, "0000:c5:00.0");
    std::shared_ptr<transport_domain> td = take(transport_domain::create(*h));
    std::shared_ptr<pd> domain = take(pd::create(*h));
    std::shared_ptr<cq> scq = take(cq::create(*h, {}));
    std::shared_ptr<sq> q;
    std::vector<std::byte> buf = std::vector<std::byte>(64 * 1024);
    std::shared_ptr<mr> mem;
    std::uint16_t pi = 0;

    sender() {
        sq::attr a;
        a.domain = domain;
        a.send_cq = scq;
        a.transport = take(tis::create(td));
        a.wqebbs = 64;
        q = take(sq::create(a));
        check_ok(q->ready());
        mem = take(mr::create(domain, buf.data(), buf.size(), 0));
    }
    // One SEND WQE of 4 octowords: control, Ethernet segment (the first 2 of the 14 inline
    // header bytes), the other 12 in the next octoword (Linux's ds_cnt_inl), and a data
    // segment for the rest of the frame from the registered buffer.
    void send(const std::vector<std::byte>& f) {
        const std::size_t off = static_cast<std::size_t>(pi % 64) * 2048;
        std::memcpy(buf.data() + off, f.data(), f.size());
        std::byte* w = q->wqes() + std::size_t{pi % q->wqebb_count()} * hw::send_wqe_bb;
        std::memset(w, 0, hw::send_wqe_bb);
        hw::wqe_ctrl_seg ctrl{};
        hw::set_ctrl_seg(ctrl, pi, hw::wqe_opcode::SEND, 0, q->sqn(), 4, hw::ctrl_cq_update);
        hw::wqe_eth_seg eth{};
        eth.cs_flags = hw::eth_wqe_l3_csum | hw::eth_wqe_l4_csum;
        eth.inline_hdr_sz = hw::be16::from(14);
        std::memcpy(w + 16, &eth, 14);
        std::memcpy(w + 30, f.data(), 14);  // inline_hdr_start and on
        hw::wqe_data_seg d{};
        hw::set_data_seg(d, static_cast<std::uint32_t>(f.size() - 14), mem->lkey(),
                         reinterpret_cast<std::uint64_t>(buf.data() + off + 14));
        std::memcpy(w + 48, &d, 16);
        std::memcpy(w, &ctrl, 16);
        ++pi;
        hw::to_device();
        const hw::be32 rec = hw::be32::from(pi);
        std::memcpy(q->doorbell_record() + 4, &rec, 4);
        hw::to_device();
        std::uint64_t first;
        std::memcpy(&first, w, 8);
        *reinterpret_cast<volatile std::uint64_t*>(q->bf_register(false)) = first;
    }
};

// The other function's receive side: an RQ of 2 KiB buffers in RDY, a TIR, a root table
// with one group on (IP version, protocol, UDP port) over entries 0-7 and a rule for the
// feed's port.
struct receiver {
    std::unique_ptr<hca> h = test::bring_up({}, "0000:c5:00.1");
    std::shared_ptr<transport_domain> td = take(transport_domain::create(*h));
    std::shared_ptr<pd> domain = take(pd::create(*h));
    std::shared_ptr<cq> rcq = take(cq::create(*h, {}));
    std::shared_ptr<rq> q;
    std::vector<std::byte> buf = std::vector<std::byte>(64 * 2048);
    std::shared_ptr<mr> mem;
    std::shared_ptr<tir> to_q;
    std::shared_ptr<flow_table> root;
    std::shared_ptr<flow_group> group;
    std::shared_ptr<flow_counter> counted;
    std::shared_ptr<flow_rule> rule;
    std::uint32_t ci = 0;

    receiver() {
        rq::attr a;
        a.domain = domain;
        a.recv_cq = rcq;
        a.wqes = 64;
        q = take(rq::create(a));
        mem = take(mr::create(domain, buf.data(), buf.size(), access_local_write));
        for (unsigned i = 0; i < 64; ++i) {
            hw::wqe_data_seg d{};
            hw::set_data_seg(d, 2048, mem->lkey(), reinterpret_cast<std::uint64_t>(buf.data() + i * 2048));
            std::memcpy(q->wqes() + (std::size_t{i} << q->wqe_shift()), &d, sizeof(d));
        }
        hw::to_device();
        const hw::be32 rec = hw::be32::from(64);
        std::memcpy(q->doorbell_record(), &rec, 4);
        check_ok(q->ready());
        to_q = take(tir::create(td, q));
        root = take(flow_table::create(*h, {.level = 0, .log_size = 4}));
        group = take(flow_group::create(root, 0, 7, flow_match{}.ip_version(4).ip_protocol(17).udp_dport(0)));
        counted = take(flow_counter::create(*h));
        rule = take(flow_rule::create(group, 0, flow_match{}.ip_version(4).ip_protocol(17).udp_dport(kFeedPort),
                                      {.to_tirs = {to_q}, .count = counted, .flow_tag = 0x123}));
        check_ok(root->make_root());
    }
    // The next CQE, once the device has written it (2 s at most).
    std::optional<hw::cqe64> poll(std::chrono::milliseconds wait = 2000ms) {
        const auto end = std::chrono::steady_clock::now() + wait;
        const unsigned log = rcq->log_entries();
        while (std::chrono::steady_clock::now() < end) {
            const std::byte* p = rcq->cqes() + std::size_t{ci & ((1u << log) - 1)} * 64;
            const auto op_own = std::to_integer<std::uint8_t>(p[63]);
            if (hw::cqe_get_opcode(op_own) != hw::cqe_opcode::INVALID && hw::cqe_get_owner(op_own) == ((ci >> log) & 1)) {
                hw::from_device();
                hw::cqe64 c;
                std::memcpy(&c, p, 64);
                ++ci;
                const hw::be32 rec = hw::be32::from(ci & 0xffffff);
                std::memcpy(rcq->doorbell_record(), &rec, 4);
                return c;
            }
            std::this_thread::sleep_for(1ms);
        }
        return std::nullopt;
    }
};

}  // namespace

TEST_CASE("a UDP feed from one function's SQ reaches the other's RQ through its flow rule; another port does not") {
    sender a;
    receiver b;
    const auto feed = udp_frame(b.h->mac(), a.h->mac(), kFeedPort, 300, 1);
    a.send(feed);
    const auto c = b.poll();
    REQUIRE(c.has_value());
    CHECK(hw::cqe_get_opcode(c->op_own) == hw::cqe_opcode::RESP_SEND);
    CHECK(c->byte_cnt.value() == feed.size());
    CHECK((c->sop_drop_qpn.value() & 0xffffff) == 0x123);
    // The device filled both checksums on the way out, and found them good on the way in.
    CHECK(c->hds_ip_ext == (hw::cqe_l2_ok | hw::cqe_l3_ok | hw::cqe_l4_ok));
    CHECK(c->l4_hdr_type_etc == hw::cqe_l4_l3_hdr_type(hw::cqe_l4_hdr_type::UDP, hw::cqe_l3_hdr_type::IPV4, false));
    CHECK(c->timestamp.value() != 0);
    // The frame as sent, but its checksums (which the device wrote).
    for (std::size_t i = 0; i < feed.size(); ++i) {
        if (i == 24 || i == 25 || i == 40 || i == 41) continue;
        REQUIRE(b.buf[i] == feed[i]);
    }
    CHECK(b.buf[24] != std::byte{0});
    // Another UDP port: no rule for it, the root's miss drops it.
    a.send(udp_frame(b.h->mac(), a.h->mac(), kFeedPort + 1, 64, 2));
    a.send(udp_frame(b.h->mac(), a.h->mac(), kFeedPort, 64, 3));
    const auto next = b.poll();
    REQUIRE(next.has_value());
    CHECK(next->wqe_counter.value() == 1);
    CHECK(b.buf[2048 + 14 + 5] == std::byte{3});  // the IPv4 identification: frame 3, not 2
    CHECK_FALSE(b.poll(200ms).has_value());
    const auto n = take(b.counted->query());
    CHECK(n.packets == 2);
    CHECK(n.octets == feed.size() + 106);
}

TEST_CASE("multicast: a group's frames arrive once it is joined (the vport's list), not before or after; promiscuous takes all") {
    sender a;
    receiver b;
    // 239.1.2.3's MAC (RFC 1112: 01:00:5e and the address's low 23 bits).
    const std::array<std::uint8_t, 6> group{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03};
    a.send(udp_frame(group, a.h->mac(), kFeedPort, 64, 1));
    CHECK_FALSE(b.poll(200ms).has_value());
    const std::array<std::array<std::uint8_t, 6>, 1> joined{group};
    check_ok(set_multicast_macs(*b.h, joined));
    a.send(udp_frame(group, a.h->mac(), kFeedPort, 64, 2));
    auto c = b.poll();
    REQUIRE(c.has_value());
    CHECK(c->byte_cnt.value() == 106);
    check_ok(set_multicast_macs(*b.h, {}));  // left
    a.send(udp_frame(group, a.h->mac(), kFeedPort, 64, 3));
    CHECK_FALSE(b.poll(200ms).has_value());
    check_ok(set_promiscuous(*b.h, false, true, false));  // all multicast
    a.send(udp_frame(group, a.h->mac(), kFeedPort, 64, 4));
    c = b.poll();
    REQUIRE(c.has_value());
    CHECK(b.buf[std::size_t{(b.ci - 1) % 64} * 2048 + 19] == std::byte{4});
    // A unicast MAC in the list is refused by the driver.
    const std::array<std::array<std::uint8_t, 6>, 1> unicast{a.h->mac()};
    CHECK_FALSE(set_multicast_macs(*b.h, unicast).ok());
}

TEST_CASE("ARP broadcasts reach a rule on their ethertype (the model's own ARP answers aside); raw frames count in the vport counters") {
    sender a;
    receiver b;
    // A rule for ARP in a group of its own.
    auto arp_group = take(flow_group::create(b.root, 8, 8, flow_match{}.ethertype(0)));
    auto arp_rule = take(flow_rule::create(arp_group, 8, flow_match{}.ethertype(0x0806), {.to_tirs = {b.to_q}, .flow_tag = 0x806}));
    const auto before_tx = take(query_vport_counters(*a.h, false));
    const auto before_rx = take(query_vport_counters(*b.h, false));
    // An ARP request (RFC 826) for 169.254.0.2 from 169.254.0.1, to broadcast.
    std::vector<std::uint8_t> f{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    const auto src = a.h->mac();
    f.insert(f.end(), src.begin(), src.end());
    f.insert(f.end(), {0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01});
    f.insert(f.end(), src.begin(), src.end());
    f.insert(f.end(), {169, 254, 0, 1, 0, 0, 0, 0, 0, 0, 169, 254, 0, 2});
    std::vector<std::byte> arp(f.size());
    std::memcpy(arp.data(), f.data(), f.size());
    a.send(arp);
    const auto c = b.poll();
    REQUIRE(c.has_value());
    CHECK((c->sop_drop_qpn.value() & 0xffffff) == 0x806);
    CHECK(c->byte_cnt.value() == 60);  // padded to Ethernet's minimum on the way out
    CHECK(c->l4_hdr_type_etc == 0);    // no IP
    const auto after_tx = take(query_vport_counters(*a.h, false));
    const auto after_rx = take(query_vport_counters(*b.h, false));
    CHECK(after_tx.transmitted_eth_multicast.packets - before_tx.transmitted_eth_multicast.packets >= 1);
    CHECK(after_rx.received_eth_multicast.packets - before_rx.received_eth_multicast.packets >= 1);
}
