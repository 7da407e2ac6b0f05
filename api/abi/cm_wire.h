// The connection manager's side-channel protocol (cm.h: librdmacm.so.1, whose code
// cxv-perf -R links too): one TCP connection per connection (rdma_cm_id), carrying the
// connect request, the reply or reject, the ready-to-use and the disconnect, each as one
// `wire_msg` (the roles of IBTA 12.6's REQ, REP, REJ, RTU and DREQ). Plain data and
// sockets only: no verbs here.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace cxv::cm {

// The private data limits of rdma_accept(3), rdma_connect(3) and rdma_reject(3)
// (IBTA 12.6 REQ/REP/REJ less the CM's own 36-byte header for connect).
constexpr unsigned kConnectPrivate = 56, kAcceptPrivate = 196, kRejectPrivate = 148;
constexpr unsigned kUdConnectPrivate = 180, kUdAcceptPrivate = 136;

// IBTA 12.6.7 REJ reasons as rdma_cm's REJECTED status: no listener, the consumer's, and
// a vendor option not supported (rdma_reject_ece's).
constexpr int kRejectNoListener = 8, kRejectConsumer = 28, kRejectVendorOption = 35;

// How long an active side waits for the REP (or REJ) once its REQ is sent: then
// UNREACHABLE with -ETIMEDOUT, as rdma_cm reports a REQ whose retries ran out.
constexpr std::chrono::seconds kReplyTimeout{10};

enum class msg_type : std::uint8_t { req = 1, rep, rej, rtu, dreq };

// One message on the side channel; integers in network order on the wire, host order in
// the programs (send_msg and to_host convert).
struct wire_msg {
    std::uint32_t magic;
    msg_type type;
    std::uint8_t private_data_len;
    std::uint8_t responder_resources, initiator_depth, retry_count, rnr_retry_count, srq;
    std::uint8_t link_layer, mtu, reason;  // mtu: enum ibv_mtu; link_layer: IBV_LINK_LAYER_*
    std::uint16_t lid;
    std::uint32_t qpn, psn, qkey;
    std::uint8_t gid[16];
    std::uint8_t private_data[kAcceptPrivate];
};
static_assert(sizeof(wire_msg) == 240, "the message's size is part of the protocol");
constexpr std::uint32_t kMagic = 0x63787663;  // "cxvc"

// Sends `host_order` whole (network order on the wire): 0, or -1 and errno.
int send_msg(int fd, const wire_msg& host_order);
// Converts a received message's integers to host order.
void to_host(wire_msg& m);
// Whether a received message (host order) is one of ours and within its bounds: a
// message that is not ends the connection.
bool well_formed(const wire_msg& m);

// With CXV_CM_TRACE set (non-empty) in the environment: one line on stderr,
// "cxv-cm: <CLOCK_MONOTONIC ns> <pid> <what> <address>:<port>[ began <ns>]", for a step
// of the connection manager: listen (the time once the socket listens), unlisten (the
// time just before the listener's socket is closed), and connect, refused (nobody
// listened: REJECTED, reason 8) and unreachable (the time the TCP connect returned, and
// after "began" the time it was started: the peer's answer came in between). The clock
// is the machine's, so two processes' lines can be put in order: whether a connect was
// refused while its peer did not listen, or with a listener there. Off by default, and
// never on a data path.
void trace(const char* what, const sockaddr* address, long long at_ns = 0, long long began_ns = 0);
// CLOCK_MONOTONIC in ns, the trace's clock (for a step's time taken before the line).
long long trace_clock() noexcept;

}  // namespace cxv::cm
