// Raw packet QPs (IBV_QPT_RAW_PACKET) through the verbs C API, between the two Ethernet
// functions of cxv-sim (MACs 02:c5:00:00:00:01 and :02): ibv_create_flow steering, sends
// with the Ethernet segment (gather lists, inline, IBV_SEND_IP_CSUM), receives found by
// user index with IBV_WC_IP_CSUM_OK, bad_wr, the state machine and what is refused.
#include <doctest/doctest.h>

#include <arpa/inet.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <chrono>
#include <ctime>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/cxv_verbs.h"

namespace {

constexpr const char* kBdf[2] = {"0000:c5:00.0", "0000:c5:00.1"};
constexpr std::uint8_t kMac[2][6] = {{0x02, 0xc5, 0, 0, 0, 0x01}, {0x02, 0xc5, 0, 0, 0, 0x02}};
constexpr std::uint8_t kIp[2][4] = {{169, 254, 7, 1}, {169, 254, 7, 2}};
constexpr std::size_t kBuf = 1 << 16;
constexpr unsigned kRecvs = 32;

// One function's verbs objects: a raw packet QP whose receives land in `buf`'s second
// half, its sends coming from the first half.
struct node {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_cq* scq = nullptr;
    ibv_cq* rcq = nullptr;
    ibv_cq_ex* rcq_ex = nullptr;  // when made by cxv_create_cq_ex
    ibv_qp* qp = nullptr;
    ibv_mr* mr = nullptr;
    std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(kBuf);
    std::uint32_t max_inline = 0;  // as granted

    // `ex_wc_flags`: the receive CQ is made by cxv_create_cq_ex with these.
    explicit node(const char* bdf, bool one_cq = false, std::uint32_t inline_asked = 0, std::uint64_t ex_wc_flags = 0) {
        ctx = cxv_open_device(bdf);
        REQUIRE_MESSAGE(ctx != nullptr, cxv_last_error());
        pd = cxv_alloc_pd(ctx);
        REQUIRE(pd != nullptr);
        scq = cxv_create_cq(ctx, 64, nullptr);
        if (ex_wc_flags != 0) {
            ibv_cq_init_attr_ex ca{};
            ca.cqe = 64;
            ca.wc_flags = ex_wc_flags;
            ibv_cq_ex* x = cxv_create_cq_ex(ctx, &ca);
            REQUIRE_MESSAGE(x != nullptr, cxv_last_error());
            rcq = ibv_cq_ex_to_cq(x);
            rcq_ex = x;
        } else {
            rcq = one_cq ? scq : cxv_create_cq(ctx, 64, nullptr);
        }
        REQUIRE((scq != nullptr && rcq != nullptr));
        mr = cxv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
        REQUIRE(mr != nullptr);
        ibv_qp_init_attr qa{};
        qa.send_cq = scq;
        qa.recv_cq = rcq;
        qa.qp_type = IBV_QPT_RAW_PACKET;
        qa.cap.max_send_wr = 16;
        qa.cap.max_recv_wr = kRecvs;
        qa.cap.max_send_sge = 2;
        qa.cap.max_recv_sge = 1;
        qa.cap.max_inline_data = inline_asked;
        qp = cxv_create_qp(pd, &qa);
        REQUIRE_MESSAGE(qp != nullptr, cxv_last_error());
        CHECK(qa.cap.max_send_wr >= 16);
        CHECK(qa.cap.max_send_sge >= 2);
        CHECK(qa.cap.max_inline_data >= inline_asked);
        this->max_inline = qa.cap.max_inline_data;
    }
    ~node() {
        if (qp) CHECK(cxv_destroy_qp(qp) == 0);
        CHECK(cxv_dereg_mr(mr) == 0);
        CHECK(cxv_destroy_cq(scq) == 0);
        if (rcq != scq) CHECK(cxv_destroy_cq(rcq) == 0);
        CHECK(cxv_dealloc_pd(pd) == 0);
        CHECK(cxv_close_device(ctx) == 0);
    }
    // RST→INIT (the port), INIT→RTR, RTR→RTS.
    void up() {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        REQUIRE(cxv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT) == 0);
        a.qp_state = IBV_QPS_RTR;
        REQUIRE(cxv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
        a.qp_state = IBV_QPS_RTS;
        REQUIRE(cxv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
    }
    std::uint8_t* rx(unsigned i) { return buf.data() + kBuf / 2 + i * 2048; }
    void post_recvs() {
        for (unsigned i = 0; i < kRecvs; ++i) {
            ibv_sge s{reinterpret_cast<std::uint64_t>(rx(i)), 2048, mr->lkey};
            ibv_recv_wr w{};
            w.wr_id = i;
            w.sg_list = &s;
            w.num_sge = 1;
            ibv_recv_wr* bad = nullptr;
            REQUIRE(ibv_post_recv(qp, &w, &bad) == 0);
        }
    }
};

// An IPv4/UDP frame from function `from` to `to`, port `dport`, `payload` bytes of
// `fill`, both checksums left 0 (the device fills them with IBV_SEND_IP_CSUM).
std::vector<std::uint8_t> udp_frame(int from, int to, std::uint16_t dport, std::size_t payload, std::uint8_t fill) {
    std::vector<std::uint8_t> f(14 + 20 + 8 + payload, 0);
    std::memcpy(&f[0], kMac[to], 6);
    std::memcpy(&f[6], kMac[from], 6);
    f[12] = 0x08;
    f[13] = 0x00;
    std::uint8_t* ip = &f[14];
    ip[0] = 0x45;
    const auto total = static_cast<std::uint16_t>(20 + 8 + payload);
    ip[2] = static_cast<std::uint8_t>(total >> 8);
    ip[3] = static_cast<std::uint8_t>(total);
    ip[8] = 64;
    ip[9] = 17;
    std::memcpy(ip + 12, kIp[from], 4);
    std::memcpy(ip + 16, kIp[to], 4);
    std::uint8_t* udp = ip + 20;
    udp[0] = 0x30;
    udp[1] = 0x39;  // source port 12345
    udp[2] = static_cast<std::uint8_t>(dport >> 8);
    udp[3] = static_cast<std::uint8_t>(dport);
    const auto ulen = static_cast<std::uint16_t>(8 + payload);
    udp[4] = static_cast<std::uint8_t>(ulen >> 8);
    udp[5] = static_cast<std::uint8_t>(ulen);
    std::memset(udp + 8, fill, payload);
    return f;
}

std::uint32_t sum16(const std::uint8_t* p, std::size_t n, std::uint32_t s = 0) {
    for (std::size_t i = 0; i + 1 < n; i += 2) s += static_cast<std::uint32_t>(p[i] << 8 | p[i + 1]);
    if (n & 1) s += static_cast<std::uint32_t>(p[n - 1] << 8);
    return s;
}
std::uint16_t fold(std::uint32_t s) {
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return static_cast<std::uint16_t>(s);
}
// Whether the IPv4 header and UDP checksums of a received frame verify (RFC 791, 768).
bool checksums_good(const std::uint8_t* f, std::size_t len) {
    const std::uint8_t* ip = f + 14;
    if (fold(sum16(ip, 20)) != 0xffff) return false;
    const std::size_t ulen = len - 34;
    std::uint32_t s = sum16(ip + 12, 8);  // the pseudo-header: addresses, protocol, length
    s += 17 + static_cast<std::uint32_t>(ulen);
    const std::uint16_t udp_sum = static_cast<std::uint16_t>(f[40] << 8 | f[41]);
    return udp_sum != 0 && fold(sum16(ip + 20, ulen, s)) == 0xffff;
}

// Polls `cq` until `want` completions or 5 s.
std::vector<ibv_wc> poll_for(ibv_cq* cq, std::size_t want, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    std::vector<ibv_wc> out;
    const auto end = std::chrono::steady_clock::now() + limit;
    while (out.size() < want && std::chrono::steady_clock::now() < end) {
        ibv_wc wc[8];
        const int n = ibv_poll_cq(cq, 8, wc);
        if (n < 0) FAIL("ibv_poll_cq: ", n);
        out.insert(out.end(), wc, wc + n);
    }
    return out;
}

// A flow: destination MAC, IPv4 destination, UDP destination port, optionally a tag.
struct udp_flow {
    ibv_flow_attr attr;
    ibv_flow_spec_eth eth;
    ibv_flow_spec_ipv4 ip;
    ibv_flow_spec_tcp_udp udp;
    ibv_flow_spec_action_tag tag;
};
// The specs back to back, as ibv_create_flow(3) reads them (each struct's size a multiple
// of its alignment).
static_assert(offsetof(udp_flow, eth) == sizeof(ibv_flow_attr) &&
              offsetof(udp_flow, ip) == offsetof(udp_flow, eth) + sizeof(ibv_flow_spec_eth) &&
              offsetof(udp_flow, udp) == offsetof(udp_flow, ip) + sizeof(ibv_flow_spec_ipv4) &&
              offsetof(udp_flow, tag) == offsetof(udp_flow, udp) + sizeof(ibv_flow_spec_tcp_udp) &&
              sizeof(udp_flow) == offsetof(udp_flow, tag) + sizeof(ibv_flow_spec_action_tag));

udp_flow make_flow(int to, std::uint16_t dport, std::uint32_t tag = 0, bool with_tag = false) {
    udp_flow f{};
    f.attr.type = IBV_FLOW_ATTR_NORMAL;
    f.attr.size = with_tag ? sizeof(f) : sizeof(f) - sizeof(f.tag);
    f.attr.num_of_specs = with_tag ? 4 : 3;
    f.attr.port = 1;
    f.eth.type = IBV_FLOW_SPEC_ETH;
    f.eth.size = sizeof(f.eth);
    std::memcpy(f.eth.val.dst_mac, kMac[to], 6);
    std::memset(f.eth.mask.dst_mac, 0xff, 6);
    f.ip.type = IBV_FLOW_SPEC_IPV4;
    f.ip.size = sizeof(f.ip);
    std::memcpy(&f.ip.val.dst_ip, kIp[to], 4);
    f.ip.mask.dst_ip = 0xffffffff;
    f.udp.type = IBV_FLOW_SPEC_UDP;
    f.udp.size = sizeof(f.udp);
    f.udp.val.dst_port = htons(dport);
    f.udp.mask.dst_port = 0xffff;
    f.tag.type = IBV_FLOW_SPEC_ACTION_TAG;
    f.tag.size = sizeof(f.tag);
    f.tag.tag_id = tag;
    return f;
}

// A flow of one IPV4_EXT spec, matching nothing yet (the caller sets values and masks).
// A flow of one IP spec on port 1, its values and masks to fill.
template <typename Spec>
struct ip_flow {
    ibv_flow_attr attr;
    Spec ip;
};
template <typename Spec>
ip_flow<Spec> ip_flow_of(ibv_flow_spec_type type) {
    ip_flow<Spec> f{};
    f.attr.type = IBV_FLOW_ATTR_NORMAL;
    f.attr.size = sizeof(f);
    f.attr.num_of_specs = 1;
    f.attr.port = 1;
    f.ip.type = type;
    f.ip.size = sizeof(f.ip);
    return f;
}
ip_flow<ibv_flow_spec_ipv4_ext> ipv4_ext_flow() { return ip_flow_of<ibv_flow_spec_ipv4_ext>(IBV_FLOW_SPEC_IPV4_EXT); }

// Sends `frame` from node `n`'s buffer at `offset`, split into two SGEs after `split`
// bytes, signaled.
int send_frame(node& n, const std::vector<std::uint8_t>& frame, std::size_t offset, std::size_t split,
               unsigned flags, std::uint64_t id, ibv_send_wr** bad = nullptr) {
    std::memcpy(n.buf.data() + offset, frame.data(), frame.size());
    ibv_sge s[2] = {{reinterpret_cast<std::uint64_t>(n.buf.data() + offset), static_cast<std::uint32_t>(split),
                     n.mr->lkey},
                    {reinterpret_cast<std::uint64_t>(n.buf.data() + offset + split),
                     static_cast<std::uint32_t>(frame.size() - split), n.mr->lkey}};
    ibv_send_wr w{};
    w.wr_id = id;
    w.sg_list = s;
    w.num_sge = split < frame.size() ? 2 : 1;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED | flags;
    ibv_send_wr* b = nullptr;
    return ibv_post_send(n.qp, &w, bad != nullptr ? bad : &b);
}

}  // namespace

TEST_CASE("raw packet QP: a UDP flow steers frames to the QP; checksums filled by IBV_SEND_IP_CSUM") {
    node a(kBdf[0]), b(kBdf[1]);
    b.post_recvs();
    a.up();
    b.up();
    auto fl = make_flow(1, 7000, 0x1234, true);
    ibv_flow* flow = ibv_create_flow(b.qp, &fl.attr);
    REQUIRE_MESSAGE(flow != nullptr, cxv_last_error());
    // A frame to another port first: no flow takes it (the function's table drops it).
    REQUIRE(send_frame(a, udp_frame(0, 1, 7001, 100, 0x11), 0, 20, IBV_SEND_IP_CSUM, 1) == 0);
    // Then 10 frames to the flow's port, of 100 to 1000 payload bytes, over two SGEs
    // split inside the first 18 bytes (the Ethernet segment takes those) and past them.
    for (unsigned i = 0; i < 10; ++i) {
        const auto f = udp_frame(0, 1, 7000, 100 + 100 * i, static_cast<std::uint8_t>(0x20 + i));
        REQUIRE(send_frame(a, f, 2048 * (i + 1), i % 2 == 0 ? 10 : 40, IBV_SEND_IP_CSUM, 100 + i) == 0);
    }
    const auto sent = poll_for(a.scq, 11);
    REQUIRE(sent.size() == 11);
    for (unsigned i = 0; i < 11; ++i) {
        CHECK(sent[i].status == IBV_WC_SUCCESS);
        CHECK(sent[i].opcode == IBV_WC_SEND);
        CHECK(sent[i].qp_num == a.qp->qp_num);
        CHECK(sent[i].wr_id == (i == 0 ? 1u : 100u + i - 1));
    }
    const auto got = poll_for(b.rcq, 10);
    REQUIRE(got.size() == 10);
    for (unsigned i = 0; i < 10; ++i) {
        const ibv_wc& wc = got[i];
        CHECK(wc.status == IBV_WC_SUCCESS);
        CHECK(wc.opcode == IBV_WC_RECV);
        CHECK(wc.qp_num == b.qp->qp_num);
        CHECK(wc.wr_id == i);
        CHECK((wc.wc_flags & IBV_WC_IP_CSUM_OK) != 0);
        const std::size_t len = 14 + 20 + 8 + 100 + 100 * i;
        CHECK(wc.byte_len == len);
        const std::uint8_t* f = b.rx(static_cast<unsigned>(wc.wr_id));
        CHECK(std::memcmp(f, kMac[1], 6) == 0);
        CHECK(f[36] == 0x1b);  // destination port 7000
        CHECK(f[37] == 0x58);
        CHECK(f[42] == 0x20 + i);
        CHECK(f[len - 1] == 0x20 + i);
        CHECK(checksums_good(f, len));
    }
    CHECK(poll_for(b.rcq, 1, std::chrono::milliseconds(200)).empty());
    CHECK(cxv_destroy_qp(b.qp) == EBUSY);  // the flow still steers to it
    CHECK(ibv_destroy_flow(flow) == 0);
    // Without the flow, nothing reaches the QP.
    REQUIRE(send_frame(a, udp_frame(0, 1, 7000, 64, 0x55), 0, 64, IBV_SEND_IP_CSUM, 2) == 0);
    CHECK(poll_for(a.scq, 1).size() == 1);
    CHECK(poll_for(b.rcq, 1, std::chrono::milliseconds(300)).empty());
}

TEST_CASE("raw packet QP: inline sends, one CQ for both sides, bad_wr") {
    node a(kBdf[0], true, 128), b(kBdf[1], true);
    b.post_recvs();
    a.up();
    b.up();
    auto fl = make_flow(1, 7100);
    ibv_flow* flow = ibv_create_flow(b.qp, &fl.attr);
    REQUIRE(flow != nullptr);
    // A frame of 60 bytes inline: 18 in the Ethernet segment, 42 after it. The frame's
    // memory is reused at once (the WQE holds its bytes).
    auto f = udp_frame(0, 1, 7100, 18, 0x77);
    REQUIRE(send_frame(a, f, 0, 30, IBV_SEND_INLINE, 9) == 0);
    std::memset(a.buf.data(), 0, 64);
    // A list whose second WR is 13 bytes (no Ethernet header): the first is posted, the
    // second comes back in bad_wr with EINVAL, the third is not posted.
    const auto g = udp_frame(0, 1, 7100, 30, 0x78);
    std::memcpy(a.buf.data() + 4096, g.data(), g.size());
    ibv_sge s0{reinterpret_cast<std::uint64_t>(a.buf.data() + 4096), static_cast<std::uint32_t>(g.size()), a.mr->lkey};
    ibv_sge s1{reinterpret_cast<std::uint64_t>(a.buf.data() + 4096), 13, a.mr->lkey};
    ibv_send_wr w[3]{};
    for (int i = 0; i < 3; ++i) {
        w[i].wr_id = 20 + static_cast<unsigned>(i);
        w[i].sg_list = i == 1 ? &s1 : &s0;
        w[i].num_sge = 1;
        w[i].opcode = IBV_WR_SEND;
        w[i].send_flags = IBV_SEND_SIGNALED;
        w[i].next = i < 2 ? &w[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    CHECK(ibv_post_send(a.qp, w, &bad) == EINVAL);
    CHECK(bad == &w[1]);
    // Send with immediate data has no raw packet form.
    w[2].opcode = IBV_WR_SEND_WITH_IMM;
    w[2].next = nullptr;
    CHECK(ibv_post_send(a.qp, &w[2], &bad) == EINVAL);
    CHECK(bad == &w[2]);
    // Inline data past what the QP was given (past the 18 bytes of the Ethernet segment).
    std::vector<std::uint8_t> big(18 + a.max_inline + 1, 0);
    std::memcpy(big.data(), f.data(), 14);
    ibv_sge sb{reinterpret_cast<std::uint64_t>(big.data()), static_cast<std::uint32_t>(big.size()), 0};
    ibv_send_wr wb{};
    wb.sg_list = &sb;
    wb.num_sge = 1;
    wb.opcode = IBV_WR_SEND;
    wb.send_flags = IBV_SEND_INLINE;
    CHECK(ibv_post_send(a.qp, &wb, &bad) == EINVAL);

    const auto sent = poll_for(a.scq, 2);
    REQUIRE(sent.size() == 2);
    CHECK(sent[0].wr_id == 9);
    CHECK(sent[1].wr_id == 20);
    // b's one CQ: its receives (found by user index), nothing of a's.
    const auto got = poll_for(b.rcq, 2);
    REQUIRE(got.size() == 2);
    CHECK(got[0].opcode == IBV_WC_RECV);
    CHECK(got[0].qp_num == b.qp->qp_num);
    CHECK(got[0].byte_len == f.size());
    CHECK(std::memcmp(b.rx(static_cast<unsigned>(got[0].wr_id)), f.data(), f.size()) == 0);
    CHECK(got[1].byte_len == g.size());
    CHECK(std::memcmp(b.rx(static_cast<unsigned>(got[1].wr_id)), g.data(), g.size()) == 0);
    // Without IBV_SEND_IP_CSUM the device leaves the checksums as they were (zero):
    // not reported good.
    CHECK((got[0].wc_flags & IBV_WC_IP_CSUM_OK) == 0);
    CHECK(ibv_destroy_flow(flow) == 0);
}

TEST_CASE("raw packet QP: a frame larger than its receive buffer completes with IBV_WC_LOC_LEN_ERR") {
    node a(kBdf[0]), b(kBdf[1]);
    // One receive of 64 bytes, then one of 2048.
    for (unsigned i = 0; i < 2; ++i) {
        ibv_sge s{reinterpret_cast<std::uint64_t>(b.rx(i)), i == 0 ? 64u : 2048u, b.mr->lkey};
        ibv_recv_wr w{};
        w.wr_id = 70 + i;
        w.sg_list = &s;
        w.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        REQUIRE(ibv_post_recv(b.qp, &w, &bad) == 0);
    }
    a.up();
    b.up();
    auto fl = make_flow(1, 7500);
    ibv_flow* flow = ibv_create_flow(b.qp, &fl.attr);
    REQUIRE(flow != nullptr);
    const auto big = udp_frame(0, 1, 7500, 200, 0x31), small = udp_frame(0, 1, 7500, 8, 0x32);
    REQUIRE(send_frame(a, big, 0, big.size(), IBV_SEND_IP_CSUM, 1) == 0);
    REQUIRE(send_frame(a, small, 4096, small.size(), IBV_SEND_IP_CSUM, 2) == 0);
    REQUIRE(poll_for(a.scq, 2).size() == 2);
    const auto got = poll_for(b.rcq, 2);
    REQUIRE(got.size() == 2);
    // The first WQE is used up by the frame it could not hold; the next frame takes the next.
    CHECK(got[0].status == IBV_WC_LOC_LEN_ERR);
    CHECK(got[0].wr_id == 70);
    CHECK(got[0].qp_num == b.qp->qp_num);
    CHECK(got[1].status == IBV_WC_SUCCESS);
    CHECK(got[1].wr_id == 71);
    CHECK(got[1].byte_len == 60);  // 50 bytes, padded to Ethernet's minimum on the wire
    CHECK(ibv_destroy_flow(flow) == 0);
}

TEST_CASE("raw packet QP: the state machine, and what ibv_create_flow refuses") {
    node a(kBdf[0]), b(kBdf[1]);
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    CHECK(cxv_modify_qp(a.qp, &at, IBV_QP_STATE) == EINVAL);  // RST→INIT needs the port
    at.qp_state = IBV_QPS_RTS;
    CHECK(cxv_modify_qp(a.qp, &at, IBV_QP_STATE) == EINVAL);  // no RST→RTS
    a.up();
    ibv_qp_state st{};
    REQUIRE(cxv_query_qp_state(a.qp, &st) == 0);
    CHECK(st == IBV_QPS_RTS);
    ibv_qp_attr qa{};
    ibv_qp_init_attr qi{};
    REQUIRE(cxv_query_qp(a.qp, &qa, 0, &qi) == 0);
    CHECK(qi.qp_type == IBV_QPT_RAW_PACKET);
    CHECK(qa.cap.max_recv_wr >= kRecvs);

    // A value with bits outside its mask (as Linux's mlx5 refuses it), a sniffer rule, a
    // flow on an RC QP, a spec cxv does not take.
    auto fl = make_flow(0, 7200);
    fl.ip.mask.dst_ip = htonl(0xffffff00);  // 169.254.7.1 is not 169.254.7.0/24's value
    CHECK(ibv_create_flow(a.qp, &fl.attr) == nullptr);
    CHECK(errno == EINVAL);
    CHECK(std::string(cxv_last_error()).find("the IPv4 destination has bits outside its mask") != std::string::npos);
    auto ttl = ipv4_ext_flow();
    ttl.ip.val.ttl = 64;
    ttl.ip.mask.ttl = 0xff;  // not matched, by Linux's mlx5_ib either
    CHECK(ibv_create_flow(a.qp, &ttl.attr) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    ibv_flow_attr sniff{};
    sniff.type = IBV_FLOW_ATTR_SNIFFER;
    sniff.size = sizeof(sniff);
    sniff.port = 1;
    CHECK(ibv_create_flow(a.qp, &sniff) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    fl = make_flow(0, 7200);
    fl.attr.port = 2;
    CHECK(ibv_create_flow(a.qp, &fl.attr) == nullptr);
    CHECK(errno == EINVAL);
    ibv_qp_init_attr rc{};
    rc.send_cq = a.scq;
    rc.recv_cq = a.rcq;
    rc.qp_type = IBV_QPT_RC;
    rc.cap = {4, 4, 1, 1, 0};
    ibv_qp* rcqp = cxv_create_qp(a.pd, &rc);
    REQUIRE(rcqp != nullptr);
    fl = make_flow(0, 7200);
    CHECK(ibv_create_flow(rcqp, &fl.attr) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    CHECK(cxv_destroy_qp(rcqp) == 0);

    // To ERR and back through RST: receives posted again arrive.
    at.qp_state = IBV_QPS_ERR;
    REQUIRE(cxv_modify_qp(a.qp, &at, IBV_QP_STATE) == 0);
    at.qp_state = IBV_QPS_RESET;
    REQUIRE(cxv_modify_qp(a.qp, &at, IBV_QP_STATE) == 0);
    a.post_recvs();
    a.up();
    b.up();
    fl = make_flow(0, 7200);
    ibv_flow* flow = ibv_create_flow(a.qp, &fl.attr);
    REQUIRE(flow != nullptr);
    REQUIRE(send_frame(b, udp_frame(1, 0, 7200, 80, 0x42), 0, 80, IBV_SEND_IP_CSUM, 5) == 0);
    CHECK(poll_for(b.scq, 1).size() == 1);
    const auto got = poll_for(a.rcq, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].status == IBV_WC_SUCCESS);
    CHECK(got[0].wr_id == 0);
    CHECK(got[0].byte_len == 14 + 20 + 8 + 80);
    CHECK(ibv_destroy_flow(flow) == 0);
}

TEST_CASE("raw packet QP: an IPv6 flow on the flow label (mlx5_ib's misc parameter); a label past 20 bits is EINVAL") {
    node a(kBdf[0]), b(kBdf[1]);
    b.post_recvs();
    a.up();
    b.up();
    auto fl = ip_flow_of<ibv_flow_spec_ipv6>(IBV_FLOW_SPEC_IPV6);
    fl.ip.val.flow_label = htonl(0x12345);
    fl.ip.mask.flow_label = htonl(0xfffff);
    ibv_flow* flow = ibv_create_flow(b.qp, &fl.attr);
    REQUIRE_MESSAGE(flow != nullptr, cxv_last_error());
    // IPv6/UDP frames from a to b with a label, 32 bytes of payload.
    const auto v6 = [](std::uint32_t label, std::uint8_t fill) {
        std::vector<std::uint8_t> f(14 + 40 + 8 + 32, fill);
        std::memcpy(&f[0], kMac[1], 6);
        std::memcpy(&f[6], kMac[0], 6);
        const std::uint8_t head[] = {0x86, 0xdd, 0x60, static_cast<std::uint8_t>(label >> 16),
                                     static_cast<std::uint8_t>(label >> 8), static_cast<std::uint8_t>(label), 0, 40, 17, 64};
        std::memcpy(&f[12], head, sizeof head);
        for (std::size_t i = 24; i < 54; ++i) f[i] = 0;
        f[24] = f[40] = 0xfe;
        f[25] = f[41] = 0x80;
        f[39] = 1;
        f[53] = 2;
        const std::uint8_t udp[] = {0x1b, 0x58, 0x1b, 0x58, 0, 40, 0, 0};
        std::memcpy(&f[54], udp, sizeof udp);
        return f;
    };
    REQUIRE(send_frame(a, v6(0x12346, 0x11), 0, 64, 0, 1) == 0);
    REQUIRE(send_frame(a, v6(0x12345, 0x22), 2048, 64, 0, 2) == 0);
    CHECK(poll_for(a.scq, 2).size() == 2);
    const auto got = poll_for(b.rcq, 2, std::chrono::milliseconds(300));
    REQUIRE(got.size() == 1);
    CHECK(got[0].status == IBV_WC_SUCCESS);
    CHECK(got[0].byte_len == 14 + 40 + 8 + 32);
    CHECK(b.rx(static_cast<unsigned>(got[0].wr_id))[62] == 0x22);
    CHECK(ibv_destroy_flow(flow) == 0);
    // 21 bits of label, in the value or the mask: EINVAL (ib_uverbs' check).
    fl.ip.val.flow_label = htonl(0x112345);
    CHECK(ibv_create_flow(b.qp, &fl.attr) == nullptr);
    CHECK(errno == EINVAL);
    fl.ip.val.flow_label = htonl(0x12345);
    fl.ip.mask.flow_label = htonl(0x1fffff);
    CHECK(ibv_create_flow(b.qp, &fl.attr) == nullptr);
    CHECK(errno == EINVAL);
}

TEST_CASE("raw packet QP: a flow of a lower priority number comes first, whenever it was made") {
    node a(kBdf[0]), b(kBdf[1]);
    b.post_recvs();
    a.up();
    b.up();
    auto to_qp = make_flow(1, 7700);
    to_qp.attr.priority = 3;
    ibv_flow* flow = ibv_create_flow(b.qp, &to_qp.attr);
    REQUIRE(flow != nullptr);
    // The same packets dropped at priority 1, made after it.
    struct drop_flow {
        ibv_flow_attr attr;
        ibv_flow_spec_eth eth;
        ibv_flow_spec_ipv4 ip;
        ibv_flow_spec_tcp_udp udp;
        ibv_flow_spec_action_drop drop;
    } dr{};
    static_assert(offsetof(drop_flow, drop) == offsetof(udp_flow, tag));
    const auto base = make_flow(1, 7700);
    dr.attr = base.attr;
    dr.attr.size = sizeof(dr);
    dr.attr.num_of_specs = 4;
    dr.attr.priority = 1;
    dr.eth = base.eth;
    dr.ip = base.ip;
    dr.udp = base.udp;
    dr.drop.type = IBV_FLOW_SPEC_ACTION_DROP;
    dr.drop.size = sizeof(dr.drop);
    const auto f = udp_frame(0, 1, 7700, 30, 0x7a);
    REQUIRE(send_frame(a, f, 0, f.size(), IBV_SEND_IP_CSUM, 1) == 0);
    REQUIRE(poll_for(b.rcq, 1).size() == 1);  // before the drop flow
    ibv_flow* drop = ibv_create_flow(b.qp, &dr.attr);
    REQUIRE(drop != nullptr);
    REQUIRE(send_frame(a, f, 0, f.size(), IBV_SEND_IP_CSUM, 2) == 0);
    CHECK(poll_for(b.rcq, 1, std::chrono::milliseconds(300)).empty());
    CHECK(ibv_destroy_flow(drop) == 0);
    REQUIRE(send_frame(a, f, 0, f.size(), IBV_SEND_IP_CSUM, 3) == 0);
    CHECK(poll_for(b.rcq, 1).size() == 1);
    CHECK(poll_for(a.scq, 3).size() == 3);
    // 16 priorities, as Linux's mlx5_ib has (ENOMEM past them, as there).
    auto over = make_flow(1, 7701);
    over.attr.priority = 16;
    CHECK(ibv_create_flow(b.qp, &over.attr) == nullptr);
    CHECK(errno == ENOMEM);
    CHECK(ibv_destroy_flow(flow) == 0);
}

TEST_CASE("raw packet QP: VLAN stripping (IBV_QP_CREATE_CVLAN_STRIPPING), the tag read by ibv_wc_read_cvlan") {
    constexpr std::uint64_t flags = std::uint64_t{IBV_WC_STANDARD_FLAGS} | IBV_WC_EX_WITH_CVLAN;
    node a(kBdf[0]), b(kBdf[1], false, 0, flags);
    // b's QP again, made by ibv_create_qp_ex with the create flag.
    REQUIRE(cxv_destroy_qp(b.qp) == 0);
    ibv_qp_init_attr_ex qa{};
    qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
    qa.pd = b.pd;
    qa.send_cq = b.scq;
    qa.recv_cq = b.rcq;
    qa.qp_type = IBV_QPT_RAW_PACKET;
    qa.cap.max_send_wr = 16;
    qa.cap.max_recv_wr = kRecvs;
    qa.cap.max_send_sge = 2;
    qa.cap.max_recv_sge = 1;
    qa.create_flags = IBV_QP_CREATE_CVLAN_STRIPPING;
    b.qp = cxv_create_qp_init_ex(b.ctx, &qa);
    REQUIRE_MESSAGE(b.qp != nullptr, cxv_last_error());
    b.post_recvs();
    a.up();
    b.up();
    auto fl = make_flow(1, 7900);
    ibv_flow* flow = ibv_create_flow(b.qp, &fl.attr);
    REQUIRE(flow != nullptr);
    // A frame tagged VLAN 100, priority 3, and one untagged.
    auto tagged = udp_frame(0, 1, 7900, 40, 0x5a);
    const std::uint8_t tag[] = {0x81, 0x00, 0x60, 0x64};  // TCI 3 << 13 | 100
    tagged.insert(tagged.begin() + 12, tag, tag + 4);
    const auto plain = udp_frame(0, 1, 7900, 40, 0x5b);
    REQUIRE(send_frame(a, tagged, 0, tagged.size(), IBV_SEND_IP_CSUM, 1) == 0);
    REQUIRE(send_frame(a, plain, 2048, plain.size(), IBV_SEND_IP_CSUM, 2) == 0);
    REQUIRE(poll_for(a.scq, 2).size() == 2);
    ibv_cq_ex* x = b.rcq_ex;
    std::vector<std::uint32_t> lens;
    std::vector<std::uint16_t> vlans;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (lens.size() < 2 && std::chrono::steady_clock::now() < end) {
        ibv_poll_cq_attr pa{};
        if (ibv_start_poll(x, &pa) != 0) continue;
        do {
            REQUIRE(x->status == IBV_WC_SUCCESS);
            lens.push_back(ibv_wc_read_byte_len(x));
            vlans.push_back(ibv_wc_read_cvlan(x));
        } while (lens.size() < 2 && ibv_next_poll(x) == 0);
        ibv_end_poll(x);
    }
    REQUIRE(lens.size() == 2);
    // The tag left the frame for the CQE: the frame as it was sent untagged.
    CHECK(lens[0] == tagged.size() - 4);
    CHECK(vlans[0] == (3 << 13 | 100));
    CHECK(std::memcmp(b.rx(0), plain.data(), 12) == 0);
    CHECK(b.rx(0)[12] == 0x08);  // the ethertype after the tag
    CHECK(lens[1] == plain.size());
    CHECK(vlans[1] == 0);
    CHECK(ibv_destroy_flow(flow) == 0);

    // Not for other QP types; other create flags: EOPNOTSUPP.
    qa.qp_type = IBV_QPT_UD;
    CHECK(cxv_create_qp_init_ex(b.ctx, &qa) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    qa.qp_type = IBV_QPT_RAW_PACKET;
    qa.create_flags = IBV_QP_CREATE_SCATTER_FCS;
    CHECK(cxv_create_qp_init_ex(b.ctx, &qa) == nullptr);
    CHECK(errno == EOPNOTSUPP);
}

TEST_CASE("raw packet QP: partial masks steer a subnet and a range of ports") {
    node a(kBdf[0]), b(kBdf[1]);
    b.post_recvs();
    a.up();
    b.up();
    // 169.254.7.0/24, UDP ports 7600-7615: the value within the mask.
    auto fl = make_flow(1, 7600);
    fl.ip.val.dst_ip = htonl(0xa9fe0700);
    fl.ip.mask.dst_ip = htonl(0xffffff00);
    fl.udp.mask.dst_port = htons(0xfff0);
    ibv_flow* flow = ibv_create_flow(b.qp, &fl.attr);
    REQUIRE(flow != nullptr);
    // 7616 first: were it steered, it would be the first completion.
    const std::uint16_t ports[] = {7616, 7600, 7615, 7584};
    for (unsigned i = 0; i < 4; ++i) {
        const auto f = udp_frame(0, 1, ports[i], 40 + 10 * i, static_cast<std::uint8_t>(0x70 + i));
        REQUIRE(send_frame(a, f, 2048 * i, f.size(), IBV_SEND_IP_CSUM, i) == 0);
    }
    REQUIRE(poll_for(a.scq, 4).size() == 4);
    const auto got = poll_for(b.rcq, 3, std::chrono::milliseconds(500));
    REQUIRE(got.size() == 2);
    CHECK(got[0].status == IBV_WC_SUCCESS);
    CHECK(got[0].byte_len == 14 + 20 + 8 + 50);  // port 7600
    CHECK(b.rx(static_cast<unsigned>(got[0].wr_id))[42] == 0x71);
    CHECK(got[1].byte_len == 14 + 20 + 8 + 60);  // port 7615
    CHECK(b.rx(static_cast<unsigned>(got[1].wr_id))[42] == 0x72);
    CHECK(ibv_destroy_flow(flow) == 0);

    // IPV4_EXT's TOS: its DSCP (EF, 46) under a mask that leaves ECN out.
    auto tos = ipv4_ext_flow();
    tos.ip.val.tos = 46 << 2;
    tos.ip.mask.tos = 0xfc;
    flow = ibv_create_flow(b.qp, &tos.attr);
    REQUIRE(flow != nullptr);
    const std::uint8_t toses[] = {0, 46 << 2 | 1, 10 << 2};
    for (unsigned i = 0; i < 3; ++i) {
        auto f = udp_frame(0, 1, 7800, 40, static_cast<std::uint8_t>(0x90 + i));
        f[15] = toses[i];
        REQUIRE(send_frame(a, f, 2048 * i, f.size(), IBV_SEND_IP_CSUM, 10 + i) == 0);
    }
    REQUIRE(poll_for(a.scq, 3).size() == 3);
    const auto by_tos = poll_for(b.rcq, 2, std::chrono::milliseconds(500));
    REQUIRE(by_tos.size() == 1);
    CHECK(b.rx(static_cast<unsigned>(by_tos[0].wr_id))[42] == 0x91);
    CHECK(ibv_destroy_flow(flow) == 0);
}

TEST_CASE("raw packet QP: ibv_create_cq_ex's completion timestamps, in ticks and wall-clock time, and flow tags") {
    constexpr std::uint64_t flags = std::uint64_t{IBV_WC_STANDARD_FLAGS} | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                                    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK | IBV_WC_EX_WITH_FLOW_TAG;
    node a(kBdf[0]), b(kBdf[1], false, 0, flags);
    b.post_recvs();
    a.up();
    b.up();
    auto f1 = make_flow(1, 7300, 0xabcde, true);
    auto f2 = make_flow(1, 7301, 0x42, true);
    ibv_flow* flow1 = ibv_create_flow(b.qp, &f1.attr);
    ibv_flow* flow2 = ibv_create_flow(b.qp, &f2.attr);
    REQUIRE((flow1 != nullptr && flow2 != nullptr));
    timespec t0{};
    ::clock_gettime(CLOCK_REALTIME, &t0);
    for (unsigned i = 0; i < 6; ++i) {
        REQUIRE(send_frame(a, udp_frame(0, 1, static_cast<std::uint16_t>(7300 + i % 2), 50, 0x60), 2048 * i, 50,
                           IBV_SEND_IP_CSUM, i) == 0);
    }
    REQUIRE(poll_for(a.scq, 6).size() == 6);
    ibv_cq_ex* x = b.rcq_ex;
    std::vector<std::uint64_t> ticks, wall;
    std::vector<std::uint32_t> tags;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (ticks.size() < 6 && std::chrono::steady_clock::now() < end) {
        ibv_poll_cq_attr pa{};
        if (ibv_start_poll(x, &pa) != 0) continue;
        do {
            CHECK(x->status == IBV_WC_SUCCESS);
            CHECK(ibv_wc_read_opcode(x) == IBV_WC_RECV);
            CHECK(ibv_wc_read_qp_num(x) == b.qp->qp_num);
            CHECK((ibv_wc_read_wc_flags(x) & IBV_WC_IP_CSUM_OK) != 0);
            ticks.push_back(ibv_wc_read_completion_ts(x));
            wall.push_back(ibv_wc_read_completion_wallclock_ns(x));
            tags.push_back(ibv_wc_read_flow_tag(x));
        } while (ibv_next_poll(x) == 0);
        ibv_end_poll(x);
    }
    timespec t1{};
    ::clock_gettime(CLOCK_REALTIME, &t1);
    REQUIRE(ticks.size() == 6);
    const auto ns = [](const timespec& t) { return static_cast<std::uint64_t>(t.tv_sec) * 1000000000ull + t.tv_nsec; };
    for (unsigned i = 0; i < 6; ++i) {
        CHECK(tags[i] == (i % 2 == 0 ? 0xabcdeu : 0x42u));
        if (i > 0) CHECK(ticks[i] >= ticks[i - 1]);
        // Between the first send and the last poll, within the clock's 1 ms measurement.
        CHECK(wall[i] + 1000000 >= ns(t0));
        CHECK(wall[i] <= ns(t1) + 1000000);
    }
    CHECK(ticks[5] > ticks[0]);
    CHECK(ibv_destroy_flow(flow1) == 0);
    CHECK(ibv_destroy_flow(flow2) == 0);
}

namespace {

// The Toeplitz hash (Microsoft's RSS specification) of `in` under the 40-byte `key`.
std::uint32_t toeplitz(const std::uint8_t* key, const std::uint8_t* in, std::size_t n) {
    std::uint32_t result = 0;
    std::uint32_t window = static_cast<std::uint32_t>(key[0] << 24 | key[1] << 16 | key[2] << 8 | key[3]);
    for (std::size_t i = 0; i < n; ++i) {
        for (int b = 7; b >= 0; --b) {
            if (in[i] >> b & 1) result ^= window;
            const std::size_t bit = i * 8 + static_cast<std::size_t>(7 - b) + 32;  // the key bit shifted in
            window = window << 1 | ((key[bit / 8] >> (7 - bit % 8)) & 1);
        }
    }
    return result;
}

}  // namespace

TEST_CASE("WQs, an indirection table and an RSS QP: flows to the RSS QP spread over the WQs by the Toeplitz hash") {
    node a(kBdf[0]), b(kBdf[1]);
    a.up();
    constexpr unsigned kWqs = 4;
    ibv_wq* wq[kWqs];
    for (unsigned i = 0; i < kWqs; ++i) {
        ibv_wq_init_attr wa{};
        wa.wq_type = IBV_WQT_RQ;
        wa.max_wr = 64;
        wa.max_sge = 1;
        wa.pd = b.pd;
        wa.cq = b.rcq;
        wq[i] = ibv_create_wq(b.ctx, &wa);
        REQUIRE_MESSAGE(wq[i] != nullptr, cxv_last_error());
        CHECK(wa.max_wr >= 64);
        // Receives posted in RESET are there when the WQ is ready.
        for (unsigned k = 0; k < 32; ++k) {
            // 128 bytes each: slot i * 32 + k of the receive half.
            ibv_sge s{reinterpret_cast<std::uint64_t>(b.rx(0) + (i * 32 + k) * 128), 128, b.mr->lkey};
            ibv_recv_wr w{};
            w.wr_id = i * 100 + k;
            w.sg_list = &s;
            w.num_sge = 1;
            ibv_recv_wr* bad = nullptr;
            REQUIRE(ibv_post_wq_recv(wq[i], &w, &bad) == 0);
        }
        ibv_wq_attr m{};
        m.attr_mask = IBV_WQ_ATTR_STATE;
        m.wq_state = IBV_WQS_RDY;
        REQUIRE(ibv_modify_wq(wq[i], &m) == 0);
        CHECK(wq[i]->state == IBV_WQS_RDY);
    }
    {
        // The one create flag taken: VLAN stripping (the RQ's vsd, as a raw packet QP's
        // IBV_QP_CREATE_CVLAN_STRIPPING above); FCS scatter and the rest: EOPNOTSUPP.
        ibv_wq_init_attr wa{};
        wa.wq_type = IBV_WQT_RQ;
        wa.max_wr = 8;
        wa.max_sge = 1;
        wa.pd = b.pd;
        wa.cq = b.rcq;
        wa.comp_mask = IBV_WQ_INIT_ATTR_FLAGS;
        wa.create_flags = IBV_WQ_FLAGS_SCATTER_FCS;
        CHECK(ibv_create_wq(b.ctx, &wa) == nullptr);
        CHECK(errno == EOPNOTSUPP);
        wa.create_flags = IBV_WQ_FLAGS_CVLAN_STRIPPING;
        ibv_wq* stripping = ibv_create_wq(b.ctx, &wa);
        REQUIRE_MESSAGE(stripping != nullptr, cxv_last_error());
        CHECK(ibv_destroy_wq(stripping) == 0);
    }
    ibv_rwq_ind_table_init_attr ta{};
    ta.log_ind_tbl_size = 2;
    ta.ind_tbl = wq;
    ibv_rwq_ind_table* table = ibv_create_rwq_ind_table(b.ctx, &ta);
    REQUIRE_MESSAGE(table != nullptr, cxv_last_error());
    std::uint8_t key[40];
    for (unsigned i = 0; i < 40; ++i) key[i] = static_cast<std::uint8_t>(i * 37 + 11);
    ibv_qp_init_attr_ex qa{};
    qa.qp_type = IBV_QPT_RAW_PACKET;
    qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_IND_TABLE;
    qa.pd = b.pd;
    qa.rwq_ind_tbl = table;
    qa.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
    qa.rx_hash_conf.rx_hash_key_len = 40;
    qa.rx_hash_conf.rx_hash_key = key;
    qa.rx_hash_conf.rx_hash_fields_mask = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_PORT_UDP |
                                          IBV_RX_HASH_DST_PORT_UDP;
    ibv_qp* rss = cxv_create_qp_init_ex(b.ctx, &qa);
    REQUIRE_MESSAGE(rss != nullptr, cxv_last_error());
    // IPv4 and IPv6 together: EINVAL, as mlx5_ib.
    qa.rx_hash_conf.rx_hash_fields_mask |= IBV_RX_HASH_SRC_IPV6;
    CHECK(cxv_create_qp_init_ex(b.ctx, &qa) == nullptr);
    CHECK(errno == EINVAL);
    ibv_qp_attr mq{};
    mq.qp_state = IBV_QPS_INIT;
    mq.port_num = 1;
    CHECK(cxv_modify_qp(rss, &mq, IBV_QP_STATE | IBV_QP_PORT) == ENOSYS);
    auto fl = make_flow(1, 7400);
    ibv_flow* flow = ibv_create_flow(rss, &fl.attr);
    REQUIRE_MESSAGE(flow != nullptr, cxv_last_error());

    // 48 frames from different source ports: each lands in the WQ of its hash.
    std::vector<unsigned> expect_wq(48);
    for (unsigned i = 0; i < 48; ++i) {
        auto f = udp_frame(0, 1, 7400, 20, static_cast<std::uint8_t>(i));
        const std::uint16_t sport = static_cast<std::uint16_t>(20000 + 7 * i);
        f[34] = static_cast<std::uint8_t>(sport >> 8);
        f[35] = static_cast<std::uint8_t>(sport);
        std::uint8_t in[12];
        std::memcpy(in, kIp[0], 4);
        std::memcpy(in + 4, kIp[1], 4);
        std::memcpy(in + 8, &f[34], 4);  // source and destination ports
        expect_wq[i] = toeplitz(key, in, 12) % kWqs;
        REQUIRE(send_frame(a, f, 2048 * (i % 16), f.size(), IBV_SEND_IP_CSUM, i) == 0);
        if (i % 8 == 7) REQUIRE(poll_for(a.scq, 8).size() == 8);
    }
    const auto got = poll_for(b.rcq, 48);
    REQUIRE(got.size() == 48);
    std::array<unsigned, kWqs> per{};
    for (const ibv_wc& wc : got) {
        CHECK(wc.status == IBV_WC_SUCCESS);
        unsigned w = kWqs;
        for (unsigned i = 0; i < kWqs; ++i) {
            if (wc.qp_num == wq[i]->wq_num) w = i;
        }
        REQUIRE(w < kWqs);
        CHECK(wc.wr_id / 100 == w);
        ++per[w];
        // The frame's payload byte says which it was: its WQ is its hash's.
        const std::uint8_t* data = b.rx(0) + (w * 32 + wc.wr_id % 100) * 128;
        REQUIRE(wc.byte_len == 14 + 20 + 8 + 20);
        CHECK(expect_wq[data[42]] == w);
    }
    unsigned used = 0;
    for (unsigned i = 0; i < kWqs; ++i) {
        unsigned want = 0;
        for (unsigned k = 0; k < 48; ++k) want += expect_wq[k] == i ? 1 : 0;
        CHECK(per[i] == want);
        used += per[i] != 0 ? 1 : 0;
    }
    CHECK(used >= 2);

    // What holds what: the table while the RSS QP hashes over it, the WQs while listed.
    CHECK(ibv_destroy_rwq_ind_table(table) == EBUSY);
    CHECK(ibv_destroy_wq(wq[0]) == EBUSY);
    CHECK(ibv_destroy_flow(flow) == 0);
    CHECK(cxv_destroy_qp(rss) == 0);
    CHECK(ibv_destroy_rwq_ind_table(table) == 0);
    for (ibv_wq* w : wq) CHECK(ibv_destroy_wq(w) == 0);
}
