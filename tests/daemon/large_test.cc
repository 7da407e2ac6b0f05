// Commands too large for one message (docs/daemon.md, "Large commands"): a memory key
// over 1 GiB of a client's memfd has a CREATE_MKEY input of 2 MiB (one 8-byte MTT entry
// per 4 KiB page, PRM "CREATE_MKEY"), which goes to the daemon in a sealed memfd
// (COMMAND_FD). The key is then used by an RDMA WRITE at its last page. Beside it: a
// send the kernel refuses leaves the client's sequence where it was, a message the
// daemon's receive cut short is answered with its real sequence, a COMMAND_FD with an
// unsealed memfd is refused, and DMA memory allocated through the daemon keeps the IOVA
// alignment asked for.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <doctest/doctest.h>
#include <infiniband/verbs.h>

#include "api/cxv.h"
#include "driver/hca/hca.h"
#include "tests/daemon/rig.h"

using namespace cxv::test;
using namespace std::chrono_literals;

namespace {


// A sealed memfd of `bytes` mapped shared (pages come as they are touched).
struct big_memfd {
    std::size_t size;
    std::byte* mem = nullptr;
    explicit big_memfd(std::size_t bytes) : size(bytes) {
        const int fd = ::memfd_create("cxv-large", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, static_cast<off_t>(bytes)) == 0);
        REQUIRE(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
        void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        REQUIRE(m != MAP_FAILED);
        ::close(fd);
        mem = static_cast<std::byte*>(m);
    }
    ~big_memfd() { ::munmap(mem, size); }
    big_memfd(const big_memfd&) = delete;
    big_memfd& operator=(const big_memfd&) = delete;
};

template <typename T>
T take(cxv::result<T> r, const char* what) {
    REQUIRE_MESSAGE(r, what, ": ", r.error().message);
    return std::move(r).value();
}

}  // namespace

TEST_CASE("a 1 GiB memfd registered through cxvd (CREATE_MKEY in a sealed memfd) takes an RDMA WRITE at its last page") {
    constexpr std::size_t kBig = std::size_t{1} << 30, kSmall = 64 * 1024, kLen = 4096;
    // The model keeps a key's MTT in firmware pages (ICM) the driver gave it: 2 MiB of
    // MTT needs 512 pages at once, more than it asks for as it goes.
    daemon_rig rig({"--quota-pinned-bytes", std::to_string(std::uint64_t{4} << 30)}, {"--set", "init_pages=1024"});
    daemon_env env(rig.sock);
    test_client watcher(rig.sock);
    auto dev = take(cxv::device::open(""), "cxv::device::open through cxvd");
    auto pd = take(dev->alloc_pd(), "alloc_pd");
    auto cq = take(cxv::cq::create(*dev, 64), "cq::create");
    big_memfd big(kBig), small(kSmall);
    auto big_mr = take(cxv::mr::create(pd, big.mem, kBig, cxv::access_local_write | cxv::access_remote_write),
                       "mr::create of 1 GiB");
    auto small_mr = take(cxv::mr::create(pd, small.mem, kSmall, cxv::access_local_write), "mr::create");
    // The daemon's books: both keys and every byte of both files pinned.
    const auto s = watcher.status();
    const auto* me = find_client(s, ::getpid());
    REQUIRE(me != nullptr);
    std::uint64_t pinned = 0, mkeys = 0;
    for (const auto& c : s.clients) {
        if (c.pid == ::getpid()) pinned += c.pinned, mkeys += c.mkeys;
    }
    CHECK(mkeys == 2);
    CHECK(pinned >= kBig + kSmall);

    // Two RC QPs of this process, connected to each other on the daemon's function.
    cxv::qp::attr qa;
    qa.domain = pd;
    qa.send_cq = cq;
    qa.recv_cq = cq;
    auto a = take(cxv::qp::create(*dev, qa), "qp::create");
    auto b = take(cxv::qp::create(*dev, qa), "qp::create");
    cxv::qp::modify_attr ma;
    ma.access = cxv::access_local_write | cxv::access_remote_write;
    ma.path_mtu = 3;
    ma.ah.dgid = take(dev->gid(0), "gid 0");
    ma.min_rnr_timer = 1;
    ma.timeout = 10;
    ma.retry_cnt = 7;
    ma.rnr_retry = 7;
    for (auto [q, other] : {std::pair{a, b}, std::pair{b, a}}) {
        ma.dest_qpn = other->qpn();
        for (auto to : {cxv::qp_state::init, cxv::qp_state::rtr, cxv::qp_state::rts}) {
            auto st = q->modify(to, ma);
            REQUIRE_MESSAGE(st, st.error().message);
        }
    }
    for (std::size_t j = 0; j < kLen; ++j) small.mem[j] = std::byte{static_cast<std::uint8_t>(j * 13 + 7)};
    std::byte* last = big.mem + kBig - kLen;
    std::memset(last, 0, kLen);
    ibv_sge sge{reinterpret_cast<std::uint64_t>(small.mem), kLen, small_mr->lkey()};
    ibv_send_wr wr{};
    wr.wr_id = 42;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<std::uint64_t>(last);
    wr.wr.rdma.rkey = big_mr->rkey();
    ibv_send_wr* bad = nullptr;
    REQUIRE(a->post_send(&wr, &bad) == 0);
    ibv_wc wc{};
    const auto end = std::chrono::steady_clock::now() + 20s;
    int got = 0;
    while ((got = cq->poll(1, &wc)) == 0 && std::chrono::steady_clock::now() < end) std::this_thread::yield();
    REQUIRE(got == 1);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.wr_id == 42);
    CHECK(std::memcmp(last, small.mem, kLen) == 0);
    // The byte before the page was not written.
    CHECK(*(last - 1) == std::byte{0});
}

TEST_CASE("a refused send leaves the sequence, a cut message is answered with its sequence, a COMMAND_FD is checked") {
    daemon_rig rig;
    test_client c(rig.sock);
    const auto seq = c.c.next_seq();
    // Larger than the socket's send buffer: the kernel refuses it; nothing went out.
    std::vector<std::byte> huge(std::size_t{8} << 20);
    auto r = c.c.call(d::msg_type::status, huge);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EMSGSIZE);
    CHECK(c.c.next_seq() == seq);
    CHECK(c.status().clients_total == 1);  // in step still
    // Over the daemon's 64 KiB but within the socket's buffer: the daemon's receive cuts
    // it (MSG_TRUNC) and answers EMSGSIZE with the request's own sequence; the session
    // moved on with the client.
    std::vector<std::byte> over(d::max_message_bytes + 1000);
    auto o = c.c.call(d::msg_type::status, over);
    REQUIRE_MESSAGE(o, o.error().message);
    CHECK(o->err == EMSGSIZE);
    CHECK(c.c.next_seq() == seq + 2);
    CHECK(c.status().clients_total == 1);

    // COMMAND_FD: an unsealed memfd is refused (EPERM), a short one too (EINVAL); a
    // sealed one runs (ALLOC_PD here) and the session goes on.
    const auto in = cxv::driver::command<ifc::alloc_pd_in>(cmd_opcode::ALLOC_PD);
    const d::command_fd_req req{0, ifc::alloc_pd_out::size_bytes, static_cast<std::uint32_t>(in.size())};
    {
        shared_memory plain(4096, false);
        std::memcpy(plain.addr, in.data(), in.size());
        const int fds[] = {plain.fd};
        CHECK(c.call(d::msg_type::command_fd, d::body(req), fds).err == EPERM);
    }
    auto sealed = d::sealed_memfd(in);
    REQUIRE(sealed);
    const int fds[] = {sealed->get()};
    auto too_long = req;
    too_long.in_len = 4096;
    CHECK(c.call(d::msg_type::command_fd, d::body(too_long), fds).err == EINVAL);
    CHECK(c.call(d::msg_type::command_fd, d::body(req)).err == EBADF);  // no fd
    auto ok = c.call(d::msg_type::command_fd, d::body(req), fds);
    REQUIRE_MESSAGE(ok.err == 0, ok.text);
    CHECK(ok.payload.size() == ifc::alloc_pd_out::size_bytes);
    CHECK(find_client(c.status(), ::getpid())->pds == 1);
}

TEST_CASE("DMA memory allocated through cxvd keeps the IOVA alignment asked for") {
    daemon_rig rig;
    daemon_env env(rig.sock);
    auto dev = take(cxv::device::open(""), "cxv::device::open through cxvd");
    auto& vdev = dev->hca().device();
    for (std::size_t align : {std::size_t{1} << 16, std::size_t{1} << 21, std::size_t{1} << 24}) {
        std::vector<cxv::driver::vfio::dma_buffer> keep;
        for (int i = 0; i < 3; ++i) {
            auto b = vdev.alloc_dma(align, align);
            REQUIRE_MESSAGE(b, b.error().message);
            CHECK_MESSAGE(b->iova() % align == 0, "IOVA 0x", std::hex, b->iova(), " for alignment 0x", align);
            keep.push_back(std::move(b).value());
        }
    }
    auto bad = vdev.alloc_dma(4096, 12345);
    CHECK_FALSE(bad);
    // An alignment beyond the length would hold IOVA space the quota does not count.
    auto wide = vdev.alloc_dma(4096, std::size_t{1} << 30);
    REQUIRE_FALSE(wide);
    CHECK(wide.error().code == EINVAL);
    CHECK(vdev.alloc_dma(4096, std::size_t{2} << 20).error().code == EINVAL);
    CHECK(vdev.alloc_dma(std::size_t{3} << 20, std::size_t{4} << 20).error().code == EINVAL);
}
