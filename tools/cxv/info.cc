// cxv info <bdf>: bring the function up, describe it, tear it down.
#include "tools/cxv/info.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "driver/hca/hca.h"
#include "driver/vfio/vfio.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "tools/cxv/counters.h"

namespace cxv::tool {

namespace ifc = hw::ifc;

namespace {

const char* port_state_name(unsigned s) {
    switch (s) {
    case 1: return "Down";
    case 2: return "Init";
    case 3: return "Armed";
    case 4: return "Active";
    default: return "?";
    }
}

}  // namespace

int print_info(const std::string& bdf) {
    auto dev = driver::vfio::device::open(bdf);
    if (!dev) {
        fmt::print(stderr, "cxv info: {}\n", dev.error().message);
        return EXIT_FAILURE;
    }
    auto h = driver::hca::create(std::move(dev).value());
    if (!h) {
        fmt::print(stderr, "cxv info: bring-up failed: {}\n", h.error().message);
        return EXIT_FAILURE;
    }
    driver::hca& hca = *h.value();
    const std::byte* cap = hca.caps().data();
    using c = ifc::cmd_hca_cap;
    const bool eth = ifc::get<c::port_type>(cap) == 1;
    fmt::print("{}: firmware {}, ISSI 1, {} port(s), {}\n", bdf, hca.fw_version_string(),
               ifc::get<c::num_ports>(cap), eth ? "Ethernet (RoCE)" : "InfiniBand");
    fmt::print("  limits: QPs 2^{} (depth 2^{}), CQs 2^{} (depth 2^{}), SRQs 2^{}, MKeys 2^{}, PDs 2^{}, "
               "EQs 2^{}, message 2^{} bytes\n",
               ifc::get<c::log_max_qp>(cap), ifc::get<c::log_max_qp_sz>(cap), ifc::get<c::log_max_cq>(cap),
               ifc::get<c::log_max_cq_sz>(cap), ifc::get<c::log_max_srq>(cap), ifc::get<c::log_max_mkey>(cap),
               ifc::get<c::log_max_pd>(cap), ifc::get<c::log_max_eq>(cap), ifc::get<c::log_max_msg>(cap));
    fmt::print("  UAR {} (BlueFlame registers 2^{} bytes), async EQ {}, completion EQ {}, firmware pages {}\n",
               hca.uar(), ifc::get<c::log_bf_reg_size>(cap), hca.async_eqn(), hca.comp_eqn(), hca.pages_given());
    for (unsigned port = 1; port <= ifc::get<c::num_ports>(cap); ++port) {
        std::vector<std::byte> in(ifc::query_hca_vport_context_in::size_bytes);
        ifc::set<ifc::query_hca_vport_context_in::opcode>(
            in.data(), static_cast<std::uint32_t>(hw::cmd_opcode::QUERY_HCA_VPORT_CONTEXT));
        ifc::set<ifc::query_hca_vport_context_in::port_num>(in.data(), port);
        auto r = hca.exec(in, ifc::query_hca_vport_context_out::size_bytes);
        if (!r) {
            fmt::print("  port {}: {}\n", port, r.error().message);
            continue;
        }
        const std::byte* v = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(r->data());
        using p = ifc::hca_vport_context;
        fmt::print("  port {}: {}, LID {}, port GUID {:016x}\n", port, port_state_name(ifc::get<p::port_state>(v)),
                   ifc::get<p::lid>(v), ifc::get<p::port_guid>(v));
    }
    print_counters(hca);
    const auto given = hca.pages_given();
    // Teardown: EQ, UAR, TEARDOWN_HCA, every page reclaimed, DISABLE_HCA.
    if (auto s = hca.close(); !s) {
        fmt::print(stderr, "cxv info: teardown: {}\n", s.error().message);
        return EXIT_FAILURE;
    }
    fmt::print("  teardown: {} firmware pages reclaimed, {} left\n", given, hca.pages_given());
    return hca.pages_given() == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

}  // namespace cxv::tool
