// The layout mechanism itself: bit numbering, masking, neighbours left untouched.
#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

#include <doctest/doctest.h>

#include "hw/ifc.h"

namespace ifc = cxv::hw::ifc;

namespace {

// Reads bit i of a buffer in the PRM's numbering (bit 0 = MSB of byte 0).
bool bit(const std::byte* p, std::size_t i) {
    return (std::to_integer<unsigned>(p[i / 8]) >> (7 - i % 8)) & 1;
}

template <typename F>
void check_only_own_bits() {
    std::array<std::byte, 64> buf{};
    ifc::set<F>(buf.data(), F::max_value);
    for (std::size_t i = 0; i < buf.size() * 8; ++i) {
        const bool inside = i >= F::bit_offset && i < F::bit_offset + F::bit_width;
        CHECK_MESSAGE(bit(buf.data(), i) == inside, std::string(F::name), " bit ", i);
    }
    CHECK(ifc::get<F>(buf.data()) == F::max_value);
}

}  // namespace

TEST_CASE("set writes exactly the field's bits in PRM bit order") {
    check_only_own_bits<ifc::cmd_queue_entry::type>();       // bits 0..7: byte 0
    check_only_own_bits<ifc::cmd_queue_entry::ownership>();  // bit 0x1ff: LSB of byte 63
    check_only_own_bits<ifc::cmd_queue_entry::status>();     // bits 0x1f8..0x1fe
    check_only_own_bits<ifc::cmd_queue_entry::input_mailbox_pointer_31_9>();
    check_only_own_bits<ifc::cmd_queue_entry::input_length>();
}

TEST_CASE("fields are big-endian in memory") {
    std::array<std::byte, 64> buf{};
    ifc::set<ifc::cmd_queue_entry::input_length>(buf.data(), 0x11223344);
    CHECK(buf[4] == std::byte{0x11});
    CHECK(buf[5] == std::byte{0x22});
    CHECK(buf[6] == std::byte{0x33});
    CHECK(buf[7] == std::byte{0x44});
    ifc::set<ifc::cmd_queue_entry::status>(buf.data(), 0x05);
    ifc::set<ifc::cmd_queue_entry::ownership>(buf.data(), 1);
    CHECK(buf[63] == std::byte{0x0b});  // status << 1 | ownership
}

TEST_CASE("neighbouring fields survive random writes") {
    std::mt19937_64 rng(42);
    std::array<std::byte, ifc::initial_seg::size_bytes> seg{};
    for (int round = 0; round < 1000; ++round) {
        const std::uint32_t size = rng() & 0xf, stride = rng() & 0xf, nic = rng() & 0x3;
        const std::uint32_t addr = rng() & 0xfffff;
        ifc::set<ifc::initial_seg::cmdq_phy_addr_31_12>(seg.data(), addr);
        ifc::set<ifc::initial_seg::nic_interface>(seg.data(), nic);
        ifc::set<ifc::initial_seg::log_cmdq_size>(seg.data(), size);
        ifc::set<ifc::initial_seg::log_cmdq_stride>(seg.data(), stride);
        REQUIRE(ifc::get<ifc::initial_seg::cmdq_phy_addr_31_12>(seg.data()) == addr);
        REQUIRE(ifc::get<ifc::initial_seg::nic_interface>(seg.data()) == nic);
        REQUIRE(ifc::get<ifc::initial_seg::log_cmdq_size>(seg.data()) == size);
        REQUIRE(ifc::get<ifc::initial_seg::log_cmdq_stride>(seg.data()) == stride);
    }
}

TEST_CASE("values wider than a field are truncated to it, and fits() says so") {
    std::array<std::byte, 64> buf{};
    ifc::set<ifc::cmd_queue_entry::status>(buf.data(), 0xff);
    CHECK(ifc::get<ifc::cmd_queue_entry::status>(buf.data()) == 0x7f);
    CHECK(ifc::get<ifc::cmd_queue_entry::ownership>(buf.data()) == 0);
    CHECK(ifc::fits<ifc::cmd_queue_entry::status>(0x7f));
    CHECK_FALSE(ifc::fits<ifc::cmd_queue_entry::status>(0x80));
}

TEST_CASE("arrays and nested structures") {
    std::array<std::byte, ifc::cmd_if_box::size_bytes> box{};
    ifc::set<ifc::cmd_if_box::mailbox_data>(box.data(), 511, 0xab);
    CHECK(box[511] == std::byte{0xab});
    CHECK(ifc::get<ifc::cmd_if_box::mailbox_data>(box.data(), 511) == 0xab);

    std::array<std::byte, ifc::initial_seg::size_bytes> seg{};
    auto* health = ifc::at<ifc::initial_seg::health_buffer>(seg.data());
    CHECK(health == seg.data() + 0x200);
    ifc::set<ifc::health_buffer::synd>(health, 0x10);
    CHECK(seg[0x23d] == std::byte{0x10});
}

TEST_CASE("64-bit fields are two big-endian dwords") {
    std::array<std::byte, 64> buf{};
    using f = ifc::scalar_field<0x40, 64>;
    ifc::set<f>(buf.data(), 0x0102030405060708ull);
    for (int i = 0; i < 8; ++i) CHECK(buf[8 + i] == std::byte(i + 1));
    CHECK(ifc::get<f>(buf.data()) == 0x0102030405060708ull);
}
