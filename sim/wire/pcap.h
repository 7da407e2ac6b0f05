// Classic pcap files (the libpcap format, documented in pcap-savefile(5) and the IETF
// draft "PCAP Capture File Format"): the model's ports record what they send and receive
// for Wireshark, and tests read them back.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace cxv::sim::wire {

// LINKTYPE_ values (tcpdump.org "Link-layer header types"). RoCEv2 frames are Ethernet.
// InfiniBand packets (LRH first) go in Endace ERF records of type INFINIBAND (21) in a
// LINKTYPE_ERF file, as the DAG cards that capture InfiniBand links write them: Wireshark
// (4.0) decodes those, but not LINKTYPE_INFINIBAND (247), which it reports as unsupported.
enum class pcap_link : std::uint32_t { ethernet = 1, infiniband_erf = 197 };

// Microsecond timestamps, little-endian. Safe to call from several threads of a process
// (a mutex: this is not the fast path). Each record goes to the file in one write(2) with
// no user-space buffer, so a process killed between records leaves a file that reads to
// its last record.
class pcap_writer {
public:
    static result<std::unique_ptr<pcap_writer>> open(const std::string& path, pcap_link link,
                                                     std::uint32_t snaplen = 65535);
    ~pcap_writer();
    pcap_writer(const pcap_writer&) = delete;
    pcap_writer& operator=(const pcap_writer&) = delete;

    // Appends one frame (cut to snaplen; the record keeps its original length), in an ERF
    // INFINIBAND record for pcap_link::infiniband_erf. False when the write failed or the
    // file is closed.
    bool write(std::span<const std::byte> frame,
               std::chrono::system_clock::time_point when = std::chrono::system_clock::now()) noexcept;
    void close() noexcept;

private:
    pcap_writer(unique_fd fd, pcap_link link, std::uint32_t snaplen)
        : fd_(std::move(fd)), link_(link), snaplen_(snaplen) {}
    std::mutex mutex_;
    unique_fd fd_;
    pcap_link link_;
    std::uint32_t snaplen_;
};

struct pcap_record {
    std::uint32_t ts_sec = 0;
    std::uint32_t ts_frac = 0;  // microseconds, or nanoseconds in a nanosecond file
    std::uint32_t orig_len = 0;
    std::vector<std::byte> data;  // in an ERF file, the InfiniBand packet without its ERF header
};
struct pcap_file {
    std::uint32_t link_type = 0;
    std::uint32_t snaplen = 0;
    bool nanoseconds = false;
    std::vector<pcap_record> records;
};
// Reads a classic pcap file of either byte order, micro- or nanosecond. A truncated last
// record (a writer killed mid-write) ends the list without an error. In a LINKTYPE_ERF file
// the ERF header of each INFINIBAND record is taken off (other ERF records are skipped).
result<pcap_file> read_pcap(const std::string& path);

}  // namespace cxv::sim::wire
