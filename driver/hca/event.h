// What the application hears about an HCA (from its event thread).
#pragma once

#include <cstdint>
#include <string>

namespace cxv::driver {

struct hca_event {
    // port_up: ACTIVE; port_init: InfiniBand Init (link up, not yet configured by the SM).
    enum kind { port_up, port_down, port_init, port_other, fatal, queue_error } what;
    unsigned port = 0;
    std::uint32_t object = 0;  // CQ or QP number for queue errors
    std::string detail;
    // Queue errors: the EQE's event_type (hw::event_type, PRM "Events"), which says
    // whether `object` is a CQ (CQ_ERROR), an SRQ (SRQ_CATAS_ERROR, SRQ_RQ_LIMIT) or a QP.
    std::uint8_t event_type = 0;
    // A fatal event after which the device completes nothing more (the command interface
    // dead: health, internal error, the owning daemon gone), as opposed to a fatal report
    // the device lives through (a page request not served). The API flushes on it only.
    bool device_dead = false;
};

}  // namespace cxv::driver
