// The Ethernet send pipeline (sim/transport/xport_eth_tx.cc) on the engine alone: an SQ
// put in the tables by hand, WQEs written as Linux's mlx5e and rdma-core's raw packet QPs
// write them (control segment, Ethernet segment with the headers inline, data segments),
// the doorbell rung; the frames that leave and the CQEs read back.
#include <array>
#include <cstdint>
#include <vector>

#include <doctest/doctest.h>

#include "hw/cqe.h"
#include "hw/wqe.h"
#include "sim/transport/eth_headers.h"
#include "tests/sim/transport/rig.h"

using namespace cxv;
using namespace cxv::sim;
using namespace cxv::sim::testing;

namespace {

constexpr std::uint32_t kCqn = 6, kSqn = 0x300;

// An IPv4/UDP frame with both checksums zero (the device is to fill them).
std::vector<std::byte> frame_without_checksums(std::size_t payload) {
    std::vector<std::uint8_t> f{0x02, 0xc5, 0, 0, 0, 2, 0x02, 0xc5, 0, 0, 0, 1, 0x08, 0x00};
    const std::size_t total = 28 + payload;
    f.insert(f.end(), {0x45, 0, static_cast<std::uint8_t>(total >> 8), static_cast<std::uint8_t>(total), 0, 1, 0x40, 0,
                       64, 17, 0, 0, 169, 254, 0, 1, 169, 254, 0, 2});
    const std::size_t ulen = 8 + payload;
    f.insert(f.end(), {0x9c, 0x40, 0x7a, 0x69, static_cast<std::uint8_t>(ulen >> 8), static_cast<std::uint8_t>(ulen), 0, 0});
    for (std::size_t i = 0; i < payload; ++i) f.push_back(static_cast<std::uint8_t>(i + 3));
    std::vector<std::byte> out(f.size());
    for (std::size_t i = 0; i < f.size(); ++i) out[i] = std::byte{f[i]};
    return out;
}

struct tx_rig : engine_rig {
    tx_rig() {
        add_cq(kCqn, 5);
        wq_object q;
        q.n = kSqn;
        q.state = wq_state::RDY;
        q.cqn = kCqn;
        q.pd = kPd;
        q.uar = config().first_uar;
        q.tisn = 1;  // what CREATE_SQ with a TIS (tis_lst_sz 1) leaves
        std::byte* c = q.ctx.data();
        ifc::set<ifc::sqc::user_index>(c, 0x77);
        std::byte* wq = ifc::at<ifc::sqc::wq>(c);
        ifc::set<ifc::wq::wq_type>(wq, ifc::wq_values::type_cyclic);
        ifc::set<ifc::wq::log_wq_sz>(wq, 3);  // 8 basic blocks
        ifc::set<ifc::wq::log_wq_stride>(wq, 6);
        ifc::set<ifc::wq::dbr_addr>(wq, dbr = alloc(64));
        q.pas.push_back(ring = alloc(4096));
        t.eth.sqs[kSqn] = std::move(q);
    }
    // Writes a WQE of `segs` (the octowords after the control segment) at the next basic
    // block, updates the doorbell record and rings the doorbell.
    void post(hw::wqe_opcode op, const std::vector<std::byte>& segs, bool signaled = true) {
        const std::size_t bytes = 16 + segs.size();
        const unsigned ds = static_cast<unsigned>((bytes + 15) / 16);
        hw::wqe_ctrl_seg ctrl{};
        hw::set_ctrl_seg(ctrl, posted, op, 0, kSqn, static_cast<std::uint8_t>(ds), signaled ? hw::ctrl_cq_update : 0);
        std::vector<std::byte> w(ds * 16);
        std::memcpy(w.data(), &ctrl, 16);
        if (!segs.empty()) std::memcpy(w.data() + 16, segs.data(), segs.size());
        for (std::size_t i = 0; i < w.size(); ++i) *host(ring + ((posted * 64 + i) % (8 * 64))) = w[i];
        posted = static_cast<std::uint16_t>(posted + (w.size() + 63) / 64);
        put(dbr + 4, hw::be32::from(posted));
        const std::uint64_t qword0 = (std::uint64_t{ctrl.opmod_idx_opcode.value()} << 32) | ctrl.qpn_ds.value();
        engine->sq_doorbell(config().first_uar, std::size_t{config().first_uar} * hw::uar_page_size + hw::uar_bf_offset, qword0);
    }
    hw::cqe64 next_cqe() { return cqe(kCqn, read_++); }
    std::uint64_t ring = 0, dbr = 0;
    std::uint16_t posted = 0;
    std::uint32_t read_ = 0;
};

// An Ethernet segment with the frame's first `inl` bytes inline and `cs_flags`, padded to
// whole octowords, as mlx5e builds it.
std::vector<std::byte> eth_seg(const std::vector<std::byte>& frame, std::size_t inl, std::uint8_t cs_flags) {
    const std::size_t octowords = 1 + (inl > 2 ? (inl - 2 + 15) / 16 : 0);
    std::vector<std::byte> s(octowords * 16);
    hw::wqe_eth_seg e{};
    e.cs_flags = cs_flags;
    e.inline_hdr_sz = hw::be16::from(static_cast<std::uint16_t>(inl));
    std::memcpy(s.data(), &e, 14);
    std::memcpy(s.data() + 14, frame.data(), inl);
    return s;
}

}  // namespace

TEST_CASE("a SEND WQE: headers inline, the rest through a memory key; the device fills both checksums and completes") {
    tx_rig r;
    const auto f = frame_without_checksums(200);
    const std::uint64_t buf = r.alloc(f.size());
    for (std::size_t i = 0; i < f.size(); ++i) *r.host(buf + i) = f[i];
    auto segs = eth_seg(f, 14, hw::eth_wqe_l3_csum | hw::eth_wqe_l4_csum);  // the L2 header, as mlx5e inlines it
    hw::wqe_data_seg d{};
    hw::set_data_seg(d, static_cast<std::uint32_t>(f.size() - 14), r.kKey, buf + 14);
    segs.resize(segs.size() + 16);
    std::memcpy(segs.data() + segs.size() - 16, &d, 16);
    r.post(hw::wqe_opcode::SEND, segs);
    REQUIRE(r.frames.size() == 1);
    const auto& out = r.frames[0];
    REQUIRE(out.size() == f.size());
    eth_headers h;
    REQUIRE(parse_eth(out, h));
    CHECK(h.l3_ok);
    CHECK(h.l4_ok);
    CHECK(h.dport == 31337);
    for (std::size_t i = 42; i < out.size(); ++i) REQUIRE(out[i] == f[i]);  // the payload as it was
    const hw::cqe64 c = r.next_cqe();
    CHECK(hw::cqe_get_opcode(c.op_own) == hw::cqe_opcode::REQ);
    CHECK(c.wqe_counter.value() == 0);
    CHECK((c.sop_drop_qpn.value() & 0xffffff) == kSqn);
    CHECK((c.srqn_uidx.value() & 0xffffff) == 0x77);
    CHECK(c.timestamp.value() == r.now_ticks);
    CHECK(r.t.eth.sqs.at(kSqn).consumer == 1);
}

TEST_CASE("the whole frame inline, no checksum asked; an unsignaled WQE writes no CQE; a NOP sends nothing") {
    tx_rig r;
    auto f = frame_without_checksums(20);
    auto segs = eth_seg(f, f.size(), 0);
    r.post(hw::wqe_opcode::SEND, segs, false);
    REQUIRE(r.frames.size() == 1);
    CHECK(r.frames[0] == f);  // unchanged: zero checksums stay zero
    r.post(hw::wqe_opcode::NOP, {});
    CHECK(r.frames.size() == 1);
    const hw::cqe64 c = r.next_cqe();  // the NOP's: the SEND asked for none
    CHECK(c.wqe_counter.value() == r.posted - 1);
    // Inline data segments after the inline headers.
    std::vector<std::byte> more = eth_seg(f, 14, hw::eth_wqe_l4_csum);
    hw::wqe_inline_seg is{};
    hw::set_inline_seg(is, static_cast<std::uint32_t>(f.size() - 14));
    const std::size_t at = more.size();
    more.resize(at + (4 + f.size() - 14 + 15) / 16 * 16);
    std::memcpy(more.data() + at, &is, 4);
    std::memcpy(more.data() + at + 4, f.data() + 14, f.size() - 14);
    r.post(hw::wqe_opcode::SEND, more);
    REQUIRE(r.frames.size() == 2);
    eth_headers h;
    REQUIRE(parse_eth(r.frames[1], h));
    CHECK(h.l4_ok);
    CHECK_FALSE(h.l3_ok);  // the IPv4 header checksum was not asked for
}

namespace {

std::vector<std::byte> bytes_of(const std::vector<std::uint8_t>& v) {
    std::vector<std::byte> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = std::byte{v[i]};
    return out;
}

// A TCP/IPv4 message for LSO (54 bytes of headers, then `payload` bytes): IP id `id`,
// sequence number `seq`, flags `flags`, both checksums zero.
std::vector<std::byte> tcp4_message(std::size_t payload, std::uint16_t id, std::uint32_t seq, std::uint8_t flags) {
    std::vector<std::uint8_t> f{0x02, 0xc5, 0, 0, 0, 2, 0x02, 0xc5, 0, 0, 0, 1, 0x08, 0x00};
    const std::size_t total = 40 + payload;
    f.insert(f.end(), {0x45, 0, static_cast<std::uint8_t>(total >> 8), static_cast<std::uint8_t>(total),
                       static_cast<std::uint8_t>(id >> 8), static_cast<std::uint8_t>(id), 0x40, 0, 64, 6, 0, 0, 169,
                       254, 0, 1, 169, 254, 0, 2});
    f.insert(f.end(), {0x9c, 0x40, 0x13, 0x89, static_cast<std::uint8_t>(seq >> 24), static_cast<std::uint8_t>(seq >> 16),
                       static_cast<std::uint8_t>(seq >> 8), static_cast<std::uint8_t>(seq), 0, 0, 0, 7, 0x50, flags,
                       0xff, 0xff, 0, 0, 0, 0});
    for (std::size_t i = 0; i < payload; ++i) f.push_back(static_cast<std::uint8_t>(i * 7 + 1));
    return bytes_of(f);
}

// A UDP/IPv6 message for LSO (62 bytes of headers, then `payload` bytes).
std::vector<std::byte> udp6_message(std::size_t payload) {
    std::vector<std::uint8_t> f{0x02, 0xc5, 0, 0, 0, 2, 0x02, 0xc5, 0, 0, 0, 1, 0x86, 0xdd};
    const std::size_t len = 8 + payload;
    f.insert(f.end(), {0x60, 0, 0, 0, static_cast<std::uint8_t>(len >> 8), static_cast<std::uint8_t>(len), 17, 64});
    for (int side = 1; side <= 2; ++side) {
        f.insert(f.end(), {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<std::uint8_t>(side)});
    }
    f.insert(f.end(), {0x9c, 0x41, 0x7a, 0x6a, static_cast<std::uint8_t>(len >> 8), static_cast<std::uint8_t>(len), 0, 0});
    for (std::size_t i = 0; i < payload; ++i) f.push_back(static_cast<std::uint8_t>(i * 5 + 2));
    return bytes_of(f);
}

// Posts `msg` as one LSO WQE: its first `headers` bytes inline, the rest through the
// memory key, `mss` bytes of payload a frame, both checksums asked.
void post_lso(tx_rig& r, const std::vector<std::byte>& msg, std::size_t headers, std::uint16_t mss) {
    const std::uint64_t buf = r.alloc(msg.size());
    for (std::size_t i = 0; i < msg.size(); ++i) *r.host(buf + i) = msg[i];
    auto segs = eth_seg(msg, headers, hw::eth_wqe_l3_csum | hw::eth_wqe_l4_csum);
    hw::wqe_eth_seg e;
    std::memcpy(&e, segs.data(), 16);
    e.mss = hw::be16::from(mss);
    std::memcpy(segs.data(), &e, 16);
    hw::wqe_data_seg d{};
    hw::set_data_seg(d, static_cast<std::uint32_t>(msg.size() - headers), r.kKey, buf + headers);
    segs.resize(segs.size() + 16);
    std::memcpy(segs.data() + segs.size() - 16, &d, 16);
    r.post(hw::wqe_opcode::LSO, segs);
}

std::uint32_t be32_at(const std::vector<std::byte>& f, std::size_t at) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) v = v << 8 | std::to_integer<std::uint32_t>(f[at + i]);
    return v;
}
std::uint16_t be16_at(const std::vector<std::byte>& f, std::size_t at) {
    return static_cast<std::uint16_t>(std::to_integer<unsigned>(f[at]) << 8 | std::to_integer<unsigned>(f[at + 1]));
}

}  // namespace

TEST_CASE("LSO, TCP over IPv4: the headers before each mss-byte piece; IP length and id, sequence number and flags "
          "per frame; both checksums filled; one CQE") {
    tx_rig r;
    // The id and the sequence number wrap within the message.
    const auto msg = tcp4_message(2500, 0xfffe, 0xfffffe00u, 0x99);  // CWR, ACK, PSH, FIN
    post_lso(r, msg, 54, 1000);
    REQUIRE(r.frames.size() == 3);
    const std::size_t sizes[] = {1054, 1054, 554};
    const std::uint16_t ids[] = {0xfffe, 0xffff, 0x0000};
    const std::uint8_t flags[] = {0x90, 0x10, 0x19};  // CWR on the first only, PSH and FIN on the last only
    std::size_t off = 0;
    for (std::size_t i = 0; i < 3; ++i) {
        const auto& f = r.frames[i];
        INFO("frame ", i);
        REQUIRE(f.size() == sizes[i]);
        eth_headers h;
        REQUIRE(parse_eth(f, h));
        CHECK(h.tcp);
        CHECK(h.l3_ok);
        CHECK(h.l4_ok);
        CHECK(be16_at(f, 16) == f.size() - 14);  // IPv4 total length
        CHECK(be16_at(f, 18) == ids[i]);
        CHECK(be32_at(f, 38) == static_cast<std::uint32_t>(0xfffffe00u + off));
        CHECK(std::to_integer<unsigned>(f[47]) == flags[i]);
        for (std::size_t k = 0; k < 54; ++k) {
            if (k == 16 || k == 17 || k == 18 || k == 19 || k == 24 || k == 25 || (k >= 38 && k < 42) || k == 47 ||
                k == 50 || k == 51) {
                continue;  // the fields set per frame and the two checksums
            }
            REQUIRE(f[k] == msg[k]);
        }
        for (std::size_t k = 54; k < f.size(); ++k) REQUIRE(f[k] == msg[54 + off + k - 54]);
        off += f.size() - 54;
    }
    CHECK(off == 2500);
    const hw::cqe64 c = r.next_cqe();
    CHECK(hw::cqe_get_opcode(c.op_own) == hw::cqe_opcode::REQ);
    CHECK(c.wqe_counter.value() == 0);
    CHECK(r.t.eth.sqs.at(kSqn).state == wq_state::RDY);
}

TEST_CASE("LSO, UDP over IPv6: each frame its UDP length and IPv6 payload length; a payload of one mss is one frame") {
    tx_rig r;
    const auto msg = udp6_message(2200);
    post_lso(r, msg, 62, 1000);
    REQUIRE(r.frames.size() == 3);
    std::size_t off = 0;
    for (const auto& f : r.frames) {
        eth_headers h;
        REQUIRE(parse_eth(f, h));
        CHECK(h.udp);
        CHECK(h.l4_ok);
        const std::size_t len = f.size() - 62;
        CHECK(len == (off + 1000 <= 2200 ? 1000 : 200));
        CHECK(be16_at(f, 18) == 8 + len);  // IPv6 payload length
        CHECK(be16_at(f, 58) == 8 + len);  // UDP length
        for (std::size_t k = 62; k < f.size(); ++k) REQUIRE(f[k] == msg[62 + off + k - 62]);
        off += len;
    }
    r.frames.clear();
    post_lso(r, udp6_message(1000), 62, 1000);
    REQUIRE(r.frames.size() == 1);
    CHECK(r.frames[0].size() == 1062);
}

TEST_CASE("LSO with headers that stop inside the TCP header completes in error and takes the SQ to ERR; nothing "
          "more goes out") {
    tx_rig r;
    const auto msg = tcp4_message(3000, 1, 1, 0x10);
    post_lso(r, msg, 40, 1000);  // the IPv4 header and 6 bytes of TCP's
    CHECK(r.frames.empty());
    const hw::cqe64 c = r.next_cqe();
    CHECK(hw::cqe_get_opcode(c.op_own) == hw::cqe_opcode::REQ_ERR);
    CHECK(reinterpret_cast<const hw::err_cqe64&>(c).syndrome == static_cast<std::uint8_t>(hw::cqe_syndrome::LOCAL_LENGTH_ERR));
    CHECK(r.t.eth.sqs.at(kSqn).state == wq_state::ERR);
    r.post(hw::wqe_opcode::SEND, eth_seg(frame_without_checksums(20), 62, 0));
    CHECK(r.frames.empty());
}

TEST_CASE("an SQ without a TIS (Linux's mlx5e ICOSQ) executes NOPs; a frame from it completes in error") {
    tx_rig r;
    r.t.eth.sqs.at(kSqn).tisn = 0;
    r.post(hw::wqe_opcode::NOP, {});
    CHECK(hw::cqe_get_opcode(r.next_cqe().op_own) == hw::cqe_opcode::REQ);
    auto f = frame_without_checksums(20);
    r.post(hw::wqe_opcode::SEND, eth_seg(f, f.size(), 0));
    CHECK(r.frames.empty());
    const hw::cqe64 c = r.next_cqe();
    CHECK(hw::cqe_get_opcode(c.op_own) == hw::cqe_opcode::REQ_ERR);
    CHECK(reinterpret_cast<const hw::err_cqe64&>(c).syndrome == static_cast<std::uint8_t>(hw::cqe_syndrome::LOCAL_QP_OP_ERR));
}
