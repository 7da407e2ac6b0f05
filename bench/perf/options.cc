#include "bench/perf/options.h"

#include <getopt.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cxv::perf {

namespace {

error bad(std::string message) { return error{EINVAL, std::move(message)}; }


// Long-only options (perftest's and cxv-perf's own) have codes above the short ones.
enum long_only : int {
    opt_report_gbits = 256,
    opt_cpu_util,
    opt_json,
    opt_plot,
    opt_verify,
    opt_loopback,
    opt_max_size,
};

const option kLong[] = {
    {"ib-dev", required_argument, nullptr, 'd'},
    {"ib-port", required_argument, nullptr, 'i'},
    {"size", required_argument, nullptr, 's'},
    {"all", no_argument, nullptr, 'a'},
    {"iters", required_argument, nullptr, 'n'},
    {"duration", required_argument, nullptr, 'D'},
    {"connection", required_argument, nullptr, 'c'},
    {"qp", required_argument, nullptr, 'q'},
    {"tx-depth", required_argument, nullptr, 't'},
    {"rx-depth", required_argument, nullptr, 'r'},
    {"inline_size", required_argument, nullptr, 'I'},
    {"post_list", required_argument, nullptr, 'l'},
    {"cq-mod", required_argument, nullptr, 'Q'},
    {"events", no_argument, nullptr, 'e'},
    {"CPU-freq", no_argument, nullptr, 'F'},
    {"port", required_argument, nullptr, 'p'},
    {"rdma_cm", no_argument, nullptr, 'R'},
    {"bidirectional", no_argument, nullptr, 'b'},
    {"gid-index", required_argument, nullptr, 'x'},
    {"mtu", required_argument, nullptr, 'm'},
    {"qp-timeout", required_argument, nullptr, 'u'},
    {"help", no_argument, nullptr, 'h'},
    {"report_gbits", no_argument, nullptr, opt_report_gbits},
    {"cpu_util", no_argument, nullptr, opt_cpu_util},
    {"json", required_argument, nullptr, opt_json},
    {"plot", required_argument, nullptr, opt_plot},
    {"verify", no_argument, nullptr, opt_verify},
    {"loopback", no_argument, nullptr, opt_loopback},
    {"max_size", required_argument, nullptr, opt_max_size},
    {nullptr, 0, nullptr, 0},
};

constexpr const char* kTests[] = {"send_lat", "send_bw",  "write_lat",  "write_bw",
                                  "read_lat", "read_bw", "atomic_lat", "atomic_bw"};

}  // namespace

bool parse_number(const char* text, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out) {
    if (text == nullptr || *text == '\0' || *text == '-') return false;
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 0);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
    out = v;
    return true;
}
// At most 10^8 iterations: latency tests keep a sample per iteration (8 bytes each).
result<std::uint64_t> iterations_arg(const char* text) {
    std::uint64_t v = 0;
    if (!parse_number(text, 5, 100'000'000, v)) return bad("bad -n (5 .. 100000000): " + std::string(text));
    return v;
}
result<unsigned> duration_arg(const char* text) {
    std::uint64_t v = 0;
    if (!parse_number(text, 1, 86400, v)) return bad("bad -D (1 .. 86400 seconds): " + std::string(text));
    return static_cast<unsigned>(v);
}
result<unsigned> tcp_port_arg(const char* text) {
    std::uint64_t v = 0;
    if (!parse_number(text, 1, 65535, v)) return bad("bad -p (TCP port 1 .. 65535): " + std::string(text));
    return static_cast<unsigned>(v);
}

status take_run_option(int c, const char* text, std::uint64_t& iters, bool& iters_given, unsigned& duration,
                       unsigned& tcp_port) {
    if (c == 'n') {
        auto n = iterations_arg(text);
        if (!n) return n.error();
        iters = *n;
        iters_given = true;
    } else if (c == 'D') {
        auto d = duration_arg(text);
        if (!d) return d.error();
        duration = *d;
    } else {
        auto p = tcp_port_arg(text);
        if (!p) return p.error();
        tcp_port = *p;
    }
    return ok_status();
}

const char* transport_name(transport t) {
    switch (t) {
    case transport::rc: return "RC";
    case transport::uc: return "UC";
    case transport::ud: return "UD";
    }
    return "?";
}

void print_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: cxv-perf TEST [options]            start a server and wait for a client\n"
                 "       cxv-perf TEST [options] SERVER     connect to the server at SERVER\n"
                 "       cxv-perf TEST --loopback [options] both sides in this process\n"
                 "TEST: send_lat send_bw write_lat write_bw read_lat read_bw atomic_lat atomic_bw\n"
                 "      raw_ethernet_bw raw_ethernet_lat raw_ethernet_burst_lat (TEST --help: their options)\n"
                 "options (as perftest's):\n"
                 "  -d, --ib-dev=BDF        the function (twice with --loopback: two functions)\n"
                 "  -i, --ib-port=PORT      port of the function (default 1)\n"
                 "  -s, --size=BYTES        message size (default 2; bandwidth 65536; atomic 8)\n"
                 "  -a, --all               sizes 2 .. 2^23 (up to --max_size)\n"
                 "  -n, --iters=N           iterations, at most 100000000 (default 1000; bandwidth 5000)\n"
                 "  -D, --duration=SECONDS  run for this long instead of -n iterations\n"
                 "  -c, --connection=RC|UC|UD  transport (default RC)\n"
                 "  -q, --qp=N              QPs (bandwidth tests)\n"
                 "  -t, --tx-depth=N        send queue depth (default 1; bandwidth 128)\n"
                 "  -r, --rx-depth=N        receive queue depth (default 512)\n"
                 "  -I, --inline_size=BYTES largest message sent inline\n"
                 "  -l, --post_list=N       WRs per post (bandwidth tests; -Q defaults to N)\n"
                 "  -Q, --cq-mod=N          a completion every N sends (bandwidth tests, default 100)\n"
                 "  -e, --events            sleep on CQ events instead of polling (not write_lat)\n"
                 "  -F, --CPU-freq          no warning about the CPU frequency governor\n"
                 "  -p, --port=PORT         TCP port of the out-of-band exchange (default 18515)\n"
                 "  -R, --rdma_cm           connect the QPs with rdma_cm (cxv's CM protocol, on -p)\n"
                 "  -b, --bidirectional     both directions at once (bandwidth tests)\n"
                 "  -x, --gid-index=N       GID index (default: IB no GRH, RoCE 0)\n"
                 "  -m, --mtu=BYTES         path MTU 256 .. 4096 (default the port's)\n"
                 "  -u, --qp-timeout=N      ACK timeout 4.096 us * 2^N (default 14; on the model 18)\n"
                 "      --report_gbits      bandwidth in Gbit/s\n"
                 "      --cpu_util          CPU utilisation (with -D)\n"
                 "cxv-perf's own:\n"
                 "      --json=FILE         every figure and the configuration as JSON\n"
                 "      --plot=FILE         latency CDF and histogram (.svg or .png)\n"
                 "      --verify            check every iteration's payload\n"
                 "      --loopback          client and server as two QPs in this process\n"
                 "      --max_size=BYTES    the largest size of -a\n");
}

result<options> parse_options(int argc, char** argv) {
    options o;
    if (argc < 2) return bad("no TEST given (cxv-perf --help lists them)");
    const std::string first = argv[1];
    if (first == "-h" || first == "--help") {
        o.help = true;
        return o;
    }
    bool known = false;
    for (const char* t : kTests) known |= first == t;
    if (!known) {
        return bad("unknown test '" + first + "' (send_lat send_bw write_lat write_bw read_lat read_bw atomic_lat atomic_bw "
                   "raw_ethernet_bw raw_ethernet_lat raw_ethernet_burst_lat)");
    }
    o.test = first;
    o.latency = first.ends_with("_lat");
    o.op = first.starts_with("send")    ? operation::send
           : first.starts_with("write") ? operation::write
           : first.starts_with("read")  ? operation::read
                                        : operation::atomic;
    if (!o.latency) {
        o.size = 65536;
        o.iters = 5000;
        o.tx_depth = 128;
    }
    if (o.op == operation::atomic) o.size = 8;

    bool size_given = false, iters_given = false, tx_given = false, post_list_given = false, cq_mod_given = false;
    std::uint64_t v = 0;
    opterr = 0;
    optind = 2;
    for (;;) {
        int index = 0;
        const int c = getopt_long(argc, argv, "+:d:i:s:an:D:c:q:t:r:I:l:Q:eFp:Rbx:m:u:h", kLong, &index);
        if (c == -1) break;
        const char* arg = optarg;
        const std::string shown = argv[optind - 1];
        switch (c) {
        case 'd': o.devices.push_back(arg); break;
        case 'i':
            if (!parse_number(arg, 1, 2, v)) return bad("bad -i (port 1 or 2): " + std::string(arg));
            o.ib_port = static_cast<unsigned>(v);
            break;
        case 's':
            if (!parse_number(arg, 1, std::uint64_t{1} << 23, v)) return bad("bad -s (1 .. 8388608 bytes): " + std::string(arg));
            o.size = v;
            size_given = true;
            break;
        case 'a': o.all_sizes = true; break;
        case 'n':
        case 'D':
        case 'p':
            if (auto r = take_run_option(c, arg, o.iters, iters_given, o.duration, o.tcp_port); !r) return r.error();
            break;
        case 'c': {
            const std::string t = arg;
            if (t == "RC") o.conn = transport::rc;
            else if (t == "UC") o.conn = transport::uc;
            else if (t == "UD") o.conn = transport::ud;
            else return bad("unsupported connection type '" + t + "' (RC, UC or UD)");
            break;
        }
        case 'q':
            if (!parse_number(arg, 1, 64, v)) return bad("bad -q (1 .. 64 QPs): " + std::string(arg));
            o.qps = static_cast<unsigned>(v);
            break;
        case 't':
            if (!parse_number(arg, 1, 4096, v)) return bad("bad -t (1 .. 4096): " + std::string(arg));
            o.tx_depth = static_cast<unsigned>(v);
            tx_given = true;
            break;
        case 'r':
            if (!parse_number(arg, 1, 8192, v)) return bad("bad -r (1 .. 8192): " + std::string(arg));
            o.rx_depth = static_cast<unsigned>(v);
            break;
        case 'I':
            if (!parse_number(arg, 0, 512, v)) return bad("bad -I (0 .. 512 bytes): " + std::string(arg));
            o.inline_size = static_cast<int>(v);
            break;
        case 'l':
            if (!parse_number(arg, 1, 256, v)) return bad("bad -l (1 .. 256): " + std::string(arg));
            o.post_list = static_cast<unsigned>(v);
            post_list_given = true;
            break;
        case 'Q':
            if (!parse_number(arg, 1, 4096, v)) return bad("bad -Q (1 .. 4096): " + std::string(arg));
            o.cq_mod = static_cast<unsigned>(v);
            cq_mod_given = true;
            break;
        case 'e': o.events = true; break;
        case 'F': o.no_cpufreq_warning = true; break;
        case 'R': o.rdma_cm = true; break;
        case 'b': o.bidirectional = true; break;
        case 'x':
            if (!parse_number(arg, 0, 255, v)) return bad("bad -x (GID index 0 .. 255): " + std::string(arg));
            o.gid_index = static_cast<int>(v);
            break;
        case 'm':
            if (!parse_number(arg, 256, 4096, v) || (v & (v - 1)) != 0) return bad("bad -m (256, 512, 1024, 2048 or 4096): " + std::string(arg));
            o.mtu = static_cast<unsigned>(v);
            break;
        case 'u':
            if (!parse_number(arg, 1, 31, v)) return bad("bad -u (QP timeout 1 .. 31): " + std::string(arg));
            o.qp_timeout = static_cast<int>(v);
            break;
        case 'h': o.help = true; return o;
        case opt_report_gbits: o.report_gbits = true; break;
        case opt_cpu_util: o.cpu_util = true; break;
        case opt_json: o.json = arg; break;
        case opt_plot: o.plot = arg; break;
        case opt_verify: o.verify = true; break;
        case opt_loopback: o.loopback = true; break;
        case opt_max_size:
            if (!parse_number(arg, 2, std::uint64_t{1} << 23, v)) return bad("bad --max_size (2 .. 8388608 bytes): " + std::string(arg));
            o.max_size = v;
            break;
        case ':': return bad("option " + shown + " needs a value");
        default: return bad("unknown option " + shown + " (cxv-perf --help lists them)");
        }
    }
    if (optind < argc) o.server = argv[optind++];
    if (optind < argc) return bad("unexpected argument '" + std::string(argv[optind]) + "'");

    // What the test and transport allow (perftest refuses the same).
    if (o.conn == transport::ud && o.op != operation::send) return bad(o.test + " does not run over UD (send only)");
    if (o.conn == transport::uc && (o.op == operation::read || o.op == operation::atomic)) {
        return bad(o.test + " does not run over UC (send and write only)");
    }
    if (o.op == operation::atomic && size_given && o.size != 8) return bad("atomic tests use 8-byte operands (-s 8)");
    if (o.op == operation::atomic && o.all_sizes) return bad("-a does not apply to atomic tests (8 bytes)");
    if ((o.op == operation::read || o.op == operation::atomic) && o.inline_size > 0) {
        return bad("-I does not apply to " + o.test + " (nothing is sent inline)");
    }
    if (o.latency) {
        if (o.qps > 1) return bad("-q applies to bandwidth tests only (latency uses one QP)");
        if (post_list_given) return bad("-l applies to bandwidth tests only");
        if (cq_mod_given) return bad("-Q applies to bandwidth tests only");
        if (tx_given && o.tx_depth != 1) return bad("-t applies to bandwidth tests only (latency keeps one in flight)");
    }
    if (o.bidirectional && o.latency) return bad("-b applies to bandwidth tests only");
    if (o.events && o.op == operation::write && o.latency) return bad("-e does not apply to write_lat (it polls memory)");
    if (o.cpu_util && o.duration == 0) return bad("--cpu_util needs -D (as perftest)");
    if (o.duration != 0 && o.all_sizes) return bad("-D and -a cannot be combined");
    if (o.duration != 0 && iters_given) return bad("-D and -n cannot be combined");
    if (o.post_list > o.tx_depth) return bad("-l must not exceed -t");
    if (o.post_list > 1 && !cq_mod_given) o.cq_mod = o.post_list;  // as perftest: a completion per post
    if (o.cq_mod > o.tx_depth) o.cq_mod = o.tx_depth;                // perftest does the same
    // The loop posts a list while it fits in -t beside what is outstanding, and waits for
    // the next signalled WR: that WR must be posted by then. It is when every list ends on
    // one (-Q divides -l), or when -Q fits in the room a full queue leaves (-t - -l + 1).
    if (!o.latency && o.post_list % o.cq_mod != 0 && o.cq_mod > o.tx_depth - o.post_list + 1) {
        return bad("-Q " + std::to_string(o.cq_mod) + " with -l " + std::to_string(o.post_list) + " and -t " +
                   std::to_string(o.tx_depth) + " would stall: -Q must divide -l or be at most -t - -l + 1 (" +
                   std::to_string(o.tx_depth - o.post_list + 1) + ")");
    }
    if (o.conn == transport::ud && !size_given && !o.latency) o.size = 4096;  // one MTU, as perftest's UD default
    if (o.conn == transport::ud && o.size > 4096 && !o.all_sizes) return bad("UD messages fit one MTU (at most 4096 bytes)");
    if (o.loopback && !o.server.empty()) return bad("--loopback takes no SERVER");
    if (o.loopback && o.rdma_cm) return bad("-R connects a server and a client: not with --loopback");
    if (o.devices.size() > (o.loopback ? 2u : 1u)) return bad("-d given too often");
    if (!o.plot.empty() && !o.latency) return bad("--plot draws latency tests only");
    if (!o.plot.empty() && !o.plot.ends_with(".svg") && !o.plot.ends_with(".png")) {
        return bad("--plot FILE ends with .svg or .png");
    }
    if (o.all_sizes && o.max_size < 2) return bad("--max_size must be at least 2");
    return o;
}

std::vector<std::size_t> sizes_of(const options& o, std::size_t limit) {
    if (!o.all_sizes) return {o.size};
    std::vector<std::size_t> out;
    for (std::size_t s = 2; s <= std::min(o.max_size, limit); s *= 2) out.push_back(s);
    return out;
}

}  // namespace cxv::perf
