// The client half of ibv_rc_pingpong and, with --ud, of ibv_ud_pingpong (rdma-core's
// libibverbs/examples) written on cxv's C++ API: a host-side peer for an
// `ibv_rc_pingpong -d rxe0 -g G` (or ibv_ud_pingpong) server in a QEMU guest
// running Linux's Soft-RoCE (tests/qemu/rxe_guest.sh), the guest's NIC cabled to a RoCE
// port of the model's fabric. The out-of-band exchange goes over TCP to the server's port,
// forwarded to the host's loopback (rxe_guest.sh --forward), the ping-pongs over RoCEv2.
//
//   cxv-sim run --fabric DIR --port-type eth -- rxe_peer BDF 127.0.0.1:PORT [options]
//     -s SIZE   message size (the server's -s; default 4096)
//     -n ITERS  exchanges (the server's -n; default 1000)
//     -g INDEX  our GID index (default 0: fe80::EUI-64 of the port's MAC)
//     --gid GID the GID we announce (default: the device's GID of index -g; the
//               device programmed it at open)
//     -m MTU    path MTU in bytes, 256..4096 (the server's -m; default 1024)
//     -t SECS   give up after this long without progress (default 30)
//     --ud      ibv_ud_pingpong's client: UD sends to the server's QPN with Q_Key
//               0x11111111, receive buffers of SIZE + 40 (the GRH space); SIZE must fit
//               the path MTU (the server's -s, e.g. 512)
//
// The exchange, as rc_pingpong's client does it: connect, send our
// "LID:QPN:PSN:GID" (%04x:%06x:%06x:%s, the GID as 32 hex digits of its bytes in order)
// with its terminating NUL (52 bytes), read the server's (52 bytes), send "done" with its
// NUL; then bring the QP to RTS and send first. Each side sends the next message once its
// last send completed and a message arrived, ITERS of each; the payload is 0x7b bytes.
#include <arpa/inet.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/cxv.h"
#include "tests/program_util.h"

namespace {

using clk = std::chrono::steady_clock;

using cxv::test::die;
using cxv::test::must;

struct options {
    std::string bdf, host, port;
    unsigned size = 4096, iters = 1000, rx_depth = 500;
    unsigned gid_index = 0;
    std::string gid;  // empty: the port's GID 0
    unsigned mtu = 1024;
    unsigned timeout_s = 30;
    bool ud = false;
};

// ibv_ud_pingpong's Q_Key, and the GRH space at the start of every UD receive buffer
// (IBA "Datagram" receive: the first 40 bytes hold the GRH, on RoCEv2 the IP header).
constexpr std::uint32_t ud_qkey = 0x11111111;
constexpr unsigned grh_bytes = 40;

// ibv_mtu's numbering (1 = 256 .. 5 = 4096), which qp::modify_attr::path_mtu takes.
unsigned mtu_enum(unsigned bytes) {
    for (unsigned e = 1, b = 256; e <= 5; ++e, b *= 2)
        if (b == bytes) return e;
    die("-m takes 256, 512, 1024, 2048 or 4096");
}

options parse(int argc, char** argv) {
    options o;
    static const option longs[] = {
        {"gid", required_argument, nullptr, 'G'}, {"ud", no_argument, nullptr, 'U'}, {nullptr, 0, nullptr, 0}};
    for (int c; (c = getopt_long(argc, argv, "s:n:g:m:t:", longs, nullptr)) != -1;) {
        switch (c) {
        case 's': o.size = static_cast<unsigned>(std::stoul(optarg)); break;
        case 'n': o.iters = static_cast<unsigned>(std::stoul(optarg)); break;
        case 'g': o.gid_index = static_cast<unsigned>(std::stoul(optarg)); break;
        case 'G': o.gid = optarg; break;
        case 'U': o.ud = true; break;
        case 'm': o.mtu = static_cast<unsigned>(std::stoul(optarg)); break;
        case 't': o.timeout_s = static_cast<unsigned>(std::stoul(optarg)); break;
        default: std::exit(2);
        }
    }
    if (argc - optind != 2)
        die("usage: rxe_peer BDF HOST:PORT [-s size] [-n iters] [-g index] [--gid GID] [-m mtu] [-t secs] [--ud]");
    o.bdf = argv[optind];
    const std::string hp = argv[optind + 1];
    const auto colon = hp.rfind(':');
    if (colon == std::string::npos) die("HOST:PORT expected, not " + hp);
    o.host = hp.substr(0, colon);
    o.port = hp.substr(colon + 1);
    if (o.size == 0 || o.iters == 0) die("-s and -n must be positive");
    return o;
}

// The pingpong tools' wire form of a GID: its 16 bytes as 32 hex digits, in order.
std::string gid_to_wire(const std::uint8_t (&gid)[16]) {
    char s[33];
    for (int i = 0; i < 16; ++i) std::snprintf(s + 2 * i, 3, "%02x", gid[i]);
    return s;
}

bool wire_to_gid(const char* s, std::array<std::uint8_t, 16>& gid) {
    if (std::strlen(s) != 32) return false;
    for (int i = 0; i < 16; ++i) {
        unsigned v = 0;
        if (std::sscanf(s + 2 * i, "%2x", &v) != 1) return false;
        gid[i] = static_cast<std::uint8_t>(v);
    }
    return true;
}

struct endpoint {
    unsigned lid = 0, qpn = 0, psn = 0;
    std::array<std::uint8_t, 16> gid{};
};

bool write_all(int fd, const void* p, std::size_t n) {
    auto c = static_cast<const char*>(p);
    while (n) {
        const ssize_t w = ::write(fd, c, n);
        if (w <= 0) return false;
        c += w;
        n -= static_cast<std::size_t>(w);
    }
    return true;
}

// Reads exactly n bytes; false on end of stream or error (errno EAGAIN: SO_RCVTIMEO ran
// out).
bool read_all(int fd, void* p, std::size_t n) {
    auto c = static_cast<char*>(p);
    while (n) {
        errno = 0;
        const ssize_t r = ::read(fd, c, n);
        if (r <= 0) return false;
        c += r;
        n -= static_cast<std::size_t>(r);
    }
    return true;
}

// rc_pingpong's client exchange. A forwarded port accepts at once and closes when the
// guest's server is not listening yet: then we connect again. A connection that stays
// open is never abandoned (its data could reach the server later and spend its one
// accept).
endpoint exchange(const options& o, const endpoint& mine, const std::uint8_t (&my_gid)[16]) {
    char msg[sizeof "0000:000000:000000:00000000000000000000000000000000"];
    std::snprintf(msg, sizeof msg, "%04x:%06x:%06x:%s", mine.lid, mine.qpn, mine.psn, gid_to_wire(my_gid).c_str());
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (int e = getaddrinfo(o.host.c_str(), o.port.c_str(), &hints, &res); e != 0)
        die(o.host + ":" + o.port + ": " + gai_strerror(e));
    const auto end = clk::now() + std::chrono::seconds(o.timeout_s);
    char reply[sizeof msg];
    for (;;) {
        const int fd = cxv::test::connect_first(res, o.timeout_s);
        if (fd >= 0 && write_all(fd, msg, sizeof msg)) {
            if (read_all(fd, reply, sizeof reply)) {
                if (!write_all(fd, "done", sizeof "done")) die("cannot send \"done\" to the server");
                ::close(fd);
                break;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                die("the server at " + o.host + ":" + o.port + " did not answer within " +
                    std::to_string(o.timeout_s) + " s");
        }
        if (fd >= 0) ::close(fd);
        if (clk::now() > end) die("no pingpong server answered at " + o.host + ":" + o.port);
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    freeaddrinfo(res);
    reply[sizeof reply - 1] = '\0';
    endpoint peer;
    char gid[33] = {};
    if (std::sscanf(reply, "%x:%x:%x:%32s", &peer.lid, &peer.qpn, &peer.psn, gid) != 4 || !wire_to_gid(gid, peer.gid))
        die(std::string("cannot parse the server's address \"") + reply + "\"");
    return peer;
}

std::string gid_text(const std::uint8_t* gid) {
    char s[INET6_ADDRSTRLEN];
    return inet_ntop(AF_INET6, gid, s, sizeof s) ? s : "?";
}

}  // namespace

int main(int argc, char** argv) {
    cxv::test::program_name = "rxe_peer";
    const options o = parse(argc, argv);

    auto dev = must(cxv::device::open(o.bdf), "open");
    const cxv::port_info port = must(dev->port(1), "query_port");
    if (!port.ethernet) die("port 1 is not RoCE (cxv-sim run --port-type eth)");
    std::uint8_t my_gid[16];
    const auto programmed = must(dev->gid(o.gid_index), "query the GID");
    std::memcpy(my_gid, programmed.data(), 16);
    if (!o.gid.empty() && inet_pton(AF_INET6, o.gid.c_str(), my_gid) != 1) die("--gid: not an IPv6 address: " + o.gid);

    auto pd = must(dev->alloc_pd(), "alloc_pd");
    // One buffer for what we send, one all receive WQEs share (one message is in flight
    // towards us at a time); a UD receive also takes the GRH space.
    const unsigned recv_len = o.size + (o.ud ? grh_bytes : 0);
    std::vector<std::uint8_t> send_buf(o.size, 0x7b), recv_buf(recv_len, 0);
    auto smr = must(cxv::mr::create(pd, send_buf.data(), send_buf.size(), cxv::access_local_write), "reg_mr");
    auto rmr = must(cxv::mr::create(pd, recv_buf.data(), recv_buf.size(), cxv::access_local_write), "reg_mr");
    auto cq = must(cxv::cq::create(*dev, o.rx_depth + 1), "create_cq");
    cxv::qp::attr qa;
    qa.type = o.ud ? cxv::qp_type::ud : cxv::qp_type::rc;
    qa.domain = pd;
    qa.send_cq = qa.recv_cq = cq;
    qa.cap = {1, o.rx_depth, 1, 1, 0};
    auto qp = must(cxv::qp::create(*dev, qa), "create_qp");

    cxv::qp::modify_attr m;
    if (o.ud) m.qkey = ud_qkey;
    must(qp->modify(cxv::qp_state::init, m), "INIT");

    // rc_pingpong's work request ids: a receive, a send.
    constexpr std::uint64_t recv_wrid = 1, send_wrid = 2;
    ibv_sge rsge{reinterpret_cast<std::uint64_t>(recv_buf.data()), recv_len, rmr->lkey()};
    auto post_recvs = [&](unsigned n) {
        unsigned i = 0;
        for (; i < n; ++i) {
            ibv_recv_wr wr{};
            wr.wr_id = recv_wrid;
            wr.sg_list = &rsge;
            wr.num_sge = 1;
            ibv_recv_wr* bad = nullptr;
            if (qp->post_recv(&wr, &bad) != 0) break;
        }
        return i;
    };
    unsigned routs = post_recvs(o.rx_depth);
    if (routs < o.rx_depth) die("could post only " + std::to_string(routs) + " receives");

    endpoint mine;
    mine.lid = port.lid;
    mine.qpn = qp->qpn();
    mine.psn = std::random_device{}() & 0xffffff;
    std::printf("  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", mine.lid, mine.qpn, mine.psn,
                gid_text(my_gid).c_str());
    const endpoint peer = exchange(o, mine, my_gid);
    std::printf("  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", peer.lid, peer.qpn, peer.psn,
                gid_text(peer.gid.data()).c_str());

    // As the pingpong tools address the server: RoCE by GID (a GRH, IBA "Global Route
    // Header"; on RoCEv2 the IP header), one hop. RC puts it in the QP at RTR, UD in an
    // address handle each send names.
    cxv::qp::path to;
    to.dlid = static_cast<std::uint16_t>(peer.lid);
    to.grh = true;
    to.dgid = peer.gid;
    to.sgid_index = static_cast<std::uint8_t>(o.gid_index);
    to.hop_limit = 1;
    auto ah = cxv::make_address_handle(to, port.ethernet);
    if (o.ud) {
        must(qp->modify(cxv::qp_state::rtr, m), "RTR");
        m.sq_psn = mine.psn;
        must(qp->modify(cxv::qp_state::rts, m), "RTS");
    } else {
        m.path_mtu = mtu_enum(o.mtu);
        m.dest_qpn = peer.qpn;
        m.rq_psn = peer.psn;
        m.max_dest_rd_atomic = 1;
        m.min_rnr_timer = 12;
        m.ah = to;
        must(qp->modify(cxv::qp_state::rtr, m), "RTR");
        // rc_pingpong asks for 14 (67 ms); a guest under TCG can be slower than 7 of those.
        m.timeout = 18;
        m.retry_cnt = 7;
        m.rnr_retry = 7;
        m.sq_psn = mine.psn;
        m.max_rd_atomic = 1;
        must(qp->modify(cxv::qp_state::rts, m), "RTS");
    }

    ibv_sge ssge{reinterpret_cast<std::uint64_t>(send_buf.data()), o.size, smr->lkey()};
    auto post_send = [&] {
        ibv_send_wr wr{};
        wr.wr_id = send_wrid;
        wr.opcode = IBV_WR_SEND;
        wr.sg_list = &ssge;
        wr.num_sge = 1;
        wr.send_flags = IBV_SEND_SIGNALED;
        if (o.ud) {
            wr.wr.ud.ah = &ah.base;
            wr.wr.ud.remote_qpn = peer.qpn;
            wr.wr.ud.remote_qkey = ud_qkey;
        }
        ibv_send_wr* bad = nullptr;
        if (int e = qp->post_send(&wr, &bad)) die(std::string("post_send: ") + std::strerror(e));
    };

    // The client sends first; afterwards a send follows each (send done, message in) pair.
    const auto start = clk::now();
    post_send();
    std::uint64_t pending = recv_wrid | send_wrid;
    unsigned scnt = 0, rcnt = 0, bad_payloads = 0;
    auto progress = clk::now();
    while (scnt < o.iters || rcnt < o.iters) {
        ibv_wc wc[16];
        const int n = cq->poll(16, wc);
        if (n == 0) {
            if (clk::now() - progress > std::chrono::seconds(o.timeout_s))
                die("no completion for " + std::to_string(o.timeout_s) + " s after " + std::to_string(scnt) +
                    " sends and " + std::to_string(rcnt) + " receives");
            continue;
        }
        progress = clk::now();
        for (int i = 0; i < n; ++i) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                char why[160];
                std::snprintf(why, sizeof why, "completion of wr %llu: %s (vendor 0x%x)",
                              static_cast<unsigned long long>(wc[i].wr_id), cxv::wc_status_str(wc[i].status),
                              wc[i].vendor_err);
                die(why);
            }
            if (wc[i].wr_id == send_wrid) {
                ++scnt;
            } else if (wc[i].wr_id == recv_wrid) {
                if (wc[i].byte_len != recv_len)
                    die("received " + std::to_string(wc[i].byte_len) + " bytes, not " + std::to_string(recv_len));
                for (unsigned b = recv_len - o.size; b < recv_len; ++b) bad_payloads += recv_buf[b] != 0x7b;
                std::memset(recv_buf.data(), 0, recv_buf.size());
                if (--routs <= 1) routs += post_recvs(o.rx_depth - routs);
                ++rcnt;
            } else {
                die("completion with an unknown wr_id " + std::to_string(wc[i].wr_id));
            }
            pending &= ~wc[i].wr_id;
            if (scnt < o.iters && pending == 0) {
                post_send();
                pending = recv_wrid | send_wrid;
            }
        }
    }
    const double s = std::chrono::duration<double>(clk::now() - start).count();
    const double bytes = double(o.size) * o.iters * 2;
    std::printf("%.0f bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, s, bytes * 8 / s / 1e6);
    std::printf("%u iters in %.2f seconds = %.2f usec/iter\n", o.iters, s, s * 1e6 / o.iters);
    if (bad_payloads) die(std::to_string(bad_payloads) + " received bytes were not the pingpong's 0x7b");
    return 0;
}
