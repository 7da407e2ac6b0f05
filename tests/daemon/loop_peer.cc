// A client of cxvd for the load tests (load_test.cc): started without cxv-sim, with
// CXV_DAEMON set, it opens the daemon's function and connects two RC QPs of its own to
// each other, so that killing it touches no other client. Then it moves traffic between
// them until told to stop: SENDs both ways and an RDMA WRITE every 16th round, every
// payload checked. Driven over a control socket (fd argv[1]; one line per message):
//
//   peer -> test  RUNNING                  objects made, 64 payloads checked
//   test -> peer  STOP
//   peer -> test  PASS <payloads>          no error ever; objects destroyed, exit 0
//                 FAIL <why>               (at any time; exit 1)
//
// `loop_peer --rounds N` runs N rounds with no control socket (its lines on stderr) and
// exits 0 when every payload was right.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <infiniband/verbs.h>

#include "api/cxv.h"
#include "tests/daemon/peer_side.h"

namespace {

using namespace cxv::test::peer_side;

constexpr std::size_t kMsg = 512, kSlots = 16, kBuffer = 64 * 1024;
// Per QP side s (0, 1): receive slots at s * 16 KiB, send slots 8 KiB after; the WRITE
// target at 32 KiB + s * 8 KiB.
constexpr std::size_t kSide = 16 * 1024, kSendOff = 8 * 1024, kWriteAt = 32 * 1024, kWriteLen = 4096;
constexpr std::uint64_t kWriteTag = 1ull << 63;
std::uint8_t pattern(unsigned side, std::uint64_t i, std::size_t j) {
    return static_cast<std::uint8_t>(side * 101 + i * 7 + j * 3 + static_cast<unsigned>(::getpid()));
}

}  // namespace

int main(int argc, char** argv) {
    name = "loop peer";
    std::uint64_t rounds = 0;  // 0: until STOP
    if (argc == 3 && std::strcmp(argv[1], "--rounds") == 0) {
        rounds = std::strtoull(argv[2], nullptr, 10);
    } else if (argc == 2) {
        ctl = std::atoi(argv[1]);
    } else {
        std::fprintf(stderr, "usage: %s CONTROL_FD | --rounds N\n", argv[0]);
        return 2;
    }
    auto dev = take(cxv::device::open(""), "cxv::device::open through cxvd");
    auto pd = take(dev->alloc_pd(), "alloc_pd");
    auto cq = take(cxv::cq::create(*dev, 256), "cq::create");
    const int fd = ::memfd_create("cxv-loop", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ::ftruncate(fd, kBuffer) != 0 || ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) fail("memfd");
    void* m = ::mmap(nullptr, kBuffer, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) fail("mmap");
    ::close(fd);
    auto* mem = static_cast<std::byte*>(m);
    auto mr = take(cxv::mr::create(pd, mem, kBuffer, cxv::access_local_write | cxv::access_remote_write),
                   "mr::create");
    cxv::qp::attr qa;
    qa.domain = pd;
    qa.send_cq = cq;
    qa.recv_cq = cq;
    std::shared_ptr<cxv::qp> qp[2] = {take(cxv::qp::create(*dev, qa), "qp::create"),
                                      take(cxv::qp::create(*dev, qa), "qp::create")};
    cxv::qp::modify_attr ma;
    ma.access = cxv::access_local_write | cxv::access_remote_write;
    ma.path_mtu = 3;
    ma.ah.dgid = take(dev->gid(0), "gid 0");
    ma.min_rnr_timer = 1;
    ma.timeout = 10;
    ma.retry_cnt = 7;
    ma.rnr_retry = 7;
    auto addr = [&](std::size_t off) { return reinterpret_cast<std::uint64_t>(mem + off); };
    auto post_recv = [&](unsigned side, std::uint64_t seq) {
        ibv_sge sge{addr(side * kSide + (seq % kSlots) * kMsg), kMsg, mr->lkey()};
        ibv_recv_wr wr{};
        wr.wr_id = seq;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        if (qp[side]->post_recv(&wr, &bad) != 0) fail("post_recv");
    };
    for (unsigned s = 0; s < 2; ++s) {
        for (std::uint64_t i = 0; i < kSlots; ++i) post_recv(s, i);
        ma.dest_qpn = qp[1 - s]->qpn();
        for (auto to : {cxv::qp_state::init, cxv::qp_state::rtr, cxv::qp_state::rts}) {
            if (auto st = qp[s]->modify(to, ma); !st) fail("modify: " + st.error().message);
        }
    }

    // Each side sends `round` after its previous one completed and the other's arrived:
    // one SEND each way per round, an RDMA WRITE from side 0 into side 1 every 16th.
    std::uint64_t round = 0, checked = 0;
    bool told = false;
    std::string pending;
    for (;;) {
        const bool write = round % 16 == 15;
        for (unsigned s = 0; s < 2; ++s) {
            std::byte* slot = mem + s * kSide + kSendOff + (round % kSlots) * kMsg;
            for (std::size_t j = 0; j < kMsg; ++j) slot[j] = std::byte{pattern(s, round, j)};
            ibv_sge sge{addr(s * kSide + kSendOff + (round % kSlots) * kMsg), kMsg, mr->lkey()};
            ibv_send_wr wr{};
            wr.wr_id = round;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.opcode = IBV_WR_SEND;
            wr.send_flags = IBV_SEND_SIGNALED;
            ibv_send_wr* bad = nullptr;
            if (qp[s]->post_send(&wr, &bad) != 0) fail("post_send");
        }
        if (write) {
            for (std::size_t j = 0; j < kWriteLen; ++j) mem[kWriteAt + j] = std::byte{pattern(2, round, j)};
            ibv_sge sge{addr(kWriteAt), static_cast<std::uint32_t>(kWriteLen), mr->lkey()};
            ibv_send_wr wr{};
            wr.wr_id = kWriteTag | round;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.opcode = IBV_WR_RDMA_WRITE;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.wr.rdma.remote_addr = addr(kWriteAt + kWriteLen);
            wr.wr.rdma.rkey = mr->rkey();
            ibv_send_wr* bad = nullptr;
            if (qp[0]->post_send(&wr, &bad) != 0) fail("post_send (RDMA WRITE)");
        }
        unsigned want = 4 + (write ? 1 : 0), seen = 0;
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (seen < want) {
            if (std::chrono::steady_clock::now() > end) fail("no completion within 30 s, round " + std::to_string(round));
            ibv_wc wc[8];
            const int got = cq->poll(8, wc);
            // Eight of these share two cores with the model: a nap when nothing came.
            if (got == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
            for (int k = 0; k < got; ++k) {
                ++seen;
                if (wc[k].status != IBV_WC_SUCCESS) fail("completion error: ibv_wc_status " + std::to_string(wc[k].status));
                if (wc[k].opcode == IBV_WC_RDMA_WRITE) {
                    const std::byte* to = mem + kWriteAt + kWriteLen;
                    for (std::size_t j = 0; j < kWriteLen; ++j) {
                        if (to[j] != std::byte{pattern(2, round, j)}) fail("RDMA WRITE data differs at " + std::to_string(j));
                    }
                    ++checked;
                    continue;
                }
                if (wc[k].opcode != IBV_WC_RECV) continue;
                const unsigned side = wc[k].qp_num == qp[0]->qpn() ? 0 : 1;
                if (wc[k].wr_id != round || wc[k].byte_len != kMsg) fail("receive out of order or of the wrong size");
                const std::byte* slot = mem + side * kSide + (round % kSlots) * kMsg;
                for (std::size_t j = 0; j < kMsg; ++j) {
                    if (slot[j] != std::byte{pattern(1 - side, round, j)}) {
                        fail("payload of round " + std::to_string(round) + " differs at byte " + std::to_string(j));
                    }
                }
                ++checked;
                post_recv(side, round + kSlots);
            }
        }
        ++round;
        if (!told && checked >= 64) {
            say("RUNNING");
            told = true;
        }
        if (rounds != 0) {
            if (round == rounds) break;
            continue;
        }
        pollfd p{ctl, POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) {
            char buf[64];
            const ssize_t n = ::read(ctl, buf, sizeof buf);
            if (n <= 0) return 4;  // the test is gone
            pending.append(buf, static_cast<std::size_t>(n));
            if (pending.find("STOP") != std::string::npos) break;
        }
    }
    qp[0].reset();
    qp[1].reset();
    mr.reset();
    say("PASS " + std::to_string(checked));
    return 0;
}
