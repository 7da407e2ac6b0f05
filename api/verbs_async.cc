#include "api/verbs_async.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string_view>

#include "hw/opcodes.h"

namespace cxv::api {

verbs_async::verbs_async() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE)) {}

void verbs_async::start(std::uint32_t active_ports) {
    std::lock_guard lock(mu_);
    started_ = true;
    active_ports_ = active_ports;
}

void verbs_async::add(std::uint32_t cqn, ibv_cq* cq) {
    std::lock_guard lock(mu_);
    cqs_[cqn] = cq;
}
void verbs_async::add(std::uint32_t qpn, ibv_qp* qp) {
    std::lock_guard lock(mu_);
    qps_[qpn] = qp;
}
void verbs_async::add(std::uint32_t srqn, ibv_srq* srq) {
    std::lock_guard lock(mu_);
    srqs_[srqn] = srq;
}
// An object going away: no event names it from now on, and those queued but not yet
// taken are dropped, as the kernel's uverbs drops an object's undelivered events when it
// is destroyed (their count stays on the eventfd: get() passes over it).
void verbs_async::remove_cq(std::uint32_t cqn) {
    std::lock_guard lock(mu_);
    if (const auto it = cqs_.find(cqn); it != cqs_.end()) drop_pending(it->second);
    cqs_.erase(cqn);
}
void verbs_async::remove_qp(std::uint32_t qpn) {
    std::lock_guard lock(mu_);
    if (const auto it = qps_.find(qpn); it != qps_.end()) drop_pending(it->second);
    qps_.erase(qpn);
}
void verbs_async::remove_srq(std::uint32_t srqn) {
    std::lock_guard lock(mu_);
    if (const auto it = srqs_.find(srqn); it != srqs_.end()) drop_pending(it->second);
    srqs_.erase(srqn);
}

void verbs_async::drop_pending(const void* object) {
    std::erase_if(pending_, [object](const ibv_async_event& e) {
        // element is a union: a port event's port number is never an object's address.
        return static_cast<const void*>(e.element.qp) == object;
    });
}

void verbs_async::push(const cxv::event& e) {
    ibv_async_event out{};
    std::lock_guard lock(mu_);
    if (!started_ || !fd_) return;
    // The affiliated events' ibv_event_type (ibv_get_async_event(3)) by their PRM event
    // type; what their object is comes from hw::affiliated_object, as the daemon routes.
    const auto verbs_type = [](hw::event_type t) -> std::optional<ibv_event_type> {
        switch (t) {
        case hw::event_type::CQ_ERROR: return IBV_EVENT_CQ_ERR;
        case hw::event_type::WQ_CATAS_ERROR: return IBV_EVENT_QP_FATAL;
        case hw::event_type::WQ_INVAL_REQ_ERROR: return IBV_EVENT_QP_REQ_ERR;
        case hw::event_type::WQ_ACCESS_ERROR: return IBV_EVENT_QP_ACCESS_ERR;
        case hw::event_type::COMM_EST: return IBV_EVENT_COMM_EST;
        case hw::event_type::SQ_DRAINED: return IBV_EVENT_SQ_DRAINED;
        case hw::event_type::SRQ_LAST_WQE: return IBV_EVENT_QP_LAST_WQE_REACHED;
        case hw::event_type::SRQ_CATAS_ERROR: return IBV_EVENT_SRQ_ERR;
        case hw::event_type::SRQ_RQ_LIMIT: return IBV_EVENT_SRQ_LIMIT_REACHED;
        default: return std::nullopt;
        }
    };
    // A port's bit in active_ports_ (0 for a port number past it: never dropped).
    const std::uint32_t port_bit = e.port < 32 ? std::uint32_t{1} << e.port : 0;
    switch (e.what) {
    case cxv::event::port_up:
        if ((active_ports_ & port_bit) != 0) return;  // no change
        active_ports_ |= port_bit;
        out.event_type = IBV_EVENT_PORT_ACTIVE;
        out.element.port_num = static_cast<int>(e.port);
        break;
    case cxv::event::port_down:
        if (port_bit != 0 && (active_ports_ & port_bit) == 0) return;  // no change
        active_ports_ &= ~port_bit;
        out.event_type = IBV_EVENT_PORT_ERR;
        out.element.port_num = static_cast<int>(e.port);
        break;
    case cxv::event::fatal: out.event_type = IBV_EVENT_DEVICE_FATAL; break;
    case cxv::event::queue_error: {
        const auto type = static_cast<hw::event_type>(e.event_type);
        const auto vt = verbs_type(type);
        if (!vt) return;
        out.event_type = *vt;
        switch (hw::affiliated_object(type)) {
        case hw::event_object::cq: {
            const auto it = cqs_.find(e.object);
            if (it == cqs_.end()) return;
            out.element.cq = it->second;
            break;
        }
        case hw::event_object::qp: {
            const auto it = qps_.find(e.object);
            if (it == qps_.end()) return;
            out.element.qp = it->second;
            break;
        }
        case hw::event_object::srq: {
            const auto it = srqs_.find(e.object);
            if (it == srqs_.end()) return;
            out.element.srq = it->second;
            break;
        }
        case hw::event_object::none: return;
        }
        break;
    }
    default: return;  // InfiniBand Init and other port changes: no verbs event
    }
    pending_.push_back(out);
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(fd_.get(), &one, sizeof one);
}

int verbs_async::get(ibv_async_event* out) {
    if (!fd_) {
        errno = EOPNOTSUPP;
        return -1;
    }
    for (;;) {
        std::uint64_t n = 0;
        if (::read(fd_.get(), &n, sizeof n) != sizeof n) {
            if (errno == EINTR) continue;
            return -1;  // EAGAIN on an O_NONBLOCK fd
        }
        std::lock_guard lock(mu_);
        if (pending_.empty()) continue;  // the event of a destroyed object: dropped
        *out = pending_.front();
        pending_.pop_front();
        return 0;
    }
}

}  // namespace cxv::api
