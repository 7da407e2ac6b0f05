// An emulated ConnectX function (sim/device.h) behind User-Mode Linux's virtual PCI bus
// (arch/um/drivers/virt-pci.c, include/uapi/linux/virtio_pcidev.h): Linux's own mlx5_core
// drives the model as it drives a card.
//
// UML sends each config-space and BAR access as a message on its "cmd" virtqueue (reads
// wait for the answer; writes are posted), and takes interrupts as MSI messages on its
// "irq" virtqueue. The model sees only what it sees under VFIO: BAR0 is the same shared
// memory its thread polls (a BAR write lands there as the driver's store would), config
// space is its config_space, DMA goes through its IOMMU table, which holds UML's
// physical memory at UML's physical addresses (what its DMA API hands out), and an
// MSI-X vector the model raises becomes an MSI message with the address and data Linux
// programmed into the MSI-X table -- unless the function or the vector is masked, when
// it stays pending until unmasked (PCIe 6.1.4.5).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "sim/device.h"
#include "sim/uml/vhost_user.h"

namespace cxv::sim::uml {

class pci_function {
public:
    static result<std::unique_ptr<pci_function>> create(device& dev, const std::string& socket_path);
    ~pci_function();
    pci_function(const pci_function&) = delete;
    pci_function& operator=(const pci_function&) = delete;

    // Serves one frontend: waits for it to connect, then answers it until it goes (or
    // `stop` is set). The frontend going is the normal end.
    status run(const std::atomic<bool>& stop);

    struct counters {
        std::uint64_t cfg_reads = 0, cfg_writes = 0, mmio_reads = 0, mmio_writes = 0, msi_sent = 0,
                      msi_deferred = 0, refused = 0, doorbells_taken = 0, doorbell_waits = 0,
                      doorbell_overwrites = 0;
    };
    const counters& stats() const noexcept { return stats_; }

private:
    explicit pci_function(device& dev) : dev_(dev) {}
    void on_memory(const std::vector<memory_region>& regions);
    // Takes every message off the command queue at once (a posted write's chain given
    // back then), then carries out the backlog in order (drain_backlog).
    void serve_commands();
    // The backlog's messages in order, a read answered when reached; stops at a doorbell
    // write whose register the model has not yet taken (it is tried again on the next
    // turn, and written over after kDoorbellWait). True when a read was answered.
    bool drain_backlog();
    // One virtio_pcidev message; the bytes of its answer (a read's data) in `out`.
    void execute(const std::byte* msg, std::size_t len, std::vector<std::byte>& out);
    void bar_read(std::uint64_t off, std::size_t size, std::vector<std::byte>& out);
    void bar_write(std::uint64_t off, const std::byte* data, std::size_t size);
    // Whether message `msg` writes a doorbell register that still holds a value the model
    // has not taken.
    bool doorbell_untaken(const std::vector<std::byte>& msg) const;
    // Vectors the model raised since the last call, and pending ones now unmasked.
    void take_vectors();
    void deliver_pending();
    bool masked(unsigned vector);
    void send_msi(unsigned vector);

    device& dev_;
    std::unique_ptr<vhost_user_backend> vu_;
    std::vector<unique_fd> vector_fds_;  // the eventfd each MSI-X vector signals
    std::vector<bool> pending_;       // raised while masked (the PBA's bits)
    std::deque<std::vector<std::byte>> unsent_;  // MSI messages waiting for an irq buffer
    // Command-queue messages taken but not yet carried out, in order; a read keeps its
    // chain to answer in. The head's doorbell wait, when it waits.
    struct queued {
        std::vector<std::byte> msg;
        std::optional<virtqueue::chain> reply;
    };
    std::deque<queued> backlog_;
    std::optional<std::chrono::steady_clock::time_point> waiting_since_;
    std::vector<memory_region> mapped_;          // what the IOMMU table holds of UML's memory
    counters stats_;
    bool debug_ = std::getenv("CXV_SIM_UML_DEBUG") != nullptr;  // each MSI on stderr
};

}  // namespace cxv::sim::uml
