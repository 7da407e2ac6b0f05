#include "sim/pci/iommu.h"

#include <algorithm>
#include <thread>

#include "sim/pci/host_guard.h"

namespace cxv::sim {

// --- the table's lock ------------------------------------------------------------------

void iommu::table_lock::lock() {
    writers_.lock();
    // From here on new readers step back; wait for those already copying.
    state_.fetch_or(kWriter, std::memory_order_acquire);
    while (state_.load(std::memory_order_acquire) != kWriter) std::this_thread::yield();
}

void iommu::table_lock::unlock() {
    state_.fetch_and(~kWriter, std::memory_order_release);
    writers_.unlock();
}

void iommu::table_lock::wait_writer() const noexcept {
    while (state_.load(std::memory_order_relaxed) & kWriter) std::this_thread::yield();
}

// --- runs of accesses -----------------------------------------------------------------

namespace {

// The thread's run: the IOMMU it is for (null: none), and whether it holds that IOMMU's
// reader side yet. Initial-exec TLS, one load from the thread pointer: the library is
// never loaded with dlopen (it is linked, or preloaded).
[[gnu::tls_model("initial-exec")]] thread_local const iommu* t_run = nullptr;
[[gnu::tls_model("initial-exec")]] thread_local bool t_run_holds = false;

}  // namespace

iommu::access_run::access_run(const iommu& m) noexcept : m_(m) {
    if (t_run != nullptr) return;  // inside a run already
    t_run = &m;
    t_run_holds = false;
    outer_ = true;
}

iommu::access_run::~access_run() {
    if (!outer_) return;
    if (t_run_holds) m_.lock_.unlock_shared();
    t_run = nullptr;
    t_run_holds = false;
}

// One access's hold of the reader side. Inside the thread's run of this IOMMU the run
// holds it, taken at its first access; never twice (taking it again could wait for a
// writer that waits for the run).
struct iommu::reader {
    explicit reader(const iommu& m) noexcept : l_(m.lock_), held_(t_run != &m) {
        if (held_) {
            l_.lock_shared();
        } else if (!t_run_holds) {
            l_.lock_shared();
            t_run_holds = true;
        }
    }
    ~reader() {
        if (held_) l_.unlock_shared();
    }
    reader(const reader&) = delete;
    reader& operator=(const reader&) = delete;
    const table_lock& l_;
    const bool held_;
};

// --- MAP_DMA, UNMAP_DMA ----------------------------------------------------------------

namespace {

// The first entry that starts above `iova`.
template <class Entries>
auto first_above(Entries& maps, std::uint64_t iova) {
    return std::upper_bound(maps.begin(), maps.end(), iova,
                            [](std::uint64_t a, const auto& e) { return a < e.iova; });
}

}  // namespace

map_error iommu::map(std::uint64_t iova, void* vaddr, std::uint64_t size, bool readable,
                     bool writable) {
    const auto va = reinterpret_cast<std::uintptr_t>(vaddr);
    if (size == 0 || iova % page_size || va % page_size || size % page_size ||
        iova + size < iova || iova + size > iova_limit || (!readable && !writable)) {
        return map_error::invalid;
    }
    std::lock_guard lock(lock_);
    const auto next = first_above(maps_, iova);
    if (next != maps_.end() && next->iova < iova + size) return map_error::exists;
    if (next != maps_.begin() && std::prev(next)->end > iova) return map_error::exists;
    maps_.insert(next, entry{iova, iova + size, static_cast<std::byte*>(vaddr), readable, writable});
    generation_.fetch_add(1, std::memory_order_relaxed);
    return map_error::none;
}

std::optional<std::uint64_t> iommu::unmap(std::uint64_t iova, std::uint64_t size) {
    if (size == 0 || iova % page_size || size % page_size || iova + size < iova) return std::nullopt;
    std::lock_guard lock(lock_);
    const std::uint64_t end = iova + size;
    // A mapping that straddles either end of the range cannot be split; then nothing
    // is unmapped at all (type1 v2 checks both ends before it changes anything).
    auto straddles = [&](std::uint64_t at) {
        const auto it = first_above(maps_, at);
        return it != maps_.begin() && std::prev(it)->iova < at && std::prev(it)->end > at;
    };
    if (straddles(iova) || straddles(end)) return std::nullopt;
    const auto from = std::lower_bound(maps_.begin(), maps_.end(), iova,
                                       [](const entry& e, std::uint64_t a) { return e.iova < a; });
    const auto to = std::find_if(from, maps_.end(), [&](const entry& e) { return e.iova >= end; });
    std::uint64_t unmapped = 0;
    for (auto it = from; it != to; ++it) unmapped += it->end - it->iova;
    maps_.erase(from, to);
    generation_.fetch_add(1, std::memory_order_relaxed);
    return unmapped;
}

std::vector<iommu_mapping> iommu::mappings() const {
    reader r(*this);
    std::vector<iommu_mapping> out;
    out.reserve(maps_.size());
    for (const entry& e : maps_) out.push_back({e.iova, e.vaddr, e.end - e.iova, e.readable, e.writable});
    return out;
}

void iommu::clear() {
    std::lock_guard lock(lock_);
    maps_.clear();
    generation_.fetch_add(1, std::memory_order_relaxed);
}

std::size_t iommu::mapping_count() const {
    reader r(*this);
    return maps_.size();
}

std::uint64_t iommu::mapped_bytes() const {
    reader r(*this);
    std::uint64_t n = 0;
    for (const entry& e : maps_) n += e.end - e.iova;
    return n;
}

// --- device accesses -------------------------------------------------------------------

namespace {

// A device write reaches host memory in address order: the device sends a payload as
// posted-write TLPs in ascending addresses, and PCIe keeps posted writes in order (PCIe
// base spec "Transaction Ordering", relaxed ordering off), so a program that polls the
// last byte of an RDMA WRITE's buffer finds the bytes before it already written, as
// perftest's write_lat does. memcpy gives no such order (glibc's large-copy paths store
// the first block last, `rep movsb` in any order), so host_guard::write stores 16 bytes
// at a time in ascending addresses; x86 makes ordinary stores visible to other cores in
// program order.
//
// The device's accesses are not the program's: the sanitizer build's AddressSanitizer
// checks what the program does with its memory, and never sees a card's DMA, such as a
// write into memory the program freed while a registration and a posted receive still
// named it (UCX's ud_verbs cleanup does that: tests/exec/ucx_test in the sanitizer
// build). host_guard's copies are assembly, which no sanitizer instruments.
//
// A device write moves `buf` to host memory, a read host memory to `buf`. Pages the
// program released while still mapped for DMA (sim/pci/host_guard.h) fault: a write to
// them succeeds, as it lands in a card's pinned pages that the program no longer sees;
// a read has nothing to read and fails (false).
inline bool move_bytes(std::byte* host, std::byte* buf, std::size_t len, bool write) noexcept {
    if (write) {
        host_guard::write(host, buf, len);
        return true;
    }
    return host_guard::read(buf, host, len);
}

}  // namespace

inline std::size_t iommu::find(std::uint64_t iova) const noexcept {
    std::atomic<std::uint32_t>* set = &hints_[hint_set(iova) * kHintWays];
    if (const std::uint32_t i = set[0].load(std::memory_order_relaxed); holds(i, iova)) return i;
    if (const std::uint32_t i = set[1].load(std::memory_order_relaxed); holds(i, iova)) return i;
    return find_slow(iova, set);
}

// Bisection; the mapping found becomes the set's first way, the first way its second.
std::size_t iommu::find_slow(std::uint64_t iova, std::atomic<std::uint32_t>* set) const noexcept {
    const auto it = first_above(maps_, iova);
    if (it == maps_.begin() || std::prev(it)->end <= iova) return maps_.size();
    const auto at = static_cast<std::uint32_t>(it - maps_.begin() - 1);
    set[1].store(set[0].load(std::memory_order_relaxed), std::memory_order_relaxed);
    set[0].store(at, std::memory_order_relaxed);
    return at;
}

// The common case, kept short: no fault injected, the mapping where a hint says, the
// whole range inside it. Everything else (and a hint that misses) goes to copy_slow.
bool iommu::copy(std::uint64_t iova, std::byte* buf, std::size_t len, bool write) const noexcept {
    if (injected_count_.load(std::memory_order_acquire) == 0) {
        reader r(*this);
        const std::atomic<std::uint32_t>* set = &hints_[hint_set(iova) * kHintWays];
        for (std::size_t way = 0; way < kHintWays; ++way) {
            const std::uint32_t i = set[way].load(std::memory_order_relaxed);
            if (!holds(i, iova)) continue;
            const entry& e = maps_[i];
            if (!(write ? e.writable : e.readable) || len > e.end - iova) break;
            if (!move_bytes(e.vaddr + (iova - e.iova), buf, len, write)) break;  // a fault: recorded below
            return true;
        }
    }
    return copy_slow(iova, buf, len, write);
}

std::byte* iommu::translate(std::uint64_t iova, std::size_t len, bool write, std::uint64_t& generation) const noexcept {
    reader r(*this);
    generation = generation_.load(std::memory_order_relaxed);
    const std::size_t i = find(iova);
    if (i == maps_.size()) return nullptr;
    const entry& e = maps_[i];
    if (!(write ? e.writable : e.readable) || len > e.end - iova) return nullptr;
    return e.vaddr + (iova - e.iova);
}

bool iommu::read_cached(std::uint64_t generation, const std::byte* host, void* dst, std::size_t len) const noexcept {
    if (injected_count_.load(std::memory_order_acquire) != 0) return false;
    reader r(*this);
    if (generation_.load(std::memory_order_relaxed) != generation) return false;
    return move_bytes(const_cast<std::byte*>(host), static_cast<std::byte*>(dst), len, false);
}

bool iommu::write_cached(std::uint64_t generation, std::byte* host, const void* src, std::size_t len) const noexcept {
    if (injected_count_.load(std::memory_order_acquire) != 0) return false;
    reader r(*this);
    if (generation_.load(std::memory_order_relaxed) != generation) return false;
    return move_bytes(host, const_cast<std::byte*>(static_cast<const std::byte*>(src)), len, true);
}

// One range inside one mapping is found, checked and copied at once; a range across
// mappings (adjacent in IOVA) goes through copy_pieces.
bool iommu::copy_slow(std::uint64_t iova, std::byte* buf, std::size_t len, bool write) const noexcept {
    if (len == 0) return true;
    if (injected_count_.load(std::memory_order_acquire) != 0 && take_injected(iova, len, write)) return false;
    {
        reader r(*this);
        const std::size_t i = find(iova);
        if (i != maps_.size() && (write ? maps_[i].writable : maps_[i].readable)) {
            const entry& e = maps_[i];
            if (len <= e.end - iova) {
                if (move_bytes(e.vaddr + (iova - e.iova), buf, len, write)) return true;
            } else if (copy_pieces(i, iova, buf, len, write)) {
                return true;
            }
        }
    }
    record_fault(iova, len, write);
    return false;
}

// A range that starts in maps_[first] and runs past its end: the first pass only checks
// that the following mappings continue it without a gap and allow the access, so that
// a faulting access changes nothing; the second copies.
bool iommu::copy_pieces(std::size_t first, std::uint64_t iova, std::byte* buf, std::size_t len,
                        bool write) const noexcept {
    std::uint64_t covered = maps_[first].end - iova;
    std::size_t last = first;
    while (covered < len) {
        if (++last == maps_.size()) return false;
        const entry& e = maps_[last];
        if (e.iova != maps_[last - 1].end || !(write ? e.writable : e.readable)) return false;
        covered += e.end - e.iova;
    }
    std::size_t done = 0;
    for (std::size_t j = first; j <= last; ++j) {
        const entry& e = maps_[j];
        const std::uint64_t a = iova + done;
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(len - done, e.end - a));
        if (!move_bytes(e.vaddr + (a - e.iova), buf + done, n, write)) return false;
        done += n;
    }
    return true;
}

// --- faults ----------------------------------------------------------------------------

bool iommu::take_injected(std::uint64_t iova, std::size_t len, bool write) const {
    std::lock_guard lock(fault_mu_);
    for (auto it = injected_.begin(); it != injected_.end(); ++it) {
        if (iova < it->first + it->second && it->first < iova + len) {
            injected_.erase(it);
            injected_count_.store(injected_.size(), std::memory_order_relaxed);
            faults_.push_back({iova, len, write});
            return true;
        }
    }
    return false;
}

void iommu::record_fault(std::uint64_t iova, std::size_t len, bool write) const noexcept {
    std::lock_guard lock(fault_mu_);
    if (faults_.size() < 4096) faults_.push_back({iova, len, write});
}

std::vector<iommu_fault> iommu::faults() const {
    std::lock_guard lock(fault_mu_);
    return faults_;
}

std::size_t iommu::fault_count() const {
    std::lock_guard lock(fault_mu_);
    return faults_.size();
}

void iommu::inject_fault(std::uint64_t iova, std::uint64_t len) {
    std::lock_guard lock(fault_mu_);
    injected_.push_back({iova, len});
    injected_count_.store(injected_.size(), std::memory_order_release);
}

}  // namespace cxv::sim
