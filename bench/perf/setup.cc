#include "bench/perf/setup.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "api/cxv_verbs.h"
#include "driver/hca/hca.h"
#include "driver/pci/pci.h"

namespace cxv::perf {

namespace {

// Everything a side registers stays under this (both sides compute the same sizes): one
// MR, whose page list must fit CREATE_MKEY's mailboxes (about 64 MiB of 4 KiB pages).
constexpr std::size_t kMemoryBudget = std::size_t{48} << 20;

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

// IBTA path MTU encoding (1 = 256 .. 5 = 4096).
std::uint32_t mtu_code(unsigned bytes) {
    std::uint32_t code = 1;
    for (unsigned b = 256; b < bytes; b *= 2) ++code;
    return code;
}

std::string gid_text(const std::uint8_t* g) {
    char out[48];
    std::snprintf(out, sizeof out, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", g[0], g[1],
                  g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]);
    return out;
}

}  // namespace

result<std::shared_ptr<function>> open_function(const std::string& bdf_given, unsigned ib_port) {
    auto f = std::make_shared<function>();
    f->bdf = bdf_given;
    // Through a cxvd (CXV_DAEMON): its functions, not the PCI bus; no -d is its first.
    const bool through_daemon = !cxv::daemon_path().empty();
    if (f->bdf.empty() && !through_daemon) {
        auto found = driver::pci::discover();
        if (!found) return found.error();
        for (const auto& fn : found.value()) {
            if (fn.usable()) {
                f->bdf = fn.bdf;
                break;
            }
        }
        if (f->bdf.empty()) return error{ENODEV, "no mlx5 function bound to vfio-pci (cxv list tells why; or -d BDF)"};
    }
    ibv_context* ctx = cxv_open_device(f->bdf.c_str());
    if (ctx == nullptr) {
        // The driver's message names the function already when it comes from VFIO or PCI.
        const int e = errno;
        const std::string m = cxv_last_error();
        return error{e, m.starts_with(f->bdf) ? m : f->bdf + ": " + m};
    }
    f->opened_as = f->bdf;
    f->dev = std::shared_ptr<cxv::device>(std::shared_ptr<ibv_context>(ctx, cxv_close_device), &cxv::verbs_device(ctx));
    f->bdf = f->dev->hca().device().bdf();
    auto pd = f->dev->alloc_pd();
    if (!pd) return pd.error();
    f->pd = std::move(pd).value();
    auto port = f->dev->port(ib_port);
    if (!port) return error{port.error().code, "port " + std::to_string(ib_port) + ": " + port.error().message};
    f->port = port.value();
    f->firmware = f->dev->hca().fw_version_string();
    return f;
}

bool on_model() {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        if (line.find("libcxv-sim-preload") != std::string::npos) return true;
    }
    return false;
}

unsigned slots_of(const options& o) {
    // Without --verify every message uses one buffer, as perftest; with it each message
    // in flight has its own, so that what arrives can be checked against its iteration.
    // (SEND: each receive too.)
    if (!o.verify || o.latency) return 1;
    return o.op == operation::send ? std::max(o.tx_depth, o.rx_depth) : o.tx_depth;
}

std::size_t slot_stride(const options& o, std::size_t size) {
    // Each slot starts on a 64-byte boundary (a cache line; a UD receive has its GRH first).
    return round_up(size + (o.conn == transport::ud ? kGrh : 0), 64);
}

bool message_fits(const options& o, std::size_t size) {
    const std::size_t slots = std::size_t{2} * o.qps * slots_of(o);
    return slot_stride(o, size) <= kMemoryBudget / slots;
}

std::size_t message_limit(const options& o) {
    const std::size_t top = o.conn == transport::ud ? 4096 : std::size_t{1} << 23;
    if (!message_fits(o, 2)) return 0;
    std::size_t limit = 2;
    while (limit * 2 <= top && message_fits(o, limit * 2)) limit *= 2;
    return limit;
}

side::~side() {
    qps.clear();
    mr.reset();
    if (mem != nullptr && !shared) ::munmap(mem, mem_len);
}

result<std::unique_ptr<side>> make_side(const options& o, std::shared_ptr<function> fn, bool server) {
    auto s = std::make_unique<side>();
    s->o = &o;
    s->fn = std::move(fn);
    s->server = server;
    s->slots = slots_of(o);
    const auto sizes = sizes_of(o, message_limit(o));
    if (sizes.empty()) return error{EINVAL, "no message size fits the memory budget"};
    s->max_msg = *std::max_element(sizes.begin(), sizes.end());
    if (!message_fits(o, s->max_msg)) {
        return error{EINVAL, "-s " + std::to_string(s->max_msg) + " does not fit the memory budget (48 MiB a side) with these options: " +
                                 (o.verify ? "--verify keeps a buffer per message in flight; " : "") + "at most " +
                                 std::to_string(message_limit(o)) + " bytes (or lower -q, -t, -r)"};
    }
    s->stride = slot_stride(o, s->max_msg);
    s->mem_len = round_up(2 * o.qps * s->area(), 4096);
    if (s->fn->dev->hca().attached()) {
        // Through a cxvd: a memfd the daemon maps as it is (cxv::buffer), rather than
        // anonymous memory that registration would copy onto one.
        auto b = cxv::buffer::create(s->mem_len);
        if (!b) return error{b.error().code, "cannot allocate " + std::to_string(s->mem_len) + " bytes: " +
                                                 b.error().message};
        s->shared = std::move(b).value();
        s->mem = s->shared->data();
    } else {
        void* m = ::mmap(nullptr, s->mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1,
                         0);
        if (m == MAP_FAILED) return error{errno, "cannot allocate " + std::to_string(s->mem_len) + " bytes"};
        s->mem = static_cast<std::byte*>(m);
    }
    auto mr = cxv::mr::create(s->fn->pd, s->mem, s->mem_len,
                              cxv::access_local_write | cxv::access_remote_write | cxv::access_remote_read |
                                  cxv::access_remote_atomic);
    if (!mr) return error{mr.error().code, "register memory: " + mr.error().message};
    s->mr = std::move(mr).value();

    // CQs with room for every completion that can be outstanding.
    const unsigned send_wr = o.latency ? 128 : o.tx_depth + o.post_list;
    auto pow2 = [](unsigned v) {
        unsigned p = 64;
        while (p < v) p *= 2;
        return p;
    };
    auto scq = cxv::cq::create(*s->fn->dev, pow2(send_wr * o.qps));
    auto rcq = cxv::cq::create(*s->fn->dev, pow2(o.rx_depth * o.qps));
    if (!scq || !rcq) return error{EINVAL, "create a CQ: " + (!scq ? scq.error().message : rcq.error().message)};
    s->scq = std::move(scq).value();
    s->rcq = std::move(rcq).value();

    // Inline: perftest's latency tests send small messages inline by default.
    const bool can_inline = o.op == operation::send || o.op == operation::write;
    unsigned want_inline = 0;
    if (can_inline) {
        want_inline = o.inline_size >= 0 ? static_cast<unsigned>(o.inline_size) : (o.latency ? 220u : 0u);
    }
    std::mt19937 rng(std::random_device{}());
    const auto& port = s->fn->port;
    const unsigned gid_index = o.gid_index < 0 ? 0 : static_cast<unsigned>(o.gid_index);
    auto gid = s->fn->dev->gid(gid_index, o.ib_port);
    if (!gid) return error{gid.error().code, "GID index " + std::to_string(gid_index) + ": " + gid.error().message};
    s->local_gid = gid_text(gid->data());
    for (unsigned q = 0; q < o.qps; ++q) {
        cxv::qp::attr a;
        a.type = o.conn == transport::rc ? cxv::qp_type::rc : o.conn == transport::uc ? cxv::qp_type::uc : cxv::qp_type::ud;
        a.domain = s->fn->pd;
        a.send_cq = s->scq;
        a.recv_cq = s->rcq;
        a.cap = {send_wr, o.rx_depth, 1, 1, want_inline};
        auto qp = cxv::qp::create(*s->fn->dev, a);
        if (!qp) return error{qp.error().code, "create a QP: " + qp.error().message};
        s->qps.push_back(std::move(qp).value());
        wire_qp w;
        w.qpn = s->qps.back()->qpn();
        w.psn = rng() & 0xffffff;
        w.lid = port.lid;
        w.rkey = s->mr->rkey();
        w.vaddr = reinterpret_cast<std::uint64_t>(s->recv_area(q, 0));
        w.length = s->area();
        std::memcpy(w.gid, gid->data(), 16);
        s->local.push_back(w);
    }
    s->inline_max = want_inline;
    s->posted.assign(o.qps, 0);
    s->done.assign(o.qps, 0);
    s->wrs.assign(std::size_t{o.qps} * o.post_list, ibv_send_wr{});
    s->sges.assign(std::size_t{o.qps} * o.post_list, ibv_sge{});
    return s;
}

std::uint8_t ack_timeout(const options& o) {
    // perftest's 14 (67 ms); on the model 18 (1.07 s): its processes may wait long for
    // a core on a loaded host, and a burst the fabric's sockets drop costs a timeout.
    return static_cast<std::uint8_t>(o.qp_timeout >= 0 ? o.qp_timeout : on_model() ? 18 : 14);
}

status connect_qp(side& s, unsigned q) {
    const options& o = *s.o;
    const bool ethernet = s.fn->port.ethernet;
    const bool grh = ethernet || o.gid_index >= 0;
    if (q == 0) {
        s.remote_gid = gid_text(s.remote.at(0).gid);
        s.ahs.reserve(o.qps);
    }
    const wire_qp& r = s.remote.at(q);
    cxv::qp::modify_attr m;
    m.port = static_cast<std::uint8_t>(o.ib_port);
    m.access = cxv::access_local_write | cxv::access_remote_write | cxv::access_remote_read | cxv::access_remote_atomic;
    m.path_mtu = o.mtu != 0 ? mtu_code(o.mtu) : s.fn->port.max_mtu;
    m.dest_qpn = r.qpn;
    m.rq_psn = r.psn;
    m.sq_psn = s.local[q].psn;
    m.qkey = kQkey;
    m.max_rd_atomic = m.max_dest_rd_atomic = kOutstandingReads;
    m.min_rnr_timer = 1;  // 0.01 ms: a receiver that is late costs little
    m.timeout = ack_timeout(o);
    m.ah.dlid = static_cast<std::uint16_t>(r.lid);
    m.ah.grh = grh;
    std::memcpy(m.ah.dgid.data(), r.gid, 16);
    m.ah.sgid_index = static_cast<std::uint8_t>(o.gid_index < 0 ? 0 : o.gid_index);
    auto& qp = *s.qps[q];
    for (auto st : {cxv::qp_state::init, cxv::qp_state::rtr, cxv::qp_state::rts}) {
        if (auto r2 = qp.modify(st, m); !r2) return error{r2.error().code, "connect QP: " + r2.error().message};
    }
    if (o.conn == transport::ud) {
        cxv::qp::path p = m.ah;
        p.grh = true;  // the receiver finds a GRH in front of the data either way
        s.ahs.push_back(cxv::make_address_handle(p, ethernet));
    }
    return ok_status();
}

status connect_side(side& s) {
    for (unsigned q = 0; q < s.o->qps; ++q) {
        if (auto r = connect_qp(s, q); !r) return r;
    }
    return ok_status();
}

int post_receive(side& s, unsigned q, std::size_t slot) {
    ibv_sge g{reinterpret_cast<std::uint64_t>(s.recv_area(q, slot)), static_cast<std::uint32_t>(s.stride), s.mr->lkey()};
    ibv_recv_wr wr{};
    wr.wr_id = (std::uint64_t{q} << 32) | slot;
    wr.sg_list = &g;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return s.qps[q]->post_recv(&wr, &bad);
}

status run_both_sides(std::shared_ptr<function> server_fn, std::shared_ptr<function> client_fn, const side_runner& side) {
    auto [server_end, client_end] = channel::pair();
    std::string server_error;
    std::thread server([&] {
        if (auto r = side(server_fn, server_end, true); !r) server_error = r.error().message;
    });
    auto r = side(client_fn, client_end, false);
    server.join();
    if (!r) return r;
    if (!server_error.empty()) return error{EIO, "the server side: " + server_error};
    return ok_status();
}

}  // namespace cxv::perf
