// A client that goes (docs/daemon.md, "When a client goes"): everything it owned is
// destroyed, in dependency order, and its memory unmapped -- in slices, each a job on
// the large lane, so that a client with 50,000 mappings (seconds of VFIO unmapping) or
// thousands of objects does not hold up anyone's request meanwhile.
//
// Who owns what during it: the peer stays in the server's list, marked gone (nothing is
// read from it, its event queue is closed and its objects' routes removed at once); its
// books are the serving thread's and change only between slices, in a slice's `done`;
// a slice owns the commands and the mappings it was given (moved out of the books, still
// counted against the uid through `pending` until it is done). So the uid's quotas count
// what the departed client still holds until it is released, STATUS shows the client as
// it was when it went until it is gone, and an IOVA, UAR or object number is given to
// anyone else only after the device has let go of it (the firmware and the IOVA allocator
// reuse nothing that is still destroyed or mapped).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "daemon/server.h"
#include "daemon/server_state.h"
#include "driver/cmd/cmd_queue.h"
#include "hw/ifc.h"

namespace cxv::daemon {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

namespace {

// One slice: at most this many commands or unmappings, and it stops taking the next one
// after kSliceTime (a command or an unmapping is not cut short). On the model an
// unmapping takes 0.01-0.2 ms (more with more mappings) and a destroy less, so a slice
// is at most ~20 ms of the large lane: what another client's large command may wait
// for. Slices that short are not needed for the serving thread, which is free
// throughout; they are as long as they are because each one costs two thread hops,
// which on busy cores can take milliseconds each.
constexpr std::size_t kSliceSteps = 1024;
constexpr auto kSliceTime = std::chrono::milliseconds(20);

}  // namespace

void server::drop(peer& p, const std::string& why) {
    if (p.gone) return;
    p.gone = true;
    if (p.parked) {  // a request waiting for others' teardowns: nobody to answer now
        p.parked.reset();
        p.busy = false;
    }
    p.as_it_went = status_row(p.pid, p.uid, p.gid, p.comm, p.dev);
    p.leaving = std::make_unique<teardown>(why);
    // No event for it any more: its objects' routes go, then its queue.
    if (opts_.events && p.queue) {
        for (std::size_t i = 0; i < p.dev.size(); ++i) {
            const owned& o = p.dev[i];
            for (const auto id : o.cqs) opts_.events->unroute(i, event_inbox::object::cq, id, *p.queue);
            for (const auto id : o.qps) opts_.events->unroute(i, event_inbox::object::qp, id, *p.queue);
            for (const auto id : o.srqs) opts_.events->unroute(i, event_inbox::object::srq, id, *p.queue);
        }
        opts_.events->close(*p.queue);
        p.events_dropped += opts_.events->dropped(*p.queue);
    }
    p.leaving->events_dropped = p.events_dropped;
    p.events = unique_fd{};
    p.events_blocked = false;
    report_held_back(p, p.refusals.take());
    if (opts_.stats) opts_.stats->client_gone(reinterpret_cast<std::uintptr_t>(&p));
    pump(p);  // one with nothing left goes at once
}

void server::pump(peer& p) {
    teardown& t = *p.leaving;
    // A recovery waits for every job and posts none; a job of the peer's own (its last
    // request, or the previous slice) ends first.
    while (!quiescing_ && !p.busy && !t.done) {
        if (t.device >= p.dev.size()) return finish(p);
        owned& o = p.dev[t.device];
        const device_state& ds = *devices_[t.device];
        if (!ds.hca || o.empty()) {
            // Nothing there, or a function that could not be brought up again (a reset
            // forgot what was there: forget()).
            end_device(p);
            continue;
        }
        switch (t.step) {
        case teardown::phase::start:
            t.steps = teardown_commands(o);
            t.uars.assign(o.uars.begin(), o.uars.end());
            t.next = 0;
            t.keep.clear();
            t.step = teardown::phase::objects;
            break;
        case teardown::phase::objects:
            if (t.next < t.steps.size()) {
                post_object_slice(p);
            } else {
                t.next = 0;
                t.step = teardown::phase::uars;
            }
            break;
        case teardown::phase::uars:
            if (t.next < t.uars.size()) {
                post_uar_slice(p);
            } else {
                t.step = teardown::phase::memory;
            }
            break;
        case teardown::phase::memory: {
            const bool more = std::any_of(o.maps.begin(), o.maps.end(),
                                          [&](const auto& m) { return !t.keep.contains(m.first); });
            if (more) post_memory_slice(p);
            else end_device(p);
            break;
        }
        }
    }
}

void server::post_object_slice(peer& p) {
    teardown& t = *p.leaving;
    struct job {
        driver::hca* hca = nullptr;
        std::vector<teardown_step> steps;
        std::vector<bool> gone;  // per step taken: destroyed
        std::vector<std::string> warnings;
    };
    auto j = std::make_shared<job>();
    j->hca = devices_[t.device]->hca.get();
    const std::size_t n = std::min(kSliceSteps, t.steps.size() - t.next);
    for (std::size_t i = 0; i < n; ++i) j->steps.push_back(std::move(t.steps[t.next + i]));
    post(p, job_lanes::lane::large,
         [j] {
             const auto until = std::chrono::steady_clock::now() + kSliceTime;
             for (const auto& step : j->steps) {
                 if (!j->gone.empty() && std::chrono::steady_clock::now() > until) break;
                 auto& h = *j->hca;
                 auto s = h.exec(step.in, 16);
                 bool gone = s.ok();
                 if (!gone) {
                     j->warnings.push_back(s.error().message);
                     // A QP that will not go: back to RST (or ERR), then destroyed again.
                     if (step.obj == command_effect::object::qp) {
                         for (const auto& move : qp_reset_commands(step.id)) {
                             (void)h.exec(move, 16);
                             if ((gone = h.exec(step.in, 16).ok())) break;
                         }
                     } else {
                         gone = h.exec(step.in, 16).ok();
                     }
                 }
                 j->gone.push_back(gone);
             }
         },
         [this, &p, j] {
             teardown& t = *p.leaving;
             owned& o = p.dev[t.device];
             for (const auto& w : j->warnings) log(level::warning, fmt::format("pid {}: {}", p.pid, w));
             for (std::size_t i = 0; i < j->gone.size(); ++i) {
                 const teardown_step& step = j->steps[i];
                 ++t.objects;
                 if (j->gone[i]) {
                     command_effect e;
                     e.what = command_effect::kind::destroy;
                     e.obj = step.obj;
                     e.id = step.id;
                     apply(e, {}, o);
                     continue;
                 }
                 ++t.failed;
                 t.keep.insert(step.maps.begin(), step.maps.end());
                 log(level::err, fmt::format("pid {}: object 0x{:x} could not be destroyed: its memory stays mapped",
                                             p.pid, step.id));
             }
             // Steps the slice did not reach (its time was up) come back for the next one.
             for (std::size_t i = j->gone.size(); i < j->steps.size(); ++i) {
                 t.steps[t.next + i] = std::move(j->steps[i]);
             }
             t.next += j->gone.size();
             p.busy = false;
             ++released_;  // (a parked request may fit now)
         });
}

void server::post_uar_slice(peer& p) {
    teardown& t = *p.leaving;
    struct job {
        driver::hca* hca = nullptr;
        std::vector<std::uint32_t> uars;
        std::vector<std::string> errors;  // per UAR, empty when returned
    };
    auto j = std::make_shared<job>();
    j->hca = devices_[t.device]->hca.get();
    const std::size_t n = std::min(kSliceSteps, t.uars.size() - t.next);
    j->uars.assign(t.uars.begin() + static_cast<std::ptrdiff_t>(t.next),
                   t.uars.begin() + static_cast<std::ptrdiff_t>(t.next + n));
    post(p, job_lanes::lane::large,
         [j] {
             for (const auto uar : j->uars) {
                 auto in = driver::command<ifc::dealloc_uar_in>(cmd_opcode::DEALLOC_UAR);
                 ifc::set<ifc::dealloc_uar_in::uar>(in.data(), uar);
                 auto s = j->hca->exec(in, ifc::dealloc_uar_out::size_bytes);
                 j->errors.push_back(s ? std::string() : s.error().message);
             }
         },
         [this, &p, j] {
             teardown& t = *p.leaving;
             for (std::size_t i = 0; i < j->uars.size(); ++i) {
                 ++t.uars_returned;
                 if (j->errors[i].empty()) {
                     p.dev[t.device].uars.erase(j->uars[i]);
                     continue;
                 }
                 ++t.failed;
                 log(level::err, fmt::format("pid {}: {}", p.pid, j->errors[i]));
             }
             t.next += j->uars.size();
             p.busy = false;
             ++released_;  // (a parked request may fit now)
         });
}

void server::post_memory_slice(peer& p) {
    teardown& t = *p.leaving;
    owned& o = p.dev[t.device];
    // The slice owns the mappings it unmaps (moved out of the books); until it is done
    // they count against the uid (pending), and what it did not reach comes back.
    struct job {
        std::vector<mapping> maps;
        std::size_t unmapped = 0;  // the first ones
        std::uint64_t bytes = 0;
    };
    auto j = std::make_shared<job>();
    std::uint64_t bytes = 0;
    for (auto it = o.maps.begin(); it != o.maps.end() && j->maps.size() < kSliceSteps;) {
        if (t.keep.contains(it->first)) {
            ++it;
            continue;
        }
        bytes += it->second.length;
        j->maps.push_back(std::move(it->second));
        it = o.maps.erase(it);
    }
    o.pinned -= std::min(o.pinned, bytes);
    p.pending = {t.device, command_effect::object::none, false, bytes, j->maps.size()};
    post(p, job_lanes::lane::large,
         [j] {
             const auto until = std::chrono::steady_clock::now() + kSliceTime;
             for (auto& m : j->maps) {
                 if (j->unmapped > 0 && std::chrono::steady_clock::now() > until) break;
                 j->bytes += m.length;
                 m = mapping{};  // out of the IOMMU, then munmapped
                 ++j->unmapped;
             }
         },
         [this, &p, j] {
             teardown& t = *p.leaving;
             owned& o = p.dev[t.device];
             // What the slice did not reach (its time was up) is back in the books.
             for (std::size_t i = j->unmapped; i < j->maps.size(); ++i) {
                 mapping& m = j->maps[i];
                 o.pinned += m.length;
                 const std::uint64_t iova = m.dma.iova();
                 o.maps.emplace(iova, std::move(m));
             }
             t.bytes += j->bytes;
             p.pending = {};
             p.busy = false;
             ++released_;  // (a parked request may fit now)
         });
}

void server::end_device(peer& p) {
    teardown& t = *p.leaving;
    if (t.device < p.dev.size()) {
        owned& o = p.dev[t.device];
        // What is left is memory an object that would not go still uses: the device may
        // still write there, so its IOVA is not given back; it stays in the IOMMU (and
        // mapped here) until the function is torn down or reset.
        for (auto& [iova, m] : o.maps) {
            log(level::err, fmt::format("pid {}: IOVA 0x{:x} ({} bytes) kept mapped until cxvd stops", p.pid, iova,
                                        m.length));
            devices_[t.device]->leaked.push_back(std::move(m));
        }
        o = owned{};
    }
    ++t.device;
    t.step = teardown::phase::start;
    t.steps.clear();
    t.uars.clear();
    t.next = 0;
    t.keep.clear();
}

void server::finish(peer& p) {
    teardown& t = *p.leaving;
    const std::size_t destroyed = t.objects - std::min(t.objects, t.failed);
    log(t.failed ? level::warning : level::info,
        fmt::format("client pid {} ({}) gone ({}): {} objects destroyed, {} UARs returned, {} bytes unmapped{}{}{}",
                    p.pid, p.comm, t.why, destroyed, t.uars_returned, t.bytes,
                    t.forgotten ? fmt::format(", {} objects and UARs forgotten with the reset function", t.forgotten)
                                : std::string(),
                    t.events_dropped ? fmt::format(", {} events dropped (its event queue was full)", t.events_dropped)
                                     : std::string(),
                    t.failed ? fmt::format(", {} commands failed", t.failed) : std::string()));
    t.done = true;
    p.sock = unique_fd{};  // after the log line, so a client that sees the close finds it there
    release_functions(p);
}

void server::forget(peer& p, std::size_t d) {
    if (d >= p.dev.size()) return;
    owned& o = p.dev[d];
    if (p.leaving) {
        p.leaving->forgotten += teardown_commands(o).size() + o.uars.size();
        p.leaving->bytes += o.pinned;
        if (p.leaving->device == d) {  // mid-way there: what it had taken is moot too
            p.leaving->step = teardown::phase::start;
            p.leaving->steps.clear();
            p.leaving->uars.clear();
            p.leaving->next = 0;
        }
    }
    o = owned{};  // DMA unmapped, then munmapped: the function was reset, the device writes nothing
}

// STATUS's row for a client: who it is and what it holds on each function.
client_info server::status_row(pid_t pid, uid_t uid, gid_t gid, const std::string& comm,
                               const std::vector<owned>& dev) {
    client_info c;
    c.pid = pid;
    c.uid = uid;
    c.gid = gid;
    c.comm = comm;
    for (const auto& o : dev) {
        c.pds += static_cast<std::uint32_t>(o.pds.size());
        c.cqs += static_cast<std::uint32_t>(o.cqs.size());
        c.mkeys += static_cast<std::uint32_t>(o.mkeys.size());
        c.qps += static_cast<std::uint32_t>(o.qps.size());
        c.srqs += static_cast<std::uint32_t>(o.srqs.size());
        c.uars += static_cast<std::uint32_t>(o.uars.size());
        c.maps += static_cast<std::uint32_t>(o.maps.size());
        c.pinned += o.pinned;
        c.translations += o.translations;
    }
    return c;
}

}  // namespace cxv::daemon
