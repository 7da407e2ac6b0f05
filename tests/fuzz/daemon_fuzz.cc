// Fuzz target: cxvd's request parser and session order (daemon/protocol.h), the checks
// a forwarded PRM command passes (daemon/owner.h, against a client that owns a little of
// everything), and the reply parsers a client runs on what a daemon sends. No input may crash them or read
// out of bounds (run under ASan); a request that parses must encode again to the same
// bytes. The first input byte picks the fds that come with the message (none, a memfd,
// a socket, or two). libFuzzer entry point; daemon_fuzz_regress_main.cc drives it in CI.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "daemon/owner.h"
#include "daemon/protocol.h"

namespace d = cxv::daemon;

namespace {

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "daemon fuzz: %s\n", what);
    std::abort();
}

struct fds {
    int file = -1, sock[2] = {-1, -1};
    fds() {
        file = ::memfd_create("daemon-fuzz", MFD_CLOEXEC);
        if (file < 0 || ::ftruncate(file, 1 << 20) != 0) fail("memfd");
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock) != 0) fail("socketpair");
    }
};

// A client with one 1 MiB mapping at IOVA 1 MiB, UAR 5, PD 3, CQ 7, mkey 9 and QP 7.
const d::owned& some_client() {
    static d::owned* o = [] {
        auto* x = new d::owned;
        x->maps[1 << 20].length = 1 << 20;
        x->uars = {5};
        x->pds = {3};
        x->cqs = {7};
        x->mkeys = {{9, 3}};
        x->qps = {7};
        x->qp_info[7] = d::owned::qp_uses{3, 5, {7}, {1 << 20}};
        return x;
    }();
    return *o;
}

std::vector<std::byte> reencode(const d::request& r) {
    switch (r.type) {
    case d::msg_type::hello: return d::encode(r.type, r.hdr.seq, d::body(r.hello));
    case d::msg_type::status: return d::encode(r.type, r.hdr.seq, {});
    case d::msg_type::map_memory: return d::encode(r.type, r.hdr.seq, d::body(r.map));
    case d::msg_type::unmap_memory: return d::encode(r.type, r.hdr.seq, d::body(r.unmap));
    case d::msg_type::alloc_uar: return d::encode(r.type, r.hdr.seq, d::body(r.alloc_uar));
    case d::msg_type::dealloc_uar: return d::encode(r.type, r.hdr.seq, d::body(r.dealloc_uar));
    case d::msg_type::command: return d::encode(r.type, r.hdr.seq, d::body(r.command));
    }
    fail("a parsed request of no known type");
}

}  // namespace

// Commands the checks let through, for the CI driver to see that its inputs reach them.
long daemon_fuzz_commands_allowed = 0;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static fds f;
    static d::session session;  // one connection's order across inputs, as the daemon keeps it
    if (size == 0) return 0;
    const int sets[4][2] = {{-1, -1}, {f.file, -1}, {f.sock[0], -1}, {f.file, f.file}};
    const unsigned pick = data[0] % 4;
    const std::size_t nfds = pick == 0 ? 0 : pick == 3 ? 2 : 1;
    const std::span<const int> fd_span(sets[pick], nfds);
    const std::span<const std::byte> msg(reinterpret_cast<const std::byte*>(data + 1), size - 1);

    d::request r;
    const auto s = d::parse_request(msg, fd_span, r);
    if (s) {
        if (r.type == d::msg_type::map_memory && r.fd != f.file) fail("MAP_MEMORY took an fd that is not a file");
        if (r.type != d::msg_type::map_memory && r.fd != -1) fail("an fd kept by a request that takes none");
        const auto again = reencode(r);
        // Map flags other than bit 0 are refused, so a parsed request re-encodes exactly.
        if (again.size() != msg.size() || std::memcmp(again.data(), msg.data(), msg.size()) != 0) {
            fail("a parsed request does not encode to its own bytes");
        }
        (void)session.accept(r);
        if (r.type == d::msg_type::command) {
            const auto e = d::check_command(r.command.in, r.command.out_len, some_client(), d::device_facts{8},
                                            d::quotas{});
            if (!e && (e.error().code <= 0 || e.error().message.empty())) fail("a command refused without errno or text");
            if (e && e->min_out > r.command.out_len) fail("a command allowed with too short an output");
            daemon_fuzz_commands_allowed += e.ok();
        }
    } else {
        const auto& e = s.error();
        if (e.code <= 0 || e.message.empty()) fail("a refusal without errno or text");
        // The error reply the daemon would send must itself parse.
        const auto rep = d::encode_reply(r.hdr.type, r.hdr.seq, e.code, e.message);
        d::reply back;
        if (!d::parse_reply(rep, back) || back.err != e.code) fail("an error reply does not parse");
    }
    // What a client reads from a daemon it cannot trust.
    d::reply rep;
    if (d::parse_reply(msg, rep)) {
        (void)d::parse_hello_reply(rep.payload);
        (void)d::parse_status_reply(rep.payload);
        (void)d::parse_map_memory_reply(rep.payload);
        (void)d::parse_alloc_uar_reply(rep.payload);
    }
    return 0;
}
