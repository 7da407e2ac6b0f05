// cxv::buffer (memory a cxvd maps as it is) and the daemon's function list (api/cxv.h).
#include <fcntl.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "api/cxv.h"
#include "base/errno_text.h"
#include "client/client.h"
#include "driver/vfio/memfd_ranges.h"

namespace cxv {

namespace {
}  // namespace

result<std::unique_ptr<buffer>> buffer::create(std::size_t size, bool huge) {
    const std::size_t unit = huge ? std::size_t{2} << 20 : 4096;
    if (size == 0) return error{EINVAL, "cxv::buffer::create: size 0"};
    size = (size + unit - 1) / unit * unit;
    std::unique_ptr<buffer> b(new buffer());
    // memfd_create(2): sealing allowed so the daemon's F_SEAL_SHRINK check passes (and the
    // size cannot change under either mapping); MFD_HUGETLB for 2 MiB pages.
    const unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB | MFD_HUGE_2MB : 0u);
    b->fd_.reset(::memfd_create("cxv-buffer", flags));
    if (!b->fd_) return sys_error(errno, "cxv::buffer: memfd_create");
    if (::ftruncate(b->fd_.get(), static_cast<off_t>(size)) != 0) {
        return sys_error(errno, fmt::format("cxv::buffer: {} bytes{}", size, huge ? " of 2 MiB hugepages" : ""));
    }
    if (::fcntl(b->fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        return sys_error(errno, "cxv::buffer: sealing the memfd");
    }
    void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, b->fd_.get(), 0);
    if (m == MAP_FAILED) return sys_error(errno, "cxv::buffer: mmap");
    b->data_ = static_cast<std::byte*>(m);
    b->size_ = size;
    if (auto s = driver::vfio::add_memfd_range(m, size, b->fd_.get()); !s) return s.error();
    return b;
}

buffer::~buffer() {
    if (data_ != nullptr) {
        driver::vfio::remove_memfd_range(data_);
        ::munmap(data_, size_);
    }
}

std::string daemon_path() {
    const char* d = std::getenv("CXV_DAEMON");
    return d != nullptr ? d : "";
}

result<std::vector<std::string>> daemon_functions(const std::string& path) {
    auto c = daemon::client::connect(path);
    if (!c) return c.error();
    auto h = c->hello();
    if (!h) return error{h.error().code, fmt::format("cxvd at {}: HELLO: {}", path, h.error().message)};
    // Those no other trust domain uses first (a program takes the first device), then
    // the others, each in the daemon's order.
    std::vector<std::string> out;
    for (const bool taken : {false, true}) {
        for (const auto& d : h->devices) {
            if (d.other_domain == taken) out.push_back(d.bdf);
        }
    }
    return out;
}

}  // namespace cxv
