#include "protocol/codec.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace cxv::daemon {

namespace {

constexpr std::uint64_t kPage = 4096;
// The largest single mapping a request may ask for (the quota is the real limit).
constexpr std::uint64_t kMaxMapBytes = std::uint64_t{1} << 40;
constexpr std::uint64_t kMaxSmallAlign = std::uint64_t{2} << 20;  // a 2 MiB hugepage

error bad(int code, std::string what) { return error{code, std::move(what)}; }

// The body sizes of the fixed-size requests.
constexpr std::size_t kHelloBytes = 4;
constexpr std::size_t kMapBytes = 28;     // device, flags, offset, length, align
constexpr std::size_t kUnmapBytes = 10;   // device, iova
constexpr std::size_t kAllocUarBytes = 2;
constexpr std::size_t kDeallocUarBytes = 6;
constexpr std::size_t kCommandHead = 6;   // device, out_len
constexpr std::size_t kEventsBytes = 2;
constexpr std::size_t kCountersBytes = 2;
constexpr std::size_t kCommandFdBytes = 10;  // device, out_len, in_len
// A command's input holds at least the dword with the opcode and the one with op_mod
// (PRM "Command Input": opcode at 0x00, op_mod at 0x04).
constexpr std::size_t kMinCommandIn = 8;

std::size_t fds_expected(msg_type t) { return t == msg_type::map_memory || t == msg_type::command_fd ? 1 : 0; }


}  // namespace

bool known_type(std::uint16_t t) noexcept { return (t >= 1 && t <= 9) || t == 16; }

const char* type_name(std::uint16_t t) noexcept {
    switch (t & ~reply_bit) {
    case 1: return "HELLO";
    case 2: return "STATUS";
    case 3: return "MAP_MEMORY";
    case 4: return "UNMAP_MEMORY";
    case 5: return "ALLOC_UAR";
    case 6: return "DEALLOC_UAR";
    case 7: return "COMMAND";
    case 16: return "EVENTS";
    case 17: return "EVENT";
    case 8: return "COMMAND_FD";
    case 9: return "COUNTERS";
    default: return "UNKNOWN";
    }
}

// ---- writer / reader ------------------------------------------------------------------

writer& writer::str(std::string_view s) {
    const auto n = static_cast<std::uint16_t>(std::min<std::size_t>(s.size(), 0xffff));
    put(n);
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    bytes.insert(bytes.end(), p, p + n);
    return *this;
}

writer& writer::blob(std::span<const std::byte> b) {
    const auto n = static_cast<std::uint16_t>(std::min<std::size_t>(b.size(), 0xffff));
    put(n);
    bytes.insert(bytes.end(), b.begin(), b.begin() + n);
    return *this;
}

std::string reader::str() {
    const auto n = get<std::uint16_t>();
    if (!ok_ || b_.size() - pos_ < n) {
        ok_ = false;
        return {};
    }
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
}

std::vector<std::byte> reader::blob() {
    const auto n = get<std::uint16_t>();
    if (!ok_ || b_.size() - pos_ < n) {
        ok_ = false;
        return {};
    }
    std::vector<std::byte> v(b_.begin() + static_cast<std::ptrdiff_t>(pos_),
                             b_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return v;
}

// ---- headers --------------------------------------------------------------------------

namespace {

void put_header(writer& w, std::uint16_t type, std::uint32_t seq, std::size_t length) {
    w.put(protocol_magic).put(protocol_version).put(type).put(seq).put(static_cast<std::uint32_t>(length));
}

// Reads and checks the header; fills `h` with what could be read.
status check_header(std::span<const std::byte> msg, header& h) {
    h = header{};
    h.magic = 0;
    if (msg.size() < header_bytes) {
        return bad(EBADMSG, fmt::format("a message of {} bytes is shorter than the {}-byte header", msg.size(),
                                        header_bytes));
    }
    if (msg.size() > max_message_bytes) {
        return bad(EMSGSIZE, fmt::format("a message of {} bytes (at most {})", msg.size(), max_message_bytes));
    }
    reader r(msg);
    h.magic = r.get<std::uint32_t>();
    h.version = r.get<std::uint16_t>();
    h.type = r.get<std::uint16_t>();
    h.seq = r.get<std::uint32_t>();
    h.length = r.get<std::uint32_t>();
    if (h.magic != protocol_magic) return bad(EPROTO, fmt::format("bad magic 0x{:08x}", h.magic));
    if (h.version != protocol_version) {
        return bad(EPROTONOSUPPORT, fmt::format("protocol version {} (this daemon speaks {})", h.version,
                                                protocol_version));
    }
    if (h.length != msg.size() - header_bytes) {
        return bad(EBADMSG, fmt::format("the header says {} body bytes, the message has {}", h.length,
                                        msg.size() - header_bytes));
    }
    return ok_status();
}

}  // namespace

std::vector<std::byte> encode(msg_type type, std::uint32_t seq, std::span<const std::byte> body) {
    writer w;
    put_header(w, static_cast<std::uint16_t>(type), seq, body.size());
    w.bytes.insert(w.bytes.end(), body.begin(), body.end());
    return std::move(w.bytes);
}

std::vector<std::byte> encode_reply(std::uint16_t type, std::uint32_t seq, int err, std::string_view text,
                                    std::span<const std::byte> payload) {
    if (text.size() > max_text_bytes) text = text.substr(0, max_text_bytes);
    writer b;
    b.put(static_cast<std::int32_t>(err)).str(text);
    b.bytes.insert(b.bytes.end(), payload.begin(), payload.end());
    writer w;
    put_header(w, static_cast<std::uint16_t>(type | reply_bit), seq, b.bytes.size());
    w.bytes.insert(w.bytes.end(), b.bytes.begin(), b.bytes.end());
    return std::move(w.bytes);
}

// ---- requests -------------------------------------------------------------------------

status parse_request(std::span<const std::byte> msg, std::span<const int> fds, request& out) {
    out.fd = -1;
    out.header_ok = false;
    if (auto s = check_header(msg, out.hdr); !s) {
        // A body of the wrong length still came with a readable sequence.
        out.header_ok = s.error().code == EBADMSG && msg.size() >= header_bytes;
        return s;
    }
    out.header_ok = true;
    if (out.hdr.type & reply_bit) return bad(EPROTO, fmt::format("a reply ({}) sent to the daemon", out.hdr.type));
    if (!known_type(out.hdr.type)) return bad(EOPNOTSUPP, fmt::format("unknown request type {}", out.hdr.type));
    out.type = static_cast<msg_type>(out.hdr.type);
    const std::span<const std::byte> b = msg.subspan(header_bytes);
    const char* name = type_name(out.hdr.type);
    if (fds.size() != fds_expected(out.type)) {
        return bad(EBADF, fmt::format("{} carries {} file descriptors (it takes {})", name, fds.size(),
                                      fds_expected(out.type)));
    }
    auto size_is = [&](std::size_t n) -> status {
        if (b.size() != n) return bad(EBADMSG, fmt::format("{} body of {} bytes (it is {})", name, b.size(), n));
        return ok_status();
    };
    reader r(b);
    switch (out.type) {
    case msg_type::hello: {
        if (auto s = size_is(kHelloBytes); !s) return s;
        out.hello.min_version = r.get<std::uint16_t>();
        out.hello.max_version = r.get<std::uint16_t>();
        if (out.hello.min_version > out.hello.max_version) {
            return bad(EINVAL, fmt::format("HELLO: versions {} to {} is an empty range", out.hello.min_version,
                                           out.hello.max_version));
        }
        if (out.hello.min_version > protocol_version || out.hello.max_version < protocol_version) {
            return bad(EPROTONOSUPPORT, fmt::format("HELLO: versions {} to {}; this daemon speaks {}",
                                                    out.hello.min_version, out.hello.max_version, protocol_version));
        }
        break;
    }
    case msg_type::status:
        if (auto s = size_is(0); !s) return s;
        break;
    case msg_type::map_memory: {
        if (auto s = size_is(kMapBytes); !s) return s;
        auto& m = out.map;
        m.device = r.get<std::uint16_t>();
        const auto flags = r.get<std::uint16_t>();
        m.offset = r.get<std::uint64_t>();
        m.length = r.get<std::uint64_t>();
        m.align = r.get<std::uint64_t>();
        if (m.align < kPage || m.align > max_map_align || (m.align & (m.align - 1))) {
            return bad(EINVAL, fmt::format("MAP_MEMORY: alignment {} (a power of two, 4 KiB to {})", m.align,
                                           max_map_align));
        }
        if (flags & ~1u) return bad(EINVAL, fmt::format("MAP_MEMORY: unknown flags 0x{:x}", flags));
        m.device_writes = flags & 1;
        if (m.length == 0 || m.length % kPage || m.offset % kPage || m.length > kMaxMapBytes ||
            m.offset > kMaxMapBytes) {
            return bad(EINVAL, fmt::format("MAP_MEMORY: offset {} and length {} must be 4 KiB multiples, "
                                           "the length not 0, both below 1 TiB",
                                           m.offset, m.length));
        }
        // The alignment is paid for in IOVA space the quota does not count (it counts the
        // length): a 4 KiB mapping at 1 GiB alignment would hold 1 GiB of the device's
        // IOVA range. At most the length rounded up to a power of two, and above 2 MiB at
        // most the length itself, so a mapping never holds more than twice its length.
        if (m.align > std::bit_ceil(m.length) || (m.align > kMaxSmallAlign && m.align > m.length)) {
            return bad(EINVAL, fmt::format("MAP_MEMORY: alignment {} for {} bytes (at most the length rounded up "
                                           "to a power of two, and above {} at most the length)",
                                           m.align, m.length, kMaxSmallAlign));
        }
        struct stat st{};
        if (::fstat(fds[0], &st) != 0) return bad(EBADF, fmt::format("MAP_MEMORY: fstat: {}", std::strerror(errno)));
        if (!S_ISREG(st.st_mode)) {
            return bad(EBADF, "MAP_MEMORY: the fd is not a memfd or a file (hugetlbfs); anonymous or device "
                              "memory cannot be shared");
        }
        if (static_cast<std::uint64_t>(st.st_size) < m.offset + m.length) {
            return bad(EINVAL, fmt::format("MAP_MEMORY: [{}, {}) is beyond the file's {} bytes", m.offset,
                                           m.offset + m.length, st.st_size));
        }
        out.fd = fds[0];
        break;
    }
    case msg_type::unmap_memory:
        if (auto s = size_is(kUnmapBytes); !s) return s;
        out.unmap.device = r.get<std::uint16_t>();
        out.unmap.iova = r.get<std::uint64_t>();
        break;
    case msg_type::alloc_uar:
        if (auto s = size_is(kAllocUarBytes); !s) return s;
        out.alloc_uar.device = r.get<std::uint16_t>();
        break;
    case msg_type::dealloc_uar:
        if (auto s = size_is(kDeallocUarBytes); !s) return s;
        out.dealloc_uar.device = r.get<std::uint16_t>();
        out.dealloc_uar.uar = r.get<std::uint32_t>();
        if (out.dealloc_uar.uar >= (1u << 24)) return bad(EINVAL, "DEALLOC_UAR: a UAR index has 24 bits");
        break;
    case msg_type::events:
        if (auto s = size_is(kEventsBytes); !s) return s;
        out.events.device = r.get<std::uint16_t>();
        break;
    case msg_type::counters:
        if (auto s = size_is(kCountersBytes); !s) return s;
        out.counters.device = r.get<std::uint16_t>();
        break;
    case msg_type::event:
        return bad(EOPNOTSUPP, "EVENT is the daemon's message, not a request");
    case msg_type::command: {
        if (b.size() < kCommandHead + kMinCommandIn) {
            return bad(EBADMSG, fmt::format("COMMAND body of {} bytes (at least {})", b.size(),
                                            kCommandHead + kMinCommandIn));
        }
        auto& c = out.command;
        c.device = r.get<std::uint16_t>();
        c.out_len = r.get<std::uint32_t>();
        const auto in = r.rest();
        if (in.size() > max_command_in_bytes || in.size() % 4) {
            return bad(EINVAL, fmt::format("COMMAND: input of {} bytes (whole dwords, at most {})", in.size(),
                                           max_command_in_bytes));
        }
        if (c.out_len < 16 || c.out_len > max_command_out_bytes || c.out_len % 4) {
            return bad(EINVAL, fmt::format("COMMAND: output of {} bytes (whole dwords, 16 to {})", c.out_len,
                                           max_command_out_bytes));
        }
        c.in.assign(in.begin(), in.end());
        break;
    }
    case msg_type::command_fd: {
        if (auto s = size_is(kCommandFdBytes); !s) return s;
        auto& c = out.command;
        c.device = r.get<std::uint16_t>();
        c.out_len = r.get<std::uint32_t>();
        const auto in_len = r.get<std::uint32_t>();
        if (in_len < kMinCommandIn || in_len > max_large_command_bytes || in_len % 4) {
            return bad(EINVAL, fmt::format("COMMAND_FD: input of {} bytes (whole dwords, {} to {})", in_len,
                                           kMinCommandIn, max_large_command_bytes));
        }
        if (c.out_len < 16 || c.out_len > max_large_command_bytes || c.out_len % 4) {
            return bad(EINVAL, fmt::format("COMMAND_FD: output of {} bytes (whole dwords, 16 to {})", c.out_len,
                                           max_large_command_bytes));
        }
        if (std::size_t{in_len} + c.out_len > max_large_command_total) {
            return bad(EINVAL, fmt::format("COMMAND_FD: input of {} and output of {} bytes (at most {} together: "
                                           "what the command queue's mailboxes hold for one command)",
                                           in_len, c.out_len, max_large_command_total));
        }
        auto in = read_sealed(fds[0], in_len);
        if (!in) return bad(in.error().code, "COMMAND_FD: " + in.error().message);
        c.in = std::move(in).value();
        break;
    }
    }
    return ok_status();
}

status session::accept(const request& r) {
    if (!greeted_) {
        if (r.type != msg_type::hello) {
            return bad(EPROTO, fmt::format("{} before HELLO", type_name(r.hdr.type)));
        }
        greeted_ = true;
        last_seq_ = r.hdr.seq;
        return ok_status();
    }
    if (r.type == msg_type::hello) return bad(EPROTO, "a second HELLO");
    if (r.hdr.seq != last_seq_ + 1) {
        return bad(EPROTO, fmt::format("{} with sequence {} (expected {})", type_name(r.hdr.type), r.hdr.seq,
                                       last_seq_ + 1));
    }
    last_seq_ = r.hdr.seq;
    return ok_status();
}

void session::skip(const request& r) {
    if (greeted_ && r.header_ok && r.hdr.seq == last_seq_ + 1) last_seq_ = r.hdr.seq;
}

void read_cut_header(std::span<const std::byte> first, request& out) {
    out = request{};
    out.hdr.magic = 0;
    if (first.size() < header_bytes) return;
    std::memcpy(&out.hdr, first.data(), header_bytes);
    out.header_ok = out.hdr.magic == protocol_magic && out.hdr.version == protocol_version;
}

std::vector<std::byte> body(const hello_req& r) {
    return writer{}.put(r.min_version).put(r.max_version).bytes;
}
std::vector<std::byte> body(const map_memory_req& r) {
    return writer{}.put(r.device).put(static_cast<std::uint16_t>(r.device_writes ? 1 : 0)).put(r.offset)
        .put(r.length).put(r.align).bytes;
}
std::vector<std::byte> body(const unmap_memory_req& r) { return writer{}.put(r.device).put(r.iova).bytes; }
std::vector<std::byte> body(const alloc_uar_req& r) { return writer{}.put(r.device).bytes; }
std::vector<std::byte> body(const events_req& r) { return writer{}.put(r.device).bytes; }
std::vector<std::byte> body(const counters_req& r) { return writer{}.put(r.device).bytes; }

std::vector<std::byte> encode_event(std::uint32_t seq, const event_msg& e) {
    writer w;
    w.put(e.device).put(static_cast<std::uint8_t>(e.what)).put(e.async_kind).put(e.port).put(e.event_type).put(e.object);
    w.str(std::string_view(e.detail).substr(0, max_text_bytes));
    return encode(msg_type::event, seq, w.bytes);
}

result<event_msg> parse_event(std::span<const std::byte> msg) {
    header h;
    if (auto s = check_header(msg, h); !s) return s.error();
    if (h.type != static_cast<std::uint16_t>(msg_type::event)) {
        return bad(EPROTO, fmt::format("{} on the event channel", type_name(h.type)));
    }
    reader r(msg.subspan(header_bytes));
    event_msg e;
    e.device = r.get<std::uint16_t>();
    const auto what = r.get<std::uint8_t>();
    e.async_kind = r.get<std::uint8_t>();
    e.port = r.get<std::uint8_t>();
    e.event_type = r.get<std::uint8_t>();
    e.object = r.get<std::uint32_t>();
    e.detail = r.str();
    if (!r.at_end() || what > 2 || e.detail.size() > max_text_bytes) return bad(EBADMSG, "a malformed EVENT");
    e.what = static_cast<event_msg::kind>(what);
    return e;
}
std::vector<std::byte> body(const dealloc_uar_req& r) { return writer{}.put(r.device).put(r.uar).bytes; }
std::vector<std::byte> body(const command_fd_req& r) {
    return writer{}.put(r.device).put(r.out_len).put(r.in_len).bytes;
}
std::vector<std::byte> body(const command_req& r) {
    writer w;
    w.put(r.device).put(r.out_len);
    w.bytes.insert(w.bytes.end(), r.in.begin(), r.in.end());
    return std::move(w.bytes);
}

// ---- replies --------------------------------------------------------------------------

status parse_reply(std::span<const std::byte> msg, reply& out) {
    if (auto s = check_header(msg, out.hdr); !s) return s;
    if (!(out.hdr.type & reply_bit)) return bad(EPROTO, "a request where a reply was expected");
    reader r(msg.subspan(header_bytes));
    out.err = r.get<std::int32_t>();
    out.text = r.str();
    if (!r.ok()) return bad(EBADMSG, "a reply without its errno and text");
    if (out.err < 0 || out.err > 4095) return bad(EBADMSG, fmt::format("a reply with errno {}", out.err));
    const auto rest = r.rest();
    out.payload.assign(rest.begin(), rest.end());
    return ok_status();
}

namespace {

void put_device(writer& w, const device_info& d) {
    w.str(d.bdf).str(d.firmware).put(static_cast<std::uint8_t>(d.port_up)).put(static_cast<std::uint8_t>(d.ethernet))
        .put(d.port_logical).put(d.comp_eqn).blob(d.caps);
    std::vector<std::byte> gids(d.gids.size() * 16);
    if (!gids.empty()) std::memcpy(gids.data(), d.gids.data(), gids.size());
    w.blob(gids).put(d.mac).put(d.ipv4).put(d.max_mtu).put(d.bar_size).blob(d.ptys)
        .put(static_cast<std::uint8_t>(d.other_domain));
}

device_info get_device(reader& r) {
    device_info d;
    d.bdf = r.str();
    d.firmware = r.str();
    d.port_up = r.get<std::uint8_t>() != 0;
    d.ethernet = r.get<std::uint8_t>() != 0;
    d.port_logical = r.get<std::uint8_t>();
    d.comp_eqn = r.get<std::uint32_t>();
    d.caps = r.blob();
    const auto gids = r.blob();
    if (gids.size() % 16 != 0) {
        r.fail();  // not whole GIDs
    } else {
        d.gids.resize(gids.size() / 16);
        if (!gids.empty()) std::memcpy(d.gids.data(), gids.data(), gids.size());
    }
    d.mac = r.get<std::array<std::uint8_t, 6>>();
    d.ipv4 = r.get<std::array<std::uint8_t, 4>>();
    d.max_mtu = r.get<std::uint8_t>();
    d.bar_size = r.get<std::uint64_t>();
    d.ptys = r.blob();
    d.other_domain = r.get<std::uint8_t>() != 0;
    return d;
}

template <typename T>
result<T> finish(const reader& r, T v, const char* what) {
    if (!r.at_end()) return error{EBADMSG, fmt::format("a malformed {} reply", what)};
    return v;
}

}  // namespace

std::vector<std::byte> payload(const hello_reply& r) {
    writer w;
    w.put(r.version).put(static_cast<std::uint16_t>(r.devices.size()));
    for (const auto& d : r.devices) put_device(w, d);
    return std::move(w.bytes);
}

result<hello_reply> parse_hello_reply(std::span<const std::byte> p) {
    reader r(p);
    hello_reply h;
    h.version = r.get<std::uint16_t>();
    const auto n = r.get<std::uint16_t>();
    for (unsigned i = 0; i < n && r.ok(); ++i) h.devices.push_back(get_device(r));
    return finish(r, std::move(h), "HELLO");
}

std::vector<std::byte> payload(const status_reply& r) {
    writer w;
    w.put(r.commands).put(r.refused).put(r.clients_served).put(r.clients_total);
    w.put(static_cast<std::uint16_t>(r.devices.size()));
    for (const auto& d : r.devices) put_device(w, d);
    w.put(static_cast<std::uint16_t>(r.clients.size()));
    for (const auto& c : r.clients) {
        w.put(c.pid).put(c.uid).put(c.gid).str(c.comm).put(c.pds).put(c.cqs).put(c.mkeys).put(c.qps).put(c.srqs)
            .put(c.uars).put(c.maps).put(c.pinned).put(c.translations);
    }
    return std::move(w.bytes);
}

result<status_reply> parse_status_reply(std::span<const std::byte> p) {
    reader r(p);
    status_reply s;
    s.commands = r.get<std::uint64_t>();
    s.refused = r.get<std::uint64_t>();
    s.clients_served = r.get<std::uint64_t>();
    s.clients_total = r.get<std::uint32_t>();
    const auto nd = r.get<std::uint16_t>();
    for (unsigned i = 0; i < nd && r.ok(); ++i) s.devices.push_back(get_device(r));
    const auto nc = r.get<std::uint16_t>();
    for (unsigned i = 0; i < nc && r.ok(); ++i) {
        client_info c;
        c.pid = r.get<std::int32_t>();
        c.uid = r.get<std::uint32_t>();
        c.gid = r.get<std::uint32_t>();
        c.comm = r.str();
        c.pds = r.get<std::uint32_t>();
        c.cqs = r.get<std::uint32_t>();
        c.mkeys = r.get<std::uint32_t>();
        c.qps = r.get<std::uint32_t>();
        c.srqs = r.get<std::uint32_t>();
        c.uars = r.get<std::uint32_t>();
        c.maps = r.get<std::uint32_t>();
        c.pinned = r.get<std::uint64_t>();
        c.translations = r.get<std::uint64_t>();
        s.clients.push_back(std::move(c));
    }
    return finish(r, std::move(s), "STATUS");
}

std::vector<std::byte> payload(const map_memory_reply& r) { return writer{}.put(r.iova).bytes; }

result<map_memory_reply> parse_map_memory_reply(std::span<const std::byte> p) {
    reader r(p);
    map_memory_reply m;
    m.iova = r.get<std::uint64_t>();
    return finish(r, m, "MAP_MEMORY");
}

std::vector<std::byte> payload(const alloc_uar_reply& r) {
    return writer{}.put(r.uar).put(r.mmap_offset).put(r.mmap_length).bytes;
}

result<alloc_uar_reply> parse_alloc_uar_reply(std::span<const std::byte> p) {
    reader r(p);
    alloc_uar_reply a;
    a.uar = r.get<std::uint32_t>();
    a.mmap_offset = r.get<std::uint64_t>();
    a.mmap_length = r.get<std::uint64_t>();
    return finish(r, a, "ALLOC_UAR");
}

std::vector<std::byte> payload(const counters_reply& r) {
    writer w;
    w.put(static_cast<std::uint16_t>(r.counters.size()));
    for (const auto& [name, value] : r.counters) w.str(name).put(value);
    return std::move(w.bytes);
}

result<counters_reply> parse_counters_reply(std::span<const std::byte> p) {
    reader r(p);
    counters_reply c;
    const auto n = r.get<std::uint16_t>();
    for (unsigned i = 0; i < n && r.ok(); ++i) {
        std::string name = r.str();
        const auto value = r.get<std::uint64_t>();
        c.counters.emplace_back(std::move(name), value);
    }
    return finish(r, std::move(c), "COUNTERS");
}

std::string printable(std::string_view s) {
    std::string out;
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c < 0x20 || c >= 0x7f) out += fmt::format("\\x{:02x}", c);
        else out += ch;
    }
    return out;
}

}  // namespace cxv::daemon
