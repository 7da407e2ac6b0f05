// The raw Ethernet fast path (queues/eth_queue.h) on plain memory, against rdma-core's
// mlx5dv.h: send WQEs compared byte for byte with the same WQE built by
// mlx5dv_set_ctrl_seg, mlx5dv_set_eth_seg and mlx5dv_set_data_seg; receive WQEs with
// mlx5dv_set_data_seg; CQEs laid out with struct mlx5_cqe64 as a device writes them for
// a cyclic and a striding RQ (Linux's mlx5e reads the same fields), decoded into packets.
#include <doctest/doctest.h>
#include <endian.h>
#include <infiniband/mlx5dv.h>

#include <array>
#include <bit>
#include <cstddef>
#include <cstring>
#include <vector>

#include "queues/eth_queue.h"
#include "tests/queues/expected_wqe.h"

using namespace cxv;
using namespace cxv::queues;

namespace {

using test::check_same;
using test::expected;
using test::kQpn;
using test::sq_rig;


std::vector<std::byte> frame_of(std::size_t n) {
    std::vector<std::byte> f(n);
    for (std::size_t i = 0; i < n; ++i) f[i] = std::byte{static_cast<std::uint8_t>(0x30 + i * 7)};
    return f;
}

// CQEs as a new CQ has them: invalid, owned by the device for the first pass.
template <std::size_t N>
cqe_reader fresh_cq(std::array<mlx5_cqe64, N>& cqes, hw::cq_doorbell_record& dbrec) {
    static_assert(std::has_single_bit(N));
    for (auto& c : cqes) c.op_own = static_cast<std::uint8_t>(MLX5_CQE_INVALID << 4 | 1);
    return cqe_reader(reinterpret_cast<std::byte*>(cqes.data()), std::countr_zero(N), &dbrec);
}

// The device's side: CQE `i` of the first pass (owner 0), as mlx5dv.h lays it out.
void device_writes(mlx5_cqe64& c, std::uint8_t opcode) {
    c.op_own = static_cast<std::uint8_t>(opcode << 4);  // owner 0: the first pass
}

}  // namespace

TEST_CASE("a frame by pointer: control, Ethernet segment with 18 bytes inline, a data segment, in one BB") {
    sq_rig r(doorbell_mode::doorbell, false, eth_wqe::max_bbs());
    auto f = frame_of(60);
    REQUIRE(put_eth_frame(r.sq, f.data(), 60, 0x4455, eth_l3_csum | eth_l4_csum | eth_signaled, 77));
    expected e;
    auto* eseg = e.next<mlx5_wqe_eth_seg>();
    mlx5dv_set_eth_seg(eseg, MLX5_ETH_WQE_L3_CSUM | MLX5_ETH_WQE_L4_CSUM, 0, 18,
                       reinterpret_cast<std::uint8_t*>(f.data()));
    mlx5dv_set_data_seg(e.next<mlx5_wqe_data_seg>(), 42, 0x4455, reinterpret_cast<std::uint64_t>(f.data() + 18));
    e.ctrl(0, MLX5_OPCODE_SEND, MLX5_WQE_CTRL_CQ_UPDATE);
    CHECK(e.off == 64);
    check_same(r.bbs.data(), e);
    CHECK(r.sq.producer() == 1);
    // Rung: the record's counter, then the control segment's first 8 bytes to the register.
    r.sq.ring();
    CHECK(r.dbrec.snd_counter.value() == 1);
    CHECK(std::memcmp(r.bf.data(), r.bbs.data(), 8) == 0);

    SUBCASE("a frame no longer than the inline header has no data segment") {
        auto small = frame_of(14);
        REQUIRE(put_eth_frame(r.sq, small.data(), 14, 0x4455, 0, 78));
        expected s;
        mlx5dv_set_eth_seg(s.next<mlx5_wqe_eth_seg>(), 0, 0, 14, reinterpret_cast<std::uint8_t*>(small.data()));
        s.off = 16 + 16 + 16;  // the 12 bytes after the first 2 fill one octoword
        s.ctrl(1, MLX5_OPCODE_SEND, 0);
        check_same(r.bbs.data() + 64, s);
    }
}

TEST_CASE("a frame inline: the whole frame in the Ethernet segment, padded to an octoword") {
    sq_rig r(doorbell_mode::doorbell, false, eth_wqe::max_bbs());
    auto f = frame_of(64);
    REQUIRE(put_eth_inline(r.sq, f.data(), 64, eth_l4_csum, 5));
    expected e;
    mlx5dv_set_eth_seg(e.next<mlx5_wqe_eth_seg>(), MLX5_ETH_WQE_L4_CSUM, 0, 64,
                       reinterpret_cast<std::uint8_t*>(f.data()));
    // 2 bytes in the segment's first octoword, 62 in the next four (the last padded).
    e.off = 16 + 16 + 64;
    e.ctrl(0, MLX5_OPCODE_SEND, 0);
    check_same(r.bbs.data(), e);
    CHECK(r.sq.producer() == 2);  // 96 bytes: two BBs

    SUBCASE("a full ring takes nothing") {
        // eth_wqe::max_bbs() (5) must fit: 2 + 5*2 = 12 BBs, then a 5-BB reservation fails.
        for (int i = 0; i < 5; ++i) REQUIRE(put_eth_inline(r.sq, f.data(), 64, 0, 6));
        const auto pi = r.sq.producer();
        CHECK_FALSE(put_eth_inline(r.sq, f.data(), 64, 0, 7));
        CHECK(r.sq.producer() == pi);
    }
}

TEST_CASE("send completions retire the ring and carry the timestamp; an error CQE its status") {
    sq_rig r(doorbell_mode::doorbell, false, eth_wqe::max_bbs());
    std::array<mlx5_cqe64, 8> cqes{};
    hw::cq_doorbell_record dbrec{};
    eth_send_cq cq(fresh_cq(cqes, dbrec), &r.sq);
    auto f = frame_of(60);
    for (int i = 0; i < 3; ++i) REQUIRE(put_eth_frame(r.sq, f.data(), 60, 1, i == 2 ? eth_signaled : 0, 100 + i));
    eth_send_completion out[4];
    CHECK(cq.poll(out, 4) == 0);
    const std::uint32_t room = r.sq.free_bbs();
    cqes[0].wqe_counter = htobe16(2);
    cqes[0].timestamp = htobe64(0x123456789ull);
    cqes[0].sop_drop_qpn = htobe32(MLX5_OPCODE_SEND << 24 | kQpn);
    device_writes(cqes[0], MLX5_CQE_REQ);
    REQUIRE(cq.poll(out, 4) == 1);
    CHECK(out[0].id == 102);
    CHECK(out[0].status == wc_success);
    CHECK(out[0].timestamp == 0x123456789ull);
    CHECK(r.sq.free_bbs() == room + 3);  // the two unsignaled frames went with it
    CHECK(dbrec.update_ci.value() == 1);

    REQUIRE(put_eth_frame(r.sq, f.data(), 60, 1, eth_signaled, 200));
    auto* err = reinterpret_cast<mlx5_err_cqe*>(&cqes[1]);
    err->syndrome = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
    err->vendor_err_synd = 0x68;
    err->wqe_counter = htobe16(3);
    device_writes(cqes[1], MLX5_CQE_REQ_ERR);
    REQUIRE(cq.poll(out, 4) == 1);
    CHECK(out[0].id == 200);
    CHECK(out[0].status == wc_loc_qp_op_err);
    CHECK(out[0].syndrome == MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
    CHECK(out[0].vendor_syndrome == 0x68);
}

TEST_CASE("a cyclic RQ: each WQE its own buffer; packets handed out until the next poll gives them back") {
    constexpr unsigned kLog = 3;
    alignas(64) std::array<std::byte, 8 * 16> wqes{};
    hw::wq_doorbell_record dbrec{};
    alignas(64) std::vector<std::byte> bufs(8 * 256);
    std::array<mlx5_cqe64, 16> cqes{};
    hw::cq_doorbell_record cq_dbrec{};
    eth_recv_queue::layout l;
    l.wqes = wqes.data();
    l.log_wqes = kLog;
    l.wqe_shift = 4;
    l.dbrec = &dbrec;
    l.buffers = bufs.data();
    l.log_buffer = 8;
    l.lkey = 0x777;
    l.cq = fresh_cq(cqes, cq_dbrec);
    eth_recv_queue rq(l);
    rq.start();
    // Every WQE is mlx5dv's data segment for its buffer; all 8 posted.
    for (unsigned i = 0; i < 8; ++i) {
        mlx5_wqe_data_seg want{};
        mlx5dv_set_data_seg(&want, 256, 0x777, reinterpret_cast<std::uint64_t>(bufs.data() + i * 256));
        CAPTURE(i);
        CHECK(std::memcmp(wqes.data() + i * 16, &want, 16) == 0);
    }
    CHECK(dbrec.rcv_counter.value() == 8);

    eth_packet p[4];
    CHECK(rq.poll(p, 4) == 0);
    // Two packets into WQEs 0 and 1, as a card's Ethernet receive CQE has them.
    for (unsigned i = 0; i < 2; ++i) {
        mlx5_cqe64& c = cqes[i];
        c.byte_cnt = htobe32(60 + i);
        c.wqe_counter = htobe16(static_cast<std::uint16_t>(i));
        c.sop_drop_qpn = htobe32(0xabcdef);  // the flow tag (Linux: MLX5E_TC_FLOW_ID_MASK)
        c.timestamp = htobe64(1000 + i);
        c.hds_ip_ext = MLX5_CQE_L3_OK | MLX5_CQE_L4_OK;
        c.l4_hdr_type_etc = static_cast<std::uint8_t>(2 << 4 | 2 << 2 | (i == 1 ? 1 : 0));  // UDP, IPv4, VLAN
        c.vlan_info = htobe16(i == 1 ? 0x2064 : 0);
        std::memcpy(reinterpret_cast<std::byte*>(&c) + 12, "\x11\x22\x33\x44", 4);  // rss_hash_result
        reinterpret_cast<std::uint8_t*>(&c)[16] = 0x84;                            // rss_hash_type
        device_writes(c, MLX5_CQE_RESP_SEND);
    }
    REQUIRE(rq.poll(p, 4) == 2);
    for (unsigned i = 0; i < 2; ++i) {
        CAPTURE(i);
        CHECK(p[i].data == bufs.data() + i * 256);
        CHECK(p[i].length == 60 + i);
        CHECK(p[i].flow_tag == 0xabcdef);
        CHECK(p[i].timestamp == 1000 + i);
        CHECK(p[i].l3_ok());
        CHECK(p[i].l4_ok());
        CHECK(p[i].rss_hash == 0x11223344);
        CHECK(p[i].rss_type == 0x84);
        CHECK(p[i].vlan_stripped() == (i == 1));
    }
    CHECK(p[1].vlan_tci == 0x2064);
    CHECK(cq_dbrec.update_ci.value() == 2);
    CHECK(dbrec.rcv_counter.value() == 8);  // still the app's
    // The next poll gives both WQEs back (their contents unchanged), then finds nothing.
    CHECK(rq.poll(p, 4) == 0);
    CHECK(dbrec.rcv_counter.value() == 10);
    CHECK(std::memcmp(wqes.data(), &wqes[0], 16) == 0);

    SUBCASE("an error CQE uses its WQE up and is counted, not handed out") {
        auto* err = reinterpret_cast<mlx5_err_cqe*>(&cqes[2]);
        err->syndrome = MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
        err->wqe_counter = htobe16(2);
        device_writes(cqes[2], MLX5_CQE_RESP_ERR);
        CHECK(rq.poll(p, 4) == 0);
        CHECK(rq.errors() == 1);
        CHECK(rq.poll(p, 4) == 0);
        CHECK(dbrec.rcv_counter.value() == 11);
    }
}

TEST_CASE("a striding RQ: packets at their strides, the WQE back once closed (last stride or filler)") {
    // 2 WQEs of 2^9 strides of 64 bytes (32 KiB each).
    alignas(64) std::array<std::byte, 2 * 32> wqes{};
    hw::wq_doorbell_record dbrec{};
    std::vector<std::byte> bufs(2 * 32768);
    std::array<mlx5_cqe64, 8> cqes{};
    hw::cq_doorbell_record cq_dbrec{};
    eth_recv_queue::layout l;
    l.wqes = wqes.data();
    l.log_wqes = 1;
    l.wqe_shift = 5;
    l.dbrec = &dbrec;
    l.buffers = bufs.data();
    l.log_buffer = 15;
    l.lkey = 9;
    l.log_strides = 9;
    l.log_stride = 6;
    l.cq = fresh_cq(cqes, cq_dbrec);
    eth_recv_queue rq(l);
    rq.start();
    // The WQE: a next segment (zero), then one scatter entry over the whole buffer.
    mlx5_wqe_data_seg want{};
    mlx5dv_set_data_seg(&want, 32768, 9, reinterpret_cast<std::uint64_t>(bufs.data() + 32768));
    CHECK(std::memcmp(wqes.data() + 32 + 16, &want, 16) == 0);
    CHECK(dbrec.rcv_counter.value() == 2);

    auto packet_at = [&](unsigned i, std::uint16_t wqe, std::uint16_t stride, std::uint32_t strides, std::uint32_t len,
                         bool filler) {
        mlx5_cqe64& c = cqes[i];
        c.wqe_id = htobe16(wqe);
        c.wqe_counter = htobe16(stride);
        c.byte_cnt = htobe32((filler ? 1u << 31 : 0u) | strides << 16 | len);
        device_writes(c, MLX5_CQE_RESP_SEND);
    };
    packet_at(0, 0, 0, 2, 100, false);     // strides 0-1 of WQE 0
    packet_at(1, 0, 2, 1, 64, false);      // stride 2
    packet_at(2, 0, 3, 509, 0, true);      // the rest of WQE 0 skipped
    packet_at(3, 1, 0, 3, 150, false);     // WQE 1, strides 0-2
    eth_packet p[8];
    REQUIRE(rq.poll(p, 8) == 3);
    CHECK(p[0].data == bufs.data());
    CHECK(p[0].length == 100);
    CHECK(p[1].data == bufs.data() + 2 * 64);
    CHECK(p[1].length == 64);
    CHECK(p[2].data == bufs.data() + 32768);
    CHECK(p[2].length == 150);
    CHECK(cq_dbrec.update_ci.value() == 4);
    CHECK(rq.poll(p, 8) == 0);
    CHECK(dbrec.rcv_counter.value() == 3);  // WQE 0 closed by its filler; WQE 1 still open

    // A packet ending exactly at the last stride closes WQE 1 too.
    packet_at(4, 1, 3, 509, 509 * 64, false);
    REQUIRE(rq.poll(p, 8) == 1);
    CHECK(p[0].length == 509 * 64);
    CHECK(rq.poll(p, 8) == 0);
    CHECK(dbrec.rcv_counter.value() == 4);
}
