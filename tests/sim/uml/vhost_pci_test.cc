// sim/uml's vhost-user backend, driven by a frontend that does what User-Mode Linux's
// virtio_uml and virt-pci drivers do (arch/um/drivers/): shares its memory, sets up the
// "cmd" and "irq" virtqueues, sends config-space and BAR accesses as virtio_pcidev
// messages and takes MSI messages -- against a real model function.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "sim/device.h"
#include "sim/uml/function.h"

using namespace cxv::sim;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kGuestBase = 0x100000;  // where the shared memory sits in "physical" space
constexpr std::size_t kGuestSize = 1 << 20;
constexpr unsigned kRing = 8;

// The frontend: a vhost-user client with a memfd as its memory and two split rings in it.
struct frontend {
    int sock = -1, memfd = -1, slave = -1;
    std::byte* mem = nullptr;
    int kick[2] = {-1, -1}, call[2] = {-1, -1};
    std::uint16_t avail_idx[2] = {0, 0}, used_seen[2] = {0, 0};
    std::size_t next_buffer = 0x10000;  // a bump allocator for message buffers

    // Ring q's parts: desc at 0x1000*(1+3q), avail +0x1000, used +0x2000 (guest offsets).
    static std::uint64_t desc_at(unsigned q) { return 0x1000 * (1 + 3 * q); }
    std::byte* at(std::uint64_t guest) { return mem + (guest - kGuestBase); }

    explicit frontend(const std::string& path) {
        memfd = ::memfd_create("uml-physmem", MFD_CLOEXEC);
        REQUIRE(::ftruncate(memfd, kGuestSize) == 0);
        mem = static_cast<std::byte*>(::mmap(nullptr, kGuestSize, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0));
        REQUIRE(mem != MAP_FAILED);
        sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strcpy(a.sun_path, path.c_str());
        bool ok = false;
        for (int i = 0; i < 200 && !ok; ++i) {
            ok = ::connect(sock, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
            if (!ok) std::this_thread::sleep_for(10ms);
        }
        REQUIRE(ok);
    }
    ~frontend() {
        if (sock >= 0) ::close(sock);
        if (slave >= 0) ::close(slave);
        ::munmap(mem, kGuestSize);
        ::close(memfd);
        for (int fd : {kick[0], kick[1], call[0], call[1]}) {
            if (fd >= 0) ::close(fd);
        }
    }
    void send(std::uint32_t req, const void* payload, std::uint32_t size, int fd = -1) {
        std::vector<std::byte> b(12 + size);
        const std::uint32_t flags = 1;
        std::memcpy(b.data(), &req, 4);
        std::memcpy(b.data() + 4, &flags, 4);
        std::memcpy(b.data() + 8, &size, 4);
        if (size != 0) std::memcpy(b.data() + 12, payload, size);
        iovec iov{b.data(), b.size()};
        msghdr m{};
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
        if (fd >= 0) {
            m.msg_control = control;
            m.msg_controllen = sizeof control;
            cmsghdr* c = CMSG_FIRSTHDR(&m);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
        }
        REQUIRE(::sendmsg(sock, &m, MSG_NOSIGNAL) == static_cast<ssize_t>(b.size()));
    }
    std::uint64_t get_u64(std::uint32_t req) {
        send(req, nullptr, 0);
        std::byte b[20];
        REQUIRE(::recv(sock, b, sizeof b, MSG_WAITALL) == 20);
        std::uint32_t flags;
        std::memcpy(&flags, b + 4, 4);
        CHECK(flags == (1u | 4u));  // version 1, a reply
        std::uint64_t v;
        std::memcpy(&v, b + 12, 8);
        return v;
    }
    void set_up() {
        const std::uint64_t features = get_u64(1);  // GET_FEATURES
        CHECK((features >> 32 & 1) == 1);            // VIRTIO_F_VERSION_1
        REQUIRE((features >> 30 & 1) == 1);          // protocol features
        const std::uint64_t protocol = get_u64(15);  // GET_PROTOCOL_FEATURES
        CHECK(protocol == (1u << 5));                // SLAVE_REQ only
        send(2, &features, 8);                       // SET_FEATURES
        send(16, &protocol, 8);                      // SET_PROTOCOL_FEATURES
        int pair[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
        send(21, nullptr, 0, pair[1]);  // SET_SLAVE_REQ_FD
        ::close(pair[1]);
        slave = pair[0];
        send(3, nullptr, 0);                         // SET_OWNER
        struct {
            std::uint32_t num = 1, pad = 0;
            std::uint64_t guest, size, user, offset;
        } table{1, 0, kGuestBase, kGuestSize, kGuestBase, 0};
        send(5, &table, sizeof table, memfd);  // SET_MEM_TABLE
        for (unsigned q = 0; q < 2; ++q) {
            const std::uint32_t num[2] = {q, kRing}, base[2] = {q, 0};
            send(8, num, 8);   // SET_VRING_NUM
            send(10, base, 8);  // SET_VRING_BASE
            struct {
                std::uint32_t index, flags = 0;
                std::uint64_t desc, used, avail, log = ~0ull;
            } addr{q, 0, kGuestBase + desc_at(q), kGuestBase + desc_at(q) + 0x2000, kGuestBase + desc_at(q) + 0x1000};
            send(9, &addr, sizeof addr);  // SET_VRING_ADDR
            kick[q] = ::eventfd(0, EFD_CLOEXEC);
            call[q] = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
            const std::uint64_t index = q;
            send(12, &index, 8, kick[q]);  // SET_VRING_KICK
            send(13, &index, 8, call[q]);  // SET_VRING_CALL
        }
    }
    // Posts a chain of descriptors ({guest address, length, device-writable}) on ring q.
    struct piece {
        std::uint64_t addr;
        std::uint32_t len;
        bool writable;
    };
    void post(unsigned q, const std::vector<piece>& pieces) {
        std::byte* desc = at(kGuestBase + desc_at(q));
        const std::uint16_t head = static_cast<std::uint16_t>((avail_idx[q] * 3) % kRing);
        for (std::size_t i = 0; i < pieces.size(); ++i) {
            std::byte* d = desc + 16 * ((head + i) % kRing);
            const std::uint16_t flags = static_cast<std::uint16_t>((i + 1 < pieces.size() ? 1 : 0) |
                                                                   (pieces[i].writable ? 2 : 0));
            const std::uint16_t next = static_cast<std::uint16_t>((head + i + 1) % kRing);
            std::memcpy(d, &pieces[i].addr, 8);
            std::memcpy(d + 8, &pieces[i].len, 4);
            std::memcpy(d + 12, &flags, 2);
            std::memcpy(d + 14, &next, 2);
        }
        std::byte* avail = at(kGuestBase + desc_at(q) + 0x1000);
        std::memcpy(avail + 4 + 2 * (avail_idx[q] % kRing), &head, 2);
        ++avail_idx[q];
        std::atomic_ref<std::uint16_t>(*reinterpret_cast<std::uint16_t*>(avail + 2)).store(avail_idx[q]);
        const std::uint64_t one = 1;
        REQUIRE(::write(kick[q], &one, 8) == 8);
    }
    // The next used entry of ring q (its length), waiting up to 5 s; -1 when none came.
    long wait_used(unsigned q) {
        std::byte* used = at(kGuestBase + desc_at(q) + 0x2000);
        const auto end = std::chrono::steady_clock::now() + 5s;
        while (std::chrono::steady_clock::now() < end) {
            const auto idx = std::atomic_ref<std::uint16_t>(*reinterpret_cast<std::uint16_t*>(used + 2)).load();
            if (idx != used_seen[q]) {
                std::uint32_t len;
                std::memcpy(&len, used + 4 + 8 * (used_seen[q] % kRing) + 4, 4);
                ++used_seen[q];
                return len;
            }
            std::this_thread::sleep_for(1ms);
        }
        return -1;
    }
    std::uint64_t buffer(std::size_t len) {
        const std::uint64_t a = kGuestBase + next_buffer;
        next_buffer += (len + 63) & ~std::size_t{63};
        return a;
    }
    // One virtio_pcidev message; a read's answer.
    std::vector<std::byte> access(std::uint8_t op, std::uint64_t addr, std::uint32_t size,
                                  const std::vector<std::byte>& data = {}) {
        const std::uint64_t msg = buffer(16 + data.size());
        std::byte* m = at(msg);
        std::memset(m, 0, 16);
        m[0] = std::byte{op};
        std::memcpy(m + 4, &size, 4);
        std::memcpy(m + 8, &addr, 8);
        if (!data.empty()) std::memcpy(m + 16, data.data(), data.size());
        const bool read = op == 1 || op == 3;
        const std::uint64_t out = buffer(size);
        std::memset(at(out), 0xee, size);
        std::vector<piece> chain = {{msg, static_cast<std::uint32_t>(16 + data.size()), false}};
        if (read) chain.push_back({out, size, true});
        post(0, chain);
        const long len = wait_used(0);
        REQUIRE(len >= 0);
        if (!read) return {};
        CHECK(len == size);
        return std::vector<std::byte>(at(out), at(out) + size);
    }
    std::uint32_t read32(std::uint8_t op, std::uint64_t addr) {
        const auto v = access(op, addr, 4);
        std::uint32_t x;
        std::memcpy(&x, v.data(), 4);
        return x;
    }
    void write32(std::uint8_t op, std::uint64_t addr, std::uint32_t value) {
        std::vector<std::byte> d(4);
        std::memcpy(d.data(), &value, 4);
        access(op, addr, 4, d);
    }
};

constexpr std::uint8_t CFG_READ = 1, CFG_WRITE = 2, MMIO_READ = 3, MMIO_WRITE = 4;

struct rig {
    std::unique_ptr<device> dev;
    std::unique_ptr<uml::pci_function> fn;
    std::atomic<bool> stop{false}, finished{false};
    std::thread server;
    cxv::status result = cxv::done{};
    std::string path;
    rig() {
        // A short path (a socket's is at most 107 bytes; TEST_TMPDIR's are longer), by PID.
        path = "/tmp/cxv-vhost-pci-" + std::to_string(::getpid()) + ".sock";
        auto d = device::create(device_config{});
        REQUIRE(d);
        dev = std::move(d).value();
        auto f = uml::pci_function::create(*dev, path);
        REQUIRE_MESSAGE(f, (f ? "" : f.error().message));
        fn = std::move(f).value();
        server = std::thread([this] {
            result = fn->run(stop);
            finished = true;
        });
    }
    ~rig() {
        stop = true;
        server.join();
    }
};

}  // namespace

TEST_CASE("config space and BAR0 through virtio_pcidev messages, as UML's virt-pci sends them") {
    rig r;
    frontend f(r.path);
    f.set_up();
    // Config space: the IDs a ConnectX function has (PCI 3.0 6.2.1), as the model's
    // config space holds them.
    std::uint32_t ids = 0;
    r.dev->pci_config().read(0, &ids, 4);
    CHECK(f.read32(CFG_READ, 0) == ids);
    CHECK((ids & 0xffff) == 0x15b3);
    // BAR0 decodes only once memory space is enabled: all ones before.
    CHECK(f.read32(MMIO_READ, 0) == 0xffffffffu);
    f.write32(CFG_WRITE, 4, 0x6);  // command: memory space, bus master
    // The initialization segment's first dword (fw_rev, big-endian in BAR memory) as it is.
    std::uint32_t fw = 0;
    std::memcpy(&fw, r.dev->bar().base(), 4);
    CHECK(f.read32(MMIO_READ, 0) == fw);
    // A write lands in BAR0 as a store would (a UAR page's doorbell area here).
    const std::uint64_t uar = std::uint64_t{r.dev->config().first_uar} * 4096 + 0x800;
    f.write32(MMIO_WRITE, uar, 0x12345678);
    std::uint32_t seen = 0;
    std::memcpy(&seen, r.dev->bar().base() + uar, 4);
    CHECK(seen == 0x12345678);
    CHECK(f.read32(MMIO_READ, uar) == 0x12345678);
    // Outside BAR0: all ones, nothing written.
    CHECK(f.read32(MMIO_READ, r.dev->bar().size()) == 0xffffffffu);
}

TEST_CASE("an MSI-X vector the model raises is an MSI message with the table's address and data; masked, it waits") {
    rig r;
    frontend f(r.path);
    f.set_up();
    f.write32(CFG_WRITE, 4, 0x6);
    // MSI-X on (message control, capability + 2, bit 15), vector 3's entry programmed as
    // UML programs it (address 0xa0000, the data its IRQ number).
    f.write32(CFG_WRITE, config_space::cap_msix, 0x8000u << 16);
    const std::uint64_t entry = config_space::msix_table_offset + 16 * 3;
    f.write32(MMIO_WRITE, entry, 0xa0000);
    f.write32(MMIO_WRITE, entry + 4, 0);
    f.write32(MMIO_WRITE, entry + 8, 42);
    f.write32(MMIO_WRITE, entry + 12, 0);
    auto post_irq_buffer = [&] {
        const std::uint64_t b = f.buffer(20);
        std::memset(f.at(b), 0, 20);
        f.post(1, {{b, 20, true}});
        return b;
    };
    auto check_msi = [&](std::uint64_t b, std::uint32_t data) {
        const long len = f.wait_used(1);
        REQUIRE(len == 20);
        const std::byte* m = f.at(b);
        CHECK(static_cast<int>(m[0]) == 7);  // VIRTIO_PCIDEV_OP_MSI
        std::uint32_t size, got;
        std::uint64_t addr;
        std::memcpy(&size, m + 4, 4);
        std::memcpy(&addr, m + 8, 8);
        std::memcpy(&got, m + 16, 4);
        CHECK(size == 4);
        CHECK(addr == 0xa0000);
        CHECK(got == data);
    };
    const std::uint64_t b1 = post_irq_buffer();
    REQUIRE(r.dev->msix().signal(3));
    check_msi(b1, 42);

    // Masked (vector control bit 0): nothing comes, the PBA shows it pending; unmasked,
    // it comes.
    f.write32(MMIO_WRITE, entry + 12, 1);
    const std::uint64_t b2 = post_irq_buffer();
    REQUIRE(r.dev->msix().signal(3));
    std::this_thread::sleep_for(300ms);
    CHECK(f.read32(MMIO_READ, config_space::msix_pba_offset) == (1u << 3));
    f.write32(MMIO_WRITE, entry + 12, 0);
    check_msi(b2, 42);

    // Raised with no irq buffer posted: it waits for one.
    REQUIRE(r.dev->msix().signal(3));
    std::this_thread::sleep_for(200ms);
    const std::uint64_t b3 = post_irq_buffer();
    check_msi(b3, 42);
}

TEST_CASE("a chain outside the shared memory is given back empty and the queue goes on; the frontend's going ends the session") {
    rig r;
    {
        frontend f(r.path);
        f.set_up();
        f.post(0, {{kGuestBase + kGuestSize + 0x1000, 16, false}});
        CHECK(f.wait_used(0) == 0);
        f.write32(CFG_WRITE, 4, 0x6);
        CHECK((f.read32(CFG_READ, 4) & 0xffff) == 0x6u);  // the next message is served
    }
    // The frontend closed its socket: run() returns by itself, successfully.
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (!r.finished && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(10ms);
    CHECK(r.finished);
    CHECK(r.result.ok());
}
