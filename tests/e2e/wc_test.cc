// The write-combining self-test decides each QP's doorbell mode: on a platform whose
// 64-byte bursts reach the device whole, BlueFlame (or MOVDIR64B); otherwise 8-byte
// doorbells. Run twice by BUILD: with the model's write_combining on and off (the
// launcher exports the setting as CXV_SIM_WRITE_COMBINING, which is what this test
// expects to see).
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>

// Below the API: the HCA's BAR mappings.
#include "driver/hca/hca.h"
#include "driver/vfio/vfio.h"
#include "hw/endian.h"
#include "hw/mmio.h"
#include "tests/e2e/fixture.h"

using namespace cxv;
using namespace cxv::test;

TEST_CASE("write-combining self-test and the doorbell mode QPs get from it") {
    const char* setting = std::getenv("CXV_SIM_WRITE_COMBINING");
    REQUIRE(setting != nullptr);
    const bool expect_wc = std::string(setting) == "on";
    auto n = make_node("0000:c5:00.0");
    // BlueFlame goes through sysfs resource0_wc, mapped by the driver: the same BAR0 as
    // VFIO's mapping (a store through one is seen through the other).
    const auto* wcw = n->dev->hca().device().bar0_wc();
    REQUIRE(wcw != nullptr);
    const auto& uc = n->dev->hca().device().bar0();
    REQUIRE(wcw->size() == uc.size());
    const std::size_t probe = uc.size() - 8;  // the last UAR page's last 8 bytes: unused
    wcw->write64_be(probe, 0x0123456789abcdefull);
    CHECK(hw::from_be(*reinterpret_cast<volatile std::uint64_t*>(uc.base() + probe)) == 0x0123456789abcdefull);
    wcw->write64_be(probe, 0);
    const bool wc = take(n->dev->write_combining());
    CHECK(wc == expect_wc);

    // A QP without an explicit mode gets what the test found; traffic flows either way.
    cxv::qp::attr a;
    a.type = qp_type::rc;
    a.domain = n->pd;
    a.send_cq = a.recv_cq = n->cq;
    a.cap = {16, 16, 1, 1, 64};
    auto q1 = take(cxv::qp::create(*n->dev, a));
    auto q2 = take(cxv::qp::create(*n->dev, a));
    const auto want = !wc ? doorbell_mode::doorbell
                          : hw::cpu_has_movdir64b() ? doorbell_mode::movdir64b : doorbell_mode::blueflame;
    CHECK(q1->doorbell() == want);
    connect_qps(*q1, *q2, *n);
    for (unsigned i = 0; i < 50; ++i) {
        ibv_sge r = sge(*n, 0x1000, 64);
        REQUIRE(post_recv(*q2, i, &r, 1) == 0);
        fill(n->at(0), 64, i);
        ibv_sge s = sge(*n, 0, 64);
        REQUIRE(post_send(*q1, 100 + i, IBV_WR_SEND, &s, 1, IBV_SEND_SIGNALED | IBV_SEND_INLINE) == 0);
        const auto wcs = wait_wc(*n->cq, 2);
        for (const auto& w : wcs) CHECK(w.status == IBV_WC_SUCCESS);
        CHECK(std::memcmp(n->at(0x1000), n->at(0), 64) == 0);
    }
}
