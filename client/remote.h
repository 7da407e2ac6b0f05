// The client side of cxvd inside the driver (docs/daemon.md, "The client side"): a
// function the daemon owns, reached through its socket. One connection serves both
// seams the driver has for it: vfio::remote_backend (memory as sealed memfds mapped with
// MAP_MEMORY, UAR pages from ALLOC_UAR) and driver::command_channel (PRM commands as
// COMMAND requests). driver/res objects made on the attached hca run unchanged; their
// fast path (queues/) never touches the socket.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "base/result.h"
#include "client/client.h"
#include "driver/hca/hca.h"
#include "driver/vfio/vfio.h"

namespace cxv::daemon {

class remote_function final : public driver::vfio::remote_backend,
                              public driver::command_channel,
                              public std::enable_shared_from_this<remote_function> {
public:
    // Connects to the daemon at `path` and greets it (HELLO); `bdf` names the function
    // (empty: the daemon's first). ENOENT / ECONNREFUSED when no daemon listens there,
    // ENODEV when it has no such function, with the text saying which.
    static result<std::shared_ptr<remote_function>> connect(const std::string& path, const std::string& bdf);

    ~remote_function() override;

    const device_info& info() const noexcept { return info_; }
    std::uint16_t index() const noexcept { return index_; }

    result<std::uint64_t> map_memory(int fd, std::uint64_t offset, std::uint64_t length, bool device_writes,
                                     std::uint64_t align) override;
    status unmap_memory(std::uint64_t iova) override;
    result<uar_grant> alloc_uar() override;
    status dealloc_uar(std::uint32_t uar) override;
    result<std::vector<std::byte>> exec(std::span<const std::byte> in, std::size_t out_len) override;

    // The event channel (EVENTS): a thread of this object's reads it and calls
    // `on_event` for each event of this function, then, once the channel closes (the
    // daemon died or dropped this client) or the connection is found dead, `on_dead`
    // once with the reason (not when a fatal EVENT came first: that was the fatal).
    // The thread holds this object (a callback may let go of the last other owner, as a
    // consumer that destroys its device at the fatal event does).
    status open_events(std::function<void(const event_msg&)> on_event,
                       std::function<void(const std::string& why)> on_dead);
    // No callback begins after it returns. From a callback of the reader itself (the
    // device destroyed at an event): that callback finishes, no other one follows, and
    // the thread ends on its own.
    void stop_events() override;

    // The connection is dead: the daemon died (ECONNRESET, EPIPE), dropped this client,
    // or did not answer in time. Every request fails at once with ENODEV from then on.
    bool dead() const noexcept { return dead_.load(std::memory_order_acquire); }
    void mark_dead(const std::string& why);

private:
    remote_function(client c, device_info info, std::uint16_t index)
        : c_(std::move(c)), info_(std::move(info)), index_(index) {}
    // One request and its reply (the connection carries one at a time); a refusal is an
    // error with the daemon's errno and text.
    result<client::answer> call(msg_type t, std::span<const std::byte> body, std::span<const int> fds = {});
    void read_events(int fd, std::function<void(const event_msg&)> on_event,
                     std::function<void(const std::string&)> on_dead);
    result<std::vector<std::byte>> exec_inline(std::span<const std::byte> in, std::size_t out_len);
    result<std::vector<std::byte>> exec_large(std::span<const std::byte> in, std::size_t out_len);
    void note_cq(std::span<const std::byte> in, std::span<const std::byte> out);
    std::mutex mu_;
    client c_;
    device_info info_;
    std::uint16_t index_ = 0;
    std::atomic<bool> dead_{false};
    mutable std::mutex why_mu_;
    std::string why_;
    unique_fd events_, stop_;  // the channel, and an eventfd that ends its thread
    std::atomic<bool> stopped_{false};  // stop_events(): the reader calls nothing more
    std::thread reader_;
    std::mutex cqs_mu_;
    std::set<std::uint32_t> cqs_;  // made through this connection and not destroyed
};

// The function `bdf` of the daemon at `path` as an hca (driver::hca::attach) on a
// vfio::device attached through the daemon.
result<std::unique_ptr<driver::hca>> attach(const std::string& path, const std::string& bdf,
                                            const driver::hca::options& o);

}  // namespace cxv::daemon
