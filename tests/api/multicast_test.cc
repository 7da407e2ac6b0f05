// UD multicast through the verbs C API (ibv_attach_mcast(3), IBA 10.5), between the two
// functions of cxv-sim, on InfiniBand (a multicast LID, which the fabric floods) or on
// RoCE v2 (an IPv4 group, ::ffff:239.1.2.3, whose MAC 01:00:5e:01:02:03 the attach puts in
// the vport's filter). Function 0 sends to QP 0xFFFFFF at the group; function 1's QPs in
// the group each get every message, with the sender's QP number and the GRH; its QP
// outside the group gets none; a QP detached gets no more. And what ib_core refuses.
#include <doctest/doctest.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "api/cxv_verbs.h"

namespace {

using namespace std::chrono_literals;

constexpr const char* kBdf[2] = {"0000:c5:00.0", "0000:c5:00.1"};
constexpr std::uint32_t kQkey = 0x11111111;
constexpr std::uint32_t kMulticastQpn = 0xffffff;
constexpr std::uint16_t kMlid = 0xc001;
constexpr std::size_t kSlot = 256;  // a receive: the 40-byte GRH, then the message
constexpr unsigned kRecvs = 16;
constexpr std::size_t kMsg = 64;

struct ud_qp {
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
};

// One function: a PD, a registered buffer, and UD QPs in RTS with receives posted.
struct node {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_mr* mr = nullptr;
    std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(1 << 16);
    std::vector<ud_qp> qps;
    bool roce = false;

    explicit node(const char* bdf) {
        ctx = cxv_open_device(bdf);
        REQUIRE_MESSAGE(ctx != nullptr, cxv_last_error());
        ibv_port_attr pa{};
        REQUIRE(cxv_query_port(ctx, 1, &pa) == 0);
        roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
        pd = cxv_alloc_pd(ctx);
        REQUIRE(pd != nullptr);
        mr = cxv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
        REQUIRE(mr != nullptr);
    }
    ~node() {
        for (auto& q : qps) {
            if (q.qp != nullptr) CHECK(cxv_destroy_qp(q.qp) == 0);
            CHECK(cxv_destroy_cq(q.cq) == 0);
        }
        CHECK(cxv_dereg_mr(mr) == 0);
        CHECK(cxv_dealloc_pd(pd) == 0);
        CHECK(cxv_close_device(ctx) == 0);
    }
    std::uint8_t* slot(unsigned qp, unsigned i) { return buf.data() + (qp * kRecvs + i) * kSlot; }

    // A QP of `type` (UD: in RTS, with kRecvs receives posted).
    unsigned add(ibv_qp_type type = IBV_QPT_UD) {
        ud_qp q;
        q.cq = cxv_create_cq(ctx, 64, nullptr);
        REQUIRE(q.cq != nullptr);
        ibv_qp_init_attr qa{};
        qa.send_cq = q.cq;
        qa.recv_cq = q.cq;
        qa.qp_type = type;
        qa.cap.max_send_wr = 16;
        qa.cap.max_recv_wr = kRecvs;
        qa.cap.max_send_sge = 1;
        qa.cap.max_recv_sge = 1;
        q.qp = cxv_create_qp(pd, &qa);
        REQUIRE_MESSAGE(q.qp != nullptr, cxv_last_error());
        qps.push_back(q);
        const auto n = static_cast<unsigned>(qps.size() - 1);
        if (type != IBV_QPT_UD) return n;
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qkey = kQkey;
        REQUIRE(cxv_modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
        a.qp_state = IBV_QPS_RTR;
        REQUIRE(cxv_modify_qp(q.qp, &a, IBV_QP_STATE) == 0);
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = 1;
        REQUIRE(cxv_modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
        for (unsigned i = 0; i < kRecvs; ++i) {
            ibv_sge s{reinterpret_cast<std::uint64_t>(slot(n, i)), kSlot, mr->lkey};
            ibv_recv_wr w{};
            w.wr_id = i;
            w.sg_list = &s;
            w.num_sge = 1;
            ibv_recv_wr* bad = nullptr;
            REQUIRE(ibv_post_recv(q.qp, &w, &bad) == 0);
        }
        return n;
    }

    // The receive completions of QP `n` that come within `wait`.
    std::vector<ibv_wc> receives(unsigned n, unsigned want, std::chrono::milliseconds wait) {
        std::vector<ibv_wc> got;
        const auto until = std::chrono::steady_clock::now() + wait;
        while (got.size() < want && std::chrono::steady_clock::now() < until) {
            ibv_wc wc{};
            if (ibv_poll_cq(qps[n].cq, 1, &wc) == 1) {
                if (wc.opcode == IBV_WC_RECV) got.push_back(wc);
            } else {
                std::this_thread::sleep_for(100us);
            }
        }
        return got;
    }
};

// The group: ::ffff:239.1.2.3 on RoCE v2 (ib_core's MGID of an IPv4 group), else a
// link-local-scope IB group.
ibv_gid group_of(bool roce) {
    ibv_gid g{};
    if (roce) {
        g.raw[10] = g.raw[11] = 0xff;
        g.raw[12] = 239;
        g.raw[13] = 1;
        g.raw[14] = 2;
        g.raw[15] = 3;
    } else {
        g.raw[0] = 0xff;
        g.raw[1] = 0x12;
        g.raw[2] = 0x40;
        g.raw[3] = 0x1b;
        g.raw[15] = 0x42;
    }
    return g;
}

// Sends `count` messages of kMsg bytes (byte i of message k: k * 16 + i) from QP 0 of
// `from` to the group, and waits for their send completions.
void send_to_group(node& from, ibv_ah* ah, unsigned count, unsigned first) {
    ud_qp& q = from.qps[0];
    for (unsigned k = first; k < first + count; ++k) {
        std::uint8_t* m = from.buf.data() + from.buf.size() - kMsg;
        for (std::size_t i = 0; i < kMsg; ++i) m[i] = static_cast<std::uint8_t>(k * 16 + i);
        ibv_sge s{reinterpret_cast<std::uint64_t>(m), kMsg, from.mr->lkey};
        ibv_send_wr w{};
        w.wr_id = k;
        w.sg_list = &s;
        w.num_sge = 1;
        w.opcode = IBV_WR_SEND;
        w.send_flags = IBV_SEND_SIGNALED;
        w.wr.ud.ah = ah;
        w.wr.ud.remote_qpn = kMulticastQpn;
        w.wr.ud.remote_qkey = kQkey;
        ibv_send_wr* bad = nullptr;
        REQUIRE(ibv_post_send(q.qp, &w, &bad) == 0);
        ibv_wc wc{};
        const auto until = std::chrono::steady_clock::now() + 5s;
        int n = 0;
        while ((n = ibv_poll_cq(q.cq, 1, &wc)) == 0 && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(50us);
        }
        REQUIRE(n == 1);
        REQUIRE(wc.status == IBV_WC_SUCCESS);
    }
}

// Message k arrived whole in QP n's receive, after the GRH, from the sender's QP.
void check_message(node& to, unsigned n, const ibv_wc& wc, unsigned k, std::uint32_t src_qp) {
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.byte_len == 40 + kMsg);
    CHECK((wc.wc_flags & IBV_WC_GRH) != 0);
    CHECK(wc.src_qp == src_qp);
    const std::uint8_t* m = to.slot(n, static_cast<unsigned>(wc.wr_id)) + 40;
    bool same = true;
    for (std::size_t i = 0; i < kMsg; ++i) same &= m[i] == static_cast<std::uint8_t>(k * 16 + i);
    CHECK(same);
}

}  // namespace

TEST_CASE("UD multicast: every QP in the group gets every message, no other QP, none after detach") {
    node a(kBdf[0]), b(kBdf[1]);
    a.add();
    const unsigned in1 = b.add(), in2 = b.add(), out = b.add();
    const ibv_gid g = group_of(b.roce);
    const std::uint16_t lid = b.roce ? 0 : kMlid;
    REQUIRE_MESSAGE(cxv_attach_mcast(b.qps[in1].qp, &g, lid) == 0, cxv_last_error());
    REQUIRE_MESSAGE(cxv_attach_mcast(b.qps[in2].qp, &g, lid) == 0, cxv_last_error());
    CHECK(cxv_attach_mcast(b.qps[in2].qp, &g, lid) == 0);  // once more: no change

    ibv_ah_attr ah{};
    ah.is_global = 1;
    ah.grh.dgid = g;
    ah.grh.sgid_index = a.roce ? 1 : 0;  // RoCE: the IPv4-mapped GID, as the group's
    ah.grh.hop_limit = 1;
    ah.dlid = lid;
    ah.port_num = 1;
    ibv_ah* to_group = cxv_create_ah(a.pd, &ah);
    REQUIRE_MESSAGE(to_group != nullptr, cxv_last_error());

    send_to_group(a, to_group, 3, 0);
    for (const unsigned n : {in1, in2}) {
        const auto got = b.receives(n, 3, 5000ms);
        REQUIRE(got.size() == 3);
        for (unsigned k = 0; k < 3; ++k) check_message(b, n, got[k], k, a.qps[0].qp->qp_num);
    }
    CHECK(b.receives(out, 1, 200ms).empty());

    // Detached: no more for that QP; the other still gets them.
    REQUIRE(cxv_detach_mcast(b.qps[in2].qp, &g, lid) == 0);
    CHECK(cxv_detach_mcast(b.qps[in2].qp, &g, lid) == EINVAL);  // not in the group now
    send_to_group(a, to_group, 1, 3);
    const auto got = b.receives(in1, 1, 5000ms);
    REQUIRE(got.size() == 1);
    check_message(b, in1, got[0], 3, a.qps[0].qp->qp_num);
    CHECK(b.receives(in2, 1, 200ms).empty());

    // A QP in a group is not destroyed (ib_core's use count): EBUSY until it leaves.
    CHECK(cxv_destroy_qp(b.qps[in1].qp) == EBUSY);
    REQUIRE(cxv_detach_mcast(b.qps[in1].qp, &g, lid) == 0);
    CHECK(cxv_destroy_ah(to_group) == 0);
}

TEST_CASE("ibv_attach_mcast refusals: not a group, not UD, not a multicast LID") {
    node b(kBdf[1]);
    const unsigned ud = b.add();
    const unsigned rc = b.add(IBV_QPT_RC);
    const ibv_gid g = group_of(b.roce);
    const std::uint16_t lid = b.roce ? 0 : kMlid;
    ibv_gid unicast{};
    unicast.raw[0] = 0xfe;
    unicast.raw[1] = 0x80;
    unicast.raw[15] = 1;
    CHECK(cxv_attach_mcast(b.qps[ud].qp, &unicast, lid) == EINVAL);
    if (b.roce) {
        ibv_gid v4 = g;
        v4.raw[12] = 169;  // ::ffff:169.1.2.3: no IPv4 group
        CHECK(cxv_attach_mcast(b.qps[ud].qp, &v4, lid) == EINVAL);
    } else {
        CHECK(cxv_attach_mcast(b.qps[ud].qp, &g, 0x10) == EINVAL);
        CHECK(cxv_attach_mcast(b.qps[ud].qp, &g, 0xffff) == EINVAL);
    }
    CHECK(cxv_attach_mcast(b.qps[rc].qp, &g, lid) == EINVAL);
    CHECK(std::strstr(cxv_last_error(), "not a UD QP") != nullptr);
    CHECK(cxv_detach_mcast(b.qps[ud].qp, &g, lid) == EINVAL);
}
