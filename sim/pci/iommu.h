// The model's IOMMU: the table of IOVA ranges the driver mapped with VFIO_IOMMU_MAP_DMA,
// through which every device access to host memory goes.
//
// A device access outside the table is an IOMMU fault: it is refused (nothing is read
// or written), recorded, and reported to the caller, which turns it into the error a
// card would report (a failed command, an error CQE, a catastrophic event).
//
// An UNMAP takes effect at once: a device access holds the table's reader side for the
// whole of its copy (a run of accesses, for the whole run), and map, unmap and clear
// change the table only once no access is in progress, so no access touches memory after
// the UNMAP that removed it has returned.
// The table is a sorted array searched by bisection; a few slots remember where recent
// accesses found their mapping (by IOVA page), and every use of one is checked against
// the current table, so no translation outlives its mapping.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace cxv::sim {

// VFIO's errno conventions for MAP/UNMAP (mirrors Linux's vfio_iommu_type1).
enum class map_error { none, invalid /*EINVAL*/, exists /*EEXIST*/, no_space /*ENOSPC*/ };

struct iommu_mapping {
    std::uint64_t iova;
    std::byte* vaddr;
    std::uint64_t size;
    bool readable, writable;
};

struct iommu_fault {
    std::uint64_t iova;
    std::size_t len;
    bool write;
};

class iommu {
public:
    static constexpr std::uint64_t page_size = 4096;
    static constexpr std::uint64_t iova_limit = std::uint64_t{1} << 48;  // usable IOVA bits

    iommu() = default;
    iommu(const iommu&) = delete;
    iommu& operator=(const iommu&) = delete;

    // VFIO_IOMMU_MAP_DMA: iova, vaddr and size must be page aligned, size non-zero, the
    // range must not overlap an existing mapping.
    map_error map(std::uint64_t iova, void* vaddr, std::uint64_t size, bool readable,
                  bool writable);
    // VFIO_IOMMU_UNMAP_DMA: unmaps every mapping entirely inside [iova, iova+size); a
    // range that splits a mapping is refused (type1 v2 semantics). Returns the bytes
    // unmapped, or nullopt for EINVAL. Once it returns, no device access uses them.
    std::optional<std::uint64_t> unmap(std::uint64_t iova, std::uint64_t size);
    void clear();
    // The current table, by IOVA (for a second IOMMU domain that must mirror this one).
    std::vector<iommu_mapping> mappings() const;

    // Device-side access: copy between host memory and the device. False (and a recorded
    // fault) when any byte of the range is unmapped or lacks the permission.
    bool read(std::uint64_t iova, void* dst, std::size_t len) const noexcept {
        return copy(iova, static_cast<std::byte*>(dst), len, false);
    }
    bool write(std::uint64_t iova, const void* src, std::size_t len) const noexcept {
        return copy(iova, const_cast<std::byte*>(static_cast<const std::byte*>(src)), len, true);
    }

    // A run of device accesses by one thread, such as a device's round of work: the
    // table's reader side is taken at the run's first access and held to its end, and the
    // accesses the thread makes inside it take no lock of their own (a locked instruction
    // per access made the device wait out every access's cache misses; a run without
    // accesses, an idle round, costs no locked instruction at all). MAP, UNMAP and clear
    // wait for the run to end, as for any access in progress, so a run must be short and
    // must not wait for anything that may itself be waiting to change the table (nor
    // change it itself). A run begun inside another run of the thread changes nothing:
    // accesses to the outer run's IOMMU stay in that run, others take the reader side
    // one by one.
    class access_run {
    public:
        explicit access_run(const iommu& m) noexcept;
        ~access_run();
        access_run(const access_run&) = delete;
        access_run& operator=(const access_run&) = delete;

    private:
        const iommu& m_;
        bool outer_ = false;  // this run is the thread's current one
    };

    // A translation a device keeps, as a card's IOTLB: the host address of [iova,
    // iova + len) when it is mapped for the access (null when not; no fault is
    // recorded: the caller's ordinary access, which follows, records it), and the
    // table's generation then, which every MAP, UNMAP and clear advances.
    // read_cached() reads through it while the table is still at that generation and no
    // fault is injected, under the same hold of the table as any access (so an UNMAP
    // still takes effect at once), and otherwise returns false: the caller then makes
    // the ordinary access (read()).
    std::byte* translate(std::uint64_t iova, std::size_t len, bool write, std::uint64_t& generation) const noexcept;
    bool read_cached(std::uint64_t generation, const std::byte* host, void* dst, std::size_t len) const noexcept;
    // The same for a write through a kept translation (made with write = true).
    bool write_cached(std::uint64_t generation, std::byte* host, const void* src, std::size_t len) const noexcept;
    // The table's generation now (what a kept translation is checked against).
    std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }

    std::size_t mapping_count() const;
    std::uint64_t mapped_bytes() const;
    std::vector<iommu_fault> faults() const;
    std::size_t fault_count() const;
    // Test hook: the next access to [iova, iova+len) faults as if unmapped.
    void inject_fault(std::uint64_t iova, std::uint64_t len);

private:
    struct entry {
        std::uint64_t iova, end;  // [iova, end)
        std::byte* vaddr;
        bool readable, writable;
    };

    // Readers (device accesses) and one writer at a time (map, unmap, clear): the state
    // counts the readers in progress, with a bit for a writer that holds or awaits the
    // table. A reader that finds the bit steps back and waits, so a writer waits only
    // for the accesses already under way.
    class table_lock {
    public:
        void lock_shared() const noexcept {
            while (state_.fetch_add(1, std::memory_order_acquire) & kWriter) {
                state_.fetch_sub(1, std::memory_order_relaxed);
                wait_writer();
            }
        }
        void unlock_shared() const noexcept { state_.fetch_sub(1, std::memory_order_release); }
        void lock();
        void unlock();

    private:
        static constexpr std::uint32_t kWriter = 1u << 31;
        void wait_writer() const noexcept;
        mutable std::atomic<std::uint32_t> state_{0};
        std::mutex writers_;
    };
    // One access's hold of the reader side (none inside the thread's run: iommu.cc).
    struct reader;

    // The hints: sets of two, chosen by the IOVA page. Buffers tend to start on aligned
    // IOVAs, so the page number is hashed (Fibonacci hashing) rather than cut to its
    // low bits; two ways, so that two pages in use at once that share a set do not
    // evict each other on every access.
    static constexpr unsigned kLogHintSets = 7;
    static constexpr std::size_t kHintWays = 2;
    static std::size_t hint_set(std::uint64_t iova) noexcept {
        return static_cast<std::size_t>(((iova / page_size) * 0x9e3779b97f4a7c15ull) >> (64 - kLogHintSets));
    }
    bool holds(std::uint32_t i, std::uint64_t iova) const noexcept {
        return i < maps_.size() && maps_[i].iova <= iova && iova < maps_[i].end;
    }

    bool copy(std::uint64_t iova, std::byte* buf, std::size_t len, bool write) const noexcept;
    bool copy_slow(std::uint64_t iova, std::byte* buf, std::size_t len, bool write) const noexcept;
    bool copy_pieces(std::size_t first, std::uint64_t iova, std::byte* buf, std::size_t len,
                     bool write) const noexcept;
    std::size_t find(std::uint64_t iova) const noexcept;  // index into maps_, or maps_.size()
    std::size_t find_slow(std::uint64_t iova, std::atomic<std::uint32_t>* set) const noexcept;
    bool take_injected(std::uint64_t iova, std::size_t len, bool write) const;
    void record_fault(std::uint64_t iova, std::size_t len, bool write) const noexcept;

    table_lock lock_;
    std::vector<entry> maps_;  // sorted by IOVA, disjoint; changed only under lock_.lock()
    // Advanced under lock_.lock() with every change of maps_; read under the reader side.
    std::atomic<std::uint64_t> generation_{0};
    // Where accesses to an IOVA page found their mapping: indexes into maps_, only ever
    // guesses (find checks them against the table it holds the lock of).
    mutable std::array<std::atomic<std::uint32_t>, (std::size_t{1} << kLogHintSets) * kHintWays> hints_{};
    mutable std::atomic<std::size_t> injected_count_{0};  // injected_.size(), read without fault_mu_
    mutable std::mutex fault_mu_;
    mutable std::vector<iommu_fault> faults_;
    mutable std::vector<std::pair<std::uint64_t, std::uint64_t>> injected_;
};

}  // namespace cxv::sim
