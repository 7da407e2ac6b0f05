// Two processes on one fabric: cxv_wire_peer runs twice, as server and client, each
// under its own `cxv-sim run --fabric DIR`, so every byte between them crosses the
// model's wire as RoCEv2 or InfiniBand frames over the directory's datagram sockets.
// Processes are started here and always reaped or killed by PID.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"
#include "tests/sim/wire/tshark_command.h"
#include "tests/skip.h"

namespace {

using namespace std::chrono_literals;

std::string env(const char* name) {
    const char* v = std::getenv(name);
    REQUIRE_MESSAGE(v != nullptr, name, " is not set (run under bazel test)");
    return std::filesystem::absolute(v).string();
}

// A fresh directory under /tmp (UNIX socket paths must stay short), removed at the end.
struct scratch {
    std::string dir;
    scratch() {
        std::string t = "/tmp/cxv-wire-XXXXXX";
        REQUIRE(::mkdtemp(t.data()) != nullptr);
        dir = t;
        std::filesystem::create_directories(dir + "/oob");
    }
    ~scratch() { std::filesystem::remove_all(dir); }
};

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// A child process, killed (by its PID) if still running when this goes away.
struct child {
    pid_t pid = -1;
    std::string log;
    child(const std::vector<std::string>& argv, std::string log_path) : log(std::move(log_path)) {
        pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            ::dup2(fd, 1);
            ::dup2(fd, 2);
            std::vector<char*> v;
            for (const auto& a : argv) v.push_back(const_cast<char*>(a.c_str()));
            v.push_back(nullptr);
            ::execv(v[0], v.data());
            ::_exit(127);
        }
    }
    // The exit status, or -1 after killing it when it ran past `deadline`.
    int wait(std::chrono::steady_clock::time_point deadline) {
        while (pid > 0) {
            int st = 0;
            const pid_t r = ::waitpid(pid, &st, WNOHANG);
            if (r == pid) {
                pid = -1;
                return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            }
            if (std::chrono::steady_clock::now() > deadline) {
                ::kill(pid, SIGKILL);
                ::waitpid(pid, &st, 0);
                pid = -1;
                return -1;
            }
            std::this_thread::sleep_for(5ms);
        }
        return -1;
    }
    ~child() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
};

struct run_options {
    std::string port_type = "eth";
    std::string test = "traffic";
    std::vector<std::string> sim_args;         // for both processes
    std::vector<std::string> client_sim_args;  // for the client's only
    std::vector<std::string> peer_args;        // for both peers
    std::chrono::seconds limit{90};
    // Runs while both processes do, given the scratch directory: fabric/, oob/, and the
    // processes' logs server.log and client.log.
    std::function<void(const std::string&)> during;
};

struct outcome {
    int server = -1, client = -1;
    std::string server_log, client_log;
};

outcome run_pair(const run_options& o, const scratch& s) {
    const std::string sim = env("CXV_SIM"), peer = env("CXV_WIRE_PEER");
    const std::string fabric = s.dir + "/fabric";
    std::filesystem::create_directories(fabric);
    auto start = [&](const char* role, unsigned index) {
        std::vector<std::string> argv = {sim, "run", "--fabric", fabric, "--port-type", o.port_type,
                                         "--set", "fabric_index=" + std::to_string(index), "--link-up-ms", "20"};
        argv.insert(argv.end(), o.sim_args.begin(), o.sim_args.end());
        if (std::string(role) == "client") argv.insert(argv.end(), o.client_sim_args.begin(), o.client_sim_args.end());
        argv.insert(argv.end(), {"--", peer, "--role", role, "--oob", s.dir + "/oob", "--test", o.test, "--device",
                                 cxv::test::bdf_at(sim, fabric, index)});
        argv.insert(argv.end(), o.peer_args.begin(), o.peer_args.end());
        return std::make_unique<child>(argv, s.dir + "/" + role + ".log");
    };
    auto server = start("server", 0);
    auto client = start("client", 1);
    if (o.during) o.during(s.dir);
    const auto deadline = std::chrono::steady_clock::now() + o.limit;
    outcome out;
    out.client = client->wait(deadline);
    out.server = server->wait(deadline);
    out.server_log = slurp(server->log);
    out.client_log = slurp(client->log);
    return out;
}

outcome run_pair(const run_options& o) {
    scratch s;
    return run_pair(o, s);
}

void check_both_passed(const outcome& r) {
    INFO("server log:\n" << r.server_log);
    INFO("client log:\n" << r.client_log);
    CHECK(r.server == 0);
    CHECK(r.client == 0);
}

TEST_CASE("RoCEv2: every operation between two processes (RC, UC, UD; NAKs; RNR)") {
    check_both_passed(run_pair({}));
}

TEST_CASE("InfiniBand: every operation between two processes") {
    run_options o;
    o.port_type = "ib";
    check_both_passed(run_pair(o));
}

TEST_CASE("RC delivers every message exactly once and in order through each link fault at 10 %") {
    for (const char* fault : {"link_drop", "link_duplicate", "link_reorder", "link_corrupt"}) {
        SUBCASE(fault) {
            run_options o;
            o.test = "stream";
            o.sim_args = {"--set", std::string(fault) + "=0.1", "--set", "link_seed=7"};
            o.peer_args = {"--count", "300"};
            check_both_passed(run_pair(o));
        }
    }
    SUBCASE("all at once, with delay, on InfiniBand") {
        run_options o;
        o.port_type = "ib";
        o.test = "stream";
        o.sim_args = {"--set", "link_drop=0.05", "--set", "link_duplicate=0.05", "--set", "link_reorder=0.05",
                      "--set", "link_corrupt=0.05", "--set", "link_delay_us=200"};
        o.peer_args = {"--count", "300"};
        check_both_passed(run_pair(o));
    }
}

// A file for the peers' await_file: written whole, then renamed into place.
void publish(const std::string& path, const std::string& text) {
    std::ofstream(path + ".tmp") << text << '\n';
    std::filesystem::rename(path + ".tmp", path);
}

// Waits (30 s at most) until `happened`; fails with both processes' logs if it does not.
void await_event(const std::string& dir, const std::string& what, const std::function<bool()>& happened) {
    const auto end = std::chrono::steady_clock::now() + 30s;
    while (!happened()) {
        if (std::chrono::steady_clock::now() > end) {
            FAIL("no " << what << " within 30 s\nserver log:\n" << slurp(dir + "/server.log") << "\nclient log:\n"
                                << slurp(dir + "/client.log"));
        }
        std::this_thread::sleep_for(2ms);
    }
}

// Where `event` is in the server's log after `from`, or npos.
std::size_t server_event(const std::string& dir, const char* event, std::size_t from = 0) {
    return slurp(dir + "/server.log").find(event, from);
}

TEST_CASE("a cable pulled: PORT_CHANGE down and up, and RC carries on, exactly once and in order") {
    run_options o;
    o.test = "stream";
    // The client sends 200 messages and says so, then waits until the cable is out to send
    // the rest, and says when its ACK timer has fired on them; the cable goes back in then.
    // The server, with all of them in, stays until its port has come back. A 268 ms ACK
    // timeout and 7 retries: about 2 s for the cable to come back and the port to train.
    o.peer_args = {"--count", "400", "--timeout", "16", "--pause-at", "200", "--hold", "restored"};
    std::size_t down_at = std::string::npos;
    o.during = [&](const std::string& dir) {
        const std::string oob = dir + "/oob", down = dir + "/fabric/down-eth-02c500000001";
        // Once the client has paused, the server's cable is pulled from outside its process
        // (pulled earlier, the first sends would run out of retries before the pause).
        await_event(dir, "oob/paused", [&] { return std::filesystem::exists(oob + "/paused"); });
        publish(down, "");
        await_event(dir, "\"event port_down\" in the server's log",
                    [&] { return (down_at = server_event(dir, "event port_down")) != std::string::npos; });
        publish(oob + "/pulled", "pulled");
        await_event(dir, "oob/lost (the client's ACK timer firing)", [&] { return std::filesystem::exists(oob + "/lost"); });
        std::filesystem::remove(down);
        await_event(dir, "\"event port_up\" after port_down in the server's log",
                    [&] { return server_event(dir, "event port_up", down_at) != std::string::npos; });
        publish(oob + "/restored", "restored");
    };
    const outcome r = run_pair(o);
    check_both_passed(r);
    INFO("server log:\n" << r.server_log);
    REQUIRE(down_at != std::string::npos);
    CHECK(r.server_log.find("event port_up", down_at) != std::string::npos);
}

TEST_CASE("a peer that is gone: retries, then IBV_WC_RETRY_EXC_ERR, never a hang") {
    run_options o;
    o.test = "gone";
    o.peer_args = {"--timeout", "8", "--retry", "3"};
    o.limit = std::chrono::seconds(60);
    check_both_passed(run_pair(o));
}

}  // namespace

// --- the capture, decoded by Wireshark ----------------------------------------------------

namespace {

std::vector<std::string> lines_of(const std::string& cmd) {
    std::vector<std::string> out;
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    while (std::fgets(buf, sizeof buf, p) != nullptr) {
        std::string l(buf);
        while (!l.empty() && l.back() == '\n') l.pop_back();
        out.push_back(l);
    }
    ::pclose(p);
    return out;
}

std::vector<std::string> split(const std::string& l, char sep) {
    std::vector<std::string> f;
    std::string cur;
    for (char c : l) {
        if (c == sep) {
            f.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    f.push_back(cur);
    return f;
}

std::uint64_t num(const std::string& v) { return v.empty() ? ~std::uint64_t{0} : std::stoull(v, nullptr, 0); }

// One decoded packet: the fields below, in this order.
constexpr const char* kFields[] = {"infiniband.bth.opcode",    "infiniband.bth.destqp",  "infiniband.bth.psn",
                                   "infiniband.reth.va",       "infiniband.reth.r_key",  "infiniband.reth.dmalen",
                                   "infiniband.aeth.syndrome", "infiniband.atomiceth.swapdt",
                                   "infiniband.atomiceth.cmpdt"};
struct decoded {
    std::uint64_t opcode, destqp, psn, va, rkey, dmalen, syndrome, swap, cmp;
};

std::vector<decoded> decode_capture(const std::string& pcap) {
    std::string cmd = std::string(cxv::test::tshark_command) + "-r " + pcap + " -Y infiniband -T fields -E separator=/t -E occurrence=f";
    for (const char* f : kFields) cmd += std::string(" -e ") + f;
    std::vector<decoded> out;
    for (const auto& l : lines_of(cmd + " 2>/dev/null")) {
        const auto f = split(l, '\t');
        REQUIRE(f.size() == std::size(kFields));
        out.push_back({num(f[0]), num(f[1]), num(f[2]), num(f[3]), num(f[4]), num(f[5]), num(f[6]), num(f[7]),
                       num(f[8])});
    }
    return out;
}

void check_capture(const std::string& port_type) {
    scratch s;
    run_options o;
    o.port_type = port_type;
    o.client_sim_args = {"--pcap", s.dir + "/client.pcap"};
    check_both_passed(run_pair(o, s));
    const std::string pcap = s.dir + "/client.pcap";
    REQUIRE(std::filesystem::exists(pcap));

    // Nothing Wireshark could not decode or flags as an error.
    const auto bad = lines_of(std::string(cxv::test::tshark_command) + "-r " + pcap + " -Y '_ws.malformed || _ws.expert.severity >= error' 2>/dev/null");
    INFO("tshark's complaints:\n" << [&] { std::string t; for (auto& l : bad) t += l + "\n"; return t; }());
    CHECK(bad.empty());
    const auto all = lines_of(std::string(cxv::test::tshark_command) + "-r " + pcap + " 2>/dev/null");
    const auto pk = decode_capture(pcap);
    if (port_type == "ib") {
        CHECK(pk.size() == all.size());  // every frame an InfiniBand packet
    } else {
        CHECK(all.size() >= pk.size());  // the rest: ARP
        CHECK(lines_of(std::string(cxv::test::tshark_command) + "-r " + pcap + " -Y 'not infiniband and not arp' 2>/dev/null").empty());
    }

    // Every opcode family, each place in a message, ACK and NAK.
    std::set<std::uint64_t> ops;
    for (const auto& p : pk) ops.insert(p.opcode);
    for (const std::uint64_t want : {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0c, 0x0d, 0x0e,
                                     0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x20, 0x22, 0x26, 0x27, 0x29, 0x64}) {
        CHECK_MESSAGE(ops.count(want) == 1, "opcode 0x", std::hex, want, " missing from the capture");
    }
    const auto has_syndrome = [&](auto pred) {
        return std::any_of(pk.begin(), pk.end(), [&](const decoded& p) { return p.syndrome != ~std::uint64_t{0} && pred(p.syndrome); });
    };
    CHECK_MESSAGE(has_syndrome([](std::uint64_t v) { return (v & 0x60) == 0x00; }), "no ACK");
    CHECK_MESSAGE(has_syndrome([](std::uint64_t v) { return (v & 0x60) == 0x20; }), "no RNR NAK");
    CHECK_MESSAGE(has_syndrome([](std::uint64_t v) { return v == 0x62; }), "no remote access error NAK");

    // Each posted WRITE, READ and atomic is on the wire with its address, key, length and
    // operands, to the QP it was posted for.
    std::ifstream log(s.dir + "/oob/posted");
    std::string line;
    unsigned checked = 0;
    std::set<std::uint64_t> peer_qps;
    while (std::getline(log, line)) {
        std::istringstream in(line);
        std::string kind;
        std::uint64_t qpn, va, rkey, len, swap, cmp;
        in >> kind >> std::hex >> qpn >> va >> rkey >> std::dec >> len >> std::hex >> swap >> cmp;
        peer_qps.insert(qpn);
        const bool rdma = kind.find("WRITE") != std::string::npos || kind == "READ";
        const bool atomic = kind == "FETCH_ADD" || kind == "CMP_SWAP";
        if (!rdma && !atomic) continue;
        const bool found = std::any_of(pk.begin(), pk.end(), [&](const decoded& p) {
            if (p.destqp != qpn || p.va != va || p.rkey != rkey) return false;
            if (atomic) return p.swap == swap && (kind != "CMP_SWAP" || p.cmp == cmp);
            return p.dmalen == len;
        });
        CHECK_MESSAGE(found, "not on the wire as posted: ", line);
        ++checked;
    }
    CHECK(checked == 8);  // 2 WRITEs, 2 READs, 2 atomics, the UC WRITE, the bad WRITE
    // The PSNs of the main RC connection: one per request packet or READ response
    // packet, no gap (an RNR NAK makes the requester go back and send some again).
    std::set<std::uint64_t> psns;
    std::uint64_t rc_qp = ~std::uint64_t{0};
    for (const auto& p : pk) {
        const bool request = p.opcode <= 0x0c || p.opcode == 0x13 || p.opcode == 0x14;
        const bool response = (p.opcode >= 0x0d && p.opcode <= 0x10) || p.opcode == 0x12;
        if (request && peer_qps.count(p.destqp) && rc_qp == ~std::uint64_t{0}) rc_qp = p.destqp;
        if ((request && p.destqp == rc_qp) || response) psns.insert(p.psn);
    }
    REQUIRE(!psns.empty());
    CHECK(*psns.rbegin() - *psns.begin() + 1 == psns.size());
}

TEST_CASE("a RoCEv2 capture of every operation decodes in tshark with the fields that were posted" *
          cxv::test::skip_unless(cxv::test::on_path("tshark"), "tshark is not installed (tools/setup installs it)")) {
    check_capture("eth");
}

TEST_CASE("an InfiniBand capture of every operation decodes in tshark with the fields that were posted" *
          cxv::test::skip_unless(cxv::test::on_path("tshark"), "tshark is not installed (tools/setup installs it)")) {
    check_capture("ib");
}

}  // namespace
