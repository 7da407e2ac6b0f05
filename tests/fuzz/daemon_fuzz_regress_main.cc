// Runs the daemon fuzz target without libFuzzer, for CI: requests of every type encoded
// from random fields (valid, then with bytes flipped, cut short, lengthened, with the
// wrong fds, the wrong version or an out-of-order sequence), replies with random
// payloads, and random bytes. Prints the executions per second.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "daemon/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern long daemon_fuzz_commands_allowed;

namespace d = cxv::daemon;

int main(int argc, char** argv) {
    const long runs = argc > 1 ? std::atol(argv[1]) : 1'000'000;
    std::mt19937_64 rng(2011);
    std::vector<std::uint8_t> in;
    std::uint32_t seq = 0;
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < runs; ++i) {
        std::vector<std::byte> msg;
        std::uint8_t fd_pick = static_cast<std::uint8_t>(rng() % 4);
        const unsigned kind = rng() % 10;
        const auto type = static_cast<d::msg_type>(1 + rng() % 7);
        const std::uint32_t s = rng() % 8 == 0 ? static_cast<std::uint32_t>(rng()) : ++seq;
        if (kind < 8) {
            std::vector<std::byte> b;
            switch (type) {
            case d::msg_type::hello:
                b = d::body(d::hello_req{static_cast<std::uint16_t>(rng() % 3), static_cast<std::uint16_t>(rng() % 3)});
                break;
            case d::msg_type::status: break;
            case d::msg_type::map_memory:
                b = d::body(d::map_memory_req{static_cast<std::uint16_t>(rng() % 2), rng() % 2 == 0,
                                              (rng() % 4) * 4096, (rng() % 300) * 4096});
                fd_pick = rng() % 4 == 0 ? fd_pick : 1;
                break;
            case d::msg_type::unmap_memory: b = d::body(d::unmap_memory_req{0, rng()}); break;
            case d::msg_type::alloc_uar: b = d::body(d::alloc_uar_req{static_cast<std::uint16_t>(rng() % 2)}); break;
            case d::msg_type::dealloc_uar:
                b = d::body(d::dealloc_uar_req{0, static_cast<std::uint32_t>(rng() % (1u << 25))});
                break;
            case d::msg_type::command: {
                d::command_req c;
                c.out_len = static_cast<std::uint32_t>(rng() % 2 ? 16 + 4 * (rng() % 64) : rng());
                c.in.resize(rng() % 2 ? 4 * (rng() % 80) : rng() % 400);
                for (auto& x : c.in) x = static_cast<std::byte>(rng() % 3 ? 0 : rng());
                // Mostly the opcodes the daemon allows (PRM: ALLOC_PD 0x800, DEALLOC_PD 0x801,
                // CREATE/DESTROY/QUERY_CQ 0x400-0x402, CREATE/DESTROY_MKEY 0x200/0x202, the QP
                // commands 0x500-0x50e: RTS2RTS 0x505, SQERR2RTS 0x506, 2RST 0x50a and SQD_RTS
                // 0x50c among them), with the numbers the fuzzed client owns in the places
                // they go.
                static const std::uint16_t ops[] = {0x800, 0x801, 0x400, 0x401, 0x402, 0x200, 0x202, 0x500,
                                                    0x501, 0x502, 0x503, 0x504, 0x505, 0x506, 0x507, 0x50a,
                                                    0x50b, 0x50c, 0x50e, 0x600};
                constexpr std::size_t kOps = sizeof ops / sizeof ops[0];
                if (c.in.size() >= 0x110 + 64 && rng() % 4 != 0) {
                    const std::uint16_t op = ops[rng() % kOps];
                    c.in[0] = static_cast<std::byte>(op >> 8);
                    c.in[1] = static_cast<std::byte>(op);
                    c.in[2] = c.in[3] = std::byte{0};
                    c.in[0x4b] = static_cast<std::byte>(rng() % 2 ? 7 : 3);  // a number at 0x48
                    c.out_len = 16 + 4 * (rng() % 8);
                    for (std::size_t k = 0x110; k + 8 <= c.in.size(); k += 8) {  // page lists in the mapping
                        const std::uint64_t pa = (1 << 20) + (rng() % 300) * 4096;
                        for (unsigned b = 0; b < 8; ++b) c.in[k + b] = static_cast<std::byte>(pa >> (56 - 8 * b));
                    }
                }
                b = d::body(c);
                break;
            }
            }
            msg = d::encode(type, s, b);
            if (kind >= 4) {  // mutations: flips, cuts, extensions, the wrong version
                const unsigned flips = rng() % 4;
                for (unsigned k = 0; k < flips; ++k) msg[rng() % msg.size()] ^= static_cast<std::byte>(1 + rng() % 255);
                if (rng() % 3 == 0) msg.resize(rng() % msg.size());
                else if (rng() % 4 == 0) msg.resize(msg.size() + rng() % 64, static_cast<std::byte>(rng()));
                if (rng() % 8 == 0 && msg.size() > 5) msg[4] = static_cast<std::byte>(rng() % 3);
            }
        } else if (kind == 8) {
            std::vector<std::byte> p(rng() % 200);
            for (auto& x : p) x = static_cast<std::byte>(rng());
            msg = d::encode_reply(static_cast<std::uint16_t>(type), s, static_cast<int>(rng() % 200), "text", p);
        } else {
            msg.resize(rng() % 120);
            for (auto& x : msg) x = static_cast<std::byte>(rng());
        }
        in.assign(1, fd_pick);
        for (auto x : msg) in.push_back(static_cast<std::uint8_t>(x));
        LLVMFuzzerTestOneInput(in.data(), in.size());
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("daemon fuzz regression: %ld inputs in %.2f s (%.0f executions/s), %ld commands allowed, no crash\n",
                runs, secs, static_cast<double>(runs) / secs, daemon_fuzz_commands_allowed);
    if (daemon_fuzz_commands_allowed == 0) std::abort();  // the inputs never got past the checks
    return 0;
}
