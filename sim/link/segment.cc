#include "sim/link/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "base/unique_fd.h"
#include "sim/link/ring.h"
#include "sim/spin_lock.h"

namespace cxv::sim::link {

namespace {

// Ethernet: the group bit (I/G, bit 0 of the first byte) marks broadcast and multicast.
bool ethernet_group(std::span<const std::byte> frame) {
    return frame.size() >= 6 && (std::to_integer<unsigned>(frame[0]) & 1) != 0;
}

// InfiniBand: the LRH's DLID (bytes 2-3); from 0xc000 on, multicast and the permissive
// LID (IBA 7.11 "Local Identifiers").
constexpr std::uint16_t kFirstMulticastLid = 0xc000;
std::uint16_t dlid_of(std::span<const std::byte> frame) {
    if (frame.size() < 4) return 0;
    return static_cast<std::uint16_t>((std::to_integer<unsigned>(frame[2]) << 8) | std::to_integer<unsigned>(frame[3]));
}

std::uint64_t mac_key(std::span<const std::byte> frame) {
    std::uint64_t k = 0;
    for (std::size_t i = 0; i < 6 && i < frame.size(); ++i) k = (k << 8) | std::to_integer<std::uint64_t>(frame[i]);
    return k;
}

std::uint64_t address_key(const station& s) {
    if (!s.ethernet) return s.lid;
    std::uint64_t k = 0;
    for (const auto b : s.mac) k = (k << 8) | b;
    return k;
}

// --- in-process segments -----------------------------------------------------------------

// A frame on its way, with what its sender vouched for.
struct queued_frame {
    std::vector<std::byte> bytes;
    frame_crcs crcs;
};

class queue {
public:
    // The frame's bytes go into a buffer a receiver gave back, so that a steady stream
    // allocates nothing.
    void push(std::span<const std::byte> f, frame_crcs crcs) {
        std::lock_guard lock(mu_);
        std::vector<std::byte> b;
        if (!spare_.empty()) {
            b = std::move(spare_.back());
            spare_.pop_back();
        }
        b.assign(f.begin(), f.end());
        q_.push_back({std::move(b), crcs});
        count_.store(q_.size(), std::memory_order_release);
    }
    // The same with the frame's own buffer, which the queue keeps; `f` gets a spare.
    void push_owned(std::vector<std::byte>& f, frame_crcs crcs) {
        std::lock_guard lock(mu_);
        std::vector<std::byte> b;
        if (!spare_.empty()) {
            b = std::move(spare_.back());
            spare_.pop_back();
        }
        b.swap(f);
        q_.push_back({std::move(b), crcs});
        count_.store(q_.size(), std::memory_order_release);
    }
    // The next frame into `out`, whose old buffer is kept for a later push. Only the
    // station's own port pops, one thread at a time (its device's round): it takes every
    // frame waiting under one hold of the lock and hands them out from there without it
    // (a locked instruction per frame made the model wait out each frame's stores).
    bool pop(std::vector<std::byte>& out, frame_crcs& crcs) {
        if (taken_.empty()) {
            // Polled on every round: an empty queue is seen without the lock.
            if (count_.load(std::memory_order_acquire) == 0) return false;
            std::lock_guard lock(mu_);
            taken_.swap(q_);
            count_.store(0, std::memory_order_relaxed);
            while (!given_back_.empty() && spare_.size() < kSpares) {
                spare_.push_back(std::move(given_back_.back()));
                given_back_.pop_back();
            }
            if (taken_.empty()) return false;
        }
        out.swap(taken_.front().bytes);
        crcs = taken_.front().crcs;
        if (given_back_.size() < kSpares && taken_.front().bytes.capacity() != 0) {
            given_back_.push_back(std::move(taken_.front().bytes));
        }
        taken_.pop_front();
        return true;
    }

private:
    // Spare buffers kept: a whole window of frames (a sender's burst of 128 and more) is
    // taken at once, and each taken buffer comes back as a spare.
    static constexpr std::size_t kSpares = 1024;
    spin_lock mu_;  // held for a copy of one frame, or to take the waiting frames
    std::atomic<std::size_t> count_{0};
    std::deque<queued_frame> q_;
    std::vector<std::vector<std::byte>> spare_;
    // The popping port's own: frames taken and not yet handed out, and buffers handed
    // back since, which become spares at the next take.
    std::deque<queued_frame> taken_;
    std::vector<std::vector<std::byte>> given_back_;
};

// One in-process segment: its stations by (Ethernet?, MAC or LID).
class segment {
public:
    using key = std::pair<bool, std::uint64_t>;
    void attach(const key& k, std::shared_ptr<queue> q) {
        std::lock_guard lock(mu_);
        stations_[k] = std::move(q);
        generation_.fetch_add(1, std::memory_order_release);
    }
    void detach(const key& k, const queue* q) {
        std::lock_guard lock(mu_);
        const auto it = stations_.find(k);
        if (it != stations_.end() && it->second.get() == q) stations_.erase(it);
        generation_.fetch_add(1, std::memory_order_release);
    }
    // Changes whenever a station attaches or detaches (a sender's cached lookup is then stale).
    std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }
    // The queue of the station with address `k` (null: none).
    std::shared_ptr<queue> find(const key& k) {
        std::lock_guard lock(mu_);
        const auto it = stations_.find(k);
        return it == stations_.end() ? nullptr : it->second;
    }
    // Every station of the segment's link type but `self`.
    bool flood(bool ethernet, const queue* self, std::span<const std::byte> frame, frame_crcs crcs) {
        std::vector<std::shared_ptr<queue>> to;
        {
            std::lock_guard lock(mu_);
            for (auto it = stations_.lower_bound(key{ethernet, 0}); it != stations_.end() && it->first.first == ethernet;
                 ++it) {
                if (it->second.get() != self) to.push_back(it->second);
            }
        }
        for (auto& q : to) q->push(frame, crcs);
        return !to.empty();
    }

private:
    std::mutex mu_;
    std::map<key, std::shared_ptr<queue>> stations_;
    std::atomic<std::uint64_t> generation_{0};
};

// The in-process segments, by name. A port looks its segment up once, when it attaches.
std::shared_ptr<segment> segment_named(const std::string& name) {
    static std::mutex mu;
    static auto* segments = new std::map<std::string, std::shared_ptr<segment>>();  // never destroyed
    std::lock_guard lock(mu);
    auto& s = (*segments)[name];
    if (!s) s = std::make_shared<segment>();
    return s;
}

class in_process_port final : public segment_port {
public:
    in_process_port(const std::string& name, const station& s)
        : segment_(segment_named(name)), ethernet_(s.ethernet), self_{s.ethernet, address_key(s)} {
        segment_->attach(self_, q_);
    }
    ~in_process_port() override { segment_->detach(self_, q_.get()); }

    bool send(std::span<const std::byte> frame, frame_crcs crcs) override {
        const routed r = route(frame, crcs);
        if (r.to == nullptr) return r.flooded;
        r.to->push(frame, crcs);
        return true;
    }
    bool send_owned(std::vector<std::byte>& frame, frame_crcs crcs) override {
        const routed r = route(frame, crcs);
        if (r.to == nullptr) return r.flooded;
        r.to->push_owned(frame, crcs);
        return true;
    }
    bool receive(std::vector<std::byte>& frame, frame_crcs& crcs, std::chrono::steady_clock::time_point) override {
        return q_->pop(frame, crcs);
    }
    bool in_process() const noexcept override { return true; }

private:
    // Where a frame goes: the queue of its one receiver (`to`; null: none), or for a group
    // address every other station's, pushed already (`flooded`: some station took it).
    struct routed {
        queue* to = nullptr;
        bool flooded = false;
    };
    routed route(std::span<const std::byte> frame, frame_crcs crcs) {
        segment::key to;
        if (ethernet_) {
            if (ethernet_group(frame)) return {nullptr, segment_->flood(true, q_.get(), frame, crcs)};
            to = {true, mac_key(frame)};
        } else {
            const std::uint16_t dlid = dlid_of(frame);
            if (dlid >= kFirstMulticastLid) return {nullptr, segment_->flood(false, q_.get(), frame, crcs)};
            to = {false, dlid};
        }
        // The last destination's queue is kept while no station attaches or detaches.
        const std::uint64_t gen = segment_->generation();
        if (!last_ || last_key_ != to || last_gen_ != gen) {
            last_ = segment_->find(to);
            last_key_ = to;
            last_gen_ = gen;
        }
        return {last_.get(), false};
    }

private:
    std::shared_ptr<segment> segment_;
    bool ethernet_;
    segment::key self_;
    std::shared_ptr<queue> q_ = std::make_shared<queue>();
    std::shared_ptr<queue> last_;  // the queue of last_key_, as of generation last_gen_
    segment::key last_key_{};
    std::uint64_t last_gen_ = 0;
};

// --- directory segments ------------------------------------------------------------------

constexpr int kSocketBuffer = 4 << 20;
// Frames a port holds for receivers whose queues are full (Linux queues only
// net.unix.max_dgram_qlen datagrams per socket, 10 by default): a switch's buffer, which
// makes the link lossless under bursts as PFC Ethernet and IB's credits do. Beyond it,
// frames are dropped.
constexpr std::size_t kBacklogFrames = 8192;

bool make_address(const std::string& path, sockaddr_un& a, socklen_t& len) {
    if (path.size() >= sizeof(a.sun_path)) return false;
    std::memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
    return true;
}

// --- rings and bells ---------------------------------------------------------------------

// Frames between cxv processes go through the receiver's ring (ring.h): no system call
// per frame on either side. The ring's file also holds the station's bell: the count of
// frames that a cxv sender queued on the station's socket instead (a frame too large for
// a slot), which the receiver reads (a load from memory) before it calls recv(2).
// Frames from a sender without the ring (a QEMU guest's NIC, a broadcast) are still
// found: the socket is read every kPollEvery-th call regardless (up to kPollMost while
// those looks find nothing), and an idle model thread sleeps on the socket itself.
std::string bell_path(const std::string& dir, const std::string& station) { return dir + "/.bell-" + station; }

// A sender's rings, one per destination station: looked up by name when the destination
// changes, and checked again after a frame to it was lost or its ring was closed, every
// kRecheck frames, and every kRecheckNone frames while it has none (a station that came
// back under the same name has a new ring; one that has none yet may have one now).
class bell_cache {
public:
    explicit bell_cache(std::string dir) : dir_(std::move(dir)) {}
    struct entry {
        std::string station;
        std::unique_ptr<frame_ring> ring;  // null: none (yet)
        unsigned uses = 0;
        unsigned full = 0;  // puts in a row that found the ring full
        bool stale = false;
    };
    entry* find(const std::string& station) {
        for (auto& e : entries_) {
            if (e->station == station) return e.get();
        }
        if (entries_.size() >= kMost) return nullptr;  // more destinations than kept: no rings
        entries_.push_back(std::make_unique<entry>());
        entries_.back()->station = station;
        entries_.back()->ring = frame_ring::open(bell_path(dir_, station));
        return entries_.back().get();
    }
    // The station's ring for the next frame (looked up again when due), or null.
    frame_ring* current(entry* e) {
        if (e == nullptr) return nullptr;
        if (e->stale || ++e->uses % (e->ring ? kRecheck : kRecheckNone) == 0) refresh(e);
        return e->ring.get();
    }
    // Looks the station's ring up again now.
    void refresh(entry* e) {
        e->stale = false;
        recheck(*e);
    }
    // A put found the ring full: whether to ask the station's socket if it is still
    // there (every kFullCheck-th time in a row: a system call).
    static bool probe_due(entry* e) { return ++e->full % kFullCheck == 0; }
    static void put(entry* e) { e->full = 0; }
    // One frame queued on the station's socket: its bell.
    static void ring(entry* e) {
        if (e != nullptr && e->ring) e->ring->rung().fetch_add(1, std::memory_order_release);
    }
    // A frame to the station was lost (no socket there): it may come back with a new ring.
    static void lost(entry* e) {
        if (e != nullptr) e->stale = true;
    }

private:
    static constexpr std::size_t kMost = 64;
    static constexpr unsigned kRecheck = 1024, kRecheckNone = 16, kFullCheck = 64;
    void recheck(entry& e) {
        struct stat st;
        const std::string path = bell_path(dir_, e.station);
        if (::stat(path.c_str(), &st) != 0) {
            e.ring.reset();
        } else if (!e.ring || e.ring->inode() != st.st_ino) {
            e.ring = frame_ring::open(path);
        }
        e.full = 0;
    }
    std::string dir_;
    std::vector<std::unique_ptr<entry>> entries_;
};

class directory_port final : public segment_port {
public:
    directory_port(std::string dir, std::string self, unique_fd fd, bool ethernet)
        : dir_(std::move(dir)), self_(std::move(self)), fd_(std::move(fd)), ethernet_(ethernet),
          own_ring_(frame_ring::create(bell_path(dir_, self_))), bells_(dir_) {}
    ~directory_port() override {
        if (own_ring_) own_ring_->close();  // before the files go: senders fall back to the socket, and lose
        fd_.reset();
        ::unlink((dir_ + "/" + self_).c_str());
        ::unlink(bell_path(dir_, self_).c_str());
    }

    // Whatever the sender vouched for, the frame leaves the process: its receiver checks.
    bool send(std::span<const std::byte> frame, frame_crcs) override {
        if (ethernet_ ? ethernet_group(frame) : dlid_of(frame) >= kFirstMulticastLid) return flood(frame);
        // The socket address of the last destination is kept: a stream goes to one.
        const std::uint64_t key = ethernet_ ? mac_key(frame) : dlid_of(frame);
        if (!last_.valid || last_.key != key) {
            station to;
            to.ethernet = ethernet_;
            if (ethernet_) {
                for (std::size_t i = 0; i < 6 && i < frame.size(); ++i) to.mac[i] = std::to_integer<std::uint8_t>(frame[i]);
            } else {
                to.lid = dlid_of(frame);
            }
            last_.name = station_name(to);
            last_.key = key;
            last_.valid = make_address(dir_ + "/" + last_.name, last_.addr, last_.len);
            if (!last_.valid) return false;
            last_.bell = bells_.find(last_.name);
        }
        if (backlog_.empty()) {
            const result r = deliver(last_.bell, last_.addr, last_.len, frame);
            if (r != result::full) return r == result::sent;
        }
        std::string name = last_.name;
        if (backlog_.size() >= kBacklogFrames) return false;
        backlog_.push_back({std::move(name), std::vector<std::byte>(frame.begin(), frame.end()), last_.bell});
        return true;
    }

    bool flush() override {
        bool any = false;
        while (!backlog_.empty()) {
            sockaddr_un a;
            socklen_t len;
            const held& h = backlog_.front();
            const result r = make_address(dir_ + "/" + h.to, a, len) ? deliver(h.bell, a, len, h.frame) : result::lost;
            if (r == result::full) break;
            backlog_.pop_front();
            any = true;
        }
        return any || !backlog_.empty();
    }

    int wake_fd() const override { return fd_.get(); }
    bool arm_wake() override {
        if (!own_ring_ || !own_ring_->has_ring()) return true;
        if (!own_ring_->arm()) return false;
        armed_ = true;
        return true;
    }

    bool receive(std::vector<std::byte>& frame, frame_crcs& crcs, std::chrono::steady_clock::time_point now) override {
        crcs = frame_crcs::unverified;
        if (armed_) {
            // Awake: the empty datagrams that woke the thread are read with the socket.
            own_ring_->disarm();
            armed_ = false;
            looking_ = false;
            draining_ = true;
        }
        // The ring first, but never more than kRingRun frames in a row before the socket's
        // turn, so that a busy ring never starves it (guests' frames, ARP); while the
        // socket is being emptied, the socket first.
        if (!draining_ && ring_run_ < kRingRun && take_from_ring(frame)) return true;
        const bool ring_had_its_run = ring_run_ >= kRingRun;
        ring_run_ = 0;
        if (receive_from_socket(frame, now)) return true;
        return !ring_had_its_run && take_from_ring(frame);
    }

private:
    static constexpr std::size_t kMaxDatagram = 16384;
    static constexpr unsigned kPollEvery = 16, kPollMost = 1024, kRingRun = 64;
    static constexpr std::chrono::milliseconds kLookAtMost{1};

    bool take_from_ring(std::vector<std::byte>& frame) {
        if (!own_ring_ || !own_ring_->take(frame)) return false;
        ++ring_run_;
        return true;
    }

    bool receive_from_socket(std::vector<std::byte>& frame, std::chrono::steady_clock::time_point now) {
        // The socket is read until it is empty once the bell moved, or, for senders
        // without one (broadcasts: ARP, neighbour discovery; QEMU guests), every
        // poll_every_-th call regardless; an unmoved bell is an empty socket. Those looks
        // back off while they find nothing (16, 32, ... up to kPollMost calls: an empty
        // recv(2) per 16 model rounds was most of the system calls of a stream between
        // processes) and come back to every 16th as soon as one finds a frame its bell did
        // not announce. They also come at least every kLookAtMost of the rounds' time: a
        // model thread that yields on a loaded machine runs a round every few
        // milliseconds, and 1024 of them left an ARP request unanswered for over half a
        // second, longer than an RC requester's 7 retries of 67 ms. An idle model thread
        // sleeps on the socket itself, so a frame without a bell wakes it at once.
        if (!draining_) {
            looking_ = false;
            if (own_ring_) {
                const std::uint64_t rung = own_ring_->rung().load(std::memory_order_acquire);
                if (rung == seen_) {
                    if (++quiet_ < poll_every_ && now < next_look_) return false;
                    looking_ = true;
                }
                seen_ = rung;
            }
            quiet_ = 0;
            next_look_ = now + kLookAtMost;
            draining_ = true;
        }
        // Into a buffer of our own, so that an idle poll (nothing waiting) touches no
        // memory: resizing `frame` to the largest datagram would zero it each time.
        ssize_t n;
        do {
            n = ::recv(fd_.get(), buf_.get(), kMaxDatagram, MSG_DONTWAIT);
        } while (n == 0);  // a wake from a sender through the ring, not a frame
        if (n < 0) {
            if (looking_) poll_every_ = std::min(poll_every_ * 2, kPollMost);
            draining_ = looking_ = false;
            return false;
        }
        if (looking_) {
            poll_every_ = kPollEvery;  // a sender without a bell is there
            looking_ = false;
        }
        frame.assign(buf_.get(), buf_.get() + n);
        return true;
    }

    enum class result { sent, full, lost };
    // One frame to a station (`e`: its ring and bell, null when not kept; `a`: its
    // socket): through its ring when it has one, else through the socket.
    result deliver(bell_cache::entry* e, const sockaddr_un& a, socklen_t len, std::span<const std::byte> frame) {
        frame_ring* ring = bells_.current(e);
        for (unsigned tries = 0; ring != nullptr && tries < 2; ++tries) {
            switch (ring->put(frame)) {
            case frame_ring::put_result::put:
                bell_cache::put(e);
                // A receiver that sleeps on its socket is woken by an empty datagram.
                if (ring->wake_wanted()) send_to(a, len, {});
                return result::sent;
            case frame_ring::put_result::full:
                // A station that crashed leaves its files, and its ring fills up. Its
                // socket tells: an empty datagram (a wake-up, to a live one) is refused.
                if (!bell_cache::probe_due(e) || send_to(a, len, {}) != result::lost) return result::full;
                ring->close();  // for every sender
                bell_cache::lost(e);
                return result::lost;
            case frame_ring::put_result::closed:
                // Gone, or replaced by a station under the same name: its new ring, if
                // there is one, takes the frame, else the socket says which.
                bells_.refresh(e);
                ring = e->ring.get();
                continue;
            case frame_ring::put_result::too_big:
                ring = nullptr;
                break;
            }
        }
        const result r = send_to(a, len, frame);
        if (r == result::sent) bell_cache::ring(e);
        if (r == result::lost) bell_cache::lost(e);
        return r;
    }
    result send_to(const std::string& name, std::span<const std::byte> frame) {
        sockaddr_un a;
        socklen_t len;
        if (!make_address(dir_ + "/" + name, a, len)) return result::lost;
        return send_to(a, len, frame);
    }
    result send_to(const sockaddr_un& a, socklen_t len, std::span<const std::byte> frame) {
        const ssize_t n = ::sendto(fd_.get(), frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                                   reinterpret_cast<const sockaddr*>(&a), len);
        if (n == static_cast<ssize_t>(frame.size())) return result::sent;
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? result::full : result::lost;
    }

    bool flood(std::span<const std::byte> frame) {
        DIR* d = ::opendir(dir_.c_str());
        if (d == nullptr) return false;
        const char* prefix = ethernet_ ? "eth-" : "ib-";
        bool any = false;
        while (const dirent* e = ::readdir(d)) {
            const std::string name = e->d_name;
            if (name.rfind(prefix, 0) != 0 || name == self_) continue;
            // A receiver whose socket is full (a QEMU guest's NIC takes 10 datagrams at a
            // time) gets the frame later, as a switch's buffer would give it: held behind
            // what already waits, so that each receiver's frames keep their order.
            const result r = backlog_.empty() ? send_to(name, frame) : result::full;
            if (r == result::full) {
                if (backlog_.size() >= kBacklogFrames) continue;
                backlog_.push_back({name, std::vector<std::byte>(frame.begin(), frame.end()), bells_.find(name)});
                any = true;
                continue;
            }
            any |= r == result::sent;
        }
        ::closedir(d);
        return any;
    }

    struct held {
        std::string to;
        std::vector<std::byte> frame;
        bell_cache::entry* bell;  // the destination's, looked up when the frame was held
    };
    std::string dir_, self_;
    unique_fd fd_;
    bool ethernet_;
    std::deque<held> backlog_;
    std::unique_ptr<frame_ring> own_ring_;  // null: every call reads the socket
    bool armed_ = false;                    // the model thread sleeps (or slept) on the socket
    unsigned ring_run_ = 0;                 // frames taken from the ring since the socket's side was looked at
    std::uint64_t seen_ = 0;               // the bell's count when the socket was last emptied
    bool draining_ = false;
    bool looking_ = false;  // this drain is a look without a ring
    unsigned quiet_ = 0;
    unsigned poll_every_ = kPollEvery;
    std::chrono::steady_clock::time_point next_look_{};  // the socket is looked at by then
    bell_cache bells_;
    struct {
        bool valid = false;
        std::uint64_t key = 0;
        std::string name;
        sockaddr_un addr;
        socklen_t len = 0;
        bell_cache::entry* bell = nullptr;
    } last_;  // the last unicast destination
    std::unique_ptr<std::byte[]> buf_ = std::make_unique<std::byte[]>(kMaxDatagram);
};

}  // namespace

std::string station_name(const station& s) {
    if (!s.ethernet) return fmt::format("ib-{:04x}", s.lid);
    return fmt::format("eth-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}", s.mac[0], s.mac[1], s.mac[2], s.mac[3], s.mac[4],
                       s.mac[5]);
}

std::unique_ptr<segment_port> attach_in_process(const std::string& name, const station& s) {
    return std::make_unique<in_process_port>(name, s);
}

result<std::unique_ptr<segment_port>> attach_directory(const std::string& dir, const station& s) {
    const std::string name = station_name(s);
    const std::string path = dir + "/" + name;
    sockaddr_un a;
    socklen_t len;
    if (!make_address(path, a, len)) {
        return error{ENAMETOOLONG, fmt::format("fabric {}: the socket path {} is longer than a UNIX socket allows "
                                               "({} bytes); use a shorter directory",
                                               dir, path, sizeof(a.sun_path) - 1)};
    }
    unique_fd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) return error{errno, fmt::format("fabric {}: socket: {}", dir, std::strerror(errno))};
    const auto fail = [&](int code, const std::string& what) -> error {
        return error{code, fmt::format("fabric {}: {}: {}", dir, what, std::strerror(code))};
    };
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0) {
        if (errno != EADDRINUSE) return fail(errno, "bind " + path);
        // A socket file is there. If a station answers on it, the address is taken;
        // if nobody does, its process died and the name is free again.
        const bool live = [&] {
            const unique_fd probe(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
            return probe && ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&a), len) == 0;
        }();
        if (live) {
            return error{EADDRINUSE, fmt::format("fabric {}: another port already has the address of {} (a second "
                                                 "process with the same MAC or LID?)",
                                                 dir, name)};
        }
        ::unlink(path.c_str());
        if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0) return fail(errno, "bind " + path);
    }
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &kSocketBuffer, sizeof(kSocketBuffer));
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &kSocketBuffer, sizeof(kSocketBuffer));
    return std::unique_ptr<segment_port>(std::make_unique<directory_port>(dir, name, std::move(fd), s.ethernet));
}

}  // namespace cxv::sim::link
