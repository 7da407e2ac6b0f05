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
};

}  // namespace cxv::driver
