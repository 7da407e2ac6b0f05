#include "tools/cxv/counters.h"

#include <fmt/format.h>

#include "driver/res/q_counter.h"
#include "hw/ifc.h"

namespace cxv::tool {

void print_counters(driver::hca& hca) {
    namespace ifc = hw::ifc;
    const auto* cap = hca.caps().data();
    if (auto v = driver::query_vport_counters(hca)) {
        const bool eth = ifc::get<ifc::cmd_hca_cap::port_type>(cap) == 1;
        const auto& rx_uc = eth ? v->received_eth_unicast : v->received_ib_unicast;
        const auto& tx_uc = eth ? v->transmitted_eth_unicast : v->transmitted_ib_unicast;
        const auto& rx_mc = eth ? v->received_eth_multicast : v->received_ib_multicast;
        const auto& tx_mc = eth ? v->transmitted_eth_multicast : v->transmitted_ib_multicast;
        fmt::print("  vport counters: rx {} packets {} bytes ({} multicast, {} errors), "
                   "tx {} packets {} bytes ({} multicast, {} errors)\n",
                   rx_uc.packets + rx_mc.packets, rx_uc.octets + rx_mc.octets, rx_mc.packets,
                   v->received_errors.packets, tx_uc.packets + tx_mc.packets, tx_uc.octets + tx_mc.octets,
                   tx_mc.packets, v->transmit_errors.packets);
    } else {
        fmt::print("  vport counters: {}\n", v.error().message);
    }
    auto q = driver::q_counter::create(hca);
    if (!q) {
        fmt::print("  Q counters: {}\n", q.error().message);
        return;
    }
    auto values = (*q)->query();
    if (!values) {
        fmt::print("  Q counters: {}\n", values.error().message);
        return;
    }
    fmt::print("  Q counters: {} sets besides the default; set {}:", ifc::get<ifc::cmd_hca_cap::max_qp_cnt>(cap),
               (*q)->id());
#define CXV_PRINT(n) fmt::print(" " #n " {}", values->n);
    CXV_IFC_Q_COUNTERS(CXV_PRINT)
#undef CXV_PRINT
    fmt::print("\n");
}

}  // namespace cxv::tool
