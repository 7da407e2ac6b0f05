// A host-side peer for perftest's latency tools (ib_write_lat, ib_read_lat,
// ib_atomic_lat) on cxv's C++ API: the other end of a perftest run in a QEMU guest with
// Linux's Soft-RoCE (tests/qemu/rxe_guest.sh), the guest's NIC cabled to a RoCE port of
// the model's fabric. It speaks perftest's out-of-band exchange over TCP and performs the
// test's RDMA operations, and it checks the data perftest itself never looks at.
//
//   cxv-sim run --fabric DIR --port-type eth -- rxe_perf_peer BDF TEST ROLE HOST:PORT [options]
//     TEST      write | read | atomic (ib_write_lat, ib_read_lat, ib_atomic_lat)
//     ROLE      client (the guest runs the perftest server; we connect to HOST:PORT) or
//               server (we listen on HOST:PORT; the guest runs the perftest client)
//     -s SIZE   message size (perftest's -s; default 2, atomic always 8)
//     -n ITERS  iterations (perftest's -n; default 1000)
//     -g INDEX  our GID index (perftest's -x; default 0)
//     -t SECS   give up after this long without progress (default 60)
//
// The exchange (perftest's ethernet path, no RDMA CM), each step written by the client
// first and answered by the server: 16 bytes of version text; the page size and cache
// line size as 4-byte big-endian ints; the active MTU as 2 bytes of decimal text (the
// IBV_MTU enum); then 108-byte "keys" messages
// "LID:OUT_READS:QPN:PSN:RKEY:VADDR:GID0:...:GID15:SRQN:" (hex, 4/4/6/6/8/16/2.../8
// digits, NUL-terminated) four times: twice before the QP is connected, once after, once
// after RTR. ib_read_lat and ib_atomic_lat end with one more keys exchange and "done";
// their server does nothing but wait for it. Each side's region is two 4096-byte halves:
// what it sends from (or READs/fetches into) at the start, what the peer targets
// (the advertised VADDR) at 4096.
//
// Checks: write: each RDMA WRITE from the guest carries its zeroed send area with the
// iteration count in the last byte (the count it polls on, which proves the data
// arrived); read, client: every READ of the guest's region returns the same bytes, none
// left as our fill; atomic, client: the fetched values rise by exactly 1 (FETCH_AND_ADD
// of 1); atomic, server: our 8 bytes rose by ITERS; read, server: the guest finished.
#include <arpa/inet.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "api/cxv.h"
#include "tests/program_util.h"

namespace {

using clk = std::chrono::steady_clock;

using cxv::test::die;
using cxv::test::must;

enum class test { write, read, atomic };

struct options {
    std::string bdf, host, port;
    test kind = test::write;
    bool server = false;
    unsigned size = 2, iters = 1000, gid_index = 0, timeout_s = 60;
};

options parse(int argc, char** argv) {
    options o;
    for (int c; (c = getopt(argc, argv, "s:n:g:t:")) != -1;) {
        switch (c) {
        case 's': o.size = static_cast<unsigned>(std::stoul(optarg)); break;
        case 'n': o.iters = static_cast<unsigned>(std::stoul(optarg)); break;
        case 'g': o.gid_index = static_cast<unsigned>(std::stoul(optarg)); break;
        case 't': o.timeout_s = static_cast<unsigned>(std::stoul(optarg)); break;
        default: std::exit(2);
        }
    }
    if (argc - optind != 4) die("usage: rxe_perf_peer BDF write|read|atomic client|server HOST:PORT [-s] [-n] [-g] [-t]");
    o.bdf = argv[optind];
    const std::string t = argv[optind + 1], r = argv[optind + 2], hp = argv[optind + 3];
    if (t == "write") o.kind = test::write;
    else if (t == "read") o.kind = test::read;
    else if (t == "atomic") o.kind = test::atomic;
    else die("TEST is write, read or atomic, not " + t);
    if (r != "client" && r != "server") die("ROLE is client or server, not " + r);
    o.server = r == "server";
    const auto colon = hp.rfind(':');
    if (colon == std::string::npos) die("HOST:PORT expected, not " + hp);
    o.host = hp.substr(0, colon);
    o.port = hp.substr(colon + 1);
    if (o.kind == test::atomic) o.size = 8;  // perftest's atomic operand
    if (o.size == 0 || o.size > 4096 || o.iters == 0) die("-s must be 1..4096 and -n positive");
    return o;
}

// The out-of-band connection: exact reads and writes, bounded by SO_RCVTIMEO.
struct oob {
    int fd = -1;
    bool client = true;

    void send(const void* p, std::size_t n) const {
        auto c = static_cast<const char*>(p);
        while (n) {
            const ssize_t w = ::write(fd, c, n);
            if (w <= 0) die("out-of-band write failed");
            c += w;
            n -= static_cast<std::size_t>(w);
        }
    }
    void recv(void* p, std::size_t n) const {
        auto c = static_cast<char*>(p);
        while (n) {
            const ssize_t r = ::read(fd, c, n);
            if (r <= 0) die(r == 0 ? "the peer closed the out-of-band connection" : "out-of-band read failed");
            c += r;
            n -= static_cast<std::size_t>(r);
        }
    }
    // perftest's order: the client writes, then reads; the server reads, then writes.
    void exchange(const void* mine, void* theirs, std::size_t n) const {
        if (client) {
            send(mine, n);
            recv(theirs, n);
        } else {
            recv(theirs, n);
            send(mine, n);
        }
    }
};

using cxv::test::bound_receives;

// The client connects until the guest's server listens; a forwarded port that accepts
// and closes at once (nobody listening in the guest yet) is retried. The first 16 bytes
// (the version exchange) are done here, since that is where such a close shows.
oob connect_client(const options& o, const char (&version)[16], char (&their_version)[16]) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (int e = getaddrinfo(o.host.c_str(), o.port.c_str(), &hints, &res); e != 0)
        die(o.host + ":" + o.port + ": " + gai_strerror(e));
    const auto end = clk::now() + std::chrono::seconds(o.timeout_s);
    for (;;) {
        const int fd = cxv::test::connect_first(res, o.timeout_s);
        if (fd >= 0) {
            if (::write(fd, version, sizeof version) == sizeof version) {
                std::size_t got = 0;
                ssize_t r = 1;
                while (got < sizeof their_version && r > 0) {
                    errno = 0;
                    r = ::read(fd, their_version + got, sizeof their_version - got);
                    if (r > 0) got += static_cast<std::size_t>(r);
                }
                if (got == sizeof their_version) {
                    freeaddrinfo(res);
                    return oob{fd, true};
                }
                // Closed or reset before any byte: nobody listens in the guest yet.
                if (got != 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)))
                    die("the perftest server broke off the version exchange");
            }
            ::close(fd);
        }
        if (clk::now() > end) die("no perftest server answered at " + o.host + ":" + o.port);
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
}

oob accept_server(const options& o, const char (&version)[16], char (&their_version)[16]) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    if (int e = getaddrinfo(o.host.c_str(), o.port.c_str(), &hints, &res); e != 0)
        die(o.host + ":" + o.port + ": " + gai_strerror(e));
    const int ls = ::socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ls < 0 || ::bind(ls, res->ai_addr, res->ai_addrlen) != 0 || ::listen(ls, 1) != 0)
        die("cannot listen on " + o.host + ":" + o.port + ": " + std::strerror(errno));
    freeaddrinfo(res);
    std::printf("listening on %s:%s\n", o.host.c_str(), o.port.c_str());
    std::fflush(stdout);
    bound_receives(ls, o.timeout_s);  // bounds accept too
    const int fd = ::accept(ls, nullptr, nullptr);
    if (fd < 0) die("no perftest client connected within " + std::to_string(o.timeout_s) + " s");
    ::close(ls);
    bound_receives(fd, o.timeout_s);
    oob c{fd, false};
    c.recv(their_version, sizeof their_version);
    c.send(version, sizeof version);
    return c;
}

struct keys {
    unsigned lid = 0, out_reads = 0, qpn = 0, psn = 0, rkey = 0, srqn = 0;
    unsigned long long vaddr = 0;
    std::array<std::uint8_t, 16> gid{};
};

constexpr std::size_t keys_len = 108;

void format_keys(const keys& k, char (&msg)[keys_len]) {
    int n = std::snprintf(msg, sizeof msg, "%04x:%04x:%06x:%06x:%08x:%016llx:", k.lid, k.out_reads, k.qpn, k.psn,
                          k.rkey, k.vaddr);
    for (auto b : k.gid) n += std::snprintf(msg + n, sizeof msg - n, "%02x:", b);
    std::snprintf(msg + n, sizeof msg - n, "%08x:", k.srqn);
}

keys parse_keys(const char (&msg)[keys_len]) {
    std::string s(msg, strnlen(msg, keys_len));
    keys k;
    unsigned g[16];
    const int n = std::sscanf(s.c_str(),
                              "%x:%x:%x:%x:%x:%llx:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:", &k.lid,
                              &k.out_reads, &k.qpn, &k.psn, &k.rkey, &k.vaddr, &g[0], &g[1], &g[2], &g[3], &g[4],
                              &g[5], &g[6], &g[7], &g[8], &g[9], &g[10], &g[11], &g[12], &g[13], &g[14], &g[15],
                              &k.srqn);
    if (n != 23) die("cannot parse perftest's keys \"" + s + "\"");
    for (int i = 0; i < 16; ++i) k.gid[i] = static_cast<std::uint8_t>(g[i]);
    return k;
}

keys hand_shake(const oob& c, const keys& mine) {
    char out[keys_len] = {}, in[keys_len] = {};
    format_keys(mine, out);
    c.exchange(out, in, keys_len);
    return parse_keys(in);
}

std::string gid_text(const std::uint8_t* gid) {
    char s[INET6_ADDRSTRLEN];
    return inet_ntop(AF_INET6, gid, s, sizeof s) ? s : "?";
}

constexpr std::size_t half = 4096;  // perftest's cycle buffer: one page

}  // namespace

int main(int argc, char** argv) {
    cxv::test::program_name = "rxe_perf_peer";
    const options o = parse(argc, argv);
    setvbuf(stdout, nullptr, _IOLBF, 0);

    auto dev = must(cxv::device::open(o.bdf), "open");
    const cxv::port_info port = must(dev->port(1), "query_port");
    if (!port.ethernet) die("port 1 is not RoCE (cxv-sim run --port-type eth)");
    const auto my_gid = must(dev->gid(o.gid_index), "query the GID");

    // The region: [0, 4096) what we send from or READ/fetch into, [4096, 8192) the target
    // the guest's operations name.
    alignas(4096) static std::uint8_t buf[2 * half];
    std::uint8_t* const local = buf;
    std::uint8_t* const target = buf + half;
    std::memset(buf, 0, sizeof buf);
    const std::uint64_t atomic_start = 0x1122334455667788ull;
    if (o.kind == test::read)
        for (std::size_t i = 0; i < half; ++i) target[i] = static_cast<std::uint8_t>(i * 7 + 3);
    if (o.kind == test::atomic) std::memcpy(target, &atomic_start, 8);

    auto pd = must(dev->alloc_pd(), "alloc_pd");
    const unsigned remote = o.kind == test::write ? cxv::access_remote_write
                            : o.kind == test::read ? cxv::access_remote_read
                                                   : cxv::access_remote_atomic;
    auto mr = must(cxv::mr::create(pd, buf, sizeof buf, cxv::access_local_write | remote), "reg_mr");
    auto cq = must(cxv::cq::create(*dev, 16), "create_cq");
    cxv::qp::attr qa;
    qa.type = cxv::qp_type::rc;
    qa.domain = pd;
    qa.send_cq = qa.recv_cq = cq;
    qa.cap = {4, 1, 1, 1, 0};
    auto qp = must(cxv::qp::create(*dev, qa), "create_qp");
    cxv::qp::modify_attr m;
    m.access = remote;
    must(qp->modify(cxv::qp_state::init, m), "INIT");

    // perftest 4.5's version text (it refuses anything below 5.70), then its system data.
    char version[16] = "6.06", their_version[16] = {};
    oob c = o.server ? accept_server(o, version, their_version) : connect_client(o, version, their_version);
    their_version[15] = '\0';
    std::printf("perftest version %s at the other end\n", their_version);
    const std::uint32_t page = htonl(half), line = htonl(64);
    std::uint32_t their_page = 0, their_line = 0;
    c.exchange(&page, &their_page, 4);
    c.exchange(&line, &their_line, 4);
    if (ntohl(their_page) > half) die("the guest's page size " + std::to_string(ntohl(their_page)) + " is not 4096");
    // The MTU as ibv_mtu's number in text; both take the smaller. 3 = 1024 (rxe on a
    // 1500-byte Ethernet MTU).
    char mtu[2] = {'3', '\0'}, their_mtu[2] = {};
    c.exchange(mtu, their_mtu, 2);
    const unsigned path_mtu = std::min(3u, static_cast<unsigned>(std::strtoul(std::string(their_mtu, 1).c_str(), nullptr, 10)));
    if (path_mtu < 1) die("the guest's MTU \"" + std::string(their_mtu, 1) + "\" is not an ibv_mtu");

    keys mine;
    mine.lid = port.lid;
    mine.out_reads = 1;
    mine.qpn = qp->qpn();
    mine.psn = std::random_device{}() & 0xffffff;
    mine.rkey = mr->rkey();
    mine.vaddr = reinterpret_cast<std::uintptr_t>(target);
    mine.gid = my_gid;
    keys peer = hand_shake(c, mine);
    peer = hand_shake(c, mine);
    std::printf(" local address: LID %#06x QPN %#08x PSN %#08x RKey %#010x VAddr %#018llx GID %s\n", mine.lid, mine.qpn,
                mine.psn, mine.rkey, mine.vaddr, gid_text(mine.gid.data()).c_str());
    std::printf(" remote address: LID %#06x QPN %#08x PSN %#08x RKey %#010x VAddr %#018llx GID %s OUT_READS %u\n",
                peer.lid, peer.qpn, peer.psn, peer.rkey, peer.vaddr, gid_text(peer.gid.data()).c_str(),
                peer.out_reads);

    // As perftest connects an RC QP on RoCE: the peer by GID (a GRH, IBA "Global Route
    // Header"; on RoCEv2 the IP header), hop limit 255.
    m.path_mtu = path_mtu;
    m.dest_qpn = peer.qpn;
    m.rq_psn = peer.psn;
    m.max_dest_rd_atomic = 1;
    m.min_rnr_timer = 12;
    m.ah.dlid = static_cast<std::uint16_t>(peer.lid);
    m.ah.grh = true;
    m.ah.dgid = peer.gid;
    m.ah.sgid_index = static_cast<std::uint8_t>(o.gid_index);
    m.ah.hop_limit = 255;
    must(qp->modify(cxv::qp_state::rtr, m), "RTR");
    // A guest under TCG can take longer than perftest's 67 ms (timeout 14) to answer.
    m.timeout = 18;
    m.sq_psn = mine.psn;
    m.max_rd_atomic = 1;
    must(qp->modify(cxv::qp_state::rts, m), "RTS");
    hand_shake(c, mine);  // after both sides connected
    hand_shake(c, mine);  // after RTR

    ibv_sge sge{reinterpret_cast<std::uint64_t>(local), o.size, mr->lkey()};
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (o.kind == test::atomic) {
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.remote_addr = peer.vaddr;
        wr.wr.atomic.rkey = peer.rkey;
        wr.wr.atomic.compare_add = 1;
    } else {
        wr.opcode = o.kind == test::write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
        wr.wr.rdma.remote_addr = peer.vaddr;
        wr.wr.rdma.rkey = peer.rkey;
    }
    auto post = [&] {
        ibv_send_wr* bad = nullptr;
        if (int e = qp->post_send(&wr, &bad)) die(std::string("post_send: ") + std::strerror(e));
    };
    auto progress = clk::now();
    auto stalled = [&](const std::string& what) {
        if (clk::now() - progress > std::chrono::seconds(o.timeout_s))
            die("nothing for " + std::to_string(o.timeout_s) + " s: " + what);
    };
    auto complete = [&](unsigned done) {
        ibv_wc wc;
        int n;
        while ((n = cq->poll(1, &wc)) == 0) stalled("no completion after " + std::to_string(done) + " operations");
        if (wc.status != IBV_WC_SUCCESS)
            die(std::string("completion ") + std::to_string(done + 1) + ": " + cxv::wc_status_str(wc.status));
        progress = clk::now();
    };

    unsigned bad = 0;
    const auto start = clk::now();
    if (o.kind == test::write) {
        // The ping-pong on the last byte: the server writes first (perftest's
        // run_iter_lat_write: its server skips the first wait); each side writes count n
        // once it saw the peer's n - 1 (the client: once it saw n).
        std::uint8_t* const post_byte = local + o.size - 1;
        const std::atomic_ref<std::uint8_t> poll_byte(target[o.size - 1]);
        for (unsigned n = 1; n <= o.iters; ++n) {
            auto await = [&](unsigned want) {
                while (poll_byte.load(std::memory_order_acquire) != static_cast<std::uint8_t>(want))
                    stalled("waiting for the guest's WRITE " + std::to_string(want));
                progress = clk::now();
                for (unsigned i = 0; i + 1 < o.size; ++i) bad += target[i] != 0;
            };
            if (!o.server) await(n);
            *post_byte = static_cast<std::uint8_t>(n);
            post();
            complete(n - 1);
            if (o.server) await(n);
        }
    } else if (!o.server) {
        std::uint8_t first[half];
        std::uint64_t first_value = 0;
        for (unsigned n = 0; n < o.iters; ++n) {
            std::memset(local, 0xa5, o.size);
            post();
            complete(n);
            if (o.kind == test::read) {
                if (n == 0) {
                    std::memcpy(first, local, o.size);
                    unsigned fill = 0;
                    for (unsigned i = 0; i < o.size; ++i) fill += local[i] == 0xa5;
                    if (fill == o.size && o.size >= 4) die("the READs left our buffer as it was");
                } else {
                    bad += std::memcmp(first, local, o.size) != 0;
                }
            } else {
                std::uint64_t v;
                std::memcpy(&v, local, 8);
                if (n == 0) first_value = v;
                else bad += v != first_value + n;
            }
        }
    }
    const double s = std::chrono::duration<double>(clk::now() - start).count();
    if (o.kind != test::write) {
        // The end: one more keys exchange (the server waits there for the client's
        // test), then "done".
        hand_shake(c, mine);
        // Both ends write it and neither reads it: the other end may be gone already.
        (void)::send(c.fd, "done", sizeof "done", MSG_NOSIGNAL);
    }
    ::close(c.fd);
    if (o.server && o.kind == test::atomic) {
        std::uint64_t v;
        std::memcpy(&v, target, 8);
        std::printf("our 8 bytes: %#llx, from %#llx\n", static_cast<unsigned long long>(v),
                    static_cast<unsigned long long>(atomic_start));
        if (v != atomic_start + o.iters)
            die("the guest's FETCH_AND_ADDs moved our value by " + std::to_string(v - atomic_start) + ", not " +
                std::to_string(o.iters));
    }
    if (!(o.server && o.kind != test::write))
        std::printf("%s %s: %u iters in %.2f seconds = %.2f usec/iter%s\n",
                    o.kind == test::write ? "write" : o.kind == test::read ? "read" : "atomic",
                    o.server ? "server" : "client", o.iters, s, s * 1e6 / o.iters,
                    o.kind == test::write ? " (a round trip of two WRITEs; perftest prints half)" : "");
    if (bad) die(std::to_string(bad) + " checks of the data failed");
    std::printf("data checked: ok\n");
    return 0;
}
