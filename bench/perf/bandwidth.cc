// The bandwidth tests: up to -t operations in flight per QP, posted -l at a time, one
// completion asked for every -Q; the QPs served round robin.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cstring>

#include "bench/perf/loops.h"
#include "bench/perf/tsc.h"
#include "bench/perf/wait.h"

namespace cxv::perf {

namespace {

constexpr std::uint64_t kIterationMask = (std::uint64_t{1} << 48) - 1;

// Before a size's timed loop: every field of QP q's post list that is the same for
// every iteration (opcode, SGE length and key, the peer's QPN, AH or rkey, inline).
void shape_fixed(side& s, unsigned q, std::size_t size) {
    const options& o = *s.o;
    for (unsigned j = 0; j < o.post_list; ++j) {
        ibv_send_wr& wr = s.wrs[q * o.post_list + j];
        ibv_sge& sge = s.sges[q * o.post_list + j];
        wr = ibv_send_wr{};
        sge = ibv_sge{};
        sge.length = static_cast<std::uint32_t>(size);
        sge.lkey = s.mr->lkey();
        wr.sg_list = &sge;
        wr.num_sge = 1;
        const unsigned inl = size <= s.inline_max ? IBV_SEND_INLINE : 0;
        switch (o.op) {
        case operation::send:
            // --verify: the iteration in the immediate data (UC and UD may lose messages).
            wr.opcode = o.verify ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
            if (o.conn == transport::ud) {
                wr.wr.ud.ah = &s.ahs[q].base;
                wr.wr.ud.remote_qpn = s.remote[q].qpn;
                wr.wr.ud.remote_qkey = kQkey;
            }
            wr.send_flags = inl;
            break;
        case operation::write:
            wr.opcode = IBV_WR_RDMA_WRITE;
            wr.wr.rdma.rkey = s.remote[q].rkey;
            wr.send_flags = inl;
            break;
        case operation::read:
            wr.opcode = IBV_WR_RDMA_READ;
            wr.wr.rdma.rkey = s.remote[q].rkey;
            break;
        case operation::atomic:
            sge.length = 8;
            wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
            wr.wr.atomic.remote_addr = s.remote_addr(q, 0);
            wr.wr.atomic.rkey = s.remote[q].rkey;
            wr.wr.atomic.compare_add = 1;
            break;
        }
    }
}

// In the loop: what iteration `it` changes in a WR shape_fixed built (its id, slot,
// signalling and, with --verify, its payload).
inline void shape(side& s, unsigned q, std::uint64_t it, std::uint64_t limit, std::size_t size, ibv_send_wr& wr,
                  ibv_sge& sge) noexcept {
    const options& o = *s.o;
    const std::size_t slot = it % s.slots;
    std::byte* local = s.send_area(q, slot);
    sge.addr = reinterpret_cast<std::uint64_t>(local);
    wr.wr_id = (std::uint64_t{q} << 48) | it;
    wr.next = nullptr;
    const bool last = it + 1 == limit;
    const unsigned signalled = ((it + 1) % o.cq_mod == 0 || last) ? IBV_SEND_SIGNALED : 0;
    wr.send_flags = (wr.send_flags & IBV_SEND_INLINE) | signalled;
    switch (o.op) {
    case operation::send:
        wr.imm_data = static_cast<std::uint32_t>(it);
        if (o.verify) fill_pattern(local, size, it);
        break;
    case operation::write:
        wr.wr.rdma.remote_addr = s.remote_addr(q, slot);
        if (o.verify) fill_pattern(local, size, it);
        break;
    case operation::read:
        wr.wr.rdma.remote_addr = s.remote_addr(q, slot);
        if (o.verify) fill_pattern(local, size, slot + 1);  // stale data must not pass
        break;
    case operation::atomic: break;
    }
}

// READ and atomic results of iterations [from, to) on QP q, now complete.
void check_results(loop_context& c, side& s, unsigned q, std::uint64_t from, std::uint64_t to, std::size_t size) {
    for (std::uint64_t it = from; it < to; ++it) {
        const std::size_t slot = it % s.slots;
        const std::byte* p = s.send_area(q, slot);
        if (s.o->op == operation::read) {
            c.verified.check(it, p, size, slot);
        } else {
            std::uint64_t raw;
            std::memcpy(&raw, p, 8);
            if (!fetched_is(raw, it)) c.verified.note(it, 0, static_cast<unsigned>(it), static_cast<unsigned>(raw));
        }
    }
}

}  // namespace

error completion_error(const ibv_wc& wc, const char* what) {
    return error{EIO, std::string(what) + " completed with " + cxv::wc_status_str(wc.status) + " (status " +
                          std::to_string(wc.status) + ", vendor syndrome " + std::to_string(wc.vendor_err) + ")"};
}

double peak_ticks_per_iteration(const std::uint64_t* stamps, std::size_t n, std::uint64_t want, std::uint64_t ticks,
                                std::uint64_t iterations) noexcept {
    double best = 0;
    std::uint64_t covered = 0;
    std::size_t first = 0;
    for (std::size_t last = 1; last < n; ++last) {
        covered += stamps[2 * last + 1];
        while (first + 1 < last && covered - stamps[2 * (first + 1) + 1] >= want) {
            ++first;
            covered -= stamps[2 * first + 1];
        }
        if (covered >= want) {
            // The exact quotient: a window of a few fast iterations lasts only tens of ticks,
            // and whole ticks would round its peak by several percent.
            const double per = static_cast<double>(stamps[2 * last] - stamps[2 * first]) / static_cast<double>(covered);
            if (best == 0 || per < best) best = per;
        }
    }
    // Never slower than the average (the window may span a pause).
    if (iterations != 0) {
        const double avg = static_cast<double>(ticks) / static_cast<double>(iterations);
        if (best == 0 || best > avg) best = avg;
    }
    return best;
}

status bandwidth_client(loop_context& c, side& s, std::size_t size, std::vector<std::uint64_t>& stamps,
                        bandwidth_sample_set& out, std::uint64_t& per_qp) {
    const options& o = *c.o;
    const unsigned nq = o.qps;
    // Everything the loop touches was made with the side.
    std::vector<std::uint64_t>& posted = s.posted;
    std::vector<std::uint64_t>& done = s.done;
    std::vector<ibv_send_wr>& wrs = s.wrs;
    std::vector<ibv_sge>& sges = s.sges;
    std::fill(posted.begin(), posted.end(), 0);
    std::fill(done.begin(), done.end(), 0);
    for (unsigned q = 0; q < nq; ++q) shape_fixed(s, q, size);
    std::uint64_t limit = o.duration ? ~std::uint64_t{0} >> 16 : o.iters;
    const bool check = o.verify && (o.op == operation::read || o.op == operation::atomic);
    idle_watch w{c};
    std::size_t nstamps = 0;
    std::uint64_t finished_qps = 0, total_done = 0;
    bool stopping = false;
    const std::uint64_t t0 = tsc_now();
    while (finished_qps < nq) {
        if (c.end_tick != 0 && !stopping && tsc_unordered() >= c.end_tick) {
            // -D: every QP goes on to the same count, at a signalled WR.
            stopping = true;
            std::uint64_t most = *std::max_element(posted.begin(), posted.end());
            limit = (most + o.cq_mod - 1) / o.cq_mod * o.cq_mod;
            if (limit == 0) limit = o.cq_mod;
            finished_qps = 0;
            for (unsigned q = 0; q < nq; ++q) finished_qps += done[q] == limit;
            if (finished_qps == nq) break;
        }
        for (unsigned q = 0; q < nq; ++q) {
            while (posted[q] < limit && posted[q] - done[q] + o.post_list <= o.tx_depth) {
                const unsigned n = static_cast<unsigned>(std::min<std::uint64_t>(o.post_list, limit - posted[q]));
                ibv_send_wr* list = &wrs[q * o.post_list];
                ibv_sge* list_sges = &sges[q * o.post_list];
                for (unsigned j = 0; j < n; ++j) {
                    shape(s, q, posted[q] + j, limit, size, list[j], list_sges[j]);
                    if (j > 0) list[j - 1].next = &list[j];
                }
                ibv_send_wr* bad = nullptr;
                if (const int rc = s.qps[q]->post_send(list, &bad); rc != 0) [[unlikely]] {
                    return error{rc, std::string("post_send failed: ") + std::strerror(rc)};
                }
                posted[q] += n;
            }
        }
        ibv_wc wc[16];
        const int got = s.scq->poll(16, wc);
        if (got == 0) {
            if (!idle_on(w, *s.scq)) [[unlikely]] return error{ETIMEDOUT, "no completion for a long time: the peer stopped answering"};
            continue;
        }
        w.progress();
        const std::uint64_t now = tsc_unordered();
        for (int i = 0; i < got; ++i) {
            if (wc[i].status != IBV_WC_SUCCESS) [[unlikely]] return completion_error(wc[i]);
            const unsigned q = static_cast<unsigned>(wc[i].wr_id >> 48);
            const std::uint64_t it = wc[i].wr_id & kIterationMask;
            if (check) check_results(c, s, q, done[q], it + 1, size);
            const std::uint64_t covered = it + 1 - done[q];
            total_done += covered;
            done[q] = it + 1;
            if (done[q] == limit) ++finished_qps;
            // Each completion: its time, and the iterations it completed.
            if (nstamps + 2 <= stamps.size()) {
                stamps[nstamps++] = now;
                stamps[nstamps++] = covered;
            }
        }
        if (c.progress != nullptr) c.progress->store(total_done, std::memory_order_relaxed);
    }
    const std::uint64_t t1 = tsc_now();
    per_qp = limit;
    out.bytes = size;
    out.iterations = total_done;
    out.ticks = t1 - t0;
    out.min_ticks_per_iteration = peak_ticks_per_iteration(stamps.data(), nstamps / 2,
                                                           std::max<std::uint64_t>(o.tx_depth, o.cq_mod), out.ticks, total_done);
    return ok_status();
}

status bandwidth_server(loop_context& c, side& s, std::size_t size, std::uint64_t expected, bool watch_stop,
                        std::vector<std::uint64_t>& count, std::uint64_t& received) {
    const options& o = *c.o;
    if (o.op != operation::send) return ok_status();  // WRITE, READ, atomics: the device answers
    const std::size_t grh = o.conn == transport::ud ? kGrh : 0;
    // UC and UD lose what finds no receive: after the client's stop, a pause ends the run.
    const bool lossy = o.conn != transport::rc && !watch_stop;
    idle_watch w{c, watch_stop};
    while (received < expected && (c.expected == nullptr || received < c.expected->load(std::memory_order_acquire))) {
        ibv_wc wc[16];
        const int got = s.rcq->poll(16, wc);
        if (got == 0) {
            if (!idle_on(w, *s.rcq)) {
                if (w.stopped || lossy) return ok_status();  // the caller settles the count
                return error{ETIMEDOUT, "no message for a long time: the client stopped sending"};
            }
            continue;
        }
        w.progress();
        for (int i = 0; i < got; ++i) {
            if (wc[i].status != IBV_WC_SUCCESS) [[unlikely]] return completion_error(wc[i]);
            const unsigned q = static_cast<unsigned>(wc[i].wr_id >> 32);
            const std::size_t slot = wc[i].wr_id & 0xffffffff;
            if (o.verify) {
                // The iteration: the immediate data (messages of UC and UD may be lost).
                const std::uint64_t it = (wc[i].wc_flags & IBV_WC_WITH_IMM) ? wc[i].imm_data : ~std::uint64_t{0};
                const std::byte* p = s.recv_area(q, slot) + grh;
                if (it == ~std::uint64_t{0} || wc[i].byte_len != size + grh) {
                    c.verified.note(count[q], 0, static_cast<unsigned>(size + grh), wc[i].byte_len);
                } else if (o.conn == transport::rc && it != static_cast<std::uint32_t>(count[q])) {
                    c.verified.note(count[q], 0, static_cast<unsigned>(count[q]), static_cast<unsigned>(it));
                } else {
                    c.verified.check(it, p, size, it);
                }
            }
            ++count[q];
            ++received;
            if (const int rc = post_receive(s, q, slot); rc != 0) [[unlikely]] {
                return error{rc, std::string("post_recv failed: ") + std::strerror(rc)};
            }
        }
    }
    return ok_status();
}

void prepare_size(side& s, std::size_t size) {
    const options& o = *s.o;
    for (unsigned q = 0; q < o.qps; ++q) {
        switch (o.op) {
        case operation::write:
            // write_lat waits for the last byte to turn to iteration 0's.
            for (unsigned k = 0; k < s.slots; ++k) fill_pattern(s.recv_area(q, k), size, ~std::uint64_t{0});
            break;
        case operation::read:
            for (unsigned k = 0; k < s.slots; ++k) fill_pattern(s.recv_area(q, k), size, k);
            break;
        case operation::atomic: std::memset(s.recv_area(q, 0), 0, 8); break;
        case operation::send: break;
        }
    }
}

void verify_after(loop_context& c, side& s, std::size_t size, std::uint64_t per_qp) {
    const options& o = *c.o;
    if (!o.verify || o.latency || o.op != operation::write || per_qp == 0) return;
    // RC: the client's completions mean every WRITE is in place. UC has no ACK: the last
    // ones may still be on their way, so they get a moment (bounded) to land.
    const std::uint64_t give_up = tsc_now() + static_cast<std::uint64_t>(c.tsc_hz * (o.conn == transport::uc ? 2 : 0));
    for (;;) {
        verify_result found;
        for (unsigned q = 0; q < o.qps; ++q) {
            for (std::uint64_t k = 0; k < s.slots && k < per_qp; ++k) {
                // The last iteration that wrote slot k.
                const std::uint64_t last = (per_qp - 1) - ((per_qp - 1 - k) % s.slots);
                const std::byte* p = s.recv_area(q, k);
                std::atomic_thread_fence(std::memory_order_acquire);
                found.check(last, p, size, last);
            }
        }
        if (found.bad == 0 || tsc_now() >= give_up) {
            if (found.bad != 0 && c.verified.bad == 0) c.verified = found;
            else c.verified.bad += found.bad;
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

void fill_pattern(std::byte* p, std::size_t n, std::uint64_t iteration) noexcept {
    auto* b = reinterpret_cast<std::uint8_t*>(p);
    for (std::size_t i = 0; i < n; ++i) b[i] = pattern(iteration, i);
}

bool verify_result::check(std::uint64_t iteration, const std::byte* p, std::size_t n, std::uint64_t of) noexcept {
    const auto* b = reinterpret_cast<const std::uint8_t*>(p);
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t seen = b[i];
        if (seen != pattern(of, i)) {
            note(iteration, i, pattern(of, i), seen);
            return false;
        }
    }
    return true;
}

std::string verify_result::describe() const {
    char line[200];
    std::snprintf(line, sizeof line, "--verify: %llu iteration(s) with wrong data; the first, iteration %llu: byte %zu is 0x%02x, expected 0x%02x",
                  static_cast<unsigned long long>(bad), static_cast<unsigned long long>(first_iteration), first_byte,
                  got, expected);
    return line;
}

}  // namespace cxv::perf
