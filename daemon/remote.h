// The client side of cxvd inside the driver (docs/daemon.md, "The client side"): a
// function the daemon owns, reached through its socket. One connection serves both
// seams the driver has for it: vfio::remote_backend (memory as sealed memfds mapped with
// MAP_MEMORY, UAR pages from ALLOC_UAR) and driver::command_channel (PRM commands as
// COMMAND requests). driver/res objects made on the attached hca run unchanged; their
// fast path (queues/) never touches the socket.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "base/result.h"
#include "daemon/client.h"
#include "driver/hca/hca.h"
#include "driver/vfio/vfio.h"

namespace cxv::daemon {

class remote_function final : public driver::vfio::remote_backend, public driver::command_channel {
public:
    // Connects to the daemon at `path` and greets it (HELLO); `bdf` names the function
    // (empty: the daemon's first). ENOENT / ECONNREFUSED when no daemon listens there,
    // ENODEV when it has no such function, with the text saying which.
    static result<std::shared_ptr<remote_function>> connect(const std::string& path, const std::string& bdf);

    const device_info& info() const noexcept { return info_; }
    std::uint16_t index() const noexcept { return index_; }

    result<std::uint64_t> map_memory(int fd, std::uint64_t offset, std::uint64_t length, bool device_writes,
                                     std::uint64_t align) override;
    status unmap_memory(std::uint64_t iova) override;
    result<uar_grant> alloc_uar() override;
    status dealloc_uar(std::uint32_t uar) override;
    result<std::vector<std::byte>> exec(std::span<const std::byte> in, std::size_t out_len) override;

private:
    remote_function(client c, device_info info, std::uint16_t index)
        : c_(std::move(c)), info_(std::move(info)), index_(index) {}
    // One request and its reply (the connection carries one at a time); a refusal is an
    // error with the daemon's errno and text.
    result<client::answer> call(msg_type t, std::span<const std::byte> body, std::span<const int> fds = {});
    result<std::vector<std::byte>> exec_large(std::span<const std::byte> in, std::size_t out_len);
    std::mutex mu_;
    client c_;
    device_info info_;
    std::uint16_t index_ = 0;
};

// The function `bdf` of the daemon at `path` as an hca (driver::hca::attach) on a
// vfio::device attached through the daemon.
result<std::unique_ptr<driver::hca>> attach(const std::string& path, const std::string& bdf,
                                            const driver::hca::options& o);

}  // namespace cxv::daemon
