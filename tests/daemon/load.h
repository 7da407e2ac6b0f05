// What the load tests read of the daemon and of the model behind it, to see that what
// clients made is gone again:
// - the model's firmware objects: cxv-sim prints every firmware command it ran with its
//   status when CXV_SIM_TRACE_COMMANDS=1 (docs/device-model.md, "Diagnostics"); the
//   objects alive are the successful creates less the successful destroys, per kind,
//   counted from the daemon's log (cxv-sim's stderr is the daemon's);
// - the daemon process: open fds (/proc/PID/fd), memfd mappings it holds for clients
//   (/proc/PID/maps, "/memfd:" lines) and its resident size (VmRSS, proc(5)).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace cxv::test {

// Firmware objects the model holds, by kind, from its command trace.
struct fw_objects {
    long pds = 0, cqs = 0, qps = 0, srqs = 0, mkeys = 0, uars = 0;
    bool operator==(const fw_objects&) const = default;
    std::string str() const {
        return fmt::format("pds {} cqs {} qps {} srqs {} mkeys {} uars {}", pds, cqs, qps, srqs, mkeys, uars);
    }
};

inline fw_objects fw_objects_from_trace(const std::string& log) {
    struct kind {
        std::string_view create, destroy;
        long fw_objects::*n;
    };
    static const std::array<kind, 6> kinds{{{"ALLOC_PD", "DEALLOC_PD", &fw_objects::pds},
                                            {"CREATE_CQ", "DESTROY_CQ", &fw_objects::cqs},
                                            {"CREATE_QP", "DESTROY_QP", &fw_objects::qps},
                                            {"CREATE_RMP", "DESTROY_RMP", &fw_objects::srqs},
                                            {"CREATE_MKEY", "DESTROY_MKEY", &fw_objects::mkeys},
                                            {"ALLOC_UAR", "DEALLOC_UAR", &fw_objects::uars}}};
    fw_objects o;
    std::size_t at = 0;
    while (at < log.size()) {
        std::size_t nl = log.find('\n', at);
        if (nl == std::string::npos) nl = log.size();
        const std::string_view line(log.data() + at, nl - at);
        at = nl + 1;
        // "cxv-sim BDF: slot  N OPCODE(0x...) op_mod=... delivery=0x0 status=OK(0x0) ..."
        if (line.rfind("cxv-sim ", 0) != 0 || line.find(" status=OK(") == std::string_view::npos ||
            line.find(" delivery=0x0 ") == std::string_view::npos) {
            continue;
        }
        for (const auto& k : kinds) {
            if (line.find(fmt::format(" {}(0x", k.create)) != std::string_view::npos) ++(o.*k.n);
            if (line.find(fmt::format(" {}(0x", k.destroy)) != std::string_view::npos) --(o.*k.n);
        }
    }
    return o;
}

// The daemon's memfd mappings (the clients' memory it maps): how many and their bytes.
struct memfd_maps {
    std::size_t count = 0;
    std::uint64_t bytes = 0;
};
inline memfd_maps daemon_memfd_maps(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/maps");
    std::string line;
    memfd_maps m;
    while (std::getline(f, line)) {
        if (line.find("/memfd:") == std::string::npos) continue;
        unsigned long long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx", &lo, &hi) != 2) continue;
        ++m.count;
        m.bytes += hi - lo;
    }
    return m;
}

// VmRSS of `pid` in KiB (proc(5)); 0 when it cannot be read.
inline std::uint64_t rss_kib(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line)) {
        unsigned long long kib = 0;
        if (std::sscanf(line.c_str(), "VmRSS: %llu kB", &kib) == 1) return kib;
    }
    return 0;
}

}  // namespace cxv::test
