// The multi-producer send ring. Under contention: several threads post to one ring with
// no lock while a "device" thread walks the published WQEs in order (as a card does from
// the doorbell record) and retires them (as the poller does from CQEs). Every WQE must
// be seen exactly once, in the order of the ring, with each thread's WQEs in its own
// posting order; the record must never be behind a published WQE nor move back, and
// the final record and doorbell must cover the last WQE. Deterministically, through the
// ring's test hook: a producer stalled between writing its WQE and publishing it leaves
// the later producers to mark their slots and publishes their WQEs with its own; a
// producer that finds the token at its slot after marking claims its own mark against
// the owner that found the mark; a full ring while a producer is stalled. Every WQE
// shape the ring builds (from its per-QP control words, without the single-producer
// ring's segment writers) is compared byte for byte with rdma-core's mlx5dv.h helpers,
// with the NOP that pads its slot.
#include <doctest/doctest.h>
#include <endian.h>
#include <infiniband/mlx5dv.h>

#include <array>
#include <atomic>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "hw/wqe.h"
#include "queues/mp_send_queue.h"
#include "tests/queues/expected_wqe.h"

using namespace cxv;
using namespace cxv::queues;

namespace {

using stage = mp_send_queue::stage;
using tag = std::pair<std::uint32_t, std::uint32_t>;

// A signaled SEND of the 8 bytes {thread, sequence} inline (one BB).
template <class Hook = mp_send_queue::no_hook>
bool send_tag(mp_send_queue& sq, std::uint32_t thread, std::uint32_t seq, const Hook& hook = Hook{}) {
    std::uint32_t t[2] = {thread, seq};
    const sge s{reinterpret_cast<std::uintptr_t>(t), sizeof t, 0};
    return sq.post({.opcode = hw::wqe_opcode::SEND, .signaled = true, .inline_data = true, .sg = &s, .num_sge = 1,
                    .wr_id = (std::uint64_t{thread} << 32) | seq},
                   hook);
}

std::uint16_t record(const hw::wq_doorbell_record& dbrec) {
    const std::uint32_t raw = std::atomic_ref<std::uint32_t>(const_cast<std::uint32_t&>(dbrec.snd_counter.raw))
                                  .load(std::memory_order_relaxed);
    return static_cast<std::uint16_t>(hw::be32{raw}.value());
}

void wait_for(const std::atomic<bool>& flag) {
    while (!flag.load(std::memory_order_acquire)) std::this_thread::yield();
}

// `threads` producers post `per_thread` tagged SENDs each into a ring of 1 << log_bbs
// BBs in slots of `slot` BBs; `hook(thread, i, stage)` runs at each of post's stages.
template <class Hook>
void stress(unsigned threads, std::uint32_t per_thread, unsigned log_bbs, unsigned slot, const Hook& hook) {
    std::vector<std::byte> mem((std::size_t{1} << log_bbs) * 64 + 64);
    std::byte* const bbs = mem.data() + (64 - reinterpret_cast<std::uintptr_t>(mem.data()) % 64) % 64;
    const std::uint64_t mask = (std::uint64_t{1} << log_bbs) - 1;
    hw::wq_doorbell_record dbrec{};
    alignas(8) std::byte doorbell[8] = {};
    mp_send_queue sq(bbs, log_bbs, 0x4242, false, slot, &dbrec, doorbell);

    std::atomic<bool> stop{false};
    std::vector<std::uint32_t> next_seq(threads, 0);
    std::uint64_t seen = 0, nops = 0, errors = 0, behind = 0, back = 0;
    std::thread device([&] {
        std::uint64_t c = 0;  // the device's BB counter
        std::uint16_t last_record = 0;
        for (;;) {
            const std::uint64_t p = sq.published();
            // The owner writes the record before it moves `published_`: the record is at
            // or ahead of it (by at most the ring), and never moves back.
            const std::uint16_t rec = record(dbrec);
            if (static_cast<std::uint16_t>(rec - static_cast<std::uint16_t>(p)) > mask + 1) ++behind;
            if (static_cast<std::int16_t>(rec - last_record) < 0) ++back;
            last_record = rec;
            if (c == p) {
                if (stop.load(std::memory_order_acquire) && sq.published() == c) return;
                std::this_thread::yield();
                continue;
            }
            while (c < p) {
                const std::byte* w = bbs + (c & mask) * 64;
                const auto& ctrl = *reinterpret_cast<const hw::wqe_ctrl_seg*>(w);
                if (hw::ctrl_wqe_index(ctrl) != static_cast<std::uint16_t>(c) || hw::ctrl_qpn(ctrl) != 0x4242) ++errors;
                const unsigned nbb = (hw::ctrl_ds(ctrl) + 3) / 4;
                if (hw::ctrl_opcode(ctrl) == hw::wqe_opcode::NOP) {
                    ++nops;
                } else if (hw::ctrl_opcode(ctrl) == hw::wqe_opcode::SEND) {
                    std::uint32_t t[2];  // inline data: thread, sequence
                    std::memcpy(t, w + 16 + 4, sizeof t);
                    if (t[0] >= threads || t[1] != next_seq[t[0]]++) ++errors;
                    ++seen;
                    if (sq.retire(static_cast<std::uint16_t>(c)) != ((std::uint64_t{t[0]} << 32) | t[1])) ++errors;
                } else {
                    ++errors;
                }
                c += nbb;
            }
        }
    });
    std::vector<std::thread> producers;
    std::atomic<std::uint64_t> full{0};
    for (unsigned t = 0; t < threads; ++t) {
        producers.emplace_back([&, t] {
            for (std::uint32_t i = 0; i < per_thread;) {
                if (send_tag(sq, t, i, [&](stage s) { hook(t, i, s); })) {
                    ++i;
                } else {
                    full.fetch_add(1, std::memory_order_relaxed);  // the device catches up
                    std::this_thread::yield();
                }
            }
        });
    }
    for (auto& p : producers) p.join();
    stop.store(true, std::memory_order_release);
    device.join();
    CHECK(errors == 0);
    CHECK(behind == 0);
    CHECK(back == 0);
    CHECK(seen == std::uint64_t{threads} * per_thread);
    for (unsigned t = 0; t < threads; ++t) CHECK(next_seq[t] == per_thread);
    // A SEND of 8 inline bytes is one BB: each larger slot starts with a NOP.
    CHECK(nops == (slot > 1 ? seen : 0));
    const std::uint64_t total = sq.published();
    CHECK(total == std::uint64_t{threads} * per_thread * slot);
    CHECK(record(dbrec) == static_cast<std::uint16_t>(total));
    CHECK(std::memcmp(doorbell, bbs + ((total - 1) & mask) * 64, 8) == 0);
    MESSAGE("ring full " << full.load() << " times");
}

// A small ring: 16 BBs, one-BB slots.
struct small_ring {
    alignas(64) std::byte bbs[16 * 64] = {};
    hw::wq_doorbell_record dbrec{};
    alignas(8) std::byte doorbell[8] = {};
    mp_send_queue sq{bbs, 4, 0x77, false, 1, &dbrec, doorbell};

    // The tag of the SEND at BB `c`, or {~0, ~0} when there is none.
    tag tag_at(std::uint64_t c) const {
        const std::byte* w = bbs + (c & 15) * 64;
        const auto& ctrl = *reinterpret_cast<const hw::wqe_ctrl_seg*>(w);
        if (hw::ctrl_opcode(ctrl) != hw::wqe_opcode::SEND || hw::ctrl_wqe_index(ctrl) != static_cast<std::uint16_t>(c) ||
            hw::ctrl_qpn(ctrl) != 0x77) {
            return {~0u, ~0u};
        }
        std::uint32_t t[2];
        std::memcpy(t, w + 16 + 4, sizeof t);
        return {t[0], t[1]};
    }
    bool doorbell_on(std::uint64_t c) const { return std::memcmp(doorbell, bbs + (c & 15) * 64, 8) == 0; }
};

}  // namespace

TEST_CASE("multi-producer send ring: 4 threads, no lock, in-order publication, exactly once") {
    stress(4, 40000, 8, 2, [](unsigned, std::uint32_t, stage) {});
}

TEST_CASE("multi-producer send ring: producers stalled at every stage (marks, claims, own claims)") {
    // Producers yield between writing a WQE and publishing it, after leaving a mark and
    // before claiming one: the others run past them and leave marks, claimed by the
    // owner or by their own producers.
    stress(4, 20000, 6, 1, [](unsigned t, std::uint32_t i, stage s) {
        if (s != stage::before_token || (i + t) % 3 == 0) std::this_thread::yield();
    });
}

TEST_CASE("multi-producer send ring: a stalled producer publishes the WQEs marked behind it") {
    small_ring r;
    bool inner = true;
    // Slot 0 written, not yet published: three later posts leave marks and return.
    CHECK(send_tag(r.sq, 0, 0, [&](stage s) {
        if (s != stage::before_token) return;
        for (std::uint32_t i = 1; i <= 3; ++i) inner = inner && send_tag(r.sq, 1, i);
        CHECK(r.sq.published() == 0);
        CHECK(record(r.dbrec) == 0);
    }));
    CHECK(inner);
    CHECK(r.sq.published() == 4);
    CHECK(record(r.dbrec) == 4);
    CHECK(r.doorbell_on(3));
    CHECK(r.tag_at(0) == tag{0, 0});
    for (std::uint32_t i = 1; i <= 3; ++i) CHECK(r.tag_at(i) == tag{1, i});

    // A stall in the middle, nested: 4 waits for 5, which waits for 6; 7 follows.
    CHECK(send_tag(r.sq, 2, 4, [&](stage s) {
        if (s != stage::before_token) return;
        CHECK(send_tag(r.sq, 2, 5, [&](stage s5) {
            if (s5 == stage::before_token) CHECK(send_tag(r.sq, 2, 6));
        }));
        CHECK(r.sq.published() == 4);
    }));
    CHECK(r.sq.published() == 7);
    CHECK(send_tag(r.sq, 2, 7));
    CHECK(r.sq.published() == 8);
    CHECK(record(r.dbrec) == 8);
    CHECK(r.doorbell_on(7));
    for (std::uint32_t i = 4; i < 8; ++i) CHECK(r.tag_at(i) == tag{2, i});
    CHECK(r.sq.retire(7) == ((std::uint64_t{2} << 32) | 7));
}

TEST_CASE("multi-producer send ring: a producer that finds the token after marking claims its own mark") {
    small_ring r;
    std::atomic<bool> a_waits{false}, b_marked{false}, a_at_claim{false}, b_done{false};
    // A writes slot 0 and waits for B to mark slot 1; A then publishes slot 0, finds B's
    // mark and stops before claiming it; B re-reads published_ (at its slot), claims its
    // own mark and publishes slot 1; A's claim fails and A returns.
    std::thread a([&] {
        CHECK(send_tag(r.sq, 0, 0, [&](stage s) {
            if (s == stage::before_token) {
                a_waits.store(true, std::memory_order_release);
                wait_for(b_marked);
            } else if (s == stage::before_claim) {
                a_at_claim.store(true, std::memory_order_release);
                wait_for(b_done);
            }
        }));
    });
    wait_for(a_waits);
    std::thread b([&] {
        CHECK(send_tag(r.sq, 1, 1, [&](stage s) {
            if (s == stage::after_mark) {
                b_marked.store(true, std::memory_order_release);
                wait_for(a_at_claim);
            }
        }));
        b_done.store(true, std::memory_order_release);
    });
    b.join();
    CHECK(r.sq.published() == 2);
    CHECK(record(r.dbrec) == 2);
    CHECK(r.doorbell_on(1));
    a.join();
    CHECK(r.sq.published() == 2);
    CHECK(record(r.dbrec) == 2);
    CHECK(r.doorbell_on(1));
    CHECK(send_tag(r.sq, 2, 2));  // the token is at slot 2, free for its producer
    CHECK(r.sq.published() == 3);
    CHECK(r.tag_at(0) == tag{0, 0});
    CHECK(r.tag_at(1) == tag{1, 1});
    CHECK(r.tag_at(2) == tag{2, 2});
}

TEST_CASE("multi-producer send ring: a producer that marks while the owner is past it leaves the WQE to the owner") {
    small_ring r;
    std::atomic<bool> a_waits{false}, b_marked{false}, a_done{false};
    std::thread a([&] {
        CHECK(send_tag(r.sq, 0, 0, [&](stage s) {
            if (s == stage::before_token) {
                a_waits.store(true, std::memory_order_release);
                wait_for(b_marked);
            }
        }));
        a_done.store(true, std::memory_order_release);
    });
    wait_for(a_waits);
    // B marks slot 1 and stalls before re-reading published_: A publishes both.
    CHECK(send_tag(r.sq, 1, 1, [&](stage s) {
        if (s == stage::after_mark) {
            b_marked.store(true, std::memory_order_release);
            wait_for(a_done);
            CHECK(r.sq.published() == 2);
        }
    }));
    a.join();
    CHECK(r.sq.published() == 2);
    CHECK(record(r.dbrec) == 2);
    CHECK(r.doorbell_on(1));
}

TEST_CASE("multi-producer send ring: full while a producer is stalled, then published and reused") {
    small_ring r;
    unsigned marked = 0;
    bool refused = false;
    CHECK(send_tag(r.sq, 0, 0, [&](stage s) {
        if (s != stage::before_token) return;
        for (std::uint32_t i = 1; i < 16; ++i) marked += send_tag(r.sq, 1, i);
        refused = !send_tag(r.sq, 1, 16);  // every BB reserved, none retired
    }));
    CHECK(marked == 15);
    CHECK(refused);
    CHECK(r.sq.published() == 16);
    CHECK(record(r.dbrec) == 16);
    CHECK(r.doorbell_on(15));
    CHECK_FALSE(send_tag(r.sq, 1, 16));
    CHECK(r.sq.retire(9) == ((std::uint64_t{1} << 32) | 9));  // frees BBs 0..9
    for (std::uint32_t i = 16; i < 26; ++i) CHECK(send_tag(r.sq, 1, i));
    CHECK_FALSE(send_tag(r.sq, 1, 26));
    CHECK(r.sq.published() == 26);
    CHECK(record(r.dbrec) == 26);
    CHECK(r.doorbell_on(25));
    for (std::uint32_t i = 16; i < 26; ++i) CHECK(r.tag_at(i) == tag{1, i});
}

namespace {

using test::check_same;
using test::expected;
using test::kQpn;

// A 32-BB ring of 4-BB slots: each post goes into the next slot, its WQE at the end of
// it behind a NOP; checked against `e` (its index: the slot's start plus the NOP).
struct slot_rig {
    alignas(64) std::byte bbs[32 * 64] = {};
    hw::wq_doorbell_record dbrec{};
    alignas(8) std::byte doorbell[8] = {};
    mp_send_queue sq;
    std::uint64_t start = 0;
    explicit slot_rig(bool ud = false) : sq(bbs, 5, kQpn, ud, 4, &dbrec, doorbell) {}

    void post_and_check(const send_request& r, std::uint8_t opcode, std::uint8_t fm_ce_se, std::uint32_t imm,
                        expected e) {
        const unsigned nbb = static_cast<unsigned>((sq.wqe_bytes(r) + 63) / 64);
        const unsigned pad = 4 - nbb;
        const std::uint64_t at = start + pad;
        e.off = (e.off + 15) / 16 * 16;
        e.ctrl(static_cast<std::uint16_t>(at), opcode, fm_ce_se, imm);
        REQUIRE(e.off == sq.wqe_bytes(r));
        REQUIRE(sq.post(r));
        const std::byte* w = bbs + (at & 31) * 64;
        check_same(w, e);
        if (pad != 0) {  // an unsignaled NOP of the pad's octowords at the slot's start
            alignas(16) std::array<std::byte, 16> nop{};
            mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg*>(nop.data()), static_cast<std::uint16_t>(start),
                                MLX5_OPCODE_NOP, 0, kQpn, 0, static_cast<std::uint8_t>(pad * 4), 0, 0);
            CHECK(std::memcmp(bbs + (start & 31) * 64, nop.data(), 16) == 0);
        }
        start += 4;
        CHECK(sq.published() == start);
        CHECK(record(dbrec) == static_cast<std::uint16_t>(start));
        CHECK(std::memcmp(doorbell, w, 8) == 0);
        CHECK(sq.retire(static_cast<std::uint16_t>(at)) == r.wr_id);
    }
};

}  // namespace

TEST_CASE("multi-producer send WQEs are byte-exact with mlx5dv.h's, behind the NOP that pads the slot") {
    const sge sg[3] = {{0x1000'2000'3000ull, 100, 0x1111}, {0x7fff'0000'1000ull, 4096, 0x2222}, {0x42, 1, 0x3333}};
    slot_rig r;
    {  // SEND, 3 SGEs, signaled
        expected e;
        for (const auto& s : sg) mlx5dv_set_data_seg(e.next<mlx5_wqe_data_seg>(), s.length, s.lkey, s.addr);
        r.post_and_check({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = sg, .num_sge = 3, .wr_id = 7},
                         MLX5_OPCODE_SEND, MLX5_WQE_CTRL_CQ_UPDATE, 0, e);
    }
    {  // SEND_IMM, solicited, fenced, unsignaled
        expected e;
        mlx5dv_set_data_seg(e.next<mlx5_wqe_data_seg>(), sg[0].length, sg[0].lkey, sg[0].addr);
        r.post_and_check({.opcode = hw::wqe_opcode::SEND_IMM, .solicited = true, .fence = true,
                          .imm = htobe32(0xabcdef01), .sg = sg, .num_sge = 1, .wr_id = 8},
                         MLX5_OPCODE_SEND_IMM, MLX5_WQE_CTRL_SOLICITED | MLX5_WQE_CTRL_FENCE, htobe32(0xabcdef01), e);
    }
    for (auto [ours, theirs] : {std::pair{hw::wqe_opcode::RDMA_WRITE, MLX5_OPCODE_RDMA_WRITE},
                                std::pair{hw::wqe_opcode::RDMA_WRITE_IMM, MLX5_OPCODE_RDMA_WRITE_IMM},
                                std::pair{hw::wqe_opcode::RDMA_READ, MLX5_OPCODE_RDMA_READ}}) {
        expected e;
        e.raddr(0xdead'beef'0000ull, 0x77665544);
        for (int i = 0; i < 2; ++i) mlx5dv_set_data_seg(e.next<mlx5_wqe_data_seg>(), sg[i].length, sg[i].lkey, sg[i].addr);
        r.post_and_check({.opcode = ours, .signaled = true, .imm = 0x5a5a5a5a, .sg = sg, .num_sge = 2,
                          .remote_addr = 0xdead'beef'0000ull, .rkey = 0x77665544, .wr_id = 9},
                         static_cast<std::uint8_t>(theirs), MLX5_WQE_CTRL_CQ_UPDATE, 0x5a5a5a5a, e);
    }
    const sge result{0x9000, 8, 0x4444};
    {  // ATOMIC_CS: swap, then compare
        expected e;
        e.raddr(0x10000, 9);
        e.atomic(6, 5);
        mlx5dv_set_data_seg(e.next<mlx5_wqe_data_seg>(), 8, 0x4444, 0x9000);
        r.post_and_check({.opcode = hw::wqe_opcode::ATOMIC_CS, .signaled = true, .sg = &result, .num_sge = 1,
                          .remote_addr = 0x10000, .rkey = 9, .compare_add = 5, .swap = 6, .wr_id = 10},
                         MLX5_OPCODE_ATOMIC_CS, MLX5_WQE_CTRL_CQ_UPDATE, 0, e);
    }
    {  // ATOMIC_FA: the addend, compare 0
        expected e;
        e.raddr(0x10008, 9);
        e.atomic(1000, 0);
        mlx5dv_set_data_seg(e.next<mlx5_wqe_data_seg>(), 8, 0x4444, 0x9000);
        r.post_and_check({.opcode = hw::wqe_opcode::ATOMIC_FA, .signaled = true, .sg = &result, .num_sge = 1,
                          .remote_addr = 0x10008, .rkey = 9, .compare_add = 1000, .wr_id = 11},
                         MLX5_OPCODE_ATOMIC_FA, MLX5_WQE_CTRL_CQ_UPDATE, 0, e);
    }
    {  // SEND of 64 inline bytes from two SGEs: two BBs
        std::array<std::uint8_t, 64> data;
        for (int i = 0; i < 64; ++i) data[i] = static_cast<std::uint8_t>(i * 3);
        const sge two[2] = {{reinterpret_cast<std::uintptr_t>(data.data()), 40, 0},
                            {reinterpret_cast<std::uintptr_t>(data.data() + 40), 24, 0}};
        expected e;
        e.next<mlx5_wqe_inl_data_seg>()->byte_count = htobe32(64 | MLX5_INLINE_SEG);
        std::memcpy(e.bytes.data() + e.off, data.data(), 64);
        e.off += 64;
        r.post_and_check({.opcode = hw::wqe_opcode::SEND, .signaled = true, .inline_data = true, .sg = two,
                          .num_sge = 2, .wr_id = 12},
                         MLX5_OPCODE_SEND, MLX5_WQE_CTRL_CQ_UPDATE, 0, e);
    }
    {  // SEND of no bytes inline: the control segment alone
        const sge none{0x42, 0, 0};
        r.post_and_check({.opcode = hw::wqe_opcode::SEND, .inline_data = true, .sg = &none, .num_sge = 1, .wr_id = 13},
                         MLX5_OPCODE_SEND, 0, 0, expected{});
    }
    {  // 15 SGEs: the whole slot, no NOP; the ring wraps here (slot 8 of 8 is BB 28..31, then BB 0)
        std::array<sge, 15> many;
        expected e;
        for (unsigned i = 0; i < 15; ++i) {
            many[i] = {0x1000u + i * 64u, 64, 0x100 + i};
            mlx5dv_set_data_seg(e.next<mlx5_wqe_data_seg>(), 64, 0x100 + i, 0x1000u + i * 64u);
        }
        r.post_and_check({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = many.data(), .num_sge = 15,
                          .wr_id = 14},
                         MLX5_OPCODE_SEND, MLX5_WQE_CTRL_CQ_UPDATE, 0, e);
        r.post_and_check({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = sg, .num_sge = 3, .wr_id = 15},
                         MLX5_OPCODE_SEND, MLX5_WQE_CTRL_CQ_UPDATE, 0, [&] {
                             expected f;
                             for (const auto& s : sg) {
                                 mlx5dv_set_data_seg(f.next<mlx5_wqe_data_seg>(), s.length, s.lkey, s.addr);
                             }
                             return f;
                         }());
    }
    CHECK(r.start == 4 * 11);
}

TEST_CASE("multi-producer UD SEND WQE with its address vector, byte-exact with mlx5dv.h's") {
    hw::wqe_av av{};
    std::uint8_t rmac[6] = {}, rgid[16] = {1, 2, 3};
    hw::set_datagram_seg(*reinterpret_cast<hw::wqe_datagram_seg*>(&av), 0x11111111, 0x345, true, 0x12, 0, 0x1f, rmac, 0,
                         64, 0, rgid);
    const sge sg{0x1000'2000'3000ull, 100, 0x1111};
    slot_rig r(true);
    expected e;
    mlx5dv_set_dgram_seg(e.next<mlx5_wqe_datagram_seg>(), 0x11111111ull << 32, 0x345, 1, 0x12, 0, 0x1f, rmac, 0, 64, 0,
                         rgid);
    mlx5dv_set_data_seg(e.next<mlx5_wqe_data_seg>(), sg.length, sg.lkey, sg.addr);
    r.post_and_check({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = &sg, .num_sge = 1, .av = &av, .wr_id = 3},
                     MLX5_OPCODE_SEND, MLX5_WQE_CTRL_CQ_UPDATE, 0, e);
}
