#include "driver/hca/eq.h"

#include <poll.h>
#include <unistd.h>

#include <bit>

#include <fmt/format.h>

#include "hw/barrier.h"
#include "hw/doorbell.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

void dispatch_eqe(const std::byte* e, const eq_handlers& h) {
    const auto type = static_cast<hw::event_type>(ifc::get<ifc::eqe::event_type>(e));
    const std::byte* data = ifc::at<ifc::eqe::event_data>(e);
    auto report = [&](hca_event ev) {
        if (h.event) h.event(std::move(ev));
    };
    switch (type) {
    case hw::event_type::COMP:
        if (h.completion) h.completion(ifc::get<ifc::comp_event::cq_number>(data));
        break;
    case hw::event_type::CMD:
        if (h.command) h.command(ifc::get<ifc::cmd_inter_comp_event::command_completion_vector>(data));
        break;
    case hw::event_type::PAGE_REQUEST:
        if (h.page_request) h.page_request(static_cast<std::int32_t>(ifc::get<ifc::pages_req_event::num_pages>(data)));
        break;
    case hw::event_type::PORT_CHANGE: {
        const auto sub = static_cast<hw::port_change_subtype>(ifc::get<ifc::eqe::event_sub_type>(e));
        const unsigned port = ifc::get<ifc::port_state_change_event::port_num>(data);
        hca_event ev{hca_event::port_other, port, 0, std::string(hw::name(sub))};
        if (sub == hw::port_change_subtype::ACTIVE) ev.what = hca_event::port_up;
        if (sub == hw::port_change_subtype::DOWN) ev.what = hca_event::port_down;
        if (sub == hw::port_change_subtype::INITIALIZED) ev.what = hca_event::port_init;
        report(std::move(ev));
        if (h.port_change) h.port_change();
        break;
    }
    case hw::event_type::INTERNAL_ERROR:
        if (h.fatal) h.fatal("the device reported an internal error event");
        break;
    case hw::event_type::CQ_ERROR:
        report({hca_event::queue_error, 0, ifc::get<ifc::cq_error::cqn>(data),
                fmt::format("{} syndrome 0x{:x}", hw::name(type), ifc::get<ifc::cq_error::syndrome>(data)),
                static_cast<std::uint8_t>(type)});
        break;
    default:
        // QP/SRQ affiliated events carry the queue number in the same place.
        report({hca_event::queue_error, 0, ifc::get<ifc::qp_events::qpn_rqn_sqn>(data), std::string(hw::name(type)),
                static_cast<std::uint8_t>(type)});
        break;
    }
}

status event_queues::create() {
    std::uint64_t async = 0;
    for (auto t : {hw::event_type::CMD, hw::event_type::PAGE_REQUEST, hw::event_type::PORT_CHANGE,
                   hw::event_type::CQ_ERROR, hw::event_type::WQ_CATAS_ERROR, hw::event_type::WQ_INVAL_REQ_ERROR,
                   hw::event_type::WQ_ACCESS_ERROR, hw::event_type::SRQ_CATAS_ERROR,
                   hw::event_type::SRQ_RQ_LIMIT, hw::event_type::SRQ_LAST_WQE, hw::event_type::INTERNAL_ERROR}) {
        async |= std::uint64_t{1} << static_cast<unsigned>(t);
    }
    if (auto s = create_one(async_, 0, async); !s) return s;
    // Completion events name no type in the mask: a CQ chooses its EQ (cqc.c_eqn).
    return create_one(comp_, dev_.msix_count() > 1 ? 1 : 0, 0);
}

status event_queues::create_one(queue& eq, unsigned vector, std::uint64_t events) {
    auto fd = dev_.msix_eventfd(vector);
    if (!fd) return fd.error();
    eq.fd = fd.value();
    const std::size_t bytes = (std::size_t{1} << log_size) * ifc::eqe::size_bytes;
    auto buf = dev_.alloc_dma(bytes, bytes);
    if (!buf) return buf.error();
    eq.buf = std::move(buf).value();
    // Every EQE starts owned by the device: owner 1 is "not yet written" on the first pass.
    for (std::size_t i = 0; i < (std::size_t{1} << log_size); ++i) {
        ifc::set<ifc::eqe::owner>(eq.buf.data() + i * ifc::eqe::size_bytes, 1);
    }
    auto in = command<ifc::create_eq_in>(cmd_opcode::CREATE_EQ, 0, 8);
    std::byte* eqc = ifc::at<ifc::create_eq_in::eq_context_entry>(in.data());
    ifc::set<ifc::eqc::log_eq_size>(eqc, log_size);
    ifc::set<ifc::eqc::uar_page>(eqc, uar_);
    ifc::set<ifc::eqc::intr>(eqc, vector);
    ifc::set<ifc::eqc::log_page_size>(eqc, static_cast<std::uint32_t>(std::countr_zero(bytes)) - 12);
    ifc::set<ifc::create_eq_in::event_bitmask>(in.data(), 0, events);
    ifc::set<ifc::create_eq_in::pas>(in.data(), 0, eq.buf.iova());
    auto r = cmd_.exec(in, 16);
    if (!r) return r.error();
    eq.n = static_cast<std::uint8_t>(ifc::get<ifc::create_eq_out::eq_number>(r->data()));
    eq.created = true;
    arm(eq);
    return ok_status();
}

void event_queues::arm(const queue& eq) {
    // UAR + 0x40 (PRM §"UAR Page Format"): EQ number and consumer index, and arm for the
    // next event.
    hw::to_device();
    dev_.bar0().write32_be(std::size_t{uar_} * hw::uar_page_size + hw::uar_eq_doorbell_arm,
                           hw::eq_doorbell_value(eq.n, eq.ci));
}

bool event_queues::process(queue& eq) {
    bool any = false;
    const std::uint32_t mask = (1u << log_size) - 1;
    for (;;) {
        std::byte* e = eq.buf.data() + (eq.ci & mask) * ifc::eqe::size_bytes;
        // Valid when the owner bit equals the pass parity (PRM §"Event Queue").
        if (ifc::get<ifc::eqe::owner>(e) != ((eq.ci >> log_size) & 1)) break;
        hw::from_device();
        dispatch_eqe(e, handlers_);
        ++eq.ci;
        any = true;
    }
    if (any) arm(eq);
    return any;
}

void event_queues::start(eq_handlers h) {
    handlers_ = std::move(h);
    thread_ = std::thread([this] { loop(); });
}

void event_queues::stop() {
    if (!thread_.joinable()) return;
    stop_.store(true);
    thread_.join();
}

void event_queues::loop() {
    while (!stop_.load(std::memory_order_acquire)) {
        pollfd p[2] = {{async_.fd, POLLIN, 0}, {comp_.fd, POLLIN, 0}};
        const nfds_t n = comp_.fd == async_.fd ? 1 : 2;
        if (::poll(p, n, 50) > 0) {
            for (nfds_t i = 0; i < n; ++i) {
                std::uint64_t count;
                if (p[i].revents & POLLIN) (void)!::read(p[i].fd, &count, sizeof count);
            }
        }
        process(async_);
        process(comp_);
        if (handlers_.tick) handlers_.tick();
    }
}

status event_queues::destroy() {
    status result = ok_status();
    for (queue* eq : {&comp_, &async_}) {
        if (!eq->created) continue;
        auto in = command<ifc::destroy_eq_in>(cmd_opcode::DESTROY_EQ);
        ifc::set<ifc::destroy_eq_in::eq_number>(in.data(), eq->n);
        if (auto r = cmd_.exec(in, 16); !r && result) result = r.error();
    }
    return result;
}

}  // namespace cxv::driver
