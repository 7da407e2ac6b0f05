// The latency tests: SEND and RDMA WRITE as ping-pong (a sample is a round trip, halved
// in the report as perftest does), RDMA READ and atomic fetch-and-add one at a time (a
// sample is one operation).
#include <atomic>
#include <cstring>

#include "bench/perf/iteration_clock.h"
#include "bench/perf/loops.h"
#include "bench/perf/tsc.h"
#include "bench/perf/wait.h"

namespace cxv::perf {

namespace {

// A latency loop signals one send in 32; before the next signalled one it takes the
// previous one's completion, so the send queue (128) never fills.
constexpr unsigned kSignalEvery = 32;

struct send_signals {
    unsigned count = 0;
    bool pending = false;
};

error stalled(const char* what) {
    return error{ETIMEDOUT, std::string("no ") + what + " for a long time: the peer stopped answering"};
}

// One completion from `cq`, within the stall bound.
status take_one(idle_watch& w, cxv::cq& cq, ibv_wc& wc, const char* what) {
    for (;;) {
        if (cq.poll(1, &wc) == 1) {
            w.progress();
            if (wc.status != IBV_WC_SUCCESS) [[unlikely]] return completion_error(wc, what);
            return ok_status();
        }
        if (!idle_on(w, cq)) [[unlikely]] return w.stopped ? status(error{EINTR, "stopped"}) : status(stalled(what));
    }
}

// The send flags of the next send, taking the last signalled completion first when this
// one is signalled too.
status signal_next(idle_watch& w, side& s, send_signals& sig, unsigned& flags) {
    if (++sig.count % kSignalEvery != 0) return ok_status();
    flags |= IBV_SEND_SIGNALED;
    if (sig.pending) {
        ibv_wc wc;
        if (auto r = take_one(w, *s.scq, wc, "a send"); !r) return r;
    }
    sig.pending = true;
    return ok_status();
}

status drain_signals(idle_watch& w, side& s, send_signals& sig) {
    if (!sig.pending) return ok_status();
    ibv_wc wc;
    sig.pending = false;
    return take_one(w, *s.scq, wc, "a send");
}

// The byte write_lat polls: the last of the message, as perftest does.
inline std::uint8_t polled(const std::byte* p) noexcept {
    return std::atomic_ref<const std::uint8_t>(*reinterpret_cast<const std::uint8_t*>(p)).load(std::memory_order_acquire);
}

// The size's WR, built once: a ping changes only its send flags.
struct send_wr {
    ibv_sge sge{};
    ibv_send_wr wr{};
    unsigned flags = 0;  // every send's (inline); the loop adds IBV_SEND_SIGNALED
    send_wr(side& s, std::size_t size) {
        const options& o = *s.o;
        sge = {reinterpret_cast<std::uint64_t>(s.send_area(0, 0)), static_cast<std::uint32_t>(size), s.mr->lkey()};
        wr.sg_list = &sge;
        wr.num_sge = 1;
        const bool inl = size <= s.inline_max;
        switch (o.op) {
        case operation::send:
            wr.opcode = IBV_WR_SEND;
            if (o.conn == transport::ud) {
                wr.wr.ud.ah = &s.ahs[0].base;
                wr.wr.ud.remote_qpn = s.remote[0].qpn;
                wr.wr.ud.remote_qkey = kQkey;
            }
            wr.send_flags = inl ? IBV_SEND_INLINE : 0;
            break;
        case operation::write:
            wr.opcode = IBV_WR_RDMA_WRITE;
            wr.wr.rdma.remote_addr = s.remote_addr(0, 0);
            wr.wr.rdma.rkey = s.remote[0].rkey;
            wr.send_flags = inl ? IBV_SEND_INLINE : 0;
            break;
        case operation::read:
            wr.opcode = IBV_WR_RDMA_READ;
            sge.addr = reinterpret_cast<std::uint64_t>(s.send_area(0, 0));
            wr.wr.rdma.remote_addr = s.remote_addr(0, 0);
            wr.wr.rdma.rkey = s.remote[0].rkey;
            wr.send_flags = IBV_SEND_SIGNALED;
            break;
        case operation::atomic:
            wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
            sge.addr = reinterpret_cast<std::uint64_t>(s.send_area(0, 0));
            sge.length = 8;
            wr.wr.atomic.remote_addr = s.remote_addr(0, 0);
            wr.wr.atomic.rkey = s.remote[0].rkey;
            wr.wr.atomic.compare_add = 1;
            wr.send_flags = IBV_SEND_SIGNALED;
            break;
        }
        flags = wr.send_flags;
    }
};

error post_failed(int rc) { return error{rc, std::string("post_send failed: ") + std::strerror(rc)}; }

// One ping or pong: the message of iteration k sent.
status ping(idle_watch& w, side& s, send_wr& m, send_signals& sig, std::size_t size, std::uint64_t k) {
    if (s.o->verify) {
        fill_pattern(s.send_area(0, 0), size, k);
    } else if (s.o->op == operation::write) {
        *reinterpret_cast<std::uint8_t*>(s.send_area(0, 0) + size - 1) = pattern(k, size - 1);
    }
    m.wr.send_flags = m.flags;
    if (auto r = signal_next(w, s, sig, m.wr.send_flags); !r) return r;
    ibv_send_wr* bad = nullptr;
    if (const int rc = s.qps[0]->post_send(&m.wr, &bad); rc != 0) [[unlikely]] return post_failed(rc);
    return ok_status();
}

// The peer's message of iteration k arrived (and, with --verify, is checked).
status pong(idle_watch& w, loop_context& c, side& s, std::size_t size, std::uint64_t k) {
    const std::size_t grh = s.o->conn == transport::ud ? kGrh : 0;
    if (s.o->op == operation::send) {
        ibv_wc wc;
        if (auto r = take_one(w, *s.rcq, wc, "a receive"); !r) return r;
        const std::size_t slot = wc.wr_id & 0xffffffff;
        if (s.o->verify) {
            const std::byte* p = s.recv_area(0, slot) + grh;
            if (wc.byte_len != size + grh) {
                c.verified.note(k, wc.byte_len, static_cast<unsigned>(size + grh), wc.byte_len);
            } else {
                c.verified.check(k, p, size, k);
            }
        }
        if (const int rc = post_receive(s, 0, slot); rc != 0) [[unlikely]] {
            return error{rc, std::string("post_recv failed: ") + std::strerror(rc)};
        }
        return ok_status();
    }
    // write: the last byte of the receive area turns to this iteration's.
    const std::byte* last = s.recv_area(0, 0) + size - 1;
    const std::uint8_t want = pattern(k, size - 1);
    while (polled(last) != want) {
        if (!w.idle()) [[unlikely]] return w.stopped ? status(error{EINTR, "stopped"}) : status(stalled("RDMA WRITE"));
    }
    w.progress();
    if (s.o->verify) {
        const std::byte* p = s.recv_area(0, 0);
        c.verified.check(k, p, size, k);
    }
    return ok_status();
}

}  // namespace

status latency_client(loop_context& c, side& s, std::size_t size, std::uint64_t warmup,
                      std::vector<std::uint64_t>& samples, std::uint64_t& measured) {
    const options& o = *c.o;
    const std::uint64_t total = warmup + (o.duration ? samples.size() : o.iters);
    idle_watch w{c};
    send_wr m(s, size);
    send_signals sig;
    std::uint64_t k = 0;
    // One stamp per iteration, as perftest takes: an iteration's sample runs from the
    // previous iteration's stamp to its own, so the harness's own work (the stamp, the
    // stored sample, the progress count) is in it once (tsc.h: why the bare RDTSC).
    iteration_clock clock;
    for (; k < total; ++k) {
        if (c.end_tick != 0 && k >= warmup && clock.prev >= c.end_tick) break;
        if (o.op == operation::send || o.op == operation::write) {
            if (auto r = ping(w, s, m, sig, size, k); !r) return r;
            if (auto r = pong(w, c, s, size, k); !r) return r;
        } else {
            if (o.verify) fill_pattern(s.send_area(0, 0), size, 1);  // stale data must not pass
            ibv_send_wr* bad = nullptr;
            if (const int rc = s.qps[0]->post_send(&m.wr, &bad); rc != 0) [[unlikely]] return post_failed(rc);
            ibv_wc wc;
            if (auto r = take_one(w, *s.scq, wc, o.op == operation::read ? "an RDMA READ" : "an atomic"); !r) return r;
            if (o.verify) {
                const std::byte* p = s.send_area(0, 0);
                if (o.op == operation::read) {
                    c.verified.check(k, p, size, 0);
                } else {
                    std::uint64_t raw;
                    std::memcpy(&raw, p, 8);
                    if (!fetched_is(raw, k)) c.verified.note(k, 0, static_cast<unsigned>(k), static_cast<unsigned>(raw));
                }
            }
        }
        clock.tick(k, warmup, samples.data(), c.progress);
    }
    measured = k - warmup;
    return drain_signals(w, s, sig);
}

status latency_server(loop_context& c, side& s, std::size_t size, std::uint64_t warmup) {
    const options& o = *c.o;
    if (o.op == operation::read || o.op == operation::atomic) return ok_status();  // the responder is the device
    // A -D run ends when the client says so; a -n run after its iterations.
    const std::uint64_t total = o.duration ? ~std::uint64_t{0} : warmup + o.iters;
    idle_watch w{c, o.duration != 0};
    send_wr m(s, size);
    send_signals sig;
    for (std::uint64_t k = 0; k < total; ++k) {
        if (auto r = pong(w, c, s, size, k); !r) {
            if (w.stopped) break;
            return r;
        }
        if (auto r = ping(w, s, m, sig, size, k); !r) return r;
    }
    w.watch_stop = false;
    return drain_signals(w, s, sig);
}

}  // namespace cxv::perf
