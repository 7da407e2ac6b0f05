// The server's request handlers (docs/daemon.md, "The protocol", "No client stalls
// another"): what a request may do is checked on the serving thread where it is cheap
// (quotas over the trust domain's connections, seals, the IOVA a client names), and what
// waits on the function -- firmware commands, DMA mapping and unmapping, the walk of a large
// command's MTT -- runs as a job on a lane (daemon/jobs.h), whose `done` books the
// outcome and replies. A peer with a job in flight is not read from, so its books change
// only in that `done` while the job may read them.
#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "daemon/server.h"
#include "daemon/server_state.h"
#include "driver/cmd/cmd_queue.h"
#include "driver/res/q_counter.h"
#include "hw/doorbell.h"
#include "hw/ifc.h"

namespace cxv::daemon {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

namespace {

// Mappings up to this size take the small lane: on a card VFIO_IOMMU_MAP_DMA pins the
// pages (and UNMAP_DMA unpins them), time that grows with the length.
constexpr std::uint64_t kSmallMapping = std::uint64_t{2} << 20;

job_lanes::lane lane_for(std::uint64_t length) {
    return length <= kSmallMapping ? job_lanes::lane::small : job_lanes::lane::large;
}

// The object a command creates, read off its opcode before the checks run (on a lane):
// counted against the uid's quota meanwhile, so that two connections of one uid cannot
// both pass a check for the last one.
command_effect::object creates(std::span<const std::byte> in) {
    using obj = command_effect::object;
    if (in.size() < 2) return obj::none;
    switch (static_cast<cmd_opcode>(ifc::get<ifc::cmd_in::opcode>(in.data()))) {
    case cmd_opcode::ALLOC_PD: return obj::pd;
    case cmd_opcode::CREATE_CQ: return obj::cq;
    case cmd_opcode::CREATE_MKEY: return obj::mkey;
    case cmd_opcode::CREATE_QP: return obj::qp;
    case cmd_opcode::CREATE_RMP: return obj::srq;
    default: return obj::none;
    }
}

}  // namespace

void server::post(peer& p, job_lanes::lane l, std::function<void()> work, std::function<void()> done) {
    p.busy = true;
    // A short job runs here at once while nothing long is in flight: then the function's
    // firmware has no large command of ours to finish first, and two thread hops would
    // double a small command's latency (~100 us on two busy cores). Behind a large
    // command or a teardown slice it takes its lane, so that it waits there, not here.
    // When the daemon stops there is nobody else to serve.
    if (inline_ || (l == job_lanes::lane::small && jobs_->in_flight(job_lanes::lane::large) == 0)) {
        work();
        done();
        return;
    }
    jobs_->post(l, std::move(work), std::move(done), p.domain);
}

bool server::wait_for_release(peer& p, const request_meta& m, request r, const error& e) {
    if (e.code != EDQUOT || inline_ || p.gone) return false;
    const bool held = std::any_of(peers_.begin(), peers_.end(), [&](const auto& q) {
        return q->gone && !q->refused && q->leaving && !q->leaving->done && q->domain == p.domain;
    });
    if (!held) return false;
    peer::parked_request w{m, std::move(r), {}, released_};
    if (w.r.fd >= 0) {  // the message's fd is closed once serve() is done with it
        w.fd = unique_fd(::fcntl(w.r.fd, F_DUPFD_CLOEXEC, 0));
        if (!w.fd) return false;
        w.r.fd = w.fd.get();
    }
    p.parked = std::move(w);
    p.busy = true;
    p.pending = {};
    return true;
}

void server::retry_parked() {
    for (auto& q : peers_) {
        peer& p = *q;
        if (!p.parked || p.parked->released == released_) continue;
        auto w = std::move(*p.parked);  // (its fd open until the handler is done with it)
        p.parked.reset();
        p.busy = false;
        dispatch(p, w.m, w.r);
    }
}

void server::conclude(peer& p, const request_meta& m, result<answer> a) {
    p.busy = false;
    p.pending = {};
    if (p.gone) return;  // dropped meanwhile: no one to answer
    if (opts_.stats) {
        // From the parse to the reply, ready to go (recorded before it is sent, so a
        // client that has its reply finds its request counted).
        const auto took = std::chrono::steady_clock::now() - m.start;
        record_books(p);  // first: a new client's first request counts as its own
        record(p, m.op, !a, took);
    }
    if (!a) {
        (void)refuse(p, m.type, m.seq, a.error());
        return;
    }
    (void)send(p, encode_reply(m.type, m.seq, 0, "", a->payload), a->fds);
}

void server::on_map(peer& p, const request_meta& m, const request& r) {
    auto d = device_for(p, r.map.device);
    if (!d) return conclude(p, m, d.error());
    // Over a quota: refused, or parked while departed clients of the domain still hold
    // part of it (wait_for_release).
    auto over = [&](error e) {
        if (!wait_for_release(p, m, r, e)) conclude(p, m, std::move(e));
    };
    if (const std::size_t n = mappings_by_domain(p.domain); n >= opts_.limits.mappings) {
        return over(error{EDQUOT, fmt::format("MAP_MEMORY: {} has {} mappings over all its connections and "
                                              "functions, its quota (--quota-mappings {}): unmap some, or map "
                                              "fewer, larger buffers",
                                              p.domain, n, opts_.limits.mappings)});
    }
    const std::uint64_t total = pinned_by_domain(p.domain);
    if (total + r.map.length > opts_.limits.pinned_bytes) {
        return over(error{EDQUOT, fmt::format("MAP_MEMORY: {} more bytes would pin {} (the quota of {}, over all its "
                                              "connections, is {})",
                                              r.map.length, total + r.map.length, p.domain,
                                              opts_.limits.pinned_bytes)});
    }
    // The file must not shrink under the mapping (memfd_create(2), F_SEAL_SHRINK): a
    // truncated page would fault in the daemon, and in the model's IOMMU walk. The seal
    // first, then the size, here where the mapping is made.
    if (auto s = check_map_fd(r.fd, r.map.offset, r.map.length); !s) return conclude(p, m, s.error());
    // Memory the device only reads may come read-only (an MR without write access: the
    // client opens its file O_RDONLY). mmap(2) of a file populates nothing: here; the
    // IOMMU mapping (on a card, pinning every page) on a lane.
    const int prot = PROT_READ | (r.map.device_writes ? PROT_WRITE : 0);
    void* addr = ::mmap(nullptr, r.map.length, prot, MAP_SHARED, r.fd, static_cast<off_t>(r.map.offset));
    if (addr == MAP_FAILED) {
        return conclude(p, m, error{errno, fmt::format("MAP_MEMORY: mmap: {}", std::strerror(errno))});
    }
    struct job {
        driver::hca* hca = nullptr;
        mapping map;
        std::uint64_t align = 0;
        status outcome = ok_status();
    };
    auto j = std::make_shared<job>();
    j->hca = devices_[*d]->hca.get();
    j->map.addr = addr;
    j->map.length = r.map.length;
    j->map.device_writes = r.map.device_writes;
    j->align = r.map.align;
    p.pending = {*d, command_effect::object::none, false, r.map.length, 1};
    post(p, lane_for(r.map.length),
         [j] {
             auto dma = j->hca->device().map_dma(j->map.addr, j->map.length, j->map.device_writes, j->align);
             if (dma) j->map.dma = std::move(dma).value();
             else j->outcome = dma.error();
         },
         [this, &p, m, j, dev = *d] {
             if (!j->outcome) return conclude(p, m, j->outcome.error());  // the mapping's destructor munmaps
             const std::uint64_t iova = j->map.dma.iova();
             owned& o = p.dev[dev];
             o.pinned += j->map.length;
             o.maps.emplace(iova, std::move(j->map));
             conclude(p, m, answer{payload(map_memory_reply{iova}), {}, {}});
         });
}

void server::on_unmap(peer& p, const request_meta& m, const request& r) {
    auto d = device_for(p, r.unmap.device);
    if (!d) return conclude(p, m, d.error());
    owned& o = p.dev[*d];
    auto it = o.maps.find(r.unmap.iova);
    if (it == o.maps.end()) {
        return conclude(p, m,
                        error{EPERM, fmt::format("UNMAP_MEMORY: IOVA 0x{:x} is not the start of the client's memory",
                                                 r.unmap.iova)});
    }
    if (it->second.users > 0) {
        return conclude(p, m, error{EBUSY, fmt::format("UNMAP_MEMORY: {} of the client's objects still use IOVA 0x{:x}",
                                                       it->second.users, r.unmap.iova)});
    }
    // Out of the books now (the IOVA is no longer the client's to name), counted against
    // its uid until the job has unmapped it: the reply says the device is off it.
    auto j = std::make_shared<mapping>(std::move(it->second));
    o.maps.erase(it);
    o.pinned -= j->length;
    p.pending = {*d, command_effect::object::none, false, j->length, 1};
    post(p, lane_for(j->length), [j] { *j = mapping{}; }, [this, &p, m] { conclude(p, m, answer{}); });
}

void server::on_alloc_uar(peer& p, const request_meta& m, const request& r) {
    auto d = device_for(p, r.alloc_uar.device);
    if (!d) return conclude(p, m, d.error());
    const owned& o = p.dev[*d];
    if (o.uars.size() >= room(p, *d).uars) {
        error e{EDQUOT, fmt::format("ALLOC_UAR: the quota of {} UARs is reached (it counts every connection of {})",
                                    opts_.limits.uars, p.domain)};
        if (!wait_for_release(p, m, r, e)) conclude(p, m, std::move(e));
        return;
    }
    struct job {
        driver::hca* hca = nullptr;
        result<std::vector<std::byte>> out = std::vector<std::byte>{};
        std::uint64_t base = 0;
    };
    auto j = std::make_shared<job>();
    j->hca = devices_[*d]->hca.get();
    p.pending = {*d, command_effect::object::none, true, 0, 0};
    post(p, job_lanes::lane::small,
         [j] {
             j->out = j->hca->exec(driver::command<ifc::alloc_uar_in>(cmd_opcode::ALLOC_UAR),
                                   ifc::alloc_uar_out::size_bytes);
             // PRM "UAR": UAR page u is BAR0 + u * 4 KiB; BAR0 is region 0 of the device
             // fd (vfio-pci: VFIO_PCI_BAR0_REGION_INDEX at offset 0).
             if (auto reg = j->hca->device().region(0)) j->base = reg->offset;
         },
         [this, &p, m, j, dev = *d] {
             if (!j->out) return conclude(p, m, j->out.error());
             const std::uint32_t uar = ifc::get<ifc::alloc_uar_out::uar>(j->out->data());
             p.dev[dev].uars.insert(uar);
             // The device fd goes with the reply: the function is reset before another
             // trust domain gets it (release_functions).
             devices_[dev]->fd_given_in = devices_[dev]->generation;
             alloc_uar_reply a{uar, j->base + std::uint64_t{uar} * hw::uar_page_size, hw::uar_page_size};
             conclude(p, m, answer{payload(a), {j->hca->device().fd()}, {}});
         });
}

void server::on_dealloc_uar(peer& p, const request_meta& m, const request& r) {
    auto d = device_for(p, r.dealloc_uar.device);
    if (!d) return conclude(p, m, d.error());
    const owned& o = p.dev[*d];
    const std::uint32_t uar = r.dealloc_uar.uar;
    if (!o.uars.contains(uar)) {
        return conclude(p, m, error{EPERM, fmt::format("DEALLOC_UAR: UAR {} is not the client's", uar)});
    }
    for (const auto& [cq, u] : o.cq_uar) {
        if (u == uar) {
            return conclude(p, m, error{EBUSY, fmt::format("DEALLOC_UAR: CQ 0x{:x} still uses UAR {}", cq, uar)});
        }
    }
    for (const auto& [qpn, u] : o.qp_info) {
        if (u.uar == uar) {
            return conclude(p, m, error{EBUSY, fmt::format("DEALLOC_UAR: QP 0x{:x} still uses UAR {}", qpn, uar)});
        }
    }
    auto out = std::make_shared<status>(ok_status());
    driver::hca* h = devices_[*d]->hca.get();
    p.pending = {*d, command_effect::object::none, false, 0, 0};
    post(p, job_lanes::lane::small,
         [out, h, uar] {
             auto in = driver::command<ifc::dealloc_uar_in>(cmd_opcode::DEALLOC_UAR);
             ifc::set<ifc::dealloc_uar_in::uar>(in.data(), uar);
             if (auto s = h->exec(in, ifc::dealloc_uar_out::size_bytes); !s) *out = s.error();
         },
         [this, &p, m, out, dev = *d, uar] {
             if (!*out) return conclude(p, m, out->error());
             p.dev[dev].uars.erase(uar);
             conclude(p, m, answer{});
         });
}

void server::on_counters(peer& p, const request_meta& m, const request& r) {
    auto d = device_index(r.counters.device);
    if (!d) return conclude(p, m, d.error());
    const device_state& ds = *devices_[*d];
    // The vport counts every client's traffic on the function since bring-up: the
    // domain's own business, and the operator's; another domain's, or that of a
    // function nobody uses now (its last tenant's), is not this client's.
    if (!p.sees_all && !opts_.share_functions && ds.domain != p.domain) {
        return conclude(p, m, error{EPERM, fmt::format("{}: its counters are for the trust domain that uses it and "
                                                       "for cxvd's operator",
                                                       ds.bdf)});
    }
    auto out = std::make_shared<result<counters_reply>>(error{EAGAIN, "not read"});
    driver::hca* h = ds.hca.get();
    const bool ethernet = ds.info.ethernet;
    post(
        p, job_lanes::lane::small,
        [out, h, ethernet] {
            auto v = driver::query_vport_counters(*h);
            if (!v) {
                *out = v.error();
                return;
            }
            *out = counters_reply{driver::named_counters(*v, ethernet)};
        },
        [this, &p, m, out] {
            if (!*out) return conclude(p, m, out->error());
            conclude(p, m, answer{payload(**out), {}, {}});
        });
}

void server::on_command(peer& p, const request_meta& m, request& r) {
    auto d = device_for(p, r.command.device);
    if (!d) return conclude(p, m, d.error());
    // The checks walk every address the command names (a 2 GiB key's MTT: 524,288
    // entries) against the client's books: on the lane with the command, reading the
    // books of this peer, which nothing changes while its job runs. The quotas left to its
    // uid are taken here, where the other connections' books are.
    struct job {
        driver::hca* hca = nullptr;
        std::vector<std::byte> in;
        std::uint32_t out_len = 0;
        const owned* books = nullptr;
        device_facts facts;
        quotas left;
        bool large = false;
        bool checked = false;  // the checks passed: the command ran (counted)
        command_effect effect;
        result<std::vector<std::byte>> out = std::vector<std::byte>{};
        unique_fd made;  // COMMAND_FD's output over 32 KiB, in a sealed memfd
    };
    auto j = std::make_shared<job>();
    j->hca = devices_[*d]->hca.get();
    j->in = std::move(r.command.in);
    j->out_len = r.command.out_len;
    j->books = &p.dev[*d];
    j->facts = devices_[*d]->facts;
    j->left = room(p, *d);
    j->large = r.type == msg_type::command_fd;
    p.pending = {*d, creates(j->in), false, 0, 0, declared_translations(j->in)};
    post(p, j->large ? job_lanes::lane::large : job_lanes::lane::small,
         [j] {
             auto e = check_command(j->in, j->out_len, *j->books, j->facts, j->left);
             if (!e) {
                 j->out = e.error();
                 return;
             }
             j->checked = true;
             j->effect = std::move(e).value();
             j->out = j->hca->exec(j->in, std::max<std::size_t>(j->out_len, j->effect.min_out));
             if (!j->out || j->out_len <= max_command_out_bytes) return;
             // An output too large for the reply comes in a sealed memfd beside it.
             std::vector<std::byte> shown(j->out->begin(), j->out->begin() + j->out_len);
             if (auto f = sealed_memfd(shown)) j->made = std::move(f).value();
             else j->out = f.error();
         },
         [this, &p, m, j, dev = *d, device = r.command.device] {
             if (j->checked) {
                 ++commands_;
                 ++tallies_[p.domain].commands;
             }
             if (!j->out) {
                 if (!j->checked) {  // refused by the checks: nothing ran, it may wait
                     request again;
                     again.type = m.kind;
                     again.command = {device, j->out_len, std::move(j->in)};
                     if (wait_for_release(p, m, std::move(again), j->out.error())) return;
                 }
                 return conclude(p, m, j->out.error());
             }
             owned& o = p.dev[dev];
             apply(j->effect, *j->out, o);
             // Where the object's events go (event_inbox): CQs for completions and CQ
             // errors, QPs and SRQs for their queue errors.
             using obj = command_effect::object;
             const command_effect& e = j->effect;
             const auto route = e.obj == obj::cq    ? std::optional(event_inbox::object::cq)
                                : e.obj == obj::qp  ? std::optional(event_inbox::object::qp)
                                : e.obj == obj::srq ? std::optional(event_inbox::object::srq)
                                                    : std::nullopt;
             if (route && opts_.events && p.queue && !p.gone) {
                 if (e.what == command_effect::kind::create) {
                     opts_.events->route(dev, *route, ifc::get<ifc::create_cq_out::cqn>(j->out->data()), p.queue);
                 } else if (e.what == command_effect::kind::destroy) {
                     opts_.events->unroute(dev, *route, e.id, *p.queue);
                 }
             }
             answer a;
             if (j->made) {
                 a.fds.push_back(j->made.get());
                 a.made = std::move(j->made);  // closed once the reply is sent
             } else {
                 a.payload = std::move(j->out).value();
                 a.payload.resize(j->out_len);
             }
             conclude(p, m, std::move(a));
         });
}

}  // namespace cxv::daemon
