#include "sim/device.h"

#include <algorithm>
#include <cstring>

#include "hw/doorbell.h"
#include "hw/ifc.h"
#include "hw/init_seg.h"

namespace cxv::sim {

namespace ifc = hw::ifc;

// Initialization segment offsets (PRM "Initialization Segment"): hw/'s, the driver's too.
namespace iseg = hw::init_seg_offset;

result<std::unique_ptr<device>> device::create(const device_config& cfg) {
    if (cfg.bar0_size < (std::size_t{cfg.first_uar} + 1) * hw::uar_page_size ||
        (cfg.bar0_size & (cfg.bar0_size - 1)) != 0) {
        return error{EINVAL, "device model: BAR0 must be a power of two holding the UAR pages"};
    }
    if (cfg.first_uar * hw::uar_page_size < 0x4000) {
        return error{EINVAL, "device model: UAR pages must not overlap the initialization segment"};
    }
    // The MSI-X table at BAR0+0x2000 must end before the PBA at +0x3000.
    if (cfg.msix_vectors == 0 || cfg.msix_vectors > 256) {
        return error{EINVAL, "device model: 1 to 256 MSI-X vectors"};
    }
    auto bar = bar0::create(cfg.bar0_size);
    if (!bar) return bar.error();
    std::unique_ptr<device> d(new device(cfg, std::move(bar).value()));
    auto link = link::port::create(d->cfg_, d->tables_);
    if (!link) return link.error();
    d->link_ = std::move(link).value();
    d->port_.attach(d->link_.get());
    if (cfg.own_thread) {
        d->own_thread_ = std::make_unique<model_thread>();
        d->thread_ = d->own_thread_.get();
    } else {
        d->thread_ = &model_thread::shared();
    }
    d->thread_->serve(d.get());
    return d;
}

device::device(const device_config& cfg, std::unique_ptr<bar0> bar)
    : cfg_(cfg),
      bar_(std::move(bar)),
      msix_(cfg_.msix_vectors),
      pci_(cfg_, cfg_.bar0_size, cfg_.msix_vectors),
      eqs_(mmu_, msix_, trace_),
      engine_(cfg_, *bar_, mmu_, trace_, tables_, *this),
      port_(cfg_, trace_, eqs_, engine_),
      fw_(cfg_, *bar_, mmu_, msix_, trace_, tables_, eqs_, port_, engine_),
      cmd_(*bar_, mmu_, fw_, eqs_, trace_, faults_) {
    power_on();
}

device::~device() {
    if (thread_ != nullptr) thread_->drop(this);
    port_.attach(nullptr);
}

int device::wake_fd() const { return link_ ? link_->wake_fd() : -1; }

bool device::arm_wake() {
    std::lock_guard lock(mu_);
    return link_ ? link_->arm_wake() : true;
}

void device::power_on() {
    bar_->zero();
    std::byte* seg = bar_->base();
    ifc::set<ifc::initial_seg::fw_rev_major>(seg, cfg_.fw_rev_major);
    ifc::set<ifc::initial_seg::fw_rev_minor>(seg, cfg_.fw_rev_minor);
    ifc::set<ifc::initial_seg::fw_rev_subminor>(seg, cfg_.fw_rev_subminor);
    ifc::set<ifc::initial_seg::cmd_interface_rev>(seg, 5);
    std::byte* health = ifc::at<ifc::initial_seg::health_buffer>(seg);
    ifc::set<ifc::health_buffer::fw_version>(health, (std::uint32_t{cfg_.fw_rev_major} << 16) |
                                                         cfg_.fw_rev_minor);
    ifc::set<ifc::health_buffer::hw_id>(health, cfg_.device_id);
    cmd_.reset();
    fw_.reset();  // the objects, the EQs with them, and the port
    // Booting: `initializing` (bit 31 of dword 0x1fc) until boot_time has passed.
    bar_->store32(iseg::initializing, hw::init_seg_initializing_bit);
    const auto now = std::chrono::steady_clock::now();
    boot_done_ = now + cfg_.boot_time;
    booting_ = true;
    health_counter_ = 0;
    next_health_ = now;
    last_nic_interface_ = 0;
}

void device::reset() {
    std::lock_guard lock(mu_);
    pci_.reset();
    msix_.clear();
    power_on();
    watched_stale_ = true;
}

void device::tick_health(std::chrono::steady_clock::time_point now) {
    if (auto synd = faults_.health_syndrome()) {
        std::byte* health = ifc::at<ifc::initial_seg::health_buffer>(bar_->base());
        ifc::set<ifc::health_buffer::synd>(health, synd->first);
        ifc::set<ifc::health_buffer::ext_synd>(health, synd->second);
    }
    if (now < next_health_) return;
    next_health_ = now + cfg_.health_period;
    if (faults_.health_stalled()) return;
    health_counter_ = (health_counter_ + 1) & hw::health_counter_mask;
    // health_syndrome (bits 31:24) stays 0; the counter is the low 24 bits.
    bar_->store32(iseg::health_counter, health_counter_);
}

std::uint64_t device::timer_at(std::chrono::steady_clock::time_point now) const noexcept {
    // In doubles: exact to the nanosecond for 104 days, and no 128-bit division in each
    // sweep of the model thread.
    const double ticks_per_ns = static_cast<double>(cfg_.clock_khz) * (1e6 + cfg_.clock_ppm) / 1e12;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - timer_epoch_).count();
    return ns <= 0 ? 0 : static_cast<std::uint64_t>(static_cast<double>(ns) * ticks_per_ns);
}

bool device::poll_doorbells() {
    if (watched_stale_) {
        watched_ = watched_uar_pages();
        watched_stale_ = false;
    }
    bool any = false;
    for (const std::uint32_t uar : watched_) {
        const std::size_t base = std::size_t{uar} * hw::uar_page_size;
        if (base + hw::uar_page_size > bar_->size()) continue;
        // A value of 0 never comes from a driver: EQ numbers start at 1.
        if (bar_->load32(base + hw::uar_eq_doorbell_no_arm) != 0) {
            eqs_.doorbell(bar_->exchange32(base + hw::uar_eq_doorbell_no_arm, 0), false);
            any = true;
        }
        if (bar_->load32(base + hw::uar_eq_doorbell_arm) != 0) {
            eqs_.doorbell(bar_->exchange32(base + hw::uar_eq_doorbell_arm, 0), true);
            any = true;
        }
        // CQ arm doorbell: 64 bits (arm word, cqn); the arm word is never 0 once a CQ
        // has been armed with a sequence number or command, and cqn 0 is never used.
        if (bar_->load64(base + hw::uar_cq_doorbell) != 0) {
            engine_.cq_doorbell(bar_->exchange64(base + hw::uar_cq_doorbell, 0));
            any = true;
        }
        // Send doorbells: the first 8 bytes of a control segment at the start of a
        // BlueFlame register half (never 0: QP numbers start at 0x100).
        for (std::size_t off = base + hw::uar_bf_offset; off < base + hw::uar_page_size; off += 0x100) {
            if (bar_->load64(off) != 0) {
                engine_.sq_doorbell(uar, off, bar_->exchange64(off, 0));
                any = true;
            }
        }
    }
    return any;
}

bool device::take_doorbells() {
    std::lock_guard lock(mu_);
    if (booting_) return false;
    const iommu::access_run dma(mmu_);
    engine_.begin_cq_batch();
    const bool any = poll_doorbells();
    engine_.end_cq_batch();
    return any;
}

void device::set_writes_seen(bool on) {
    std::lock_guard lock(mu_);
    cmd_.set_rung_only(on);
}

bool device::receive_packets(std::chrono::steady_clock::time_point now) {
    if (!link_) return false;
    // The cable: set_link's, and on a directory fabric the file that pulls it from outside.
    const bool cable = cable_set_ && link_->cable_in(now);
    if (cable != cable_seen_) {
        cable_seen_ = cable;
        port_.set_cable(cable);
    }
    // Loopback answers come back through the same port: poll until it stays quiet.
    bool any = false;
    const std::uint64_t damaged = link_->counters().bad_crc;
    for (unsigned pass = 0; pass < 64; ++pass) {
        // One clock read per pass, when its first frame is stamped (a read per frame was a
        // tenth of the model thread at 2.6 M frames/s), each frame after it a tick later
        // (device::timestamp): the frames a pass takes were on the wire by then, but for
        // one another process sends while the pass runs.
        taking_ = true;
        taken_at_.reset();
        const bool more = link_->poll(
            now, [this](wire::packet& p, std::size_t) { port_.deliver(std::move(p)); },
            [this](std::span<const std::byte> f, wire::ip_checksums known) {
                if (port_.active()) port_.count_frame_rx(f, engine_.receive_frame(f, known));
            });
        taking_ = false;
        if (!more) break;
        any = true;
        // The batch is done: the ACKs the responders coalesced go out (IBA 9.7.5.1.1).
        engine_.end_of_batch();
    }
    port_.count_rx_errors(link_->counters().bad_crc - damaged);
    return any;
}

bool device::round(std::chrono::steady_clock::time_point now) {
    std::lock_guard lock(mu_);
    // Every DMA of the round under one hold of the IOMMU's table (an UNMAP waits for the
    // round to end, as it waits for any access in progress).
    const iommu::access_run dma(mmu_);
    struct round_time {
        device_port& port;
        round_time(device_port& p, std::chrono::steady_clock::time_point now) : port(p) { port.set_round_time(now); }
        ~round_time() { port.set_round_time({}); }
    } const in_round(port_, now);
    bar_->store64(iseg::internal_timer_h, timer_at(now));  // one store: h and l always agree
    if (booting_) {
        if (now < boot_done_) return false;
        bar_->store32(iseg::initializing, 0);
        booting_ = false;
    }
    tick_health(now);
    // The CQE writes of the queues' work gathered, each batch written together
    // (cq_engine), and all of them before the batch ends; commands, which may destroy or
    // resize a CQ, run between two batches, never with a CQE still to write.
    struct cqe_batch {
        transport_engine& e;
        explicit cqe_batch(transport_engine& x) : e(x) { e.begin_cq_batch(); }
        ~cqe_batch() { e.end_cq_batch(); }
    };
    // First what was rung or arrived before the commands found below: a card executes a
    // posted send as soon as its doorbell write lands and takes a packet as it arrives,
    // microseconds before a command written after them (a QP moved to the error state
    // or destroyed, a CQ destroyed) is carried out. So a program that posts a last send
    // and then destroys its QP has sent it, and a packet that reached the port before
    // the driver, told of a disconnect, destroyed the QP, was delivered.
    bool worked = false;
    {
        const cqe_batch cqes(engine_);
        worked |= poll_doorbells();
        worked |= receive_packets(now);
    }
    if (cmd_.poll()) {
        worked = true;
        watched_stale_ = true;  // a command may have created or destroyed objects
    }
    // Fast teardown completes when the driver disables the NIC interface.
    const std::uint8_t nic = cmd_.nic_interface();
    if (nic != last_nic_interface_) {
        last_nic_interface_ = nic;
        if (nic == 1) fw_.finish_fast_teardown();
        worked = true;
    }
    const cqe_batch cqes(engine_);
    worked |= engine_.tick(now);
    worked |= port_.tick(now);
    return worked;
}

hca_state device::state() {
    std::lock_guard lock(mu_);
    return fw_.state();
}

std::size_t device::pages_owned() {
    std::lock_guard lock(mu_);
    return fw_.pages_owned();
}

std::size_t device::eq_count() {
    std::lock_guard lock(mu_);
    return eqs_.size();
}

std::vector<std::uint32_t> device::watched_uar_pages() const {
    std::vector<std::uint32_t> out;
    for (const auto& [eqn, eq] : eqs_.by_eqn()) out.push_back(eq.uar_page);
    for (const auto& [cqn, cq] : tables_.cqs) out.push_back(ifc::get<ifc::cqc::uar_page>(cq.cqc.data()));
    for (const auto& [qpn, qp] : tables_.qps) out.push_back(ifc::get<ifc::qpc::uar_page>(qp.qpc.data()));
    for (const auto& [sqn, sq] : tables_.eth.sqs) out.push_back(sq.uar);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::uint32_t device::health_counter() const {
    return bar_->load32(iseg::health_counter) & hw::health_counter_mask;
}

void device::set_link(bool up) {
    std::lock_guard lock(mu_);
    cable_set_ = up;
    cable_seen_ = up && (!link_ || link_->cable_in(std::chrono::steady_clock::now()));
    port_.set_cable(cable_seen_);
}

void device::set_link_faults(const device_config::link_faults& f) {
    std::lock_guard lock(mu_);
    if (link_) link_->set_faults(f);
}

link::port_counters device::link_counters() {
    std::lock_guard lock(mu_);
    return link_ ? link_->counters() : link::port_counters{};
}

void device::request_pages(std::int32_t num_pages) {
    std::lock_guard lock(mu_);
    eqs_.request_pages(num_pages);
}

}  // namespace cxv::sim
