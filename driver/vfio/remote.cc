// vfio::device reached through the process that owns the function (docs/daemon.md):
// DMA memory as sealed memfds handed over for mapping, UAR pages granted one at a time
// and mapped at their place in a BAR0-sized reservation.
#include <fcntl.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "base/errno_text.h"
#include "driver/vfio/device_impl.h"
#include "driver/vfio/memfd_ranges.h"
#include "hw/mmio.h"

namespace cxv::driver::vfio {

namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kHuge = std::uint64_t{2} << 20;


// A mapping made by the owner: unmapped there (UNMAP_MEMORY) before the memory goes here.
struct remote_mapping {
    std::shared_ptr<remote_backend> backend;
    std::uint64_t iova = 0;
    void* owned = nullptr;  // the memfd mapping this buffer allocated (munmap on release)
    std::size_t size = 0;
    ~remote_mapping() {
        (void)backend->unmap_memory(iova);
        if (owned) ::munmap(owned, size);
    }
};

// The line of /proc/self/maps (proc(5)) that holds [lo, hi) whole.
struct maps_line {
    std::uint64_t start = 0, end = 0, offset = 0;
    std::string perms, path;
};
std::optional<maps_line> find_mapping(std::uint64_t lo, std::uint64_t hi) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        maps_line m;
        char perms[8] = {};
        int path_at = 0;
        if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*u %n", &m.start, &m.end, perms,
                        &m.offset, &path_at) < 4) {
            continue;
        }
        if (lo < m.start || lo >= m.end) continue;
        if (hi > m.end) return std::nullopt;  // spans mappings: not one file
        m.perms = perms;
        if (path_at > 0 && static_cast<std::size_t>(path_at) <= line.size()) m.path = line.substr(path_at);
        return m;
    }
    return std::nullopt;
}

}  // namespace

result<dma_buffer> device::remote_map(int fd, std::uint64_t offset, void* vaddr, std::size_t size, bool writable,
                                      bool owned, std::size_t align) {
    auto iova = p_->remote->backend->map_memory(fd, offset, size, writable, align);
    if (!iova) return iova.error();
    auto owner = std::make_shared<remote_mapping>();
    owner->backend = p_->remote->backend;
    owner->iova = *iova;
    owner->owned = owned ? vaddr : nullptr;
    owner->size = size;
    return dma_buffer(std::move(owner), vaddr, *iova, size);
}

// memfd_create(2) with sealing; F_SEAL_SHRINK (the owner refuses memory that could be cut
// short under its mapping) and F_SEAL_GROW, then the seals sealed. Huge pages as
// MFD_HUGETLB: a hugetlbfs file cannot be sealed, a hugetlb memfd can.
result<dma_buffer> device::remote_alloc(std::size_t size, bool huge, std::size_t align) {
    const std::uint64_t unit = huge ? kHuge : kPage;
    size = static_cast<std::size_t>((size + unit - 1) & ~(unit - 1));
    const unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB | MFD_HUGE_2MB : 0u);
    // The owner and the mapping keep the file: this process's fd closes on return.
    const unique_fd fd(::memfd_create("cxv-dma", flags));
    if (!fd) return sys_error(errno, p_->bdf + ": memfd_create for DMA memory");
    if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
        const int e = errno;
        if (huge) {
            return error{e, fmt::format("{}: {} MiB of 2 MiB hugepages: {} (reserve them: echo N > "
                                        "/proc/sys/vm/nr_hugepages)", p_->bdf, size >> 20, std::strerror(e))};
        }
        return sys_error(e, p_->bdf + ": ftruncate of a DMA memfd");
    }
    if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        const int e = errno;
        return sys_error(e, p_->bdf + ": sealing a DMA memfd");
    }
    void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd.get(), 0);
    if (mem == MAP_FAILED) return sys_error(errno, p_->bdf + ": mmap of a DMA memfd");
    auto b = remote_map(fd.get(), 0, mem, size, true, true, align);
    if (!b) ::munmap(mem, size);
    return b;
}

// The owner maps the same file as this process, so the device and this process see the
// same pages. The file: a range registered with its fd or private memory re-backed by a
// memfd in place (memfd_ranges.h); else the caller's own shared memfd mapping, opened
// through /proc/self/map_files (proc(5)).
result<dma_buffer> device::remote_map_user(void* p, std::size_t len, bool writable, std::size_t align) {
    const auto lo = reinterpret_cast<std::uintptr_t>(p) & ~(kPage - 1);
    const auto hi = (reinterpret_cast<std::uintptr_t>(p) + len + kPage - 1) & ~(kPage - 1);
    const std::string what = fmt::format("{}: registering [{}, +{}) through cxvd", p_->bdf, p, len);
    if (auto s = memfd_behind(lo, hi, writable)) {
        auto b = remote_map(s->fd, s->offset, reinterpret_cast<void*>(lo), hi - lo, writable, false, align);
        if (!b) return b.error();
        // The registration counts as held until the mapping is unmapped (after it).
        b->owner_ = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(std::move(s->hold),
                                                                                              std::move(b->owner_));
        return b;
    } else if (s.error().code != ENOENT) {
        return error{s.error().code, fmt::format("{}: {}", what, s.error().message)};
    }
    constexpr const char* how =
        "allocate it with cxv::buffer, or as a sealed memfd (memfd_create(MFD_ALLOW_SEALING), ftruncate, "
        "fcntl(F_ADD_SEALS, F_SEAL_SHRINK), mmap(MAP_SHARED)) -- the daemon maps the same file -- "
        "or as private memory, which registration re-backs with a memfd";
    auto m = find_mapping(lo, hi);
    if (!m) return error{EINVAL, fmt::format("{}: the range is not inside one mapping; {}", what, how)};
    if (m->path.rfind("/memfd:", 0) != 0 || m->perms.size() < 4 || m->perms[3] != 's') {
        return error{EINVAL, fmt::format("{}: the memory is {} ({}), which another process cannot map; {}", what,
                                         m->path.empty() ? "anonymous" : m->path,
                                         m->perms.size() >= 4 && m->perms[3] == 's' ? "shared" : "private", how)};
    }
    const std::string link = fmt::format("/proc/self/map_files/{:x}-{:x}", m->start, m->end);
    const unique_fd fd(::open(link.c_str(), writable ? O_RDWR | O_CLOEXEC : O_RDONLY | O_CLOEXEC));
    if (!fd) {
        const int e = errno;
        return error{e, fmt::format("{}: opening {} for the memfd behind it: {} (this needs CAP_SYS_ADMIN or "
                                    "CAP_CHECKPOINT_RESTORE)", what, link, std::strerror(e))};
    }
    return remote_map(fd.get(), m->offset + (lo - m->start), reinterpret_cast<void*>(lo), hi - lo, writable, false,
                      align);
}

namespace {

// Anonymous memory over [at, at + len): the file mapped there loses this reference.
void replace_with_anonymous(void* at, std::size_t len) noexcept {
    (void)::mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
}

}  // namespace

void remote_backend::drop_device_mappings() noexcept {
    std::lock_guard lock(maps_mu_);
    maps_dropped_ = true;
    for (const auto& [at, len] : maps_) replace_with_anonymous(at, len);
    maps_.clear();
}

bool remote_backend::add_device_mapping(void* at, std::size_t len) noexcept {
    std::lock_guard lock(maps_mu_);
    if (maps_dropped_) {
        replace_with_anonymous(at, len);
        return false;
    }
    try {
        maps_.emplace_back(at, len);
    } catch (...) {
        replace_with_anonymous(at, len);  // not kept track of: not kept
        return false;
    }
    return true;
}

void remote_backend::remove_device_mappings(void* lo, std::size_t len) noexcept {
    std::lock_guard lock(maps_mu_);
    const auto b = reinterpret_cast<std::uintptr_t>(lo);
    std::erase_if(maps_, [&](const auto& m) {
        const auto a = reinterpret_cast<std::uintptr_t>(m.first);
        return a >= b && a < b + len;
    });
}

result<std::uint32_t> device::alloc_uar() {
    if (!p_->remote) {
        return error{EOPNOTSUPP, fmt::format("{}: alloc_uar is for a function reached through cxvd", p_->bdf)};
    }
    remote_state& r = *p_->remote;
    std::lock_guard lock(r.mu);
    auto g = r.backend->alloc_uar();
    if (!g) return g.error();
    const std::uint64_t at = std::uint64_t{g->uar} * kPage;
    if (g->mmap_length != kPage || at + kPage > p_->bar_size) {
        g->fd.reset();
        (void)r.backend->dealloc_uar(g->uar);
        return error{EPROTO, fmt::format("{}: UAR page {} ({} bytes) is outside BAR0 ({} bytes)", p_->bdf, g->uar,
                                         g->mmap_length, p_->bar_size)};
    }
    void* m = ::mmap(static_cast<std::byte*>(p_->bar) + at, kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                     g->fd.get(), static_cast<off_t>(g->mmap_offset));
    const int e = errno;
    g->fd.reset();
    if (m == MAP_FAILED) {
        (void)r.backend->dealloc_uar(g->uar);
        return sys_error(e, fmt::format("{}: mmap of UAR page {}", p_->bdf, g->uar));
    }
    // Not into a child (as the kernel's mlx5 maps a UAR, VM_DONTCOPY): a forked child would
    // keep the device file open, and with it the function, past this client's end.
    (void)::madvise(m, kPage, MADV_DONTFORK);
    if (!r.backend->add_device_mapping(m, kPage)) {
        (void)r.backend->dealloc_uar(g->uar);
        return error{ENODEV, fmt::format("{}: UAR page {}: the owner of the function is gone", p_->bdf, g->uar)};
    }
    r.uars.push_back(g->uar);
    return g->uar;
}

}  // namespace cxv::driver::vfio
