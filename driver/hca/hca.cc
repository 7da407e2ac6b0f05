#include "driver/hca/hca.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "hw/barrier.h"
#include "hw/cmd_values.h"
#include "hw/doorbell.h"
#include "hw/ifc.h"
#include "hw/init_seg.h"
#include "hw/opcodes.h"
#include "hw/registers.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kBlock = std::size_t{2} << 20;  // firmware pages come from 2 MiB blocks
constexpr unsigned kMaxPasPerCommand = 512;
// More firmware memory than any ConnectX asks for (4 GiB): a larger request is a reply
// gone wrong, not a reason to exhaust the host.
constexpr std::uint32_t kMaxFirmwarePages = 1u << 20;
constexpr unsigned kEqLog = 8;                          // 256 EQEs of 64 bytes
namespace seg = hw::init_seg_offset;
constexpr std::uint16_t cap_op_mod(hw::hca_cap_mode m) { return hw::hca_cap_op_mod(hw::hca_cap_type::GENERAL, m); }
template <typename E>
constexpr std::uint16_t op_mod(E v) { return static_cast<std::uint16_t>(v); }
constexpr std::uint16_t reg(hw::reg_id id) { return static_cast<std::uint16_t>(id); }
constexpr std::uint16_t reg_op(hw::access_reg_op_mod m) { return static_cast<std::uint16_t>(m); }

}  // namespace

struct hca::page_block {
    vfio::dma_buffer mem;
    std::vector<std::uint64_t> free;  // page IOVAs not given
};

hca::hca(std::unique_ptr<vfio::device> dev, const options& o) : dev_(std::move(dev)), opts_(o) {
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

hca::~hca() { (void)teardown(teardown_mode::graceful); }

status hca::close(teardown_mode mode) { return teardown(mode); }

status hca::bring_up() {
    const hw::mmio_window& bar = dev_->bar0();
    auto wait_init = [&](const char* when) -> status {
        const auto deadline = std::chrono::steady_clock::now() + opts_.init_timeout;
        while (bar.read32_be(seg::initializing) & hw::init_seg_initializing_bit) {
            if (std::chrono::steady_clock::now() > deadline) {
                return error{EBUSY, fmt::format("{}: firmware still initializing {} after {} ms", dev_->bdf(),
                                                when, opts_.init_timeout.count())};
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        return ok_status();
    };
    if (auto s = wait_init("before the command queue"); !s) return s;
    auto q = cmd_queue::create(*dev_, opts_.cmd);
    if (!q) return q.error();
    cmd_ = std::move(q).value();
    if (auto s = wait_init("after the command queue"); !s) return s;

    auto run = [&](std::vector<std::byte> in, std::size_t olen) { return cmd_->exec(in, olen); };
    if (auto r = run(command<ifc::enable_hca_in>(cmd_opcode::ENABLE_HCA), 16); !r) return r.error();
    // ISSI 1 is what this driver speaks (PRM "ISSI"); a device offering only 0 is too old.
    auto issi = run(command<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI), ifc::query_issi_out::size_bytes);
    if (!issi) return issi.error();
    if (!(ifc::get<ifc::query_issi_out::supported_issi_dw0>(issi->data()) & 2)) {
        return error{EOPNOTSUPP, fmt::format("{}: firmware does not support ISSI 1", dev_->bdf())};
    }
    auto set_issi = command<ifc::set_issi_in>(cmd_opcode::SET_ISSI);
    ifc::set<ifc::set_issi_in::current_issi>(set_issi.data(), 1);
    if (auto r = run(set_issi, 16); !r) return r.error();

    auto pages = [&](hw::query_pages_op_mod which) -> status {
        auto qp = run(command<ifc::query_pages_in>(cmd_opcode::QUERY_PAGES, op_mod(which)), 16);
        if (!qp) return qp.error();
        function_id_ = static_cast<std::uint16_t>(ifc::get<ifc::query_pages_out::function_id>(qp->data()));
        const auto n = static_cast<std::int32_t>(ifc::get<ifc::query_pages_out::num_pages>(qp->data()));
        return give_pages(n);
    };
    if (auto s = pages(hw::query_pages_op_mod::BOOT_PAGES); !s) return s;

    auto endian = command<ifc::access_register_in>(cmd_opcode::ACCESS_REG, reg_op(hw::access_reg_op_mod::WRITE), 16);
    ifc::set<ifc::access_register_in::register_id>(endian.data(), reg(hw::reg_id::HOST_ENDIANNESS));
    if (auto r = run(endian, ifc::access_register_out::size_bytes + 16); !r) return r.error();

    auto query_caps = [&](std::uint16_t op_mod, std::vector<std::byte>& into) -> status {
        auto r = run(command<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, op_mod), ifc::query_hca_cap_out::size_bytes);
        if (!r) return r.error();
        const std::byte* cap = ifc::at<ifc::query_hca_cap_out::capability>(r->data());
        into.assign(cap, cap + ifc::cmd_hca_cap::size_bytes);
        return ok_status();
    };
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
    auto uar = run(command<ifc::alloc_uar_in>(cmd_opcode::ALLOC_UAR), 16);
    if (!uar) return uar.error();
    uar_ = ifc::get<ifc::alloc_uar_out::uar>(uar->data());
    uar_allocated_ = true;
    if (auto s = check_uar(uar_); !s) return s;
    return create_eqs();
}

// ---- firmware pages ----

status hca::give_pages(std::int32_t n) {
    if (n < 0) return take_pages(static_cast<std::uint32_t>(-static_cast<std::int64_t>(n)), nullptr);
    if (static_cast<std::uint32_t>(n) > kMaxFirmwarePages) {
        return error{EPROTO, fmt::format("{}: the firmware asks for {} pages ({} MiB): not believed", dev_->bdf(), n,
                                         static_cast<std::uint64_t>(n) * kPage >> 20)};
    }
    // MANAGE_PAGES(GIVE) is sent even for 0 pages: the firmware expects the answer.
    std::uint32_t left = static_cast<std::uint32_t>(n);
    do {
        const std::uint32_t batch = std::min(left, kMaxPasPerCommand);
        std::vector<std::uint64_t> list;
        {
            std::lock_guard lock(pages_mu_);
            for (auto& b : blocks_) {
                while (list.size() < batch && !b->free.empty()) {
                    list.push_back(b->free.back());
                    b->free.pop_back();
                    given_[list.back()] = b.get();
                }
            }
        }
        while (list.size() < batch) {
            auto mem = dev_->alloc_dma(kBlock, kBlock);
            if (!mem) return mem.error();
            auto b = std::make_unique<page_block>();
            b->mem = std::move(mem).value();
            for (std::size_t off = kBlock; off > 0; off -= kPage) b->free.push_back(b->mem.iova() + off - kPage);
            std::lock_guard lock(pages_mu_);
            while (list.size() < batch && !b->free.empty()) {
                list.push_back(b->free.back());
                b->free.pop_back();
                given_[list.back()] = b.get();
            }
            blocks_.push_back(std::move(b));
        }
        auto in = command<ifc::manage_pages_in>(cmd_opcode::MANAGE_PAGES, op_mod(hw::manage_pages_op_mod::ALLOCATION_SUCCESS), list.size() * 8);
        ifc::set<ifc::manage_pages_in::function_id>(in.data(), function_id_);
        ifc::set<ifc::manage_pages_in::input_num_entries>(in.data(), static_cast<std::uint32_t>(list.size()));
        for (std::size_t i = 0; i < list.size(); ++i) ifc::set<ifc::manage_pages_in::pas>(in.data(), i, list[i]);
        if (auto r = cmd_->exec(in, 16); !r) {
            std::lock_guard lock(pages_mu_);
            for (auto iova : list) {
                given_.at(iova)->free.push_back(iova);
                given_.erase(iova);
            }
            return r.error();
        }
        left -= batch;
    } while (left > 0);
    return ok_status();
}

status hca::take_pages(std::uint32_t n, std::uint32_t* got) {
    std::uint32_t total = 0;
    while (n > 0) {
        const std::uint32_t batch = std::min(n, kMaxPasPerCommand);
        auto in = command<ifc::manage_pages_in>(cmd_opcode::MANAGE_PAGES, op_mod(hw::manage_pages_op_mod::HCA_RETURN_PAGES));
        ifc::set<ifc::manage_pages_in::function_id>(in.data(), function_id_);
        ifc::set<ifc::manage_pages_in::input_num_entries>(in.data(), batch);
        auto r = cmd_->exec(in, ifc::manage_pages_out::size_bytes + std::size_t{batch} * 8);
        if (!r) return r.error();
        const std::uint32_t back = ifc::get<ifc::manage_pages_out::output_num_entries>(r->data());
        if (back > batch) {
            return error{EPROTO, fmt::format("{}: MANAGE_PAGES returned {} pages for {}", dev_->bdf(), back, batch)};
        }
        std::lock_guard lock(pages_mu_);
        for (std::uint32_t i = 0; i < back; ++i) {
            const std::uint64_t iova = ifc::get<ifc::manage_pages_out::pas>(r->data(), i);
            auto it = given_.find(iova);
            if (it == given_.end()) {
                return error{EPROTO, fmt::format("{}: firmware returned page 0x{:x} it was never given",
                                                 dev_->bdf(), iova)};
            }
            it->second->free.push_back(iova);
            given_.erase(it);
        }
        total += back;
        if (back < batch) break;  // the firmware has no more to give back
        n -= batch;
    }
    if (got) *got = total;
    return ok_status();
}

status hca::reclaim_all_pages() {
    for (;;) {
        const std::size_t left = pages_given();
        if (left == 0) return ok_status();
        std::uint32_t got = 0;
        if (auto s = take_pages(static_cast<std::uint32_t>(left), &got); !s) return s;
        if (got == 0) {
            return error{EBUSY, fmt::format("{}: firmware keeps {} pages after teardown", dev_->bdf(), left)};
        }
    }
}

std::size_t hca::pages_given() const {
    std::lock_guard lock(pages_mu_);
    return given_.size();
}

// ---- event queues ----

status hca::create_eqs() {
    std::uint64_t async = 0;
    for (auto t : {hw::event_type::CMD, hw::event_type::PAGE_REQUEST, hw::event_type::PORT_CHANGE,
                   hw::event_type::CQ_ERROR, hw::event_type::WQ_CATAS_ERROR, hw::event_type::WQ_INVAL_REQ_ERROR,
                   hw::event_type::WQ_ACCESS_ERROR, hw::event_type::SRQ_CATAS_ERROR,
                   hw::event_type::SRQ_RQ_LIMIT, hw::event_type::SRQ_LAST_WQE, hw::event_type::INTERNAL_ERROR}) {
        async |= std::uint64_t{1} << static_cast<unsigned>(t);
    }
    if (auto s = create_eq(async_, 0, async); !s) return s;
    // Completion events name no type in the mask: a CQ chooses its EQ (cqc.c_eqn).
    if (auto s = create_eq(comp_, dev_->msix_count() > 1 ? 1 : 0, 0); !s) return s;
    cmd_->use_events(true);
    next_health_ = std::chrono::steady_clock::now();
    last_health_ = dev_->bar0().read32_be(seg::health_counter) & hw::health_counter_mask;
    events_ = std::thread([this] { event_loop(); });
    pages_ = std::thread([this] { page_worker(); });
    return ok_status();
}

status hca::create_eq(event_queue& eq, unsigned vector, std::uint64_t events) {
    auto fd = dev_->msix_eventfd(vector);
    if (!fd) return fd.error();
    eq.fd = fd.value();
    const std::size_t bytes = (std::size_t{1} << kEqLog) * ifc::eqe::size_bytes;
    auto buf = dev_->alloc_dma(bytes, bytes);
    if (!buf) return buf.error();
    eq.buf = std::move(buf).value();
    // Every EQE starts owned by the device: owner 1 is "not yet written" on the first pass.
    for (std::size_t i = 0; i < (std::size_t{1} << kEqLog); ++i) {
        ifc::set<ifc::eqe::owner>(eq.buf.data() + i * ifc::eqe::size_bytes, 1);
    }
    auto in = command<ifc::create_eq_in>(cmd_opcode::CREATE_EQ, 0, 8);
    std::byte* eqc = ifc::at<ifc::create_eq_in::eq_context_entry>(in.data());
    ifc::set<ifc::eqc::log_eq_size>(eqc, kEqLog);
    ifc::set<ifc::eqc::uar_page>(eqc, uar_);
    ifc::set<ifc::eqc::intr>(eqc, vector);
    ifc::set<ifc::eqc::log_page_size>(eqc, static_cast<std::uint32_t>(std::countr_zero(bytes)) - 12);
    ifc::set<ifc::create_eq_in::event_bitmask>(in.data(), 0, events);
    ifc::set<ifc::create_eq_in::pas>(in.data(), 0, eq.buf.iova());
    auto r = cmd_->exec(in, 16);
    if (!r) return r.error();
    eq.n = static_cast<std::uint8_t>(ifc::get<ifc::create_eq_out::eq_number>(r->data()));
    eq.created = true;
    arm_eq(eq);
    return ok_status();
}

void hca::arm_eq(const event_queue& eq) {
    // UAR + 0x40: EQ number and consumer index, and arm for the next event.
    hw::to_device();
    dev_->bar0().write32_be(std::size_t{uar_} * hw::uar_page_size + hw::uar_eq_doorbell_arm,
                            hw::eq_doorbell_value(eq.n, eq.ci));
}

bool hca::process_eq(event_queue& eq) {
    bool any = false;
    const std::uint32_t mask = (1u << kEqLog) - 1;
    for (;;) {
        std::byte* e = eq.buf.data() + (eq.ci & mask) * ifc::eqe::size_bytes;
        // Valid when the owner bit equals the pass parity (PRM "Event Queue").
        if (ifc::get<ifc::eqe::owner>(e) != ((eq.ci >> kEqLog) & 1)) break;
        hw::from_device();
        handle_eqe(e);
        ++eq.ci;
        any = true;
    }
    if (any) arm_eq(eq);
    return any;
}

void hca::handle_eqe(const std::byte* e) {
    const auto type = static_cast<hw::event_type>(ifc::get<ifc::eqe::event_type>(e));
    const std::byte* data = ifc::at<ifc::eqe::event_data>(e);
    switch (type) {
    case hw::event_type::COMP:
        if (opts_.on_completion) opts_.on_completion(ifc::get<ifc::comp_event::cq_number>(data));
        break;
    case hw::event_type::CMD:
        cmd_->complete(ifc::get<ifc::cmd_inter_comp_event::command_completion_vector>(data));
        break;
    case hw::event_type::PAGE_REQUEST: {
        std::lock_guard lock(work_mu_);
        page_work_.push_back(static_cast<std::int32_t>(ifc::get<ifc::pages_req_event::num_pages>(data)));
        work_cv_.notify_one();
        break;
    }
    case hw::event_type::PORT_CHANGE: {
        const auto sub = static_cast<hw::port_change_subtype>(ifc::get<ifc::eqe::event_sub_type>(e));
        const unsigned port = ifc::get<ifc::port_state_change_event::port_num>(data);
        hca_event ev{hca_event::port_other, port, 0, std::string(hw::name(sub))};
        if (sub == hw::port_change_subtype::ACTIVE) ev.what = hca_event::port_up;
        if (sub == hw::port_change_subtype::DOWN) ev.what = hca_event::port_down;
        if (sub == hw::port_change_subtype::INITIALIZED) ev.what = hca_event::port_init;
        report(std::move(ev));
        {
            std::lock_guard lock(port_mu_);
            ++port_events_;
        }
        port_cv_.notify_all();
        break;
    }
    case hw::event_type::INTERNAL_ERROR:
        fatal("the device reported an internal error event");
        break;
    case hw::event_type::CQ_ERROR:
        report({hca_event::queue_error, 0, ifc::get<ifc::cq_error::cqn>(data),
                fmt::format("{} syndrome 0x{:x}", hw::name(type), ifc::get<ifc::cq_error::syndrome>(data))});
        break;
    default:
        // QP/SRQ affiliated events carry the queue number in the same place.
        report({hca_event::queue_error, 0, ifc::get<ifc::qp_events::qpn_rqn_sqn>(data), std::string(hw::name(type))});
        break;
    }
}

void hca::event_loop() {
    while (!stop_.load(std::memory_order_acquire)) {
        pollfd p[2] = {{async_.fd, POLLIN, 0}, {comp_.fd, POLLIN, 0}};
        const nfds_t n = comp_.fd == async_.fd ? 1 : 2;
        if (::poll(p, n, 50) > 0) {
            for (nfds_t i = 0; i < n; ++i) {
                std::uint64_t count;
                if (p[i].revents & POLLIN) (void)!::read(p[i].fd, &count, sizeof count);
            }
        }
        process_eq(async_);
        process_eq(comp_);
        check_health(std::chrono::steady_clock::now());
    }
}

// ---- BlueFlame registers ----

result<hca::bf_reg> hca::alloc_bf() {
    std::lock_guard lock(bf_mu_);
    if (bf_free_.empty()) {
        auto r = cmd_->exec(command<ifc::alloc_uar_in>(cmd_opcode::ALLOC_UAR), 16);
        if (!r) return r.error();
        const std::uint32_t uar = ifc::get<ifc::alloc_uar_out::uar>(r->data());
        bf_uars_.push_back(uar);
        if (auto s = check_uar(uar); !s) return s.error();
        // The registers fill the second half of the UAR page (PRM "UAR Page Format"),
        // 2^log_bf_reg_size bytes each: 64 bytes at least, the half page at most.
        const unsigned log_size = ifc::get<ifc::cmd_hca_cap::log_bf_reg_size>(caps_cur_.data());
        if (log_size < 6 || log_size > 11) {
            return error{EPROTO, fmt::format("{}: BlueFlame registers of 2^{} bytes do not fit a UAR page",
                                             dev_->bdf(), log_size)};
        }
        const std::size_t size = std::size_t{1} << log_size;
        for (std::size_t off = hw::uar_page_size - size; off >= hw::uar_bf_offset; off -= size) {
            bf_free_.push_back({uar, off, size});
        }
    }
    const bf_reg r = bf_free_.back();
    bf_free_.pop_back();
    return r;
}

status hca::check_uar(std::uint32_t uar) const {
    if ((std::uint64_t{uar} + 1) * hw::uar_page_size > dev_->bar0().size()) {
        return error{EPROTO, fmt::format("{}: the firmware gave UAR {}, beyond BAR0 ({} bytes)", dev_->bdf(), uar,
                                         dev_->bar0().size())};
    }
    return ok_status();
}

void hca::free_bf(const bf_reg& r) {
    std::lock_guard lock(bf_mu_);
    bf_free_.push_back(r);
}

// ---- ports ----

bool hca::ethernet() const noexcept { return ifc::get<ifc::cmd_hca_cap::port_type>(caps_cur_.data()) == static_cast<std::uint32_t>(hw::port_type::ETHERNET); }

result<std::vector<std::byte>> hca::read_port_reg(unsigned port, hw::reg_id id, std::size_t size) {
    auto in = command<ifc::access_register_in>(cmd_opcode::ACCESS_REG, reg_op(hw::access_reg_op_mod::READ), size);
    ifc::set<ifc::access_register_in::register_id>(in.data(), reg(id));
    std::byte* r = ifc::at<ifc::access_register_in::register_data>(in.data());
    ifc::set<ifc::pmtu_reg::local_port>(r, port);  // local_port is at the same place in every port register
    auto out = cmd_->exec(in, ifc::access_register_out::size_bytes + size);
    if (!out) return out.error();
    return std::vector<std::byte>(out->begin() + ifc::access_register_out::size_bytes, out->end());
}

result<hca::port_info> hca::query_port(unsigned port) {
    port_info pi;
    pi.ethernet = ethernet();
    auto paos = read_port_reg(port, hw::reg_id::PAOS, ifc::paos_reg::size_bytes);
    if (!paos) return paos.error();
    pi.up = ifc::get<ifc::paos_reg::oper_status>(paos->data()) == static_cast<std::uint32_t>(hw::port_status::UP);
    // PMTU: the operational MTU in bytes, as the QPC encodes it (RoCE headers taken off).
    auto pmtu = read_port_reg(port, hw::reg_id::PMTU, ifc::pmtu_reg::size_bytes);
    if (!pmtu) return pmtu.error();
    std::uint32_t bytes = ifc::get<ifc::pmtu_reg::oper_mtu>(pmtu->data());
    if (pi.ethernet) bytes = bytes > hw::roce_header_overhead ? bytes - hw::roce_header_overhead : 0;
    for (std::uint32_t m = 1; m <= 5; ++m) {
        if ((128u << m) <= bytes) pi.max_mtu = m;
    }
    if (pi.ethernet) return pi;  // RoCE addresses come from the GID table the driver programs
    auto q = command<ifc::query_hca_vport_context_in>(cmd_opcode::QUERY_HCA_VPORT_CONTEXT);
    ifc::set<ifc::query_hca_vport_context_in::port_num>(q.data(), port);
    auto out = cmd_->exec(q, ifc::query_hca_vport_context_out::size_bytes);
    if (!out) return out.error();
    const std::byte* ctx = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(out->data());
    pi.lid = static_cast<std::uint16_t>(ifc::get<ifc::hca_vport_context::lid>(ctx));
    auto g = command<ifc::query_hca_vport_gid_in>(cmd_opcode::QUERY_HCA_VPORT_GID);
    ifc::set<ifc::query_hca_vport_gid_in::port_num>(g.data(), port);
    auto gout = cmd_->exec(g, ifc::query_hca_vport_gid_out::size_bytes + 16);
    if (!gout) return gout.error();
    std::memcpy(pi.gid, gout->data() + ifc::query_hca_vport_gid_out::size_bytes, 16);
    return pi;
}

result<hca::port_state> hca::query_port_state(unsigned port) {
    port_state ps;
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
            static constexpr const char* names[] = {"?", "Down", "Init", "Armed", "Active"};
            return error{ETIMEDOUT, fmt::format("{}: port {} not ACTIVE after {} ms: {} (admin {}, link {})",
                                                dev_->bdf(), port, timeout.count(),
                                                names[ps->logical < 5 ? ps->logical : 0],
                                                ps->admin_up ? "up" : "down", ps->oper_up ? "up" : "down")};
        }
        // A PORT_CHANGE event, or a fresh look every 100 ms (an event may predate the EQ).
        std::unique_lock lock(port_mu_);
        port_cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)),
                            [&] { return port_events_ != seen || stop_.load(); });
    }
}

void hca::page_worker() {
    for (;;) {
        std::int32_t n = 0;
        {
            std::unique_lock lock(work_mu_);
            work_cv_.wait(lock, [&] { return stop_.load() || !page_work_.empty(); });
            if (stop_.load()) return;
            n = page_work_.front();
            page_work_.erase(page_work_.begin());
        }
        if (auto s = give_pages(n); !s && !dead()) {
            report({hca_event::fatal, 0, 0, "page request not served: " + s.error().message});
        }
    }
}

// ---- health ----

void hca::check_health(std::chrono::steady_clock::time_point now) {
    if (dead() || now < next_health_) return;
    next_health_ = now + opts_.health_period;
    const hw::mmio_window& bar = dev_->bar0();
    const std::byte* health = bar.base() + seg::health_buffer;
    if (bar.read32_be(seg::health_fw_version) == 0xffffffffu) {
        return fatal("the function does not answer (reads all ones): removed or reset");
    }
    const auto nic = static_cast<hw::nic_interface>((bar.read32_be(seg::nic_interface) >> hw::nic_interface_shift) &
                                                    hw::nic_interface_mask);
    if (nic == hw::nic_interface::DISABLED || nic == hw::nic_interface::SW_RESET) {
        return fatal(fmt::format("NIC interface {}", nic == hw::nic_interface::DISABLED ? "disabled" : "in SW reset"));
    }
    if (const auto synd = ifc::get<ifc::health_buffer::synd>(health); synd != 0) {
        return fatal(fmt::format("health syndrome 0x{:x} (ext 0x{:x})", synd,
                                 ifc::get<ifc::health_buffer::ext_synd>(health)));
    }
    const std::uint32_t counter = bar.read32_be(seg::health_counter) & hw::health_counter_mask;
    if (counter == last_health_) {
        if (++health_misses_ >= opts_.health_misses) {
            return fatal(fmt::format("health counter stalled at {} for {} checks", counter, health_misses_));
        }
    } else {
        health_misses_ = 0;
        last_health_ = counter;
    }
}

void hca::fatal(const std::string& why) {
    const std::string msg = fmt::format("{}: device dead: {}", dev_->bdf(), why);
    cmd_->mark_dead(msg);
    report({hca_event::fatal, 0, 0, msg});
}

void hca::report(hca_event e) {
    if (opts_.on_event) opts_.on_event(e);
}

std::uint32_t hca::fw_version() const noexcept {
    return dev_->bar0().read32_be(seg::health_fw_version);
}

std::string hca::fw_version_string() const {
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
    if (events_.joinable() || pages_.joinable()) {
        stop_.store(true);
        work_cv_.notify_all();
        if (pages_.joinable()) pages_.join();
        if (events_.joinable()) events_.join();
    }
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
            for (event_queue* eq : {&comp_, &async_}) {
                if (!eq->created) continue;
                auto in = command<ifc::destroy_eq_in>(cmd_opcode::DESTROY_EQ);
                ifc::set<ifc::destroy_eq_in::eq_number>(in.data(), eq->n);
                if (auto r = cmd_->exec(in, 16); !r) keep_first(r.error());
            }
            std::vector<std::uint32_t> uars = bf_uars_;
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
        keep_first(reclaim_all_pages());
        if (auto r = cmd_->exec(command<ifc::disable_hca_in>(cmd_opcode::DISABLE_HCA), 16); !r) {
            keep_first(r.error());
        }
    }
    trace_at_close_ = cmd_->trace();
    cmd_.reset();
    // The DMA memory (queue, mailboxes, EQs, firmware pages) is unmapped as the buffers go.
    return result;
}

// PRM "Fast Teardown": TEARDOWN_HCA(PREPARE_FAST_TEARDOWN), then the driver disables the
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
    std::lock_guard lock(pages_mu_);
    for (auto& [iova, block] : given_) block->free.push_back(iova);
    given_.clear();
    return ok_status();
}

}  // namespace cxv::driver
