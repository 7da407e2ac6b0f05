// rdma-core's mlx5 VFIO provider (Debian's libmlx5.so.1, rdma-core 44, unmodified) against
// the emulated devices of `cxv-sim run --devices 2`: discovery, open and close, the
// verbs the provider implements (PD, MR), the ones it leaves to libibverbs' defaults,
// event processing with health polling, and two devices at once.
//
// The provider's verbs are alloc_pd, dealloc_pd, reg_mr, dereg_mr and free_context
// (mlx5_vfio_common_ops, providers/mlx5/mlx5_vfio.c); everything else is libibverbs'
// dummy op (libibverbs/dummy_ops.c), which returns EOPNOTSUPP or NULL with errno
// EOPNOTSUPP. Device and port attributes come from DevX commands instead.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>

#include "tests/vfio/provider_common.h"

namespace cxv::test::vfio {
namespace {

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;

// The provider forms lkey = rkey = (mkey_index << 8) | mkey_7_0 (mlx5_vfio_reg_mr).
void check_mr(const ibv_mr* mr, const ibv_pd* pd, const void* addr, std::size_t len) {
    REQUIRE(mr != nullptr);
    CHECK(mr->lkey != 0);
    CHECK((mr->lkey >> 8) != 0u);  // the mkey index
    CHECK(mr->rkey == mr->lkey);
    CHECK(mr->pd == pd);
    CHECK(mr->addr == addr);
    CHECK(mr->length == len);
}

// One PD and one MR on a device, used and released; REQUIREs every step.
void pd_and_mr(ibv_context* ctx) {
    ibv_pd* pd = ibv_alloc_pd(ctx);
    REQUIRE_MESSAGE(pd != nullptr, "ibv_alloc_pd: ", std::strerror(errno));
    aligned_buffer buf(4096, 3 * 4096);
    ibv_mr* mr = ibv_reg_mr(pd, buf.get() + 100, 2 * 4096, kAccess);
    REQUIRE_MESSAGE(mr != nullptr, "ibv_reg_mr: ", std::strerror(errno));
    check_mr(mr, pd, buf.get() + 100, 2 * 4096);
    CHECK(ibv_dereg_mr(mr) == 0);
    CHECK(ibv_dealloc_pd(pd) == 0);
}

// Calls mlx5dv_vfio_process_events whenever the events fd is readable and at least every
// `step`, until `total` has passed; every `cmd_every` iterations `between()` runs.
template <typename Fn>
int pump_events(ibv_context* ctx, std::chrono::milliseconds total, std::chrono::milliseconds step, int cmd_every,
                Fn between) {
    const int fd = mlx5dv_vfio_get_events_fd(ctx);
    const auto end = std::chrono::steady_clock::now() + total;
    int calls = 0;
    for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
        pollfd p{fd, POLLIN, 0};
        const int n = poll(&p, 1, static_cast<int>(step.count()));
        REQUIRE(n >= 0);
        const int rc = mlx5dv_vfio_process_events(ctx);
        REQUIRE_MESSAGE(rc == 0, "mlx5dv_vfio_process_events: ", std::strerror(rc));
        ++calls;
        if (cmd_every > 0 && i % cmd_every == 0) between();
    }
    return calls;
}

// --- discovery ---------------------------------------------------------------------------

TEST_CASE("discovery: one device per emulated PCI address") {
    for (const char* bdf : kBdf) {
        INFO("pci_name ", bdf);
        ibv_device** list = vfio_list(bdf);
        REQUIRE_MESSAGE(list != nullptr, std::strerror(errno));
        CHECK(list[0] != nullptr);
        CHECK(list[1] == nullptr);
        ibv_free_device_list(list);
    }
}

TEST_CASE("discovery: INIT_LINK_DOWN is the one flag the provider accepts") {
    ibv_device** list = vfio_list(kBdf[0], MLX5DV_VFIO_CTX_FLAGS_INIT_LINK_DOWN);
    REQUIRE_MESSAGE(list != nullptr, std::strerror(errno));
    CHECK(list[0] != nullptr);
    ibv_free_device_list(list);
}

TEST_CASE("discovery: addresses that are not emulated devices fail") {
    // 0000:c5:00.2 is the third function: not present with --devices 2. The others do
    // not exist at all or do not parse as a PCI address.
    for (const char* bdf : {"0000:c5:00.2", "0000:c5:01.0", "0001:c5:00.0", "0000:00:00.0", "c5:00.0", "garbage", ""}) {
        INFO("pci_name '", bdf, "'");
        ibv_device** list = vfio_list(bdf);
        CHECK(list == nullptr);
        if (list) ibv_free_device_list(list);
    }
    // The provider returns NULL after a failed stat() of the sysfs directory without
    // setting errno itself: what is left is stat's ENOENT.
    CHECK(vfio_list("0000:c5:00.2") == nullptr);
    CHECK(errno == ENOENT);
}

TEST_CASE("discovery: unknown comp_mask bits and flags are EOPNOTSUPP") {
    CHECK(vfio_list(kBdf[0], 0, 1) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    CHECK(vfio_list(kBdf[0], 0, std::uint64_t{1} << 63) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    CHECK(vfio_list(kBdf[0], 1u << 1) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    CHECK(vfio_list(kBdf[0], MLX5DV_VFIO_CTX_FLAGS_INIT_LINK_DOWN | (1u << 31)) == nullptr);
    CHECK(errno == EOPNOTSUPP);
}

// --- open and the verbs the provider does not implement -----------------------------------

// A sysfs attribute of the PCI function, read as the provider reads vendor and device
// (open, read, strtoul base 0); -1 when it cannot be read.
long sysfs_number(const char* bdf, const char* attr) {
    const std::string path = fmt::format("/sys/bus/pci/devices/{}/{}", bdf, attr);
    const int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) return -1;
    char buf[128] = {};
    const ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    return n > 0 ? std::strtol(buf, nullptr, 0) : -1;
}

TEST_CASE("discovery: the PCI identity the provider matches on") {
    // What ibv_query_device's vendor_id and vendor_part_id would say on a kernel
    // provider; the VFIO provider matches these against its table (is_mlx5_pci).
    for (const char* bdf : kBdf) {
        INFO(bdf);
        CHECK(sysfs_number(bdf, "vendor") == kMellanox);
        CHECK(sysfs_number(bdf, "device") == kConnectX6);
    }
}

TEST_CASE("open: the context is a VFIO one and the device is a ConnectX-6") {
    device d(kBdf[0]);
    CHECK(d.ctx()->cmd_fd == -1);  // no kernel uverbs device behind it (mlx5_vfio_alloc_context)
    // rdma-core 44's mlx5dv_is_supported() recognises kernel mlx5 devices only.
    CHECK_FALSE(mlx5dv_is_supported(d.ctx()->device));
    CHECK(mlx5dv_vfio_get_events_fd(d.ctx()) >= 0);

    // The identity ibv_query_device would give, from the device itself: general caps.
    const auto cur = query_general_caps(d.ctx(), true);
    const auto max = query_general_caps(d.ctx(), false);
    using cap = ifc::cmd_hca_cap;
    CHECK(ifc::get<cap::umem_uid_0>(cur.data()) == 1);  // the provider refuses to open without it
    CHECK(ifc::get<cap::port_type>(cur.data()) == 0);   // launched with --port-type ib
    CHECK(ifc::get<cap::num_ports>(cur.data()) == 1);
    CHECK(ifc::get<cap::roce>(cur.data()) == 0);
    // SET_HCA_CAP of the bring-up turned the checksum off and asked for 4 KiB UARs.
    CHECK(ifc::get<cap::cmdif_checksum>(cur.data()) == 0);
    CHECK(ifc::get<cap::log_uar_page_sz>(cur.data()) == 0);
    // Current never exceeds maximum.
    CHECK(ifc::get<cap::log_max_qp>(cur.data()) <= ifc::get<cap::log_max_qp>(max.data()));
    CHECK(ifc::get<cap::log_max_cq>(cur.data()) <= ifc::get<cap::log_max_cq>(max.data()));
    CHECK(ifc::get<cap::log_max_mkey>(cur.data()) <= ifc::get<cap::log_max_mkey>(max.data()));
    CHECK(ifc::get<cap::log_max_pd>(cur.data()) <= ifc::get<cap::log_max_pd>(max.data()));
}

TEST_CASE("open: query_device and query_port are libibverbs' EOPNOTSUPP defaults") {
    device d(kBdf[0]);
    ibv_device_attr attr{};
    CHECK(ibv_query_device(d.ctx(), &attr) == EOPNOTSUPP);
    ibv_device_attr_ex attr_ex{};
    CHECK(ibv_query_device_ex(d.ctx(), nullptr, &attr_ex) == EOPNOTSUPP);
    ibv_port_attr port{};
    CHECK(ibv_query_port(d.ctx(), 1, &port) == EOPNOTSUPP);

    // Verbs objects beyond PD and MR are not implemented either.
    errno = 0;
    CHECK(ibv_create_cq(d.ctx(), 16, nullptr, nullptr, 0) == nullptr);
    CHECK(errno == EOPNOTSUPP);

    // What ibv_query_port would have said, through DevX: port 1 is up with a LID.
    REQUIRE(wait_port_active(d.ctx()));
    const auto v = query_vport(d.ctx());
    CHECK(ifc::get<ifc::hca_vport_context::port_state>(v.data()) == kPortActive);
    CHECK(ifc::get<ifc::hca_vport_context::lid>(v.data()) != 0);
    CHECK(ifc::get<ifc::hca_vport_context::has_smi>(v.data()) == 1);
    CHECK(ifc::get<ifc::hca_vport_context::port_guid>(v.data()) != 0);
}

// --- PD and MR -----------------------------------------------------------------------------

TEST_CASE("pd: several PDs, distinct numbers through mlx5dv_init_obj") {
    device d(kBdf[0]);
    std::vector<ibv_pd*> pds;
    std::set<std::uint32_t> pdns;
    for (int i = 0; i < 8; ++i) {
        ibv_pd* pd = ibv_alloc_pd(d.ctx());
        REQUIRE_MESSAGE(pd != nullptr, "ibv_alloc_pd #", i, ": ", std::strerror(errno));
        CHECK(pd->context == d.ctx());
        mlx5dv_pd dv{};
        mlx5dv_obj obj{};
        obj.pd.in = pd;
        obj.pd.out = &dv;
        REQUIRE(mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD) == 0);
        CHECK(dv.pdn != 0);
        CHECK(dv.pdn <= 0xffffff);
        pdns.insert(dv.pdn);
        pds.push_back(pd);
    }
    CHECK(pdns.size() == pds.size());
    // The provider's init_obj knows PDs only (vfio_init_obj). libmlx5 finds the context
    // through the CQ, which is all it reads of it; vfio_init_obj looks at pd.in (to_mpd)
    // before it checks the type, so that one must be real.
    ibv_cq fake_cq{};
    fake_cq.context = d.ctx();
    mlx5dv_cq dvcq{};
    mlx5dv_pd dvpd{};
    mlx5dv_obj obj{};
    obj.cq.in = &fake_cq;
    obj.cq.out = &dvcq;
    obj.pd.in = pds[0];
    obj.pd.out = &dvpd;
    CHECK(mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ) == EOPNOTSUPP);
    for (ibv_pd* pd : pds) CHECK(ibv_dealloc_pd(pd) == 0);
    // A PD number freed is one the device accepts again.
    pd_and_mr(d.ctx());
}

TEST_CASE("mr: sizes, alignments and kinds of memory") {
    device d(kBdf[0]);
    ibv_pd* pd = ibv_alloc_pd(d.ctx());
    REQUIRE(pd != nullptr);

    struct region {
        const char* what;
        std::size_t align;   // 0: malloc
        std::size_t alloc;   // bytes allocated
        std::size_t offset;  // into the allocation
        std::size_t len;     // registered
    };
    const region regions[] = {
        {"4 KiB page", 4096, 4096, 0, 4096},
        {"odd offset inside a page", 4096, 4096, 0x123, 100},
        {"crossing a page boundary", 4096, 8192, 4000, 200},
        {"64 KiB", 4096, 64 << 10, 0, 64 << 10},
        {"64 KiB at an odd offset", 4096, (64 << 10) + 4096, 777, 64 << 10},
        {"1 MiB, 1 MiB aligned", 1 << 20, 1 << 20, 0, 1 << 20},
        {"4 MiB", 4096, 4 << 20, 0, 4 << 20},
        {"4 MiB minus a byte at offset 1", 4096, 4 << 20, 1, (4 << 20) - 1},
        {"malloc 1000 bytes", 0, 1000, 0, 1000},
        {"malloc 100 KiB, offset 3", 0, 100 << 10, 3, (100 << 10) - 3},
        {"one byte", 0, 16, 5, 1},
    };
    std::vector<void*> mem;
    std::vector<ibv_mr*> mrs;
    std::set<std::uint32_t> keys;
    for (const region& r : regions) {
        INFO(r.what);
        void* p = nullptr;
        if (r.align) {
            REQUIRE(posix_memalign(&p, r.align, r.alloc) == 0);
        } else {
            p = std::malloc(r.alloc);
            REQUIRE(p != nullptr);
        }
        std::memset(p, 0xa5, r.alloc);
        mem.push_back(p);
        void* addr = static_cast<std::byte*>(p) + r.offset;
        errno = 0;
        ibv_mr* mr = ibv_reg_mr(pd, addr, r.len, kAccess);
        CHECK_MESSAGE(mr != nullptr, "ibv_reg_mr: ", std::strerror(errno));
        if (!mr) continue;
        check_mr(mr, pd, addr, r.len);
        keys.insert(mr->lkey);
        mrs.push_back(mr);
    }
    CHECK(keys.size() == mrs.size());
    // Read-only and local-only registrations too.
    aligned_buffer ro(4096, 8192);
    ibv_mr* mr_ro = ibv_reg_mr(pd, ro.get(), 8192, 0);
    CHECK_MESSAGE(mr_ro != nullptr, std::strerror(errno));
    if (mr_ro) CHECK(keys.count(mr_ro->lkey) == 0);

    for (ibv_mr* mr : mrs) CHECK(ibv_dereg_mr(mr) == 0);
    if (mr_ro) CHECK(ibv_dereg_mr(mr_ro) == 0);
    for (void* p : mem) std::free(p);
    CHECK(ibv_dealloc_pd(pd) == 0);
}

TEST_CASE("mr: access flags the provider does not support are EOPNOTSUPP") {
    device d(kBdf[0]);
    ibv_pd* pd = ibv_alloc_pd(d.ctx());
    REQUIRE(pd != nullptr);
    aligned_buffer buf(4096, 4096);
    errno = 0;
    CHECK(ibv_reg_mr(pd, buf.get(), 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    CHECK(ibv_dealloc_pd(pd) == 0);
}

// --- events and health -------------------------------------------------------------------

TEST_CASE("events: processing for 6 s with commands in between; health polling stays quiet") {
    device d(kBdf[0]);
    const int fd = mlx5dv_vfio_get_events_fd(d.ctx());
    REQUIRE(fd >= 0);
    CHECK(mlx5dv_vfio_get_events_fd(d.ctx()) == fd);

    // Health is checked at most once a second inside process_events and aborts the
    // process after three checks that see the same health_counter: 6 s give at least
    // five checks. Commands complete through the async EQ meanwhile.
    int commands = 0;
    const auto start = std::chrono::steady_clock::now();
    const int calls = pump_events(d.ctx(), std::chrono::milliseconds(6000), std::chrono::milliseconds(50), 10, [&] {
        ibv_pd* pd = ibv_alloc_pd(d.ctx());
        REQUIRE(pd != nullptr);
        REQUIRE(ibv_dealloc_pd(pd) == 0);
        must(d.ctx(), input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1), ifc::query_hca_cap_out::size_bytes);
        ++commands;
    });
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::seconds(6));
    CHECK(calls >= 60);
    CHECK(commands >= 6);

    // Without anyone calling process_events for longer than the health interval, the
    // next call checks again and still sees a live counter.
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    CHECK(mlx5dv_vfio_process_events(d.ctx()) == 0);
    pd_and_mr(d.ctx());
}

TEST_CASE("events: the events fd of two contexts are distinct and both stay healthy") {
    device a(kBdf[0]);
    device b(kBdf[1]);
    CHECK(mlx5dv_vfio_get_events_fd(a.ctx()) != mlx5dv_vfio_get_events_fd(b.ctx()));
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(3500);
    while (std::chrono::steady_clock::now() < end) {
        pollfd p[2] = {{mlx5dv_vfio_get_events_fd(a.ctx()), POLLIN, 0}, {mlx5dv_vfio_get_events_fd(b.ctx()), POLLIN, 0}};
        REQUIRE(poll(p, 2, 100) >= 0);
        REQUIRE(mlx5dv_vfio_process_events(a.ctx()) == 0);
        REQUIRE(mlx5dv_vfio_process_events(b.ctx()) == 0);
    }
}

// --- lifetimes: repeated opens, two devices ------------------------------------------------

TEST_CASE("lifetime: five open/close cycles of one device in one process") {
    for (int cycle = 0; cycle < 5; ++cycle) {
        INFO("cycle ", cycle);
        device d(kBdf[0]);
        pd_and_mr(d.ctx());
        REQUIRE(wait_port_active(d.ctx()));
        const auto v = query_vport(d.ctx());
        CHECK(ifc::get<ifc::hca_vport_context::port_state>(v.data()) == kPortActive);
    }
}

TEST_CASE("lifetime: two devices open at once, each used, closed in either order") {
    auto a = std::make_unique<device>(kBdf[0]);
    auto b = std::make_unique<device>(kBdf[1]);
    REQUIRE(a->ctx() != b->ctx());

    ibv_pd* pa = ibv_alloc_pd(a->ctx());
    ibv_pd* pb = ibv_alloc_pd(b->ctx());
    REQUIRE(pa != nullptr);
    REQUIRE(pb != nullptr);
    aligned_buffer ba(4096, 1 << 20), bb(4096, 1 << 20);
    ibv_mr* ma = ibv_reg_mr(pa, ba.get(), 1 << 20, kAccess);
    ibv_mr* mb = ibv_reg_mr(pb, bb.get(), 1 << 20, kAccess);
    REQUIRE_MESSAGE(ma != nullptr, std::strerror(errno));
    REQUIRE_MESSAGE(mb != nullptr, std::strerror(errno));
    check_mr(ma, pa, ba.get(), 1 << 20);
    check_mr(mb, pb, bb.get(), 1 << 20);
    // Both answer, each as itself.
    for (device* d : {a.get(), b.get()}) {
        INFO(d->bdf());
        const auto cur = query_general_caps(d->ctx(), true);
        CHECK(ifc::get<ifc::cmd_hca_cap::umem_uid_0>(cur.data()) == 1);
        REQUIRE(wait_port_active(d->ctx()));
        const auto v = query_vport(d->ctx());
        CHECK(ifc::get<ifc::hca_vport_context::port_state>(v.data()) == kPortActive);
    }
    CHECK(ibv_dereg_mr(ma) == 0);
    CHECK(ibv_dealloc_pd(pa) == 0);
    // Closing the first leaves the second working.
    a.reset();
    pd_and_mr(b->ctx());
    CHECK(ibv_dereg_mr(mb) == 0);
    CHECK(ibv_dealloc_pd(pb) == 0);
    b.reset();

    // And the other way round, reopening both.
    device c(kBdf[1]);
    device e(kBdf[0]);
    pd_and_mr(c.ctx());
    pd_and_mr(e.ctx());
}

}  // namespace
}  // namespace cxv::test::vfio
