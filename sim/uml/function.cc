#include "sim/uml/function.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "hw/doorbell.h"
#include "hw/init_seg.h"

namespace cxv::sim::uml {

namespace {

// include/uapi/linux/virtio_pcidev.h: the operations, and the 16-byte header (op, bar,
// reserved, size, addr) the data follows.
enum op : std::uint8_t { CFG_READ = 1, CFG_WRITE, MMIO_READ, MMIO_WRITE, MMIO_MEMSET, INT, MSI, PME };
constexpr std::size_t kHeader = 16;
constexpr unsigned kCmdQueue = 0, kIrqQueue = 1;
// PCI 3.0 6.8.2: MSI-X message control (capability + 2): enable bit 15, function mask 14;
// a table entry is address (8), data (4), vector control (4, mask bit 0).
constexpr std::uint16_t kMsixEnable = 1u << 15, kMsixFunctionMask = 1u << 14;
constexpr std::size_t kEntry = 16;
// How long the backlog's head waits for the model to take a doorbell register before
// writing over it: under UML's 40 ms bound on a read's answer (virt-pci.c,
// UM_VIRT_PCI_MAXDELAY), which a read behind it in the backlog counts in.
constexpr auto kDoorbellWait = std::chrono::milliseconds(20);

}  // namespace

result<std::unique_ptr<pci_function>> pci_function::create(device& dev, const std::string& socket_path) {
    std::unique_ptr<pci_function> f(new pci_function(dev));
    auto vu = vhost_user_backend::listen(socket_path, 2,
                                         [p = f.get()](const std::vector<memory_region>& r) { p->on_memory(r); });
    if (!vu) return vu.error();
    f->vu_ = std::move(vu).value();
    dev.set_writes_seen(true);
    const unsigned n = dev.msix().count();
    f->pending_.assign(n, false);
    for (unsigned v = 0; v < n; ++v) {
        unique_fd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (!fd) return error{errno, "eventfd"};
        f->vector_fds_.push_back(std::move(fd));
        if (!dev.msix().set(v, f->vector_fds_.back().get())) return error{EINVAL, fmt::format("MSI-X vector {}", v)};
    }
    return f;
}

pci_function::~pci_function() {
    dev_.msix().clear();
    vector_fds_.clear();  // closed in order, before the memory goes
    on_memory({});
}

void pci_function::on_memory(const std::vector<memory_region>& regions) {
    for (const auto& m : mapped_) (void)dev_.mmu().unmap(m.guest_addr, m.size);
    mapped_.clear();
    for (const auto& r : regions) {
        // The IOMMU maps whole pages: the region's pages, inward.
        const std::uint64_t first = (r.guest_addr + iommu::page_size - 1) & ~(iommu::page_size - 1);
        const std::uint64_t end = (r.guest_addr + r.size) & ~(iommu::page_size - 1);
        if (end <= first) continue;
        memory_region m = r;
        m.guest_addr = first;
        m.size = end - first;
        m.base = r.base + (first - r.guest_addr);
        if (dev_.mmu().map(m.guest_addr, m.base, m.size, true, true) == map_error::none) mapped_.push_back(m);
    }
}

status pci_function::run(const std::atomic<bool>& stop) {
    while (!stop.load()) {
        std::vector<pollfd> fds;
        fds.push_back({vu_->fd(), POLLIN, 0});
        for (unsigned q = 0; q < vu_->queue_count(); ++q) fds.push_back({vu_->queue(q).kick_fd(), POLLIN, 0});
        for (const unique_fd& fd : vector_fds_) fds.push_back({fd.get(), POLLIN, 0});
        // A backlog waiting on the model is tried again at once.
        const int n = ::poll(fds.data(), fds.size(), backlog_.empty() ? 100 : 0);
        if (n < 0 && errno != EINTR) return error{errno, "poll"};
        if (n <= 0 && backlog_.empty()) continue;
        if (n <= 0) std::this_thread::yield();
        if (n > 0 && fds[0].revents != 0) {
            const bool was_connected = vu_->connected();
            if (auto s = vu_->handle(); !s) {
                if (was_connected && (s.error().code == ECONNRESET)) return done{};  // the frontend went
                return s;
            }
        }
        if (n > 0 && fds[1 + kCmdQueue].revents != 0) vu_->queue(kCmdQueue).take_kick();
        if (n > 0 && fds[1 + kIrqQueue].revents != 0) vu_->queue(kIrqQueue).take_kick();
        // Commands first (a read waits on them), then interrupts, then MSI messages that
        // waited for a buffer the irq queue's kick may just have brought.
        serve_commands();
        take_vectors();
        while (!unsent_.empty()) {
            virtqueue& q = vu_->queue(kIrqQueue);
            auto c = q.pop([this](std::uint64_t a, std::size_t l) { return vu_->from_guest(a, l); });
            if (!c) break;
            q.push(*c, static_cast<std::uint32_t>(c->write(unsent_.front())));
            q.notify();
            unsent_.pop_front();
            ++stats_.msi_sent;
        }
    }
    return done{};
}

// UML's posted writes wait in its command ring (256 entries) until taken, and one that
// finds the ring full is dropped (virtqueue_add_sgs fails, um_pci_bar_copy_to does not
// retry): every message is taken off at once, a write's chain given back then, and the
// writes are carried out here in order, at the model's pace.
void pci_function::serve_commands() {
    virtqueue& q = vu_->queue(kCmdQueue);
    bool any = false;
    while (auto c = q.pop([this](std::uint64_t a, std::size_t l) { return vu_->from_guest(a, l); })) {
        queued e;
        e.msg = std::move(c->readable);
        if (c->writable_size() == 0) {
            q.push(*c, 0);  // posted: nothing to answer
            any = true;
        } else {
            e.reply = std::move(*c);
        }
        backlog_.push_back(std::move(e));
    }
    any |= drain_backlog();
    if (any) q.notify();
}

bool pci_function::drain_backlog() {
    virtqueue& q = vu_->queue(kCmdQueue);
    bool answered = false;
    std::vector<std::byte> out;
    while (!backlog_.empty()) {
        queued& e = backlog_.front();
        // A card takes every posted write to a doorbell register on its own: two EQs armed
        // one after the other through the same UAR page are both armed. The model reads
        // each doorbell register from BAR memory and clears it as it takes it
        // (sim/device.cc, poll_doorbells), so a second write before it took the first
        // would overwrite it, and that EQ would never fire again (found by Linux's
        // mlx5_core, which arms its command, async and pages EQs back to back). So a write
        // to a register still holding an untaken value has it taken first, here, under
        // the model's lock (device::take_doorbells): waiting for the model thread instead
        // held every message behind for as long as that thread went unscheduled, and on a
        // busy machine past UML's 40 ms bound on a read, whose answer then read all ones
        // (a dead device to mlx5_core's health poll). Only a register the model does not
        // watch (no queue on that page yet) still holds a value after that: the write
        // waits a little, then goes over it.
        if (doorbell_untaken(e.msg) && dev_.take_doorbells() && !doorbell_untaken(e.msg)) ++stats_.doorbells_taken;
        if (doorbell_untaken(e.msg)) {
            const auto now = std::chrono::steady_clock::now();
            if (!waiting_since_) {
                waiting_since_ = now;
                ++stats_.doorbell_waits;
            }
            if (now - *waiting_since_ < kDoorbellWait) break;
            ++stats_.doorbell_overwrites;  // a register the model does not watch (no queue on that page yet)
            if (debug_) std::fprintf(stderr, "cxv-sim-uml: a doorbell not taken in %lld ms\n",
                                     static_cast<long long>(kDoorbellWait.count()));
        }
        waiting_since_.reset();
        out.clear();
        execute(e.msg.data(), e.msg.size(), out);
        if (e.reply) {
            q.push(*e.reply, static_cast<std::uint32_t>(e.reply->write(out)));
            answered = true;
        }
        backlog_.pop_front();
    }
    return answered;
}

void pci_function::execute(const std::byte* msg, std::size_t len, std::vector<std::byte>& out) {
    if (len < kHeader) {
        ++stats_.refused;
        return;
    }
    const auto code = static_cast<std::uint8_t>(msg[0]);
    const auto bar = static_cast<std::uint8_t>(msg[1]);
    std::uint32_t size;
    std::uint64_t addr;
    std::memcpy(&size, msg + 4, 4);
    std::memcpy(&addr, msg + 8, 8);
    const std::byte* data = msg + kHeader;
    const std::size_t data_len = len - kHeader;
    switch (code) {
    case CFG_READ:
        ++stats_.cfg_reads;
        out.assign(size <= 8 ? size : 0, std::byte{0xff});
        if (!out.empty()) dev_.pci_config().read(addr, out.data(), out.size());
        return;
    case CFG_WRITE:
        ++stats_.cfg_writes;
        if (size <= 8 && data_len >= size) dev_.pci_config().write(addr, data, size);
        deliver_pending();  // MSI-X may just have been enabled or unmasked
        return;
    case MMIO_READ:
        ++stats_.mmio_reads;
        if (bar != 0) {
            out.assign(size, std::byte{0xff});  // BAR0 is the function's only BAR
            return;
        }
        bar_read(addr, size, out);
        return;
    case MMIO_WRITE:
    case MMIO_MEMSET: {
        ++stats_.mmio_writes;
        if (bar != 0) return;
        if (code == MMIO_WRITE) {
            if (data_len < size) {
                ++stats_.refused;
                return;
            }
            bar_write(addr, data, size);
        } else {
            if (data_len < 1) return;
            std::vector<std::byte> fill(size, data[0]);
            bar_write(addr, fill.data(), size);
        }
        return;
    }
    default:
        ++stats_.refused;  // INT, MSI and PME go the other way
        return;
    }
}

void pci_function::bar_read(std::uint64_t off, std::size_t size, std::vector<std::byte>& out) {
    bar0& b = dev_.bar();
    out.assign(size, std::byte{0xff});  // a read the function does not decode: all ones
    if (!dev_.pci_config().memory_enabled() || off > b.size() || size > b.size() - off) return;
    // Dword accesses as single loads, as the driver's own load would be.
    if (size == 4 && off % 4 == 0) {
        const auto v = std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(b.base() + off)).load();
        std::memcpy(out.data(), &v, 4);
    } else if (size == 8 && off % 8 == 0) {
        const auto v = std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(b.base() + off)).load();
        std::memcpy(out.data(), &v, 8);
    } else {
        std::memcpy(out.data(), b.base() + off, size);
    }
}

void pci_function::bar_write(std::uint64_t off, const std::byte* data, std::size_t size) {
    bar0& b = dev_.bar();
    if (debug_ && off >= 0x1000) {
        std::uint64_t v = 0;
        std::memcpy(&v, data, std::min<std::size_t>(size, 8));
        std::fprintf(stderr, "cxv-sim-uml: BAR write 0x%llx size %zu 0x%llx\n", static_cast<unsigned long long>(off), size,
                     static_cast<unsigned long long>(v));
    }
    if (!dev_.pci_config().memory_enabled() || off > b.size() || size > b.size() - off) return;
    if (size == 4 && off == hw::init_seg_offset::command_doorbell_vector) {
        // Each write rings its slots: they add up until the model takes the word
        // (device::set_writes_seen), as a card takes every doorbell write.
        std::uint32_t v;
        std::memcpy(&v, data, 4);
        std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(b.base() + off)).fetch_or(v);
    } else if (size == 4 && off % 4 == 0) {
        std::uint32_t v;
        std::memcpy(&v, data, 4);
        std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(b.base() + off)).store(v);
    } else if (size == 8 && off % 8 == 0) {
        std::uint64_t v;
        std::memcpy(&v, data, 8);
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(b.base() + off)).store(v);
    } else {
        std::memcpy(b.base() + off, data, size);
    }
    const std::uint64_t table = config_space::msix_table_offset, table_end = table + kEntry * pending_.size();
    if (off < table_end && off + size > table) deliver_pending();  // an entry may be unmasked
}

bool pci_function::doorbell_untaken(const std::vector<std::byte>& msg) const {
    if (msg.size() < kHeader || static_cast<std::uint8_t>(msg[0]) != MMIO_WRITE || msg[1] != std::byte{0}) return false;
    std::uint64_t off = 0;
    std::memcpy(&off, msg.data() + 8, 8);
    const std::uint64_t first_uar = std::uint64_t{dev_.config().first_uar} * hw::uar_page_size;
    if (off < first_uar || off + 8 > dev_.bar().size()) return false;
    const std::uint64_t in_page = off % hw::uar_page_size;
    std::size_t width = 0;
    if (in_page == hw::uar_cq_doorbell) width = 8;
    if (in_page == hw::uar_eq_doorbell_arm || in_page == hw::uar_eq_doorbell_no_arm) width = 4;
    if (in_page >= hw::uar_bf_offset && (in_page - hw::uar_bf_offset) % 0x100 == 0) width = 8;
    if (width == 0) return false;
    const std::byte* reg = dev_.bar().base() + off;
    return width == 4 ? std::atomic_ref<const std::uint32_t>(*reinterpret_cast<const std::uint32_t*>(reg)).load() != 0
                      : std::atomic_ref<const std::uint64_t>(*reinterpret_cast<const std::uint64_t*>(reg)).load() != 0;
}

bool pci_function::masked(unsigned vector) {
    std::uint16_t control = 0;
    dev_.pci_config().read(config_space::cap_msix + 2, &control, 2);
    if ((control & kMsixEnable) == 0 || (control & kMsixFunctionMask) != 0) return true;
    std::uint32_t vector_control;
    std::memcpy(&vector_control, dev_.bar().base() + config_space::msix_table_offset + kEntry * vector + 12, 4);
    return (vector_control & 1) != 0;
}

void pci_function::take_vectors() {
    for (unsigned v = 0; v < vector_fds_.size(); ++v) {
        std::uint64_t n;
        if (::read(vector_fds_[v].get(), &n, sizeof n) != sizeof n) continue;
        if (masked(v)) {
            pending_[v] = true;
            ++stats_.msi_deferred;
        } else {
            send_msi(v);
        }
    }
    // The PBA (PCI 3.0 6.8.2.10) shows what is pending.
    for (unsigned v = 0; v < pending_.size(); v += 64) {
        std::uint64_t bits = 0;
        for (unsigned i = 0; i < 64 && v + i < pending_.size(); ++i) bits |= std::uint64_t{pending_[v + i]} << i;
        std::memcpy(dev_.bar().base() + config_space::msix_pba_offset + v / 8, &bits, 8);
    }
}

void pci_function::deliver_pending() {
    for (unsigned v = 0; v < pending_.size(); ++v) {
        if (pending_[v] && !masked(v)) {
            pending_[v] = false;
            send_msi(v);
        }
    }
}

void pci_function::send_msi(unsigned vector) {
    // The MSI message: the 32-bit write to the entry's address of the entry's data.
    const std::byte* entry = dev_.bar().base() + config_space::msix_table_offset + kEntry * vector;
    std::vector<std::byte> m(kHeader + 4, std::byte{0});
    m[0] = std::byte{MSI};
    const std::uint32_t size = 4;
    std::memcpy(m.data() + 4, &size, 4);
    std::memcpy(m.data() + 8, entry, 8);
    std::memcpy(m.data() + kHeader, entry + 8, 4);
    if (debug_) {
        std::uint32_t data;
        std::memcpy(&data, entry + 8, 4);
        std::fprintf(stderr, "cxv-sim-uml: vector %u -> MSI data %u\n", vector, data);
    }
    unsent_.push_back(std::move(m));
}

}  // namespace cxv::sim::uml
