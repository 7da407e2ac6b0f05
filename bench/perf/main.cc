// cxv-perf: perftest's ib_*_lat / ib_*_bw tests on cxv, as one binary.
//
//   cxv-perf send_lat -d 0000:3b:00.0               the server: waits for a client
//   cxv-perf send_lat -d 0000:3b:00.0 host          the client: runs and prints the table
//   cxv-perf write_bw --loopback -d BDF [-d BDF2]   both sides in this process
//
// The two sides meet over TCP (-p, 18515; -R: over an rdma_cm connection, cm_connect.h),
// agree on the run's parameters, exchange their QPs' addresses (-R: connect them with
// rdma_cm), and then run size after size, with a barrier around each.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "bench/perf/cm_connect.h"
#include "bench/perf/loops.h"
#include "bench/perf/oob.h"
#include "bench/perf/options.h"
#include "bench/perf/raw.h"
#include "bench/perf/report.h"
#include "bench/perf/setup.h"

namespace cxv::perf {
namespace {

using namespace std::chrono_literals;

constexpr const char* kVersion = CXV_VERSION;  // //:version.bzl
constexpr auto kPeerTimeout = 60s;       // a barrier or a parameter exchange
constexpr auto kAcceptTimeout = 120s;    // the server waiting for its client
constexpr auto kCmRetry = 10s;           // -R: a client retrying while nobody listens
constexpr std::size_t kDurationSamples = std::size_t{1} << 22;  // -D latency: at most this many

// The bandwidth loop's stamps: two words per signalled WR (-D: 2^20 of them), at most
// 2^22 (64 MiB; the peak is then sought among the first completions only).
std::size_t stamp_words(const options& o) {
    const std::uint64_t signalled = o.duration ? std::uint64_t{1} << 20 : o.iters * o.qps / o.cq_mod + o.qps + 16;
    return 2 * static_cast<std::size_t>(std::min<std::uint64_t>(signalled, std::uint64_t{1} << 22));
}

std::mutex g_setup;  // --loopback on one function: one side's control commands at a time

error failed(const std::string& what, const error& e) { return error{e.code, what + ": " + e.message}; }

wire_params params_of(const options& o) {
    wire_params p;
    p.op = static_cast<std::uint32_t>(o.op);
    p.latency = o.latency;
    p.conn = static_cast<std::uint32_t>(o.conn);
    p.all_sizes = o.all_sizes;
    p.size = o.size;
    p.max_size = o.max_size;
    p.iters = o.iters;
    p.duration = o.duration;
    p.qps = o.qps;
    p.tx_depth = o.tx_depth;
    p.rx_depth = o.rx_depth;
    p.verify = o.verify;
    p.mtu = o.mtu;
    p.bidirectional = o.bidirectional;
    return p;
}

// What differs between the server's parameters and the client's, or "".
std::string differences(const wire_params& mine, const wire_params& theirs) {
    if (std::memcmp(mine.magic, theirs.magic, sizeof mine.magic) != 0) return "the client is not cxv-perf";
    std::string d;
    auto cmp = [&](const char* name, std::uint64_t a, std::uint64_t b) {
        if (a != b) d += std::string(d.empty() ? "" : ", ") + name + " " + std::to_string(a) + " here, " + std::to_string(b) + " on the client";
    };
    if (mine.op != theirs.op || mine.latency != theirs.latency) d = "a different TEST";
    cmp("-c", mine.conn, theirs.conn);
    cmp("-a", mine.all_sizes, theirs.all_sizes);
    cmp("-s", mine.size, theirs.size);
    cmp("--max_size", mine.max_size, theirs.max_size);
    cmp("-n", mine.iters, theirs.iters);
    cmp("-D", mine.duration, theirs.duration);
    cmp("-q", mine.qps, theirs.qps);
    cmp("-t", mine.tx_depth, theirs.tx_depth);
    cmp("-r", mine.rx_depth, theirs.rx_depth);
    cmp("--verify", mine.verify, theirs.verify);
    cmp("-m", mine.mtu, theirs.mtu);
    cmp("-b", mine.bidirectional, theirs.bidirectional);
    return d;
}

std::string cpu_name() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line)) {
        if (line.starts_with("model name")) {
            const auto colon = line.find(':');
            return colon == std::string::npos ? line : line.substr(colon + 2);
        }
    }
    return "unknown";
}

run_config config_of(const options& o, const function& fn, bool server, double hz, bool model) {
    run_config r;
    r.test = o.test;
    r.connection = transport_name(o.conn);
    r.device = fn.bdf;
    r.firmware = fn.firmware;
    r.link_layer = fn.port.ethernet ? "Ethernet" : "InfiniBand";
    r.cpu = cpu_name();
    r.tsc_hz = hz;
    r.cxv_version = kVersion;
    r.model = model;
    r.port = o.ib_port;
    r.mtu = o.mtu != 0 ? o.mtu : 128u << fn.port.max_mtu;
    r.qps = o.qps;
    r.tx_depth = o.tx_depth;
    r.rx_depth = o.rx_depth;
    r.inline_size = o.inline_size < 0 ? 0 : static_cast<unsigned>(o.inline_size);
    r.post_list = o.post_list;
    r.cq_moderation = o.latency ? 0 : o.cq_mod;
    r.out_reads = kOutstandingReads;
    if (o.op == operation::atomic) r.atomic_type = "FETCH_AND_ADD";  // the loops' only atomic
    r.events = o.events;
    r.bidirectional = o.bidirectional;
    r.report_gbits = o.report_gbits;
    r.rdma_cm = o.rdma_cm;
    r.gid_index = o.gid_index;
    r.server = server;
    return r;
}

// -D: a line a second with the iterations so far, from a thread of its own (the loop only
// stores a counter).
class progress_line {
public:
    progress_line(bool on, unsigned seconds) {
        if (!on) return;
        thread_ = std::thread([this, seconds] {
            const auto start = std::chrono::steady_clock::now();
            unsigned shown = 0;
            while (!stop_.load()) {
                std::this_thread::sleep_for(50ms);
                const auto s = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count();
                if (s > shown && !stop_.load()) {
                    shown = static_cast<unsigned>(s);
                    std::fprintf(stderr, "cxv-perf: %u/%u s, %llu iterations\n", shown, seconds,
                                 static_cast<unsigned long long>(count.load(std::memory_order_relaxed)));
                }
            }
        });
    }
    ~progress_line() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    std::atomic<std::uint64_t> count{0};

private:
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

double process_cpu_seconds() {
    timespec t{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

status send_sync(link& ch, sync_kind kind, std::uint64_t value, bool ok = true, const std::string& message = "",
                 const bandwidth_sample_set* own = nullptr, std::uint64_t own_per_qp = 0) {
    wire_sync m;
    if (own != nullptr) {
        m.iterations = own->iterations;
        m.ticks = own->ticks;
        m.min_ticks = own->min_ticks_per_iteration;
        m.per_qp = own_per_qp;
    }
    m.kind = kind;
    m.ok = ok;
    m.value = value;
    std::snprintf(m.message, sizeof m.message, "%s", message.c_str());
    return ch.send(&m, sizeof m);
}

result<wire_sync> recv_sync(link& ch, sync_kind kind, std::chrono::milliseconds timeout) {
    wire_sync m;
    if (auto r = ch.recv(&m, sizeof m, timeout); !r) return r.error();
    m.message[sizeof m.message - 1] = '\0';
    if (m.kind == sync_error) return error{EPROTO, std::string("the peer failed: ") + m.message};
    if (m.kind != kind) return error{EPROTO, "the peer is out of step (message " + std::to_string(m.kind) + ")"};
    return m;
}

// -b with SEND: this side's receives, on a thread of their own while the main one sends.
class receiver {
public:
    receiver(const loop_context& c, side& s, std::size_t size) : ctx_(c) {
        ctx_.oob = nullptr;
        ctx_.progress = nullptr;
        ctx_.peer_done = &peer_done_;
        ctx_.expected = &expected_;
        ctx_.verified = {};
        count_.assign(c.o->qps, 0);
        // -D: the peer's count comes with its stop; until then, everything.
        expected_ = ctx_.o->duration ? ~std::uint64_t{0} : ctx_.o->iters * ctx_.o->qps;
        thread_ = std::thread([this, &s, size] {
            status_ = bandwidth_server(ctx_, s, size, ~std::uint64_t{0}, false, count_, received_);
        });
    }
    // Once the peer has finished sending `peer_per_qp` per QP: what arrived, and what
    // --verify found.
    status finish(verify_result& into, std::uint64_t peer_per_qp) {
        expected_.store(peer_per_qp * ctx_.o->qps, std::memory_order_release);
        peer_done_ = true;
        thread_.join();
        if (into.bad == 0) into = ctx_.verified;
        else into.bad += ctx_.verified.bad;
        return status_;
    }
    std::uint64_t received() const { return received_; }
    ~receiver() {
        peer_done_ = true;
        if (thread_.joinable()) thread_.join();
    }

private:
    loop_context ctx_;
    std::atomic<bool> peer_done_{false};
    std::atomic<std::uint64_t> expected_{0};
    std::vector<std::uint64_t> count_;
    std::uint64_t received_ = 0;
    status status_ = ok_status();
    std::thread thread_;
};

// Both directions of a -b run as one: the iterations of both, over the longer time.
bandwidth_sample_set combined(const bandwidth_sample_set& a, const wire_sync& peer) {
    bandwidth_sample_set b = a;
    b.iterations += peer.iterations;
    b.ticks = std::max(a.ticks, peer.ticks);
    if (a.min_ticks_per_iteration > 0 && peer.min_ticks > 0) {
        b.min_ticks_per_iteration = a.min_ticks_per_iteration * peer.min_ticks / (a.min_ticks_per_iteration + peer.min_ticks);
    }
    return b;
}

// One side of a run, from the parameter exchange to the table. Returns the exit status.
// With -R, `link_to_peer` is empty: the connection manager's link becomes it.
status run_side(const options& o, std::shared_ptr<function> fn, std::unique_ptr<link>& link_to_peer, bool server,
                bool quiet, double hz) {
    if (o.rdma_cm) {
        auto made = server ? cm_link::accept(o, *fn, o.tcp_port, kAcceptTimeout)
                           : cm_link::connect(o, *fn, o.server, o.tcp_port, kCmRetry);
        if (!made) return made.error();
        link_to_peer = std::move(made).value();
    }
    link& ch = *link_to_peer;
    // The parameters: the client's must be the server's.
    const wire_params mine = params_of(o);
    if (server) {
        wire_params theirs;
        if (auto r = ch.recv(&theirs, sizeof theirs, kPeerTimeout); !r) return failed("the client's parameters", r.error());
        if (const std::string d = differences(mine, theirs); !d.empty()) {
            (void)send_sync(ch, sync_error, 0, false, "the server refused the parameters: " + d);
            return error{EINVAL, "the client's parameters differ: " + d};
        }
        if (auto r = send_sync(ch, sync_params, 0); !r) return r;
    } else {
        if (auto r = ch.send(&mine, sizeof mine); !r) return r;
        if (auto r = recv_sync(ch, sync_params, kPeerTimeout); !r) return r.error();
    }

    std::unique_ptr<side> s;
    {
        std::lock_guard lock(g_setup);
        auto made = make_side(o, fn, server);
        if (!made) return made.error();
        s = std::move(made).value();
    }
    if (o.rdma_cm) {
        if (auto r = static_cast<cm_link&>(ch).connect_qps(*s, kPeerTimeout); !r) return r;
    } else {
        s->remote.resize(o.qps);
        const std::size_t bytes = sizeof(wire_qp) * o.qps;
        if (server) {
            if (auto r = ch.recv(s->remote.data(), bytes, kPeerTimeout); !r) return failed("the client's QPs", r.error());
            if (auto r = ch.send(s->local.data(), bytes); !r) return r;
        } else {
            if (auto r = ch.send(s->local.data(), bytes); !r) return r;
            if (auto r = ch.recv(s->remote.data(), bytes, kPeerTimeout); !r) return failed("the server's QPs", r.error());
        }
        {
            std::lock_guard lock(g_setup);
            if (auto r = connect_side(*s); !r) return r;
        }
    }
    if (o.op == operation::send) {
        for (unsigned q = 0; q < o.qps; ++q) {
            for (unsigned i = 0; i < o.rx_depth; ++i) {
                if (const int rc = post_receive(*s, q, i % s->slots); rc != 0) {
                    return error{rc, std::string("post_recv: ") + std::strerror(rc)};
                }
            }
        }
    }

    report rep(config_of(o, *fn, server, hz, on_model()));
    if (!quiet) {
        rep.print_header(stdout);
        for (unsigned q = 0; q < o.qps; ++q) {
            rep.print_address(stdout, "local", s->local[q].lid, s->local[q].qpn, s->local[q].psn, s->local[q].rkey,
                              s->local[q].vaddr, s->local_gid);
        }
        for (unsigned q = 0; q < o.qps; ++q) {
            rep.print_address(stdout, "remote", s->remote[q].lid, s->remote[q].qpn, s->remote[q].psn,
                              s->remote[q].rkey, s->remote[q].vaddr, s->remote_gid);
        }
        std::fflush(stdout);
    }

    loop_context c;
    c.o = &o;
    c.tsc_hz = hz;
    c.stall_ticks = static_cast<std::uint64_t>(hz * 30);
    c.idle_yield = on_model() || std::thread::hardware_concurrency() < 4;
    c.oob = &ch;
    const std::uint64_t warmup = warmup_of(o);
    std::uint64_t lost = 0;
    const std::vector<std::size_t> sizes = sizes_of(o, message_limit(o));
    const auto started = std::chrono::steady_clock::now();
    for (std::size_t k = 0; k < sizes.size(); ++k) {
        const std::size_t size = sizes[k];
        // A sweep that has run a second says where it is, on stderr (stdout is perftest's
        // table), on the side that prints the table.
        if (!server && sizes.size() > 1 && std::chrono::steady_clock::now() - started >= 1s) {
            std::fprintf(stderr, "cxv-perf: %zu of %zu sizes done, now %zu bytes\n", k, sizes.size(), size);
        }
        if (server) {
            prepare_size(*s, size);
            if (auto r = send_sync(ch, sync_ready, size); !r) return r;
            std::uint64_t received = 0, per_qp = 0;
            if (o.bidirectional) {
                // Both send: the client prepared its side too before either starts.
                if (auto r = recv_sync(ch, sync_ready, kPeerTimeout); !r) return r.error();
                std::optional<receiver> rx;
                if (o.op == operation::send) rx.emplace(c, *s, size);
                std::vector<std::uint64_t> stamps(stamp_words(o), 0);
                bandwidth_sample_set own;
                std::uint64_t own_per_qp = 0;
                c.end_tick = o.duration ? tsc_now() + static_cast<std::uint64_t>(hz * o.duration) : 0;
                if (auto r = bandwidth_client(c, *s, size, stamps, own, own_per_qp); !r) return r;
                auto stop = recv_sync(ch, sync_stop, std::chrono::seconds(o.duration) + kPeerTimeout);
                if (!stop) return stop.error();
                per_qp = stop->value;
                if (rx) {
                    if (auto r = rx->finish(c.verified, per_qp); !r) return r;
                }
                verify_after(c, *s, size, per_qp);
                const bool good = c.verified.bad == 0;
                if (rx) received = rx->received();
                if (auto r = send_sync(ch, sync_done, received, good, good ? "" : c.verified.describe(), &own, own_per_qp); !r) {
                    return r;
                }
                continue;
            }
            std::vector<std::uint64_t> count(o.qps, 0);
            status st = ok_status();
            if (o.latency) {
                st = latency_server(c, *s, size, warmup);
            } else {
                st = bandwidth_server(c, *s, size, o.duration ? ~std::uint64_t{0} : o.iters * o.qps, true, count, received);
            }
            if (!st) {
                (void)send_sync(ch, sync_error, 0, false, st.error().message);
                return st;
            }
            const std::chrono::milliseconds wait = std::chrono::seconds(o.duration + 60);
            auto stop = recv_sync(ch, sync_stop, wait);
            if (!stop) return stop.error();
            per_qp = stop->value;
            if (!o.latency && o.op == operation::send && received < per_qp * o.qps) {
                // What is still on its way (RC), or lost (UC, UD: a pause ends it).
                const std::uint64_t keep = c.stall_ticks;
                if (o.conn != transport::rc) c.stall_ticks = static_cast<std::uint64_t>(hz / 2);
                st = bandwidth_server(c, *s, size, per_qp * o.qps, false, count, received);
                c.stall_ticks = keep;
                if (!st) return st;
                lost += per_qp * o.qps - received;
            }
            verify_after(c, *s, size, per_qp);
            const bool good = c.verified.bad == 0;
            if (auto r = send_sync(ch, sync_done, received, good, good ? "" : c.verified.describe()); !r) return r;
            continue;
        }
        // The server's WRITEs, READs and atomics land here (-b); write_lat's client waits for
        // the server's WRITE to turn its last byte, so that byte must not match beforehand.
        if (o.bidirectional || (o.latency && o.op == operation::write)) prepare_size(*s, size);
        auto ready = recv_sync(ch, sync_ready, kPeerTimeout);
        if (!ready) return ready.error();
        std::optional<receiver> rx;
        if (o.bidirectional) {
            if (auto r = send_sync(ch, sync_ready, size); !r) return r;
            if (o.op == operation::send) rx.emplace(c, *s, size);
        }
        auto progress = std::make_unique<progress_line>(o.duration != 0 && !quiet, o.duration);
        c.progress = &progress->count;
        const double cpu0 = process_cpu_seconds();
        const auto wall0 = std::chrono::steady_clock::now();
        c.end_tick = o.duration ? tsc_now() + static_cast<std::uint64_t>(hz * o.duration) : 0;
        std::uint64_t per_qp = 0;
        latency_sample_set lat;
        bandwidth_sample_set bw;
        if (o.latency) {
            lat.bytes = size;
            lat.round_trip_halved = o.op == operation::send || o.op == operation::write;
            lat.samples.assign(o.duration ? kDurationSamples : o.iters, 0);
            std::uint64_t measured = 0;
            if (auto r = latency_client(c, *s, size, warmup, lat.samples, measured); !r) return r;
            lat.samples.resize(measured);
            per_qp = warmup + measured;
        } else {
            std::vector<std::uint64_t> stamps(stamp_words(o), 0);
            if (auto r = bandwidth_client(c, *s, size, stamps, bw, per_qp); !r) return r;
        }
        const double cpu = process_cpu_seconds() - cpu0;
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
        c.progress = nullptr;
        progress.reset();
        if (auto r = send_sync(ch, sync_stop, per_qp); !r) return r;
        auto done = recv_sync(ch, sync_done, kPeerTimeout);
        if (!done) return done.error();
        if (!done->ok) return error{EIO, std::string("the server: ") + done->message};
        std::uint64_t own_iterations = bw.iterations;
        if (o.bidirectional) {
            // The server's direction: its messages all arrived, its WRITEs are in place.
            if (rx) {
                if (auto r = rx->finish(c.verified, done->per_qp); !r) return r;
            }
            verify_after(c, *s, size, done->per_qp);
            own_iterations = bw.iterations;
            bw = combined(bw, done.value());
        }
        if (!quiet) {
            if (o.latency) {
                rep.add(stdout, lat);
            } else {
                rep.add(stdout, bw);
                if (o.op == operation::send && o.conn != transport::rc && done->value < own_iterations) {
                    std::printf(" (the server received %llu of %llu messages)\n",
                                static_cast<unsigned long long>(done->value), static_cast<unsigned long long>(own_iterations));
                }
            }
            if (o.cpu_util) std::printf(" CPU Util[%%]: %.2f\n", wall > 0 ? 100.0 * cpu / wall : 0.0);
            std::fflush(stdout);
        }
    }
    if (!quiet) {
        rep.print_footer(stdout);
        if (server && lost != 0) std::printf(" %llu messages lost (%s)\n", static_cast<unsigned long long>(lost), transport_name(o.conn));
        std::fflush(stdout);
    }
    if (c.verified.bad != 0) return error{EIO, c.verified.describe()};
    std::string why;
    // (--loopback: the client's side writes them; the server's is quiet.)
    if (!quiet && !o.json.empty() && !rep.write_json(o.json, &why)) return error{EIO, "--json " + o.json + ": " + why};
    if (!quiet && !o.plot.empty() && !server && !rep.write_plot(o.plot, &why)) return error{EIO, "--plot " + o.plot + ": " + why};
    return ok_status();
}

int fail(const std::string& message) {
    std::fprintf(stderr, "cxv-perf: %s\n", message.c_str());
    return 1;
}

int run(int argc, char** argv) {
    if (argc >= 2 && is_raw_test(argv[1])) return run_raw(argc, argv);
    if (argc == 2 && std::string_view(argv[1]) == "--version") {
        std::printf("cxv-perf %s\n", kVersion);
        return 0;
    }
    auto parsed = parse_options(argc, argv);
    if (!parsed) return fail(parsed.error().message);
    const options& o = parsed.value();
    if (o.help) {
        print_usage(stdout);
        return 0;
    }
    const double hz = tsc_calibrate();
    if (on_model()) {
        std::printf("cxv-perf: the function is cxv-sim's software model: these figures are the model's, not a card's\n");
    }
    if (o.loopback) {
        auto a = open_function(o.devices.empty() ? "" : o.devices[0], o.ib_port);
        if (!a) return fail(a.error().message);
        auto b = a;
        if (o.devices.size() == 2) {
            b = open_function(o.devices[1], o.ib_port);
            if (!b) return fail(b.error().message);
        }
        const auto r = run_both_sides(a.value(), b.value(), [&](std::shared_ptr<function> fn, channel& ch, bool server) {
            std::unique_ptr<link> end = std::make_unique<channel>(std::move(ch));
            auto done = run_side(o, std::move(fn), end, server, server, hz);
            // Every failure reaches the peer (the channel stays open: it would wait for its
            // barrier's time out); a second sync_error after one run_side sent is unread.
            if (!done) (void)send_sync(*end, sync_error, 0, false, done.error().message);
            return done;
        });
        return r ? 0 : fail(r.error().message);
    }
    const bool server = o.server.empty();
    // Listening before the device opens: a client started at the same time finds us (-R:
    // the connection manager listens once the function is open; the client retries).
    std::optional<listener> l;
    if (server && !o.rdma_cm) {
        auto made = listener::create(o.tcp_port);
        if (!made) return fail(made.error().message);
        l.emplace(std::move(made).value());
    }
    auto fn = open_function(o.devices.empty() ? "" : o.devices[0], o.ib_port);
    if (!fn) return fail(fn.error().message);
    std::unique_ptr<link> ch;  // -R: made by run_side
    if (server) {
        std::printf("cxv-perf: %s server on %s, waiting for a client on port %u\n", o.test.c_str(), fn.value()->bdf.c_str(),
                    o.tcp_port);
        std::fflush(stdout);
        if (l) {
            auto accepted = l->accept(kAcceptTimeout);
            if (!accepted) return fail(accepted.error().message);
            ch = std::make_unique<channel>(std::move(accepted).value());
        }
    } else if (!o.rdma_cm) {
        auto connected = channel::connect(o.server, o.tcp_port, 3s);
        if (!connected) return fail(connected.error().message);
        ch = std::make_unique<channel>(std::move(connected).value());
    }
    if (auto r = run_side(o, fn.value(), ch, server, false, hz); !r) {
        if (ch) (void)send_sync(*ch, sync_error, 0, false, r.error().message);  // the peer says why
        return fail(r.error().message);
    }
    return 0;
}

}  // namespace
}  // namespace cxv::perf

int main(int argc, char** argv) { return cxv::perf::run(argc, argv); }
