#include "sim/wire/pcap.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

namespace cxv::sim::wire {
namespace {

constexpr std::uint32_t magic_usec = 0xa1b2c3d4, magic_nsec = 0xa1b23c4d;
// Endace ERF (the "Extensible Record Format" of DAG cards, as Wireshark's wiretap/erf reads
// it): a 16-byte header, then the packet; type 21 is an InfiniBand packet from its LRH.
constexpr std::size_t erf_header_bytes = 16;
constexpr unsigned char erf_type_infiniband = 21;
constexpr std::size_t lrh_bytes = 8;

void put_le32(unsigned char* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_be16(unsigned char* p, std::uint16_t v) {
    p[0] = static_cast<unsigned char>(v >> 8);
    p[1] = static_cast<unsigned char>(v);
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
    if (link == pcap_link::infiniband_erf && snaplen < erf_header_bytes + lrh_bytes)
        return error{EINVAL, "pcap: a snaplen of " + std::to_string(snaplen) + " cannot hold an ERF header and an LRH"};
    unique_fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd) return error{errno, "pcap: cannot create " + path + ": " + std::strerror(errno)};
    unsigned char h[24];  // the file header: magic, version 2.4, thiszone, sigfigs, snaplen, network
    put_le32(h, magic_usec);
    put_le16(h + 4, 2);
    put_le16(h + 6, 4);
    put_le32(h + 8, 0);
    put_le32(h + 12, 0);
    put_le32(h + 16, snaplen);
    put_le32(h + 20, static_cast<std::uint32_t>(link));
    iovec iov{h, sizeof h};
    if (!write_all(fd.get(), &iov, 1)) {
        const int e = errno;
        return error{e, "pcap: cannot write " + path + ": " + std::strerror(e)};
    }
    return std::unique_ptr<pcap_writer>(new pcap_writer(std::move(fd), link, snaplen));
}

pcap_writer::~pcap_writer() { close(); }

void pcap_writer::close() noexcept {
    std::lock_guard lock(mutex_);
    fd_.reset();
}

bool pcap_writer::write(std::span<const std::byte> frame, std::chrono::system_clock::time_point when) noexcept {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(when.time_since_epoch()).count();
    const std::uint32_t sec = static_cast<std::uint32_t>(us / 1000000), usec = static_cast<std::uint32_t>(us % 1000000);
    const bool erf = link_ == pcap_link::infiniband_erf;
    const std::size_t orig = frame.size() + (erf ? erf_header_bytes : 0);
    const std::uint32_t incl = orig < snaplen_ ? static_cast<std::uint32_t>(orig) : snaplen_;
    unsigned char h[16 + erf_header_bytes];  // the record header: seconds, microseconds, included and original lengths
    put_le32(h, sec);
    put_le32(h + 4, usec);
    put_le32(h + 8, incl);
    put_le32(h + 12, static_cast<std::uint32_t>(orig));
    std::size_t hlen = 16;
    if (erf) {  // ERF record header: timestamp, type, flags, rlen, lctr, wlen
        unsigned char* e = h + 16;
        const std::uint64_t frac = (std::uint64_t{usec} << 32) / 1000000;
        put_le32(e, static_cast<std::uint32_t>(frac));
        put_le32(e + 4, sec);
        e[8] = erf_type_infiniband;
        e[9] = 0x04;  // varying record length
        put_be16(e + 10, static_cast<std::uint16_t>(incl));
        put_be16(e + 12, 0);  // loss counter
        put_be16(e + 14, static_cast<std::uint16_t>(frame.size()));
        hlen += erf_header_bytes;
    }
    const std::size_t body = incl - (erf ? erf_header_bytes : 0);
    iovec iov[2] = {{h, hlen}, {const_cast<std::byte*>(frame.data()), body}};
    std::lock_guard lock(mutex_);
    return fd_ && write_all(fd_.get(), iov, 2);
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
        std::uint32_t incl = u32(o + 8);
        r.orig_len = u32(o + 12);
        if (b.size() - o - 16 < incl) break;  // a truncated last record
        const auto* d = reinterpret_cast<const std::byte*>(b.data() + o + 16);
        o += 16 + std::size_t{incl};
        if (f.link_type == static_cast<std::uint32_t>(pcap_link::infiniband_erf)) {
            // The ERF header: type without its extension-header bit; no extension headers.
            if (incl < erf_header_bytes || (static_cast<unsigned char>(d[8]) & 0x7f) != erf_type_infiniband ||
                (static_cast<unsigned char>(d[8]) & 0x80) != 0)
                continue;
            d += erf_header_bytes;
            incl -= erf_header_bytes;
            r.orig_len -= static_cast<std::uint32_t>(erf_header_bytes);
        }
        r.data.assign(d, d + incl);
        f.records.push_back(std::move(r));
    }
    return f;
}

}  // namespace cxv::sim::wire
