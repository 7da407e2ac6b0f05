// `cxvd --metrics`: Prometheus text exposition (0.0.4) over HTTP/1.1 GET /metrics, on a
// UNIX socket or 127.0.0.1:PORT. Fetched by a small HTTP client here (and by curl when
// the host has it); the text is checked line by line against the format (HELP and TYPE
// before a family's samples, names and label sets well formed, histogram buckets
// cumulative and ending in +Inf, values numbers), and `promtool check metrics` runs on it
// when promtool is installed. The counters move with traffic: two QPs of a client process
// exchange SENDs and the port's packet and byte counters, the client's objects and
// requests and the request histogram follow. A scrape that never finishes its request
// does not hold up the daemon's clients.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <doctest/doctest.h>

#include "daemon/metrics.h"
#include "tests/daemon/rig.h"
#include "tests/skip.h"

using namespace cxv::test;
using namespace std::chrono_literals;

namespace {

// The body of a 200 response, after checking its head.
std::string body_of(const std::string& resp) {
    REQUIRE_MESSAGE(resp.rfind("HTTP/1.1 200 OK\r\n", 0) == 0, resp.substr(0, 200));
    const auto head_end = resp.find("\r\n\r\n");
    REQUIRE(head_end != std::string::npos);
    const std::string head = resp.substr(0, head_end);
    CHECK(head.find("Content-Type: text/plain; version=0.0.4; charset=utf-8") != std::string::npos);
    CHECK(head.find("Connection: close") != std::string::npos);
    const std::string body = resp.substr(head_end + 4);
    CHECK(head.find("Content-Length: " + std::to_string(body.size())) != std::string::npos);
    return body;
}

// The text exposition format, version 0.0.4, checked line by line; the samples by
// "name{labels}".
std::map<std::string, double> parse(const std::string& text) {
    static const std::regex help(R"re(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+)re");
    static const std::regex type(R"re(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))re");
    static const std::regex smp(
        R"re(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*)?\})? (\S+))re");
    std::map<std::string, double> out;
    std::map<std::string, std::string> types;
    std::set<std::string> helped, done;
    std::string current;
    std::istringstream in(text);
    std::string line;
    REQUIRE(!text.empty());
    CHECK(text.back() == '\n');
    while (std::getline(in, line)) {
        std::smatch m;
        if (std::regex_match(line, m, help)) {
            CHECK_MESSAGE(!helped.contains(m[1]), "HELP twice: ", line);
            helped.insert(m[1]);
            continue;
        }
        if (std::regex_match(line, m, type)) {
            CHECK_MESSAGE(!types.contains(m[1]), "TYPE twice: ", line);
            CHECK_MESSAGE(helped.contains(m[1]), "TYPE before HELP: ", line);
            if (!current.empty()) done.insert(current);
            current = m[1];
            types[m[1]] = m[2];
            continue;
        }
        REQUIRE_MESSAGE(std::regex_match(line, m, smp), "not a sample line: ", line);
        std::string name = m[1];
        std::string fam = name;
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
            const std::string s = suffix;
            if (fam.size() > s.size() && fam.compare(fam.size() - s.size(), s.size(), s) == 0 &&
                types.contains(fam.substr(0, fam.size() - s.size())) && types[fam.substr(0, fam.size() - s.size())] == "histogram") {
                fam = fam.substr(0, fam.size() - s.size());
            }
        }
        CHECK_MESSAGE(fam == current, "a sample outside its family's block: ", line);
        CHECK_MESSAGE(!done.contains(fam), "a family's samples split: ", line);
        const std::string v = m[7];
        char* end = nullptr;
        const double x = v == "+Inf" ? INFINITY : std::strtod(v.c_str(), &end);
        CHECK_MESSAGE((v == "+Inf" || (end != nullptr && *end == '\0')), "not a number: ", line);
        const std::string key = name + (m[2].matched ? std::string(m[2]) : std::string());
        CHECK_MESSAGE(!out.contains(key), "a sample twice: ", line);
        out[key] = x;
    }
    return out;
}

// The sum of the samples of `name` whose labels contain every one of `with`.
double total(const std::map<std::string, double>& s, const std::string& name, std::vector<std::string> with = {}) {
    double t = 0;
    for (const auto& [k, v] : s) {
        if (k.rfind(name, 0) != 0 || (k.size() > name.size() && k[name.size()] != '{')) continue;
        bool all = true;
        for (const auto& w : with) all = all && k.find(w) != std::string::npos;
        if (all) t += v;
    }
    return t;
}

// Histogram buckets cumulative and ending with +Inf equal to _count, per op.
void check_histograms(const std::map<std::string, double>& s) {
    std::map<std::string, std::vector<std::pair<double, double>>> by_op;
    static const std::regex b(R"re(cxvd_request_duration_seconds_bucket\{op="([^"]*)",le="([^"]*)"\})re");
    for (const auto& [k, v] : s) {
        std::smatch m;
        if (!std::regex_match(k, m, b)) continue;
        const double le = m[2] == "+Inf" ? INFINITY : std::stod(m[2]);
        by_op[m[1]].emplace_back(le, v);
    }
    CHECK_FALSE(by_op.empty());
    for (auto& [op, bs] : by_op) {
        std::sort(bs.begin(), bs.end());
        for (std::size_t i = 1; i < bs.size(); ++i) CHECK_MESSAGE(bs[i].second >= bs[i - 1].second, op);
        REQUIRE(std::isinf(bs.back().first));
        CHECK(bs.back().second == s.at("cxvd_request_duration_seconds_count{op=\"" + op + "\"}"));
    }
}

}  // namespace

// The exposition is UTF-8 (Prometheus refuses a page with one bad byte) and a comm is
// any bytes (prctl(2) PR_SET_NAME).
static bool ascii(const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

namespace {

// The port cxvd --metrics 127.0.0.1:0 bound, from its log (no port picked here and bound
// there later, which another process could take in between).
unsigned logged_metrics_port(daemon_rig& rig) {
    const std::string mark = "metrics on http://127.0.0.1:";
    std::string log = rig.log();
    for (int i = 0; i < 500 && log.find("/metrics", log.find(mark)) == std::string::npos; ++i) {
        std::this_thread::sleep_for(20ms);
        log = rig.log();
    }
    const auto at = log.find(mark);
    REQUIRE_MESSAGE(at != std::string::npos, "cxvd logged no metrics port: ", log);
    const unsigned port = static_cast<unsigned>(std::stoul(log.substr(at + mark.size())));
    REQUIRE(port != 0);
    return port;
}

}  // namespace

TEST_CASE("a client's comm goes out as printable ASCII, whatever its bytes") {
    cxv::daemon::metrics m;
    m.client_seen(1, 42, 1000, "ab\xff\xc3(\"\n", {{"0000:c5:00.0", cxv::daemon::client_counts{.pds = 1}}});
    m.request(1, "HELLO", false, std::chrono::microseconds(3));
    const std::string text = m.render({});
    CHECK_MESSAGE(ascii(text), text);
    CHECK_MESSAGE(text.find(R"(comm="ab\\xff\\xc3(\"\\x0a")") != std::string::npos, text);
}

TEST_CASE("GET /metrics on a UNIX socket: the format holds, and objects, requests, latency and port counters move with traffic") {
    scratch where;
    const std::string maddr = where.dir + "/m.sock";
    daemon_rig rig({"--metrics", maddr, "--metrics-read-ms", "3000"});
    for (int i = 0; i < 200 && ::access(maddr.c_str(), F_OK) != 0; ++i) std::this_thread::sleep_for(10ms);
    struct stat st{};
    REQUIRE(::stat(maddr.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0660);
    const auto before = parse(body_of(http_get(maddr)));
    CHECK(before.at("cxvd_clients") == 0);  // the rig's probe connections sent nothing
    CHECK(before.at("cxvd_port_counters_ok{function=\"0000:c5:00.0\",port=\"1\"}") == 1);
    // The firmware's pages: the model asks for 16 at boot and 64 at init.
    CHECK(before.at("cxvd_firmware_pages{function=\"0000:c5:00.0\"}") == 16 + 64);
    const double rx0 = total(before, "cxvd_port_packets_total", {"direction=\"rx\""});
    const double tx0 = total(before, "cxvd_port_packets_total", {"direction=\"tx\""});
    const double bytes0 = total(before, "cxvd_port_bytes_total");

    // A client with a PD, CQ, key and two QPs connected to each other, moving SENDs; its
    // comm is not UTF-8.
    char old_comm[17] = {};
    REQUIRE(::prctl(PR_GET_NAME, old_comm) == 0);
    REQUIRE(::prctl(PR_SET_NAME, "mt\xff\x80x") == 0);
    test_client c(rig.sock);
    ::prctl(PR_SET_NAME, old_comm);
    shared_memory m(64 * 1024);
    const auto iova = c.map(m);
    const auto uar = c.alloc_uar();
    const auto pd = c.alloc_pd();
    const auto cqn = c.cq(iova, iova + 4096, uar);
    CHECK(c.create_mkey(pd, iova + 3 * 4096, 4).err == 0);
    CHECK(c.query_cq(cqn) == 0);
    CHECK(c.destroy_cq(0xabcdef) == EPERM);  // refused: counted as such
    const auto mid = parse(body_of(http_get(maddr)));
    CHECK(mid.at("cxvd_clients") == 1);
    const std::string me = "pid=\"" + std::to_string(::getpid()) + "\"";
    {
        const std::string text = body_of(http_get(maddr));
        CHECK(ascii(text));
        CHECK_MESSAGE(text.find(R"(comm="mt\\xff\\x80x")") != std::string::npos, text);
    }
    CHECK(total(mid, "cxvd_client_objects", {me, "kind=\"pd\""}) == 1);
    CHECK(total(mid, "cxvd_client_objects", {me, "kind=\"cq\""}) == 1);
    CHECK(total(mid, "cxvd_client_objects", {me, "kind=\"mkey\""}) == 1);
    CHECK(total(mid, "cxvd_client_objects", {me, "kind=\"uar\""}) == 1);
    CHECK(total(mid, "cxvd_client_objects", {me, "kind=\"mapping\""}) == 1);
    CHECK(total(mid, "cxvd_client_pinned_bytes", {me}) == 64 * 1024);
    CHECK(total(mid, "cxvd_client_requests_total", {me, "result=\"refused\""}) == 1);
    CHECK(total(mid, "cxvd_client_requests_total", {me, "result=\"run\""}) >= 7);
    CHECK(mid.at("cxvd_request_duration_seconds_count{op=\"CREATE_MKEY\"}") == 1);
    CHECK(mid.at("cxvd_request_duration_seconds_count{op=\"HELLO\"}") == 1);
    CHECK(mid.at("cxvd_request_duration_seconds_count{op=\"DESTROY_CQ\"}") == 1);
    check_histograms(mid);
    // A command with an opcode the PRM names nowhere: refused, and counted by its number.
    {
        std::vector<std::byte> in(16);
        in[0] = std::byte{0x0e};  // opcode 0x0eee, big-endian in the first 16 bits
        in[1] = std::byte{0xee};
        CHECK(c.command(in, 16).err != 0);
    }

    // Traffic: a client process (loop_peer) moves 64 rounds of SENDs between two QPs of
    // its own through the function, every payload checked.
    ::setenv("CXV_DAEMON", rig.sock.c_str(), 1);
    const auto ran = run({env_path("CXVD_LOOP_PEER"), "--rounds", "64"}, rig.dir.dir + "/loop.log", 60s);
    ::unsetenv("CXV_DAEMON");
    REQUIRE_MESSAGE(ran.status == 0, ran.output);
    const auto after = parse(body_of(http_get(maddr)));
    CHECK(total(after, "cxvd_port_packets_total", {"direction=\"rx\""}) > rx0);
    CHECK(total(after, "cxvd_port_packets_total", {"direction=\"tx\""}) > tx0);
    CHECK(total(after, "cxvd_port_bytes_total") > bytes0 + 64 * 512);
    CHECK(after.at("cxvd_clients_gone_total") >= 1);  // the looping client came and went
    CHECK(after.at("cxvd_request_duration_seconds_count{op=\"0x0eee\"}") == 1);
    check_histograms(after);

    // Wrong method, path, a malformed request: refused, and serving goes on.
    CHECK(http(maddr, "POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0) == 0);
    CHECK(http_get(maddr, "/").rfind("HTTP/1.1 404", 0) == 0);
    CHECK(http(maddr, "nonsense\r\n\r\n").rfind("HTTP/1.1 400", 0) == 0);
    CHECK(http(maddr, std::string(9000, 'A')).rfind("HTTP/1.1 431", 0) == 0);

    // Scrapers that connect and say nothing hold neither the daemon (its clients are
    // served meanwhile) nor other scrapes (served beside them), and are dropped after
    // their read deadline (--metrics-read-ms, 3 s here). One connection at a time would
    // answer the GET only after the four idle ones had each run out: it is answered while
    // all four are still open, and they are closed after it.
    int idle[4];
    for (int& fd : idle) {
        fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::memcpy(a.sun_path, maddr.c_str(), maddr.size() + 1);
        REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    }
    for (int i = 0; i < 20; ++i) CHECK(c.status().clients_total == 1);
    CHECK(http_get(maddr).rfind("HTTP/1.1 200", 0) == 0);
    for (const int fd : idle) {
        pollfd p{fd, POLLIN, 0};
        CHECK(::poll(&p, 1, 0) == 0);  // still open
    }
    for (const int fd : idle) {
        pollfd p{fd, POLLIN, 0};
        CHECK(::poll(&p, 1, 30000) == 1);  // then closed by the daemon: end of file
        char byte;
        CHECK(::read(fd, &byte, 1) == 0);
        ::close(fd);
    }

    // promtool (Debian: the prometheus package) agrees.
    REQUIRE_MESSAGE(on_path("promtool"), "promtool is not installed (tools/setup installs Debian's prometheus)");
    {
        const std::string file = rig.dir.dir + "/metrics.txt";
        {
            std::ofstream f(file);
            f << body_of(http_get(maddr));
        }
        CHECK(::system(("promtool check metrics < " + file + " > " + rig.dir.dir + "/promtool.log 2>&1").c_str()) == 0);
        MESSAGE("promtool: ", slurp(rig.dir.dir + "/promtool.log"));
    }
}

TEST_CASE("--metrics on 127.0.0.1:PORT answers curl; any other address is refused at start") {
    daemon_rig rig({"--metrics", "127.0.0.1:0"});  // port 0: cxvd binds a free one
    const unsigned port = logged_metrics_port(rig);
    const std::string addr = "127.0.0.1:" + std::to_string(port);
    const auto body = body_of(http_get(addr));
    const auto s = parse(body);
    CHECK(s.contains("cxvd_clients"));
    REQUIRE_MESSAGE(on_path("curl"), "curl is not installed (tools/setup installs it)");
    {
        const std::string out = rig.dir.dir + "/curl.txt";
        REQUIRE(::system(("curl -sf http://" + addr + "/metrics -o " + out).c_str()) == 0);
        CHECK(slurp(out).find("# TYPE cxvd_request_duration_seconds histogram") != std::string::npos);
    }
    for (const char* bad : {"0.0.0.0:9100", "192.0.2.1:9100", "localhost:9100", "127.0.0.1:x", "relative.sock"}) {
        scratch dir;
        const auto r = run({env_path("CXV_SIM"), "run", "--port-type", "eth", "--link-up-ms", "20", "--",
                            env_path("CXVD"), "--socket", dir.dir + "/s.sock", "--metrics", bad},
                           dir.dir + "/log", std::chrono::seconds(60));
        CHECK_MESSAGE(r.status != 0, bad);
        CHECK_MESSAGE(r.output.find("127.0.0.1:PORT") != std::string::npos, r.output);
    }
}

TEST_CASE("a bad --socket or --metrics is refused before any function is brought up") {
    // No model and a function that does not exist: had cxvd tried a bring-up first, the
    // error would be the function's.
    scratch dir;
    const int busy = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(busy, reinterpret_cast<sockaddr*>(&in), sizeof in) == 0);
    REQUIRE(::listen(busy, 1) == 0);
    socklen_t len = sizeof in;
    REQUIRE(::getsockname(busy, reinterpret_cast<sockaddr*>(&in), &len) == 0);
    const std::string busy_addr = "127.0.0.1:" + std::to_string(ntohs(in.sin_port));
    const std::string good = dir.dir + "/s.sock";
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--socket", "/nonexistent-cxv-dir/s.sock"}, "--socket /nonexistent-cxv-dir/s.sock: directory"},
        {{"--socket", good, "--metrics", "0.0.0.0:9100"}, "127.0.0.1:PORT"},
        {{"--socket", good, "--metrics", "/nonexistent-cxv-dir/m.sock"}, "--metrics /nonexistent-cxv-dir/m.sock"},
        {{"--socket", good, "--metrics", busy_addr}, "--metrics " + busy_addr + ": bind: Address already in use"},
        // Good options: now the function's own error.
        {{"--socket", good}, "0000:ee:1f.7"},
    };
    for (const auto& [args, said] : cases) {
        std::vector<std::string> argv = {env_path("CXVD"), "--device", "0000:ee:1f.7"};
        argv.insert(argv.end(), args.begin(), args.end());
        const auto r = run(argv, dir.dir + "/log", std::chrono::seconds(30));
        INFO(args.back(), ": ", r.output);
        CHECK(r.status == 1);
        CHECK(r.output.find(said) != std::string::npos);
        if (said != "0000:ee:1f.7") CHECK(r.output.find("0000:ee:1f.7") == std::string::npos);
    }
    ::close(busy);
}

TEST_CASE("--metrics PATH: a live socket there is another process's, left alone; a stale one is replaced") {
    scratch dir;
    const std::string path = dir.dir + "/m.sock";
    const int live = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::bind(live, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(live, 4) == 0);
    const auto r = run({env_path("CXV_SIM"), "run", "--port-type", "eth", "--link-up-ms", "20", "--", env_path("CXVD"),
                        "--socket", dir.dir + "/s.sock", "--metrics", path},
                       dir.dir + "/log", std::chrono::seconds(60));
    CHECK(r.status != 0);
    CHECK_MESSAGE(r.output.find("another process serves it") != std::string::npos, r.output);
    // Still the test's: a connection reaches its listener.
    const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(::connect(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    ::close(probe);
    ::close(live);  // the file stays, stale now: cxvd takes the path over
    daemon_rig rig({"--metrics", path});
    for (int i = 0;; ++i) {  // the stale file is there from the start: wait for a listener
        const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        ::close(fd);
        if (up) break;
        REQUIRE_MESSAGE(i < 500, "no metrics listener within 10 s: ", rig.log());
        std::this_thread::sleep_for(20ms);
    }
    CHECK(body_of(http_get(path)).find("# TYPE cxvd_clients gauge") != std::string::npos);
}

TEST_CASE("--metrics 127.0.0.1:PORT serves only requests whose Host names it (DNS rebinding); the UNIX socket any") {
    scratch mdir;
    const std::string path = mdir.dir + "/m.sock";
    daemon_rig rig({"--metrics", "127.0.0.1:0"});
    const std::string port = std::to_string(logged_metrics_port(rig));
    const std::string addr = "127.0.0.1:" + port;
    auto with_host = [&](const std::string& host_lines) {
        return http(addr, "GET /metrics HTTP/1.1\r\n" + host_lines + "Accept: */*\r\n\r\n");
    };
    // The names of this endpoint, the port its own or left out; the field name in any case.
    for (const std::string& host : {"127.0.0.1:" + port, "localhost:" + port, "LocalHost:" + port, "[::1]:" + port,
                                    std::string("localhost"), std::string("127.0.0.1")}) {
        CHECK_MESSAGE(with_host("Host: " + host + "\r\n").rfind("HTTP/1.1 200 OK\r\n", 0) == 0, host);
    }
    CHECK(with_host("host:\t127.0.0.1:" + port + " \r\n").rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    // A name that resolved here through someone's DNS (a page in a browser rebinding
    // its own name to 127.0.0.1), another loopback address, another port: 421.
    for (const std::string& host : {"attacker.example:" + port, std::string("attacker.example"), "127.0.0.2:" + port,
                                    "localhost.attacker.example:" + port, "127.0.0.1:" + port + "0",
                                    std::string("localhost:1"), "0x7f000001:" + port, "127.1:" + port}) {
        const auto r = with_host("Host: " + host + "\r\n");
        CHECK_MESSAGE(r.rfind("HTTP/1.1 421 Misdirected Request\r\n", 0) == 0, host, ": ", r.substr(0, 100));
        CHECK(r.find("cxvd_clients") == std::string::npos);
    }
    // None, two, or empty: 400 (RFC 9112, section 3.2).
    for (const std::string& lines :
         {std::string(), std::string("Host: localhost\r\nHost: localhost\r\n"), std::string("Host:\r\n")}) {
        const auto r = with_host(lines);
        CHECK_MESSAGE(r.rfind("HTTP/1.1 400 Bad Request\r\n", 0) == 0, lines, ": ", r.substr(0, 100));
    }
    // curl names the endpoint as it was asked to.
    REQUIRE_MESSAGE(on_path("curl"), "curl is not installed (tools/setup installs it)");
    const std::string out = rig.dir.dir + "/curl.txt";
    CHECK(::system(("curl -sf http://localhost:" + port + "/metrics -o " + out).c_str()) == 0);
    const std::string rebound = "curl -sf -H 'Host: attacker.example:" + port + "' http://" + addr + "/metrics";
    CHECK(::system((rebound + " -o " + out).c_str()) != 0);

    // On a UNIX socket no browser can reach it: any Host, or none.
    daemon_rig urig({"--metrics", path});
    for (int i = 0;; ++i) {
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
        const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        ::close(fd);
        if (up) break;
        REQUIRE_MESSAGE(i < 500, "no metrics listener within 10 s: ", urig.log());
        std::this_thread::sleep_for(20ms);
    }
    CHECK(http(path, "GET /metrics HTTP/1.1\r\nHost: attacker.example\r\n\r\n").rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    CHECK(http(path, "GET /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
}
