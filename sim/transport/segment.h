// A message as packets (IBA 9.7.2 "Segmentation"; 9.4 "Packet Opcodes and Headers"): the
// requester keeps each message it sent whole (sq_request), and cuts any of its packets out
// of it when it sends it first and when it sends it again, so that a go-back-N from the
// middle of a message sends the same bytes as the first time. PSNs are 24-bit counters
// compared within half their range (IBA 9.7.1.1 "PSN Ranges").
#pragma once

#include <cstdint>

#include "sim/objects/objects.h"
#include "sim/transport/transport_type.h"
#include "sim/wire/packet.h"

namespace cxv::sim {

constexpr std::uint32_t psn_add(std::uint32_t a, std::int64_t n) {
    return static_cast<std::uint32_t>((std::int64_t{a} + n) & kMask24);
}
// a - b as a signed distance: positive when a is after b (within 2^23).
constexpr std::int32_t psn_diff(std::uint32_t a, std::uint32_t b) {
    const std::uint32_t d = (a - b) & kMask24;
    return d >= 0x800000u ? static_cast<std::int32_t>(d) - 0x1000000 : static_cast<std::int32_t>(d);
}
// The packets a message of `bytes` takes at path MTU `mtu` (an empty message takes one).
constexpr std::uint32_t packets_for(std::uint64_t bytes, std::uint32_t mtu) {
    return bytes == 0 ? 1u : static_cast<std::uint32_t>((bytes + mtu - 1) / mtu);
}
// PadCnt: the bytes that round a payload up to 4 (IBA 9.2.3).
constexpr std::uint8_t pad_of(std::size_t len) { return static_cast<std::uint8_t>((4 - len % 4) % 4); }

// The BTH transport bits (IBA Table 35) of a QP's transport.
std::uint8_t opcode_transport(transport tp);

// Packet k (0 <= k < r.npsn) of the request's message, with PSN r.psn + k; for an RDMA
// READ, a READ request for the response packets from k on (IBA 9.7.5.1.3: the requester
// asks again from the first response it lacks).
wire::packet segment(const sq_request& r, std::uint32_t k);

}  // namespace cxv::sim
