// UMR WQEs (PRM "UMR Control Segment"), as Linux's mlx5_ib posts them on its UMR QP to
// register memory (mr.c, umr.c: a free key from its cache enabled with its translation
// entries, revoked again, its PD and access changed) and on RC QPs for fast registration:
// the key changes only as the mask says and only once every check passed; the new
// translation is what data through the key uses.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/sim/transport/rig.h"

namespace cxv::sim::testing {
namespace {

constexpr std::uint32_t kUmrQp = 0x100, kA = 0x101, kB = 0x102;
constexpr std::uint32_t kCq = 1, kCqA = 2, kCqB = 3;
constexpr std::uint32_t kFreeIndex = 0x30;  // the key the UMRs change
constexpr std::uint32_t kOtherPd = 2;
constexpr std::uint64_t kVa = 0x7f0000001000;  // the virtual range the UMR gives it

using mkey_seg = std::array<std::byte, hw::umr_mkey_seg_size>;

hw::cqe_opcode opcode(const hw::cqe64& c) { return hw::cqe_get_opcode(c.op_own); }
std::uint8_t syndrome(const hw::cqe64& c) { return reinterpret_cast<const hw::err_cqe64&>(c).syndrome; }

struct umr_rig : engine_rig {
    umr_rig() {
        t.pds[kPd].uid = 0;
        t.pds[kOtherPd].uid = 0;
        add_cq(kCq, 4);
        add_cq(kCqA, 4);
        add_cq(kCqB, 4);
        // Linux's UMR QP: REG_UMR, no PD.
        qp_object& q = add_rc_qp(kUmrQp, 0, kCq);
        ifc::set<ifc::qpc::st>(q.qpc.data(), ifc::qpc_values::st_reg_umr);
        q.pd = 0;
        add_rc_qp(kA, kB, kCqA);
        add_rc_qp(kB, kA, kCqB);
        // As mlx5_ib's cache makes its keys: free, UMR enabled, MTT, 2 octowords, 4 KiB pages.
        mkey_object mk;
        mk.index = kFreeIndex;
        std::byte* c = mk.mkc.data();
        ifc::set<ifc::mkc::free>(c, 1);
        ifc::set<ifc::mkc::umr_en>(c, 1);
        ifc::set<ifc::mkc::access_mode_1_0>(c, 1);
        ifc::set<ifc::mkc::lr>(c, 1);
        ifc::set<ifc::mkc::pd>(c, kPd);
        ifc::set<ifc::mkc::qpn>(c, 0xffffff);
        ifc::set<ifc::mkc::translations_octword_size>(c, 2);
        ifc::set<ifc::mkc::log_page_size>(c, 12);
        t.mkeys[kFreeIndex] = std::move(mk);
        ++t.pds[kPd].users;
        page1 = alloc(4096);
        alloc(4096);  // a gap: the two pages are not adjacent in IOVA
        page2 = alloc(4096);
    }
    const mkey_object& key() { return t.mkeys.at(kFreeIndex); }
    // A signaled UMR WQE on `qpn` that names the key, `segs` after its control segment.
    template <class... Segs>
    void umr(std::uint32_t qpn, const Segs&... segs) {
        post_send_imm(qpn, hw::wqe_opcode::UMR, true, hw::be32::from(kFreeIndex << 8), segs...);
    }
    template <class F>
    auto field() {
        return ifc::get<F>(key().mkc.data());
    }
    // The CQE of the last WQE of `cqn` (its producer moved by exactly one).
    hw::cqe64 last(std::uint32_t cqn) {
        REQUIRE(t.cqs.at(cqn).producer >= 1);
        return cqe(cqn, t.cqs.at(cqn).producer - 1);
    }
    // What Linux's mlx5r_umr_update_mr_pas(ENABLE) sends for an 8 KiB range at kVa on
    // page1, page2 (present: read and write enables set), through the PA key.
    void enable(std::uint32_t qpn, std::uint8_t variant, std::uint32_t pd = kPd) {
        const std::uint64_t list = alloc(4096);
        put(list, hw::be64::from(page1 | 3));
        put(list + 8, hw::be64::from(page2 | 3));
        hw::wqe_umr_ctrl_seg u{};
        u.flags = hw::umr_check_key_free;
        u.xlt_octowords = hw::be16::from(4);  // 64 bytes: two entries and their padding
        u.mkey_mask = hw::be64::from(hw::umr_mask_len | hw::umr_mask_page_size | hw::umr_mask_start_addr |
                                     hw::umr_mask_pd | hw::umr_mask_key | hw::umr_mask_free | hw::umr_mask_lr |
                                     hw::umr_mask_lw | hw::umr_mask_rr | hw::umr_mask_rw | hw::umr_mask_a);
        mkey_seg s{};
        ifc::set<ifc::mkc::lr>(s.data(), 1);
        ifc::set<ifc::mkc::lw>(s.data(), 1);
        ifc::set<ifc::mkc::rw>(s.data(), 1);
        ifc::set<ifc::mkc::rr>(s.data(), 1);
        ifc::set<ifc::mkc::pd>(s.data(), pd);
        ifc::set<ifc::mkc::qpn>(s.data(), 0xffffff);
        ifc::set<ifc::mkc::mkey_7_0>(s.data(), variant);
        ifc::set<ifc::mkc::start_addr>(s.data(), kVa);
        ifc::set<ifc::mkc::len>(s.data(), 8192);
        ifc::set<ifc::mkc::log_page_size>(s.data(), 12);
        hw::wqe_data_seg d{};
        hw::set_data_seg(d, 64, kKey, list);
        umr(qpn, u, s, d);
    }
    // mlx5r_umr_revoke_mr: the key free again, in the given PD; no entries.
    void revoke(std::uint32_t qpn, std::uint32_t pd) {
        hw::wqe_umr_ctrl_seg u{};
        u.flags = hw::umr_inline;
        u.mkey_mask = hw::be64::from(hw::umr_mask_pd | hw::umr_mask_free);
        mkey_seg s{};
        ifc::set<ifc::mkc::free>(s.data(), 1);
        ifc::set<ifc::mkc::pd>(s.data(), pd);
        umr(qpn, u, s);
    }
    std::uint64_t page1 = 0, page2 = 0;
};

TEST_CASE("UMR on a UMR QP: a free key enabled with its entries read through a key; data through it lands on its pages; revoked, it translates nothing") {
    umr_rig r;
    r.enable(kUmrQp, 0x5a);
    const hw::cqe64 c = r.last(kCq);
    CHECK(opcode(c) == hw::cqe_opcode::REQ);
    CHECK(r.t.qps.at(kUmrQp).state == qp_state::RTS);
    CHECK(r.tr.snapshot().umrs == 1);
    CHECK(r.sent.empty());  // local: nothing on the wire
    // The context as the mask said; the fields it did not name kept.
    CHECK(r.field<ifc::mkc::free>() == 0);
    CHECK(r.field<ifc::mkc::mkey_7_0>() == 0x5a);
    CHECK(r.field<ifc::mkc::start_addr>() == kVa);
    CHECK(r.field<ifc::mkc::len>() == 8192);
    CHECK(r.field<ifc::mkc::rw>() == 1);
    CHECK(r.field<ifc::mkc::umr_en>() == 1);
    CHECK(r.field<ifc::mkc::translations_octword_size>() == 2);
    REQUIRE(r.key().translations.size() == 8);  // the 64-byte unit past the 2 octowords
    CHECK(r.key().translations[0] == (r.page1 | 3));
    CHECK(r.key().translations[1] == (r.page2 | 3));
    CHECK(r.key().translations[2] == 0);

    // An RDMA WRITE through the new rkey across the page boundary: the first 6 bytes at
    // the end of page1, the other 10 at the start of page2 (not adjacent in IOVA).
    const std::uint32_t rkey = kFreeIndex << 8 | 0x5a;
    const std::uint64_t src = r.alloc(4096);
    for (int i = 0; i < 16; ++i) r.host(src)[i] = std::byte(0xa0 + i);
    hw::wqe_raddr_seg ra{};
    hw::set_raddr_seg(ra, kVa + 4090, rkey);
    hw::wqe_data_seg d{};
    hw::set_data_seg(d, 16, engine_rig::kKey, src);
    r.post_send(kA, hw::wqe_opcode::RDMA_WRITE, true, ra, d);
    CHECK(opcode(r.last(kCqA)) == hw::cqe_opcode::REQ);
    CHECK(std::memcmp(r.host(r.page1 + 4090), r.host(src), 6) == 0);
    CHECK(std::memcmp(r.host(r.page2), r.host(src) + 6, 10) == 0);
    // The old variant no longer names the key.
    hw::set_raddr_seg(ra, kVa, kFreeIndex << 8);
    r.post_send(kA, hw::wqe_opcode::RDMA_WRITE, true, ra, d);
    CHECK(opcode(r.last(kCqA)) == hw::cqe_opcode::REQ_ERR);
    CHECK(syndrome(r.last(kCqA)) == static_cast<std::uint8_t>(hw::cqe_syndrome::REMOTE_ACCESS_ERR));

    // Revoked into another PD: free, the PD's users moved, no access through it.
    CHECK(r.t.pds.at(engine_rig::kPd).users == 1);
    r.revoke(kUmrQp, kOtherPd);
    CHECK(opcode(r.last(kCq)) == hw::cqe_opcode::REQ);
    CHECK(r.field<ifc::mkc::free>() == 1);
    CHECK(r.field<ifc::mkc::pd>() == kOtherPd);
    CHECK(r.t.pds.at(engine_rig::kPd).users == 0);
    CHECK(r.t.pds.at(kOtherPd).users == 1);
    CHECK(r.field<ifc::mkc::mkey_7_0>() == 0x5a);  // KEY not in the mask
    r.add_rc_qp(0x110, 0x111, kCqA);
    r.add_rc_qp(0x111, 0x110, kCqB);
    hw::set_raddr_seg(ra, kVa, rkey);
    r.post_send(0x110, hw::wqe_opcode::RDMA_WRITE, true, ra, d);
    CHECK(opcode(r.last(kCqA)) == hw::cqe_opcode::REQ_ERR);
    CHECK(syndrome(r.last(kCqA)) == static_cast<std::uint8_t>(hw::cqe_syndrome::REMOTE_ACCESS_ERR));
}

TEST_CASE("UMR: entries inline, at an octoword offset, into a live key checked not to be free; an empty mask changes no field") {
    {
        umr_rig r;
        r.enable(kUmrQp, 1);
        hw::wqe_umr_ctrl_seg u{};
        u.flags = hw::umr_inline | hw::umr_translation_offset_en | hw::umr_check_key_not_free;
        u.xlt_octowords = hw::be16::from(1);
        u.xlt_offset = hw::be16::from(1);  // entries 2 and 3
        mkey_seg s{};
        std::array<hw::be64, 2> entries{hw::be64::from(0x5000 | 3), hw::be64::from(0x6000 | 1)};
        r.umr(kUmrQp, u, s, entries);
        CHECK(opcode(r.last(kCq)) == hw::cqe_opcode::REQ);
        REQUIRE(r.key().translations.size() == 8);
        CHECK(r.key().translations[0] == (r.page1 | 3));
        CHECK(r.key().translations[2] == (0x5000 | 3));
        CHECK(r.key().translations[3] == (0x6000 | 1));
        CHECK(r.field<ifc::mkc::free>() == 0);  // an empty mask changes no field
        CHECK(r.field<ifc::mkc::start_addr>() == kVa);
    }
}

// Each refusal completes the WQE in error (the UMR QP then leaves RTS, as any QP but RC
// after a local error) and leaves the key as it was.
void check_refused(umr_rig& r, std::uint32_t cqn, const mkey_object& before, std::uint64_t umrs_before,
                   hw::cqe_syndrome why) {
    const hw::cqe64 c = r.last(cqn);
    CHECK(opcode(c) == hw::cqe_opcode::REQ_ERR);
    CHECK(syndrome(c) == static_cast<std::uint8_t>(why));
    CHECK(r.key().mkc == before.mkc);
    CHECK(r.key().translations == before.translations);
    CHECK(r.tr.snapshot().umrs == umrs_before);
}

TEST_CASE("UMR refused: the key's state against the check asked for, umr_en, the table's end, another PD, no such key or PD") {
    umr_rig r;
    SUBCASE("enabled on an RC QP of its PD (fast registration), then enabled again with the check that it is free") {
        r.enable(kA, 1);
        CHECK(opcode(r.last(kCqA)) == hw::cqe_opcode::REQ);
        const mkey_object before = r.key();
        r.enable(kUmrQp, 2);
        check_refused(r, kCq, before, 1, hw::cqe_syndrome::LOCAL_PROT_ERR);
    }
    SUBCASE("a free key with the check that it is not") {
        const mkey_object before = r.key();
        hw::wqe_umr_ctrl_seg u{};
        u.flags = hw::umr_inline | hw::umr_check_key_not_free;
        u.mkey_mask = hw::be64::from(hw::umr_mask_lw);
        mkey_seg s{};
        ifc::set<ifc::mkc::lw>(s.data(), 1);
        r.umr(kUmrQp, u, s);
        check_refused(r, kCq, before, 0, hw::cqe_syndrome::LOCAL_PROT_ERR);
    }
    SUBCASE("a key made without umr_en") {
        ifc::set<ifc::mkc::umr_en>(r.t.mkeys.at(kFreeIndex).mkc.data(), 0);
        const mkey_object before = r.key();
        r.enable(kUmrQp, 1);
        check_refused(r, kCq, before, 0, hw::cqe_syndrome::LOCAL_PROT_ERR);
    }
    SUBCASE("entries past the table's 64-byte units") {
        const mkey_object before = r.key();
        hw::wqe_umr_ctrl_seg u{};
        u.flags = hw::umr_inline | hw::umr_translation_offset_en;
        u.xlt_octowords = hw::be16::from(1);
        u.xlt_offset = hw::be16::from(4);  // entries 8 and 9 of a table of 8
        mkey_seg s{};
        std::array<hw::be64, 2> entries{hw::be64::from(0x5000), hw::be64::from(0x6000)};
        r.umr(kUmrQp, u, s, entries);
        check_refused(r, kCq, before, 0, hw::cqe_syndrome::LOCAL_LENGTH_ERR);
    }
    SUBCASE("from an RC QP of another PD") {
        r.t.qps.at(kA).pd = kOtherPd;
        const mkey_object before = r.key();
        hw::wqe_umr_ctrl_seg u{};
        u.flags = hw::umr_inline;
        u.mkey_mask = hw::be64::from(hw::umr_mask_lw);
        mkey_seg s{};
        r.umr(kA, u, s);
        check_refused(r, kCqA, before, 0, hw::cqe_syndrome::LOCAL_PROT_ERR);
        CHECK(r.t.qps.at(kA).state == qp_state::ERR);
    }
    SUBCASE("into a PD that does not exist") {
        const mkey_object before = r.key();
        r.enable(kUmrQp, 1, 9);
        check_refused(r, kCq, before, 0, hw::cqe_syndrome::LOCAL_PROT_ERR);
    }
    SUBCASE("a key that does not exist") {
        r.t.mkeys.erase(kFreeIndex);
        r.enable(kUmrQp, 1);
        CHECK(syndrome(r.last(kCq)) == static_cast<std::uint8_t>(hw::cqe_syndrome::LOCAL_PROT_ERR));
        CHECK(r.tr.snapshot().umrs == 0);
    }
    CHECK(r.sent.empty());
}

TEST_CASE("SEND with invalidate (RC): the last packet carries the R_Key, the responder frees the key and says so in the CQE; a key it may not invalidate fails the receive") {
    namespace op = wire::opcode;
    umr_rig r;
    r.enable(kUmrQp, 0x5a);
    REQUIRE(r.field<ifc::mkc::free>() == 0);
    r.set_path(kA, 1);  // 256-byte packets
    r.set_path(kB, 1);
    const std::uint32_t rkey = kFreeIndex << 8 | 0x5a;
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096);
    for (int i = 0; i < 600; ++i) r.host(src)[i] = std::byte(i * 3);
    r.post_recv(kB, dst, 1024);
    hw::wqe_data_seg d{};
    hw::set_data_seg(d, 600, engine_rig::kKey, src);
    r.post_send_imm(kA, hw::wqe_opcode::SEND_INVAL, true, hw::be32::from(rkey), d);
    // First, Middle, Last with invalidate: the IETH on the last only.
    std::vector<std::uint8_t> ops;
    for (const auto& p : r.sent) {
        if (p.bth.dest_qp == kB) ops.push_back(p.bth.opcode);
    }
    CHECK(ops == std::vector<std::uint8_t>{op::RC | op::SEND_FIRST, op::RC | op::SEND_MIDDLE,
                                           op::RC | op::SEND_LAST_WITH_INVALIDATE});
    for (const auto& p : r.sent) {
        if (p.bth.opcode == (op::RC | op::SEND_LAST_WITH_INVALIDATE)) {
            hw::be32 ieth{};
            std::memcpy(&ieth, p.immdt.data(), 4);
            CHECK(ieth.value() == rkey);
        }
    }
    CHECK(opcode(r.last(kCqA)) == hw::cqe_opcode::REQ);
    const hw::cqe64 c = r.last(kCqB);
    CHECK(opcode(c) == hw::cqe_opcode::RESP_SEND_INV);
    CHECK(c.imm_inval_pkey.value() == rkey);
    CHECK(c.byte_cnt.value() == 600);
    CHECK(std::memcmp(r.host(dst), r.host(src), 600) == 0);
    CHECK(r.field<ifc::mkc::free>() == 1);  // no access passes it now

    // Again, naming the key's old variant (a UMR gave it 0x5b since): the receive fails,
    // the responder's QP with it, and the requester hears an invalid request.
    r.enable(kUmrQp, 0x5b);
    REQUIRE(r.field<ifc::mkc::free>() == 0);
    r.post_recv(kB, dst, 1024);
    hw::set_data_seg(d, 16, engine_rig::kKey, src);
    r.post_send_imm(kA, hw::wqe_opcode::SEND_INVAL, true, hw::be32::from(rkey), d);  // variant 0x5a: stale
    CHECK(opcode(r.last(kCqB)) == hw::cqe_opcode::RESP_ERR);
    CHECK(syndrome(r.last(kCqB)) == static_cast<std::uint8_t>(hw::cqe_syndrome::LOCAL_PROT_ERR));
    CHECK(r.t.qps.at(kB).state == qp_state::ERR);
    CHECK(opcode(r.last(kCqA)) == hw::cqe_opcode::REQ_ERR);
    CHECK(syndrome(r.last(kCqA)) == static_cast<std::uint8_t>(hw::cqe_syndrome::REMOTE_INVAL_REQ_ERR));
    CHECK(r.field<ifc::mkc::free>() == 0);  // untouched
}

TEST_CASE("SEND with invalidate is refused on a UC QP (a local QP operation error): RC only") {
    umr_rig r;
    r.t.qps.erase(kA);
    r.add_rc_qp(kA, kB, kCqA, transport::uc);
    hw::wqe_data_seg d{};
    hw::set_data_seg(d, 16, engine_rig::kKey, r.alloc(4096));
    r.post_send_imm(kA, hw::wqe_opcode::SEND_INVAL, true, hw::be32::from(kFreeIndex << 8), d);
    CHECK(opcode(r.last(kCqA)) == hw::cqe_opcode::REQ_ERR);
    CHECK(syndrome(r.last(kCqA)) == static_cast<std::uint8_t>(hw::cqe_syndrome::LOCAL_QP_OP_ERR));
    CHECK(r.sent.empty());
}

}  // namespace
}  // namespace cxv::sim::testing
