// A station's ring (sim/link/ring.h): frames in order through 256 slots, full and too
// big, a receiver that leaves or is replaced, the wake-up of a sleeping receiver, a
// sender that died holding the lock, and frames between processes.
#include "sim/link/ring.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

namespace cxv::sim::link {
namespace {

using put_result = frame_ring::put_result;

std::string temp_dir() {
    std::string templ = "/tmp/cxv-ring-XXXXXX";
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    return templ;
}

struct ring_dir {
    std::string dir = temp_dir();
    std::string path = dir + "/.bell-eth-02c500000002";
    ~ring_dir() { std::filesystem::remove_all(dir); }
};

// A station's ring (rx) and a sender's view of it (tx).
struct ring_pair : ring_dir {
    std::unique_ptr<frame_ring> rx, tx;
    ring_pair() {
        rx = frame_ring::create(path);
        REQUIRE(rx);
        tx = frame_ring::open(path);
        REQUIRE(tx);
    }
};

// A frame of `n` bytes whose bytes say `tag` (and its length).
std::vector<std::byte> frame(unsigned tag, std::size_t n = 64) {
    std::vector<std::byte> f(n);
    for (std::size_t i = 0; i < n; ++i) f[i] = std::byte{static_cast<std::uint8_t>(tag + i)};
    return f;
}

// The header as another process sees it (the layout ring.h publishes).
struct mapped_header {
    frame_ring::header* h = nullptr;
    explicit mapped_header(const std::string& path) {
        const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        REQUIRE(fd >= 0);
        void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ::close(fd);
        REQUIRE(p != MAP_FAILED);
        h = static_cast<frame_ring::header*>(p);
    }
    ~mapped_header() { ::munmap(h, 4096); }
};

TEST_CASE("frames arrive in order and intact, the ring reused lap after lap") {
    ring_pair d;
    auto& rx = d.rx;
    auto& tx = d.tx;
    CHECK(tx->has_ring());
    CHECK(tx->inode() == rx->inode());
    std::vector<std::byte> got;
    CHECK_FALSE(rx->take(got));
    unsigned sent = 0, taken = 0;
    while (taken < 3000) {
        // Bursts of varying size, so that the fill position passes the end of the ring
        // at every offset.
        for (unsigned i = 0; i < 1 + sent % 37 && sent < 3000; ++i) {
            const std::size_t n = 60 + sent % 1500;
            REQUIRE(tx->put(frame(sent, n)) == put_result::put);
            ++sent;
        }
        while (rx->take(got)) {
            REQUIRE(got == frame(taken, 60 + taken % 1500));
            ++taken;
        }
    }
    CHECK(sent == 3000);
}

TEST_CASE("a full ring says so until the receiver takes; a frame larger than a slot is refused") {
    ring_pair d;
    auto& rx = d.rx;
    auto& tx = d.tx;
    for (unsigned i = 0; i < frame_ring::kSlots; ++i) REQUIRE(tx->put(frame(i)) == put_result::put);
    CHECK(tx->put(frame(999)) == put_result::full);
    std::vector<std::byte> got;
    REQUIRE(rx->take(got));
    CHECK(got == frame(0));
    CHECK(tx->put(frame(1000)) == put_result::put);
    CHECK(tx->put(frame(1001)) == put_result::full);
    for (unsigned i = 1; i < frame_ring::kSlots; ++i) {
        REQUIRE(rx->take(got));
        CHECK(got == frame(i));
    }
    REQUIRE(rx->take(got));
    CHECK(got == frame(1000));  // the refused ones never entered
    CHECK_FALSE(rx->take(got));

    CHECK(tx->put(frame(1, frame_ring::kFrameBytes + 1)) == put_result::too_big);
    CHECK(tx->put(frame(2, frame_ring::kFrameBytes)) == put_result::put);
    REQUIRE(rx->take(got));
    CHECK(got == frame(2, frame_ring::kFrameBytes));
    // The largest RoCEv2 frame the model sends: Ethernet, IPv6, UDP, BTH, AtomicETH, a
    // 4096-byte payload and the ICRC.
    CHECK(14 + 40 + 8 + 12 + 28 + 4096 + 4 <= frame_ring::kFrameBytes);
}

TEST_CASE("a receiver that leaves closes its ring; the station after a dead one closes the dead one's") {
    ring_pair d;
    auto& rx = d.rx;
    auto& tx = d.tx;
    rx->close();
    CHECK(tx->put(frame(1)) == put_result::closed);

    // A station that died without a word (its ring never closed), and the one that takes
    // its name over: the old ring's senders are told, and find the new file.
    const std::string other = d.dir + "/.bell-eth-02c500000003";
    auto dead = frame_ring::create(other);
    REQUIRE(dead);
    auto sender = frame_ring::open(other);
    REQUIRE(sender);
    REQUIRE(sender->put(frame(2)) == put_result::put);
    auto next = frame_ring::create(other);
    REQUIRE(next);
    CHECK(sender->put(frame(3)) == put_result::closed);
    CHECK(frame_ring::open(other)->inode() == next->inode());
    CHECK_FALSE(std::filesystem::exists(other + ".new"));
}

TEST_CASE("a new receiver under the name makes a new file; a file with a bell only has no ring") {
    ring_dir d;
    auto first = frame_ring::create(d.path);
    REQUIRE(first);
    auto tx = frame_ring::open(d.path);
    REQUIRE(tx);
    REQUIRE(tx->put(frame(7)) == put_result::put);
    auto second = frame_ring::create(d.path);
    REQUIRE(second);
    CHECK(second->inode() != first->inode());
    std::vector<std::byte> got;
    CHECK_FALSE(second->take(got));  // nothing of the old ring's
    CHECK(frame_ring::open(d.path)->inode() == second->inode());

    const std::string bell_only = d.dir + "/.bell-old";
    {
        const int fd = ::open(bell_only.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, 4096) == 0);
        ::close(fd);
    }
    auto old = frame_ring::open(bell_only);
    REQUIRE(old);
    CHECK_FALSE(old->has_ring());
    CHECK(old->put(frame(1)) == put_result::too_big);  // the socket then
    CHECK_FALSE(frame_ring::open(d.dir + "/.bell-none"));
}

TEST_CASE("a sleeping receiver is woken by exactly one put; an awake one by none") {
    ring_pair d;
    auto& rx = d.rx;
    auto& tx = d.tx;
    REQUIRE(tx->put(frame(1)) == put_result::put);
    CHECK_FALSE(tx->wake_wanted());  // awake
    CHECK_FALSE(rx->arm());          // a frame waits: no sleep
    std::vector<std::byte> got;
    REQUIRE(rx->take(got));
    CHECK(rx->arm());
    REQUIRE(tx->put(frame(2)) == put_result::put);
    CHECK(tx->wake_wanted());
    REQUIRE(tx->put(frame(3)) == put_result::put);
    CHECK_FALSE(tx->wake_wanted());  // already woken
    REQUIRE(rx->take(got));
    REQUIRE(rx->take(got));
    CHECK(rx->arm());
    rx->disarm();
    REQUIRE(tx->put(frame(4)) == put_result::put);
    CHECK_FALSE(tx->wake_wanted());
}

// A child process that takes the senders' lock of the ring at `path`, runs `then`
// (with the header), and then either exits holding it or, with `stay`, waits for SIGKILL.
template <typename F>
pid_t lock_holder(const std::string& path, bool stay, F then) {
    const pid_t c = ::fork();
    REQUIRE(c >= 0);
    if (c == 0) {
        mapped_header m(path);
        if (::pthread_mutex_lock(&m.h->writer) != 0) ::_exit(1);
        then(*m.h);
        if (stay) ::pause();
        ::_exit(0);  // holding the lock
    }
    return c;
}

// Waits for the child to exit without reaping it: it stays a zombie.
void await_exit(pid_t c) {
    siginfo_t info{};
    REQUIRE(::waitid(P_PID, static_cast<id_t>(c), &info, WEXITED | WNOWAIT) == 0);
}

void reap(pid_t c) {
    int status = 0;
    ::waitpid(c, &status, 0);
}

TEST_CASE("a sender that died holding the lock is passed over, even as a zombie; one alive is waited for") {
    ring_pair d;
    auto& rx = d.rx;
    auto& tx = d.tx;
    std::vector<std::byte> got;

    // Died before it published (a half-written slot): the slot is filled again.
    pid_t c = lock_holder(d.path, false, [](frame_ring::header&) {});
    await_exit(c);  // a zombie: its process id still answers kill(pid, 0)
    REQUIRE(tx->put(frame(1)) == put_result::put);
    reap(c);
    REQUIRE(rx->take(got));
    CHECK(got == frame(1));

    // Died after it published its slot, before it moved the fill position on.
    REQUIRE(tx->put(frame(2)) == put_result::put);
    c = lock_holder(d.path, false, [](frame_ring::header& h) { h.tail -= 1; });
    await_exit(c);
    REQUIRE(tx->put(frame(3)) == put_result::put);
    reap(c);
    REQUIRE(rx->take(got));
    CHECK(got == frame(2));
    REQUIRE(rx->take(got));
    CHECK(got == frame(3));

    // The same, and the receiver took the slot before the next sender came.
    REQUIRE(tx->put(frame(4)) == put_result::put);
    c = lock_holder(d.path, false, [](frame_ring::header& h) { h.tail -= 1; });
    await_exit(c);
    REQUIRE(rx->take(got));
    CHECK(got == frame(4));
    REQUIRE(tx->put(frame(5)) == put_result::put);
    reap(c);
    REQUIRE(rx->take(got));
    CHECK(got == frame(5));
    CHECK_FALSE(rx->take(got));

    // A live sender of another process holds it: try later, nothing lost or taken over;
    // once it is killed, its lock passes on.
    std::atomic<bool>* ready = static_cast<std::atomic<bool>*>(
        ::mmap(nullptr, sizeof(std::atomic<bool>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    REQUIRE(ready != MAP_FAILED);
    ready->store(false);
    c = lock_holder(d.path, true, [ready](frame_ring::header&) { ready->store(true); });
    while (!ready->load()) std::this_thread::yield();
    CHECK(tx->put(frame(6)) == put_result::full);
    ::kill(c, SIGKILL);
    reap(c);
    CHECK(tx->put(frame(7)) == put_result::put);
    REQUIRE(rx->take(got));
    CHECK(got == frame(7));
    ::munmap(ready, sizeof(std::atomic<bool>));
}

TEST_CASE("frames between processes: two senders, one receiver, each sender's frames in order") {
    ring_dir d;
    auto rx = frame_ring::create(d.path);
    REQUIRE(rx);
    constexpr unsigned kEach = 20000;
    std::vector<pid_t> senders;
    for (unsigned s = 0; s < 2; ++s) {
        const pid_t c = ::fork();
        REQUIRE(c >= 0);
        if (c == 0) {
            auto tx = frame_ring::open(d.path);
            if (!tx) ::_exit(10);
            const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            for (unsigned i = 0; i < kEach;) {
                std::vector<std::byte> f = frame(i, 64);
                f[0] = std::byte{static_cast<std::uint8_t>(s)};
                const put_result r = tx->put(f);
                if (r == put_result::put) {
                    ++i;
                } else if (r != put_result::full || std::chrono::steady_clock::now() > end) {
                    ::_exit(11);
                } else {
                    std::this_thread::yield();
                }
            }
            ::_exit(0);
        }
        senders.push_back(c);
    }
    unsigned next[2] = {0, 0};
    bool in_order = true;
    std::vector<std::byte> got;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (next[0] + next[1] < 2 * kEach && std::chrono::steady_clock::now() < end) {
        if (!rx->take(got)) {
            std::this_thread::yield();
            continue;
        }
        const unsigned s = std::to_integer<unsigned>(got[0]);
        REQUIRE(s < 2);
        std::vector<std::byte> want = frame(next[s], 64);
        want[0] = got[0];
        in_order = in_order && got == want;
        ++next[s];
    }
    CHECK(in_order);
    CHECK(next[0] == kEach);
    CHECK(next[1] == kEach);
    for (const pid_t c : senders) {
        int status = 0;
        REQUIRE(::waitpid(c, &status, 0) == c);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
}

}  // namespace
}  // namespace cxv::sim::link
