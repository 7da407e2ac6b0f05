#include "sim/link/ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/unique_fd.h"

namespace cxv::sim::link {

namespace {

constexpr std::size_t kHeaderBytes = 4096;
constexpr std::size_t kFileBytes = kHeaderBytes + std::size_t{frame_ring::kSlots} * frame_ring::kSlotBytes;
static_assert(sizeof(frame_ring::header) <= kHeaderBytes);
static_assert(frame_ring::kSlotBytes % 64 == 0);

// A slot: its sequence word (n: free for the sender of fill position n; n + 1: holds
// that sender's frame), the frame's length, then the frame.
struct slot_head {
    std::atomic<std::uint64_t> seq;
    std::uint32_t bytes;
    std::uint32_t unused;
};
static_assert(sizeof(slot_head) == frame_ring::kSlotBytes - frame_ring::kFrameBytes);

slot_head& head_of(std::byte* s) { return *reinterpret_cast<slot_head*>(s); }

}  // namespace

frame_ring::frame_ring(void* map, std::size_t bytes, ino_t ino) : map_(map), bytes_(bytes), ino_(ino) {
    header* h = head();
    if (bytes_ >= kFileBytes &&
        std::atomic_ref<std::uint32_t>(h->magic).load(std::memory_order_acquire) == kMagic && h->slots == kSlots) {
        slots_ = kSlots;
    }
}

frame_ring::~frame_ring() { ::munmap(map_, bytes_); }

std::unique_ptr<frame_ring> frame_ring::create(const std::string& path) {
    // The station's name is ours (its socket is bound), and so is this temporary name.
    const std::string temp = path + ".new";
    constexpr std::size_t bytes = kFileBytes;
    void* map = MAP_FAILED;
    struct stat st;
    {  // the file is closed once mapped
        const unique_fd fd(::open(temp.c_str(), O_RDWR | O_CLOEXEC | O_CREAT | O_TRUNC, 0600));
        if (!fd) return nullptr;
        // Blocks allocated now: a sparse file would make a later store into a slot a SIGBUS
        // on a full file system.
        if (::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)) == 0 && ::fstat(fd.get(), &st) == 0) {
            map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
        }
    }
    if (map == MAP_FAILED) {
        ::unlink(temp.c_str());
        return nullptr;
    }
    // The file is new (zero): every slot free for its first fill position.
    auto* h = static_cast<header*>(map);
    for (std::uint32_t i = 0; i < kSlots; ++i) {
        head_of(static_cast<std::byte*>(map) + kHeaderBytes + std::size_t{i} * kSlotBytes)
            .seq.store(i, std::memory_order_relaxed);
    }
    h->slots = kSlots;
    pthread_mutexattr_t a;
    ::pthread_mutexattr_init(&a);
    ::pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    ::pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    const int made = ::pthread_mutex_init(&h->writer, &a);
    ::pthread_mutexattr_destroy(&a);
    std::atomic_ref<std::uint32_t>(h->magic).store(kMagic, std::memory_order_release);
    // A ring a dead station left under the name: its senders stop filling it and look
    // again (segment.cc), instead of filling it up first.
    if (auto old = open(path); old && old->has_ring()) old->close();
    if (made != 0 || ::rename(temp.c_str(), path.c_str()) != 0) {
        ::munmap(map, bytes);
        ::unlink(temp.c_str());
        return nullptr;
    }
    return std::unique_ptr<frame_ring>(new frame_ring(map, bytes, st.st_ino));
}

std::unique_ptr<frame_ring> frame_ring::open(const std::string& path) {
    struct stat st;
    void* map = MAP_FAILED;
    std::size_t bytes = 0;
    {  // the file is closed once mapped
        const unique_fd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
        if (!fd) return nullptr;
        if (::fstat(fd.get(), &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(header))) {
            bytes = std::min<std::size_t>(static_cast<std::size_t>(st.st_size), kFileBytes);
            map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
        }
    }
    if (map == MAP_FAILED) return nullptr;
    return std::unique_ptr<frame_ring>(new frame_ring(map, bytes, st.st_ino));
}

std::byte* frame_ring::slot(std::uint64_t n) const noexcept {
    return static_cast<std::byte*>(map_) + kHeaderBytes + static_cast<std::size_t>(n % slots_) * kSlotBytes;
}

// The senders' lock. A sender holding it for long (its thread lost its core) makes
// this one try later. One that died holding it (its process ended; the kernel releases
// a robust mutex then, zombie or not, in whatever PID namespace) hands it over with
// EOWNERDEAD, and what it left is repaired.
bool frame_ring::lock() {
    pthread_mutex_t* m = &head()->writer;
    for (unsigned tries = 0;; ++tries) {
        const int r = ::pthread_mutex_trylock(m);
        if (r == 0) return true;
        if (r == EOWNERDEAD) {
            repair();
            ::pthread_mutex_consistent(m);
            return true;
        }
        if (r != EBUSY || tries == 256) return false;
        if (tries % 64 == 63) std::this_thread::yield();
    }
}

// A sender that died holding the lock may have published its slot (and the receiver
// may even have taken it) without moving the fill position on: the position moves past
// every such slot. A slot it only half wrote was never published and is filled again.
void frame_ring::repair() noexcept {
    header* h = head();
    for (std::uint32_t i = 0; i < slots_; ++i) {
        const std::uint64_t seq = head_of(slot(h->tail)).seq.load(std::memory_order_acquire);
        if (seq != h->tail + 1 && seq != h->tail + slots_) break;
        ++h->tail;
    }
}

frame_ring::put_result frame_ring::put(std::span<const std::byte> frame) {
    if (slots_ == 0 || frame.size() > kFrameBytes) return put_result::too_big;
    header* h = head();
    if (h->closed.load(std::memory_order_relaxed) != 0) return put_result::closed;
    if (!lock()) return put_result::full;
    const std::uint64_t pos = h->tail;
    std::byte* s = slot(pos);
    slot_head& sh = head_of(s);
    if (sh.seq.load(std::memory_order_acquire) != pos) {  // the receiver has not taken it yet
        ::pthread_mutex_unlock(&h->writer);
        return put_result::full;
    }
    std::memcpy(s + sizeof(slot_head), frame.data(), frame.size());
    sh.bytes = static_cast<std::uint32_t>(frame.size());
    // Sequentially consistent, as the load of the receiver's mark after it (wake_wanted)
    // and the receiver's mark and its look at the slot (arm): either this sender sees the
    // mark, or the receiver sees the slot.
    sh.seq.store(pos + 1, std::memory_order_seq_cst);
    h->tail = pos + 1;
    ::pthread_mutex_unlock(&h->writer);
    return put_result::put;
}

bool frame_ring::wake_wanted() noexcept {
    header* h = head();
    return h->sleeping.load(std::memory_order_seq_cst) != 0 && h->sleeping.exchange(0) != 0;
}

bool frame_ring::take(std::vector<std::byte>& out) {
    if (slots_ == 0) return false;
    std::byte* s = slot(next_);
    slot_head& sh = head_of(s);
    if (sh.seq.load(std::memory_order_acquire) != next_ + 1) return false;
    const std::byte* f = s + sizeof(slot_head);
    out.assign(f, f + std::min<std::size_t>(sh.bytes, kFrameBytes));
    sh.seq.store(next_ + slots_, std::memory_order_release);
    ++next_;
    return true;
}

bool frame_ring::arm() {
    if (slots_ == 0) return true;
    header* h = head();
    h->sleeping.store(1, std::memory_order_seq_cst);
    if (head_of(slot(next_)).seq.load(std::memory_order_seq_cst) == next_ + 1) {
        h->sleeping.store(0, std::memory_order_relaxed);
        return false;
    }
    return true;
}

void frame_ring::disarm() noexcept { head()->sleeping.store(0, std::memory_order_relaxed); }

void frame_ring::close() noexcept { head()->closed.store(1, std::memory_order_release); }

}  // namespace cxv::sim::link
