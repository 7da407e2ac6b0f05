// Fuzz target: the parsers of frames that arrive from the wire (sim/wire: decode_roce,
// decode_ib, parse_arp, parse_nd). No input may crash them or read out of bounds (run under
// ASan), and a frame that decodes must encode again to a frame that decodes to the same
// packet. libFuzzer entry point; wire_fuzz_regress_main.cc drives it in CI.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "sim/wire/frame.h"
#include "sim/wire/neighbour.h"

namespace w = cxv::sim::wire;

namespace {

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "wire fuzz: %s\n", what);
    std::abort();
}

void same_or_die(const w::packet& a, const w::packet& b) {
    if (a.bth.opcode != b.bth.opcode || a.bth.psn != b.bth.psn || a.bth.dest_qp != b.bth.dest_qp ||
        a.bth.pad != b.bth.pad || a.payload != b.payload || a.reth.va != b.reth.va || a.aeth.msn != b.aeth.msn ||
        a.deth.q_key != b.deth.q_key || a.atomic.swap_add != b.atomic.swap_add || a.atomic_ack != b.atomic_ack ||
        a.immdt != b.immdt || a.net.sgid != b.net.sgid || a.net.dgid != b.net.dgid ||
        a.net.hop_limit != b.net.hop_limit || a.net.slid != b.net.slid || a.grh_present != b.grh_present)
        fail("a decoded packet re-encoded does not decode to itself");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> f(reinterpret_cast<const std::byte*>(data), size);
    static std::vector<std::byte> out(w::max_frame_bytes);
    w::packet p, q;
    if (w::decode_roce(f, p) == w::decode_status::ok) {
        const std::size_t n = w::encode(p, out);
        if (n == 0) fail("a decoded RoCE packet does not encode");
        if (w::decode_roce(std::span(out).first(n), q) != w::decode_status::ok) fail("re-encoded RoCE frame");
        same_or_die(p, q);
    }
    if (w::decode_ib(f, p) == w::decode_status::ok) {
        const std::size_t n = w::encode(p, out);
        if (n != size) fail("a decoded IB packet encodes to another length");
        if (w::decode_ib(std::span(out).first(n), q) != w::decode_status::ok) fail("re-encoded IB frame");
        same_or_die(p, q);
    }
    w::arp_message a;
    (void)w::parse_arp(f, a);
    w::nd_message m;
    (void)w::parse_nd(f, m);
    return 0;
}
