// cxvd between tenants that do not trust each other (issue 33): STATUS shows a client its
// own uid's clients and counts only, the operator (root, the daemon's uid, --admin-gid)
// everyone; a global connection cap besides the per-uid one; a per-uid quota on the number
// of mappings; refused requests logged, at most a few lines a second per client. Clients
// of other uids are forked children that setuid(2) (root only: those cases are skipped,
// and say so, otherwise).
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <regex>
#include <sstream>

#include <doctest/doctest.h>

#include "tests/daemon/rig.h"
#include "tests/daemon/tenants.h"
#include "tests/skip.h"

using namespace cxv::test;
using namespace std::chrono_literals;

namespace {

bool lists(const d::status_reply& s, pid_t pid) { return find_client(s, pid) != nullptr; }

}  // namespace

TEST_CASE("STATUS shows a client its own uid's clients and counts only; root sees every client" *
          cxv::test::skip_unless(root(), "tenants as other uids: not root, cannot take another uid")) {
    // Shared functions: the uids here use one function together (domains_test has the
    // default, a function per trust domain).
    daemon_rig rig({"--allow-uid", "65533", "--allow-uid", "65534", "--share-functions"});
    open_to_all(rig);
    test_client op(rig.sock);  // root: the operator
    (void)op.alloc_pd();       // a command run
    CHECK(op.unmap(0x1000) == EPERM);  // a request refused
    tenant a(rig.sock, 65533, 1);

    // Another uid: itself only, and its own uid's counts (nothing run or refused yet,
    // one connection served: this one).
    const auto other = status_as(rig.sock, 65534);
    CHECK(other.clients_total == 1);
    REQUIRE(other.clients.size() == 1);
    CHECK(other.clients[0].uid == 65534);
    CHECK(!lists(other, a.pid));
    CHECK(!lists(other, ::getpid()));
    CHECK(other.clients_served == 1);
    CHECK(other.commands == 0);
    CHECK(other.refused == 0);
    CHECK(other.devices.size() == 1);  // the functions are everyone's

    // The same uid as `a` on a second connection: both of its connections, a's books.
    const auto same = status_as(rig.sock, 65533);
    CHECK(same.clients_total == 2);
    REQUIRE(lists(same, a.pid));
    CHECK(find_client(same, a.pid)->maps == 1);
    CHECK(!lists(same, ::getpid()));
    for (const auto& c : same.clients) CHECK(c.uid == 65533);
    CHECK(same.clients_served == 2);

    // The operator: every client, every count.
    // (The two children that asked are gone once the daemon has seen their sockets close.)
    const auto all = wait_status(op, [](const d::status_reply& x) { return x.clients_total == 2; }, 2000ms);
    CHECK(lists(all, a.pid));
    CHECK(lists(all, ::getpid()));
    CHECK(all.clients_total == 2);
    CHECK(all.clients_served >= 4);
    CHECK(all.commands >= 1);
    CHECK(all.refused >= 1);
}

TEST_CASE("--admin-gid: a member of an admin group (by number or name) sees every client, allow-listed or not" *
          cxv::test::skip_unless(root() && ::getgrgid(65534) != nullptr,
                                 "the admin group: not root, or no group 65534 (nogroup) to name")) {
    const std::string name = ::getgrgid(65534)->gr_name;
    daemon_rig rig({"--allow-uid", "65533", "--admin-gid", "65530", "--admin-gid", name});
    open_to_all(rig);
    tenant a(rig.sock, 65533, 1);
    test_client op(rig.sock);
    for (const std::vector<gid_t>& groups : {std::vector<gid_t>{65530}, std::vector<gid_t>{65531, 65534}}) {
        const auto s = status_as(rig.sock, 65532, groups);  // not on the allow-list, an admin by its group
        CHECK(lists(s, a.pid));
        CHECK(lists(s, ::getpid()));
        CHECK(s.clients_total == 3);
    }
    // Neither an admin nor allowed: refused at HELLO.
    const auto o = as_uid(rig.sock, 65532, {65531}, [](d::client& c) { return c.call(d::msg_type::status, {}); });
    CHECK(o.at_hello);
    CHECK(o.err == EACCES);
    // An allowed uid outside the group: its own only.
    const auto mine = status_as(rig.sock, 65533);
    CHECK(mine.clients_total == 2);
    CHECK(!lists(mine, ::getpid()));
}

TEST_CASE("--max-clients: a connection over the cap is answered EAGAIN and closed; the operator has 4 more") {
    // This test's uid is the daemon's (root, or the same user): an operator.
    daemon_rig rig({"--max-clients", "2"});
    std::vector<std::unique_ptr<test_client>> in;
    for (int i = 0; i < 2 + 4; ++i) in.push_back(std::make_unique<test_client>(rig.sock));
    auto over = test_client::connect(rig.sock);
    auto h = over.call(d::msg_type::hello, d::body(d::hello_req{}));
    REQUIRE_MESSAGE(h, h.error().message);
    CHECK(h->err == EAGAIN);
    CHECK_MESSAGE(h->text.find("--max-clients") != std::string::npos, h->text);
    // Closed after its one reply.
    auto again = over.call(d::msg_type::hello, d::body(d::hello_req{}), {}, 2000ms);
    CHECK(!again);
    CHECK(rig.log().find("cxvd serves 6 connections") != std::string::npos);
    // A slot that frees is taken.
    in.pop_back();
    const auto s = wait_status(*in[0], [](const d::status_reply& x) { return x.clients_total == 5; }, 2000ms);
    CHECK(s.clients_total == 5);
    test_client next(rig.sock);
    CHECK(next.status().clients_total == 6);
}

TEST_CASE("--max-clients: another uid is refused at the cap while the operator still gets in" *
          cxv::test::skip_unless(root(), "a non-operator client: not root, cannot take another uid")) {
    daemon_rig rig({"--max-clients", "2", "--allow-uid", "65534"});
    open_to_all(rig);
    test_client a(rig.sock), b(rig.sock);
    const auto o = as_uid(rig.sock, 65534, {}, [](d::client& c) { return c.call(d::msg_type::status, {}); });
    CHECK(o.at_hello);
    CHECK(o.err == EAGAIN);
    CHECK(o.text.find("--max-clients") != std::string::npos);
    test_client op(rig.sock);  // root, over the cap: the operator's reserve
    CHECK(op.status().clients_total == 3);
}

TEST_CASE("--quota-mappings: one uid mapping a page over and over hits the cap (EDQUOT); another uid still maps" *
          cxv::test::skip_unless(root(), "a second uid: not root, cannot take another uid")) {
    daemon_rig rig({"--quota-mappings", "32", "--allow-uid", "65534", "--share-functions"});
    open_to_all(rig);
    test_client a(rig.sock), a2(rig.sock);
    shared_memory page(4096);
    std::vector<std::uint64_t> iovas;
    int err = 0;
    for (int i = 0; i < 40 && err == 0; ++i) {
        const auto iova = (i % 2 ? a2 : a).map(page, &err);  // both connections of the uid
        if (err == 0) iovas.push_back(iova);
    }
    CHECK(iovas.size() == 32);
    CHECK(err == EDQUOT);
    auto refused = a.call(d::msg_type::map_memory, d::body(d::map_memory_req{0, true, 0, 4096}),
                          std::vector<int>{page.fd});
    CHECK(refused.err == EDQUOT);
    CHECK_MESSAGE(refused.text.find("--quota-mappings") != std::string::npos, refused.text);
    CHECK(refused.text.find("32 mappings") != std::string::npos);
    // Another uid's budget is its own.
    const auto o = as_uid(rig.sock, 65534, {}, [](d::client& c) {
        const int fd = sealed_memfd(4096);
        return map_page(c, fd);
    });
    CHECK(o.stage == 0);
    CHECK_MESSAGE(o.err == 0, o.text);
    // One unmapped: room for one more.
    CHECK(a.unmap(iovas[0]) == 0);
    CHECK(a.map(page, &err) != 0);
    CHECK(err == 0);
    CHECK(a.map(page, &err) == 0);
    CHECK(err == EDQUOT);
}

TEST_CASE("a client looping on refused requests: at most 10 lines a second in the log, then how many were not logged") {
    daemon_rig rig;
    test_client flood(rig.sock), quiet(rig.sock);
    constexpr int kRequests = 3000;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRequests; ++i) REQUIRE(flood.unmap(0x1000 + 4096ull * i) == EPERM);
    // Another client's refusal still gets its line: the budget is per client.
    CHECK(quiet.destroy_cq(0x77) == EPERM);
    const auto took = std::chrono::steady_clock::now() - start;
    // Every refusal is either logged or counted in a "not logged" line; the count comes
    // once its second is over, even with the client idle.
    const std::regex line("<4>cxvd: pid " + std::to_string(::getpid()) +
                          " uid \\d+ \\([^)]*\\): refused \\(EPERM\\): UNMAP_MEMORY: ");
    const std::regex summary("pid " + std::to_string(::getpid()) +
                             " uid \\d+ \\([^)]*\\): (\\d+) more refused requests not logged");
    std::size_t logged = 0, suppressed = 0, summaries = 0;
    std::string log;
    for (int i = 0; i < 300; ++i) {
        log = rig.log();
        logged = suppressed = summaries = 0;
        std::istringstream in(log);
        for (std::string l; std::getline(in, l);) {
            std::smatch m;
            if (std::regex_search(l, line)) ++logged;
            if (std::regex_search(l, m, summary)) {
                ++summaries;
                suppressed += std::stoul(m[1]);
            }
        }
        if (logged + suppressed == kRequests) break;
        std::this_thread::sleep_for(20ms);
    }
    INFO(log.substr(0, 4000));
    CHECK(logged + suppressed == kRequests);
    CHECK(suppressed > 0);
    // 10 a second: within the seconds the flood took (and the one it started in).
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(took).count() + 2;
    CHECK(logged <= 10 * static_cast<std::size_t>(seconds));
    CHECK(summaries <= static_cast<std::size_t>(seconds));
    CHECK(flood.status().clients_total == 2);  // refused, logged or not, and served on
    CHECK(std::regex_search(log, std::regex("<4>cxvd: pid \\d+ uid \\d+ \\([^)]*\\): COMMAND refused \\(EPERM\\): "
                                            "DESTROY_CQ")));
}
