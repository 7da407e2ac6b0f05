#include "sim/wire/pcap.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace cxv::sim::wire {
namespace {

constexpr std::uint32_t magic_usec = 0xa1b2c3d4, magic_nsec = 0xa1b23c4d;

void put_le32(unsigned char* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_le16(unsigned char* p, std::uint16_t v) {
    p[0] = static_cast<unsigned char>(v);
    p[1] = static_cast<unsigned char>(v >> 8);
}

bool write_all(int fd, iovec* iov, int n) noexcept {
    while (n > 0) {
        const ssize_t w = ::writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        std::size_t left = static_cast<std::size_t>(w);
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            ++iov;
            --n;
        }
        if (n > 0) {
            iov->iov_base = static_cast<char*>(iov->iov_base) + left;
            iov->iov_len -= left;
        }
    }
    return true;
}

}  // namespace

result<std::unique_ptr<pcap_writer>> pcap_writer::open(const std::string& path, pcap_link link,
                                                       std::uint32_t snaplen) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return error{errno, "pcap: cannot create " + path + ": " + std::strerror(errno)};
    unsigned char h[24];  // the file header: magic, version 2.4, thiszone, sigfigs, snaplen, network
    put_le32(h, magic_usec);
    put_le16(h + 4, 2);
    put_le16(h + 6, 4);
    put_le32(h + 8, 0);
    put_le32(h + 12, 0);
    put_le32(h + 16, snaplen);
    put_le32(h + 20, static_cast<std::uint32_t>(link));
    iovec iov{h, sizeof h};
    if (!write_all(fd, &iov, 1)) {
        const int e = errno;
        ::close(fd);
        return error{e, "pcap: cannot write " + path + ": " + std::strerror(e)};
    }
    return std::unique_ptr<pcap_writer>(new pcap_writer(fd, snaplen));
}

pcap_writer::~pcap_writer() { close(); }

void pcap_writer::close() noexcept {
    std::lock_guard lock(mutex_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

bool pcap_writer::write(std::span<const std::byte> frame, std::chrono::system_clock::time_point when) noexcept {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(when.time_since_epoch()).count();
    const std::uint32_t incl = frame.size() < snaplen_ ? static_cast<std::uint32_t>(frame.size()) : snaplen_;
    unsigned char h[16];  // the record header: seconds, microseconds, included and original lengths
    put_le32(h, static_cast<std::uint32_t>(us / 1000000));
    put_le32(h + 4, static_cast<std::uint32_t>(us % 1000000));
    put_le32(h + 8, incl);
    put_le32(h + 12, static_cast<std::uint32_t>(frame.size()));
    iovec iov[2] = {{h, sizeof h}, {const_cast<std::byte*>(frame.data()), incl}};
    std::lock_guard lock(mutex_);
    return fd_ >= 0 && write_all(fd_, iov, 2);
}

result<pcap_file> read_pcap(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return error{ENOENT, "pcap: cannot open " + path};
    const std::vector<unsigned char> b{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (b.size() < 24) return error{EINVAL, "pcap: " + path + " is shorter than a pcap header"};
    auto le32 = [&](std::size_t o) {
        return std::uint32_t{b[o]} | std::uint32_t{b[o + 1]} << 8 | std::uint32_t{b[o + 2]} << 16 |
               std::uint32_t{b[o + 3]} << 24;
    };
    bool swap = false;
    pcap_file f;
    const std::uint32_t m = le32(0);
    if (m == magic_usec || m == magic_nsec) {
        f.nanoseconds = m == magic_nsec;
    } else if (__builtin_bswap32(m) == magic_usec || __builtin_bswap32(m) == magic_nsec) {
        swap = true;
        f.nanoseconds = __builtin_bswap32(m) == magic_nsec;
    } else {
        return error{EINVAL, "pcap: " + path + " has no pcap magic number"};
    }
    auto u32 = [&](std::size_t o) { return swap ? __builtin_bswap32(le32(o)) : le32(o); };
    f.snaplen = u32(16);
    f.link_type = u32(20);
    for (std::size_t o = 24; o + 16 <= b.size();) {
        pcap_record r;
        r.ts_sec = u32(o);
        r.ts_frac = u32(o + 4);
        const std::uint32_t incl = u32(o + 8);
        r.orig_len = u32(o + 12);
        if (b.size() - o - 16 < incl) break;  // a truncated last record
        const auto* d = reinterpret_cast<const std::byte*>(b.data() + o + 16);
        r.data.assign(d, d + incl);
        f.records.push_back(std::move(r));
        o += 16 + std::size_t{incl};
    }
    return f;
}

}  // namespace cxv::sim::wire
