// cxv exec, two processes, librdmacm: Debian's unmodified rdmacm-utils (rdma_server and
// rdma_client, rping, ucmatose, udaddy) as server and client, each under its own
// `cxv-sim run --fabric DIR --set fabric_index=N`, on cxv's librdmacm.so.1 and
// libibverbs.so.1. The connection manager talks over TCP on 127.0.0.1; every message of
// the tools crosses the model's wire.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"
#include "tests/skip.h"

namespace {

using namespace cxv::test;
using namespace std::chrono_literals;

struct pair_result {
    int server = -1, client = -1;
    std::string server_log, client_log;
    std::chrono::steady_clock::duration client_time{};
};

std::vector<std::string> under_sim(const std::string& fabric, const std::string& port_type, unsigned index,
                                   const std::vector<std::string>& tool) {
    std::vector<std::string> v = {env_path("CXV_SIM"), "run", "--fabric", fabric, "--port-type", port_type,
                                  "--set", "fabric_index=" + std::to_string(index), "--link-up-ms", "20",
                                  "--", env_path("CXV"), "exec", "--"};
    v.insert(v.end(), tool.begin(), tool.end());
    return v;
}

// Runs `server` (fabric place 0) until it listens on TCP `port`, then `client` (place
// 1); `kill_server_when`, when not empty, kills the server by its PID once the client's
// log holds that text (the transfer is under way however slow the machine), or the
// client has ended.
pair_result run_pair(const std::string& port_type, unsigned port, const std::vector<std::string>& server_tool,
                     const std::vector<std::string>& client_tool, const std::string& kill_server_when = {},
                     const std::function<void()>& before_client = {}) {
    scratch s;
    const std::string fabric = s.dir + "/fabric";
    std::filesystem::create_directories(fabric);
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    child server(under_sim(fabric, port_type, 0, server_tool), s.dir + "/server.log");
    while (!listening(port) && server.running() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    pair_result r;
    if (listening(port)) {
        if (before_client) before_client();
        const auto start = std::chrono::steady_clock::now();
        child client(under_sim(fabric, port_type, 1, client_tool), s.dir + "/client.log");
        if (!kill_server_when.empty()) {
            while (client.running() && std::chrono::steady_clock::now() < deadline &&
                   slurp(client.log).find(kill_server_when) == std::string::npos) {
                std::this_thread::sleep_for(20ms);
            }
            server.kill_now();  // cxv-sim run execs the tool: this PID is rping's
        }
        r.client = client.wait(deadline);
        r.client_time = std::chrono::steady_clock::now() - start;
        r.client_log = slurp(client.log);
    }
    r.server = server.wait(deadline);
    r.server_log = slurp(server.log);
    return r;
}

bool contains(const std::string& log, const std::string& what) { return log.find(what) != std::string::npos; }

// rping -v prints "ping data: rdma-ping-N: ..." for N = 0, 1, ... (the server "server
// ping data: ..."): how many of them, in order from 0, `log` has. The tool's stderr
// ("client DISCONNECT EVENT...") is unbuffered and its stdout is not, so a line of the
// one can cut a line of the other in two: the count looks for "rdma-ping-N: " alone.
unsigned long ping_lines(const std::string& log) {
    unsigned long next = 0;
    std::size_t at = 0;
    for (;;) {
        const std::string head = "rdma-ping-" + std::to_string(next) + ": ";
        const std::size_t found = log.find(head, at);
        if (found == std::string::npos) return next;
        at = found + head.size();
        ++next;
    }
}

std::vector<std::string> with_port(std::vector<std::string> v, unsigned port) {
    v.push_back("-p");
    v.push_back(std::to_string(port));
    return v;
}

}  // namespace

TEST_CASE("rdma_server and rdma_client: the synchronous endpoint API") {
    for (const char* type : {"ib", "eth"}) {
        CAPTURE(type);
        const unsigned port = free_port();
        const pair_result r = run_pair(type, port, with_port({"/usr/bin/rdma_server", "-s", "127.0.0.1"}, port),
                                       with_port({"/usr/bin/rdma_client", "-s", "127.0.0.1"}, port));
        INFO("server log:\n" << r.server_log);
        INFO("client log:\n" << r.client_log);
        CHECK(r.server == 0);
        CHECK(r.client == 0);
        CHECK(contains(r.server_log, "rdma_server: end 0"));
        CHECK(contains(r.client_log, "rdma_client: end 0"));
    }
}

TEST_CASE("a connection that sends half a message and stalls holds up nobody else") {
    const unsigned port = free_port();
    int stalled = -1;
    const pair_result r = run_pair("ib", port, with_port({"/usr/bin/rdma_server", "-s", "127.0.0.1"}, port),
                                   with_port({"/usr/bin/rdma_client", "-s", "127.0.0.1"}, port), {}, [&] {
                                       // Not a connection manager: 10 bytes of a message, then nothing.
                                       stalled = ::socket(AF_INET, SOCK_STREAM, 0);
                                       sockaddr_in a{};
                                       a.sin_family = AF_INET;
                                       a.sin_port = htons(static_cast<std::uint16_t>(port));
                                       a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                                       REQUIRE(::connect(stalled, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
                                       const char half[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
                                       REQUIRE(::send(stalled, half, sizeof half, 0) == 10);
                                       std::this_thread::sleep_for(100ms);
                                   });
    if (stalled >= 0) ::close(stalled);
    INFO("server log:\n" << r.server_log);
    INFO("client log:\n" << r.client_log);
    CHECK(r.client == 0);
    CHECK(r.server == 0);
    CHECK(contains(r.client_log, "rdma_client: end 0"));
    CHECK(r.client_time < 30s);
}

TEST_CASE("rdma_client to a port nobody listens on: ECONNREFUSED at once") {
    scratch s;
    const unsigned port = free_port();
    const auto start = std::chrono::steady_clock::now();
    const ran r = run(under_sim(s.dir + "/fabric", "ib", 0, with_port({"/usr/bin/rdma_client", "-s", "127.0.0.1"}, port)),
                      s.dir + "/client.log", 30s);
    INFO(r.output);
    CHECK(r.status != 0);
    CHECK(r.status != -1);  // exited by itself, not killed at the limit
    CHECK(std::chrono::steady_clock::now() - start < 20s);
    CHECK(contains(r.output, "rdma_connect: Connection refused"));
    CHECK(contains(r.output, "rdma_client: end -1"));
}

TEST_CASE("the tools load cxv's librdmacm and libibverbs, never rdma-core's (LD_DEBUG=libs)") {
    scratch s;
    const unsigned port = free_port();
    const ran r = run(under_sim(s.dir + "/fabric", "ib", 0,
                                with_port({"/usr/bin/env", "LD_DEBUG=libs", "/usr/bin/rdma_client", "-s", "127.0.0.1"},
                                          port)),
                      s.dir + "/client.log", 30s);
    INFO(r.output.substr(0, 6000));
    CHECK(contains(r.output, "api/abi/librdmacm.so.1"));
    CHECK(contains(r.output, "api/abi/libibverbs.so.1"));
    for (const char* theirs : {"x86_64-linux-gnu/librdmacm.so", "x86_64-linux-gnu/libibverbs.so"}) {
        CAPTURE(theirs);
        CHECK(!contains(r.output, std::string("calling init: /usr/lib/") + theirs));
        CHECK(!contains(r.output, std::string("calling init: /lib/") + theirs));
    }
}

TEST_CASE("event-channel calls the tools do not reach (tests/exec/cm_calls.c)") {
    scratch s;
    for (const char* type : {"ib", "eth"}) {
        CAPTURE(type);
        const ran r = run(under_sim(s.dir + "/fabric", type, 0, {env_path("CXV_CM_CALLS"), std::to_string(free_port())}),
                          s.dir + "/calls.log", 60s);
        INFO(r.output);
        CHECK(r.status == 0);
        CHECK(contains(r.output, "cm_calls: ok"));
    }
}

TEST_CASE("rdma_xserver and rdma_xclient in XRC mode: refused cleanly") {
    scratch s;
    const unsigned port = free_port();
    const ran r = run(under_sim(s.dir + "/fabric", "ib", 0, with_port({"/usr/bin/rdma_xserver", "-c", "x"}, port)),
                      s.dir + "/server.log", 30s);
    INFO(r.output);
    CHECK(r.status == 255);
    CHECK(contains(r.output, "rdma_create_ep: Operation not supported"));
}

TEST_CASE("rdma_xserver and rdma_xclient in RC mode (their default): an inline SEND the QP did not ask room for") {
    for (const char* type : {"ib", "eth"}) {
        CAPTURE(type);
        const unsigned port = free_port();
        const pair_result r = run_pair(type, port, with_port({"/usr/bin/rdma_xserver"}, port),
                                       with_port({"/usr/bin/rdma_xclient", "-s", "127.0.0.1"}, port));
        INFO("server log:\n" << r.server_log);
        INFO("client log:\n" << r.client_log);
        CHECK(r.server == 0);
        CHECK(r.client == 0);
        CHECK(contains(r.server_log, "rdma_xserver: end 0"));
        CHECK(contains(r.client_log, "rdma_xclient: end 0"));
    }
}

TEST_CASE("rping -v -C 1000: the event-channel API, RDMA read and write") {
    for (const char* type : {"ib", "eth"}) {
        CAPTURE(type);
        const unsigned port = free_port();
        const pair_result r =
            run_pair(type, port, with_port({"/usr/bin/rping", "-s", "-a", "127.0.0.1", "-v", "-C", "1000"}, port),
                     with_port({"/usr/bin/rping", "-c", "-a", "127.0.0.1", "-v", "-C", "1000"}, port));
        INFO("server log:\n" << r.server_log.substr(0, 4000));
        INFO("client log:\n" << r.client_log.substr(0, 4000));
        CHECK(r.server == 0);
        CHECK(r.client == 0);
        CHECK(ping_lines(r.client_log) == 1000);
        CHECK(ping_lines(r.server_log) == 1000);
        CHECK(contains(r.client_log, "ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ"));
        CHECK(contains(r.server_log, "server ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ"));
        CHECK(!contains(r.client_log, "rdma-ping-1000: "));
    }
}

TEST_CASE("rping variants: the program's own QP (-q) over IPv6, names, large buffers validated") {
    SUBCASE("-q: rdma_init_qp_attr, CONNECT_RESPONSE and rdma_establish, on RoCE over ::1") {
        // rping resolves "::1" with glibc's default AI_ADDRCONFIG, which refuses IPv6 on
        // a machine whose only non-loopback address is IPv4: both ends run in a network
        // namespace of their own with just its loopback, where glibc takes both families.
        private_network net;
        const unsigned port = free_port();
        const pair_result r =
            run_pair("eth", port, with_port({"/usr/bin/rping", "-s", "-q", "-a", "::1", "-V", "-C", "200"}, port),
                     with_port({"/usr/bin/rping", "-c", "-q", "-a", "::1", "-V", "-v", "-C", "200"}, port));
        INFO("server log:\n" << r.server_log.substr(0, 4000));
        INFO("client log:\n" << r.client_log.substr(0, 4000));
        CHECK(r.server == 0);
        CHECK(r.client == 0);
        CHECK(ping_lines(r.client_log) == 200);
        CHECK(!contains(r.client_log, "data mismatch"));
    }
    SUBCASE("the peer by name (localhost), a bound source (-I), 60000-byte pings validated (-V)") {
        const unsigned port = free_port();
        const pair_result r = run_pair(
            "ib", port, with_port({"/usr/bin/rping", "-s", "-a", "127.0.0.1", "-V", "-S", "60000", "-C", "50"}, port),
            with_port({"/usr/bin/rping", "-c", "-I", "127.0.0.1", "-a", "localhost", "-V", "-S", "60000", "-C", "50"},
                      port));
        INFO("server log:\n" << r.server_log.substr(0, 4000));
        INFO("client log:\n" << r.client_log.substr(0, 4000));
        CHECK(r.server == 0);
        CHECK(r.client == 0);
        CHECK(!contains(r.client_log, "data mismatch"));
        CHECK(!contains(r.client_log, "failed"));
    }
}

// rping ends on a failed connection twice at once: its event thread calls exit(3) from the
// event handler (rping.c, cm_thread) while its main thread, woken by the same handler,
// returns from main. glibc 2.36 does not serialise concurrent exit(3)s, so now and then
// both free the exit-handler list (AddressSanitizer reports the double free; plain glibc
// may abort on it). That race is rping's own, the same on rdma-core; the exit status is
// then the abort's, and the tool's answer is still the event it printed.
bool rping_exit_race(const ran& r) {
    return r.status != 255 && contains(r.output, "__run_exit_handlers") &&
           (contains(r.output, "double-free") || contains(r.output, "double free"));
}

void check_rping_failed(const ran& r) {
    if (rping_exit_race(r)) MESSAGE("rping's two threads called exit(3) at once (its own race): status ", r.status);
    CHECK((r.status == 255 || rping_exit_race(r)));
}

TEST_CASE("rping client to a port nobody listens on: REJECTED, not a hang") {
    scratch s;
    const unsigned port = free_port();
    // With the manager's trace on (CXV_CM_TRACE, api/abi/cm_wire.h): the refusal is in it.
    ::setenv("CXV_CM_TRACE", "1", 1);
    const ran r = run(under_sim(s.dir + "/fabric", "ib", 0,
                                with_port({"/usr/bin/rping", "-c", "-a", "127.0.0.1", "-C", "3"}, port)),
                      s.dir + "/client.log", 30s);
    ::unsetenv("CXV_CM_TRACE");
    INFO(r.output);
    check_rping_failed(r);
    CHECK(contains(r.output, "cma event RDMA_CM_EVENT_REJECTED, error 8"));
    CHECK(contains(r.output, " refused 127.0.0.1:" + std::to_string(port) + " began "));
    CHECK(contains(r.output, "cxv-cm: "));
}

// A TCP listener that takes connections and never answers: the REQ gets no reply.
struct silent_listener {
    int fd = -1;
    unsigned port = 0;
    silent_listener() {
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(fd >= 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(fd, 4) == 0);
        socklen_t len = sizeof a;
        REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        port = ntohs(a.sin_port);
    }
    ~silent_listener() { ::close(fd); }
};

TEST_CASE("a peer that never answers the REQ: UNREACHABLE with ETIMEDOUT after the reply timeout") {
    scratch s;
    silent_listener quiet;
    SUBCASE("rping (the event-channel API)") {
        const auto start = std::chrono::steady_clock::now();
        const ran r = run(under_sim(s.dir + "/fabric", "ib", 0,
                                    with_port({"/usr/bin/rping", "-c", "-a", "127.0.0.1", "-C", "3"}, quiet.port)),
                          s.dir + "/client.log", 60s);
        INFO(r.output);
        check_rping_failed(r);
        CHECK(std::chrono::steady_clock::now() - start < 40s);
        CHECK(contains(r.output, "cma event RDMA_CM_EVENT_UNREACHABLE, error -110"));
    }
    SUBCASE("rdma_client (the synchronous API)") {
        const ran r = run(under_sim(s.dir + "/fabric", "ib", 0,
                                    with_port({"/usr/bin/rdma_client", "-s", "127.0.0.1"}, quiet.port)),
                          s.dir + "/client.log", 60s);
        INFO(r.output);
        CHECK(r.status == 255);
        CHECK(contains(r.output, "rdma_connect: Connection timed out"));
    }
}

TEST_CASE("the rping server killed mid-transfer: the client sees DISCONNECTED and ends") {
    const unsigned port = free_port();
    const pair_result r =
        run_pair("ib", port, with_port({"/usr/bin/rping", "-s", "-a", "127.0.0.1", "-C", "100000000"}, port),
                 with_port({"/usr/bin/rping", "-c", "-a", "127.0.0.1", "-v", "-C", "100000000"}, port),
                 "rdma-ping-100: ");
    INFO("client log tail:\n" << r.client_log.substr(r.client_log.size() > 2000 ? r.client_log.size() - 2000 : 0));
    CHECK(r.server == -1);  // killed by run_pair, not ended by itself
    CHECK(r.client != -1);  // ended by itself
    CHECK(r.client_time < 30s);
    const unsigned long got = ping_lines(r.client_log);
    CHECK(got > 0);
    CHECK(got < 100000000);
    // rping's own report of the DISCONNECTED event (state 10) in its loop; it then
    // returns 0, as it does on a kernel CM, whose dying server sends the DREQ.
    CHECK(contains(r.client_log, "state 10"));
}

TEST_CASE("ucmatose: connect, sends both ways, disconnect") {
    for (const char* type : {"ib", "eth"}) {
        CAPTURE(type);
        SUBCASE("one connection") {
            const unsigned port = free_port();
            const pair_result r = run_pair(type, port, with_port({"/usr/bin/ucmatose"}, port),
                                           with_port({"/usr/bin/ucmatose", "-s", "127.0.0.1"}, port));
            INFO("server log:\n" << r.server_log);
            INFO("client log:\n" << r.client_log);
            CHECK(r.server == 0);
            CHECK(r.client == 0);
            CHECK(contains(r.server_log, "data transfers complete"));
            CHECK(contains(r.client_log, "data transfers complete"));
            CHECK(contains(r.client_log, "return status 0"));
            CHECK(!contains(r.server_log + r.client_log, "cxv-cm: "));  // the trace is off by default
        }
        SUBCASE("four connections, 50 messages each way") {
            const unsigned port = free_port();
            const pair_result r =
                run_pair(type, port, with_port({"/usr/bin/ucmatose", "-c", "4", "-C", "50"}, port),
                         with_port({"/usr/bin/ucmatose", "-s", "127.0.0.1", "-c", "4", "-C", "50"}, port));
            INFO("server log:\n" << r.server_log);
            INFO("client log:\n" << r.client_log);
            CHECK(r.server == 0);
            CHECK(r.client == 0);
            CHECK(contains(r.server_log, "data transfers complete"));
            CHECK(contains(r.client_log, "return status 0"));
        }
        SUBCASE("migrating ids to a new event channel (-m)") {
            const unsigned port = free_port();
            const pair_result r = run_pair(type, port, with_port({"/usr/bin/ucmatose", "-m"}, port),
                                           with_port({"/usr/bin/ucmatose", "-m", "-s", "127.0.0.1"}, port));
            INFO("server log:\n" << r.server_log);
            INFO("client log:\n" << r.client_log);
            CHECK(r.server == 0);
            CHECK(r.client == 0);
            CHECK(contains(r.server_log, "migrating to new event channel"));
            CHECK(contains(r.client_log, "return status 0"));
        }
    }
}

TEST_CASE("ucmatose client to a port nobody listens on: REJECTED with status 8") {
    scratch s;
    const unsigned port = free_port();
    const ran r = run(under_sim(s.dir + "/fabric", "ib", 0, with_port({"/usr/bin/ucmatose", "-s", "127.0.0.1"}, port)),
                      s.dir + "/client.log", 30s);
    INFO(r.output);
    CHECK(r.status == 8);
    CHECK(contains(r.output, "event: RDMA_CM_EVENT_REJECTED, error: 8"));
}

// udaddy has no port option: it uses rdma_cm's port 7174, in a network namespace of the
// test's own where it can make one.
constexpr unsigned kUdaddyPort = 7174;

TEST_CASE("udaddy: UD QPs, address handles from the ESTABLISHED event and from completions" *
          cxv::test::skip_unless(::geteuid() == 0 || !listening(kUdaddyPort),
                                 "udaddy: not root (no network namespace of the test's own) and port 7174 in use")) {
    const private_network net;
    REQUIRE_MESSAGE((net.active() || !listening(kUdaddyPort)),
                    "no network namespace of the test's own, and rdma_cm's port 7174 is in use here");
    for (const char* type : {"ib", "eth"}) {
        CAPTURE(type);
        const pair_result r = run_pair(type, kUdaddyPort, {"/usr/bin/udaddy"}, {"/usr/bin/udaddy", "-s", "127.0.0.1"});
        INFO("server log:\n" << r.server_log);
        INFO("client log:\n" << r.client_log);
        CHECK(r.server == 0);
        CHECK(r.client == 0);
        CHECK(contains(r.server_log, "data transfers complete"));
        CHECK(contains(r.client_log, "data transfers complete"));
        CHECK(contains(r.client_log, "return status 0"));
    }
}

// mckey: rdma_join_multicast_ex on RoCE v2 (cm_multicast.cc), a UD QP in the group, and an
// address handle from the MULTICAST_JOIN event to QP 0xFFFFFF. The receiver joins first
// and waits for all 10 messages of 100 bytes; the sender joins, waits 3 s (its pause for
// a subnet manager) and sends them (SEND with immediate, unsignaled). No side channel:
// each ends its join by itself. On InfiniBand a join is a question to the subnet
// administrator, which cxv has no client for: ENOSYS, said clearly.
TEST_CASE("mckey: a RoCE v2 multicast group, joined by rdma_join_multicast_ex, carries the sender's messages") {
    scratch s;
    const std::string fabric = s.dir + "/fabric";
    std::filesystem::create_directories(fabric);
    const auto deadline = std::chrono::steady_clock::now() + 90s;
    const std::vector<std::string> group = {"-m", "239.1.2.3", "-b", "127.0.0.1"};
    // Line-buffered: the receiver's "joined" line is waited for before the sender starts.
    std::vector<std::string> receiver = {"/usr/bin/stdbuf", "-oL", "/usr/bin/mckey"},
                             sender = {"/usr/bin/stdbuf", "-oL", "/usr/bin/mckey", "-s"};
    receiver.insert(receiver.end(), group.begin(), group.end());
    sender.insert(sender.end(), group.begin(), group.end());
    child rx(under_sim(fabric, "eth", 0, receiver), s.dir + "/receiver.log");
    while (rx.running() && std::chrono::steady_clock::now() < deadline &&
           !contains(slurp(rx.log), "mckey: joined dgid")) {
        std::this_thread::sleep_for(20ms);
    }
    child tx(under_sim(fabric, "eth", 1, sender), s.dir + "/sender.log");
    const int tx_status = tx.wait(deadline);
    const int rx_status = rx.wait(deadline);
    const std::string rx_log = slurp(rx.log), tx_log = slurp(tx.log);
    INFO("receiver log:\n" << rx_log);
    INFO("sender log:\n" << tx_log);
    CHECK(tx_status == 0);
    CHECK(rx_status == 0);
    for (const std::string& log : {rx_log, tx_log}) {
        CHECK(contains(log, "mckey: joined dgid: ::ffff:239.1.2.3 mlid 0x0 sl 0"));
        CHECK(contains(log, "data transfers complete"));
    }
    CHECK(contains(rx_log, "receiving data transfers"));
    CHECK(contains(tx_log, "initiating data transfers"));
}

TEST_CASE("mckey on InfiniBand: ENOSYS, there is no subnet administrator client to ask") {
    scratch s;
    const std::string fabric = s.dir + "/fabric";
    std::filesystem::create_directories(fabric);
    child ib(under_sim(fabric, "ib", 0, {"/usr/bin/mckey", "-m", "239.1.2.3", "-b", "127.0.0.1"}), s.dir + "/ib.log");
    const int status = ib.wait(std::chrono::steady_clock::now() + 60s);
    const std::string log = slurp(ib.log);
    INFO(log);
    CHECK(status != 0);
    CHECK(contains(log, "mckey: failure joining: Function not implemented"));
}
