// Two functions' ports on one in-process segment, for the tests of sim/link: port_test
// and subnet_admin_test.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "sim/link/port.h"
#include "sim/wire/neighbour.h"

namespace cxv::sim::link::test {

// Two functions on one in-process segment, with RoCE GID tables as a driver programs
// them: index 0 the link-local GID of the MAC, index 1 the IPv4-mapped address. On
// InfiniBand `a` has LID 1 (the subnet manager's: it hosts the SA) and `b` LID 2, their
// port GUIDs apart.
struct pair {
    using clock_type = std::chrono::steady_clock;
    device_config ca, cb;
    object_tables ta, tb;
    std::unique_ptr<port> a, b;
    std::vector<wire::packet> got_a, got_b;

    explicit pair(const std::string& segment, port_type type = port_type::ETHERNET,
                  device_config::link_faults faults = {}) {
        for (auto* c : {&ca, &cb}) {
            c->port = type;
            c->fabric = segment;
            c->faults = faults;
        }
        cb.mac[5] = 2;
        cb.lid = 2;
        cb.node_guid = ca.node_guid + 0x10;
        program(ta, ca, 1);
        program(tb, cb, 2);
        a = std::move(port::create(ca, ta)).value();
        b = std::move(port::create(cb, tb)).value();
    }
    static void program(object_tables& t, const device_config& c, std::uint8_t host) {
        t.roce_addresses[0].source_l3_address = wire::link_local_gid(c.mac);
        t.roce_addresses[1].source_l3_address = wire::ipv4_mapped_gid({169, 254, 9, host});
    }
    // Both ports poll until nothing happens for a few rounds (at most a second).
    void settle() {
        const auto end = clock_type::now() + std::chrono::seconds(1);
        unsigned quiet = 0;
        while (quiet < 3 && clock_type::now() < end) {
            const auto now = clock_type::now();
            bool any = a->poll(now, [&](wire::packet& p, std::size_t) { got_a.push_back(p); });
            any |= b->poll(now, [&](wire::packet& p, std::size_t) { got_b.push_back(p); });
            quiet = any ? 0 : quiet + 1;
        }
    }
};

}  // namespace cxv::sim::link::test
