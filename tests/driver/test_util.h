// Shared by the driver tests that run under cxv-sim: opening the emulated function and
// arming faults through its cxv_sim_control file.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "driver/hca/hca.h"
#include "driver/vfio/vfio.h"

namespace cxv::test {

inline constexpr const char* kBdf = "0000:c5:00.0";

inline void control(const std::string& command, const char* bdf = kBdf) {
    const std::string path = std::string("/sys/bus/pci/devices/") + bdf + "/cxv_sim_control";
    const int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    const auto n = ::write(fd, command.data(), command.size());
    ::close(fd);
    REQUIRE_MESSAGE(n == static_cast<ssize_t>(command.size()), command);
}

// A result REQUIREd to hold a value, which is returned; a status REQUIREd to be OK.
template <typename T>
T take(result<T> r) {
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    return std::move(r).value();
}
inline void check_ok(const status& s) { REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message)); }
template <typename T>
status status_of(const result<T>& r) {
    return r.ok() ? ok_status() : status(r.error());
}

// A firmware refusal: errno and a message naming the command and the status.
inline void check_refused(const status& s, const char* opcode, const char* fw_status) {
    INFO("expected ", std::string(opcode), " to be refused with ", std::string(fw_status));
    REQUIRE_FALSE(s.ok());
    const std::string& m = s.error().message;
    CHECK_MESSAGE(m.find(opcode) != std::string::npos, m);
    CHECK_MESSAGE(m.find(fw_status) != std::string::npos, m);
}

inline std::unique_ptr<driver::vfio::device> open_device(const char* bdf = kBdf) {
    auto d = driver::vfio::device::open(bdf);
    REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message));
    return std::move(d).value();
}

inline std::unique_ptr<driver::hca> bring_up(const driver::hca::options& o = {}, const char* bdf = kBdf) {
    auto h = driver::hca::create(open_device(bdf), o);
    REQUIRE_MESSAGE(h.ok(), (h.ok() ? "" : h.error().message));
    return std::move(h).value();
}

}  // namespace cxv::test
