// Runs the wire fuzz target without libFuzzer, for CI: frames encoded from random packets
// of every opcode and link (valid, then with bytes flipped, cut short or lengthened, and
// with their CRCs left stale or not), ARP and ND frames likewise, and random bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "sim/wire/frame.h"
#include "sim/wire/neighbour.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace w = cxv::sim::wire;

int main(int argc, char** argv) {
    const long runs = argc > 1 ? std::atol(argv[1]) : 20000;
    std::mt19937_64 rng(4791);
    std::vector<std::uint8_t> ops;
    for (unsigned op = 0; op < 256; ++op) {
        if (w::headers_of(static_cast<std::uint8_t>(op)) != 0) ops.push_back(static_cast<std::uint8_t>(op));
    }
    std::vector<std::byte> frame(w::max_frame_bytes + 64);
    long decoded = 0;
    for (long i = 0; i < runs; ++i) {
        std::size_t n = 0;
        const unsigned kind = rng() % 8;
        if (kind < 5) {
            w::packet p;
            p.net.link = static_cast<w::link_kind>(rng() % 3);
            p.net.grh = rng() % 2;
            p.bth.opcode = ops[rng() % ops.size()];
            p.bth.psn = static_cast<std::uint32_t>(rng() & 0xffffff);
            p.bth.dest_qp = static_cast<std::uint32_t>(rng() & 0xffffff);
            p.net.sgid = w::link_local_gid({2, 0, 0, 0, 0, static_cast<std::uint8_t>(rng())});
            p.net.dgid = p.net.link == w::link_kind::roce_v4 ? w::ipv4_mapped_gid({169, 254, 1, 2}) : p.net.sgid;
            if (p.net.link == w::link_kind::roce_v4) p.net.sgid = w::ipv4_mapped_gid({169, 254, 1, 1});
            if (w::headers_of(p.bth.opcode) & w::has_payload) p.payload.resize(rng() % 300);
            for (auto& b : p.payload) b = static_cast<std::byte>(rng());
            n = w::encode(p, frame);
            if (n == 0) std::abort();
            if (kind == 0) {
                decoded += w::decode_roce(std::span(frame).first(n), p) == w::decode_status::ok ||
                           w::decode_ib(std::span(frame).first(n), p) == w::decode_status::ok;
            }
        } else if (kind == 5) {
            n = w::build_arp({.oper = w::arp_request, .sha = {2, 0, 0, 0, 0, 1}, .spa = {169, 254, 0, 1}, .tha = {},
                              .tpa = {169, 254, 0, 2}},
                             w::broadcast_mac, frame);
        } else if (kind == 6) {
            const auto g = w::link_local_gid({2, 0, 0, 0, 0, 1});
            n = w::build_neighbour_solicitation({2, 0, 0, 0, 0, 1}, g, w::link_local_gid({2, 0, 0, 0, 0, 2}), frame);
        } else {
            n = rng() % 200;
            for (std::size_t k = 0; k < n; ++k) frame[k] = static_cast<std::byte>(rng());
        }
        // Mutations: flip bytes, cut, extend.
        if (kind != 0 && kind != 7 && n > 0) {
            const unsigned flips = 1 + rng() % 4;
            for (unsigned k = 0; k < flips; ++k) frame[rng() % n] ^= static_cast<std::byte>(1 + rng() % 255);
            if (rng() % 3 == 0) n = rng() % n;
            else if (rng() % 4 == 0) n += rng() % 64;
        }
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(frame.data()), n);
    }
    if (decoded == 0) std::abort();  // the valid frames must decode
    std::printf("wire fuzz regression: %ld inputs (%ld valid frames decoded), no crash\n", runs, decoded);
    return 0;
}
