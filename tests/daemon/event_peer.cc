// A client of cxvd for events_test and faults_test: started without cxv-sim, with
// CXV_DAEMON set, it opens the function through the daemon with the C++ API (recording
// every asynchronous event) and runs an RC QP against another peer, driven by the test
// over a control socket (fd number argv[1]; one line per message):
//
//   peer -> test  READY <qpn> <rkey> <addr>     PD, CQ, QP and a memfd-backed MR made
//   test -> peer  PEER <qpn> <rkey> <addr>      the other side's; INIT, RTR, RTS, receives
//   peer -> test  CONNECTED
//   test -> peer  GO <n>                        n checked SENDs each way
//   peer -> test  PASS <n> | FAIL <why>
//   test -> peer  ARM                           cq::request_notify
//   peer -> test  ARMED
//   test -> peer  WAIT <ms>                     cq::wait_event, then the receive polled
//   peer -> test  EVENT <completions> | NOEVENT
//   test -> peer  SEND <n>                      n SENDs, their completions polled
//   peer -> test  SENT <n>
//   test -> peer  BADWRITE                      an RDMA WRITE with a wrong rkey
//   peer -> test  WC <ibv_wc_status>
//   test -> peer  EVENTS                        the asynchronous events so far
//   peer -> test  EVENTS <queue errors> <fatal> <objects of queue errors, comma-separated>
//   test -> peer  TRAFFIC                       SENDs each way without end, until the
//                                               first error completion; then every posted
//                                               WR must come back flushed, in order
//   peer -> test  RUNNING                       (after 100 completions)
//   peer -> test  DEAD <sends> <recvs> <errno> <ms> <fatal>   flushed sends and receives
//                                               (each exactly what was outstanding), the
//                                               errno of the next control call and its
//                                               time, fatal events seen
//   test -> peer  WAITDEAD <ms>                 armed, cq::wait_event until the device dies
//   peer -> test  ARMED, then WOKE <flushed receives> <receives left>
//   test -> peer  REOPEN <socket>               a new cxv::device at that daemon: READY ...
//   test -> peer  EXIT
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <infiniband/verbs.h>

#include "api/cxv.h"
#include "tests/daemon/peer_side.h"

namespace {

using namespace cxv::test::peer_side;

using namespace std::chrono_literals;

constexpr std::size_t kMsg = 256;
constexpr std::size_t kRecvSlots = 32, kSendSlots = 16;
constexpr std::size_t kRecvAt = 0, kSendAt = 8192, kTargetAt = 16384;
constexpr std::size_t kBuffer = 64 * 1024;

// Mappings of the model's BAR0 file (what a VFIO device fd maps on a card) in this
// process: the UAR pages granted by the daemon, until the process hears of its death.
int bar_mappings() {
    std::ifstream maps("/proc/self/maps");
    int n = 0;
    for (std::string l; std::getline(maps, l);) n += l.find("cxv-sim-bar0") != std::string::npos;
    return n;
}

std::uint8_t pattern(unsigned who, std::uint64_t i, std::size_t j) {
    return static_cast<std::uint8_t>(who * 131 + i * 7 + j);
}

// What the device's event thread (here: the daemon's event channel) reported.
struct event_log {
    std::mutex mu;
    std::vector<cxv::event> events;
    std::atomic<int> fatal{0};
    void add(const cxv::event& e) {
        std::lock_guard lock(mu);
        events.push_back(e);
        if (e.what == cxv::event::fatal) fatal.fetch_add(1);
    }
};

struct peer {
    unsigned me = 0;
    std::shared_ptr<event_log> log = std::make_shared<event_log>();
    std::unique_ptr<cxv::device> dev;
    std::shared_ptr<cxv::pd> pd;
    std::shared_ptr<cxv::cq> cq;
    std::shared_ptr<cxv::qp> qp;
    std::shared_ptr<cxv::mr> mr;
    std::byte* mem = nullptr;
    std::uint32_t peer_rkey = 0;
    std::uint64_t peer_addr = 0;
    // Posted and completed, by side: WRs complete in order on an RC QP, so completed is
    // the next wr_id to come back.
    std::uint64_t sends_posted = 0, sends_done = 0, recvs_posted = 0, recvs_done = 0;

    std::uint64_t addr(std::size_t off) const { return reinterpret_cast<std::uint64_t>(mem + off); }

    void setup() {
        // The old objects go first (through a dead daemon their commands fail at once).
        qp.reset();
        cq.reset();
        mr.reset();
        pd.reset();
        dev.reset();
        sends_posted = sends_done = recvs_posted = recvs_done = 0;
        cxv::device::options o;
        o.on_event = [l = log](const cxv::event& e) { l->add(e); };
        dev = take(cxv::device::open("", o), "cxv::device::open through cxvd");
        pd = take(dev->alloc_pd(), "alloc_pd");
        cq = take(cxv::cq::create(*dev, 256), "cq::create");
        cxv::qp::attr qa;
        qa.domain = pd;
        qa.send_cq = cq;
        qa.recv_cq = cq;
        qp = take(cxv::qp::create(*dev, qa), "qp::create");
        if (mem == nullptr) {
            const int fd = ::memfd_create("cxv-event-peer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
            if (fd < 0 || ::ftruncate(fd, kBuffer) != 0 || ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) fail("memfd");
            void* m = ::mmap(nullptr, kBuffer, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (m == MAP_FAILED) fail("mmap");
            ::close(fd);
            mem = static_cast<std::byte*>(m);
        }
        mr = take(cxv::mr::create(pd, mem, kBuffer, cxv::access_local_write | cxv::access_remote_write), "mr::create");
        say("READY " + std::to_string(qp->qpn()) + " " + std::to_string(mr->rkey()) + " " + std::to_string(addr(0)));
    }

    void connect() {
        unsigned long qpn = 0, rkey = 0;
        unsigned long long a = 0;
        if (std::sscanf(hear().c_str(), "PEER %lu %lu %llu", &qpn, &rkey, &a) != 3) fail("expected PEER");
        peer_rkey = static_cast<std::uint32_t>(rkey);
        peer_addr = a;
        cxv::qp::modify_attr ma;
        ma.access = cxv::access_local_write | cxv::access_remote_write;
        ma.dest_qpn = static_cast<std::uint32_t>(qpn);
        ma.path_mtu = 3;
        ma.ah.dgid = take(dev->gid(0), "gid 0");
        ma.min_rnr_timer = 1;
        ma.timeout = 10;
        ma.retry_cnt = 7;
        ma.rnr_retry = 7;
        for (std::uint64_t i = 0; i < kRecvSlots; ++i) post_recv();
        for (auto to : {cxv::qp_state::init, cxv::qp_state::rtr, cxv::qp_state::rts}) {
            if (auto s = qp->modify(to, ma); !s) fail("modify: " + s.error().message);
        }
        say("CONNECTED");
    }

    void post_recv() {
        const std::uint64_t seq = recvs_posted++;
        ibv_sge sge{addr(kRecvAt + (seq % kRecvSlots) * kMsg), kMsg, mr->lkey()};
        ibv_recv_wr wr{};
        wr.wr_id = seq;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        if (qp->post_recv(&wr, &bad) != 0) fail("post_recv");
    }
    void post_send() {
        const std::uint64_t seq = sends_posted++;
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

    // A good completion, checked: receives in order with the other side's payload (and
    // reposted), sends in order.
    void take_good(const ibv_wc& wc) {
        if (wc.opcode == IBV_WC_RECV) {
            const std::uint64_t seq = wc.wr_id;
            if (seq != recvs_done) fail("receive " + std::to_string(seq) + " out of order");
            if (wc.byte_len != kMsg) fail("receive of " + std::to_string(wc.byte_len) + " bytes");
            const std::byte* slot = mem + kRecvAt + (seq % kRecvSlots) * kMsg;
            for (std::size_t j = 0; j < kMsg; ++j) {
                if (slot[j] != std::byte{pattern(1 - me, seq, j)}) {
                    fail("payload of receive " + std::to_string(seq) + " differs at byte " + std::to_string(j));
                }
            }
            ++recvs_done;
            post_recv();
        } else {
            if (wc.wr_id != sends_done) fail("send completion out of order");
            ++sends_done;
        }
    }

    // `n` checked SENDs each way.
    void exchange(std::uint64_t n) {
        const std::uint64_t s0 = sends_done, r0 = recvs_done;
        const auto end = std::chrono::steady_clock::now() + 30s;
        while (sends_done - s0 < n || recvs_done - r0 < n) {
            if (std::chrono::steady_clock::now() > end) fail("no progress within 30 s");
            while (sends_posted - sends_done < kSendSlots && sends_posted - s0 < n) post_send();
            ibv_wc wc[16];
            const int got = cq->poll(16, wc);
            for (int k = 0; k < got; ++k) {
                if (wc[k].status != IBV_WC_SUCCESS) fail("completion error " + std::to_string(wc[k].status));
                take_good(wc[k]);
            }
        }
    }

    // Traffic until the first error completion; then every WR still posted must come
    // back flushed, in order, and nothing more.
    void traffic() {
        if (bar_mappings() == 0) fail("no BAR0 mapping while the device lives (the check after the death would be void)");
        bool told = false;
        std::uint64_t total = 0;
        const auto end = std::chrono::steady_clock::now() + 60s;
        ibv_wc wc[16];
        int got = 0, k = 0;
        for (;;) {
            if (std::chrono::steady_clock::now() > end) fail("no error completion within 60 s");
            while (sends_posted - sends_done < kSendSlots) post_send();
            got = cq->poll(16, wc);
            for (k = 0; k < got && wc[k].status == IBV_WC_SUCCESS; ++k) {
                take_good(wc[k]);
                ++total;
            }
            if (k < got) break;
            if (!told && total >= 100) {
                say("RUNNING");
                told = true;
            }
        }
        std::uint64_t flushed_sends = 0, flushed_recvs = 0;
        const auto drain_end = std::chrono::steady_clock::now() + 5s;
        for (int empty = 0; empty < 3;) {
            for (; k < got; ++k) {
                if (wc[k].status != IBV_WC_WR_FLUSH_ERR) {
                    fail("a completion with status " + std::to_string(wc[k].status) + ", not a flush");
                }
                if (wc[k].qp_num != qp->qpn()) fail("a flushed completion of another QP");
                if (wc[k].opcode == IBV_WC_RECV) {
                    if (wc[k].wr_id != recvs_done) fail("flushed receive " + std::to_string(wc[k].wr_id) + " out of order");
                    ++recvs_done;
                    ++flushed_recvs;
                } else {
                    if (wc[k].wr_id != sends_done) fail("flushed send " + std::to_string(wc[k].wr_id) + " out of order");
                    ++sends_done;
                    ++flushed_sends;
                }
            }
            if (std::chrono::steady_clock::now() > drain_end) break;
            got = cq->poll(16, wc);
            k = 0;
            empty = got == 0 ? empty + 1 : 0;
        }
        if (sends_done != sends_posted || recvs_done != recvs_posted) {
            fail("not every posted WR was flushed: sends " + std::to_string(sends_done) + "/" +
                 std::to_string(sends_posted) + ", receives " + std::to_string(recvs_done) + "/" +
                 std::to_string(recvs_posted));
        }
        // The fatal event (it set the flag the flush reads, so it is here already).
        for (int i = 0; i < 500 && log->fatal.load() == 0; ++i) std::this_thread::sleep_for(10ms);
        const auto t0 = std::chrono::steady_clock::now();
        auto r = dev->alloc_pd();
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
        if (r) fail("a control call succeeded after the fatal event");
        // The device file let go (docs/daemon.md, "The daemon dies"): on a card its last
        // close resets the function.
        if (const int n = bar_mappings(); n != 0) fail(std::to_string(n) + " BAR0 mapping(s) left after the death");
        std::fprintf(stderr, "peer %d: control call after the death: %s\n", ::getpid(), r.error().message.c_str());
        say("DEAD " + std::to_string(flushed_sends) + " " + std::to_string(flushed_recvs) + " " +
            std::to_string(r.error().code) + " " + std::to_string(ms.count()) + " " + std::to_string(log->fatal.load()));
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
    p.setup();
    p.connect();
    for (;;) {
        const std::string l = hear(120'000);
        unsigned long n = 0;
        char path[200];
        if (l.empty() || l == "EXIT") return 0;
        if (std::sscanf(l.c_str(), "GO %lu", &n) == 1) {
            p.exchange(n);
            say("PASS " + std::to_string(n));
        } else if (l == "ARM") {
            p.cq->request_notify(false);
            say("ARMED");
        } else if (std::sscanf(l.c_str(), "WAIT %lu", &n) == 1) {
            if (!p.cq->wait_event(std::chrono::milliseconds(n))) {
                say("NOEVENT");
                continue;
            }
            // The event says a completion is there: it is, at once.
            ibv_wc wc[16];
            const int got = p.cq->poll(16, wc);
            for (int k = 0; k < got; ++k) {
                if (wc[k].status != IBV_WC_SUCCESS) fail("completion error " + std::to_string(wc[k].status));
                p.take_good(wc[k]);
            }
            say("EVENT " + std::to_string(got));
        } else if (std::sscanf(l.c_str(), "SEND %lu", &n) == 1) {
            const std::uint64_t target = p.sends_done + n;
            for (unsigned long i = 0; i < n; ++i) p.post_send();
            const auto end = std::chrono::steady_clock::now() + 10s;
            while (p.sends_done < target) {
                if (std::chrono::steady_clock::now() > end) fail("SEND: no completion within 10 s");
                ibv_wc wc[16];
                const int got = p.cq->poll(16, wc);
                for (int k = 0; k < got; ++k) {
                    if (wc[k].status != IBV_WC_SUCCESS) fail("completion error " + std::to_string(wc[k].status));
                    if (wc[k].opcode == IBV_WC_RECV) fail("SEND: a receive completion");
                    p.take_good(wc[k]);
                }
            }
            say("SENT " + std::to_string(n));
        } else if (l == "BADWRITE") {
            ibv_sge sge{p.addr(kSendAt), 64, p.mr->lkey()};
            ibv_send_wr wr{};
            wr.wr_id = 0xbad;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.opcode = IBV_WR_RDMA_WRITE;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.wr.rdma.remote_addr = p.peer_addr + kTargetAt;
            wr.wr.rdma.rkey = p.peer_rkey ^ 0x5500;  // no such key at the responder
            ibv_send_wr* bad = nullptr;
            if (p.qp->post_send(&wr, &bad) != 0) fail("post_send (RDMA WRITE)");
            const auto end = std::chrono::steady_clock::now() + 10s;
            for (;;) {
                if (std::chrono::steady_clock::now() > end) fail("BADWRITE: no completion within 10 s");
                ibv_wc wc;
                if (p.cq->poll(1, &wc) == 1) {
                    if (wc.wr_id != 0xbad) fail("BADWRITE: another completion first");
                    say("WC " + std::to_string(wc.status));
                    break;
                }
            }
        } else if (l == "EVENTS") {
            std::lock_guard lock(p.log->mu);
            std::size_t errors = 0;
            std::string objects;
            for (const auto& e : p.log->events) {
                if (e.what != cxv::event::queue_error) continue;
                ++errors;
                objects += (objects.empty() ? "" : ",") + std::to_string(e.object);
            }
            say("EVENTS " + std::to_string(errors) + " " + std::to_string(p.log->fatal.load()) + " " +
                (objects.empty() ? "-" : objects));
        } else if (std::sscanf(l.c_str(), "WAITDEAD %lu", &n) == 1) {
            // Armed, and waiting with nothing to come but the device's death: the fatal
            // event wakes the wait, and the poll after it returns the receives flushed.
            p.cq->request_notify(false);
            say("ARMED");
            if (!p.cq->wait_event(std::chrono::milliseconds(n))) fail("WAITDEAD: no wake-up");
            // The API signals the CQs as the fatal event comes in, then calls on_event.
            for (int i = 0; i < 500 && p.log->fatal.load() == 0; ++i) std::this_thread::sleep_for(10ms);
            if (p.log->fatal.load() == 0) fail("WAITDEAD: woken, and no fatal event within 5 s");
            ibv_wc wc[64];
            const int got = p.cq->poll(64, wc);
            for (int k = 0; k < got; ++k) {
                if (wc[k].status != IBV_WC_WR_FLUSH_ERR || wc[k].opcode != IBV_WC_RECV || wc[k].wr_id != p.recvs_done++) {
                    fail("WAITDEAD: not the next receive, flushed");
                }
            }
            // Once the device is dead a wait returns at once (the one wake-up is taken):
            // a waiter that comes back to wait polls its flushes instead of sleeping.
            const auto t0 = std::chrono::steady_clock::now();
            if (!p.cq->wait_event(std::chrono::milliseconds(5000))) fail("WAITDEAD: a second wait on the dead device timed out");
            if (std::chrono::steady_clock::now() - t0 > 1s) fail("WAITDEAD: a second wait on the dead device slept");
            say("WOKE " + std::to_string(got) + " " + std::to_string(p.recvs_posted - p.recvs_done));
        } else if (l == "TRAFFIC") {
            p.traffic();
        } else if (std::sscanf(l.c_str(), "REOPEN %199s", path) == 1) {
            ::setenv("CXV_DAEMON", path, 1);
            p.setup();
            p.connect();
        } else {
            fail("unknown command: " + l);
        }
    }
}
