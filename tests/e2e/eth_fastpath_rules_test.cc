// The fast path's rules for raw Ethernet (api/cxv_eth.h), on the real code paths against
// the model: eth::queue's send (whole frames inline and by pointer, 8-byte doorbells and
// BlueFlame copies), poll (a cyclic and a striding RQ) and poll_send make no system call
// and allocate nothing.
//
// As fastpath_rules_test: the traffic runs on a thread of its own that installs a seccomp
// filter on itself alone (tests/fastpath_guard.h), and a replaced operator new counts its
// allocations while it measures. The loop polls without sleeping or reading a clock.
#include <doctest/doctest.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "api/cxv.h"
#include "api/cxv_eth.h"
#include "tests/fastpath_guard.h"
#include "tests/skip.h"

#if defined(CXV_SANITIZED)
TEST_CASE("raw Ethernet fast path: no system call and no allocation" *
          cxv::test::skip_in_build(true, "the sanitizer runtimes make system calls of their own on the filtered thread")) {}
#else

using namespace cxv::test;
namespace eth = cxv::eth;

namespace {

template <typename T>
T take(cxv::result<T> r) {
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    return std::move(r).value();
}

struct outcome {
    bool filtered = false;
    unsigned sent = 0, received = 0, completions = 0, send_failures = 0, stalls = 0;
};

constexpr unsigned kFrames = 2000;
constexpr unsigned long kSpinLimit = 2'000'000'000ul;

// kFrames frames, every other one inline and the others by pointer from `mem` (`lkey`),
// every 8th signaled; each one received before the next goes.
outcome run(eth::queue& tx, eth::queue& rx, const std::byte* frame, std::uint32_t len, const std::byte* mem,
            std::uint32_t lkey, bool filter) {
    outcome o;
    {
        void* volatile warm = std::malloc(64);
        std::free(warm);
    }
    std::array<eth::packet, 16> p;
    std::array<eth::send_completion, 16> c;
    if (filter) {
        o.filtered = forbid_syscalls();
        if (!o.filtered) return o;
        t_counting = true;
    }
    for (unsigned i = 0; i < kFrames; ++i) {
        const unsigned flags = eth::l3_csum | eth::l4_csum | (i % 8 == 7 ? eth::signaled : 0u);
        const int rc = i % 2 == 0 ? tx.send(std::span<const std::byte>(frame, len), flags, i)
                                  : tx.send(mem, len, lkey, flags, i);
        if (rc != 0) {
            ++o.send_failures;
            continue;
        }
        ++o.sent;
        unsigned long spins = 0;
        int got = 0;
        while (got == 0 && spins < kSpinLimit) {
            got = rx.poll(p);
            o.completions += static_cast<unsigned>(tx.poll_send(c));
            ++spins;
        }
        if (got == 0) {
            ++o.stalls;
            break;
        }
        o.received += static_cast<unsigned>(got);
    }
    // The last signaled frames' completions.
    for (unsigned long spins = 0; o.completions < kFrames / 8 && spins < kSpinLimit; ++spins) {
        o.completions += static_cast<unsigned>(tx.poll_send(c));
    }
    t_counting = false;
    return o;
}

}  // namespace

TEST_CASE("raw Ethernet fast path: no system call and no allocation in send, poll and poll_send") {
    REQUIRE(install_sigsys_handler());
    auto d0 = take(cxv::device::open("0000:c5:00.0"));
    auto d1 = take(cxv::device::open("0000:c5:00.1"));
    auto steer = take(eth::steering::create(*d1));
    // A UDP frame to function 1 (checksums left to the device).
    std::vector<std::uint8_t> f(64, 0);
    const auto m0 = eth::address(*d0), m1 = eth::address(*d1);
    std::memcpy(f.data(), m1.data(), 6);
    std::memcpy(f.data() + 6, m0.data(), 6);
    const std::uint8_t hdr[] = {0x08, 0x00, 0x45, 0, 0, 50, 0, 0, 0x40, 0, 64, 17, 0, 0, 169, 254, 0, 1,
                                169,  254,  0,    2, 0x30, 0x39, 0x7a, 0x69, 0, 30, 0, 0};
    std::memcpy(f.data() + 12, hdr, sizeof(hdr));
    const auto* frame = reinterpret_cast<const std::byte*>(f.data());
    for (const bool striding : {false, true}) {
        for (const auto mode : {cxv::doorbell_mode::doorbell, cxv::doorbell_mode::blueflame}) {
            CAPTURE(striding);
            CAPTURE(static_cast<int>(mode));
            auto tx = take(eth::queue::create(*d0, {.send_entries = 64, .doorbell = mode}));
            auto rx = take(eth::queue::create(*d1, {.recv_entries = 16, .striding = striding}));
            auto rule = take(steer->add({.ip_version = 4, .udp_dport = 31337}, rx));
            auto mem = take(cxv::buffer::create(4096));
            std::memcpy(mem->data(), frame, f.size());
            auto key = take(cxv::mr::create(tx->domain(), mem->data(), mem->size(), 0));
            reset_guard_counts();
            outcome plain;
            std::thread([&] { plain = run(*tx, *rx, frame, 64, mem->data(), key->lkey(), false); }).join();
            REQUIRE(plain.stalls == 0);
            outcome o;
            std::thread([&] { o = run(*tx, *rx, frame, 64, mem->data(), key->lkey(), true); }).join();
            REQUIRE_MESSAGE(o.filtered, "seccomp filters cannot be installed here");
            CHECK_MESSAGE(g_syscalls.load() == 0, "system calls in the fast path: ", g_syscalls.load(),
                          ", the first number ", g_first_syscall.load());
            CHECK_MESSAGE(g_allocations.load() == 0, "allocations in the fast path: ", g_allocations.load());
            CHECK(o.stalls == 0);
            CHECK(o.send_failures == 0);
            CHECK(o.sent == kFrames);
            CHECK(o.received == kFrames);
            CHECK(o.completions == kFrames / 8);
        }
    }
}

#endif  // CXV_SANITIZED
