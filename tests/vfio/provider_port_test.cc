// Port state changes through rdma-core's mlx5 VFIO provider (Debian's libmlx5.so.1,
// unmodified): a DevX EQ of the test's own, on an MSI-X vector of its own, subscribed to
// PORT_CHANGE; PAOS written down and up (ase = 1) with mlx5dv_devx_general_cmd; the
// events arrive on that EQ and its eventfd, in order, the up ones only after the link has
// trained (cxv-sim's link_up_ms, 300 ms by default).
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>

#include "hw/barrier.h"
#include "hw/doorbell.h"
#include "hw/mmio.h"
#include "tests/vfio/devx_common.h"

namespace cxv::test::vfio {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr unsigned kLogEq = 6;
constexpr std::uint32_t kDown = 1, kActive = 4, kInitialized = 5;  // MLX5_PORT_CHANGE_SUBTYPE_*
constexpr auto kLinkUp = 300ms;  // cxv-sim's default link_up_ms

std::pair<std::uint32_t, std::uint32_t> paos_read(ibv_context* ctx) {
    const result r = paos(ctx, false);
    const std::byte* reg = ifc::at<ifc::access_register_out::register_data>(r.data());
    return {ifc::get<ifc::paos_reg::admin_status>(reg), ifc::get<ifc::paos_reg::oper_status>(reg)};
}

// The test's EQ: its ring (the provider's allocation), consumer index, and doorbell.
struct port_eq {
    env& e;
    mlx5dv_devx_msi_vector* msi = nullptr;
    mlx5dv_devx_eq* eq = nullptr;
    std::uint32_t eqn = 0;
    std::uint32_t ci = 0;

    explicit port_eq(env& en) : e(en) {
        msi = mlx5dv_devx_alloc_msi_vector(e.ctx);
        REQUIRE_MESSAGE(msi != nullptr, "mlx5dv_devx_alloc_msi_vector: ", std::strerror(errno));
        auto in = input<ifc::create_eq_in>(cmd_opcode::CREATE_EQ);
        std::byte* eqc = ifc::at<ifc::create_eq_in::eq_context_entry>(in.data());
        ifc::set<ifc::eqc::log_eq_size>(eqc, kLogEq);
        ifc::set<ifc::eqc::uar_page>(eqc, e.uar->page_id);
        ifc::set<ifc::eqc::intr>(eqc, static_cast<std::uint32_t>(msi->vector));
        ifc::set<ifc::create_eq_in::event_bitmask>(in.data(), 0,
                                                   std::uint64_t{1} << static_cast<unsigned>(hw::event_type::PORT_CHANGE));
        std::vector<std::byte> out(ifc::create_eq_out::size_bytes);
        errno = 0;
        eq = mlx5dv_devx_create_eq(e.ctx, in.data(), in.size(), out.data(), out.size());
        result er{eq ? 0 : errno, out};
        REQUIRE_MESSAGE(eq != nullptr, describe(cmd_opcode::CREATE_EQ, er));
        eqn = ifc::get<ifc::create_eq_out::eq_number>(out.data());
        // Every EQE owned by the device on the first pass (the provider leaves the ring as is).
        for (std::size_t i = 0; i < (std::size_t{1} << kLogEq); ++i) ring()[i * 64 + 63] = std::byte{1};
        arm();
    }
    ~port_eq() {
        void* ring_va = eq->vaddr;  // rdma-core frees the bookkeeping, not the ring
        const int destroyed = mlx5dv_devx_destroy_eq(eq);
        CHECK(destroyed == 0);
        if (destroyed == 0) std::free(ring_va);
        CHECK(mlx5dv_devx_free_msi_vector(msi) == 0);
    }
    std::byte* ring() const { return static_cast<std::byte*>(eq->vaddr); }

    // The EQ doorbell with arm (UAR + 0x40): consumer index, and an interrupt for the next
    // EQE. The provider's DevX UAR is its own EQs' page, and the model sees the doorbell
    // word, not each write (docs/device-model.md, "Doorbells without write events"): so
    // that neither arm replaces the other before the device reads it, ours waits for the
    // device to take the word before and after (it leaves 0 there).
    void arm() {
        const hw::mmio_window uar(e.uar->base_addr, 4096);
        auto taken = [&] {
            const auto end = clock_type::now() + 2s;
            while (uar.read32_be(hw::uar_eq_doorbell_arm) != 0 && clock_type::now() < end) std::this_thread::yield();
        };
        taken();
        hw::to_device();
        uar.write32_be(hw::uar_eq_doorbell_arm, hw::eq_doorbell_value(eqn, ci));
        taken();
    }
    // Interrupts already signalled (read and forgotten).
    void clear_interrupts() {
        pollfd p{msi->fd, POLLIN, 0};
        std::uint64_t count = 0;
        if (::poll(&p, 1, 0) == 1) CHECK(::read(msi->fd, &count, sizeof count) == static_cast<ssize_t>(sizeof count));
    }
    // The next EQE's PORT_CHANGE subtype, if the device has written one.
    std::optional<std::uint32_t> next() {
        const std::byte* eqe = ring() + (ci & ((1u << kLogEq) - 1)) * 64;
        if (ifc::get<ifc::eqe::owner>(eqe) != ((ci >> kLogEq) & 1)) return std::nullopt;
        hw::from_device();
        CHECK(ifc::get<ifc::eqe::event_type>(eqe) == static_cast<std::uint32_t>(hw::event_type::PORT_CHANGE));
        CHECK(ifc::get<ifc::port_state_change_event::port_num>(ifc::at<ifc::eqe::event_data>(eqe)) == 1);
        ++ci;
        return ifc::get<ifc::eqe::event_sub_type>(eqe);
    }
    // Waits (poll(2) on the vector's eventfd) for the interrupt of an armed EQ, then takes
    // the EQE and arms again. 0 when nothing came within `wait`.
    std::uint32_t wait_event(std::chrono::milliseconds wait = 3s) {
        pollfd p{msi->fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(wait.count())) != 1) return 0;
        std::uint64_t count = 0;
        CHECK(::read(msi->fd, &count, sizeof count) == static_cast<ssize_t>(sizeof count));
        CHECK(count == 1);
        const auto sub = next();
        REQUIRE(sub);
        arm();
        return *sub;
    }
};

TEST_CASE("provider: PAOS down and up through DevX; PORT_CHANGE events on the test's own EQ and vector") {
    env e(kBdf[0]);
    port_eq pe(e);
    // The link trains after the provider's INIT_HCA; whatever of it this EQ saw came in
    // order: Init, then Active.
    REQUIRE(wait_port_active(e.ctx));
    std::vector<std::uint32_t> early;
    while (auto s = pe.next()) early.push_back(*s);
    pe.clear_interrupts();
    pe.arm();
    CHECK((early.empty() || early == std::vector<std::uint32_t>{kActive} ||
           early == std::vector<std::uint32_t>{kInitialized, kActive}));
    CHECK(paos_read(e.ctx) == std::pair<std::uint32_t, std::uint32_t>{1, 1});

    // Down: at once, one event.
    paos(e.ctx, true, 2);
    CHECK(pe.wait_event() == kDown);
    CHECK(paos_read(e.ctx) == std::pair<std::uint32_t, std::uint32_t>{2, 2});
    CHECK(port_state(e.ctx) == kPortDown);

    // Up: the link trains first (still down), then Init and, after the SM's sweep, Active.
    const auto t0 = clock_type::now();
    paos(e.ctx, true, 1);
    CHECK(paos_read(e.ctx) == std::pair<std::uint32_t, std::uint32_t>{1, 2});
    CHECK(pe.wait_event() == kInitialized);
    CHECK(clock_type::now() - t0 >= kLinkUp);
    CHECK(paos_read(e.ctx) == std::pair<std::uint32_t, std::uint32_t>{1, 1});
    CHECK(pe.wait_event() == kActive);
    CHECK(port_state(e.ctx) == kPortActive);
    // Nothing more: one event per transition.
    CHECK(pe.wait_event(100ms) == 0);
    CHECK_FALSE(pe.next());
}

}  // namespace
}  // namespace cxv::test::vfio
