#include "driver/res/q_counter.h"

#include <span>

#include "driver/cmd/cmd_queue.h"
#include "hw/ifc.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

result<std::shared_ptr<q_counter>> q_counter::create(hca& h) {
    std::shared_ptr<q_counter> q(new q_counter(h));
    auto r = h.exec(command<ifc::alloc_q_counter_in>(cmd_opcode::ALLOC_Q_COUNTER),
                    ifc::alloc_q_counter_out::size_bytes);
    if (!r) return r.error();
    q->id_ = ifc::get<ifc::alloc_q_counter_out::counter_set_id>(r->data());
    q->created();
    return q;
}

status q_counter::destroy() {
    auto in = command<ifc::dealloc_q_counter_in>(cmd_opcode::DEALLOC_Q_COUNTER);
    ifc::set<ifc::dealloc_q_counter_in::counter_set_id>(in.data(), id_);
    return destroy_with(std::move(in));
}

q_counter::~q_counter() { (void)destroy(); }

result<q_counter_values> q_counter::query(bool clear) {
    using out = ifc::query_q_counter_out;
    auto in = command<ifc::query_q_counter_in>(cmd_opcode::QUERY_Q_COUNTER);
    ifc::set<ifc::query_q_counter_in::counter_set_id>(in.data(), id_);
    ifc::set<ifc::query_q_counter_in::clear>(in.data(), clear ? 1 : 0);
    auto r = owner().exec(in, out::size_bytes);
    if (!r) return r.error();
    q_counter_values v;
#define CXV_GET(n) v.n = ifc::get<out::n>(r->data());
    CXV_IFC_Q_COUNTERS(CXV_GET)
#undef CXV_GET
    return v;
}

result<vport_counters> query_vport_counters(hca& h, bool clear) {
    using out = ifc::query_vport_counter_out;
    auto in = command<ifc::query_vport_counter_in>(cmd_opcode::QUERY_VPORT_COUNTER);
    ifc::set<ifc::query_vport_counter_in::clear>(in.data(), clear ? 1 : 0);
    auto r = h.exec(in, out::size_bytes);
    if (!r) return r.error();
    const auto get = [&](const std::byte* tc) {
        return traffic{ifc::get<ifc::traffic_counter::packets>(tc), ifc::get<ifc::traffic_counter::octets>(tc)};
    };
    const std::byte* o = r->data();
    vport_counters v;
#define CXV_TRAFFIC(n) v.n = get(ifc::at<out::n>(o));
    CXV_IFC_VPORT_TRAFFIC(CXV_TRAFFIC)
#undef CXV_TRAFFIC
    return v;
}

std::vector<std::pair<std::string, std::uint64_t>> named_counters(const vport_counters& v, bool ethernet) {
    struct row {
        const char* name;
        traffic vport_counters::*field;
    };
    using vc = vport_counters;
    static constexpr row eth[] = {
        {"rx_unicast", &vc::received_eth_unicast},       {"rx_multicast", &vc::received_eth_multicast},
        {"rx_broadcast", &vc::received_eth_broadcast},   {"tx_unicast", &vc::transmitted_eth_unicast},
        {"tx_multicast", &vc::transmitted_eth_multicast}, {"tx_broadcast", &vc::transmitted_eth_broadcast},
        {"rx_errors", &vc::received_errors},             {"tx_errors", &vc::transmit_errors}};
    static constexpr row ib[] = {
        {"rx_unicast", &vc::received_ib_unicast},     {"rx_multicast", &vc::received_ib_multicast},
        {"tx_unicast", &vc::transmitted_ib_unicast},  {"tx_multicast", &vc::transmitted_ib_multicast},
        {"rx_errors", &vc::received_errors},          {"tx_errors", &vc::transmit_errors}};
    std::vector<std::pair<std::string, std::uint64_t>> out;
    for (const row& r : ethernet ? std::span<const row>(eth) : std::span<const row>(ib)) {
        out.emplace_back(std::string(r.name) + "_packets", (v.*r.field).packets);
        out.emplace_back(std::string(r.name) + "_bytes", (v.*r.field).octets);
    }
    return out;
}

}  // namespace cxv::driver
