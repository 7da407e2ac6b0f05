// Containers and their IOMMU domain: what drivers/vfio/container.c and
// drivers/vfio/vfio_iommu_type1.c do (Linux 6.1), errno for errno.
#include <linux/vfio.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "sim/vfio/host.h"

namespace cxv::sim::vfio {

namespace {

constexpr std::uint64_t kPage = 4096;

// The usable IOVA ranges of an x86 IOMMU with 48-bit addresses: everything but the
// interrupt-remapping window 0xfee00000-0xfeefffff (the kernel's reserved MSI region).
struct iova_range {
    std::uint64_t start, end;  // inclusive
};
constexpr iova_range kIovaRanges[] = {{0, 0xfedfffffull}, {0xfef00000ull, (1ull << 48) - 1}};

bool iova_valid(std::uint64_t start, std::uint64_t end) {
    for (const auto& r : kIovaRanges) {
        if (start >= r.start && end <= r.end) return true;
    }
    return false;
}

// vfio_pin_pages_remote pins every page (for writing if the device may write): an
// address with no mapping, or without the access, is EFAULT. Read from /proc/self/maps.
bool pinnable(std::uint64_t vaddr, std::uint64_t size, bool write) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    std::uint64_t at = vaddr;
    const std::uint64_t end = vaddr + size;
    while (at < end && std::getline(maps, line)) {
        unsigned long long lo = 0, hi = 0;
        char perms[5] = {};
        if (std::sscanf(line.c_str(), "%llx-%llx %4s", &lo, &hi, perms) != 3) continue;
        if (hi <= at) continue;
        if (lo > at) return false;  // a hole
        if (perms[0] != 'r' || (write && perms[1] != 'w')) return false;
        at = hi;
    }
    return at >= end;
}

long check_extension(const container_file& c, unsigned long ext) {
    switch (ext) {
    case VFIO_TYPE1_IOMMU:
    case VFIO_TYPE1v2_IOMMU:
    case VFIO_TYPE1_NESTING_IOMMU:
    case VFIO_UNMAP_ALL:
        return 1;
    case VFIO_DMA_CC_IOMMU:  // the domain enforces cache coherency once it exists
    case VFIO_UPDATE_VADDR:  // offered by an IOMMU model without emulated (mdev) groups
        return c.iommu_set ? 1 : 0;
    default:
        return 0;  // sPAPR and no-IOMMU models
    }
}

// Appends a capability to a chain being built after `base` bytes of info structure
// (vfio_info_cap_add + vfio_info_cap_shift).
void add_cap(std::vector<std::byte>& caps, std::size_t base, const void* cap, std::size_t size) {
    const std::size_t at = caps.size();
    caps.resize(at + size);
    std::memcpy(caps.data() + at, cap, size);
    if (at == 0) return;
    std::size_t cur = 0;
    for (;;) {
        vfio_info_cap_header h;
        std::memcpy(&h, caps.data() + cur, sizeof h);
        if (h.next == 0) {
            h.next = static_cast<std::uint32_t>(base + at);
            std::memcpy(caps.data() + cur, &h, sizeof h);
            return;
        }
        cur = h.next - base;
    }
}

}  // namespace

long host::container_ioctl(const std::shared_ptr<container_file>& c, unsigned long request,
                           void* arg) {
    const auto value = reinterpret_cast<unsigned long>(arg);
    switch (request) {
    case VFIO_GET_API_VERSION:
        return VFIO_API_VERSION;
    case VFIO_CHECK_EXTENSION:
        return check_extension(*c, value);
    case VFIO_SET_IOMMU:
        // vfio_ioctl_set_iommu: only a container with groups and no model yet.
        if (c->groups.empty() || c->iommu_set) return -EINVAL;
        if (value != VFIO_TYPE1_IOMMU && value != VFIO_TYPE1v2_IOMMU) return -ENODEV;
        c->iommu_set = true;
        c->v2 = value == VFIO_TYPE1v2_IOMMU;
        for (function_state* f : c->groups) attach_group(*c, *f);
        return 0;
    default:
        break;
    }
    if (!c->iommu_set) return -EINVAL;  // no IOMMU driver to pass the ioctl to
    switch (request) {
    case VFIO_IOMMU_GET_INFO:
        return iommu_get_info(*c, arg);
    case VFIO_IOMMU_MAP_DMA:
        return iommu_map_dma(*c, arg);
    case VFIO_IOMMU_UNMAP_DMA:
        return iommu_unmap_dma(*c, arg);
    default:
        return -ENOTTY;  // including VFIO_IOMMU_DIRTY_PAGES (not emulated)
    }
}

long host::iommu_get_info(container_file& c, void* arg) {
    // vfio_iommu_type1_get_info
    vfio_iommu_type1_info info{};
    std::size_t minsz = offsetof(vfio_iommu_type1_info, cap_offset);
    std::memcpy(&info, arg, minsz);
    if (info.argsz < minsz) return -EINVAL;
    constexpr std::size_t capsz = offsetof(vfio_iommu_type1_info, cap_offset) + sizeof(std::uint32_t);
    if (info.argsz >= capsz) {  // "for backward compatibility, cannot require this"
        minsz = capsz;
        info.cap_offset = 0;
    }
    info.flags = VFIO_IOMMU_INFO_PGSIZES;
    info.iova_pgsizes = ~(kPage - 1);  // PAGE_MASK: every power of two from 4 KiB

    std::vector<std::byte> caps;
    const std::size_t base = sizeof info;
    vfio_iommu_type1_info_cap_migration mig{};
    mig.header = {VFIO_IOMMU_TYPE1_INFO_CAP_MIGRATION, 1, 0};
    mig.pgsize_bitmap = kPage;
    mig.max_dirty_bitmap_size = (std::uint64_t{0x7fffffff} + 63) / 64 * 8;
    add_cap(caps, base, &mig, sizeof mig);
    vfio_iommu_type1_info_dma_avail avail{};
    avail.header = {VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL, 1, 0};
    avail.avail = c.dma_avail;
    add_cap(caps, base, &avail, sizeof avail);
    constexpr std::size_t nr = std::size(kIovaRanges);
    std::vector<std::byte> ranges(sizeof(vfio_iommu_type1_info_cap_iova_range) +
                                  nr * sizeof(vfio_iova_range));
    auto* r = reinterpret_cast<vfio_iommu_type1_info_cap_iova_range*>(ranges.data());
    r->header = {VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE, 1, 0};
    r->nr_iovas = nr;
    for (std::size_t i = 0; i < nr; ++i) {
        const vfio_iova_range one{kIovaRanges[i].start, kIovaRanges[i].end};
        std::memcpy(ranges.data() + sizeof(*r) + i * sizeof one, &one, sizeof one);
    }
    add_cap(caps, base, ranges.data(), ranges.size());

    info.flags |= VFIO_IOMMU_INFO_CAPS;
    if (info.argsz < base + caps.size()) {
        info.argsz = static_cast<std::uint32_t>(base + caps.size());
    } else {
        std::memcpy(static_cast<std::byte*>(arg) + base, caps.data(), caps.size());
        info.cap_offset = static_cast<std::uint32_t>(base);
    }
    std::memcpy(arg, &info, minsz);
    return 0;
}

long host::iommu_map_dma(container_file& c, void* arg) {
    // vfio_iommu_type1_map_dma + vfio_dma_do_map
    vfio_iommu_type1_dma_map map{};
    std::memcpy(&map, arg, sizeof map);
    const std::uint32_t mask = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE | VFIO_DMA_MAP_FLAG_VADDR;
    if (map.argsz < sizeof map || (map.flags & ~mask)) return -EINVAL;
    const bool readable = map.flags & VFIO_DMA_MAP_FLAG_READ;
    const bool writable = map.flags & VFIO_DMA_MAP_FLAG_WRITE;
    const bool set_vaddr = map.flags & VFIO_DMA_MAP_FLAG_VADDR;
    const bool prot = readable || writable;
    if (prot == set_vaddr) return -EINVAL;
    if (map.size == 0 || ((map.size | map.iova | map.vaddr) & (kPage - 1))) return -EINVAL;
    if (map.iova + map.size - 1 < map.iova || map.vaddr + map.size - 1 < map.vaddr) return -EINVAL;
    const iommu_mapping* hit = nullptr;
    const auto table = c.domain.mappings();
    for (const auto& m : table) {
        if (m.iova < map.iova + map.size && map.iova < m.iova + m.size) {
            hit = &m;
            break;
        }
    }
    if (set_vaddr) {
        // A new address for a mapping whose vaddr was invalidated, exactly as mapped.
        if (hit == nullptr) return -ENOENT;
        if (!c.vaddr_invalid.contains(hit->iova) || hit->iova != map.iova || hit->size != map.size) {
            return -EINVAL;
        }
        auto* vaddr = reinterpret_cast<std::byte*>(map.vaddr);
        (void)c.domain.unmap(hit->iova, hit->size);
        (void)c.domain.map(hit->iova, vaddr, hit->size, hit->readable, hit->writable);
        for (function_state* f : c.groups) {
            (void)f->model->mmu().map(hit->iova, vaddr, hit->size, hit->readable, hit->writable);
        }
        c.vaddr_invalid.erase(hit->iova);
        return 0;
    }
    if (hit != nullptr) return -EEXIST;
    if (c.dma_avail == 0) return -ENOSPC;
    if (!iova_valid(map.iova, map.iova + map.size - 1)) return -EINVAL;
    if (!pinnable(map.vaddr, map.size, writable)) return -EFAULT;
    auto* vaddr = reinterpret_cast<void*>(map.vaddr);
    if (c.domain.map(map.iova, vaddr, map.size, readable, writable) != map_error::none) return -EINVAL;
    --c.dma_avail;
    for (function_state* f : c.groups) {
        (void)f->model->mmu().map(map.iova, vaddr, map.size, readable, writable);
    }
    return 0;
}

long host::iommu_unmap_dma(container_file& c, void* arg) {
    // vfio_iommu_type1_unmap_dma + vfio_dma_do_unmap
    vfio_iommu_type1_dma_unmap unmap{};
    std::memcpy(&unmap, arg, sizeof unmap);
    const std::uint32_t mask = VFIO_DMA_UNMAP_FLAG_GET_DIRTY_BITMAP | VFIO_DMA_UNMAP_FLAG_VADDR |
                               VFIO_DMA_UNMAP_FLAG_ALL;
    if (unmap.argsz < sizeof unmap || (unmap.flags & ~mask)) return -EINVAL;
    if ((unmap.flags & VFIO_DMA_UNMAP_FLAG_GET_DIRTY_BITMAP) &&
        (unmap.flags & (VFIO_DMA_UNMAP_FLAG_ALL | VFIO_DMA_UNMAP_FLAG_VADDR))) {
        return -EINVAL;
    }
    // Dirty tracking is never started here, so a bitmap request is always refused.
    if (unmap.flags & VFIO_DMA_UNMAP_FLAG_GET_DIRTY_BITMAP) return -EINVAL;
    const bool invalidate_vaddr = unmap.flags & VFIO_DMA_UNMAP_FLAG_VADDR;
    const bool all = unmap.flags & VFIO_DMA_UNMAP_FLAG_ALL;
    std::uint64_t iova = unmap.iova;
    std::uint64_t size = unmap.size;
    if (iova & (kPage - 1)) return -EINVAL;
    if (all) {
        if (iova || size) return -EINVAL;
        size = ~std::uint64_t{0};
    } else if (size == 0 || (size & (kPage - 1)) || iova + size - 1 < iova) {
        return -EINVAL;
    }
    const std::uint64_t last = iova + size - 1;
    const auto table = c.domain.mappings();
    if (c.v2 && !all) {
        // Type1 v2: the range may not bisect a mapping at either end.
        for (const auto& m : table) {
            const std::uint64_t m_last = m.iova + m.size - 1;
            if (m.iova <= iova && iova <= m_last && m.iova != iova) return -EINVAL;
            if (m.iova <= last && last <= m_last && m_last != last) return -EINVAL;
        }
    }
    std::uint64_t unmapped = 0;
    if (invalidate_vaddr) {
        // The mappings stay; their vaddr is gone until MAP_DMA with FLAG_VADDR replaces
        // it. (The kernel makes device accesses wait meanwhile; here they fault.)
        std::vector<std::uint64_t> marked;
        for (const auto& m : table) {
            if (m.iova > last || m.iova + m.size - 1 < iova) continue;
            if (!c.v2 && iova > m.iova) break;
            if (c.vaddr_invalid.contains(m.iova)) {
                for (auto a : marked) c.vaddr_invalid.erase(a);
                for (auto a : marked) {
                    for (const auto& back : table) {
                        if (back.iova != a) continue;
                        for (function_state* f : c.groups) {
                            (void)f->model->mmu().map(a, back.vaddr, back.size, back.readable,
                                                      back.writable);
                        }
                    }
                }
                return -EINVAL;
            }
            c.vaddr_invalid.insert(m.iova);
            marked.push_back(m.iova);
            for (function_state* f : c.groups) (void)f->model->mmu().unmap(m.iova, m.size);
            unmapped += m.size;
        }
        unmap.size = unmapped;
        std::memcpy(arg, &unmap, sizeof unmap);
        return 0;
    }
    for (const auto& m : table) {
        if (m.iova > last || m.iova + m.size - 1 < iova) continue;
        // Type1 v1: a request starting inside a mapping unmaps nothing from there on.
        if (!c.v2 && iova > m.iova) break;
        (void)c.domain.unmap(m.iova, m.size);
        for (function_state* f : c.groups) (void)f->model->mmu().unmap(m.iova, m.size);
        c.vaddr_invalid.erase(m.iova);
        unmapped += m.size;
        ++c.dma_avail;
    }
    unmap.size = unmapped;
    std::memcpy(arg, &unmap, sizeof unmap);
    return 0;
}

}  // namespace cxv::sim::vfio
