// The fast path's rules, checked on the real code paths against the model: posting and
// polling (post_recv, post_send with 8-byte doorbells, BlueFlame copies and on a
// multi-producer ring, poll_cq, CQ arm) make no system call and allocate nothing.
//
// The traffic runs on a thread of its own that, once its QPs are connected, installs a
// seccomp filter on itself alone: every system call but those a thread needs to end
// (exit, futex, munmap, madvise, rt_sigprocmask, rt_sigreturn) raises SIGSYS, whose
// handler records the call's number. A replaced operator new counts the allocations that
// thread makes while it measures. The loop polls without sleeping, yielding or reading a
// clock (a clock read may be a system call where the vDSO cannot serve it).
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tests/e2e/fixture.h"
#include "tests/fastpath_guard.h"
#include "tests/skip.h"

#if defined(CXV_SANITIZED)
// The sanitizers' runtimes make system calls of their own on whatever thread runs (UBSan
// initialises itself lazily, reading /proc, at its first dynamic type check), and own
// operator new: these rules are checked in the default build only.
TEST_CASE("fast path: no system call and no allocation" *
          cxv::test::skip_in_build(true, "the sanitizer runtimes make system calls of their own on the filtered thread")) {}
#else

using namespace cxv;
using namespace cxv::test;

namespace {

// What the measured loop did, for the checks after it.
struct outcome {
    bool filtered = false;
    unsigned sends = 0, receives = 0, errors = 0, post_failures = 0, stalls = 0;
};

constexpr unsigned kRounds = 3000;
constexpr unsigned long kSpinLimit = 2'000'000'000ul;  // polls without progress: the model stalled

// `rounds` rounds on a connected pair in loopback: a receive posted, then a SEND (64
// bytes inline) or an RDMA WRITE with immediate (a gather entry) every other round,
// every 8th round a list of two WRs, every 16th an armed CQ; polled until each round's
// completions are in. Runs with the filter on when `filter`.
outcome run(node& n, cxv::qp& tx, cxv::qp& rx, bool filter) {
    outcome o;
    {
        void* volatile warm = std::malloc(64);  // this thread's allocator state, before the filter
        std::free(warm);
    }
    ibv_sge rsge = sge(n, 0x1000, 256);
    ibv_sge ssge = sge(n, 0x2000, 64);
    ibv_recv_wr rwr{};
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ibv_send_wr swr[2]{};
    for (auto& w : swr) {
        w.sg_list = &ssge;
        w.num_sge = 1;
        w.wr.rdma.remote_addr = n.addr(0x3000);
        w.wr.rdma.rkey = n.mr->rkey();
        w.imm_data = htobe32(7);
    }
    ibv_wc wc[8];
    if (filter) {
        o.filtered = forbid_syscalls();
        if (!o.filtered) return o;
        t_counting = true;
    }
    for (unsigned i = 0; i < kRounds; ++i) {
        const unsigned wrs = i % 8 == 7 ? 2 : 1;
        for (unsigned k = 0; k < wrs; ++k) {
            ibv_recv_wr* rbad = nullptr;
            rwr.wr_id = i * 2 + k;
            if (rx.post_recv(&rwr, &rbad) != 0) ++o.post_failures;
        }
        const bool inl = i % 2 == 0;
        for (unsigned k = 0; k < 2; ++k) {
            swr[k].wr_id = i * 2 + k;
            swr[k].opcode = inl ? IBV_WR_SEND : IBV_WR_RDMA_WRITE_WITH_IMM;
            swr[k].send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
            swr[k].next = k + 1 < wrs ? &swr[k + 1] : nullptr;
        }
        if (i % 16 == 15) n.cq->request_notify(false);
        ibv_send_wr* sbad = nullptr;
        if (tx.post_send(swr, &sbad) != 0) ++o.post_failures;
        unsigned want = 2 * wrs;
        unsigned long spins = 0;
        while (want != 0 && spins < kSpinLimit) {
            const int got = n.cq->poll(8, wc);
            for (int k = 0; k < got; ++k) {
                if (wc[k].status != IBV_WC_SUCCESS) ++o.errors;
                if (wc[k].opcode & IBV_WC_RECV) {
                    ++o.receives;
                } else {
                    ++o.sends;
                }
            }
            want -= static_cast<unsigned>(got) < want ? static_cast<unsigned>(got) : want;
            ++spins;
        }
        if (want != 0) {
            ++o.stalls;
            break;
        }
    }
    t_counting = false;
    return o;
}

void check_rules(const char* what, node& n, cxv::qp& tx, cxv::qp& rx) {
    CAPTURE(what);
    reset_guard_counts();
    // Once without the filter: the same loop works, so what the filtered run finds is the
    // filter's doing.
    outcome plain;
    std::thread([&] { plain = run(n, tx, rx, false); }).join();
    REQUIRE(plain.stalls == 0);
    outcome o;
    std::thread([&] { o = run(n, tx, rx, true); }).join();
    REQUIRE_MESSAGE(o.filtered, "seccomp filters cannot be installed here");
    CHECK_MESSAGE(g_syscalls.load() == 0, "system calls in the fast path: ", g_syscalls.load(),
                  ", the first number ", g_first_syscall.load());
    CHECK_MESSAGE(g_allocations.load() == 0, "allocations in the fast path: ", g_allocations.load());
    CHECK(o.stalls == 0);
    CHECK(o.post_failures == 0);
    CHECK(o.errors == 0);
    CHECK(o.sends == plain.sends);
    CHECK(o.receives == plain.receives);
    CHECK(o.sends == kRounds + kRounds / 8);
}

}  // namespace

TEST_CASE("the checker itself: a system call and an allocation on the filtered thread are seen") {
    REQUIRE(install_sigsys_handler());
    reset_guard_counts();
    bool filtered = false;
    std::thread([&] {
        void* volatile warm = std::malloc(64);
        std::free(warm);
        filtered = forbid_syscalls();
        if (!filtered) return;
        t_counting = true;
        [[maybe_unused]] const long r = ::syscall(SYS_getppid);  // refused: SIGSYS, not run
        int* volatile p = new int(5);
        t_counting = false;
        delete p;
    }).join();
    REQUIRE_MESSAGE(filtered, "seccomp filters cannot be installed here");
    CHECK(g_syscalls.load() == 1);
    CHECK(g_first_syscall.load() == SYS_getppid);
    CHECK(g_allocations.load() == 1);
    // Other threads are not filtered.
    CHECK(::getppid() > 0);
}

TEST_CASE("fast path: no system call and no allocation in post_recv, post_send, poll_cq and CQ arm") {
    REQUIRE(install_sigsys_handler());

    auto n = make_node("0000:c5:00.0", 1024);
    const cxv::qp::caps cap{64, 64, 1, 1, 64};
    for (const auto mode : {doorbell_mode::doorbell, doorbell_mode::blueflame}) {
        auto tx = make_qp(*n, qp_type::rc, cap, nullptr, mode);
        auto rx = make_qp(*n, qp_type::rc, cap, nullptr, mode);
        connect_qps(*tx, *rx, *n);
        check_rules(mode == doorbell_mode::doorbell ? "8-byte doorbells" : "BlueFlame", *n, *tx, *rx);
    }

    cxv::qp::attr a;
    a.type = qp_type::rc;
    a.domain = n->pd;
    a.send_cq = a.recv_cq = n->cq;
    a.cap = cap;
    a.multi_producer = true;
    auto tx = take(cxv::qp::create(*n->dev, a));
    a.multi_producer = false;
    auto rx = take(cxv::qp::create(*n->dev, a));
    connect_qps(*tx, *rx, *n);
    check_rules("multi-producer", *n, *tx, *rx);
}

#endif  // CXV_SANITIZED
