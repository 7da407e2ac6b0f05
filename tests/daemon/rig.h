// The daemon under the model for tests: `cxv-sim run -- cxvd --socket S ...` started as
// a child (cxv-sim execs cxvd, so the child's PID is the daemon's), waited for until its
// socket answers, killed by PID at the end; and a test client that speaks the protocol
// from a process started without cxv-sim, with helpers for memory, UARs and commands.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "client/client.h"
#include "driver/cmd/cmd_queue.h"
#include "hw/ifc.h"
#include "protocol/codec.h"
#include "tests/exec/processes.h"

namespace cxv::test {

namespace d = cxv::daemon;
namespace ifc = hw::ifc;
using hw::cmd_opcode;

// CXV_DAEMON for this process and the peers it starts, restored at the end.
struct daemon_env {
    explicit daemon_env(const std::string& path) { ::setenv("CXV_DAEMON", path.c_str(), 1); }
    ~daemon_env() { ::unsetenv("CXV_DAEMON"); }
};

// One HTTP/1.1 request on a fresh connection (a UNIX socket path, or 127.0.0.1:PORT); the
// whole response (the server closes). cxvd --metrics answers it.
inline std::string http(const std::string& addr, const std::string& request) {
    int fd = -1;
    if (addr[0] == '/') {
        fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::memcpy(a.sun_path, addr.c_str(), addr.size() + 1);
        REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    } else {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<std::uint16_t>(std::stoul(addr.substr(addr.find(':') + 1))));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    }
    REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
    std::string out;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        REQUIRE_MESSAGE(std::chrono::steady_clock::now() < end, "no whole response within 10 s: ", out);
        if (::poll(&p, 1, 100) <= 0) continue;
        char buf[4096];
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return out;
}

inline std::string http_get(const std::string& addr, const std::string& path = "/metrics") {
    return http(addr, "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n");
}

struct daemon_rig {
    scratch dir;
    std::string sock;
    std::unique_ptr<child> proc;

    // `prelude`: shell commands run in the model's run before cxvd (e.g. making VFs).
    explicit daemon_rig(const std::vector<std::string>& args = {}, const std::vector<std::string>& sim_args = {},
                        const std::string& prelude = {}) {
        sock = dir.dir + "/cxvd.sock";
        // RoCE ports unless sim_args name the port type.
        std::vector<std::string> argv = {env_path("CXV_SIM"), "run", "--link-up-ms", "20"};
        if (std::find(sim_args.begin(), sim_args.end(), "--port-type") == sim_args.end()) {
            argv.insert(argv.end(), {"--port-type", "eth"});
        }
        argv.insert(argv.end(), sim_args.begin(), sim_args.end());
        argv.push_back("--");
        if (!prelude.empty()) argv.insert(argv.end(), {"bash", "-c", prelude + " && exec \"$0\" \"$@\""});
        argv.insert(argv.end(), {env_path("CXVD"), "--socket", sock});
        argv.insert(argv.end(), args.begin(), args.end());
        proc = std::make_unique<child>(argv, dir.dir + "/cxvd.log");
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        for (;;) {
            if (std::filesystem::exists(sock)) {
                if (auto c = d::client::connect(sock)) break;
            }
            REQUIRE_MESSAGE(proc->running(), "cxvd exited: ", log());
            REQUIRE_MESSAGE(std::chrono::steady_clock::now() < end, "cxvd did not listen within 60 s: ", log());
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    std::string log() const { return slurp(proc->log); }
    pid_t pid() const { return proc->pid; }
    // Open fds of the daemon (/proc/PID/fd).
    std::size_t fd_count() const {
        std::size_t n = 0;
        for (const auto& e : std::filesystem::directory_iterator(fmt_path("/proc/", pid(), "/fd"))) {
            (void)e;
            ++n;
        }
        return n;
    }
    static std::string fmt_path(const char* a, pid_t p, const char* b) { return a + std::to_string(p) + b; }
};

// A sealed memfd of `bytes`, mapped here too.
struct shared_memory {
    int fd = -1;
    std::size_t size = 0;
    void* addr = nullptr;
    explicit shared_memory(std::size_t bytes, bool seal = true) : size(bytes) {
        fd = ::memfd_create("cxvd-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, static_cast<off_t>(bytes)) == 0);
        if (seal) REQUIRE(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
        addr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        REQUIRE(addr != MAP_FAILED);
    }
    ~shared_memory() {
        ::munmap(addr, size);
        ::close(fd);
    }
    shared_memory(const shared_memory&) = delete;
    shared_memory& operator=(const shared_memory&) = delete;
};

// One connection, greeted.
struct test_client {
    d::client c;
    d::hello_reply hello;
    explicit test_client(const std::string& sock) : c(connect(sock)) {
        auto h = c.hello();
        REQUIRE_MESSAGE(h, h.error().message);
        hello = std::move(h).value();
        REQUIRE(hello.devices.size() >= 1);
    }
    static d::client connect(const std::string& sock) {
        auto c = d::client::connect(sock);
        REQUIRE_MESSAGE(c, c.error().message);
        return std::move(c).value();
    }
    d::client::answer call(d::msg_type t, const std::vector<std::byte>& body, std::span<const int> fds = {}) {
        auto a = c.call(t, body, fds);
        REQUIRE_MESSAGE(a, a.error().message);
        return std::move(a).value();
    }
    // MAP_MEMORY: the IOVA, or 0 with `err` set.
    std::uint64_t map(const shared_memory& m, int* err = nullptr, std::uint64_t length = 0, bool device_writes = true) {
        const int fds[] = {m.fd};
        auto a = call(d::msg_type::map_memory,
                      d::body(d::map_memory_req{0, device_writes, 0, length ? length : m.size}), fds);
        if (err) *err = a.err;
        if (a.err != 0) return 0;
        auto r = d::parse_map_memory_reply(a.payload);
        REQUIRE(r);
        return r->iova;
    }
    int unmap(std::uint64_t iova) { return call(d::msg_type::unmap_memory, d::body(d::unmap_memory_req{0, iova})).err; }
    // ALLOC_UAR: the index; the page is mapped from the passed device fd to prove it can be.
    std::uint32_t alloc_uar() {
        auto a = call(d::msg_type::alloc_uar, d::body(d::alloc_uar_req{0}));
        REQUIRE_MESSAGE(a.err == 0, a.text);
        auto r = d::parse_alloc_uar_reply(a.payload);
        REQUIRE(r);
        REQUIRE(a.fds.size() == 1);
        void* page = ::mmap(nullptr, r->mmap_length, PROT_READ | PROT_WRITE, MAP_SHARED, a.fds[0].get(),
                            static_cast<off_t>(r->mmap_offset));
        REQUIRE_MESSAGE(page != MAP_FAILED, "mmap of the UAR page from the daemon's device fd: ", std::strerror(errno));
        ::munmap(page, r->mmap_length);
        return r->uar;
    }
    d::client::answer command(const std::vector<std::byte>& in, std::uint32_t out_len) {
        d::command_req r;
        r.out_len = out_len;
        r.in = in;
        return call(d::msg_type::command, d::body(r));
    }
    // ALLOC_PD: the PD number.
    std::uint32_t alloc_pd() {
        auto a = command(driver::command<ifc::alloc_pd_in>(cmd_opcode::ALLOC_PD), ifc::alloc_pd_out::size_bytes);
        REQUIRE_MESSAGE(a.err == 0, a.text);
        return ifc::get<ifc::alloc_pd_out::pd>(a.payload.data());
    }
    // CREATE_CQ of 64 CQEs (one 4 KiB page at `ring`) with its doorbell record at `dbr`.
    d::client::answer create_cq(std::uint64_t ring, std::uint64_t dbr, std::uint32_t uar, long eqn = -1) {
        auto in = driver::command<ifc::create_cq_in>(cmd_opcode::CREATE_CQ, 0, 8);
        std::byte* cqc = ifc::at<ifc::create_cq_in::cq_context>(in.data());
        ifc::set<ifc::cqc::log_cq_size>(cqc, 6);
        ifc::set<ifc::cqc::uar_page>(cqc, uar);
        ifc::set<ifc::cqc::c_eqn_or_apu_element>(cqc, eqn < 0 ? hello.devices[0].comp_eqn : static_cast<std::uint32_t>(eqn));
        ifc::set<ifc::cqc::dbr_addr>(cqc, dbr);
        ifc::set<ifc::create_cq_in::pas>(in.data(), 0, ring);
        return command(in, ifc::create_cq_out::size_bytes);
    }
    std::uint32_t cq(std::uint64_t ring, std::uint64_t dbr, std::uint32_t uar) {
        auto a = create_cq(ring, dbr, uar);
        REQUIRE_MESSAGE(a.err == 0, a.text);
        return ifc::get<ifc::create_cq_out::cqn>(a.payload.data());
    }
    template <typename In, typename Field>
    int by_number(cmd_opcode op, std::uint32_t n) {
        auto in = driver::command<In>(op);
        ifc::set<Field>(in.data(), n);
        return command(in, op == cmd_opcode::QUERY_CQ ? ifc::query_cq_out::size_bytes : 16).err;
    }
    int destroy_cq(std::uint32_t cqn) {
        return by_number<ifc::destroy_cq_in, ifc::destroy_cq_in::cqn>(cmd_opcode::DESTROY_CQ, cqn);
    }
    int query_cq(std::uint32_t cqn) { return by_number<ifc::query_cq_in, ifc::query_cq_in::cqn>(cmd_opcode::QUERY_CQ, cqn); }
    int dealloc_pd(std::uint32_t pd) { return by_number<ifc::dealloc_pd_in, ifc::dealloc_pd_in::pd>(cmd_opcode::DEALLOC_PD, pd); }
    int destroy_mkey(std::uint32_t idx) {
        return by_number<ifc::destroy_mkey_in, ifc::destroy_mkey_in::mkey_index>(cmd_opcode::DESTROY_MKEY, idx);
    }
    // CREATE_MKEY (MTT mode unless `access_mode` says otherwise) over `pages` 4 KiB pages from `iova`.
    d::client::answer create_mkey(std::uint32_t pd, std::uint64_t iova, unsigned pages, unsigned access_mode = 1) {
        return command(mkey_input(pd, iova, pages, access_mode), ifc::create_mkey_out::size_bytes);
    }
    // The CREATE_MKEY input create_mkey sends (PRM "CREATE_MKEY"): an odd page count is
    // padded to whole octwords with the last page again.
    static std::vector<std::byte> mkey_input(std::uint32_t pd, std::uint64_t iova, std::size_t pages,
                                             unsigned access_mode = 1) {
        auto in = driver::command<ifc::create_mkey_in>(cmd_opcode::CREATE_MKEY, 0, pages * 8 + (pages % 2) * 8);
        const auto octwords = static_cast<std::uint32_t>((pages + 1) / 2);
        std::byte* mkc = ifc::at<ifc::create_mkey_in::memory_key_mkey_entry>(in.data());
        ifc::set<ifc::mkc::access_mode_1_0>(mkc, access_mode);
        ifc::set<ifc::mkc::lr>(mkc, 1);
        ifc::set<ifc::mkc::lw>(mkc, 1);
        ifc::set<ifc::mkc::qpn>(mkc, 0xffffff);
        ifc::set<ifc::mkc::pd>(mkc, pd);
        ifc::set<ifc::mkc::start_addr>(mkc, 0x10000000);
        ifc::set<ifc::mkc::len>(mkc, std::uint64_t{pages} * 4096);
        ifc::set<ifc::mkc::translations_octword_size>(mkc, octwords);
        ifc::set<ifc::mkc::log_page_size>(mkc, 12);
        ifc::set<ifc::create_mkey_in::translations_octword_actual_size>(in.data(), octwords);
        for (std::size_t i = 0; i < std::size_t{octwords} * 2; ++i) {
            const std::uint64_t a = iova + std::uint64_t{std::min(i, pages - 1)} * 4096;
            ifc::set<ifc::create_mkey_in::klm_pas_mtt>(in.data(), 2 * i, static_cast<std::uint32_t>(a >> 32));
            ifc::set<ifc::create_mkey_in::klm_pas_mtt>(in.data(), 2 * i + 1, static_cast<std::uint32_t>(a));
        }
        return in;
    }
    // CREATE_QP (RC): a 1 KiB SQ and a 256-byte RQ on the page at `wq`, doorbell record
    // at `dbr`; `rlky` asks for the reserved lkey.
    d::client::answer create_qp(std::uint32_t pd, std::uint32_t cqn, std::uint32_t uar, std::uint64_t wq,
                                std::uint64_t dbr, bool rlky = false, std::uint32_t rcv_cqn = 0) {
        auto in = cxv::driver::command<ifc::create_qp_in>(cmd_opcode::CREATE_QP, 0, 8);
        std::byte* qpc = ifc::at<ifc::create_qp_in::qpc>(in.data());
        ifc::set<ifc::qpc::st>(qpc, ifc::qpc_values::st_rc);
        ifc::set<ifc::qpc::pm_state>(qpc, ifc::qpc_values::pm_migrated);
        ifc::set<ifc::qpc::pd>(qpc, pd);
        ifc::set<ifc::qpc::uar_page>(qpc, uar);
        ifc::set<ifc::qpc::log_sq_size>(qpc, 4);
        ifc::set<ifc::qpc::rq_type>(qpc, ifc::qpc_values::rq_regular);
        ifc::set<ifc::qpc::log_rq_size>(qpc, 4);
        ifc::set<ifc::qpc::log_rq_stride>(qpc, 0);
        ifc::set<ifc::qpc::cqn_snd>(qpc, cqn);
        ifc::set<ifc::qpc::cqn_rcv>(qpc, rcv_cqn ? rcv_cqn : cqn);
        ifc::set<ifc::qpc::dbr_addr>(qpc, dbr);
        ifc::set<ifc::qpc::rlky>(qpc, rlky ? 1 : 0);
        ifc::set<ifc::create_qp_in::pas>(in.data(), 0, wq);
        return command(in, ifc::create_qp_out::size_bytes);
    }
    std::uint32_t qp(std::uint32_t pd, std::uint32_t cqn, std::uint32_t uar, std::uint64_t wq, std::uint64_t dbr,
                     std::uint32_t rcv_cqn = 0) {
        auto a = create_qp(pd, cqn, uar, wq, dbr, false, rcv_cqn);
        REQUIRE_MESSAGE(a.err == 0, a.text);
        return ifc::get<ifc::create_qp_out::qpn>(a.payload.data());
    }
    // RST2INIT_QP on port 1, P_Key index 0; `counter` asks for a Q counter set.
    int rst2init(std::uint32_t qpn, unsigned counter = 0) {
        auto in = cxv::driver::command<ifc::rst2init_qp_in>(cmd_opcode::RST2INIT_QP);
        ifc::set<ifc::rst2init_qp_in::qpn>(in.data(), qpn);
        std::byte* qpc = ifc::at<ifc::rst2init_qp_in::qpc>(in.data());
        ifc::set<ifc::ads::vhca_port_num>(ifc::at<ifc::qpc::primary_address_path>(qpc), 1);
        ifc::set<ifc::qpc::counter_set_id>(qpc, counter);
        return command(in, ifc::rst2init_qp_out::size_bytes).err;
    }
    int query_qp(std::uint32_t qpn) {
        auto in = cxv::driver::command<ifc::query_qp_in>(cmd_opcode::QUERY_QP);
        ifc::set<ifc::query_qp_in::qpn>(in.data(), qpn);
        return command(in, ifc::query_qp_out::size_bytes).err;
    }
    int destroy_qp(std::uint32_t qpn) {
        return by_number<ifc::destroy_qp_in, ifc::destroy_qp_in::qpn>(cmd_opcode::DESTROY_QP, qpn);
    }
    d::status_reply status() {
        auto a = call(d::msg_type::status, {});
        REQUIRE_MESSAGE(a.err == 0, a.text);
        auto s = d::parse_status_reply(a.payload);
        REQUIRE(s);
        return std::move(s).value();
    }
    // The daemon's PID, from SO_PEERCRED on this connection.
    pid_t daemon_pid() const {
        ucred u{};
        socklen_t len = sizeof u;
        REQUIRE(::getsockopt(c.fd(), SOL_SOCKET, SO_PEERCRED, &u, &len) == 0);
        return u.pid;
    }
};

inline const d::client_info* find_client(const d::status_reply& s, pid_t pid) {
    for (const auto& c : s.clients) {
        if (c.pid == pid) return &c;
    }
    return nullptr;
}

// Waits (bounded) until `pred(status)` holds; the last STATUS either way.
template <typename Pred>
d::status_reply wait_status(test_client& c, Pred pred, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    for (;;) {
        auto s = c.status();
        if (pred(s) || std::chrono::steady_clock::now() > end) return s;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

// Runs `body` in a forked child (not under cxv-sim); its exit status (-1 when it had to
// be killed). A failure that throws in the child ends it with 99, never as a second test
// runner.
template <typename Body>
int in_child(Body body, std::chrono::seconds limit = std::chrono::seconds(30)) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int rc = 99;
        try {
            rc = body();
        } catch (...) {
        }
        ::_exit(rc);
    }
    const auto end = std::chrono::steady_clock::now() + limit;
    int st = 0;
    while (::waitpid(pid, &st, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > end) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &st, 0);
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace cxv::test
