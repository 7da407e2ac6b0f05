// Power-on and the initialization segment, as a driver sees them before any command.
#include <chrono>
#include <thread>

#include <doctest/doctest.h>

#include "tests/sim/harness.h"

using namespace cxv;
using namespace std::chrono_literals;

TEST_CASE("initializing is set at power-on and clears after the boot time") {
    sim::device_config cfg;
    cfg.boot_time = 500ms;
    // The boot clock starts when the device is created, so measure from before that.
    const auto start = std::chrono::steady_clock::now();
    test::harness h(cfg);
    CHECK((h.bar_load32(0x1fc) & 0x80000000u) != 0);
    REQUIRE(h.wait_boot());
    CHECK(std::chrono::steady_clock::now() - start >= 500ms);
}

TEST_CASE("the initialization segment reports cmdif rev 5, 32 slots of 64 bytes, the firmware version") {
    test::harness h;
    REQUIRE(h.wait_boot());
    CHECK((h.bar_load32(0x04) >> 16) == 5);                 // cmd_interface_rev
    CHECK((h.bar_load32(0x14) & 0xff) == 0x56);           // log_cmdq_size 5, stride 6
    CHECK((h.bar_load32(0x00) & 0xffff) == h.dev().config().fw_rev_major);
    CHECK(h.bar_load32(0x230) != 0xffffffffu);            // health fw_version
    CHECK(h.bar_load32(0x230) != 0);
}

TEST_CASE("writing the command queue address keeps the read-only log sizes") {
    test::harness h;
    REQUIRE(h.wait_boot());
    h.set_cmdq();
    CHECK((h.bar_load32(0x14) & 0xff) == 0x56);
    CHECK((h.bar_load32(0x14) & 0xfffff000u) != 0);
}

namespace {

// Polls `done` until it holds or 20 s pass (a deadline for a stalled machine, not a
// speed bound); whether it held.
template <typename Pred>
bool eventually(Pred done) {
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (!done()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

std::uint32_t health_counter(test::harness& h) { return h.bar_load32(0x1010) & 0xffffff; }

// A command through the queue, waited for: the model thread's round that completes it
// looked at the health counter first (sim::device's round), so everything that round's
// tick decided is in the BAR when this returns.
void round_trip(test::harness& h) {
    const auto r = h.exec(test::harness::input<hw::ifc::query_issi_in>(hw::cmd_opcode::QUERY_ISSI), 112);
    REQUIRE(r.completed);
}

}  // namespace

TEST_CASE("the health counter keeps ticking, and stops when the fault is injected") {
    sim::device_config cfg;
    cfg.health_period = 5ms;
    test::harness h(cfg);
    REQUIRE(h.wait_boot());
    h.set_cmdq();
    REQUIRE(h.enable_hca().completed);
    const auto c0 = health_counter(h);
    CHECK(eventually([&] { return health_counter(h) != c0; }));

    h.dev().faults().stall_health(true);
    round_trip(h);  // a tick that began before the stall has landed
    const auto s0 = health_counter(h);
    // Rounds of the model thread until one runs ten periods later, when a tick would be
    // long due: each command completes in a round that began after it was posted.
    const auto due = std::chrono::steady_clock::now() + 10 * cfg.health_period;
    unsigned rounds = 0;
    while (std::chrono::steady_clock::now() < due || rounds < 3) {
        round_trip(h);
        if (std::chrono::steady_clock::now() >= due) ++rounds;
    }
    CHECK(health_counter(h) == s0);
    h.dev().faults().stall_health(false);
    CHECK(eventually([&] { return health_counter(h) != s0; }));
}

TEST_CASE("an injected health syndrome appears in the health buffer") {
    test::harness h;
    REQUIRE(h.wait_boot());
    CHECK((h.bar_load32(0x23c) >> 16 & 0xff) == 0);
    h.dev().faults().raise_health_syndrome(0x10, 0x1234);
    CHECK(eventually([&] { return (h.bar_load32(0x23c) >> 16 & 0xff) == 0x10; }));  // synd, byte 0x23d
    CHECK((h.bar_load32(0x23c) & 0xffff) == 0x1234);                                  // ext_synd
}

TEST_CASE("PCI config space: identity, class, capabilities, writable command register") {
    const sim::device_config cfg = test::ethernet();
    test::harness h(cfg);
    std::uint8_t b[0x100] = {};
    h.dev().pci_config().read(0, b, sizeof(b));
    CHECK((b[0] | b[1] << 8) == 0x15b3);
    CHECK((b[2] | b[3] << 8) == cfg.device_id);
    CHECK(b[0x0b] == 0x02);
    CHECK(b[0x0a] == 0x00);  // Ethernet
    // Walk the capability list to MSI-X.
    unsigned p = b[0x34], found = 0;
    while (p) {
        if (b[p] == 0x11) found = p;
        p = b[p + 1];
    }
    REQUIRE(found != 0);
    CHECK(((b[found + 2] | b[found + 3] << 8) & 0x7ff) + 1 == cfg.msix_vectors);
    // Command register: memory + bus master are writable, the status is not.
    const std::uint16_t cmd = 0x0006;
    h.dev().pci_config().write(4, &cmd, 2);
    const std::uint16_t junk = 0xffff;
    h.dev().pci_config().write(6, &junk, 2);
    CHECK(h.dev().pci_config().bus_master());
    std::uint16_t status = 0;
    h.dev().pci_config().read(6, &status, 2);
    CHECK(status == 0x0010);
    // BAR sizing: all ones reads back the size mask.
    const std::uint32_t ones = 0xffffffffu;
    h.dev().pci_config().write(0x10, &ones, 4);
    std::uint32_t bar = 0;
    h.dev().pci_config().read(0x10, &bar, 4);
    CHECK((bar & 0xfffffff0u) == static_cast<std::uint32_t>(~(cfg.bar0_size - 1)));
    CHECK((bar & 0xf) == 0xc);
}
