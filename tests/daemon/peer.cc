// A client of cxvd for the two-process tests (client_test.cc): started without cxv-sim,
// with CXV_DAEMON set, it opens the function through the daemon with the C++ API and runs
// an RC QP against another peer, driven by the test over a control socket (the fd number
// is argv[1]; one line per message):
//
//   peer -> test  READY <qpn> <rkey> <addr>      PD, CQ, QP and a memfd-backed MR made
//   test -> peer  PEER <qpn> <rkey> <addr>       the other side's
//   peer -> test  CONNECTED                      INIT, RTR, RTS; receives posted
//   test -> peer  GO <n>                         n SENDs each way after one RDMA WRITE
//   peer -> test  PASS <sends> <recvs> | FAIL <why>
//   test -> peer  TRAFFIC                        the same without end, until an error
//   peer -> test  RUNNING                        (after 100 completions)
//   peer -> test  ERROR <ibv_wc_status> <completions> | CARRIED <completions>
//   test -> peer  EXIT                           objects destroyed, exit 0
//
// Every received payload and the written region are checked byte for byte.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <infiniband/verbs.h>

#include "api/cxv.h"
#include "tests/daemon/peer_side.h"

namespace {

using namespace cxv::test::peer_side;

constexpr std::size_t kMsg = 256;
constexpr std::size_t kRecvSlots = 32, kSendSlots = 16;
constexpr std::size_t kRecvAt = 0, kSendAt = 8192, kTargetAt = 16384, kSourceAt = 20480, kWriteLen = 4096;
constexpr std::size_t kBuffer = 64 * 1024;
constexpr std::uint64_t kWriteTag = ~std::uint64_t{0};

std::uint8_t pattern(unsigned who, std::uint64_t i, std::size_t j) {
    return static_cast<std::uint8_t>(who * 131 + i * 7 + j);
}

struct peer {
    unsigned me = 0;
    std::unique_ptr<cxv::device> dev;
    std::shared_ptr<cxv::pd> pd;
    std::shared_ptr<cxv::cq> cq;
    std::shared_ptr<cxv::qp> qp;
    std::shared_ptr<cxv::mr> mr;
    std::byte* mem = nullptr;
    std::uint32_t peer_rkey = 0;
    std::uint64_t peer_addr = 0;

    std::uint64_t addr(std::size_t off) const { return reinterpret_cast<std::uint64_t>(mem + off); }

    void post_recv(std::uint64_t seq) {
        ibv_sge sge{addr(kRecvAt + (seq % kRecvSlots) * kMsg), kMsg, mr->lkey()};
        ibv_recv_wr wr{};
        wr.wr_id = seq;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        if (qp->post_recv(&wr, &bad) != 0) fail("post_recv");
    }
    void post_send(std::uint64_t seq) {
        std::byte* slot = mem + kSendAt + (seq % kSendSlots) * kMsg;
        for (std::size_t j = 0; j < kMsg; ++j) slot[j] = std::byte{pattern(me, seq, j)};
        ibv_sge sge{addr(kSendAt + (seq % kSendSlots) * kMsg), kMsg, mr->lkey()};
        ibv_send_wr wr{};
        wr.wr_id = seq;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        ibv_send_wr* bad = nullptr;
        if (qp->post_send(&wr, &bad) != 0) fail("post_send");
    }
    void post_write() {
        for (std::size_t j = 0; j < kWriteLen; ++j) mem[kSourceAt + j] = std::byte{pattern(me, 999, j)};
        ibv_sge sge{addr(kSourceAt), static_cast<std::uint32_t>(kWriteLen), mr->lkey()};
        ibv_send_wr wr{};
        wr.wr_id = kWriteTag;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = peer_addr + kTargetAt;
        wr.wr.rdma.rkey = peer_rkey;
        ibv_send_wr* bad = nullptr;
        if (qp->post_send(&wr, &bad) != 0) fail("post_send (RDMA WRITE)");
    }

    // `n` SENDs each way (0: no end), receives replenished and checked. Returns the
    // completions seen; sets `err` to the first failed completion's status.
    std::uint64_t exchange(std::uint64_t n, bool traffic, int& err) {
        const unsigned other = 1 - me;
        std::uint64_t posted = 0, sent = 0, received = 0, total = 0;
        bool write_done = traffic;
        bool told_running = false;
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(traffic ? 60 : 30);
        err = 0;
        while (traffic || sent < n || received < n || !write_done) {
            if (std::chrono::steady_clock::now() > end) {
                if (traffic) return total;
                fail("no progress within 30 s: sent " + std::to_string(sent) + ", received " + std::to_string(received));
            }
            if (traffic && !hear(0).empty()) return total;  // STOP
            while (posted - sent < kSendSlots && (traffic || posted < n)) post_send(posted++);
            ibv_wc wc[16];
            const int got = cq->poll(16, wc);
            for (int k = 0; k < got; ++k) {
                ++total;
                if (wc[k].status != IBV_WC_SUCCESS) {
                    err = wc[k].status;
                    return total;
                }
                if (wc[k].opcode == IBV_WC_RECV) {
                    const std::uint64_t seq = wc[k].wr_id;
                    if (seq != received) fail("receive " + std::to_string(seq) + " out of order");
                    if (wc[k].byte_len != kMsg) fail("receive of " + std::to_string(wc[k].byte_len) + " bytes");
                    const std::byte* slot = mem + kRecvAt + (seq % kRecvSlots) * kMsg;
                    for (std::size_t j = 0; j < kMsg; ++j) {
                        if (slot[j] != std::byte{pattern(other, seq, j)}) {
                            fail("payload of receive " + std::to_string(seq) + " differs at byte " + std::to_string(j));
                        }
                    }
                    ++received;
                    if (traffic || seq + kRecvSlots < n) post_recv(seq + kRecvSlots);
                } else if (wc[k].wr_id == kWriteTag) {
                    write_done = true;
                } else {
                    if (wc[k].wr_id != sent) fail("send completion out of order");
                    ++sent;
                }
            }
            if (traffic && !told_running && total >= 100) {
                say("RUNNING");
                told_running = true;
            }
        }
        // The other side's WRITE came before its SENDs: it is all here by now (RC order).
        for (std::size_t j = 0; j < kWriteLen; ++j) {
            if (mem[kTargetAt + j] != std::byte{pattern(other, 999, j)}) {
                fail("the RDMA WRITE's data differs at byte " + std::to_string(j));
            }
        }
        return total;
    }
};

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s CONTROL_FD 0|1\n", argv[0]);
        return 2;
    }
    ctl = std::atoi(argv[1]);
    peer p;
    p.me = static_cast<unsigned>(std::atoi(argv[2]));
    p.dev = take(cxv::device::open(""), "cxv::device::open through cxvd");
    p.pd = take(p.dev->alloc_pd(), "alloc_pd");
    p.cq = take(cxv::cq::create(*p.dev, 256), "cq::create");
    cxv::qp::attr qa;
    qa.domain = p.pd;
    qa.send_cq = p.cq;
    qa.recv_cq = p.cq;
    p.qp = take(cxv::qp::create(*p.dev, qa), "qp::create");
    // Registered memory through the daemon: a shared mapping of a sealed memfd.
    const int fd = ::memfd_create("cxv-peer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ::ftruncate(fd, kBuffer) != 0 || ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) fail("memfd");
    void* m = ::mmap(nullptr, kBuffer, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) fail("mmap");
    ::close(fd);
    p.mem = static_cast<std::byte*>(m);
    p.mr = take(cxv::mr::create(p.pd, m, kBuffer, cxv::access_local_write | cxv::access_remote_write), "mr::create");
    say("READY " + std::to_string(p.qp->qpn()) + " " + std::to_string(p.mr->rkey()) + " " +
        std::to_string(p.addr(0)));

    unsigned long qpn = 0, rkey = 0;
    unsigned long long a = 0;
    if (std::sscanf(hear().c_str(), "PEER %lu %lu %llu", &qpn, &rkey, &a) != 3) fail("expected PEER");
    p.peer_rkey = static_cast<std::uint32_t>(rkey);
    p.peer_addr = a;
    cxv::qp::modify_attr ma;
    ma.access = cxv::access_local_write | cxv::access_remote_write;
    ma.dest_qpn = static_cast<std::uint32_t>(qpn);
    ma.path_mtu = 3;  // 1024
    ma.ah.dgid = take(p.dev->gid(0), "gid 0");  // both peers are on the daemon's one function
    ma.min_rnr_timer = 1;
    ma.timeout = 10;  // ~4 ms
    ma.retry_cnt = 7;
    ma.rnr_retry = 7;
    for (std::uint64_t i = 0; i < kRecvSlots; ++i) p.post_recv(i);
    for (auto to : {cxv::qp_state::init, cxv::qp_state::rtr, cxv::qp_state::rts}) {
        if (auto s = p.qp->modify(to, ma); !s) fail("modify: " + s.error().message);
    }
    say("CONNECTED");

    unsigned long n = 0;
    if (std::sscanf(hear().c_str(), "GO %lu", &n) != 1) fail("expected GO");
    p.post_write();
    int err = 0;
    p.exchange(n, false, err);
    if (err != 0) fail("completion error: ibv_wc_status " + std::to_string(err));
    say("PASS " + std::to_string(n) + " " + std::to_string(n));

    if (hear() != "TRAFFIC") fail("expected TRAFFIC");
    // Receives for the next round (the first round's last slots were not reposted).
    for (std::uint64_t i = 0; i < kRecvSlots; ++i) p.post_recv(i);
    const std::uint64_t total = p.exchange(0, true, err);
    if (err != 0) {
        say("ERROR " + std::to_string(err) + " " + std::to_string(total));
    } else {
        say("CARRIED " + std::to_string(total));
    }
    if (hear(30'000) != "EXIT") return 5;
    return 0;
}
