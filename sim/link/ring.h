// A station's ring: how frames travel between cxv processes on a directory segment
// (segment.h) without a system call per frame. It is the file DIR/.bell-<station>,
// mapped shared by the receiving station and by every cxv process that sends to it:
//
//   page 0   the header: the socket's bell (the count of frames queued on the station's
//            socket, read by the receiver before it calls recv(2)), the ring's shape,
//            whether the receiver sleeps, and the senders' lock and fill position;
//   then     `slots` slots of kSlotBytes, each a sequence word, a length and a frame.
//
// Any number of senders, one receiver. A sender takes the lock (a process-shared,
// robust mutex: one that died holding it hands it to the next taker, which repairs what
// it left), copies its frame into the next slot and publishes it by the slot's
// sequence word; the receiver takes published slots in order without a lock and hands
// each back by the same word. A receiver about to sleep on its socket says so in the
// header, and the sender that fills a slot then sends it an empty datagram, which wakes
// it; a receiver that spins costs its senders no system call.
//
// The socket stays the station's address and its liveness: frames from senders
// without the ring (a QEMU guest's NIC, broadcasts, a frame larger than a slot) go
// through it as before. A receiver that leaves marks its ring closed before it removes
// the file; one that crashed is found through its socket (segment.cc), and the station
// that takes its name over closes the old ring before it puts its own in place.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cxv::sim::link {

class frame_ring {
public:
    // The largest frame a slot holds: an Ethernet frame with an IPv6 header, the
    // largest transport headers (BTH + AtomicETH) and a 4096-byte payload with its
    // ICRC, or an InfiniBand packet with a GRH, with room to spare. Larger ones take
    // the socket.
    static constexpr std::size_t kSlotBytes = 4352;
    static constexpr std::size_t kFrameBytes = kSlotBytes - 16;
    static constexpr std::uint32_t kSlots = 256;
    static constexpr std::uint32_t kMagic = 0x63787672;  // "cxvr": the ring below is ready

    // The layout of page 0, shared between processes.
    struct header {
        std::atomic<std::uint64_t> rung;  // frames queued on the socket (the bell)
        std::uint32_t magic;
        std::uint32_t slots;
        std::atomic<std::uint32_t> closed;  // the receiver left: nothing is taken any more
        alignas(64) std::atomic<std::uint32_t> sleeping;  // the receiver sleeps on its socket
        alignas(64) pthread_mutex_t writer;               // the senders' lock (shared, robust)
        std::uint64_t tail;                               // the next slot to fill (under writer)
    };
    static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::uint32_t>::is_always_lock_free);

    // The receiver's own ring: a new file (`path`.new, its blocks allocated), made
    // complete and then renamed to `path`, so that a sender never maps half of one. A
    // ring left there by a station that died is closed first: its senders then look
    // again and find the new one. Only the station that holds the name (its socket is
    // bound) may call it. Null when it cannot.
    static std::unique_ptr<frame_ring> create(const std::string& path);
    // A sender's view of the station's ring at `path`. Null when there is no file. A
    // file with only a bell (no ring) is still opened: has_ring() is then false.
    static std::unique_ptr<frame_ring> open(const std::string& path);
    ~frame_ring();
    frame_ring(const frame_ring&) = delete;
    frame_ring& operator=(const frame_ring&) = delete;

    std::atomic<std::uint64_t>& rung() const noexcept { return head()->rung; }
    ino_t inode() const noexcept { return ino_; }
    bool has_ring() const noexcept { return slots_ != 0; }

    // --- a sender ---
    enum class put_result {
        put,      // in the ring
        full,     // every slot is taken, or another sender holds the lock: try later
        closed,   // the receiver left
        too_big,  // larger than a slot, or no ring: use the socket
    };
    put_result put(std::span<const std::byte> frame);
    // After a put: whether the receiver sleeps and must be woken (true for one sender).
    bool wake_wanted() noexcept;

    // --- the receiver ---
    // The next frame, into `out`; false when none is published.
    bool take(std::vector<std::byte>& out);
    // The receiver goes to sleep on its socket: from now on a put wakes it. False when a
    // frame is already waiting (it must not sleep).
    bool arm();
    // Awake again (a put may have cleared it already).
    void disarm() noexcept;
    // Marks the ring closed: the receiver leaves, or a sender found it gone.
    void close() noexcept;

private:
    frame_ring(void* map, std::size_t bytes, ino_t ino);
    header* head() const noexcept { return static_cast<header*>(map_); }
    std::byte* slot(std::uint64_t n) const noexcept;
    bool lock();
    void repair() noexcept;

    void* map_;
    std::size_t bytes_;
    ino_t ino_;
    std::uint32_t slots_ = 0;  // 0: a bell only
    std::uint64_t next_ = 0;  // the receiver's next slot to take
};

}  // namespace cxv::sim::link
