// Two QPs on two functions (or one function twice, in loopback): a SEND/RECV and an
// RDMA WRITE with immediate data, through cxv's C++ API. On the model:
//
//   cxv-sim run --devices 2 -- bazel-bin/examples/send_recv 0000:c5:00.0 0000:c5:00.1
//
// and on a card bound to vfio-pci, with the card's PCI addresses.
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/cxv.h"

namespace {

template <typename T>
T must(cxv::result<T> r, const char* what) {
    if (!r) {
        std::fprintf(stderr, "%s: %s\n", what, r.error().message.c_str());
        std::exit(1);
    }
    return std::move(r).value();
}

void must(const cxv::status& s, const char* what) {
    if (!s) {
        std::fprintf(stderr, "%s: %s\n", what, s.error().message.c_str());
        std::exit(1);
    }
}

// Waits for one completion (polling; a real program would also sleep on the CQ's event).
ibv_wc wait_one(cxv::cq& cq) {
    ibv_wc wc{};
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (cq.poll(1, &wc) == 0) {
        if (std::chrono::steady_clock::now() > end) {
            std::fprintf(stderr, "no completion within 5 s\n");
            std::exit(1);
        }
    }
    if (wc.status != IBV_WC_SUCCESS) {
        std::fprintf(stderr, "wr %llu failed: %s (vendor 0x%x)\n", static_cast<unsigned long long>(wc.wr_id),
                     cxv::wc_status_str(wc.status), wc.vendor_err);
        std::exit(1);
    }
    return wc;
}

struct side {
    std::unique_ptr<cxv::device> dev;
    std::shared_ptr<cxv::pd> pd;
    std::vector<char> buf = std::vector<char>(1 << 16);
    std::shared_ptr<cxv::mr> mr;
    std::shared_ptr<cxv::cq> cq;
    std::shared_ptr<cxv::qp> qp;
    cxv::port_info port;
};

side open_side(const char* bdf) {
    side s;
    s.dev = must(cxv::device::open(bdf), "open");
    s.port = must(s.dev->port(1), "query_port");
    s.pd = must(s.dev->alloc_pd(), "alloc_pd");
    s.mr = must(cxv::mr::create(s.pd, s.buf.data(), s.buf.size(),
                                cxv::access_local_write | cxv::access_remote_write),
                "reg_mr");
    s.cq = must(cxv::cq::create(*s.dev, 64), "create_cq");
    cxv::qp::attr a;
    a.type = cxv::qp_type::rc;
    a.domain = s.pd;
    a.send_cq = a.recv_cq = s.cq;
    a.cap = {16, 16, 1, 1, 64};
    s.qp = must(cxv::qp::create(*s.dev, a), "create_qp");
    return s;
}

// RST -> INIT -> RTR -> RTS towards `peer`.
void connect(side& s, const side& peer) {
    cxv::qp::modify_attr m;
    m.access = cxv::access_local_write | cxv::access_remote_write;
    m.dest_qpn = peer.qp->qpn();
    m.ah.dlid = peer.port.lid;
    m.ah.grh = peer.port.ethernet;
    std::memcpy(m.ah.dgid.data(), peer.port.gid, 16);
    m.path_mtu = std::min<std::uint32_t>(peer.port.max_mtu, s.port.max_mtu);
    must(s.qp->modify(cxv::qp_state::init, m), "INIT");
    must(s.qp->modify(cxv::qp_state::rtr, m), "RTR");
    must(s.qp->modify(cxv::qp_state::rts, m), "RTS");
}

}  // namespace

int main(int argc, char** argv) {
    const char* bdf_a = argc > 1 ? argv[1] : "0000:c5:00.0";
    const char* bdf_b = argc > 2 ? argv[2] : "0000:c5:00.1";
    side a = open_side(bdf_a);
    side b = open_side(bdf_b);
    connect(a, b);
    connect(b, a);
    std::printf("QP 0x%x on %s <-> QP 0x%x on %s\n", a.qp->qpn(), bdf_a, b.qp->qpn(), bdf_b);

    // 1. SEND/RECV: b posts a receive buffer first, then a sends into it.
    ibv_sge rsge{reinterpret_cast<std::uint64_t>(b.buf.data()), 256, b.mr->lkey()};
    ibv_recv_wr rwr{};
    rwr.wr_id = 1;
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ibv_recv_wr* bad_recv = nullptr;
    if (int err = b.qp->post_recv(&rwr, &bad_recv)) return std::fprintf(stderr, "post_recv: %s\n", std::strerror(err)), 1;

    const char msg[] = "hello from cxv";
    std::memcpy(a.buf.data(), msg, sizeof(msg));
    ibv_sge ssge{reinterpret_cast<std::uint64_t>(a.buf.data()), sizeof(msg), a.mr->lkey()};
    ibv_send_wr swr{};
    swr.wr_id = 2;
    swr.opcode = IBV_WR_SEND;
    swr.sg_list = &ssge;
    swr.num_sge = 1;
    swr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad_send = nullptr;
    if (int err = a.qp->post_send(&swr, &bad_send)) return std::fprintf(stderr, "post_send: %s\n", std::strerror(err)), 1;
    const ibv_wc sent = wait_one(*a.cq);
    const ibv_wc got = wait_one(*b.cq);
    std::printf("SEND: wr %llu done; RECV wr %llu: %u bytes \"%s\"\n", static_cast<unsigned long long>(sent.wr_id),
                static_cast<unsigned long long>(got.wr_id), got.byte_len, b.buf.data());

    // 2. RDMA WRITE with immediate: the data lands at b's address, and b's receive
    //    completion carries the immediate value (it consumes a receive WQE, no data).
    rwr.wr_id = 3;
    if (int err = b.qp->post_recv(&rwr, &bad_recv)) return std::fprintf(stderr, "post_recv: %s\n", std::strerror(err)), 1;
    const char data[] = "written remotely";
    std::memcpy(a.buf.data() + 1024, data, sizeof(data));
    ssge = {reinterpret_cast<std::uint64_t>(a.buf.data() + 1024), sizeof(data), a.mr->lkey()};
    swr.wr_id = 4;
    swr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    swr.imm_data = htobe32(0x1234);
    swr.wr.rdma.remote_addr = reinterpret_cast<std::uint64_t>(b.buf.data() + 4096);
    swr.wr.rdma.rkey = b.mr->rkey();
    if (int err = a.qp->post_send(&swr, &bad_send)) return std::fprintf(stderr, "post_send: %s\n", std::strerror(err)), 1;
    wait_one(*a.cq);
    const ibv_wc imm = wait_one(*b.cq);
    std::printf("RDMA WRITE with immediate 0x%x: %u bytes at b+4096: \"%s\"\n", be32toh(imm.imm_data), imm.byte_len,
                b.buf.data() + 4096);
    const bool ok = std::strcmp(b.buf.data(), msg) == 0 && std::strcmp(b.buf.data() + 4096, data) == 0 &&
                    imm.opcode == IBV_WC_RECV_RDMA_WITH_IMM && be32toh(imm.imm_data) == 0x1234;
    std::printf("%s\n", ok ? "ok" : "MISMATCH");
    return ok ? 0 : 1;
}
