// Runs the fuzz target without libFuzzer, for CI: a fixed number of inputs from a
// seeded generator that produces well-formed headers for every known opcode as well as
// random bytes. Coverage-guided runs use tools/fuzz (clang, -fsanitize=fuzzer).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "hw/cmd_layouts.h"
#include "hw/opcodes.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
    const long runs = argc > 1 ? std::atol(argv[1]) : 20000;
    std::mt19937_64 rng(12345);
    const std::uint16_t opcodes[] = {
#define CXV_OP(name, prm, value) value,
        CXV_CMD_OPCODES_X(CXV_OP)
#undef CXV_OP
    };
    std::vector<std::uint8_t> buf;
    for (long i = 0; i < runs; ++i) {
        const std::size_t len = 7 + rng() % 5000;
        buf.resize(len);
        for (auto& b : buf) b = static_cast<std::uint8_t>(rng());
        if (rng() % 4 != 0) {
            // A plausible command: known opcode, small op_mod, matching lengths.
            const auto op = opcodes[rng() % (sizeof(opcodes) / sizeof(opcodes[0]))];
            buf[1] = static_cast<std::uint8_t>(rng() % 2);  // sometimes bring up first
            const std::size_t ilen = len - 7;
            buf[2] = static_cast<std::uint8_t>(ilen);
            buf[3] = static_cast<std::uint8_t>(ilen >> 8);
            const std::size_t olen = 16 + rng() % 4200;
            buf[4] = static_cast<std::uint8_t>(olen);
            buf[5] = static_cast<std::uint8_t>(olen >> 8);
            buf[6] = 0;
            buf[7] = static_cast<std::uint8_t>(op >> 8);
            buf[8] = static_cast<std::uint8_t>(op);
            if (len > 14) {
                buf[13] = static_cast<std::uint8_t>(rng() % 4);  // op_mod low byte
                buf[12] = 0;
            }
        }
        LLVMFuzzerTestOneInput(buf.data(), buf.size());
    }
    std::printf("firmware fuzz regression: %ld inputs, no crash, every reply PRM-shaped\n", runs);
    return 0;
}
