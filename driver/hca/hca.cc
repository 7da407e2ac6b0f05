#include "driver/hca/hca.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "hw/cmd_values.h"
#include "hw/ifc.h"
#include "hw/doorbell.h"
#include "hw/init_seg.h"
#include "hw/mmio.h"
#include "hw/opcodes.h"
#include "hw/port_state_name.h"
#include "hw/registers.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

namespace {

namespace seg = hw::init_seg_offset;
constexpr std::uint16_t cap_op_mod(hw::hca_cap_mode m) { return hw::hca_cap_op_mod(hw::hca_cap_type::GENERAL, m); }
template <typename E>
constexpr std::uint16_t op_mod(E v) { return static_cast<std::uint16_t>(v); }
constexpr std::uint16_t reg(hw::reg_id id) { return static_cast<std::uint16_t>(id); }
constexpr std::uint16_t reg_op(hw::access_reg_op_mod m) { return static_cast<std::uint16_t>(m); }

}  // namespace

hca::hca(std::unique_ptr<vfio::device> dev, const options& o)
    : dev_(std::move(dev)), opts_(o), health_(o.health_period, o.health_misses) {
    link_->owner = this;
}

result<std::unique_ptr<hca>> hca::create(std::unique_ptr<vfio::device> dev, const options& o) {
    std::unique_ptr<hca> h(new hca(std::move(dev), o));
    if (auto s = h->bring_up(); !s) return s.error();
    if (o.port_timeout.count() > 0) {
        if (auto s = h->wait_port_active(1, o.port_timeout); !s) return s.error();
    }
    return h;
}

result<std::unique_ptr<hca>> hca::attach(std::unique_ptr<vfio::device> dev, std::shared_ptr<command_channel> ch,
                                         attach_info info, const options& o) {
    if (!ch || !dev || !dev->remote()) return error{EINVAL, "hca::attach: a remote device and a command channel"};
    if (info.caps.size() < ifc::cmd_hca_cap::size_bytes) {
        return error{EPROTO, fmt::format("{}: the owner gave {} bytes of capabilities, not {}", dev->bdf(),
                                         info.caps.size(), ifc::cmd_hca_cap::size_bytes)};
    }
    std::unique_ptr<hca> h(new hca(std::move(dev), o));
    h->channel_ = std::move(ch);
    h->caps_cur_ = info.caps;
    h->caps_max_ = info.caps;
    h->mac_ = info.mac;
    h->ipv4_ = info.ipv4;
    h->roce_gids_ = info.gids;
    h->attached_ = std::move(info);
    auto uar = h->dev_->alloc_uar();
    if (!uar) return uar.error();
    h->uar_ = *uar;
    h->bf_ = std::make_unique<bf_allocator>([d = h->dev_.get()] { return d->alloc_uar(); }, h->dev_->bar0().size(),
                                            ifc::get<ifc::cmd_hca_cap::log_bf_reg_size>(h->caps_cur_.data()),
                                            h->dev_->bdf());
    if (o.port_timeout.count() > 0) {
        if (auto s = h->wait_port_active(1, o.port_timeout); !s) return s.error();
    }
    return h;
}

hca::~hca() { (void)teardown(teardown_mode::graceful); }

status hca::close(teardown_mode mode) { return teardown(mode); }

// PRM §"Initialization" (the HCA driver start-up sequence), step by step.
status hca::bring_up() {
    if (auto s = wait_initializing("before the command queue"); !s) return s;
    auto q = cmd_queue::create(*dev_, opts_.cmd);
    if (!q) return q.error();
    cmd_ = std::move(q).value();
    if (auto s = wait_initializing("after the command queue"); !s) return s;
    pages_ = std::make_unique<page_pool>(*dev_, *cmd_);

    auto run = [&](std::vector<std::byte> in, std::size_t olen) { return cmd_->exec(in, olen); };
    if (auto r = run(command<ifc::enable_hca_in>(cmd_opcode::ENABLE_HCA), 16); !r) return r.error();
    // ISSI 1 is what this driver speaks (PRM §"ISSI": supported_issi is a bitmask of the
    // interface step sequence ids); a device offering only 0 is too old.
    constexpr unsigned kIssi = 1;
    auto issi = run(command<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI), ifc::query_issi_out::size_bytes);
    if (!issi) return issi.error();
    if (!(ifc::get<ifc::query_issi_out::supported_issi_dw0>(issi->data()) & (1u << kIssi))) {
        return error{EOPNOTSUPP, fmt::format("{}: firmware does not support ISSI 1", dev_->bdf())};
    }
    auto set_issi = command<ifc::set_issi_in>(cmd_opcode::SET_ISSI);
    ifc::set<ifc::set_issi_in::current_issi>(set_issi.data(), kIssi);
    if (auto r = run(set_issi, 16); !r) return r.error();

    // QUERY_PAGES then MANAGE_PAGES with what it asked for (PRM §"QUERY_PAGES").
    auto pages = [&](hw::query_pages_op_mod which) -> status {
        auto qp = run(command<ifc::query_pages_in>(cmd_opcode::QUERY_PAGES, op_mod(which)), 16);
        if (!qp) return qp.error();
        pages_->set_function_id(static_cast<std::uint16_t>(ifc::get<ifc::query_pages_out::function_id>(qp->data())));
        return pages_->give(static_cast<std::int32_t>(ifc::get<ifc::query_pages_out::num_pages>(qp->data())));
    };
    if (auto s = pages(hw::query_pages_op_mod::BOOT_PAGES); !s) return s;

    auto endian = command<ifc::access_register_in>(cmd_opcode::ACCESS_REG, reg_op(hw::access_reg_op_mod::WRITE), 16);
    ifc::set<ifc::access_register_in::register_id>(endian.data(), reg(hw::reg_id::HOST_ENDIANNESS));
    if (auto r = run(endian, ifc::access_register_out::size_bytes + 16); !r) return r.error();

    if (auto s = query_caps(cap_op_mod(hw::hca_cap_mode::GET_MAX), caps_max_); !s) return s;
    if (auto s = query_caps(cap_op_mod(hw::hca_cap_mode::GET_CUR), caps_cur_); !s) return s;
    // SET_HCA_CAP: the current capabilities with what this driver needs — no command
    // checksums, 4 KiB UAR pages.
    auto set = command<ifc::set_hca_cap_in>(cmd_opcode::SET_HCA_CAP, 0);
    std::byte* cap = ifc::at<ifc::set_hca_cap_in::capability>(set.data());
    std::memcpy(cap, caps_cur_.data(), caps_cur_.size());
    ifc::set<ifc::cmd_hca_cap::cmdif_checksum>(cap, 0);
    ifc::set<ifc::cmd_hca_cap::log_uar_page_sz>(cap, 0);
    if (auto r = run(set, 16); !r) return r.error();
    if (auto s = query_caps(cap_op_mod(hw::hca_cap_mode::GET_CUR), caps_cur_); !s) return s;

    if (auto s = pages(hw::query_pages_op_mod::INIT_PAGES); !s) return s;
    if (auto r = run(command<ifc::init_hca_in>(cmd_opcode::INIT_HCA), 16); !r) return r.error();
    if (ifc::get<ifc::cmd_hca_cap::driver_version>(caps_cur_.data())) {
        auto ver = command<ifc::set_driver_version_in>(cmd_opcode::SET_DRIVER_VERSION);
        const std::string v = "cxv,mlx5_core,0.1";
        std::memcpy(ifc::at<ifc::set_driver_version_in::driver_version>(ver.data()), v.data(), v.size());
        if (auto r = run(ver, 16); !r) return r.error();
    }
    auto alloc_uar = [this]() -> result<std::uint32_t> {
        auto r = cmd_->exec(command<ifc::alloc_uar_in>(cmd_opcode::ALLOC_UAR), 16);
        if (!r) return r.error();
        return static_cast<std::uint32_t>(ifc::get<ifc::alloc_uar_out::uar>(r->data()));
    };
    auto uar = alloc_uar();
    if (!uar) return uar.error();
    uar_ = uar.value();
    uar_allocated_ = true;
    if (auto s = bf_allocator::check_uar(uar_, dev_->bar0().size(), dev_->bdf()); !s) return s;
    bf_ = std::make_unique<bf_allocator>(alloc_uar, dev_->bar0().size(),
                                         ifc::get<ifc::cmd_hca_cap::log_bf_reg_size>(caps_cur_.data()), dev_->bdf());
    if (auto s = start_events(); !s) return s;
    // A RoCE port's GID table is empty until the driver fills it (roce.cc).
    if (ethernet()) return program_roce_gids();
    return ok_status();
}

status hca::wait_initializing(const char* when) {
    const hw::mmio_window& bar = dev_->bar0();
    const auto deadline = std::chrono::steady_clock::now() + opts_.init_timeout;
    while (bar.read32_be(seg::initializing) & hw::init_seg_initializing_bit) {
        if (std::chrono::steady_clock::now() > deadline) {
            return error{EBUSY, fmt::format("{}: firmware still initializing {} after {} ms", dev_->bdf(), when,
                                            opts_.init_timeout.count())};
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return ok_status();
}

status hca::query_caps(std::uint16_t op_mod, std::vector<std::byte>& into) {
    auto r = cmd_->exec(command<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, op_mod),
                        ifc::query_hca_cap_out::size_bytes);
    if (!r) return r.error();
    const std::byte* cap = ifc::at<ifc::query_hca_cap_out::capability>(r->data());
    into.assign(cap, cap + ifc::cmd_hca_cap::size_bytes);
    return ok_status();
}

// The EQs, then the threads that serve them: commands complete by events from here on.
status hca::start_events() {
    eqs_ = std::make_unique<event_queues>(*dev_, *cmd_, uar_);
    if (auto s = eqs_->create(); !s) return s;
    cmd_->use_events(true);
    health_.start(dev_->bar0(), std::chrono::steady_clock::now());
    eq_handlers h;
    h.completion = opts_.on_completion;
    h.command = [this](std::uint32_t vector) { cmd_->complete(vector); };
    h.page_request = [this](std::int32_t n) { pages_->request(n); };
    h.event = [this](hca_event e) { report(std::move(e)); };
    h.port_change = [this] {
        {
            std::lock_guard lock(port_mu_);
            ++port_events_;
        }
        port_cv_.notify_all();
    };
    h.fatal = [this](const std::string& why) { fatal(why); };
    h.tick = [this] {
        if (dead()) return;
        if (auto why = health_.check(dev_->bar0(), std::chrono::steady_clock::now())) fatal(*why);
        std::lock_guard lock(tick_mu_);
        if (tick_hook_) tick_hook_();
    };
    eqs_->start(std::move(h));
    pages_->start([this](const error& e) {
        if (!dead()) report({hca_event::fatal, 0, 0, "page request not served: " + e.message});
    });
    return ok_status();
}

void hca::on_tick(std::function<void()> f) {
    std::lock_guard lock(tick_mu_);
    tick_hook_ = std::move(f);
}

result<hca::bf_reg> hca::alloc_bf() { return bf_->alloc(); }

std::byte* hca::bf_address(const bf_reg& r, bool write_combining) noexcept {
    const hw::mmio_window* wc = write_combining ? dev_->bar0_wc() : nullptr;
    std::byte* const base = wc != nullptr ? wc->base() : dev_->bar0().base();
    return base + std::size_t{r.uar} * hw::uar_page_size + r.offset;
}

void hca::free_bf(const bf_reg& r) { bf_->free(r); }

std::size_t hca::pages_given() const { return pages_ ? pages_->given() : 0; }

// ---- ports ----

bool hca::ethernet() const noexcept { return ifc::get<ifc::cmd_hca_cap::port_type>(caps_cur_.data()) == static_cast<std::uint32_t>(hw::port_type::ETHERNET); }

result<std::vector<std::byte>> hca::read_port_reg(unsigned port, hw::reg_id id, std::size_t size,
                                                  std::uint32_t proto_mask) {
    auto in = command<ifc::access_register_in>(cmd_opcode::ACCESS_REG, reg_op(hw::access_reg_op_mod::READ), size);
    ifc::set<ifc::access_register_in::register_id>(in.data(), reg(id));
    std::byte* r = ifc::at<ifc::access_register_in::register_data>(in.data());
    ifc::set<ifc::pmtu_reg::local_port>(r, port);  // local_port is at the same place in every port register
    if (id == hw::reg_id::PTYS) ifc::set<ifc::ptys_reg::proto_mask>(r, proto_mask);
    auto out = cmd_->exec(in, ifc::access_register_out::size_bytes + size);
    if (!out) return out.error();
    return std::vector<std::byte>(out->begin() + ifc::access_register_out::size_bytes, out->end());
}

result<hca::port_info> hca::query_port(unsigned port) {
    port_info pi;
    pi.ethernet = ethernet();
    if (attached()) {
        if (port != 1) return error{EINVAL, fmt::format("{}: port {} (an attached function has port 1)", dev_->bdf(), port)};
        // The MTU (PMTU: a register, the owner's) as the owner told at attach; a RoCE port's
        // state and GIDs too (the GID table is the owner's to program). An InfiniBand
        // port's LID, state and GID from the vport queries below, which the owner forwards.
        pi.max_mtu = attached_.max_mtu;
        if (pi.ethernet) {
            pi.up = attached_.port_logical == static_cast<unsigned>(hw::ib_port_state::ACTIVE);
            pi.gids = attached_.gids;
            if (!pi.gids.empty()) std::memcpy(pi.gid, pi.gids[0].data(), 16);
            return pi;
        }
        return query_ib_port(port, pi);
    }
    auto paos = read_port_reg(port, hw::reg_id::PAOS, ifc::paos_reg::size_bytes);
    if (!paos) return paos.error();
    pi.up = ifc::get<ifc::paos_reg::oper_status>(paos->data()) == static_cast<std::uint32_t>(hw::port_status::UP);
    // PMTU: the operational MTU in bytes, as the QPC encodes it (RoCE headers taken off).
    auto pmtu = read_port_reg(port, hw::reg_id::PMTU, ifc::pmtu_reg::size_bytes);
    if (!pmtu) return pmtu.error();
    std::uint32_t bytes = ifc::get<ifc::pmtu_reg::oper_mtu>(pmtu->data());
    if (pi.ethernet) bytes = bytes > hw::roce_header_overhead ? bytes - hw::roce_header_overhead : 0;
    for (std::uint32_t m = ifc::qpc_values::mtu_256; m <= ifc::qpc_values::mtu_4096; ++m) {
        if ((128u << m) <= bytes) pi.max_mtu = m;
    }
    if (pi.ethernet) {  // RoCE addresses come from the GID table the driver programmed
        auto g = read_roce_gids(port);
        if (!g) return g.error();
        pi.gids = std::move(g).value();
        if (!pi.gids.empty()) std::memcpy(pi.gid, pi.gids[0].data(), 16);
        return pi;
    }
    return query_ib_port(port, pi);
}

// PRM QUERY_HCA_VPORT_CONTEXT and QUERY_HCA_VPORT_GID: an InfiniBand port's LID, state
// and GID 0, into `pi`.
result<hca::port_info> hca::query_ib_port(unsigned port, port_info pi) {
    auto q = command<ifc::query_hca_vport_context_in>(cmd_opcode::QUERY_HCA_VPORT_CONTEXT);
    ifc::set<ifc::query_hca_vport_context_in::port_num>(q.data(), port);
    auto out = exec(q, ifc::query_hca_vport_context_out::size_bytes);
    if (!out) return out.error();
    const std::byte* ctx = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(out->data());
    pi.lid = static_cast<std::uint16_t>(ifc::get<ifc::hca_vport_context::lid>(ctx));
    if (attached()) {
        pi.up = ifc::get<ifc::hca_vport_context::port_state>(ctx) == static_cast<unsigned>(hw::ib_port_state::ACTIVE);
    }
    auto g = command<ifc::query_hca_vport_gid_in>(cmd_opcode::QUERY_HCA_VPORT_GID);
    ifc::set<ifc::query_hca_vport_gid_in::port_num>(g.data(), port);
    auto gout = exec(g, ifc::query_hca_vport_gid_out::size_bytes + 16);
    if (!gout) return gout.error();
    std::memcpy(pi.gid, gout->data() + ifc::query_hca_vport_gid_out::size_bytes, 16);
    pi.gids.emplace_back();
    std::memcpy(pi.gids.back().data(), pi.gid, 16);
    return pi;
}

result<hca::port_state> hca::query_port_state(unsigned port) {
    port_state ps;
    if (attached()) {
        if (port != 1) return error{EINVAL, fmt::format("{}: port {} (an attached function has port 1)", dev_->bdf(), port)};
        ps.logical = attached_.port_logical;
        if (!ethernet()) {  // the owner forwards this vport query: the state now
            auto q = command<ifc::query_hca_vport_context_in>(cmd_opcode::QUERY_HCA_VPORT_CONTEXT);
            ifc::set<ifc::query_hca_vport_context_in::port_num>(q.data(), port);
            auto out = exec(q, ifc::query_hca_vport_context_out::size_bytes);
            if (!out) return out.error();
            ps.logical = ifc::get<ifc::hca_vport_context::port_state>(
                ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(out->data()));
        }
        ps.admin_up = ps.oper_up = ps.active();
        return ps;
    }
    auto paos = read_port_reg(port, hw::reg_id::PAOS, ifc::paos_reg::size_bytes);
    if (!paos) return paos.error();
    constexpr auto kUp = static_cast<std::uint32_t>(hw::port_status::UP);
    ps.admin_up = ifc::get<ifc::paos_reg::admin_status>(paos->data()) == kUp;
    ps.oper_up = ifc::get<ifc::paos_reg::oper_status>(paos->data()) == kUp;
    if (ethernet()) {
        // The vNIC vport (op_mod 0) is up when the port carries traffic (Linux's carrier).
        auto r = cmd_->exec(command<ifc::query_vport_state_in>(cmd_opcode::QUERY_VPORT_STATE,
                                                                  op_mod(hw::vport_state_op_mod::VNIC_VPORT)),
                            ifc::query_vport_state_out::size_bytes);
        if (!r) return r.error();
        ps.logical = ifc::get<ifc::query_vport_state_out::state>(r->data()) ==
                                 static_cast<std::uint32_t>(hw::vport_state::UP)
                         ? static_cast<unsigned>(hw::ib_port_state::ACTIVE)
                         : static_cast<unsigned>(hw::ib_port_state::DOWN);
        return ps;
    }
    auto q = command<ifc::query_hca_vport_context_in>(cmd_opcode::QUERY_HCA_VPORT_CONTEXT);
    ifc::set<ifc::query_hca_vport_context_in::port_num>(q.data(), port);
    auto out = cmd_->exec(q, ifc::query_hca_vport_context_out::size_bytes);
    if (!out) return out.error();
    const std::byte* ctx = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(out->data());
    ps.logical = ifc::get<ifc::hca_vport_context::port_state>(ctx);
    return ps;
}

status hca::wait_port_active(unsigned port, std::chrono::milliseconds timeout) {
    if (attached()) {  // the owner's view at attach; nothing here would change it
        auto ps = query_port_state(port);
        if (!ps) return ps.error();
        if (ps->active()) return ok_status();
        return error{ENETDOWN, fmt::format("{}: port {} is not ACTIVE at cxvd (PortState {})", dev_->bdf(), port,
                                           ps->logical)};
    }
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout;
    for (;;) {
        std::uint64_t seen;
        {
            std::lock_guard lock(port_mu_);
            seen = port_events_;
        }
        auto ps = query_port_state(port);
        if (!ps) return ps.error();
        if (ps->active()) return ok_status();
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) {
            return error{ETIMEDOUT, fmt::format("{}: port {} not ACTIVE after {} ms: {} (admin {}, link {})",
                                                dev_->bdf(), port, timeout.count(),
                                                hw::port_state_name(ps->logical),
                                                ps->admin_up ? "up" : "down", ps->oper_up ? "up" : "down")};
        }
        // A PORT_CHANGE event, or a fresh look every 100 ms (an event may predate the EQ).
        std::unique_lock lock(port_mu_);
        port_cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)),
                            [&] { return port_events_ != seen || stop_.load(); });
    }
}

// ---- health ----

void hca::fatal(const std::string& why) {
    const std::string msg = fmt::format("{}: device dead: {}", dev_->bdf(), why);
    cmd_->mark_dead(msg);
    hca_event e{hca_event::fatal, 0, 0, msg};
    e.device_dead = true;
    report(e);
}

void hca::report(hca_event e) {
    if (opts_.on_event) opts_.on_event(e);
}

std::uint32_t hca::fw_version() const noexcept {
    if (attached()) return 0;  // the health buffer is the owner's, not mapped here
    return health_monitor::fw_version(dev_->bar0());
}

std::string hca::fw_version_string() const {
    if (attached()) return attached_.firmware;
    const hw::mmio_window& bar = dev_->bar0();
    const std::byte* seg = bar.base();
    return fmt::format("{}.{}.{}", ifc::get<ifc::initial_seg::fw_rev_major>(seg),
                       ifc::get<ifc::initial_seg::fw_rev_minor>(seg), ifc::get<ifc::initial_seg::fw_rev_subminor>(seg));
}

// ---- teardown ----

status hca::teardown(teardown_mode mode) {
    if (closed_) return ok_status();
    closed_ = true;
    {
        // From here on objects made on this HCA send no commands (a destroy in flight
        // finishes first).
        std::unique_lock lock(link_->mu);
        link_->owner = nullptr;
        objects_at_close_ = link_->objects.load();
    }
    stop_.store(true);
    if (channel_) channel_->stop_events();
    if (pages_) pages_->stop();
    if (eqs_) eqs_->stop();
    if (!cmd_) return ok_status();
    cmd_->use_events(false);  // polling from here on: the EQs go away
    status result = ok_status();
    auto keep_first = [&](status s) {
        if (!s && result) result = std::move(s);
    };
    if (dead()) {
        keep_first(error{ENODEV, "teardown skipped: the device is dead"});
    } else if (mode == teardown_mode::fast && ifc::get<ifc::cmd_hca_cap::fast_teardown>(caps_cur_.data())) {
        keep_first(fast_teardown());
    } else {
        // Objects still alive hold the EQs and the UAR; TEARDOWN_HCA releases them all
        // (as it does for a process that exits without cleaning up).
        if (objects_at_close_ == 0) {
            if (eqs_) keep_first(eqs_->destroy());
            std::vector<std::uint32_t> uars;
            if (bf_) uars = bf_->uars();
            if (uar_allocated_) uars.push_back(uar_);
            for (std::uint32_t uar : uars) {
                auto in = command<ifc::dealloc_uar_in>(cmd_opcode::DEALLOC_UAR);
                ifc::set<ifc::dealloc_uar_in::uar>(in.data(), uar);
                if (auto r = cmd_->exec(in, 16); !r) keep_first(r.error());
            }
        }
        if (auto r = cmd_->exec(command<ifc::teardown_hca_in>(cmd_opcode::TEARDOWN_HCA), 16); !r) {
            keep_first(r.error());
        }
        if (pages_) keep_first(pages_->reclaim_all());
        if (auto r = cmd_->exec(command<ifc::disable_hca_in>(cmd_opcode::DISABLE_HCA), 16); !r) {
            keep_first(r.error());
        }
    }
    trace_at_close_ = cmd_->trace();
    cmd_.reset();
    // The DMA memory (queue, mailboxes, EQs, firmware pages) is unmapped as the buffers
    // go. The page pool, EQs and BlueFlame allocator stay (idle, their threads stopped)
    // until the HCA goes, so that pages_given() still tells what the firmware kept.
    return result;
}

// PRM §"Fast Teardown": TEARDOWN_HCA(PREPARE_FAST_TEARDOWN), then the driver disables the
// NIC interface in the initialization segment and waits until the device says it is
// disabled. The device stops all DMA; its pages are not handed back one by one.
status hca::fast_teardown() {
    auto in = command<ifc::teardown_hca_in>(cmd_opcode::TEARDOWN_HCA, 0);
    ifc::set<ifc::teardown_hca_in::profile>(in.data(), op_mod(hw::teardown_hca_profile::PREPARE_FAST_TEARDOWN));
    auto r = cmd_->exec(in, 16);
    if (!r) return r.error();
    if (ifc::get<ifc::teardown_hca_out::state>(r->data()) == static_cast<std::uint32_t>(hw::teardown_hca_state::FAIL)) {
        return error{EIO, fmt::format("{}: fast teardown refused by the firmware (FORCE_CLOSE_FAILED)", dev_->bdf())};
    }
    const hw::mmio_window& bar = dev_->bar0();
    constexpr auto kDisabled = static_cast<std::uint32_t>(hw::nic_interface::DISABLED);
    const std::uint32_t lo = bar.read32_be(seg::nic_interface);
    bar.write32_be(seg::nic_interface, (lo & hw::cmdq_addr_l_mask) | (kDisabled << hw::nic_interface_shift));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (((bar.read32_be(seg::nic_interface) >> hw::nic_interface_shift) & hw::nic_interface_mask) != kDisabled) {
        if (std::chrono::steady_clock::now() > deadline) {
            return error{ETIMEDOUT, fmt::format("{}: NIC interface not disabled 2 s after fast teardown", dev_->bdf())};
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // The device no longer touches its pages: they go back to us without MANAGE_PAGES.
    // The command interface is disabled too; it is the device's again after a reset.
    pages_->forget_given();
    return ok_status();
}

}  // namespace cxv::driver
