// End to end on the model: what a user developing on cxv-sim feels. The real driver
// and fast path post to emulated functions whose transport engine executes the WQEs.
//
//   send_rate_64   64-byte inline SENDs, RC loopback on one function (one model
//                  thread): messages per second, a CQE every 16 SENDs, receives
//                  reposted in batches of 16.
//   pingpong_64    64-byte SEND ping-pong between two functions (two model threads):
//                  half round trip (one way) in microseconds, median of rounds.
//   pingpong_64_lo the same in loopback on one function.
//
// Run: cxv-sim run --devices 2 -- bazel-bin/bench/model_e2e [--short] [--json FILE]
//
// Across two processes on one fabric (each under `cxv-sim run --fabric DIR`, InfiniBand):
//   model_e2e --peer server|client --oob DIR --device BDF [--short]
// the client prints xproc_rate_64 (64-byte SENDs, up to 128 in flight, to the other
// process) and xproc_pingpong_64 (one way). They find each other through files in --oob.
#include <infiniband/verbs.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "api/cxv.h"
#include "base/json.h"

namespace {

using clock_type = std::chrono::steady_clock;

template <typename T>
T must(cxv::result<T> r) {
    if (!r) {
        std::fprintf(stderr, "model_e2e: %s\n", r.error().message.c_str());
        std::exit(1);
    }
    return std::move(r).value();
}

struct node {
    std::unique_ptr<cxv::device> dev;
    std::shared_ptr<cxv::pd> pd;
    std::vector<char> buf = std::vector<char>(1 << 20);
    std::shared_ptr<cxv::mr> mr;
    std::shared_ptr<cxv::cq> cq;
    std::uint16_t lid = 0;
};

std::unique_ptr<node> open_node(const char* bdf, int cqes = 4096) {
    auto n = std::make_unique<node>();
    n->dev = must(cxv::device::open(bdf));
    n->pd = must(n->dev->alloc_pd());
    n->mr = must(cxv::mr::create(n->pd, n->buf.data(), n->buf.size(), cxv::access_local_write));
    n->cq = must(cxv::cq::create(*n->dev, cqes));
    n->lid = must(n->dev->port(1)).lid;
    return n;
}

std::shared_ptr<cxv::qp> make_qp(node& n, std::uint32_t recv_wrs = 512) {
    cxv::qp::attr a;
    a.domain = n.pd;
    a.send_cq = a.recv_cq = n.cq;
    a.cap = {512, recv_wrs, 1, 1, 64};
    a.doorbell = cxv::doorbell_mode::blueflame;
    return must(cxv::qp::create(*n.dev, a));
}

void connect(cxv::qp& q, const cxv::qp& peer, const node& pn) {
    cxv::qp::modify_attr m;
    m.dest_qpn = peer.qpn();
    m.ah.dlid = pn.lid;
    m.min_rnr_timer = 1;
    for (auto s : {cxv::qp_state::init, cxv::qp_state::rtr, cxv::qp_state::rts}) {
        if (auto st = q.modify(s, m); !st) {
            std::fprintf(stderr, "model_e2e: %s\n", st.error().message.c_str());
            std::exit(1);
        }
    }
}

void post_recvs(cxv::qp& q, node& n, unsigned count) {
    ibv_sge s{reinterpret_cast<std::uint64_t>(n.buf.data() + 0x10000), 64, n.mr->lkey()};
    std::vector<ibv_recv_wr> wrs(count);
    for (auto& w : wrs) {
        w.sg_list = &s;
        w.num_sge = 1;
    }
    ibv_recv_wr* bad = nullptr;
    if (q.post_recv(std::span<ibv_recv_wr>(wrs), &bad) != 0) {
        std::fprintf(stderr, "model_e2e: post_recv failed\n");
        std::exit(1);
    }
}

int send64(cxv::qp& q, node& n, bool signaled) {
    ibv_sge s{reinterpret_cast<std::uint64_t>(n.buf.data()), 64, n.mr->lkey()};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_INLINE | (signaled ? IBV_SEND_SIGNALED : 0);
    ibv_send_wr* bad = nullptr;
    return q.post_send(&wr, &bad);
}

void check(const ibv_wc& wc) {
    if (wc.status != IBV_WC_SUCCESS) {
        std::fprintf(stderr, "model_e2e: completion failed: %s\n", cxv::wc_status_str(wc.status));
        std::exit(1);
    }
}

// Messages per second of 64-byte SENDs in loopback.
double send_rate(node& n, unsigned messages) {
    auto tx = make_qp(n);
    auto rx = make_qp(n);
    connect(*tx, *rx, n);
    connect(*rx, *tx, n);
    post_recvs(*rx, n, 256);
    unsigned sent = 0, sends_done = 0, received = 0, reposted = 0;
    const auto t0 = clock_type::now();
    while (received < messages) {
        // Keep up to 128 SENDs in flight and never more than the receives posted.
        while (sent < messages && sent - sends_done < 128 && sent < received + 256) {
            if (send64(*tx, n, (sent % 16) == 15 || sent + 1 == messages) != 0) break;
            ++sent;
        }
        ibv_wc wc[32];
        const int got = n.cq->poll(32, wc);
        for (int i = 0; i < got; ++i) {
            check(wc[i]);
            if (wc[i].opcode == IBV_WC_SEND) {
                sends_done = std::min(sent, (sends_done / 16 + 1) * 16);
            } else {
                ++received;
            }
        }
        if (received - reposted >= 16) {
            post_recvs(*rx, n, 16);
            reposted += 16;
        }
    }
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    return messages / s;
}

// One-way latency: median over rounds of (round trip of `iters` ping-pongs) / 2 / iters.
double pingpong(node& a, node& b, unsigned iters, unsigned rounds) {
    auto qa = make_qp(a);
    auto qb = make_qp(b);
    connect(*qa, *qb, b);
    connect(*qb, *qa, a);
    post_recvs(*qa, a, 256);
    post_recvs(*qb, b, 256);
    unsigned ra = 0, rb = 0;
    auto wait_recv = [](node& n, cxv::qp& q, unsigned& count) {
        for (;;) {
            ibv_wc wc[8];
            const int got = n.cq->poll(8, wc);
            bool recv = false;
            for (int i = 0; i < got; ++i) {
                check(wc[i]);
                recv |= wc[i].opcode == IBV_WC_RECV && wc[i].qp_num == q.qpn();
            }
            if (recv) break;
        }
        if (++count % 128 == 0) post_recvs(q, n, 128);
    };
    std::vector<double> results;
    for (unsigned r = 0; r < rounds; ++r) {
        const auto t0 = clock_type::now();
        for (unsigned i = 0; i < iters; ++i) {
            // Signal every 64th SEND so the send queue drains.
            const bool sig = (i % 64) == 63;
            if (send64(*qa, a, sig) != 0) std::exit(1);
            wait_recv(b, *qb, rb);
            if (send64(*qb, b, sig) != 0) std::exit(1);
            wait_recv(a, *qa, ra);
        }
        results.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / 2 / iters);
    }
    std::sort(results.begin(), results.end());
    return results[results.size() / 2];
}

// --- two processes ---------------------------------------------------------------------

bool g_yield_when_idle = std::thread::hardware_concurrency() < 4;
constexpr std::uint32_t kCrossProcessReceives = 8192;

void publish(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
        std::fprintf(f, "%s\n", text.c_str());
        std::fclose(f);
    }
    std::rename(tmp.c_str(), path.c_str());
}

std::string await_file(const std::string& path) {
    const auto end = clock_type::now() + std::chrono::seconds(30);
    while (clock_type::now() < end) {
        if (std::FILE* f = std::fopen(path.c_str(), "r")) {
            char line[128] = {};
            const bool got = std::fgets(line, sizeof line, f) != nullptr;
            std::fclose(f);
            if (got) return line;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::fprintf(stderr, "model_e2e: no %s\n", path.c_str());
    std::exit(1);
}

// Waits for `n` receive completions on `q`, reposting receives as they are used.
void take_receives(node& n, cxv::qp& q, unsigned count, unsigned& used) {
    unsigned got_recv = 0;
    while (got_recv < count) {
        ibv_wc wc[32];
        const int got = n.cq->poll(32, wc);
        // Two processes, each with an application and a device thread: on a machine with
        // fewer cores than that, a spinning poller starves the device threads.
        if (got == 0 && g_yield_when_idle) std::this_thread::yield();
        for (int i = 0; i < got; ++i) {
            check(wc[i]);
            if (wc[i].opcode == IBV_WC_RECV && wc[i].qp_num == q.qpn()) {
                ++got_recv;
                if (++used % 128 == 0) post_recvs(q, n, 128);
            }
        }
    }
}

int cross_process(const std::string& role, const std::string& oob, const std::string& bdf, bool shortrun) {
    // Room for every receive to complete unpolled, and the sends.
    auto n = open_node(bdf.c_str(), static_cast<int>(2 * kCrossProcessReceives));
    // Receives for ~32 ms of the stream: the receiving application may wait that long for
    // a core on a 2-core machine, and an empty RQ means RNR NAKs and go-back-N.
    auto q = make_qp(*n, kCrossProcessReceives);
    publish(oob + "/" + role, std::to_string(q->qpn()) + " " + std::to_string(n->lid));
    unsigned peer_qpn = 0, peer_lid = 0;
    if (std::sscanf(await_file(oob + "/" + (role == "server" ? "client" : "server")).c_str(), "%u %u", &peer_qpn,
                    &peer_lid) != 2) {
        return 1;
    }
    cxv::qp::modify_attr m;
    m.dest_qpn = peer_qpn;
    m.ah.dlid = static_cast<std::uint16_t>(peer_lid);
    m.min_rnr_timer = 1;
    m.timeout = 16;
    for (auto st : {cxv::qp_state::init, cxv::qp_state::rtr, cxv::qp_state::rts}) {
        if (auto r = q->modify(st, m); !r) {
            std::fprintf(stderr, "model_e2e: %s\n", r.error().message.c_str());
            return 1;
        }
    }
    post_recvs(*q, *n, kCrossProcessReceives);
    unsigned used = 0;
    const unsigned iters = shortrun ? 500 : 5000, rounds = shortrun ? 3 : 7;
    const unsigned messages = shortrun ? 20000 : 200000;
    publish(oob + "/" + role + "-ready", "ready");
    await_file(oob + "/" + (role == "server" ? "client" : "server") + "-ready");
    if (role == "server") {
        // Echo every ping, then count the stream.
        for (unsigned i = 0; i < iters * rounds; ++i) {
            take_receives(*n, *q, 1, used);
            if (send64(*q, *n, (i % 64) == 63) != 0) return 1;
        }
        take_receives(*n, *q, messages, used);
        publish(oob + "/server-done", "done");
        return 0;
    }
    std::vector<double> results;
    for (unsigned r = 0; r < rounds; ++r) {
        const auto t0 = clock_type::now();
        for (unsigned i = 0; i < iters; ++i) {
            if (send64(*q, *n, (i % 64) == 63) != 0) return 1;
            take_receives(*n, *q, 1, used);
        }
        results.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / 2 / iters);
    }
    std::sort(results.begin(), results.end());
    // The stream: up to 128 in flight (a CQE every 16), the server reposting receives.
    unsigned sent = 0, done = 0;
    const auto t0 = clock_type::now();
    while (done < messages) {
        while (sent < messages && sent - done < 128) {
            if (send64(*q, *n, (sent % 16) == 15 || sent + 1 == messages) != 0) break;
            ++sent;
        }
        ibv_wc wc[32];
        const int got = n->cq->poll(32, wc);
        if (got == 0 && g_yield_when_idle) std::this_thread::yield();
        for (int i = 0; i < got; ++i) {
            check(wc[i]);
            if (wc[i].opcode == IBV_WC_SEND) done = std::min(sent, (done / 16 + 1) * 16);
        }
    }
    await_file(oob + "/server-done");
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    if (const auto c = n->dev->counters(); c && c->q) {
        std::fprintf(stderr, "model_e2e: ack timeouts %u, sequence NAKs %u, RNR NAKs %u\n", c->q->local_ack_timeout_err,
                     c->q->packet_seq_err, c->q->rnr_nak_retry_err);
    }
    std::printf("%-18s %10.0f msg/s  (%.0f ns per message)\n", "xproc_rate_64", messages / s, 1e9 * s / messages);
    std::printf("%-18s %10.2f us one way (two processes)\n", "xproc_pingpong_64", results[results.size() / 2]);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    bool shortrun = false;
    std::string json, peer, oob, bdf, only;
    unsigned long messages_given = 0;
    CLI::App app{"model_e2e: message rate and ping-pong latency end to end on the model"};
    app.add_flag("--short", shortrun, "fewer messages and rounds (CI)");
    app.add_option("--json", json, "also write the results to this file");
    app.add_option("--only", only, "one operation (the others print 0)")
        ->check(CLI::IsMember({"send_rate_64", "pingpong_64", "pingpong_64_lo"}));
    app.add_option("--messages", messages_given, "send_rate_64's count, e.g. for a longer profile");
    auto* peer_opt = app.add_option("--peer", peer, "one side of the cross-process run")
                         ->check(CLI::IsMember({"server", "client"}));
    app.add_option("--oob", oob, "the directory the two sides meet in")->needs(peer_opt);
    app.add_option("--device", bdf, "the function this side opens")->needs(peer_opt);
    CLI11_PARSE(app, argc, argv);
    if (!peer.empty()) return cross_process(peer, oob, bdf, shortrun);
    auto a = open_node("0000:c5:00.0");
    auto b = open_node("0000:c5:00.1");
    const unsigned messages =
        messages_given != 0 ? static_cast<unsigned>(std::min(messages_given, 100000000ul)) : shortrun ? 20000 : 500000;
    const unsigned iters = shortrun ? 500 : 5000;
    const unsigned rounds = shortrun ? 3 : 7;

    // --only runs one operation (the others print 0), e.g. under a profiler.
    const auto wanted = [&](const char* op) { return only.empty() || only == op; };
    const double rate = wanted("send_rate_64") ? send_rate(*a, messages) : 0;
    const double pp2 = wanted("pingpong_64") ? pingpong(*a, *b, iters, rounds) : 0;
    const double pp1 = wanted("pingpong_64_lo") ? pingpong(*a, *a, iters, rounds) : 0;
    std::printf("%-16s %14s\n", "operation", "result");
    std::printf("%-16s %10.0f msg/s  (%.0f ns per message)\n", "send_rate_64", rate, 1e9 / rate);
    std::printf("%-16s %10.2f us one way (two functions)\n", "pingpong_64", pp2);
    std::printf("%-16s %10.2f us one way (loopback)\n", "pingpong_64_lo", pp1);
    if (!json.empty()) {
        cxv::json_writer j(cxv::json_writer::layout::one_line);
        j.begin_array();
        j.begin_object();
        j.member("op", "send_rate_64");
        j.member("messages_per_s", std::round(rate));
        j.end_object();
        for (const auto& [op, us] : {std::pair{"pingpong_64", pp2}, std::pair{"pingpong_64_lo", pp1}}) {
            j.begin_object();
            j.member("op", op);
            j.member("us_one_way", std::round(us * 1000) / 1000);
            j.end_object();
        }
        j.end_array();
        if (std::FILE* f = std::fopen(json.c_str(), "w")) {
            std::fprintf(f, "%s\n", j.str().c_str());
            std::fclose(f);
        }
    }
    return 0;
}
