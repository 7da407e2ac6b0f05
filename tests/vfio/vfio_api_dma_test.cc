// Black-box conformance of the VFIO presentation layer, part 3: the type1 IOMMU
// (drivers/vfio/vfio_iommu_type1.c), fd lifecycles (vfio_main.c, container.c) and
// pass-through of ordinary fds under the preload. Expected values are Linux 6.1's.
#include <dirent.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "tests/vfio/vfio_test_util.h"

namespace cxv::vfio_test {
namespace {

struct iommu_info {
    std::uint32_t flags = 0;
    std::uint64_t pgsizes = 0;
    std::vector<vfio_iova_range> ranges;
    std::map<std::uint16_t, std::vector<std::uint8_t>> caps;  // id -> cap bytes incl. header
};

iommu_info get_iommu_info(int container) {
    vfio_iommu_type1_info probe{};
    probe.argsz = sizeof(probe);
    REQUIRE_OK(ioctl(container, VFIO_IOMMU_GET_INFO, &probe));
    REQUIRE(probe.argsz >= sizeof(probe));
    std::vector<std::uint64_t> storage(probe.argsz / 8 + 1, 0);
    auto* bytes = reinterpret_cast<std::uint8_t*>(storage.data());
    auto* info = reinterpret_cast<vfio_iommu_type1_info*>(bytes);
    info->argsz = probe.argsz;
    REQUIRE_OK(ioctl(container, VFIO_IOMMU_GET_INFO, info));
    iommu_info out;
    out.flags = info->flags;
    out.pgsizes = info->iova_pgsizes;
    if ((info->flags & VFIO_IOMMU_INFO_CAPS) == 0) return out;
    REQUIRE(info->cap_offset >= sizeof(vfio_iommu_type1_info));
    for (std::uint32_t off = info->cap_offset, loops = 0; off != 0 && loops < 16; ++loops) {
        REQUIRE(off + sizeof(vfio_info_cap_header) <= probe.argsz);
        vfio_info_cap_header hdr{};
        std::memcpy(&hdr, bytes + off, sizeof(hdr));
        const std::uint32_t end = hdr.next != 0 ? hdr.next : probe.argsz;
        REQUIRE(end > off);
        out.caps[hdr.id].assign(bytes + off, bytes + end);
        if (hdr.id == VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE) {
            std::uint32_t nr = 0;
            std::memcpy(&nr, bytes + off + 8, 4);
            for (std::uint32_t i = 0; i < nr; ++i) {
                vfio_iova_range r{};
                std::memcpy(&r, bytes + off + 16 + 16 * i, sizeof(r));
                out.ranges.push_back(r);
            }
        }
        off = hdr.next;
    }
    return out;
}

// A 2 MiB-aligned IOVA with 64 MiB of room inside a valid range.
std::uint64_t pick_iova(int container) {
    const iommu_info info = get_iommu_info(container);
    for (const vfio_iova_range& r : info.ranges) {
        const std::uint64_t base = std::max<std::uint64_t>((r.start + 0x1fffff) & ~std::uint64_t{0x1fffff}, 0x200000);
        if (base < r.end && r.end - base >= (64u << 20)) return base;
    }
    return 0x10000000;  // inside the legacy ranges
}

struct buffer {
    explicit buffer(std::size_t len) : size(len) {
        p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(p != MAP_FAILED);
        std::memset(p, 0x5a, len);
    }
    ~buffer() { ::munmap(p, size); }
    buffer(const buffer&) = delete;
    buffer& operator=(const buffer&) = delete;
    std::uint64_t va(std::size_t off = 0) const { return reinterpret_cast<std::uintptr_t>(p) + off; }
    void* p;
    std::size_t size;
};

int map_dma(int container, std::uint64_t vaddr, std::uint64_t iova, std::uint64_t size,
            std::uint32_t flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
            std::uint32_t argsz = sizeof(vfio_iommu_type1_dma_map)) {
    vfio_iommu_type1_dma_map m{};
    m.argsz = argsz;
    m.flags = flags;
    m.vaddr = vaddr;
    m.iova = iova;
    m.size = size;
    return ioctl(container, VFIO_IOMMU_MAP_DMA, &m);
}

// UNMAP_DMA; `*unmapped` gets the size field as the kernel left it.
int unmap_dma(int container, std::uint64_t iova, std::uint64_t size, std::uint64_t* unmapped = nullptr,
              std::uint32_t flags = 0, std::uint32_t argsz = sizeof(vfio_iommu_type1_dma_unmap)) {
    vfio_iommu_type1_dma_unmap u{};
    u.argsz = argsz;
    u.flags = flags;
    u.iova = iova;
    u.size = size;
    const int r = ioctl(container, VFIO_IOMMU_UNMAP_DMA, &u);
    if (unmapped != nullptr) *unmapped = u.size;
    return r;
}

std::uint32_t dma_avail(int container) {
    const iommu_info info = get_iommu_info(container);
    const auto it = info.caps.find(VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL);
    REQUIRE(it != info.caps.end());
    REQUIRE(it->second.size() >= sizeof(vfio_iommu_type1_info_dma_avail));
    std::uint32_t avail = 0;
    std::memcpy(&avail, it->second.data() + 8, 4);
    return avail;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// IOMMU
// ---------------------------------------------------------------------------------------

TEST_CASE("iommu: GET_INFO argsz handling (vfio_iommu_type1_get_info)") {
    vfio_handles h = open_device(0);
    const int c = h.container.get();
    alignas(8) std::uint8_t buf[24];
    auto* info = reinterpret_cast<vfio_iommu_type1_info*>(buf);
    std::memset(buf, 0xaa, sizeof(buf));
    info->argsz = 15;
    CHECK_ERRNO(ioctl(c, VFIO_IOMMU_GET_INFO, info), EINVAL);
    // argsz 16 (rdma-core v44 passes 24): no cap_offset written, but the caps exist, so
    // FLAG_CAPS is set and argsz grows to the full size.
    std::memset(buf, 0xaa, sizeof(buf));
    info->argsz = 16;
    REQUIRE_OK(ioctl(c, VFIO_IOMMU_GET_INFO, info));
    CHECK((info->flags & VFIO_IOMMU_INFO_PGSIZES) != 0);
    CHECK((info->flags & VFIO_IOMMU_INFO_CAPS) != 0);
    CHECK(info->argsz > 24);
    for (int i = 16; i < 24; ++i) CHECK(buf[i] == 0xaa);
    std::memset(buf, 0xaa, sizeof(buf));
    info->argsz = 24;
    REQUIRE_OK(ioctl(c, VFIO_IOMMU_GET_INFO, info));
    CHECK(info->flags == (VFIO_IOMMU_INFO_PGSIZES | VFIO_IOMMU_INFO_CAPS));
    CHECK(info->argsz > 24);
    CHECK(info->cap_offset == 0);
    CHECK((info->iova_pgsizes & page) != 0);
    CHECK((info->iova_pgsizes & (page - 1)) == 0);  // vfio_update_pgsize_bitmap: PAGE_SIZE is the smallest
}

TEST_CASE("iommu: GET_INFO capability chain") {
    vfio_handles h = open_device(0);
    const iommu_info info = get_iommu_info(h.container.get());
    CHECK(info.flags == (VFIO_IOMMU_INFO_PGSIZES | VFIO_IOMMU_INFO_CAPS));
    CHECK((info.pgsizes & page) != 0);
    REQUIRE(info.caps.count(VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE) == 1);
    vfio_info_cap_header hdr{};
    std::memcpy(&hdr, info.caps.at(VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE).data(), sizeof(hdr));
    CHECK(hdr.version == 1);
    REQUIRE(!info.ranges.empty());
    for (std::size_t i = 0; i < info.ranges.size(); ++i) {
        CHECK(info.ranges[i].start <= info.ranges[i].end);
        if (i > 0) CHECK(info.ranges[i].start > info.ranges[i - 1].end);
    }
}

TEST_CASE("iommu: GET_INFO always carries MIGRATION and DMA_AVAIL caps in 6.1") {
    vfio_handles h = open_device(0);
    const int c = h.container.get();
    const iommu_info info = get_iommu_info(c);
    // vfio_iommu_migration_build_caps
    REQUIRE(info.caps.count(VFIO_IOMMU_TYPE1_INFO_CAP_MIGRATION) == 1);
    const std::vector<std::uint8_t>& mig = info.caps.at(VFIO_IOMMU_TYPE1_INFO_CAP_MIGRATION);
    REQUIRE(mig.size() >= sizeof(vfio_iommu_type1_info_cap_migration));
    vfio_iommu_type1_info_cap_migration m{};
    std::memcpy(&m, mig.data(), sizeof(m));
    CHECK(m.header.version == 1);
    CHECK(m.flags == 0);
    CHECK(m.pgsize_bitmap == page);
    CHECK(m.max_dirty_bitmap_size == (std::uint64_t{1} << 28));  // DIRTY_BITMAP_SIZE_MAX
    // vfio_iommu_dma_avail_build_caps: dma_entry_limit (U16_MAX) minus live mappings.
    const std::uint32_t before = dma_avail(c);
    CHECK(before == 65535);
    buffer b(page);
    const std::uint64_t iova = pick_iova(c);
    REQUIRE_OK(map_dma(c, b.va(), iova, page));
    CHECK(dma_avail(c) == before - 1);
    REQUIRE_OK(unmap_dma(c, iova, page));
    CHECK(dma_avail(c) == before);
}

TEST_CASE("iommu: MAP_DMA, overlap and remap") {
    vfio_handles h = open_device(0);
    const int c = h.container.get();
    const std::uint64_t iova = pick_iova(c);
    buffer b(16 * page);
    CHECK_OK(map_dma(c, b.va(), iova, 4 * page));
    // vfio_dma_do_map: vfio_find_dma(iova, size) hits an existing mapping -> -EEXIST
    CHECK_ERRNO(map_dma(c, b.va(), iova, 4 * page), EEXIST);
    CHECK_ERRNO(map_dma(c, b.va(8 * page), iova, page), EEXIST);
    CHECK_ERRNO(map_dma(c, b.va(8 * page), iova + 3 * page, 2 * page), EEXIST);
    CHECK_ERRNO(map_dma(c, b.va(8 * page), iova - page, 2 * page), EEXIST);
    CHECK_OK(map_dma(c, b.va(4 * page), iova + 4 * page, page));  // adjacent
    CHECK_OK(map_dma(c, b.va(), iova + 8 * page, page));           // same vaddr, other iova
    CHECK_OK(map_dma(c, b.va(9 * page), iova + 9 * page, page, VFIO_DMA_MAP_FLAG_READ));
    CHECK_OK(map_dma(c, b.va(10 * page), iova + 10 * page, page, VFIO_DMA_MAP_FLAG_WRITE));
    std::uint64_t unmapped = 0;
    CHECK_OK(unmap_dma(c, iova, 4 * page, &unmapped));
    CHECK(unmapped == 4 * page);
    CHECK_OK(map_dma(c, b.va(12 * page), iova, 4 * page));  // the IOVA is free again
    CHECK_OK(unmap_dma(c, 0, 0, &unmapped, VFIO_DMA_UNMAP_FLAG_ALL));
    CHECK(unmapped == 4 * page + 4 * page);
}

TEST_CASE("iommu: MAP_DMA argument validation (vfio_iommu_type1_map_dma, vfio_dma_do_map)") {
    vfio_handles h = open_device(0);
    const int c = h.container.get();
    const std::uint64_t iova = pick_iova(c);
    buffer b(4 * page);
    const std::uint32_t rw = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
    CHECK_ERRNO(map_dma(c, b.va(), iova, page, rw, 31), EINVAL);  // argsz < minsz
    CHECK_ERRNO(map_dma(c, b.va(), iova, page, 0), EINVAL);       // no prot, no VADDR
    CHECK_ERRNO(map_dma(c, b.va(), iova, page, rw | (1u << 3)), EINVAL);
    CHECK_ERRNO(map_dma(c, b.va(), iova, page, VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_VADDR), EINVAL);
    CHECK_ERRNO(map_dma(c, b.va(), iova + 1, page), EINVAL);
    CHECK_ERRNO(map_dma(c, b.va(), iova + 0x800, page), EINVAL);
    CHECK_ERRNO(map_dma(c, b.va(8), iova, page), EINVAL);
    CHECK_ERRNO(map_dma(c, b.va(), iova, page + 1), EINVAL);
    CHECK_ERRNO(map_dma(c, b.va(), iova, 100), EINVAL);
    CHECK_ERRNO(map_dma(c, b.va(), iova, 0), EINVAL);
    CHECK_ERRNO(map_dma(c, b.va(), ~std::uint64_t{0} - page + 1, 2 * page), EINVAL);  // IOVA wrap
    CHECK_ERRNO(map_dma(c, ~std::uint64_t{0} - page + 1, iova, 2 * page), EINVAL);  // vaddr wrap
    // VADDR update of an IOVA that is not mapped: -ENOENT.
    CHECK_ERRNO(map_dma(c, b.va(), iova, page, VFIO_DMA_MAP_FLAG_VADDR), ENOENT);
    // Outside every reported IOVA range: vfio_iommu_iova_dma_valid() -> -EINVAL.
    const iommu_info info = get_iommu_info(c);
    REQUIRE(!info.ranges.empty());
    for (std::size_t i = 0; i + 1 < info.ranges.size(); ++i) {
        const std::uint64_t gap = (info.ranges[i].end + page) & ~(page - 1);
        if (gap + page - 1 < info.ranges[i + 1].start) CHECK_ERRNO(map_dma(c, b.va(), gap, page), EINVAL);
    }
    const std::uint64_t last = info.ranges.back().end;
    if (last < ~std::uint64_t{0} - 2 * page) CHECK_ERRNO(map_dma(c, b.va(), (last + page) & ~(page - 1), page), EINVAL);
    // Nothing above was mapped.
    CHECK_OK(map_dma(c, b.va(), iova, 4 * page));
}

TEST_CASE("iommu: MAP_DMA pins the pages (vaddr_get_pfns)") {
    vfio_handles h = open_device(0);
    const int c = h.container.get();
    const std::uint64_t iova = pick_iova(c);
    // An unmapped vaddr: pin_user_pages_remote -> -EFAULT.
    void* hole = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(hole != MAP_FAILED);
    const std::uint64_t hva = reinterpret_cast<std::uintptr_t>(hole);
    REQUIRE(::munmap(static_cast<char*>(hole) + page, page) == 0);
    CHECK_ERRNO(map_dma(c, hva + page, iova, page), EFAULT);
    // Half-mapped: the whole map fails and nothing is left behind (vfio_remove_dma).
    CHECK_ERRNO(map_dma(c, hva, iova, 2 * page), EFAULT);
    CHECK_OK(map_dma(c, hva, iova, page));
    CHECK_OK(unmap_dma(c, iova, page));
    ::munmap(hole, page);
    // A read-only page: the device may read it, not write it (FOLL_WRITE fails).
    void* ro = ::mmap(nullptr, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(ro != MAP_FAILED);
    const std::uint64_t rova = reinterpret_cast<std::uintptr_t>(ro);
    CHECK_ERRNO(map_dma(c, rova, iova, page), EFAULT);
    CHECK_ERRNO(map_dma(c, rova, iova + page, page, VFIO_DMA_MAP_FLAG_WRITE), EFAULT);
    CHECK_OK(map_dma(c, rova, iova + 2 * page, page, VFIO_DMA_MAP_FLAG_READ));
    std::uint64_t unmapped = 0;
    CHECK_OK(unmap_dma(c, iova, 4 * page, &unmapped));
    CHECK(unmapped == page);
    ::munmap(ro, page);
}

TEST_CASE("iommu: UNMAP_DMA type1v2 semantics (vfio_dma_do_unmap)") {
    vfio_handles h = open_device(0);
    const int c = h.container.get();
    const std::uint64_t iova = pick_iova(c) + 0x100000;
    buffer b(8 * page);
    std::uint64_t unmapped = 0;
    CHECK_ERRNO(unmap_dma(c, iova, page, nullptr, 0, 23), EINVAL);  // argsz < minsz
    CHECK_ERRNO(unmap_dma(c, iova, page, nullptr, 1u << 3), EINVAL);  // unknown flag
    CHECK_ERRNO(unmap_dma(c, iova + 0x800, page), EINVAL);
    CHECK_ERRNO(unmap_dma(c, iova, 0), EINVAL);
    CHECK_ERRNO(unmap_dma(c, iova, page + 1), EINVAL);
    CHECK_ERRNO(unmap_dma(c, ~std::uint64_t{0} - page + 1, 2 * page), EINVAL);  // wraps
    // Nothing mapped there: success, size 0.
    unmapped = 1;
    CHECK_OK(unmap_dma(c, iova, 64 * page, &unmapped));
    CHECK(unmapped == 0);

    REQUIRE_OK(map_dma(c, b.va(), iova, 4 * page));
    // Bisecting the start or the end of a mapping: -EINVAL, no copy-back, nothing unmapped.
    unmapped = 12345;
    CHECK_ERRNO(unmap_dma(c, iova + page, page, &unmapped), EINVAL);
    CHECK(unmapped == page);  // the user's struct is not written on failure
    CHECK_ERRNO(unmap_dma(c, iova, page), EINVAL);
    CHECK_ERRNO(unmap_dma(c, iova - page, 2 * page), EINVAL);
    CHECK_ERRNO(unmap_dma(c, iova + 3 * page, 2 * page), EINVAL);
    CHECK_ERRNO(map_dma(c, b.va(), iova, 4 * page), EEXIST);  // still there
    // A range covering the whole mapping and holes around it.
    CHECK_OK(unmap_dma(c, iova - 4 * page, 12 * page, &unmapped));
    CHECK(unmapped == 4 * page);
    CHECK_OK(unmap_dma(c, iova, 4 * page, &unmapped));
    CHECK(unmapped == 0);

    // Several mappings in one range: the sizes add up.
    REQUIRE_OK(map_dma(c, b.va(), iova, page));
    REQUIRE_OK(map_dma(c, b.va(page), iova + 2 * page, 2 * page));
    REQUIRE_OK(map_dma(c, b.va(4 * page), iova + 8 * page, page));
    CHECK_OK(unmap_dma(c, iova, 4 * page, &unmapped));
    CHECK(unmapped == 3 * page);
    // UNMAP_FLAG_ALL: iova and size must be 0; it removes everything.
    REQUIRE_OK(map_dma(c, b.va(), iova, 2 * page));
    CHECK_ERRNO(unmap_dma(c, iova, 0, nullptr, VFIO_DMA_UNMAP_FLAG_ALL), EINVAL);
    CHECK_ERRNO(unmap_dma(c, 0, page, nullptr, VFIO_DMA_UNMAP_FLAG_ALL), EINVAL);
    CHECK_ERRNO(unmap_dma(c, 0, 0, nullptr, VFIO_DMA_UNMAP_FLAG_ALL | VFIO_DMA_UNMAP_FLAG_GET_DIRTY_BITMAP), EINVAL);
    CHECK_OK(unmap_dma(c, 0, 0, &unmapped, VFIO_DMA_UNMAP_FLAG_ALL));
    CHECK(unmapped == 3 * page);
    CHECK_OK(unmap_dma(c, 0, 0, &unmapped, VFIO_DMA_UNMAP_FLAG_ALL));
    CHECK(unmapped == 0);
}

TEST_CASE("iommu: type1 (v1) unmap semantics") {
    vfio_handles h = open_device(0, VFIO_TYPE1_IOMMU);
    const int c = h.container.get();
    const std::uint64_t iova = pick_iova(c);
    buffer b(4 * page);
    std::uint64_t unmapped = 1;
    REQUIRE_OK(map_dma(c, b.va(), iova, 4 * page));
    // v1: a range starting inside a mapping succeeds with size 0 ...
    CHECK_OK(unmap_dma(c, iova + page, page, &unmapped));
    CHECK(unmapped == 0);
    // ... and one covering its first IOVA removes all of it.
    CHECK_OK(unmap_dma(c, iova, page, &unmapped));
    CHECK(unmapped == 4 * page);
}

TEST_CASE("iommu: VFIO_UPDATE_VADDR (UNMAP_FLAG_VADDR then MAP_FLAG_VADDR)") {
    vfio_handles h = open_device(0);
    const int c = h.container.get();
    CHECK(ioctl(c, VFIO_CHECK_EXTENSION, VFIO_UPDATE_VADDR) == 1);  // vfio_iommu_type1_check_extension
    const std::uint64_t iova = pick_iova(c);
    buffer a(2 * page), b(2 * page);
    std::uint64_t unmapped = 0;
    REQUIRE_OK(map_dma(c, a.va(), iova, 2 * page));
    CHECK_ERRNO(map_dma(c, b.va(), iova, 2 * page, VFIO_DMA_MAP_FLAG_VADDR), EINVAL);  // vaddr still valid
    CHECK_OK(unmap_dma(c, iova, 2 * page, &unmapped, VFIO_DMA_UNMAP_FLAG_VADDR));
    CHECK(unmapped == 2 * page);
    CHECK_ERRNO(map_dma(c, b.va(), iova, page, VFIO_DMA_MAP_FLAG_VADDR), EINVAL);  // size differs
    CHECK_OK(map_dma(c, b.va(), iova, 2 * page, VFIO_DMA_MAP_FLAG_VADDR));
    CHECK_OK(unmap_dma(c, iova, 2 * page, &unmapped));
    CHECK(unmapped == 2 * page);
}

// ---------------------------------------------------------------------------------------
// Lifecycles
// ---------------------------------------------------------------------------------------

TEST_CASE("lifecycle: close everything and reopen, in any order, three times") {
    for (int cycle = 0; cycle < 3; ++cycle) {
        CAPTURE(cycle);
        vfio_handles h = open_device(0);
        buffer b(page);
        const std::uint64_t iova = pick_iova(h.container.get());
        CHECK_OK(map_dma(h.container.get(), b.va(), iova, page));
        const vfio_region_info bar0 = region_info(h.device.get(), VFIO_PCI_BAR0_REGION_INDEX);
        void* p = ::mmap(nullptr, bar0.size, PROT_READ | PROT_WRITE, MAP_SHARED, h.device.get(), 0);
        REQUIRE(p != MAP_FAILED);
        CHECK((be32(static_cast<std::uint8_t*>(p) + 4) >> 16) == 5);
        unique_fd efd(::eventfd(0, EFD_NONBLOCK));
        CHECK_OK(set_eventfds(h.device.get(), VFIO_PCI_MSIX_IRQ_INDEX, 0, {efd.get()}));
        ::munmap(p, bar0.size);
        // container.c: "Must support container/group/device being closed in any order."
        if (cycle == 0) {
            h.device.reset();
            h.group.reset();
            h.container.reset();
        } else if (cycle == 1) {
            h.container.reset();
            vfio_device_info info{};
            info.argsz = sizeof(info);
            CHECK_OK(ioctl(h.device.get(), VFIO_DEVICE_GET_INFO, &info));
            h.group.reset();
            h.device.reset();
        } else {
            h.group.reset();
            h.container.reset();
            h.device.reset();
        }
    }
}

TEST_CASE("lifecycle: the device fd holds the group file (vfio_device_assign_container)") {
    vfio_handles h = open_device(0);
    buffer b(page);
    const std::uint64_t iova = pick_iova(h.container.get());
    h.group.reset();
    // The group is still open inside the kernel: a new open is -EBUSY ...
    CHECK_ERRNO(::open(group_path(0).c_str(), O_RDWR), EBUSY);
    // ... the device works ...
    vfio_device_info info{};
    info.argsz = sizeof(info);
    CHECK_OK(ioctl(h.device.get(), VFIO_DEVICE_GET_INFO, &info));
    CHECK(config_read16(h.device.get(), PCI_VENDOR_ID) == 0x15b3);
    // ... and the container still has its group, so its IOMMU stays set.
    CHECK_OK(map_dma(h.container.get(), b.va(), iova, page));
    h.device.reset();
    // The last reference went with the device: group released, container deprivileged.
    unique_fd g = open_fd(group_path(0));
    CHECK(g);
    CHECK_ERRNO(map_dma(h.container.get(), b.va(), iova + page, page), EINVAL);
    vfio_group_status st{};
    st.argsz = sizeof(st);
    CHECK_OK(ioctl(g.get(), VFIO_GROUP_GET_STATUS, &st));
    CHECK(st.flags == VFIO_GROUP_FLAGS_VIABLE);
}

TEST_CASE("lifecycle: dup'd device fds share one open file") {
    vfio_handles h = open_device(0);
    unique_fd copy(::dup(h.device.get()));
    REQUIRE(copy);
    h.device.reset();
    vfio_device_info info{};
    info.argsz = sizeof(info);
    CHECK_OK(ioctl(copy.get(), VFIO_DEVICE_GET_INFO, &info));
    CHECK(config_read16(copy.get(), PCI_VENDOR_ID) == 0x15b3);
    CHECK_ERRNO(ioctl(h.group.get(), VFIO_GROUP_UNSET_CONTAINER), EBUSY);
    // dup2 over the last device fd closes the device.
    unique_fd null = open_fd("/dev/null", O_RDONLY);
    REQUIRE(::dup2(null.get(), copy.get()) == copy.get());
    char c = 0;
    CHECK(::read(copy.get(), &c, 1) == 0);  // it is /dev/null now
    CHECK_OK(ioctl(h.group.get(), VFIO_GROUP_UNSET_CONTAINER));
}

TEST_CASE("lifecycle: a reused fd number is an ordinary file again") {
    vfio_handles h = open_device(0);
    const int number = h.device.get();
    h.device.reset();
    unique_fd mem(static_cast<int>(syscall(SYS_memfd_create, "reuse", 0)));
    REQUIRE(mem);
    WARN(mem.get() == number);  // the lowest free number, unless the preload left a hole
    if (mem.get() != number) {
        REQUIRE(::dup2(mem.get(), number) == number);
        mem.reset(number);
    }
    const char text[] = "plain";
    CHECK(::pwrite(mem.get(), text, 5, 0) == 5);
    char buf[8] = {};
    CHECK(::pread(mem.get(), buf, 5, 0) == 5);
    CHECK(std::string(buf, 5) == "plain");
    CHECK(::pread(mem.get(), buf, 4, static_cast<off_t>(region_offset(VFIO_PCI_CONFIG_REGION_INDEX))) == 0);  // EOF
    CHECK_ERRNO(ioctl(mem.get(), VFIO_DEVICE_GET_INFO, buf), ENOTTY);
}

TEST_CASE("lifecycle: two devices in one container") {
    unique_fd c = open_fd("/dev/vfio/vfio");
    unique_fd g0 = open_fd(group_path(0));
    unique_fd g1 = open_fd(group_path(1));
    REQUIRE(g0);
    REQUIRE(g1);
    int cfd = c.get();
    REQUIRE_OK(ioctl(g0.get(), VFIO_GROUP_SET_CONTAINER, &cfd));
    REQUIRE_OK(ioctl(c.get(), VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU));
    REQUIRE_OK(ioctl(g1.get(), VFIO_GROUP_SET_CONTAINER, &cfd));  // attaches to the live IOMMU
    unique_fd d0(ioctl(g0.get(), VFIO_GROUP_GET_DEVICE_FD, bdf(0).c_str()));
    unique_fd d1(ioctl(g1.get(), VFIO_GROUP_GET_DEVICE_FD, bdf(1).c_str()));
    REQUIRE(d0);
    REQUIRE(d1);
    CHECK_ERRNO(ioctl(g0.get(), VFIO_GROUP_GET_DEVICE_FD, bdf(1).c_str()), ENODEV);
    CHECK(config_read16(d1.get(), PCI_VENDOR_ID) == 0x15b3);
    buffer b(page);
    const std::uint64_t iova = pick_iova(c.get());
    CHECK_OK(map_dma(c.get(), b.va(), iova, page));
    CHECK_ERRNO(ioctl(g1.get(), VFIO_GROUP_UNSET_CONTAINER), EBUSY);
    d1.reset();
    CHECK_OK(ioctl(g1.get(), VFIO_GROUP_UNSET_CONTAINER));
    // Group 0 keeps the container privileged and its mappings alive.
    CHECK_ERRNO(map_dma(c.get(), b.va(), iova, page), EEXIST);
    CHECK_ERRNO(ioctl(g1.get(), VFIO_GROUP_GET_DEVICE_FD, bdf(1).c_str()), EINVAL);
    d0.reset();
    g0.reset();  // releasing the last group drops the IOMMU and its mappings
    CHECK_ERRNO(map_dma(c.get(), b.va(), iova, page), EINVAL);
    REQUIRE_OK(ioctl(g1.get(), VFIO_GROUP_SET_CONTAINER, &cfd));
    REQUIRE_OK(ioctl(c.get(), VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU));
    CHECK_OK(map_dma(c.get(), b.va(), iova, page));  // a fresh, empty IOMMU
}

TEST_CASE("lifecycle: two devices in separate containers") {
    vfio_handles a = open_device(0);
    vfio_handles b = open_device(1);
    buffer buf(2 * page);
    const std::uint64_t iova = pick_iova(a.container.get());
    CHECK_OK(map_dma(a.container.get(), buf.va(), iova, page));
    CHECK_OK(map_dma(b.container.get(), buf.va(page), iova, page));  // separate IOVA spaces
    std::uint64_t unmapped = 0;
    CHECK_OK(unmap_dma(a.container.get(), iova, page, &unmapped));
    CHECK(unmapped == page);
    CHECK_OK(unmap_dma(b.container.get(), iova, page, &unmapped));
    CHECK(unmapped == page);
    // A group cannot join a second container.
    int other = a.container.get();
    CHECK_ERRNO(ioctl(b.group.get(), VFIO_GROUP_SET_CONTAINER, &other), EINVAL);
}

// ---------------------------------------------------------------------------------------
// Everything else passes through
// ---------------------------------------------------------------------------------------

TEST_CASE("passthrough: ordinary fds behave normally under the preload") {
    // /dev/null
    unique_fd null = open_fd("/dev/null");
    REQUIRE(null);
    char c = 0;
    CHECK(::read(null.get(), &c, 1) == 0);
    CHECK(::write(null.get(), "abc", 3) == 3);
    // A pipe: FIONREAD, and a VFIO ioctl number on it is the pipe's -ENOTTY.
    int p[2];
    REQUIRE(::pipe(p) == 0);
    unique_fd r(p[0]), w(p[1]);
    CHECK(::write(w.get(), "hello", 5) == 5);
    int avail = 0;
    CHECK_OK(ioctl(r.get(), FIONREAD, &avail));
    CHECK(avail == 5);
    CHECK_ERRNO(ioctl(r.get(), VFIO_GET_API_VERSION), ENOTTY);
    CHECK_ERRNO(ioctl(r.get(), VFIO_DEVICE_GET_INFO, &avail), ENOTTY);
    // eventfd
    unique_fd efd(::eventfd(3, EFD_NONBLOCK));
    std::uint64_t v = 0;
    CHECK(::read(efd.get(), &v, 8) == 8);
    CHECK(v == 3);
    CHECK_ERRNO(::read(efd.get(), &v, 8), EAGAIN);
    // memfd: pwrite/pread at VFIO-looking offsets, mmap.
    unique_fd mem(static_cast<int>(syscall(SYS_memfd_create, "plain", 0)));
    REQUIRE(mem);
    REQUIRE(::ftruncate(mem.get(), 2 * page) == 0);
    auto* m = static_cast<char*>(::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, mem.get(), 0));
    REQUIRE(m != MAP_FAILED);
    std::memcpy(m + page, "mapped", 6);
    char buf[8] = {};
    CHECK(::pread(mem.get(), buf, 6, static_cast<off_t>(page)) == 6);
    CHECK(std::string(buf, 6) == "mapped");
    CHECK(::pread(mem.get(), buf, 4, static_cast<off_t>(region_offset(VFIO_PCI_CONFIG_REGION_INDEX))) == 0);
    ::munmap(m, 2 * page);
    // A regular file.
    char path[] = "/tmp/cxv_vfio_passthroughXXXXXX";
    unique_fd tmp(::mkstemp(path));
    REQUIRE(tmp);
    ::unlink(path);
    CHECK(::write(tmp.get(), "0123456789", 10) == 10);
    CHECK(::pread(tmp.get(), buf, 4, 3) == 4);
    CHECK(std::string(buf, 4) == "3456");
    struct stat st {};
    CHECK_OK(::fstat(tmp.get(), &st));
    CHECK(st.st_size == 10);
    // Bad fds are the kernel's EBADF (libibverbs does ioctl(-1, RDMA_VERBS_IOCTL, ...)).
    CHECK_ERRNO(ioctl(-1, _IOWR(0x1b, 1, std::uint64_t), &v), EBADF);
    CHECK_ERRNO(::close(-1), EBADF);
    CHECK_ERRNO(::pread(-1, buf, 1, 0), EBADF);
    CHECK_ERRNO(::open("/nonexistent/cxv", O_RDONLY), ENOENT);
    CHECK_OK(::stat("/", &st));
    CHECK(S_ISDIR(st.st_mode));
    char exe[256];
    CHECK(::readlink("/proc/self/exe", exe, sizeof(exe)) > 0);
}

TEST_CASE("passthrough: the PCI device directory lists the emulated functions (readdir)") {
    DIR* dir = ::opendir("/sys/bus/pci/devices");
    REQUIRE(dir != nullptr);
    std::vector<std::string> names;
    while (dirent* e = ::readdir(dir)) names.emplace_back(e->d_name);
    ::closedir(dir);
    for (unsigned i = 0; i < num_devices; ++i) {
        CAPTURE(bdf(i));
        CHECK(std::find(names.begin(), names.end(), bdf(i)) != names.end());
    }
}

}  // namespace cxv::vfio_test
