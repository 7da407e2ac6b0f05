// The fast path on plain memory, as a microbenchmark of a provider does it: rings of
// 1024 entries built by queues/ on ordinary memory (no device), each operation called
// through the verbs-shaped entry points of api/verbs_post.h, refills and recycling
// outside the measured region. For each operation: ns/op (median of repeats) and
// instructions/op counted by valgrind's callgrind (repeatable on noisy machines), and
// our targets. With --rdma-core DIR, rdma-core's mlx5 provider built from that tree with
// the same compiler and flags (bench/rdma_core/) is measured in the same shapes in the
// same run, and the ratios printed; else its figures as measured once (docs/performance.md).
//
//   fastpath                      every operation, table
//   fastpath --rdma-core DIR      the same beside rdma-core's provider, with the ratios
//   fastpath --json FILE          also [{"op", "ns_per_op", "instructions_per_op", ...}]
//   fastpath --short              fewer repeats (CI)
//   fastpath --no-callgrind       ns only
//   fastpath --check-targets      exit 1 when an operation is above its target (or, with
//                                 --rdma-core, under its ratio to rdma-core)
//   fastpath --loop OP --iters N  run one operation N times (what callgrind counts)
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/verbs_post.h"
#include "bench/fastpath_cli.h"
#include "bench/fastpath_rdma_core.h"
#include "bench/fastpath_threads.h"
#include "hw/cqe.h"
#include "queues/eth_queue.h"
#include "queues/mp_send_queue.h"

using namespace cxv;

namespace {

constexpr unsigned kLog = 10;  // 1024-entry rings
constexpr unsigned kEntries = 1u << kLog;
constexpr std::uint32_t kQpn = 0x123;

// Plain memory for every ring of one benchmark.
struct rings {
    alignas(4096) std::array<std::byte, kEntries * 16> rq_wqes{};  // 1 SGE per receive WQE
    alignas(4096) std::array<std::byte, kEntries * 32> srq_wqes{};  // next segment + 1 SGE
    alignas(4096) std::array<std::byte, kEntries * 64> sq_bbs{};
    alignas(4096) std::array<std::byte, kEntries * 64> cqes{};
    alignas(64) std::array<std::byte, 512> bf{};  // the "BlueFlame register": plain memory
    std::array<std::uint64_t, kEntries> rq_ids{}, srq_ids{}, sq_ids{};
    std::array<std::uint32_t, kEntries> sq_ends{};
    hw::wq_doorbell_record dbrec{}, srq_dbrec{};
    hw::cq_doorbell_record cq_dbrec{};
    queues::recv_queue rq;
    queues::srq_ring srq;
    queues::send_queue sq;
    queues::completion_queue cq;
    queues::qp_rings qp;
    queues::mp_send_queue mp{nullptr, kLog, kQpn, false, 1, nullptr, nullptr};
    queues::eth_recv_queue eth_rq;  // on rq_wqes (cyclic) or srq_wqes (striding), and cqes
    std::array<char, 4096> buf{};
    std::uint32_t device_pi = 0;  // CQEs written by the stand-in device

    explicit rings(queues::doorbell_mode mode) {
        for (unsigned i = 0; i < kEntries; ++i) {
            reinterpret_cast<hw::wqe_srq_next_seg*>(srq_wqes.data() + i * 32)->next_wqe_index =
                hw::be16::from(static_cast<std::uint16_t>((i + 1) % kEntries));
            reinterpret_cast<hw::cqe64*>(cqes.data() + i * 64)->op_own =
                hw::make_op_own(hw::cqe_opcode::INVALID, false, 1);
        }
        rq = queues::recv_queue(rq_wqes.data(), kLog, 4, rq_ids.data(), &dbrec);
        srq = queues::srq_ring(srq_wqes.data(), kLog, 5, srq_ids.data(), &srq_dbrec);
        sq = queues::send_queue(sq_bbs.data(), kLog, kQpn, false, sq_ids.data(), sq_ends.data(), &dbrec, bf.data(),
                                256, mode, 2);
        cq = queues::completion_queue(cqes.data(), kLog, &cq_dbrec);
        mp.~mp_send_queue();
        new (&mp) queues::mp_send_queue(sq_bbs.data(), kLog, kQpn, false, 1, &dbrec, bf.data());
        qp = {kQpn, &sq, &rq, nullptr};
        cq.attach(&qp, 1);
    }
    // What a device would write for the WQE at `counter`.
    void device_cqe(hw::cqe_opcode op, std::uint16_t counter) {
        auto* c = reinterpret_cast<hw::cqe64*>(cqes.data() + (device_pi & (kEntries - 1)) * 64);
        std::memset(c, 0, 63);
        c->sop_drop_qpn = hw::be32::from(kQpn | (op == hw::cqe_opcode::REQ ? 0x08u << 24 : 0));
        c->wqe_counter = hw::be16::from(counter);
        c->byte_cnt = hw::be32::from(64);
        c->op_own = hw::make_op_own(op, false, static_cast<std::uint8_t>((device_pi >> kLog) & 1));
        ++device_pi;
    }
};

// The benchmark state per operation, prepared outside the measured region.
struct state {
    std::unique_ptr<rings> r;
    ibv_sge sge{};
    std::array<ibv_recv_wr, 32> rwr{};
    ibv_send_wr swr{};
    std::array<ibv_wc, 16> wc{};
    std::uint32_t rq_counter = 0;  // next receive WQE the device completes
    std::uint32_t sq_posted = 0;
    std::uint64_t mp_retired = 0;  // what the multi-producer ring had published at the last retire
    std::array<queues::eth_packet, 16> eth{};
    std::uint32_t stride = 0;  // striding: the next packet's first stride
};

// Measured: one call each; never inlined, so that callgrind can count exactly them.
extern "C" {
__attribute__((noinline)) int cxv_bench_post_recv(state& s) {
    ibv_recv_wr* bad;
    return api::post_recv(s.r->rq, s.rwr.data(), &bad);
}
__attribute__((noinline)) int cxv_bench_post_srq_recv(state& s) {
    ibv_recv_wr* bad;
    return api::post_srq_recv(s.r->srq, s.rwr.data(), &bad);
}
__attribute__((noinline)) int cxv_bench_post_send(state& s) {
    ibv_send_wr* bad;
    return api::post_send(api::send_side{&s.r->sq, 1, 64, IBV_QPT_RC}, &s.swr, &bad);
}
__attribute__((noinline)) int cxv_bench_poll_cq(state& s) { return api::poll_cq(s.r->cq, 16, s.wc.data()); }
// The rings themselves, without the ibv_send_wr translation: single-producer (put and
// ring) and multi-producer (post, from one thread: its atomics and publication).
__attribute__((noinline)) int cxv_bench_ring_send_sp(state& s, const queues::send_request& r) {
    if (!s.r->sq.put(r)) return ENOMEM;
    s.r->sq.ring();
    return 0;
}
__attribute__((noinline)) int cxv_bench_ring_send_mp(state& s, const queues::send_request& r) {
    return s.r->mp.post(r) ? 0 : ENOMEM;
}
// Raw Ethernet (queues/eth_queue.h): a 64-byte frame sent by pointer (its 18-byte header
// inline, one BB) or whole inline (two BBs), then rung; and a poll of 16 packets, which
// first gives the last poll's WQEs back (poll plus repost).
__attribute__((noinline)) int cxv_bench_eth_send_frame(state& s) {
    if (!queues::put_eth_frame(s.r->sq, reinterpret_cast<const std::byte*>(s.r->buf.data()), 64, 0x1234,
                               queues::eth_l3_csum | queues::eth_l4_csum, 1)) {
        return ENOMEM;
    }
    s.r->sq.ring();
    return 0;
}
__attribute__((noinline)) int cxv_bench_eth_send_inline(state& s) {
    if (!queues::put_eth_inline(s.r->sq, reinterpret_cast<const std::byte*>(s.r->buf.data()), 64,
                                queues::eth_l3_csum | queues::eth_l4_csum, 1)) {
        return ENOMEM;
    }
    s.r->sq.ring();
    return 0;
}
__attribute__((noinline)) int cxv_bench_eth_poll(state& s) { return s.r->eth_rq.poll(s.eth.data(), 16); }
}

struct op {
    const char* name;
    unsigned per_call;  // WRs or CQEs per measured call
    double reference;   // rdma-core 65.0 mlx5, instructions/op (measured once, 2026-11-22)
    double target;      // instructions/op at most
    double ratio;       // rdma-core's instructions/op over ours at least, when measured beside
    std::function<void(state&)> setup;
    std::function<void(state&)> refill;  // outside the measured region, before each call
    std::function<void(state&)> call;
    unsigned calls_per_refill;
    // rdma-core's operation it is compared with, where rdma-core has none of its own
    // (null: the one of the same name).
    const char* rc_op = nullptr;
};

void prepare_recv(state& s, unsigned n) {
    s.r = std::make_unique<rings>(queues::doorbell_mode::doorbell);
    s.sge = {reinterpret_cast<std::uintptr_t>(s.r->buf.data()), 64, 0x1234};
    for (unsigned i = 0; i < 32; ++i) {
        s.rwr[i].wr_id = i;
        s.rwr[i].sg_list = &s.sge;
        s.rwr[i].num_sge = 1;
        s.rwr[i].next = i + 1 < n ? &s.rwr[i + 1] : nullptr;
    }
}

// The ring operations' WR: RDMA WRITE of 4 KiB, one SGE, signaled.
const queues::send_request& write4k() {
    static const queues::send_request r = [] {
        static char buf[4096];
        static const queues::sge sg{reinterpret_cast<std::uintptr_t>(buf), 4096, 0x1234};
        queues::send_request w;
        w.opcode = hw::wqe_opcode::RDMA_WRITE;
        w.signaled = true;
        w.sg = &sg;
        w.num_sge = 1;
        w.remote_addr = 0x7f0000001000;
        w.rkey = 0x5678;
        return w;
    }();
    return r;
}

// What the device completed of the multi-producer ring: everything published since the
// last call (nothing when nothing new is).
void retire_published(state& s) {
    const std::uint64_t published = s.r->mp.published();
    if (published == s.mp_retired) return;
    s.r->mp.retire(static_cast<std::uint16_t>(published - 1));
    s.mp_retired = published;
}

// How many times fewer instructions than rdma-core's provider, measured beside it.
constexpr double kPostRatio = 3.5, kPollRatio = 4.0;
// Raw Ethernet (issue 35): at most a third of rdma-core's raw packet QP.
constexpr double kEthRatio = 3.0;

std::vector<op> operations() {
    std::vector<op> ops;
    // Receives: the ring is emptied (as completions would) when full.
    auto recv_refill = [](state& s) { s.r->rq.reset(); };
    ops.push_back({"post_recv_1", 1, 120, 33, kPostRatio, [](state& s) { prepare_recv(s, 1); }, recv_refill,
                   [](state& s) { cxv_bench_post_recv(s); }, kEntries});
    ops.push_back({"post_recv_32", 32, 72.5, 20.6, kPostRatio, [](state& s) { prepare_recv(s, 32); }, recv_refill,
                   [](state& s) { cxv_bench_post_recv(s); }, kEntries / 32});
    // SRQ steady state: full; before each post, the oldest posted WQE is recycled.
    ops.push_back({"post_srq_recv_1", 1, 124, 38, kPostRatio,
                   [](state& s) {
                       prepare_recv(s, 1);
                       ibv_recv_wr* bad;
                       for (unsigned i = 0; i + 1 < kEntries; ++i) api::post_srq_recv(s.r->srq, s.rwr.data(), &bad);
                       s.rq_counter = 0;
                   },
                   [](state& s) { s.r->srq.retire(static_cast<std::uint16_t>(s.rq_counter++ % kEntries)); },
                   [](state& s) { cxv_bench_post_srq_recv(s); }, 1});
    auto send_setup = [](queues::doorbell_mode mode, bool inl) {
        return [mode, inl](state& s) {
            s.r = std::make_unique<rings>(mode);
            s.sge = {reinterpret_cast<std::uintptr_t>(s.r->buf.data()), inl ? 64u : 4096u, 0x1234};
            s.swr = {};
            s.swr.sg_list = &s.sge;
            s.swr.num_sge = 1;
            s.swr.opcode = inl ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
            s.swr.send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
            s.swr.wr.rdma.remote_addr = 0x7f0000001000;
            s.swr.wr.rdma.rkey = 0x5678;
        };
    };
    // Sends: completed in bulk (one retire of everything) when the ring is full.
    auto send_refill = [](state& s) { s.r->sq.reset(); };
    ops.push_back({"post_send_inline64_bf", 1, 374, 100, kPostRatio, send_setup(queues::doorbell_mode::blueflame, true),
                   send_refill, [](state& s) { cxv_bench_post_send(s); }, kEntries / 2});
    ops.push_back({"post_send_write4k_db", 1, 295, 73, kPostRatio, send_setup(queues::doorbell_mode::doorbell, false),
                   send_refill, [](state& s) { cxv_bench_post_send(s); }, kEntries});
    // The same write on the rings directly, single- and multi-producer (the bar:
    // multi-producer at most 1.5x single-producer; no rdma-core reference).
    ops.push_back({"ring_write4k_sp", 1, 0, 0, 0, send_setup(queues::doorbell_mode::doorbell, false), send_refill,
                   [](state& s) { cxv_bench_ring_send_sp(s, write4k()); }, kEntries});
    ops.push_back({"ring_write4k_mp", 1, 0, 0, 0, send_setup(queues::doorbell_mode::doorbell, false),
                   retire_published, [](state& s) { cxv_bench_ring_send_mp(s, write4k()); }, kEntries});
    // Polls: 16 valid CQEs per call, written (and their WQEs posted) beforehand. Targets:
    // issue 38's (42 and 32, with wc.sl carried).
    ops.push_back({"poll_cq_recv_16", 16, 172, 42, kPollRatio, [](state& s) { prepare_recv(s, 16); },
                   [](state& s) {
                       ibv_recv_wr* bad;
                       api::post_recv(s.r->rq, s.rwr.data(), &bad);
                       for (int i = 0; i < 16; ++i) {
                           s.r->device_cqe(hw::cqe_opcode::RESP_SEND, static_cast<std::uint16_t>(s.rq_counter++));
                       }
                   },
                   [](state& s) { cxv_bench_poll_cq(s); }, 1});
    ops.push_back({"poll_cq_send_16", 16, 109, 32, kPollRatio, send_setup(queues::doorbell_mode::doorbell, false),
                   [](state& s) {
                       ibv_send_wr* bad;
                       for (int i = 0; i < 16; ++i) {
                           api::post_send(api::send_side{&s.r->sq, 1, 64, IBV_QPT_RC}, &s.swr, &bad);
                           s.r->device_cqe(hw::cqe_opcode::REQ, static_cast<std::uint16_t>(s.sq_posted++));
                       }
                   },
                   [](state& s) { cxv_bench_poll_cq(s); }, 1});
    // Raw Ethernet sends, on a ring sized for them (an SQ's largest WQE is 5 BBs), rung
    // through the BlueFlame register; beside rdma-core's raw packet QP (IBV_SEND_IP_CSUM,
    // 18 bytes inline) with --rdma-core. Targets: a third of rdma-core 64.0's figures
    // (measured 2026-11-29, the bar); the striding poll against its cyclic one.
    auto eth_send_setup = [](state& s) {
        s.r = std::make_unique<rings>(queues::doorbell_mode::blueflame);
        s.r->sq = queues::send_queue(s.r->sq_bbs.data(), kLog, kQpn, false, s.r->sq_ids.data(), s.r->sq_ends.data(),
                                     &s.r->dbrec, s.r->bf.data(), 256, queues::doorbell_mode::blueflame,
                                     queues::eth_wqe::max_bbs());
    };
    ops.push_back({"eth_send_frame64_bf", 1, 354, 118, kEthRatio, eth_send_setup, send_refill,
                   [](state& s) { cxv_bench_eth_send_frame(s); }, kEntries - 8});
    ops.push_back({"eth_send_inline64_bf", 1, 433, 144, kEthRatio, eth_send_setup, send_refill,
                   [](state& s) { cxv_bench_eth_send_inline(s); }, kEntries / 2 - 4});
    // Raw Ethernet receive: 16 packet CQEs per call, written beforehand; the buffers are
    // never read (a fixed address stands for them). A poll gives the last poll's WQEs
    // back: rdma-core's side polls 16 and posts 16 receives in its measured call. The
    // striding poll is compared with that same cyclic receive: rdma-core's provider polls
    // no striding RQ (mlx5dv_create_wq makes one, but its CQEs are left to the
    // application: ibv_poll_cq would take each packet for a whole WQE), so a packet
    // received through rdma-core's provider costs its cyclic poll and repost.
    auto eth_recv_setup = [](bool striding) {
        return [striding](state& s) {
            s.r = std::make_unique<rings>(queues::doorbell_mode::doorbell);
            queues::eth_recv_queue::layout l;
            l.wqes = striding ? s.r->srq_wqes.data() : s.r->rq_wqes.data();
            l.log_wqes = kLog;
            l.wqe_shift = striding ? 5 : 4;
            l.dbrec = &s.r->dbrec;
            l.buffers = reinterpret_cast<std::byte*>(std::uintptr_t{1} << 40);
            l.log_buffer = striding ? 15 : 11;
            l.lkey = 0x1234;
            l.log_strides = striding ? 9 : 0;
            l.log_stride = striding ? 6 : 0;
            l.cq = queues::cqe_reader(s.r->cqes.data(), kLog, &s.r->cq_dbrec);
            s.r->eth_rq = queues::eth_recv_queue(l);
            s.r->eth_rq.start();
        };
    };
    auto eth_cqes = [](bool striding) {
        return [striding](state& s) {
            for (int i = 0; i < 16; ++i) {
                rings& r = *s.r;
                auto* c = reinterpret_cast<hw::cqe64*>(r.cqes.data() + (r.device_pi & (kEntries - 1)) * 64);
                std::memset(c, 0, 63);
                c->byte_cnt = hw::be32::from(striding ? (1u << hw::mpwrq_strides_shift) | 60 : 60);
                if (striding) {
                    c->wqe_id = hw::be16::from(static_cast<std::uint16_t>(s.rq_counter));
                    c->wqe_counter = hw::be16::from(static_cast<std::uint16_t>(s.stride));
                    if (++s.stride == 512) {
                        s.stride = 0;
                        ++s.rq_counter;
                    }
                } else {
                    c->wqe_counter = hw::be16::from(static_cast<std::uint16_t>(s.rq_counter++));
                }
                c->sop_drop_qpn = hw::be32::from(7);  // the flow tag
                c->hds_ip_ext = hw::cqe_l2_ok | hw::cqe_l3_ok | hw::cqe_l4_ok;
                c->op_own = hw::make_op_own(hw::cqe_opcode::RESP_SEND, false,
                                            static_cast<std::uint8_t>((r.device_pi >> kLog) & 1));
                ++r.device_pi;
            }
        };
    };
    ops.push_back({"eth_poll_recv_16", 16, 261, 87, kEthRatio, eth_recv_setup(false), eth_cqes(false),
                   [](state& s) { cxv_bench_eth_poll(s); }, 1});
    ops.push_back({"eth_poll_recv_striding_16", 16, 261, 87, kEthRatio, eth_recv_setup(true), eth_cqes(true),
                   [](state& s) { cxv_bench_eth_poll(s); }, 1, "eth_poll_recv_16"});
    return ops;
}

// Runs `calls` measured calls (refilling as the operation says) and returns the ns
// spent inside the measured calls only.
double run(const op& o, state& s, unsigned calls) {
    std::chrono::nanoseconds inside{0};
    unsigned done = 0;
    while (done < calls) {
        o.refill(s);
        const unsigned batch = std::min(o.calls_per_refill, calls - done);
        if (o.calls_per_refill == 1) {
            // Refilled before every call: time a block of calls with its refills
            // removed by timing the refills alone as well.
            const auto t0 = std::chrono::steady_clock::now();
            o.call(s);
            inside += std::chrono::steady_clock::now() - t0;
            ++done;
            continue;
        }
        const auto t0 = std::chrono::steady_clock::now();
        for (unsigned i = 0; i < batch; ++i) o.call(s);
        inside += std::chrono::steady_clock::now() - t0;
        done += batch;
    }
    return static_cast<double>(inside.count());
}

double ns_per_op(const op& o, unsigned repeats, unsigned calls) {
    std::vector<double> samples;
    for (unsigned r = 0; r < repeats; ++r) {
        state s;
        o.setup(s);
        (void)run(o, s, calls / 10);  // warm
        samples.push_back(run(o, s, calls) / (double(calls) * o.per_call));
    }
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
}

// The multi-producer ring in ns against the single-producer one, from one thread (the bar
// of issue 38: at most 1.2x; not checked, as ns vary by a third from run to run here).
void print_ring_ns(const std::vector<cxv::bench::fastpath_result>& results) {
    double sp = -1, mp = -1;
    for (const auto& r : results) {
        if (r.op == "ring_write4k_sp") sp = r.ns_per_op;
        if (r.op == "ring_write4k_mp") mp = r.ns_per_op;
    }
    if (sp > 0 && mp > 0) std::printf(" %.2fx ns (bar 1.2x, not checked)", mp / sp);
    std::printf("\n");
}

// The multi-producer ring's write from one and from two threads at once (each posting
// `posts`; whichever finds the ring full frees what is published).
void print_scaling(unsigned posts) {
    const cxv::bench::producer_ops ops{
        nullptr,
        [](void* p) { return cxv_bench_ring_send_mp(*static_cast<state*>(p), write4k()) == 0; },
        [](void* p) { retire_published(*static_cast<state*>(p)); },
    };
    cxv::bench::scaling_figures f[2];
    for (unsigned threads = 1; threads <= 2; ++threads) {
        state s;
        s.r = std::make_unique<rings>(queues::doorbell_mode::doorbell);
        cxv::bench::producer_ops o = ops;
        o.ring = &s;
        f[threads - 1] = cxv::bench::run_producers(o, threads, posts);
    }
    if (f[0].ns_per_post < 0 || f[1].ns_per_post < 0) {
        std::printf("multi-producer ring from 2 threads: not measured (a thread could not post for 10 s)\n");
        return;
    }
    std::printf("multi-producer ring_write4k from 2 threads: %.2f ns/post per thread, %.1f posts/us in all (1 thread: "
                "%.2f ns/post, %.1f posts/us; %u cores online)\n",
                f[1].ns_per_post, f[1].posts_per_us, f[0].ns_per_post, f[0].posts_per_us,
                std::thread::hardware_concurrency());
}

// A figure for the table, "-" when it was not measured (negative).
std::string figure(double v, const char* format) {
    if (v < 0) return "-";
    char text[32];
    std::snprintf(text, sizeof text, format, v);
    return text;
}

int loop(const std::string& name, unsigned iters) {
    for (const auto& o : operations()) {
        if (name != o.name) continue;
        state s;
        o.setup(s);
        (void)run(o, s, iters);
        return 0;
    }
    std::fprintf(stderr, "fastpath: no operation %s\n", name.c_str());
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    cxv::bench::fastpath_options opt;
    if (const int rc = cxv::bench::parse_options(argc, argv, opt); rc != 0) return rc < 0 ? 0 : rc;
    const std::string& json = opt.json;
    const bool short_run = opt.short_run, check = opt.check_targets;
    bool callgrind = opt.callgrind;
    if (!opt.loop_op.empty()) return loop(opt.loop_op, opt.iters);
    if (callgrind && std::system("valgrind --version >/dev/null 2>&1") != 0) {
        std::fprintf(stderr, "fastpath: valgrind not found: instructions/op not measured\n");
        callgrind = false;
    }
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';

    std::optional<cxv::bench::rdma_core_side> rc;
    if (!opt.rdma_core.empty()) {
        std::fprintf(stderr, "fastpath: building rdma-core's mlx5 provider from %s\n", opt.rdma_core.c_str());
        auto built = cxv::bench::rdma_core_side::create(opt.rdma_core, self);
        if (!built) {
            std::fprintf(stderr, "fastpath: %s\n", built.error().message.c_str());
            return 1;
        }
        rc.emplace(std::move(built).value());
        if (rc->release() != cxv::bench::kPinnedRdmaCore) {
            std::fprintf(stderr, "fastpath: note: the tree is rdma-core %s; docs/performance.md's figures are %s's\n",
                         rc->release().c_str(), cxv::bench::kPinnedRdmaCore);
        }
        std::printf("rdma-core side: %s\n(MLX5_SINGLE_THREADED, CQE version 1, each call through ibv_post_*/ibv_poll_cq)\n",
                    rc->description().c_str());
    }

    const unsigned repeats = short_run ? 3 : 9, calls = short_run ? 20000 : 200000;
    if (rc) {
        std::printf("%-24s %9s %9s %10s %10s %8s %8s %8s %7s\n", "operation", "ns/op", "instr/op", "rc ns/op",
                    "rc instr", "x instr", "x ns", "target", "x bar");
    } else {
        std::printf("%-24s %10s %14s %14s %10s\n", "operation", "ns/op", "instr/op", "rdma-core", "target");
    }
    std::vector<cxv::bench::fastpath_result> results;
    bool all_met = true;
    double ring_sp = -1, ring_mp = -1;  // the multi-producer bar: at most 1.5x single-producer
    for (const auto& o : operations()) {
        cxv::bench::fastpath_result r{o.name, ns_per_op(o, repeats, calls)};
        const double ns = r.ns_per_op;
        const double ins = callgrind ? cxv::bench::callgrind_per_op({self}, "cxv_bench_*", o.name, o.per_call) : -1;
        r.instructions_per_op = ins;
        if (std::strcmp(o.name, "ring_write4k_sp") == 0) ring_sp = ins;
        if (std::strcmp(o.name, "ring_write4k_mp") == 0) ring_mp = ins;
        const bool has_target = o.target > 0;
        const bool met = ins >= 0 && ins <= o.target;
        all_met = all_met && (ins < 0 || !has_target || met);
        unsigned rc_per_call = 0;
        const char* rc_op = o.rc_op != nullptr ? o.rc_op : o.name;
        if (rc && rc->has(rc_op, rc_per_call)) {
            r.rdma_core_ns_per_op = rc->ns_per_op(rc_op, repeats, calls);
            if (callgrind) r.rdma_core_instructions_per_op = rc->instructions_per_op(rc_op, rc_per_call);
            const double x_ins = ins > 0 && r.rdma_core_instructions_per_op > 0 ? r.rdma_core_instructions_per_op / ins : -1;
            const double x_ns = ns > 0 && r.rdma_core_ns_per_op > 0 ? r.rdma_core_ns_per_op / ns : -1;
            const bool ratio_met = x_ins >= o.ratio;
            all_met = all_met && (x_ins < 0 || ratio_met);
            std::printf("%-24s %9s %9s %10s %10s %8s %8s %8.1f %6.1fx %s%s\n", o.name, figure(ns, "%.2f").c_str(),
                        figure(ins, "%.1f").c_str(), figure(r.rdma_core_ns_per_op, "%.2f").c_str(),
                        figure(r.rdma_core_instructions_per_op, "%.1f").c_str(), figure(x_ins, "%.2fx").c_str(),
                        figure(x_ns, "%.2fx").c_str(), o.target, o.ratio, ins < 0 || met ? "" : "ABOVE TARGET ",
                        x_ins < 0 || ratio_met ? "" : "UNDER RATIO");
        } else if (rc) {
            std::printf("%-24s %9.2f %9s %10s %10s %8s %8s %8s %7s\n", o.name, ns, figure(ins, "%.1f").c_str(), "-", "-",
                        "-", "-", "-", "-");
        } else if (has_target) {
            std::printf("%-24s %10.2f %14s %14.1f %10.1f %s\n", o.name, ns, figure(ins, "%.1f").c_str(), o.reference,
                        o.target, ins < 0 ? "" : met ? "ok" : "ABOVE TARGET");
        } else {
            std::printf("%-24s %10.2f %14s %14s %10s\n", o.name, ns, figure(ins, "%.1f").c_str(), "-", "-");
        }
        results.push_back(r);
    }
    std::printf("multi-producer / single-producer ring:");
    if (ring_sp > 0 && ring_mp >= 0) {
        const bool met = ring_mp <= 1.5 * ring_sp;
        std::printf(" %.2fx instructions (bar 1.5x) %s,", ring_mp / ring_sp, met ? "ok" : "ABOVE TARGET");
        all_met = all_met && met;
    }
    print_ring_ns(results);
    print_scaling(short_run ? 20000 : 200000);
    if (rc) {
        std::printf("(instr/op: callgrind, instructions inside the measured call per WR or CQE; x: rdma-core's "
                    "figure over ours; x bar: the ratio --check-targets asks of instructions; a striding poll's "
                    "rdma-core figures are its cyclic receive's, its provider polling no striding RQ)\n");
    } else {
        std::printf("(instr/op: callgrind, instructions inside the measured call per WR or CQE; rdma-core: its mlx5 "
                    "provider 65.0, same shapes, measured once; --rdma-core DIR measures it beside)\n");
    }
    if (!json.empty() && !cxv::bench::write_json(json, results)) {
        std::fprintf(stderr, "fastpath: cannot write %s\n", json.c_str());
        return 1;
    }
    // Targets fail the run only when asked (--check-targets, as CI's short run does).
    return all_met || !check ? 0 : 1;
}
