// MSI-X vectors: eventfds registered, signalled, unregistered; the device keeps its own
// reference to each eventfd.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include <doctest/doctest.h>

#include "sim/pci/msix.h"

using cxv::sim::msix_table;

namespace {

std::uint64_t drain(int fd) {
    std::uint64_t v = 0;
    return ::read(fd, &v, sizeof(v)) == sizeof(v) ? v : 0;
}

}  // namespace

TEST_CASE("a signalled vector adds 1 to its eventfd; a vector without one counts as lost") {
    msix_table t(4);
    const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    REQUIRE(fd >= 0);
    CHECK(t.set(2, fd));
    CHECK(t.attached(2));
    CHECK(t.signal(2));
    CHECK(t.signal(2));
    CHECK(drain(fd) == 2);
    CHECK_FALSE(t.signal(1));
    CHECK(t.lost() == 1);
    CHECK_FALSE(t.set(4, fd));  // out of range
    CHECK(t.set(2, -1));
    CHECK_FALSE(t.attached(2));
    CHECK_FALSE(t.signal(2));
    close(fd);
}

TEST_CASE("closing the driver's fd does not redirect the device's signals") {
    msix_table t(2);
    const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    REQUIRE(fd >= 0);
    REQUIRE(t.set(0, fd));
    // The driver closes its fd and the number is reused by another file.
    close(fd);
    int pipefd[2];
    REQUIRE(pipe2(pipefd, O_NONBLOCK) == 0);
    // The device's reference still names the original eventfd: nothing lands in the pipe,
    // whichever number it got.
    CHECK(t.signal(0));
    char buf[8];
    CHECK(::read(pipefd[0], buf, sizeof(buf)) == -1);
    close(pipefd[0]);
    close(pipefd[1]);
}
