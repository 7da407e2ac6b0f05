// The segments ports are cabled to: frames reach the station with their destination
// address, broadcasts every other station, nothing reaches a station that is gone; a
// directory segment does the same between processes.
#include "sim/link/segment.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

namespace cxv::sim::link {
namespace {

station eth(std::uint8_t last) {
    station s;
    s.mac = {0x02, 0xc5, 0, 0, 0, last};
    return s;
}

station ib(std::uint16_t lid) {
    station s;
    s.ethernet = false;
    s.lid = lid;
    return s;
}

// An Ethernet frame to `dst` carrying `tag` (not a real protocol: the segment looks at
// the destination address only).
std::vector<std::byte> frame_to(const station& dst, std::uint8_t tag) {
    std::vector<std::byte> f(60);
    for (std::size_t i = 0; i < 6; ++i) f[i] = std::byte{dst.mac[i]};
    f[59] = std::byte{tag};
    return f;
}

std::vector<std::byte> broadcast(std::uint8_t tag) {
    station b;
    b.mac = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    return frame_to(b, tag);
}

std::vector<std::byte> ib_frame(std::uint16_t dlid, std::uint8_t tag) {
    std::vector<std::byte> f(32);
    f[2] = std::byte{static_cast<std::uint8_t>(dlid >> 8)};
    f[3] = std::byte{static_cast<std::uint8_t>(dlid)};
    f[31] = std::byte{tag};
    return f;
}

bool send_frame(segment_port& p, std::span<const std::byte> f) { return p.send(f, frame_crcs::unverified); }
bool take(segment_port& p, std::vector<std::byte>& f) {
    frame_crcs crcs{};
    return p.receive(f, crcs, std::chrono::steady_clock::now());
}

// Waits up to a second for a frame (datagram sockets deliver at once, but the test
// must not depend on it).
bool wait_receive(segment_port& p, std::vector<std::byte>& f, frame_crcs* crcs = nullptr) {
    frame_crcs ignored{};
    for (int i = 0; i < 1000; ++i) {
        if (p.receive(f, crcs ? *crcs : ignored, std::chrono::steady_clock::now())) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
}

// Under /tmp: a UNIX socket path has at most 107 bytes, and Bazel's TEST_TMPDIR is
// longer than that allows.
std::string temp_dir(const std::string& name) {
    std::string templ = "/tmp/cxv-" + name + "-XXXXXX";
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    return templ;
}

// Two stations, eth(1) and eth(2), on a directory segment of their own, removed after.
struct directory_pair {
    std::string dir;
    std::unique_ptr<segment_port> a, b;
    explicit directory_pair(const std::string& name) : dir(temp_dir(name)) {
        auto x = attach_directory(dir, eth(1));
        auto y = attach_directory(dir, eth(2));
        REQUIRE(x);
        REQUIRE(y);
        a = std::move(x).value();
        b = std::move(y).value();
    }
    ~directory_pair() {
        a.reset();
        b.reset();
        std::filesystem::remove_all(dir);
    }
};

// A child process with station eth(2) on the segment in `dir`: it exits with what `body`
// returns for its port (10 when it cannot attach), and through _exit, so that nothing
// of either process unwinds in it (and its files stay, as after a crash).
template <class Body>
pid_t fork_station(const std::string& dir, Body body) {
    const pid_t child = ::fork();
    if (child == 0) {
        auto b = attach_directory(dir, eth(2));
        ::_exit(b ? body(*b.value()) : 10);
    }
    return child;
}

TEST_CASE("station names are the socket names QEMU's dgram netdev is pointed at") {
    CHECK(station_name(eth(0x01)) == "eth-02c500000001");
    CHECK(station_name(ib(0x1a)) == "ib-001a");
}

TEST_CASE("in-process: unicast to the destination MAC, broadcast to every other station, none to a missing one") {
    auto a = attach_in_process("seg-test-1", eth(1));
    auto b = attach_in_process("seg-test-1", eth(2));
    auto c = attach_in_process("seg-test-1", eth(3));
    auto other = attach_in_process("seg-test-other", eth(2));  // same MAC, another segment
    std::vector<std::byte> f;
    REQUIRE(send_frame(*a, frame_to(eth(2), 7)));
    REQUIRE(take(*b, f));
    CHECK(f[59] == std::byte{7});
    CHECK_FALSE(take(*c, f));
    CHECK_FALSE(take(*other, f));
    CHECK_FALSE(send_frame(*a, frame_to(eth(9), 8)));  // nobody has it
    REQUIRE(send_frame(*a, broadcast(9)));
    CHECK(take(*b, f));
    CHECK(take(*c, f));
    CHECK_FALSE(take(*a, f));  // not back to the sender
    b.reset();                    // unplugged
    CHECK_FALSE(send_frame(*a, frame_to(eth(2), 10)));
}

TEST_CASE("a frame's CRCs are vouched for only inside the process") {
    std::vector<std::byte> f;
    frame_crcs crcs{};
    SUBCASE("in-process: what the sender said, frame by frame, broadcasts too") {
        auto a = attach_in_process("seg-test-crcs", eth(1));
        auto b = attach_in_process("seg-test-crcs", eth(2));
        REQUIRE(a->send(frame_to(eth(2), 1), frame_crcs::known_good));
        REQUIRE(a->send(frame_to(eth(2), 2), frame_crcs::unverified));
        REQUIRE(a->send(broadcast(3), frame_crcs::known_good));
        REQUIRE(b->receive(f, crcs, std::chrono::steady_clock::now()));
        CHECK(crcs == frame_crcs::known_good);
        REQUIRE(b->receive(f, crcs, std::chrono::steady_clock::now()));
        CHECK(crcs == frame_crcs::unverified);
        REQUIRE(b->receive(f, crcs, std::chrono::steady_clock::now()));
        CHECK(crcs == frame_crcs::known_good);
    }
    SUBCASE("directory: never, whatever the sender said") {
        for (const frame_crcs said : {frame_crcs::known_good, frame_crcs::absent}) {
            directory_pair s("segment-crcs");
            REQUIRE(s.a->send(frame_to(eth(2), 1), said));
            crcs = said;
            REQUIRE(wait_receive(*s.b, f, &crcs));
            CHECK(crcs == frame_crcs::unverified);
        }
    }
}

TEST_CASE("in-process: InfiniBand routes by DLID") {
    auto a = attach_in_process("seg-test-ib", ib(1));
    auto b = attach_in_process("seg-test-ib", ib(2));
    std::vector<std::byte> f;
    REQUIRE(send_frame(*a, ib_frame(2, 5)));
    REQUIRE(take(*b, f));
    CHECK(f[31] == std::byte{5});
    CHECK_FALSE(send_frame(*a, ib_frame(3, 5)));
    CHECK(send_frame(*b, ib_frame(1, 6)));  // and back
    CHECK(take(*a, f));
}

TEST_CASE("directory: unicast, broadcast and a station that is gone") {
    const std::string dir = temp_dir("segment");
    auto a = attach_directory(dir, eth(1));
    auto b = attach_directory(dir, eth(2));
    auto c = attach_directory(dir, eth(3));
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(c);
    CHECK(std::filesystem::exists(dir + "/eth-02c500000002"));
    std::vector<std::byte> f;
    REQUIRE(send_frame(*a.value(), frame_to(eth(2), 1)));
    REQUIRE(wait_receive(*b.value(), f));
    CHECK(f.size() == 60);
    CHECK(f[59] == std::byte{1});
    CHECK_FALSE(take(*c.value(), f));
    REQUIRE(send_frame(*a.value(), broadcast(2)));
    CHECK(wait_receive(*b.value(), f));
    CHECK(wait_receive(*c.value(), f));
    CHECK_FALSE(take(*a.value(), f));
    b.value().reset();  // its process exited: the socket is gone
    CHECK_FALSE(std::filesystem::exists(dir + "/eth-02c500000002"));
    CHECK_FALSE(send_frame(*a.value(), frame_to(eth(2), 3)));
    std::filesystem::remove_all(dir);
}

TEST_CASE("directory: a burst beyond the receiver's ring waits in the sender's backlog, in order, lossless") {
    directory_pair s("segment-burst");
    // 200 frames fit the receiver's ring (256 slots; its socket would queue 10).
    for (unsigned i = 0; i < 200; ++i) REQUIRE(send_frame(*s.a, frame_to(eth(2), static_cast<std::uint8_t>(i))));
    CHECK_FALSE(s.a->flush());
    for (unsigned i = 200; i < 1000; ++i) REQUIRE(send_frame(*s.a, frame_to(eth(2), static_cast<std::uint8_t>(i))));
    CHECK(s.a->flush());  // the rest waits
    std::vector<std::byte> f;
    unsigned got = 0;
    for (int round = 0; round < 2000 && got < 1000; ++round) {
        s.a->flush();
        while (take(*s.b, f)) {
            CHECK(f[59] == std::byte{static_cast<std::uint8_t>(got)});
            ++got;
        }
    }
    CHECK(got == 1000);
    CHECK_FALSE(s.a->flush());  // nothing left waiting
}

TEST_CASE("directory: a frame through the ring wakes a receiver that sleeps on its socket, and only then") {
    directory_pair s("segment-wake");
    std::vector<std::byte> f;
    const auto readable = [&](int ms) {
        pollfd p{s.b->wake_fd(), POLLIN, 0};
        return ::poll(&p, 1, ms) == 1;
    };
    REQUIRE(s.b->wake_fd() >= 0);
    REQUIRE(send_frame(*s.a, frame_to(eth(2), 1)));
    CHECK_FALSE(readable(0));       // an awake receiver: no system call, nothing on the socket
    CHECK_FALSE(s.b->arm_wake());  // a frame waits: do not sleep
    REQUIRE(take(*s.b, f));
    CHECK(f[59] == std::byte{1});
    CHECK(s.b->arm_wake());
    CHECK_FALSE(readable(0));
    REQUIRE(send_frame(*s.a, frame_to(eth(2), 2)));
    REQUIRE(send_frame(*s.a, frame_to(eth(2), 3)));
    CHECK(readable(1000));
    REQUIRE(take(*s.b, f));
    CHECK(f[59] == std::byte{2});
    REQUIRE(take(*s.b, f));
    CHECK(f[59] == std::byte{3});
    CHECK_FALSE(take(*s.b, f));  // the wake-up is no frame, and is read with the socket
    CHECK_FALSE(readable(0));
}

TEST_CASE("directory: no wake-up is lost: a receiver that sleeps whenever it finds nothing gets every burst") {
    directory_pair s("segment-sleep");
    // The sender sends bursts of 1-8 frames and waits until all have arrived before the
    // next, so the end of every burst is a race between the receiver going to sleep and
    // the sender's last frame. A wake-up lost there leaves the receiver asleep with a
    // frame in its ring and the sender waiting: the receiver's poll runs out.
    constexpr unsigned kFrames = 20000;
    std::atomic<unsigned> received{0};
    std::atomic<bool> give_up{false};
    std::thread sender([&] {
        unsigned sent = 0, burst = 1;
        while (sent < kFrames && !give_up.load()) {
            burst = burst % 8 + 1;
            for (unsigned i = 0; i < burst && sent < kFrames; ++i, ++sent) {
                REQUIRE(send_frame(*s.a, frame_to(eth(2), static_cast<std::uint8_t>(sent))));
            }
            while (s.a->flush()) std::this_thread::yield();
            while (received.load() < sent && !give_up.load()) std::this_thread::yield();
        }
    });
    std::vector<std::byte> f;
    unsigned got = 0, timeouts = 0;
    bool in_order = true;
    while (got < kFrames && timeouts == 0) {
        while (take(*s.b, f)) {
            in_order = in_order && f[59] == std::byte{static_cast<std::uint8_t>(got)};
            received.store(++got);
        }
        if (got < kFrames && s.b->arm_wake()) {
            pollfd p{s.b->wake_fd(), POLLIN, 0};
            if (::poll(&p, 1, 2000) == 0) ++timeouts;
        }
    }
    give_up.store(true);
    sender.join();
    CHECK(timeouts == 0);
    CHECK(got == kFrames);
    CHECK(in_order);
}

TEST_CASE("directory: a receiver that crashed loses its senders' frames once its ring is full") {
    const std::string dir = temp_dir("segment-crash");
    auto a = attach_directory(dir, eth(1));
    REQUIRE(a);
    const pid_t child = fork_station(dir, [](segment_port&) { return 0; });
    REQUIRE(child >= 0);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WEXITSTATUS(status) == 0);
    REQUIRE(std::filesystem::exists(dir + "/.bell-eth-02c500000002"));
    unsigned accepted = 0;
    while (accepted < 10000 && send_frame(*a.value(), frame_to(eth(2), 1))) ++accepted;
    CHECK(accepted >= 256);  // the ring held some, the backlog more, until the death was seen
    CHECK(accepted < 10000);
    int rounds = 0;
    while (a.value()->flush() && rounds < 10000) ++rounds;
    CHECK_FALSE(a.value()->flush());  // nothing held for it any more
    CHECK_FALSE(send_frame(*a.value(), frame_to(eth(2), 2)));
    // The station back under the name receives again.
    auto again = attach_directory(dir, eth(2));
    REQUIRE(again);
    std::vector<std::byte> f;
    bool sent = false;
    for (int i = 0; i < 10 && !sent; ++i) sent = send_frame(*a.value(), frame_to(eth(2), 3));
    CHECK(sent);
    REQUIRE(wait_receive(*again.value(), f));
    CHECK(f[59] == std::byte{3});
    std::filesystem::remove_all(dir);
}

TEST_CASE("directory: a live address is refused, a dead one's socket is taken over") {
    const std::string dir = temp_dir("segment-dup");
    auto a = attach_directory(dir, eth(1));
    REQUIRE(a);
    auto again = attach_directory(dir, eth(1));
    REQUIRE_FALSE(again);
    CHECK(again.error().code == EADDRINUSE);
    // A socket file whose process died (bound, then closed without unlinking).
    const std::string stale = dir + "/eth-02c500000005";
    const int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", stale.c_str());
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    ::close(fd);
    REQUIRE(std::filesystem::exists(stale));
    auto taken = attach_directory(dir, eth(5));
    REQUIRE(taken);
    std::vector<std::byte> f;
    REQUIRE(send_frame(*a.value(), frame_to(eth(5), 4)));
    CHECK(wait_receive(*taken.value(), f));
    std::filesystem::remove_all(dir);
}

// A port's bell: the counter on DIR/.bell-<name> that cxv senders advance per frame they
// queue on its socket (one too large for the ring), so that the receiver reads its
// socket only when something came. A sender without one (a QEMU guest's NIC) is still
// heard: every 16th look reads the socket regardless (fewer while looks find nothing).
std::uint64_t bell_of(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ~std::uint64_t{0};
    void* p = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return ~std::uint64_t{0};
    const std::uint64_t v = std::atomic_ref<std::uint64_t>(*static_cast<std::uint64_t*>(p)).load();
    ::munmap(p, 4096);
    return v;
}

TEST_CASE("directory: a frame through the socket rings the bell; a frame without one is found within 16 looks, 1024 when quiet") {
    directory_pair s("segment-bell");
    const std::string bell = s.dir + "/.bell-eth-02c500000002";
    REQUIRE(std::filesystem::exists(bell));
    const std::uint64_t before = bell_of(bell);
    // Through the ring: no bell.
    for (std::uint8_t i = 0; i < 5; ++i) REQUIRE(send_frame(*s.a, frame_to(eth(2), i)));
    CHECK(bell_of(bell) == before);
    // Too large for a slot (a jumbo frame): through the socket, rung, and in order after
    // the ring's.
    std::vector<std::byte> big = frame_to(eth(2), 0);
    big.resize(6000, std::byte{9});
    REQUIRE(send_frame(*s.a, big));
    CHECK(bell_of(bell) == before + 1);
    std::vector<std::byte> f;
    for (std::uint8_t i = 0; i < 5; ++i) {
        REQUIRE(take(*s.b, f));
        CHECK(f[59] == std::byte{i});
    }
    REQUIRE(take(*s.b, f));  // rung: read at the first look
    CHECK(f.size() == 6000);
    CHECK_FALSE(take(*s.b, f));

    // A datagram from a plain socket (as QEMU's -netdev dgram sends): no bell.
    const int raw = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(raw >= 0);
    sockaddr_un to{};
    to.sun_family = AF_UNIX;
    std::snprintf(to.sun_path, sizeof to.sun_path, "%s/eth-02c500000002", s.dir.c_str());
    const auto from_guest = [&](std::uint8_t tag) {
        const auto guest = frame_to(eth(2), tag);
        REQUIRE(::sendto(raw, guest.data(), guest.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
                static_cast<ssize_t>(guest.size()));
    };
    // The number of calls until it is found (at most `most`).
    const auto looks_until_found = [&](int most) {
        int looks = 1;
        while (!take(*s.b, f) && looks < most) ++looks;
        return looks;
    };
    from_guest(77);
    CHECK(bell_of(bell) == before + 1);
    CHECK(looks_until_found(16) <= 16);
    CHECK(f[59] == std::byte{77});
    // Looks that find nothing back off, to one per 1024 calls at most; one that finds a
    // frame without a bell brings them back to every 16th.
    bool any = false;
    for (int i = 0; i < 20000; ++i) any |= take(*s.b, f);
    CHECK_FALSE(any);
    from_guest(78);
    const int backed_off = looks_until_found(2048);
    CHECK(backed_off > 16);
    CHECK(backed_off <= 1024);
    CHECK(f[59] == std::byte{78});
    from_guest(79);
    CHECK(looks_until_found(16) <= 16);
    CHECK(f[59] == std::byte{79});
    ::close(raw);

    // A station gone takes its ring and bell with it; one back under the name has new
    // ones, and a sender whose frame to the name was lost uses the new ring.
    s.b.reset();
    CHECK_FALSE(std::filesystem::exists(bell));
    CHECK_FALSE(send_frame(*s.a, frame_to(eth(2), 1)));
    auto again = attach_directory(s.dir, eth(2));
    REQUIRE(again);
    REQUIRE(send_frame(*s.a, frame_to(eth(2), 2)));
    CHECK(bell_of(bell) == 0);
    REQUIRE(take(*again.value(), f));
    CHECK(f[59] == std::byte{2});
}

TEST_CASE("directory: a path too long for a UNIX socket is a clear error") {
    const std::string dir = temp_dir(std::string(100, 'x'));
    auto a = attach_directory(dir, eth(1));
    REQUIRE_FALSE(a);
    CHECK(a.error().code == ENAMETOOLONG);
    CHECK(a.error().message.find("shorter directory") != std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("directory: frames cross between processes") {
    const std::string dir = temp_dir("segment-fork");
    auto a = attach_directory(dir, eth(1));
    REQUIRE(a);
    // The other process: echo one frame back with its tag incremented.
    const pid_t child = fork_station(dir, [](segment_port& b) {
        std::vector<std::byte> f;
        if (!wait_receive(b, f)) return 11;
        auto back = frame_to(eth(1), static_cast<std::uint8_t>(std::to_integer<unsigned>(f[59]) + 1));
        return send_frame(b, back) ? 0 : 12;
    });
    REQUIRE(child >= 0);
    // The child's station appears when it has attached.
    bool sent = false;
    for (int i = 0; i < 2000 && !sent; ++i) {
        sent = send_frame(*a.value(), frame_to(eth(2), 41));
        if (!sent) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(sent);
    std::vector<std::byte> f;
    CHECK(wait_receive(*a.value(), f));
    CHECK(f[59] == std::byte{42});
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cxv::sim::link
