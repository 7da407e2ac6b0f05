// What a ConnectX's receive pipeline reads of an Ethernet frame before it steers it: the
// outer headers (Ethernet II with at most one 802.1Q tag, IPv4 or IPv6, UDP or TCP),
// whether their checksums hold, and from them the image that flow table entries match
// (PRM "Flow Table Entry Match Set Layer 2-4", hw::ifc::fte_match_set_lyr_2_4) and the
// input of a TIR's hash (PRM "RX Hash Field Select"; the Toeplitz function of Microsoft's
// RSS specification).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "hw/cqe.h"
#include "hw/ifc.h"
#include "sim/wire/packet.h"

namespace cxv::sim {

// What flow table entries can see of a frame (match_image reads nothing else). It has no
// padding, so that two frames' fields compare as bytes: the receive pipeline keeps the
// last frame's steering while the next frame's fields are the same.
struct eth_match_fields {
    std::array<std::uint8_t, 6> dmac{}, smac{};
    std::array<std::uint8_t, 16> src_ip{}, dst_ip{};  // IPv4: the last 4 bytes
    std::uint16_t ethertype = 0;  // after the VLAN tag
    std::uint16_t vid = 0;
    std::uint16_t sport = 0, dport = 0;
    std::uint16_t tcp_flags = 0;  // 9 bits
    std::uint8_t vlan = 0;        // an 802.1Q tag was present
    std::uint8_t prio = 0, cfi = 0;
    std::uint8_t ip_version = 0;  // 0 (not IP), 4 or 6
    std::uint8_t ip_protocol = 0, dscp = 0, ecn = 0, ttl = 0, ihl = 0;
    std::uint8_t fragment = 0;    // an IPv4 fragment (MF or an offset); its L4 is not read
    std::uint8_t udp = 0, tcp = 0;
    std::uint16_t unused = 0;      // always 0: the struct has no padding
    std::uint32_t flow_label = 0;  // IPv6's (20 bits)
};
static_assert(std::has_unique_object_representations_v<eth_match_fields>);

struct eth_headers : eth_match_fields {
    std::uint32_t l3_at = 0, l4_at = 0;  // offsets in the frame
    bool l3_ok = false;  // IPv4's header checksum holds (IPv6 has none: true)
    bool l4_ok = false;  // the UDP or TCP checksum holds (UDP over IPv4 may send none)
    // ip_packet_sum's answer, where parse_eth had it for free (an IPv4 packet whose
    // checksums its sender computed: `known`); else ip_packet_sum reads it.
    bool packet_sum_known = false;
    std::uint16_t packet_sum = 0;
    // What the answer rests on besides the frame's size and parse_eth's arguments: the
    // frame's bytes [0, read_end). 0: more (an L4 checksum summed over the payload).
    std::uint32_t read_end = 0;
};

// RFC 1071's ones' complement sum of the 16-bit words of `b` added to `acc`, folded to
// 16 bits; and the sum over an L4 segment's pseudo-header (RFC 768, 793, 8200 8.1) for a
// segment of `l4_len` bytes, not folded, to start an L4 checksum with.
std::uint16_t ones_sum(std::span<const std::byte> b, std::uint32_t acc = 0) noexcept;
std::uint32_t pseudo_header_sum(const eth_headers& h, std::size_t l4_len) noexcept;

// The receive CQE's check_sum (PRM "CQE Format"; Linux's mlx5e hands it to the stack as
// CHECKSUM_COMPLETE): the ones' complement sum of the IP packet from its header to its
// last byte (a short frame's padding left out), as ones_sum gives it; 0 for a frame that
// is not IP. `h` is parse_eth's for `frame`: where its checksums hold and the L4
// segment is the rest of the packet, the sum follows from them without reading it again.
std::uint16_t ip_packet_sum(std::span<const std::byte> frame, const eth_headers& h) noexcept;

// Reads the headers of `frame` (at least 14 bytes; shorter: false). A frame whose IP or
// L4 header is cut short is L2 only, as a card's parser leaves it. Without `checksums`
// (a sender about to fill them) l3_ok and l4_ok stay false, unread. The checksums
// `known` (computed by the sending device over the same bytes: wire::ip_checksums) are
// taken as holding, not summed; every other condition on l3_ok and l4_ok still applies.
bool parse_eth(std::span<const std::byte> frame, eth_headers& out, bool checksums = true,
               wire::ip_checksums known = {}) noexcept;

// parse_eth, with the last frame's answer kept: a frame of the same size whose bytes
// [0, read_end) and parse arguments are the last one's has the same headers, and is not
// parsed again (a feed's frames differ in their payloads, not their headers; a steady
// stream of them is the case a model thread's rate rests on). One per pipeline, used
// from one thread at a time.
class eth_parse_memo {
public:
    // parse_eth's answer (null: false), good until the next call.
    const eth_headers* parse(std::span<const std::byte> frame, bool checksums = true,
                             wire::ip_checksums known = {}) noexcept {
        if (kept_end_ != 0 && frame.size() == size_ && checksums == checksums_ && known.l3 == known_.l3 &&
            known.l4 == known_.l4 && same_prefix(frame.data(), bytes_.data(), kept_end_)) {
            return &kept_;
        }
        return parse_again(frame, checksums, known);
    }

private:
    [[gnu::noinline]] const eth_headers* parse_again(std::span<const std::byte> frame, bool checksums,
                                                     wire::ip_checksums known) noexcept;
    // Whether the first `n` bytes (16 or more) of `a` and `b` are the same: 16 at a time,
    // the last 16 overlapping the ones before.
    static bool same_prefix(const std::byte* a, const std::byte* b, std::size_t n) noexcept {
        using v16 = std::uint64_t __attribute__((vector_size(16)));
        v16 differ{}, x, y;
        for (std::size_t i = 0; i + 16 <= n; i += 16) {
            std::memcpy(&x, a + i, 16);
            std::memcpy(&y, b + i, 16);
            differ |= x ^ y;
        }
        std::memcpy(&x, a + n - 16, 16);
        std::memcpy(&y, b + n - 16, 16);
        differ |= x ^ y;
        return (differ[0] | differ[1]) == 0;
    }

    eth_headers kept_;
    std::uint32_t kept_end_ = 0;  // kept_.read_end, or 0: nothing kept
    std::size_t size_ = 0;
    bool checksums_ = false;
    wire::ip_checksums known_;
    // The bytes read_end covers: at most an Ethernet header with a tag, an IPv4 header
    // with options and a TCP header's first 14 bytes.
    std::array<std::byte, 96> bytes_{};
};

// The headers as a match sees them (`out`): the outer fte_match_set_lyr_2_4, then the
// misc parameters' fte_match_set_misc (the outer IPv6 flow label), as fte_match_param
// begins.
inline constexpr std::size_t match_image_bytes =
    hw::ifc::fte_match_set_lyr_2_4::size_bytes + hw::ifc::fte_match_set_misc::size_bytes;
void match_image(const eth_match_fields& h, std::span<std::byte, match_image_bytes> out) noexcept;

// A TIR's hash of the headers (hw::ifc::tirc: rx_hash_fn, the Toeplitz key, the outer
// field selector), and the CQE's rss_hash_type for it (0: nothing hashed, the packet's
// L3 or L4 not the selector's).
struct rx_hash_result {
    std::uint32_t value = 0;
    std::uint8_t type = 0;
};
rx_hash_result rx_hash(const std::byte* tirc, const eth_headers& h) noexcept;

// The Toeplitz hash of `input` under `key` (40 bytes), as RSS computes it.
std::uint32_t toeplitz(std::span<const std::uint8_t> key, std::span<const std::uint8_t> input) noexcept;

}  // namespace cxv::sim
