// cxv-perf's command line: perftest's options (ib_send_lat(1) and its siblings) with their
// spellings and meanings, checked against the test and transport before anything runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace cxv::perf {

enum class operation { send, write, read, atomic };
enum class transport { rc, uc, ud };

struct options {
    std::string test;  // send_lat, ..., atomic_bw
    operation op = operation::send;
    bool latency = true;
    transport conn = transport::rc;

    std::vector<std::string> devices;  // -d BDF (twice with --loopback: two functions)
    unsigned ib_port = 1;              // -i
    std::size_t size = 2;              // -s (perftest: 2 for latency, 65536 for bandwidth, 8 atomic)
    bool all_sizes = false;            // -a: 2 .. 2^23
    std::size_t max_size = std::size_t{1} << 23;  // --max_size: the largest size of -a
    std::uint64_t iters = 1000;        // -n (perftest: 1000 latency, 5000 bandwidth)
    unsigned duration = 0;             // -D seconds (0: -n iterations)
    unsigned qps = 1;                  // -q
    unsigned tx_depth = 1;             // -t (perftest: 1 latency, 128 bandwidth)
    unsigned rx_depth = 512;           // -r
    int inline_size = -1;              // -I (-1: the default for the test)
    unsigned post_list = 1;            // -l
    unsigned cq_mod = 100;             // -Q
    bool events = false;               // -e
    bool no_cpufreq_warning = false;   // -F
    unsigned tcp_port = 18515;         // -p
    bool report_gbits = false;         // --report_gbits
    bool rdma_cm = false;              // -R: QPs connected by the connection manager
    bool bidirectional = false;        // -b
    int gid_index = -1;                // -x (-1: InfiniBand LIDs, GID 0 on RoCE)
    unsigned mtu = 0;                  // -m bytes (0: the port's)
    int qp_timeout = -1;               // -u: ACK timeout 4.096 us << u (-1: 14, on the model 18)
    bool cpu_util = false;             // --cpu_util
    std::string json, plot;            // --json FILE, --plot FILE
    bool verify = false;               // --verify
    bool loopback = false;             // --loopback
    std::string server;                // SERVER (empty: this side is the server)
    bool help = false;
};

// Parses argv; an error is one line for the user (without the "cxv-perf: " prefix).
result<options> parse_options(int argc, char** argv);

// The values every test's options share, each checked as perftest bounds it (the raw
// tests' parser, raw.cc, takes them too): a whole number in [lo, hi] (decimal or 0x),
// -n's iterations, -D's seconds, -p's TCP port.
bool parse_number(const char* text, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out);
result<std::uint64_t> iterations_arg(const char* text);
result<unsigned> duration_arg(const char* text);
result<unsigned> tcp_port_arg(const char* text);
// -n, -D or -p (option code `c`, its value `text`) into the run's fields: what both
// parsers do with them.
status take_run_option(int c, const char* text, std::uint64_t& iters, bool& iters_given, unsigned& duration,
                       unsigned& tcp_port);
void print_usage(std::FILE* out);

// The sizes a run measures: -s alone, or 2, 4, ... up to the limit with -a.
std::vector<std::size_t> sizes_of(const options& o, std::size_t limit);

const char* transport_name(transport t);

}  // namespace cxv::perf
