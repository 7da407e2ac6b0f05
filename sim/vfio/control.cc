// The fault-injection control file (<sysfs dir>/cxv_sim_control): lets a test that runs
// under cxv-sim — and so cannot call into the model — ask the model for the failures
// a card can have. Each write(2) is one command:
//
//   fail OPCODE|any STATUS SYNDROME [COUNT]   the next COUNT commands fail so
//   delay OPCODE|any MS                        the next one completes MS late
//   drop OPCODE|any                            the next one never completes
//   no_event OPCODE|any                        the next one completes without an EQE
//   garble OPCODE|any SEED                     the next one's reply is pseudo-random bytes
//   pages N [COUNT]                            COUNT (1) PAGE_REQUEST events for N pages
//                                              (N < 0: the firmware offers -N back)
//   stall_health 0|1                           the health counter stops / goes on
//   health_syndrome SYND EXT_SYND              a fatal health syndrome appears
//   link up|down                               the cable, as if (un)plugged
//   clear                                      every armed fault is gone
//
// OPCODE and STATUS are PRM names (QUERY_HCA_CAP, BAD_PARAM); numbers in C syntax.
#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "hw/opcodes.h"
#include "sim/vfio/host.h"
#include "sim/vfio/libc.h"

namespace cxv::sim::vfio {

namespace {

bool parse_number(const std::string& s, unsigned long& out) {
    char* end = nullptr;
    errno = 0;
    out = std::strtoul(s.c_str(), &end, 0);
    return errno == 0 && end != s.c_str() && *end == '\0';
}

// "any" → nullopt; a PRM opcode name or number → that opcode; else false.
bool parse_opcode(const std::string& s, std::optional<hw::cmd_opcode>& out) {
    if (s == "any") {
        out.reset();
        return true;
    }
    unsigned long n = 0;
    if (parse_number(s, n) && n <= 0xffff) {
        out = static_cast<hw::cmd_opcode>(n);
        return true;
    }
    for (unsigned v = 0; v <= 0xffff; ++v) {
        if (hw::name(static_cast<hw::cmd_opcode>(v)) == s) {
            out = static_cast<hw::cmd_opcode>(v);
            return true;
        }
    }
    return false;
}

bool parse_status(const std::string& s, hw::cmd_status& out) {
    unsigned long n = 0;
    if (parse_number(s, n) && n <= 0xff) {
        out = static_cast<hw::cmd_status>(n);
        return true;
    }
    for (unsigned v = 0; v <= 0xff; ++v) {
        if (hw::name(static_cast<hw::cmd_status>(v)) == s) {
            out = static_cast<hw::cmd_status>(v);
            return true;
        }
    }
    return false;
}

}  // namespace

attr_file::~attr_file() {
    if (pending < 0) return;
    char text[4096];
    const ssize_t n_read = libc().pread(pending, text, sizeof text, 0);
    libc().close(pending);
    if (n_read > 0) (void)fs.write_attr(n, std::string_view(text, static_cast<std::size_t>(n_read)), group_open);
}

long host::control(int fd, const void* buf, std::size_t len) {
    std::lock_guard lock(mu_);
    auto file = find(fd);
    if (file && file->kind == file_kind::attr) {
        // A binding store. Unbinding vfio-pci from a function whose group this process
        // holds: Linux waits for the holder; here that would be this process, forever.
        const auto& a = static_cast<attr_file&>(*file);
        return fs_.write_attr(a.n, std::string_view(static_cast<const char*>(buf), len), a.group_open);
    }
    if (!file || file->kind != file_kind::control) return kPassThrough;
    function_state& f = static_cast<control_file&>(*file).fn;
    if (!f.model) return -ENODEV;  // the function's group is not open: no model runs
    std::istringstream line(std::string(static_cast<const char*>(buf), len));
    std::vector<std::string> w;
    for (std::string t; line >> t;) w.push_back(t);
    if (w.empty()) return -EINVAL;
    fault_plan& faults = f.model->faults();
    std::optional<hw::cmd_opcode> op;
    unsigned long a = 0, b = 0;
    const std::string& cmd = w[0];
    if (cmd == "fail" && (w.size() == 4 || w.size() == 5) && parse_opcode(w[1], op)) {
        hw::cmd_status st{};
        unsigned long count = 1;
        if (!parse_status(w[2], st) || !parse_number(w[3], a) || (w.size() == 5 && !parse_number(w[4], count))) {
            return -EINVAL;
        }
        faults.fail_commands(op, st, static_cast<sim::cmd_syndrome>(a), static_cast<unsigned>(count));
    } else if (cmd == "delay" && w.size() == 3 && parse_opcode(w[1], op) && parse_number(w[2], a)) {
        faults.delay_completion(op, std::chrono::milliseconds(a));
    } else if (cmd == "drop" && w.size() == 2 && parse_opcode(w[1], op)) {
        faults.drop_completion(op);
    } else if (cmd == "no_event" && w.size() == 2 && parse_opcode(w[1], op)) {
        faults.suppress_event(op);
    } else if (cmd == "garble" && w.size() == 3 && parse_opcode(w[1], op) && parse_number(w[2], a) &&
               a <= 0xffffffffu) {
        faults.garble_reply(op, static_cast<std::uint32_t>(a));
    } else if (cmd == "pages" && (w.size() == 2 || w.size() == 3)) {
        char* end = nullptr;
        errno = 0;
        const long n = std::strtol(w[1].c_str(), &end, 0);
        unsigned long count = 1;
        if (errno != 0 || end == w[1].c_str() || *end != '\0' || n < -(1L << 20) || n > (1L << 20) ||
            (w.size() == 3 && (!parse_number(w[2], count) || count > 4096))) {
            return -EINVAL;
        }
        for (unsigned long i = 0; i < count; ++i) f.model->request_pages(static_cast<std::int32_t>(n));
    } else if (cmd == "stall_health" && w.size() == 2 && parse_number(w[1], a)) {
        faults.stall_health(a != 0);
    } else if (cmd == "health_syndrome" && w.size() == 3 && parse_number(w[1], a) && parse_number(w[2], b) &&
               a <= 0xff && b <= 0xffff) {
        faults.raise_health_syndrome(static_cast<std::uint8_t>(a), static_cast<std::uint16_t>(b));
    } else if (cmd == "link" && w.size() == 2 && (w[1] == "up" || w[1] == "down")) {
        f.model->set_link(w[1] == "up");
    } else if (cmd == "clear" && w.size() == 1) {
        faults.clear();
    } else {
        return -EINVAL;
    }
    return static_cast<long>(len);
}

}  // namespace cxv::sim::vfio
