// The cxvd protocol's codec: versioned messages, one per packet of a SOCK_SEQPACKET UNIX
// socket (unix(7): SOCK_SEQPACKET keeps record boundaries, so a message is never split or
// merged), file descriptors beside it as SCM_RIGHTS (protocol/transport.h carries them).
//
// Every message starts with a 16-byte header in host byte order (client and daemon are on
// one host): magic "CXVD", version, type, sequence, and the body's length. A request's
// reply has the type | reply_bit and the request's sequence; its body starts with an errno
// (0 = success) and a short text, then the typed payload. Every field of a request is
// checked here before anything uses it; the daemon then checks what it means (ownership,
// quotas).
//
// This is the control path only: a client's fast path (posting, doorbells, polling) never
// goes through the daemon.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "protocol/transport.h"

namespace cxv::daemon {

constexpr std::uint32_t protocol_magic = 0x44565843;  // "CXVD" in memory order
// 2: EVENTS and the event channel (daemon → client EVENT messages); MAP_MEMORY carries
// the IOVA alignment; COMMAND_FD carries a command too large for one message in a sealed
// memfd (and its output back in one). 3: HELLO carries port 1's PTYS register. 4: COUNTERS,
// STATUS's page-list entries per client, and whether another trust domain uses a function.
constexpr std::uint16_t protocol_version = 4;
constexpr std::size_t max_text_bytes = 256;
// A forwarded PRM command's input: the fixed part and its trailing page lists.
constexpr std::size_t max_command_in_bytes = 32 * 1024;
constexpr std::size_t max_command_out_bytes = 32 * 1024;
// COMMAND_FD's input and output, in a memfd: 4 MiB and a page hold the MTT of a 2 GiB
// memory key in 4 KiB pages (8 bytes each, PRM "CREATE_MKEY"). The daemon's command
// queue needs a 512-byte mailbox block per 512 bytes past the first 16 (PRM "Command
// Interface"), so 8,200 of them for the largest; cxvd preallocates that many.
constexpr std::size_t max_large_command_bytes = (std::size_t{4} << 20) + 4096;
// Input and output together: the command queue's pool (cxvd --mailbox-blocks, 8,448 by
// default) holds the largest input, an output of up to 32 KiB beside it, and ~180 blocks
// more for the other threads' commands (the metrics thread's QUERY_VPORT_COUNTER), so
// one client's command cannot take every block (ENOMEM at once for the others).
constexpr std::size_t max_large_command_total = max_large_command_bytes + max_command_out_bytes;
// MAP_MEMORY's IOVA alignment: 4 KiB to 1 GiB, a power of two, at most the length rounded up
// to a power of two and, above 2 MiB, at most the length (IOVA space the quota does not count).
constexpr std::uint64_t max_map_align = std::uint64_t{1} << 30;
constexpr std::uint16_t reply_bit = 0x8000;

enum class msg_type : std::uint16_t {
    hello = 1,         // versions; reply: devices and the caps a client needs
    status = 2,        // reply: devices and the clients the caller may see (its uid's, or all)
    map_memory = 3,    // fd (memfd / hugetlbfs, sealed against shrinking); reply: IOVA
    unmap_memory = 4,  // by IOVA
    alloc_uar = 5,     // reply: UAR index, device fd, BAR0 offset of the page
    dealloc_uar = 6,   // by index
    command = 7,       // a PRM command mailbox, run if allowed
    // The client's event channel: reply with one fd, the client's end of a
    // SOCK_SEQPACKET socketpair(2) on which the daemon sends EVENT messages.
    events = 16,
    // Daemon → client on the event channel only, never a request: an event_msg.
    event = 17,
    // A command too large for one message: its input in a memfd sealed against writes
    // and resizing (F_SEAL_WRITE, F_SEAL_SHRINK, F_SEAL_GROW); an output over
    // max_command_out_bytes comes back the same way, as the reply's one fd.
    command_fd = 8,
    // A function's vport counters as they count now, by name; claims nothing (the
    // function's trust domain and the operator may ask).
    counters = 9,
};
bool known_type(std::uint16_t t) noexcept;
const char* type_name(std::uint16_t t) noexcept;

struct header {
    std::uint32_t magic = protocol_magic;
    std::uint16_t version = protocol_version;
    std::uint16_t type = 0;
    std::uint32_t seq = 0;
    std::uint32_t length = 0;  // of the body
};
static_assert(sizeof(header) == header_bytes, "the header is sent as it lies in memory");

// ---- request bodies -------------------------------------------------------------------

struct hello_req {
    std::uint16_t min_version = protocol_version, max_version = protocol_version;
};
struct map_memory_req {
    std::uint16_t device = 0;
    bool device_writes = true;
    std::uint64_t offset = 0;  // in the fd, page-aligned
    std::uint64_t length = 0;  // page multiple, > 0
    std::uint64_t align = 4096;  // of the IOVA: a power of two, 4 KiB to max_map_align
};
struct unmap_memory_req {
    std::uint16_t device = 0;
    std::uint64_t iova = 0;
};
struct alloc_uar_req {
    std::uint16_t device = 0;
};
struct dealloc_uar_req {
    std::uint16_t device = 0;
    std::uint32_t uar = 0;
};
struct events_req {
    std::uint16_t device = 0;
};
struct command_req {
    std::uint16_t device = 0;
    std::uint32_t out_len = 0;
    std::vector<std::byte> in;  // opcode first, as cmd_queue::exec takes it
};
// COMMAND_FD's body: the input is the first in_len bytes of the fd beside it.
struct command_fd_req {
    std::uint16_t device = 0;
    std::uint32_t out_len = 0;
    std::uint32_t in_len = 0;
};
struct counters_req {
    std::uint16_t device = 0;
};

// A request as parsed: the header, the body of its type, and the fd it carried (owned by
// the caller; -1 when none).
struct request {
    header hdr;
    msg_type type = msg_type::hello;
    hello_req hello;
    map_memory_req map;
    unmap_memory_req unmap;
    alloc_uar_req alloc_uar;
    dealloc_uar_req dealloc_uar;
    command_req command;  // COMMAND, and COMMAND_FD with its input read from the fd
    events_req events;
    counters_req counters;
    int fd = -1;
    // The header's magic and version were right, so hdr.seq is the client's: the session
    // moves past it even when the rest is refused (session::skip).
    bool header_ok = false;
};

// Parses and checks one request: header (magic, version, known type, length = bytes
// after the header), the body's exact size and every field's range, the fds (count for
// the type; map_memory's must be a regular file or memfd, fstat(2)). On error the code is
// the errno to reply with (EPROTO, EBADMSG, EMSGSIZE, EINVAL, EBADF) and `out.hdr` holds
// what of the header could be read, so the reply can name the sequence.
status parse_request(std::span<const std::byte> msg, std::span<const int> fds, request& out);

// The header of a message the kernel cut short (receive's `cut`): `out.hdr` as far as
// it goes, header_ok when its magic and version are right, so the refusal carries the
// sender's sequence and the session moves past it as the sender did.
void read_cut_header(std::span<const std::byte> first, request& out);

// The order of a connection's requests: HELLO first and once, then sequence numbers
// one above the last request's (the first HELLO's is the client's choice). A request out
// of order is refused (EPROTO) and does not move the sequence on.
class session {
public:
    status accept(const request& r);
    // A request refused before accept() (its body or fds): when its header was readable
    // and its sequence the expected one, the sequence moves on as the client's did.
    void skip(const request& r);
    bool greeted() const noexcept { return greeted_; }

private:
    bool greeted_ = false;
    std::uint32_t last_seq_ = 0;
};

// ---- replies --------------------------------------------------------------------------

struct reply {
    header hdr;
    int err = 0;
    std::string text;
    std::vector<std::byte> payload;
};
status parse_reply(std::span<const std::byte> msg, reply& out);

// ---- encoding -------------------------------------------------------------------------

// A little writer and reader for bodies: fixed-width integers in host order, strings and
// blobs as a 16-bit length and the bytes. The reader fails (ok() false) instead of
// reading past the end.
class writer {
public:
    template <typename T>
    writer& put(T v) {
        const auto* p = reinterpret_cast<const std::byte*>(&v);
        bytes.insert(bytes.end(), p, p + sizeof v);
        return *this;
    }
    writer& str(std::string_view s);
    writer& blob(std::span<const std::byte> b);
    std::vector<std::byte> bytes;
};

class reader {
public:
    explicit reader(std::span<const std::byte> b) : b_(b) {}
    template <typename T>
    T get() {
        T v{};
        if (b_.size() - pos_ < sizeof v || !ok_) {
            ok_ = false;
            return v;
        }
        __builtin_memcpy(&v, b_.data() + pos_, sizeof v);
        pos_ += sizeof v;
        return v;
    }
    std::string str();
    std::vector<std::byte> blob();
    std::span<const std::byte> rest() const { return b_.subspan(pos_); }
    bool ok() const { return ok_; }
    void fail() { ok_ = false; }  // what was read does not make sense
    bool at_end() const { return ok_ && pos_ == b_.size(); }

private:
    std::span<const std::byte> b_;
    std::size_t pos_ = 0;
    bool ok_ = true;
};

std::vector<std::byte> encode(msg_type type, std::uint32_t seq, std::span<const std::byte> body);
std::vector<std::byte> encode_reply(std::uint16_t type, std::uint32_t seq, int err, std::string_view text,
                                    std::span<const std::byte> payload = {});

// Request bodies, for clients.
std::vector<std::byte> body(const hello_req& r);
std::vector<std::byte> body(const map_memory_req& r);
std::vector<std::byte> body(const unmap_memory_req& r);
std::vector<std::byte> body(const alloc_uar_req& r);
std::vector<std::byte> body(const dealloc_uar_req& r);
std::vector<std::byte> body(const command_req& r);
std::vector<std::byte> body(const events_req& r);
std::vector<std::byte> body(const counters_req& r);

// ---- events ---------------------------------------------------------------------------

// One event on the event channel, for the client that owns its object (or for every
// client of the function: port changes, fatal). A header (type event, sequence the
// channel's count from 1) and this body. `overflow`: the connection's event queue in the
// daemon was full and `object` events were dropped before this one (any of them may
// have been a completion: a CQ armed then may wait in vain; `device` is any_device).
struct event_msg {
    enum class kind : std::uint8_t { completion = 0, async = 1, overflow = 2 };
    static constexpr std::uint16_t any_device = 0xffff;
    std::uint16_t device = 0;
    kind what = kind::completion;
    std::uint8_t async_kind = 0;  // driver::hca_event::kind (async)
    std::uint8_t port = 0;
    std::uint8_t event_type = 0;  // a queue error: the EQE's type (hw::event_type), which says what `object` is
    std::uint32_t object = 0;     // completion: the CQN; async: the CQ/QP/SRQ number; overflow: events dropped
    std::string detail;           // async, overflow: what happened, for logs (at most max_text_bytes)
};
std::vector<std::byte> encode_event(std::uint32_t seq, const event_msg& e);
// One message from the event channel: header (magic, version, type event, length) and body.
result<event_msg> parse_event(std::span<const std::byte> msg);
// The largest EVENT: the header, its fixed fields and the longest detail.
constexpr std::size_t max_event_bytes = 512;
static_assert(header_bytes + 32 + max_text_bytes <= max_event_bytes);
std::vector<std::byte> body(const command_fd_req& r);

// ---- reply payloads -------------------------------------------------------------------

struct device_info {
    std::string bdf;
    std::string firmware;
    bool port_up = false;
    bool ethernet = false;
    std::uint8_t port_logical = 0;  // IBTA PortState
    std::uint32_t comp_eqn = 0;     // the EQ a client's CQs report to
    std::vector<std::byte> caps;    // cmd_hca_cap as the daemon set it
    // Port 1's addresses and MTU, as a client's driver needs them to connect QPs (HELLO
    // only): the RoCE GID table the daemon programmed (index 0 on), the MAC and IPv4
    // address behind it, the largest path MTU (qpc.mtu encoding).
    std::vector<std::array<std::uint8_t, 16>> gids;
    std::array<std::uint8_t, 6> mac{};
    std::array<std::uint8_t, 4> ipv4{};
    std::uint8_t max_mtu = 0;
    std::uint64_t bar_size = 0;  // BAR0's, where a client maps its UAR pages
    std::vector<std::byte> ptys;  // port 1's PTYS register (its speed), as the daemon read it
    // HELLO: another trust domain uses the function now, so the asker's requests on it
    // would be refused EBUSY (a client that names no function takes one without this).
    bool other_domain = false;
};
struct hello_reply {
    std::uint16_t version = protocol_version;
    std::vector<device_info> devices;
};
struct client_info {
    std::int32_t pid = 0;
    std::uint32_t uid = 0, gid = 0;
    std::string comm;
    std::uint32_t pds = 0, cqs = 0, mkeys = 0, qps = 0, srqs = 0, uars = 0, maps = 0;
    std::uint64_t pinned = 0;
    std::uint64_t translations = 0;  // page-list entries its objects hold (quotas::translations)
};
struct status_reply {
    std::vector<device_info> devices;  // caps left empty
    std::vector<client_info> clients;
    std::uint64_t commands = 0, refused = 0, clients_served = 0;
    // Clients connected now; `clients` lists as many as fit one message.
    std::uint32_t clients_total = 0;
};
struct map_memory_reply {
    std::uint64_t iova = 0;
};
struct counters_reply {
    std::vector<std::pair<std::string, std::uint64_t>> counters;  // driver::named_counters
};
struct alloc_uar_reply {
    std::uint32_t uar = 0;
    std::uint64_t mmap_offset = 0;  // in the device fd passed beside the reply
    std::uint64_t mmap_length = 0;
};

std::vector<std::byte> payload(const hello_reply& r);
std::vector<std::byte> payload(const status_reply& r);
std::vector<std::byte> payload(const map_memory_reply& r);
std::vector<std::byte> payload(const alloc_uar_reply& r);
std::vector<std::byte> payload(const counters_reply& r);
result<hello_reply> parse_hello_reply(std::span<const std::byte> p);
result<status_reply> parse_status_reply(std::span<const std::byte> p);
result<map_memory_reply> parse_map_memory_reply(std::span<const std::byte> p);
result<alloc_uar_reply> parse_alloc_uar_reply(std::span<const std::byte> p);
result<counters_reply> parse_counters_reply(std::span<const std::byte> p);

// A comm or any text from the other side, with bytes below 0x20, 0x7f and above as
// \xNN, for logs and tables (a process names itself: prctl(2) PR_SET_NAME).
std::string printable(std::string_view s);

}  // namespace cxv::daemon
