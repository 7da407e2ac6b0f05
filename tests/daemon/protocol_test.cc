// The daemon's protocol on its own: messages round-trip, every malformed header and body
// is refused with the errno the reply will carry, fds are counted and typed, sessions
// keep their order, and messages with fds cross a real SOCK_SEQPACKET pair.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include <doctest/doctest.h>

#include "protocol/codec.h"

namespace d = cxv::daemon;

namespace {

int memfd(std::size_t size) {
    const int fd = ::memfd_create("protocol-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0);
    return fd;
}

int parse_err(std::span<const std::byte> msg, std::span<const int> fds = {}) {
    d::request r;
    const auto s = d::parse_request(msg, fds, r);
    return s ? 0 : s.error().code;
}

}  // namespace

TEST_CASE("requests round-trip through encode and parse") {
    d::request r;
    auto m = d::encode(d::msg_type::hello, 7, d::body(d::hello_req{}));
    REQUIRE(d::parse_request(m, {}, r));
    CHECK(r.type == d::msg_type::hello);
    CHECK(r.hdr.seq == 7);

    d::command_req c;
    c.device = 1;
    c.out_len = 16;
    c.in.assign(16, std::byte{0x11});
    m = d::encode(d::msg_type::command, 8, d::body(c));
    REQUIRE(d::parse_request(m, {}, r));
    CHECK(r.command.device == 1);
    CHECK(r.command.out_len == 16);
    CHECK(r.command.in == c.in);

    const int fd = memfd(8192);
    d::map_memory_req mm{.device = 0, .device_writes = true, .offset = 4096, .length = 4096};
    m = d::encode(d::msg_type::map_memory, 9, d::body(mm));
    const int fds[] = {fd};
    REQUIRE(d::parse_request(m, fds, r));
    CHECK(r.map.offset == 4096);
    CHECK(r.map.length == 4096);
    CHECK(r.fd == fd);
    ::close(fd);
}

TEST_CASE("malformed headers are refused with the errno their reply carries") {
    auto m = d::encode(d::msg_type::status, 1, {});
    CHECK(parse_err(std::span(m).first(10)) == EBADMSG);  // truncated header
    auto bad_magic = m;
    bad_magic[0] ^= std::byte{1};
    CHECK(parse_err(bad_magic) == EPROTO);
    auto bad_version = m;
    bad_version[4] = std::byte{9};
    CHECK(parse_err(bad_version) == EPROTONOSUPPORT);
    auto longer = m;
    longer.push_back(std::byte{0});  // length field says 0, one byte follows
    CHECK(parse_err(longer) == EBADMSG);
    auto unknown = d::encode(static_cast<d::msg_type>(99), 1, {});
    CHECK(parse_err(unknown) == EOPNOTSUPP);
    auto reply = d::encode_reply(2, 1, 0, "");
    CHECK(parse_err(reply) == EPROTO);
    std::vector<std::byte> huge(d::max_message_bytes + 1);
    CHECK(parse_err(huge) == EMSGSIZE);
}

TEST_CASE("bodies are checked field by field") {
    CHECK(parse_err(d::encode(d::msg_type::status, 1, std::vector<std::byte>(3))) == EBADMSG);
    CHECK(parse_err(d::encode(d::msg_type::hello, 1, d::body(d::hello_req{d::protocol_version + 1, d::protocol_version + 2}))) == EPROTONOSUPPORT);
    CHECK(parse_err(d::encode(d::msg_type::hello, 1, d::body(d::hello_req{3, 1}))) == EINVAL);
    CHECK(parse_err(d::encode(d::msg_type::dealloc_uar, 1, d::body(d::dealloc_uar_req{0, 1u << 24}))) == EINVAL);
    d::command_req c;
    c.out_len = 16;
    c.in.assign(6, std::byte{0});  // shorter than opcode + op_mod
    CHECK(parse_err(d::encode(d::msg_type::command, 1, d::body(c))) == EBADMSG);
    c.in.assign(10, std::byte{0});  // not whole dwords
    CHECK(parse_err(d::encode(d::msg_type::command, 1, d::body(c))) == EINVAL);
    c.in.assign(16, std::byte{0});
    c.out_len = 1u << 30;
    CHECK(parse_err(d::encode(d::msg_type::command, 1, d::body(c))) == EINVAL);
}

TEST_CASE("file descriptors: counted per type and checked with fstat") {
    const int fd = memfd(4096);
    const int one[] = {fd};
    d::map_memory_req mm{.device = 0, .device_writes = true, .offset = 0, .length = 4096};
    const auto m = d::encode(d::msg_type::map_memory, 1, d::body(mm));
    CHECK(parse_err(m) == EBADF);  // no fd
    const int two[] = {fd, fd};
    CHECK(parse_err(m, two) == EBADF);  // two
    CHECK(parse_err(d::encode(d::msg_type::status, 1, {}), one) == EBADF);  // an fd where none goes
    int sp[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
    const int sock[] = {sp[0]};
    CHECK(parse_err(m, sock) == EBADF);  // not a file
    mm.length = 8192;  // beyond the file
    CHECK(parse_err(d::encode(d::msg_type::map_memory, 1, d::body(mm)), one) == EINVAL);
    mm.length = 100;  // not a page multiple
    CHECK(parse_err(d::encode(d::msg_type::map_memory, 1, d::body(mm)), one) == EINVAL);
    CHECK(parse_err(m, one) == 0);
    ::close(sp[0]);
    ::close(sp[1]);
    ::close(fd);
}

TEST_CASE("MAP_MEMORY: the alignment is bounded by the length (IOVA space the quota does not count)") {
    const int fd = memfd(std::size_t{8} << 20);
    const int one[] = {fd};
    auto err = [&](std::uint64_t length, std::uint64_t align) {
        d::map_memory_req mm{.device = 0, .device_writes = true, .offset = 0, .length = length, .align = align};
        return parse_err(d::encode(d::msg_type::map_memory, 1, d::body(mm)), one);
    };
    CHECK(err(4096, 4096) == 0);
    CHECK(err(4096, 8192) == EINVAL);
    CHECK(err(4096, std::uint64_t{1} << 30) == EINVAL);  // 1 GiB of IOVA for 4 KiB
    CHECK(err(12288, 16384) == 0);                       // 12 KiB rounds up to 16 KiB
    CHECK(err(12288, 32768) == EINVAL);
    CHECK(err(std::uint64_t{1} << 20, std::uint64_t{1} << 20) == 0);
    CHECK(err(std::uint64_t{3} << 20, std::uint64_t{2} << 20) == 0);
    CHECK(err(std::uint64_t{3} << 20, std::uint64_t{4} << 20) == EINVAL);  // above 2 MiB: at most the length
    CHECK(err(std::uint64_t{4} << 20, std::uint64_t{4} << 20) == 0);
    CHECK(err(std::uint64_t{8} << 20, std::uint64_t{8} << 20) == 0);
    ::close(fd);
}

TEST_CASE("COMMAND_FD: input and output together within what the command queue's mailboxes hold") {
    std::vector<std::byte> in(d::max_large_command_bytes, std::byte{0});
    auto f = d::sealed_memfd(in);
    REQUIRE(f);
    const int one[] = {f->get()};
    auto err = [&](std::size_t in_len, std::size_t out_len) {
        const d::command_fd_req c{0, static_cast<std::uint32_t>(out_len), static_cast<std::uint32_t>(in_len)};
        return parse_err(d::encode(d::msg_type::command_fd, 1, d::body(c)), one);
    };
    CHECK(err(d::max_large_command_bytes, d::max_command_out_bytes) == 0);
    CHECK(err(d::max_command_in_bytes, d::max_large_command_bytes) == 0);
    // Each within its own bound, together 8 MiB: more blocks than the pool has.
    CHECK(err(d::max_large_command_bytes, d::max_large_command_bytes) == EINVAL);
    CHECK(err(d::max_large_command_bytes, d::max_command_out_bytes + 4) == EINVAL);
}

TEST_CASE("a session takes HELLO first and once, then sequence numbers in order") {
    d::session s;
    d::request r;
    REQUIRE(d::parse_request(d::encode(d::msg_type::status, 5, {}), {}, r));
    CHECK(s.accept(r).error().code == EPROTO);  // before HELLO
    REQUIRE(d::parse_request(d::encode(d::msg_type::hello, 5, d::body(d::hello_req{})), {}, r));
    CHECK(s.accept(r));
    CHECK(s.accept(r).error().code == EPROTO);  // twice
    REQUIRE(d::parse_request(d::encode(d::msg_type::status, 7, {}), {}, r));
    CHECK(s.accept(r).error().code == EPROTO);  // skips 6
    REQUIRE(d::parse_request(d::encode(d::msg_type::status, 6, {}), {}, r));
    CHECK(s.accept(r));
    CHECK(s.accept(r).error().code == EPROTO);  // replayed
}

TEST_CASE("a request refused after a readable header moves the sequence on; an unreadable one does not") {
    d::session s;
    d::request r;
    REQUIRE(d::parse_request(d::encode(d::msg_type::hello, 1, d::body(d::hello_req{})), {}, r));
    REQUIRE(s.accept(r));
    auto bad_body = d::encode(d::msg_type::unmap_memory, 2, std::vector<std::byte>(3));
    CHECK(d::parse_request(bad_body, {}, r).error().code == EBADMSG);
    CHECK(r.header_ok);
    s.skip(r);  // 2 taken
    auto longer = d::encode(d::msg_type::status, 3, {});
    longer.push_back(std::byte{1});  // the header's length says 0
    CHECK(d::parse_request(longer, {}, r).error().code == EBADMSG);
    CHECK(r.header_ok);
    s.skip(r);  // 3 taken
    auto bad_magic = d::encode(d::msg_type::status, 4, {});
    bad_magic[0] = std::byte{0};
    CHECK(d::parse_request(bad_magic, {}, r).error().code == EPROTO);
    CHECK(!r.header_ok);
    s.skip(r);  // not taken: the sequence cannot be trusted
    CHECK(!d::parse_request(std::vector<std::byte>(bad_magic.begin(), bad_magic.begin() + 10), {}, r));
    CHECK(!r.header_ok);
    REQUIRE(d::parse_request(d::encode(d::msg_type::status, 9, {}), {}, r));
    s.skip(r);  // out of order: not taken either
    REQUIRE(d::parse_request(d::encode(d::msg_type::status, 4, {}), {}, r));
    CHECK(s.accept(r));
}

TEST_CASE("at the point of mapping: the seal first, then the size") {
    const int loose = memfd(4096);
    CHECK(d::check_map_fd(loose, 0, 4096).error().code == EPERM);
    CHECK(d::check_map_fd(loose, 0, 8192).error().code == EPERM);  // the seal is looked at first
    const int sealed = memfd(4096);
    REQUIRE(::fcntl(sealed, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
    CHECK(d::check_map_fd(sealed, 0, 4096));
    CHECK(d::check_map_fd(sealed, 0, 8192).error().code == EINVAL);
    CHECK(d::check_map_fd(sealed, 4096, 4096).error().code == EINVAL);
    REQUIRE(::ftruncate(sealed, 8192) == 0);  // growing is allowed and seen
    CHECK(d::check_map_fd(sealed, 4096, 4096));
    CHECK(::ftruncate(sealed, 4096) != 0);  // shrinking is not
    ::close(loose);
    ::close(sealed);
}

TEST_CASE("printable: control bytes and bytes from 0x7f become \\xNN") {
    CHECK(d::printable("trader") == "trader");
    CHECK(d::printable("a\x1b[2Jb") == "a\\x1b[2Jb");
    CHECK(d::printable(std::string("n\0l\n\x7f\xc3", 6)) == "n\\x00l\\x0a\\x7f\\xc3");
}

TEST_CASE("replies and their payloads round-trip; truncated payloads are refused") {
    d::status_reply st;
    st.devices.push_back({.bdf = "0000:01:00.0", .firmware = "16.35.1012", .port_up = true, .ethernet = true,
                          .port_logical = 4, .comp_eqn = 8, .caps = {}, .gids = {{}, {}},
                          .mac = {2, 0, 0, 0, 0, 7}, .ipv4 = {169, 254, 1, 7}, .max_mtu = 3,
                          .bar_size = 1 << 25, .ptys = std::vector<std::byte>(64, std::byte{0x5a}),
                          .other_domain = true});
    st.devices[0].gids[1][15] = 0x42;
    st.clients.push_back({.pid = 42, .uid = 1000, .gid = 100, .comm = "trader", .pds = 1, .cqs = 2, .mkeys = 3,
                          .qps = 0, .srqs = 0, .uars = 1, .maps = 2, .pinned = 1 << 20});
    st.clients_total = 7;
    const auto p = d::payload(st);
    const auto m = d::encode_reply(static_cast<std::uint16_t>(d::msg_type::status), 3, 0, "ok", p);
    d::reply rep;
    REQUIRE(d::parse_reply(m, rep));
    CHECK(rep.hdr.seq == 3);
    CHECK(rep.text == "ok");
    auto back = d::parse_status_reply(rep.payload);
    REQUIRE(back);
    CHECK(back->devices.at(0).bdf == "0000:01:00.0");
    CHECK(back->devices.at(0).gids.size() == 2);
    CHECK(back->devices.at(0).gids.at(1)[15] == 0x42);
    CHECK(back->devices.at(0).mac[5] == 7);
    CHECK(back->devices.at(0).ipv4[0] == 169);
    CHECK(back->devices.at(0).max_mtu == 3);
    CHECK(back->devices.at(0).bar_size == 1 << 25);
    CHECK(back->devices.at(0).ptys == st.devices[0].ptys);
    CHECK(back->devices.at(0).other_domain);
    CHECK(back->clients.at(0).comm == "trader");
    CHECK(back->clients.at(0).pinned == 1 << 20);
    CHECK(back->clients_total == st.clients_total);
    CHECK(!d::parse_status_reply(std::span(p).first(p.size() - 1)));
    CHECK(!d::parse_status_reply(std::span(p).first(p.size() - 66)));  // the PTYS cut short
    CHECK(!d::parse_alloc_uar_reply(std::vector<std::byte>(5)));
    // A GID table that is not whole GIDs is refused.
    d::writer w;
    w.put(std::uint16_t{1}).put(std::uint16_t{1}).str("b").str("f").put(std::uint8_t{1}).put(std::uint8_t{1})
        .put(std::uint8_t{4}).put(std::uint32_t{8}).blob({}).blob(std::vector<std::byte>(15))
        .put(std::array<std::uint8_t, 6>{}).put(std::array<std::uint8_t, 4>{}).put(std::uint8_t{3}).put(std::uint64_t{1} << 25);
    CHECK(!d::parse_hello_reply(w.bytes));
}

TEST_CASE("messages and fds cross a SOCK_SEQPACKET pair; too many fds are refused") {
    int sp[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) == 0);
    const int fd = memfd(4096);
    const auto m = d::encode(d::msg_type::status, 1, {});
    const int one[] = {fd};
    REQUIRE(d::send_message(sp[0], m, one));
    auto r = d::receive(sp[1]);
    REQUIRE(r);
    CHECK(r->bytes == m);
    REQUIRE(r->fds.size() == 1);
    CHECK(r->fds[0].get() != fd);
    // Three fds with one message: the sender refuses; sent raw, the receiver closes
    // what came and refuses the message (MSG_CTRUNC).
    const int three[] = {fd, fd, fd};
    CHECK(!d::send_message(sp[0], m, three));
    {
        iovec iov{const_cast<std::byte*>(m.data()), m.size()};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof three)] = {};
        msghdr h{};
        h.msg_iov = &iov;
        h.msg_iovlen = 1;
        h.msg_control = control;
        h.msg_controllen = sizeof control;
        cmsghdr* c = CMSG_FIRSTHDR(&h);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof three);
        std::memcpy(CMSG_DATA(c), three, sizeof three);
        REQUIRE(::sendmsg(sp[0], &h, 0) == static_cast<ssize_t>(m.size()));
        auto x = d::receive(sp[1]);
        REQUIRE(!x);
        CHECK(x.error().code == EBADMSG);
    }
    // A message bigger than the limit is cut short and refused.
    std::vector<std::byte> big(d::max_message_bytes + 100);
    REQUIRE(d::send_message(sp[0], big));
    auto t = d::receive(sp[1]);
    REQUIRE(!t);
    CHECK(t.error().code == EMSGSIZE);
    ::close(sp[0]);
    auto e = d::receive(sp[1]);
    REQUIRE(!e);
    CHECK(e.error().code == ECONNRESET);
    ::close(sp[1]);
    ::close(fd);
}

TEST_CASE("COUNTERS is a request of one device number; its reply names each counter") {
    d::request r;
    REQUIRE(d::parse_request(d::encode(d::msg_type::counters, 1, d::body(d::counters_req{2})), {}, r));
    CHECK(r.type == d::msg_type::counters);
    CHECK(r.counters.device == 2);
    CHECK(std::string(d::type_name(static_cast<std::uint16_t>(d::msg_type::counters))) == "COUNTERS");
    CHECK(parse_err(d::encode(d::msg_type::counters, 1, {})) == EBADMSG);
    CHECK(parse_err(d::encode(d::msg_type::counters, 1, std::vector<std::byte>(4))) == EBADMSG);
    d::counters_reply c{{{"rx_unicast_packets", 7}, {"tx_unicast_bytes", std::uint64_t{1} << 40}}};
    const auto p = d::payload(c);
    auto back = d::parse_counters_reply(p);
    REQUIRE(back);
    CHECK(back->counters == c.counters);
    CHECK(!d::parse_counters_reply(std::span(p).first(p.size() - 1)));
    auto longer = p;
    longer.push_back(std::byte{0});
    CHECK(!d::parse_counters_reply(longer));
}

TEST_CASE("EVENTS is a request of one device number; EVENT messages round-trip and are checked") {
    d::request r;
    REQUIRE(d::parse_request(d::encode(d::msg_type::events, 1, d::body(d::events_req{3})), {}, r));
    CHECK(r.type == d::msg_type::events);
    CHECK(r.events.device == 3);
    CHECK(parse_err(d::encode(d::msg_type::events, 1, {})) == EBADMSG);
    // EVENT is the daemon's; a client cannot send it as a request.
    CHECK(parse_err(d::encode(d::msg_type::event, 1, {})) == EOPNOTSUPP);

    d::event_msg e;
    e.device = 1;
    e.what = d::event_msg::kind::async;
    e.async_kind = 5;
    e.port = 1;
    e.object = 0x1234;
    e.event_type = 0x11;
    e.detail = "WQ_ACCESS_ERROR";
    const auto m = d::encode_event(7, e);
    auto back = d::parse_event(m);
    REQUIRE(back);
    CHECK(back->device == 1);
    CHECK(back->what == d::event_msg::kind::async);
    CHECK(back->async_kind == 5);
    CHECK(back->port == 1);
    CHECK(back->object == 0x1234);
    CHECK(back->event_type == 0x11);
    CHECK(back->detail == "WQ_ACCESS_ERROR");
    // Cut short, with a byte too many, an unknown kind, or another type: refused.
    CHECK(!d::parse_event(std::span(m).first(m.size() - 1)));
    auto longer = d::encode(d::msg_type::event, 7, std::span(m).subspan(d::header_bytes));
    longer.push_back(std::byte{0});
    CHECK(!d::parse_event(longer));
    auto bad_kind = m;
    bad_kind[d::header_bytes + 2] = std::byte{3};
    CHECK(!d::parse_event(bad_kind));
    // The overflow event (kind 2): the count of events dropped in `object`.
    d::event_msg o;
    o.device = d::event_msg::any_device;
    o.what = d::event_msg::kind::overflow;
    o.object = 4242;
    o.detail = "cxvd dropped 4242 event(s)";
    auto ob = d::parse_event(d::encode_event(8, o));
    REQUIRE(ob);
    CHECK(ob->what == d::event_msg::kind::overflow);
    CHECK(ob->device == d::event_msg::any_device);
    CHECK(ob->object == 4242);
    CHECK(!d::parse_event(d::encode(d::msg_type::status, 7, std::span(m).subspan(d::header_bytes))));
}

TEST_CASE("the event reader's receive_into: the longest EVENT fits max_event_bytes; a longer message is EMSGSIZE and the next one comes") {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    cxv::unique_fd a(sv[0]), b(sv[1]);
    d::event_msg e;
    e.what = d::event_msg::kind::async;
    e.async_kind = 4;
    e.object = 0xabcdef;
    e.detail = std::string(2 * d::max_text_bytes, 'x');  // cut to max_text_bytes by encode
    const auto m = d::encode_event(1, e);
    CHECK(m.size() <= d::max_event_bytes);
    REQUIRE(d::send_message(a.get(), m));
    REQUIRE(d::send_message(a.get(), std::vector<std::byte>(d::max_event_bytes + 1)));
    REQUIRE(d::send_message(a.get(), d::encode_event(2, e)));
    std::array<std::byte, d::max_event_bytes> buf;
    auto n = d::receive_into(b.get(), buf);
    REQUIRE(n);
    auto back = d::parse_event(std::span<const std::byte>(buf.data(), *n));
    REQUIRE(back);
    CHECK(back->object == 0xabcdef);
    CHECK(back->detail == std::string(d::max_text_bytes, 'x'));
    n = d::receive_into(b.get(), buf);
    REQUIRE(!n);
    CHECK(n.error().code == EMSGSIZE);
    n = d::receive_into(b.get(), buf);
    REQUIRE(n);
    CHECK(d::parse_event(std::span<const std::byte>(buf.data(), *n)));
    a = cxv::unique_fd{};
    n = d::receive_into(b.get(), buf);
    REQUIRE(!n);
    CHECK(n.error().code == ECONNRESET);
}
