// HCA-level firmware flows: state machine, ISSI, pages, capabilities, registers,
// teardown.
#include <algorithm>
#include <chrono>
#include <thread>

#include <doctest/doctest.h>

#include "tests/sim/linux_ifc.h"
#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;
using namespace std::chrono_literals;

TEST_CASE("the PRM bring-up order works end to end") {
    H h;
    REQUIRE(h.bring_up());
    CHECK(h.dev().state() == sim::hca_state::initialized);
    CHECK(h.dev().pages_owned() == h.dev().config().boot_pages + h.dev().config().init_pages);
}

TEST_CASE("commands before ENABLE_HCA are refused with BAD_SYS_STATE") {
    H h;
    boot(h);
    for (auto op : {cmd_opcode::INIT_HCA, cmd_opcode::QUERY_ISSI, cmd_opcode::QUERY_HCA_CAP,
                    cmd_opcode::ALLOC_PD}) {
        auto r = h.simple(op);
        CHECK_MESSAGE(r.status == cmd_status::BAD_SYS_STATE, hw::name(op));
        CHECK(r.synd() == cmd_syndrome::HCA_NOT_ENABLED);
    }
}

TEST_CASE("objects need INIT_HCA; INIT_HCA needs its pages; nothing twice") {
    H h;
    boot_and_enable(h);
    auto pd = h.simple(cmd_opcode::ALLOC_PD);
    CHECK(pd.status == cmd_status::BAD_SYS_STATE);
    CHECK(pd.synd() == cmd_syndrome::HCA_NOT_INITIALIZED);

    auto early = h.init_hca();
    CHECK(early.status == cmd_status::BAD_SYS_STATE);
    CHECK(early.synd() == cmd_syndrome::PAGES_OUTSTANDING);
    REQUIRE(h.give_pages(1).status == cmd_status::OK);
    CHECK(h.init_hca().synd() == cmd_syndrome::PAGES_OUTSTANDING);
    REQUIRE(h.give_pages(2).status == cmd_status::OK);
    REQUIRE(h.init_hca().status == cmd_status::OK);
    CHECK(h.init_hca().synd() == cmd_syndrome::HCA_ALREADY_INITIALIZED);
    CHECK(h.set_issi(0).synd() == cmd_syndrome::HCA_ALREADY_INITIALIZED);
    CHECK(h.simple(cmd_opcode::ALLOC_PD).status == cmd_status::OK);
}

TEST_CASE("SET_ISSI accepts ISSI 0 and 1 only") {
    H h;
    boot_and_enable(h);
    auto r = h.set_issi(2);
    CHECK(r.status == cmd_status::BAD_PARAM);
    CHECK(r.synd() == cmd_syndrome::BAD_ISSI);
    CHECK(h.set_issi(1).status == cmd_status::OK);
    auto q = h.exec(H::input<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI), 112);
    CHECK(ifc::get<ifc::query_issi_out::current_issi>(q.out.data()) == 1);
}

TEST_CASE("MANAGE_PAGES: misaligned, duplicate and short page lists change nothing") {
    H h;
    boot_and_enable(h);
    auto& mem = h.alloc(4 * 4096);
    auto give = [&](std::vector<std::uint64_t> pas, std::size_t claim) {
        auto in = H::input<ifc::manage_pages_in>(cmd_opcode::MANAGE_PAGES, 1, pas.size() * 8);
        ifc::set<ifc::manage_pages_in::input_num_entries>(in.data(), static_cast<std::uint32_t>(claim));
        for (std::size_t i = 0; i < pas.size(); ++i) ifc::set<ifc::manage_pages_in::pas>(in.data(), i, pas[i]);
        return h.exec(in, 16, {.slot = 31});
    };
    auto r = give({mem.iova(), mem.iova() + 100}, 2);
    CHECK(r.status == cmd_status::BAD_PARAM);
    CHECK(r.synd() == cmd_syndrome::BAD_ALIGNMENT);
    r = give({mem.iova(), mem.iova()}, 2);
    CHECK(r.synd() == cmd_syndrome::BAD_PARAMETER);
    r = give({mem.iova()}, 3);
    CHECK(r.status == cmd_status::BAD_INPUT_LEN);
    CHECK(r.synd() == cmd_syndrome::BAD_INPUT_LEN);
    CHECK(h.dev().pages_owned() == 0);
    CHECK(give({mem.iova(), mem.iova() + 4096}, 2).status == cmd_status::OK);
    CHECK(h.dev().pages_owned() == 2);
    // The same page again is refused.
    CHECK(give({mem.iova()}, 1).status == cmd_status::BAD_PARAM);
}

TEST_CASE("MANAGE_PAGES take returns free pages, at most what the output can hold") {
    H h;
    REQUIRE(h.bring_up());
    const auto owned = h.dev().pages_owned();
    auto in = H::input<ifc::manage_pages_in>(cmd_opcode::MANAGE_PAGES, 2);
    ifc::set<ifc::manage_pages_in::input_num_entries>(in.data(), 5);
    auto r = h.exec(in, 16 + 5 * 8, {.slot = 31});
    REQUIRE(r.status == cmd_status::OK);
    CHECK(ifc::get<ifc::manage_pages_out::output_num_entries>(r.out.data()) == 5);
    CHECK(ifc::get<ifc::manage_pages_out::pas>(r.out.data(), 0) % 4096 == 0);
    CHECK(h.dev().pages_owned() == owned - 5);
    // Room for only two: two come back.
    auto r2 = h.exec(in, 16 + 2 * 8, {.slot = 31});
    CHECK(ifc::get<ifc::manage_pages_out::output_num_entries>(r2.out.data()) == 2);
}

TEST_CASE("SET_HCA_CAP changes only settable fields, within the maximum") {
    H h;
    boot_and_enable(h);
    auto cur = h.exec(H::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1), 4112);
    auto in = H::input<ifc::set_hca_cap_in>(cmd_opcode::SET_HCA_CAP, 0);
    std::byte* cap = ifc::at<ifc::set_hca_cap_in::capability>(in.data());
    std::memcpy(cap, ifc::at<ifc::query_hca_cap_out::capability>(cur.out.data()), ifc::cmd_hca_cap::size_bytes);
    ifc::set<ifc::cmd_hca_cap::log_max_qp>(cap, 12);   // settable, smaller: fine
    ifc::set<ifc::cmd_hca_cap::log_max_cq>(cap, 3);    // not settable: ignored
    REQUIRE(h.exec(in, 16).status == cmd_status::OK);
    auto after = h.exec(H::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1), 4112);
    const std::byte* a = ifc::at<ifc::query_hca_cap_out::capability>(after.out.data());
    CHECK(ifc::get<ifc::cmd_hca_cap::log_max_qp>(a) == 12);
    CHECK(ifc::get<ifc::cmd_hca_cap::log_max_cq>(a) == 16);
    ifc::set<ifc::cmd_hca_cap::log_max_qp>(cap, 20);  // beyond the maximum
    auto r = h.exec(in, 16);
    CHECK(r.status == cmd_status::BAD_PARAM);
    CHECK(r.synd() == cmd_syndrome::EXCEEDS_LIMIT);
}

TEST_CASE("RoCE capabilities exist on an Ethernet port only") {
    H ib;
    boot_and_enable(ib);
    CHECK(ib.exec(H::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 9), 4112).status ==
          cmd_status::BAD_PARAM);

    H eth(ethernet());
    boot_and_enable(eth);
    auto r = eth.exec(H::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 9), 4112);
    REQUIRE(r.status == cmd_status::OK);
    const std::byte* roce = ifc::at<ifc::query_hca_cap_out::capability>(r.out.data());
    CHECK(ifc::get<ifc::roce_cap::r_roce_dest_udp_port>(roce) == 4791);
    auto g = eth.exec(H::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1), 4112);
    const std::byte* gen = ifc::at<ifc::query_hca_cap_out::capability>(g.out.data());
    CHECK(ifc::get<ifc::cmd_hca_cap::port_type>(gen) == 1);
    CHECK(ifc::get<ifc::cmd_hca_cap::roce>(gen) == 1);
}

TEST_CASE("QUERY_HCA_CAP answers every capability type the general caps announce (Linux's bring-up)") {
    H h;
    boot_and_enable(h);
    auto query = [&](std::uint16_t op_mod) {
        return h.exec(H::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, op_mod), 4112);
    };
    auto gen = query(1);
    REQUIRE(gen.status == cmd_status::OK);
    const std::byte* g = ifc::at<ifc::query_hca_cap_out::capability>(gen.out.data());
    // mlx5_query_hca_caps queries ATOMIC (type 3) when `atomic` is set and DEV_EVENT
    // (type 0x14) when `event_cap` is; a failure of either fails its probe.
    REQUIRE(CXV_LINUX_GET(cmd_hca_cap, g, atomic) == 1);
    REQUIRE(CXV_LINUX_GET(cmd_hca_cap, g, event_cap) == 1);
    for (std::uint16_t op_mod : {0x6, 0x7, 0x28, 0x29}) {
        CHECK_MESSAGE(query(op_mod).status == cmd_status::OK, op_mod);
    }
    // Atomics as mlx5_ib's get_atomic_caps reads them: CAS and FA, 8 bytes on QPs, and
    // host endianness offered (supported_atomic_req_8B_endianness_mode_1).
    auto cur = query(0x7);
    const std::byte* a = ifc::at<ifc::query_hca_cap_out::capability>(cur.out.data());
    CHECK(CXV_LINUX_GET(atomic_caps, a, atomic_operations) == 0x3);
    CHECK(CXV_LINUX_GET(atomic_caps, a, atomic_size_qp) == 1u << 3);
    CHECK(CXV_LINUX_GET(atomic_caps, a, atomic_size_dc) == 0);
    CHECK(CXV_LINUX_GET(atomic_caps, a, supported_atomic_req_8B_endianness_mode_1) == 1);
    CHECK(CXV_LINUX_GET(atomic_caps, a, atomic_req_8B_endianness_mode) == 0);
    // DEV_EVENT: no event a user may subscribe to.
    auto ev = query(0x29);
    const std::byte* e = ifc::at<ifc::query_hca_cap_out::capability>(ev.out.data());
    CHECK(std::all_of(e, e + 64, [](std::byte b) { return b == std::byte{0}; }));

    // handle_hca_cap_atomic: SET_HCA_CAP op_mod ATOMIC << 1 with mode 1 (host endianness).
    auto set = [&](std::uint32_t mode) {
        auto in = H::input<ifc::set_hca_cap_in>(cmd_opcode::SET_HCA_CAP, 0x3 << 1);
        std::byte* cap = ifc::at<ifc::set_hca_cap_in::capability>(in.data());
        ifc::set<ifc::atomic_caps::atomic_req_8B_endianness_mode>(cap, mode);
        return h.exec(in, 16);
    };
    REQUIRE(set(1).status == cmd_status::OK);
    cur = query(0x7);
    CHECK(CXV_LINUX_GET(atomic_caps, ifc::at<ifc::query_hca_cap_out::capability>(cur.out.data()),
                        atomic_req_8B_endianness_mode) == 1);
    check_status(set(2), cmd_status::BAD_PARAM, cmd_syndrome::EXCEEDS_LIMIT);
    // Types the device has no structure for are still refused.
    check_status(query(0x2 << 1 | 1), cmd_status::BAD_PARAM, cmd_syndrome::BAD_OP_MOD);
}

TEST_CASE("the general capabilities announce transport domains, and the model makes them") {
    H h;
    REQUIRE(h.bring_up());
    auto cur = h.exec(H::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1), 4112);
    REQUIRE(cur.status == cmd_status::OK);
    const std::byte* g = ifc::at<ifc::query_hca_cap_out::capability>(cur.out.data());
    // mlx5_ib_alloc_transport_domain sends ALLOC_TRANSPORT_DOMAIN for every user context
    // when log_max_transport_domain is not 0: each gets its own number.
    CHECK(CXV_LINUX_GET(cmd_hca_cap, g, log_max_transport_domain) == 16);
    const auto a = h.simple(cmd_opcode::ALLOC_TRANSPORT_DOMAIN);
    const auto b = h.simple(cmd_opcode::ALLOC_TRANSPORT_DOMAIN);
    REQUIRE(a.status == cmd_status::OK);
    REQUIRE(b.status == cmd_status::OK);
    const auto td = CXV_LINUX_GET(alloc_transport_domain_out, a.out, transport_domain);
    CHECK(td != 0);
    CHECK(CXV_LINUX_GET(alloc_transport_domain_out, b.out, transport_domain) != td);
    auto in = H::input<ifc::dealloc_transport_domain_in>(cmd_opcode::DEALLOC_TRANSPORT_DOMAIN);
    CXV_LINUX_SET(dealloc_transport_domain_in, in, transport_domain, td);
    CHECK(h.exec(in, 16).status == cmd_status::OK);
    check_status(h.exec(in, 16), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
}

TEST_CASE("ACCESS_REG: HOST_ENDIANNESS, PAOS, PMTU, PTYS, and unknown registers") {
    H h;
    boot_and_enable(h);
    auto reg = [&](std::uint16_t id, std::uint16_t op_mod, auto fill) {
        auto in = H::input<ifc::access_register_in>(cmd_opcode::ACCESS_REG, op_mod, 64);
        ifc::set<ifc::access_register_in::register_id>(in.data(), id);
        fill(ifc::at<ifc::access_register_in::register_data>(in.data()));
        return h.exec(in, 16 + 64);
    };
    CHECK(reg(0x7004, 0, [](std::byte*) {}).status == cmd_status::OK);
    auto paos = reg(0x5006, 1, [](std::byte* r) { ifc::set<ifc::paos_reg::local_port>(r, 1); });
    REQUIRE(paos.status == cmd_status::OK);
    // Before INIT_HCA the link has not come up: admin up, oper down.
    CHECK(ifc::get<ifc::paos_reg::admin_status>(ifc::at<ifc::access_register_out::register_data>(paos.out.data())) == 1);
    CHECK(ifc::get<ifc::paos_reg::oper_status>(ifc::at<ifc::access_register_out::register_data>(paos.out.data())) == 2);
    auto badport = reg(0x5006, 1, [](std::byte* r) { ifc::set<ifc::paos_reg::local_port>(r, 2); });
    CHECK(badport.synd() == cmd_syndrome::BAD_PORT);
    auto pmtu = reg(0x5003, 1, [](std::byte* r) { ifc::set<ifc::pmtu_reg::local_port>(r, 1); });
    CHECK(ifc::get<ifc::pmtu_reg::max_mtu>(ifc::at<ifc::access_register_out::register_data>(pmtu.out.data())) == 4096);
    auto big = reg(0x5003, 0, [](std::byte* r) {
        ifc::set<ifc::pmtu_reg::local_port>(r, 1);
        ifc::set<ifc::pmtu_reg::admin_mtu>(r, 65535);
    });
    CHECK(big.synd() == cmd_syndrome::EXCEEDS_LIMIT);
    auto ptys = reg(0x5004, 1, [](std::byte* r) { ifc::set<ifc::ptys_reg::local_port>(r, 1); });
    // Capabilities are there; nothing is operational before the link is up.
    CHECK(ifc::get<ifc::ptys_reg::ib_proto_capability>(ifc::at<ifc::access_register_out::register_data>(ptys.out.data())) != 0);
    CHECK(ifc::get<ifc::ptys_reg::ib_proto_oper>(ifc::at<ifc::access_register_out::register_data>(ptys.out.data())) == 0);
    auto unknown = reg(0x9999, 1, [](std::byte*) {});
    CHECK(unknown.status == cmd_status::BAD_PARAM);
    CHECK(unknown.synd() == cmd_syndrome::BAD_REGISTER);
}

TEST_CASE("graceful teardown releases objects; after it, only reclaim, INIT_HCA and DISABLE_HCA") {
    H h;
    REQUIRE(h.bring_up());
    REQUIRE(h.simple(cmd_opcode::ALLOC_PD).status == cmd_status::OK);
    auto td = H::input<ifc::teardown_hca_in>(cmd_opcode::TEARDOWN_HCA);
    REQUIRE(h.exec(td, 16).status == cmd_status::OK);
    CHECK(h.dev().state() == sim::hca_state::torn_down);
    auto pd = h.simple(cmd_opcode::ALLOC_PD);
    CHECK(pd.status == cmd_status::BAD_SYS_STATE);
    CHECK(h.exec(H::input<ifc::disable_hca_in>(cmd_opcode::DISABLE_HCA), 16).status == cmd_status::OK);
    CHECK(h.dev().state() == sim::hca_state::disabled);
    CHECK(h.dev().pages_owned() == 0);
}

TEST_CASE("fast teardown: PREPARE, then nic_interface = DISABLED completes it") {
    H h;
    REQUIRE(h.bring_up());
    auto td = H::input<ifc::teardown_hca_in>(cmd_opcode::TEARDOWN_HCA);
    ifc::set<ifc::teardown_hca_in::profile>(td.data(), 2);
    auto r = h.exec(td, 16);
    REQUIRE(r.status == cmd_status::OK);
    CHECK(ifc::get<ifc::teardown_hca_out::state>(r.out.data()) == 0);
    CHECK(h.dev().state() == sim::hca_state::initialized);
    const std::uint32_t v = h.bar_load32(0x14);
    h.bar_store32(0x14, (v & 0xfffff000u) | (1u << 8));
    const auto end = std::chrono::steady_clock::now() + 2s;
    while (h.dev().state() != sim::hca_state::torn_down && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(1ms);
    }
    CHECK(h.dev().state() == sim::hca_state::torn_down);
    CHECK(((h.bar_load32(0x14) >> 8) & 3) == 1);
}

TEST_CASE("device reset returns everything to power-on") {
    H h;
    REQUIRE(h.bring_up());
    h.dev().reset();
    CHECK(h.dev().state() == sim::hca_state::disabled);
    CHECK(h.dev().pages_owned() == 0);
    CHECK((h.bar_load32(0x1fc) & 0x80000000u) != 0);
    REQUIRE(h.wait_boot());
}

TEST_CASE("QUERY_ADAPTER gives the vendor ids and the PSID, read where Linux's mlx5_query_board_id reads them") {
    H h;
    boot_and_enable(h);
    // Before INIT_HCA: refused, as every command of an initialized HCA.
    CHECK(h.simple(cmd_opcode::QUERY_ADAPTER).synd() == cmd_syndrome::HCA_NOT_INITIALIZED);
    H g;
    REQUIRE(g.bring_up());
    auto r = g.exec(H::input<ifc::query_adapter_in>(cmd_opcode::QUERY_ADAPTER), CXV_LINUX_BYTES(query_adapter_out));
    REQUIRE(r.status == cmd_status::OK);
    const std::span<const std::byte> out(r.out.data(), CXV_LINUX_BYTES(query_adapter_out));
    const std::size_t block = CXV_LINUX_OFF(query_adapter_out, query_adapter_struct);
    CHECK(linux_bits(out, block + CXV_LINUX_OFF(query_adapter_param_block, ieee_vendor_id),
                     CXV_LINUX_WIDTH(query_adapter_param_block, ieee_vendor_id)) == 0x0002c9);
    CHECK(linux_bits(out, block + CXV_LINUX_OFF(query_adapter_param_block, vsd_vendor_id),
                     CXV_LINUX_WIDTH(query_adapter_param_block, vsd_vendor_id)) == 0x15b3);
    std::string psid;
    const std::size_t at = (block + CXV_LINUX_OFF(query_adapter_param_block, vsd_contd_psid)) / 8;
    for (std::size_t i = 0; i < 16 && out[at + i] != std::byte{0}; ++i) psid += static_cast<char>(out[at + i]);
    CHECK(psid == g.dev().config().psid);
}

TEST_CASE("ENABLE_HCA and DISABLE_HCA of another function: a PF's VFs (1 to TotalVFs), nothing else") {
    sim::device_config pf;
    pf.sriov_totalvfs = 2;
    H h(pf);
    REQUIRE(h.bring_up());
    const auto other = [&](cmd_opcode op, std::uint32_t fn) {
        auto in = H::input<ifc::enable_hca_in>(op);
        ifc::set<ifc::enable_hca_in::function_id>(in.data(), fn);  // the same place in disable_hca_in
        return h.exec(in, 16);
    };
    for (std::uint32_t fn : {1u, 2u}) {
        CHECK(other(cmd_opcode::ENABLE_HCA, fn).status == cmd_status::OK);
        CHECK(other(cmd_opcode::DISABLE_HCA, fn).status == cmd_status::OK);
    }
    CHECK(other(cmd_opcode::ENABLE_HCA, 3).synd() == cmd_syndrome::UNKNOWN_RESOURCE);
    // The PF's own HCA is untouched by its VFs'.
    CHECK(h.dev().state() == sim::hca_state::initialized);
    // A VF names only itself.
    sim::device_config vf;
    vf.virtual_function = true;
    vf.device_id = 0x101c;
    H v(vf);
    REQUIRE(v.bring_up());
    auto in = H::input<ifc::enable_hca_in>(cmd_opcode::ENABLE_HCA);
    ifc::set<ifc::enable_hca_in::function_id>(in.data(), 1);
    CHECK(v.exec(in, 16).synd() == cmd_syndrome::UNKNOWN_RESOURCE);
}
