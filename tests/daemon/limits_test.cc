// cxvd under the model: what one uid may hold over all its connections, what the
// daemon does when it runs out of file descriptors, supplementary groups, memory the
// device writes, QPs with two CQs, and STATUS with more clients than one message holds.
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "tests/daemon/rig.h"
#include "tests/skip.h"

using namespace cxv::test;
using namespace std::chrono_literals;

namespace {

// CPU time (user + system, clock ticks) of a process, /proc/PID/stat fields 14 and 15.
long cpu_ticks(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::istringstream rest(all.substr(all.rfind(')') + 2));
    std::string field;
    long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) utime = std::stol(field);
        if (i == 15) stime = std::stol(field);
    }
    return utime + stime;
}

rlim_t nofile_hard_limit() {
    rlimit lim{};
    return ::getrlimit(RLIMIT_NOFILE, &lim) == 0 ? lim.rlim_max : 0;
}

}  // namespace

TEST_CASE("quotas are per uid: a second connection does not get a second quota; connections per uid are capped") {
    daemon_rig rig({"--quota-pds", "1", "--quota-uars", "1", "--quota-pinned-bytes", "8192",
                    "--max-clients-per-uid", "3"});
    test_client a(rig.sock), b(rig.sock);
    shared_memory m(8192), n(4096);
    CHECK(a.alloc_pd() != 0xffffffffu);
    auto pd = b.command(cxv::driver::command<ifc::alloc_pd_in>(cmd_opcode::ALLOC_PD), ifc::alloc_pd_out::size_bytes);
    CHECK(pd.err == EDQUOT);
    CHECK(pd.text.find("every connection of the uid") != std::string::npos);
    (void)a.alloc_uar();
    CHECK(b.call(d::msg_type::alloc_uar, d::body(d::alloc_uar_req{0})).err == EDQUOT);
    int err = 0;
    CHECK(a.map(m, &err) != 0);
    CHECK(b.map(n, &err) == 0);
    CHECK(err == EDQUOT);
    // A third connection of this uid is served, a fourth refused with a reply saying why.
    test_client c(rig.sock);
    REQUIRE(wait_status(c, [](const d::status_reply& s) { return s.clients_total == 3; }, 2000ms).clients_total == 3);
    auto fourth = test_client::connect(rig.sock);
    auto h = fourth.call(d::msg_type::hello, d::body(d::hello_req{}));
    REQUIRE_MESSAGE(h, h.error().message);
    CHECK(h->err == EUSERS);
    CHECK(h->text.find("--max-clients-per-uid") != std::string::npos);
    // When a connection goes, its share comes back to the uid.
    { test_client gone(std::move(a)); }
    const auto s = wait_status(c, [](const d::status_reply& x) { return x.clients_total == 2; }, 2000ms);
    CHECK(s.clients_total == 2);
    CHECK(b.alloc_pd() != 0xffffffffu);
    CHECK(b.map(n, &err) != 0);
}

namespace {

// A connection holding a PD, a UAR and the page the PD's `keys` memory keys map: its
// teardown destroys the keys before the PD, the UAR after them, the page last.
std::unique_ptr<test_client> departing(const std::string& sock, const shared_memory& page, int keys) {
    auto a = std::make_unique<test_client>(sock);
    const auto iova = a->map(page);
    (void)a->alloc_uar();
    const auto pd = a->alloc_pd();
    for (int i = 0; i < keys; ++i) {
        auto k = a->create_mkey(pd, iova, 1);
        REQUIRE_MESSAGE(k.err == 0, k.text);
    }
    return a;
}

bool listed_with_keys(const d::status_reply& s, std::uint32_t keys) {
    return std::any_of(s.clients.begin(), s.clients.end(), [&](const d::client_info& c) { return c.mkeys == keys; });
}

}  // namespace

TEST_CASE("over a quota only for what a departed connection still holds: the request waits for its teardown, then is "
          "served, or refused when it still does not fit") {
    daemon_rig rig({"--quota-pds", "1", "--quota-uars", "1", "--quota-pinned-bytes", "16384"});
    constexpr int kKeys = 1000;  // destroyed one by one before the PD: a teardown of a while
    shared_memory page(4096), whole(16384), over(20480);
    test_client b(rig.sock);
    auto a = departing(rig.sock, page, kKeys);
    // While it is connected, what it holds is its own: refused at once.
    const auto alloc_pd = cxv::driver::command<ifc::alloc_pd_in>(cmd_opcode::ALLOC_PD);
    CHECK(b.command(alloc_pd, ifc::alloc_pd_out::size_bytes).err == EDQUOT);
    CHECK(b.call(d::msg_type::alloc_uar, d::body(d::alloc_uar_req{0})).err == EDQUOT);

    // It goes. Its close comes before B's next request, so the daemon has seen it go
    // before it serves that request (one poll sees both); STATUS still lists it.
    a->c.close("the test's departing connection");
    REQUIRE(listed_with_keys(b.status(), kKeys));
    // Each fits once the departed connection's part is released: answered then, not
    // refused for what a connection that is gone held.
    const auto t0 = std::chrono::steady_clock::now();
    const auto pd = b.alloc_pd();  // (REQUIREs success)
    const auto waited = std::chrono::steady_clock::now() - t0;
    const auto uar = b.alloc_uar();
    int err = 0;
    const auto iova = b.map(whole, &err);  // the whole quota: once the departed page is unmapped
    CHECK(err == 0);
    MESSAGE("ALLOC_PD answered after ",
            std::chrono::duration_cast<std::chrono::microseconds>(waited).count(),
            " us, while the departed connection's ", kKeys, " keys and PD were destroyed");
    CHECK(!listed_with_keys(b.status(), kKeys));

    // A request that does not fit even with nothing departed is refused, once the
    // departed connection's teardown is over (it cannot tell before).
    CHECK(b.unmap(iova) == 0);
    CHECK(b.dealloc_pd(pd) == 0);
    CHECK(b.call(d::msg_type::dealloc_uar, d::body(d::dealloc_uar_req{0, uar})).err == 0);
    auto a2 = departing(rig.sock, page, kKeys);
    a2->c.close("the test's second departing connection");
    REQUIRE(listed_with_keys(b.status(), kKeys));
    CHECK(b.map(over, &err) == 0);
    CHECK(err == EDQUOT);
    CHECK(!listed_with_keys(b.status(), kKeys));  // refused only once it was gone
    // And with none departed, at once.
    CHECK(b.map(over, &err) == 0);
    CHECK(err == EDQUOT);
    CHECK(b.map(whole, &err) != 0);
    CHECK(err == 0);
}

TEST_CASE("out of file descriptors: newcomers are turned away with EMFILE, the daemon does not spin, others are served") {
    daemon_rig rig;
    test_client watcher(rig.sock);
    // The daemon may open one more fd than it has now.
    const std::size_t open_now = rig.fd_count();
    rlimit old{};
    REQUIRE(::prlimit(rig.pid(), RLIMIT_NOFILE, nullptr, &old) == 0);
    rlimit lim{open_now + 1, old.rlim_max};
    REQUIRE(::prlimit(rig.pid(), RLIMIT_NOFILE, &lim, nullptr) == 0);
    std::vector<d::client> extra;
    for (int i = 0; i < 4; ++i) extra.push_back(test_client::connect(rig.sock));
    std::this_thread::sleep_for(200ms);
    const long before = cpu_ticks(rig.pid());
    std::this_thread::sleep_for(1s);
    const long used = cpu_ticks(rig.pid()) - before;
    // A spinning poll loop would use the whole second (sysconf(_SC_CLK_TCK), 100 ticks).
    CHECK_MESSAGE(used < 30, "cxvd used ", used, " ticks in a second");
    int emfile = 0, served = 0;
    std::string replies;
    for (auto& c : extra) {
        auto a = c.call(d::msg_type::hello, d::body(d::hello_req{}), {}, 2000ms);
        if (a && a->err == EMFILE) ++emfile;
        if (a && a->err == 0) ++served;
        replies += a ? fmt::format("errno {} ({}); ", a->err, a->text) : "no reply (" + a.error().message + "); ";
    }
    INFO("the daemon had ", open_now, " fds; the replies: ", replies, "\nits log:\n", rig.log());
    CHECK(emfile >= 2);
    CHECK(served <= 1);
    CHECK(rig.log().find("out of file descriptors") != std::string::npos);
    CHECK(watcher.status().clients_total >= 1);
    REQUIRE(::prlimit(rig.pid(), RLIMIT_NOFILE, &old, nullptr) == 0);
    test_client after(rig.sock);  // served again once fds are back
    CHECK(after.status().clients_total >= 2);
}

TEST_CASE("a member of an allowed supplementary group is served (SO_PEERGROUPS)" *
          cxv::test::skip_unless(::getuid() == 0, "the allow-list by group: not root, cannot take another uid")) {
    daemon_rig rig({"--allow-gid", "65530"});
    REQUIRE(::chmod(rig.dir.dir.c_str(), 0755) == 0);
    REQUIRE(::chmod(rig.sock.c_str(), 0666) == 0);
    auto as = [&](std::vector<gid_t> groups, int want) {
        return in_child([&] {
            if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
                return 10;
            }
            auto c = d::client::connect(rig.sock);
            if (!c) return 11;
            auto a = c->call(d::msg_type::hello, d::body(d::hello_req{}));
            if (!a) return 12;
            return a->err == want ? 0 : 13;
        });
    };
    CHECK(as({65530}, 0) == 0);
    CHECK(as({65531, 65530}, 0) == 0);
    CHECK(as({65531}, EACCES) == 0);
}

TEST_CASE("CQs and QP queues need memory mapped device-writable; a QP with two CQs holds both") {
    daemon_rig rig;
    test_client a(rig.sock);
    shared_memory rw(6 * 4096), ro(2 * 4096);
    int err = 0;
    const auto iw = a.map(rw), ir = a.map(ro, &err, 0, false);
    REQUIRE(ir != 0);
    const auto ua = a.alloc_uar();
    const auto pd = a.alloc_pd();
    CHECK(a.create_cq(ir, iw + 4096, ua).err == EPERM);  // CQEs into read-only memory
    CHECK(a.create_cq(iw, ir, ua).err == EPERM);         // its doorbell record
    const auto snd = a.cq(iw, iw + 4096, ua), rcv = a.cq(iw + 2 * 4096, iw + 4096 + 64, ua);
    CHECK(a.create_qp(pd, snd, ua, ir, iw + 4096 + 128, false, rcv).err == EPERM);  // its RQ read-only
    CHECK(a.create_qp(pd, snd, ua, iw + 3 * 4096, ir, false, rcv).err == EPERM);    // its doorbell record
    const auto qpn = a.qp(pd, snd, ua, iw + 3 * 4096, iw + 4096 + 128, rcv);
    CHECK(a.destroy_cq(rcv) == EBUSY);
    CHECK(a.destroy_cq(snd) == EBUSY);
    CHECK(a.rst2init(qpn) == 0);
    CHECK(a.destroy_qp(qpn) == 0);
    CHECK(a.destroy_cq(rcv) == 0);
    CHECK(a.destroy_cq(snd) == 0);
    CHECK(a.unmap(ir) == 0);
}

TEST_CASE("STATUS with more clients than one message holds lists what fits and counts the rest; comm is escaped" *
          cxv::test::skip_unless(nofile_hard_limit() >= 2600,
                                 "STATUS of 1,100 clients: the RLIMIT_NOFILE hard limit is under 2,600")) {
    rlimit lim{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &lim) == 0);
    const rlimit saved = lim;
    lim.rlim_cur = lim.rlim_max;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &lim) == 0);  // the daemon inherits it too
    {
        daemon_rig rig({"--max-clients-per-uid", "5000", "--max-clients", "5000"});
        char name[16] = {};
        REQUIRE(::prctl(PR_GET_NAME, name) == 0);
        REQUIRE(::prctl(PR_SET_NAME, "esc\x1b[2Jx") == 0);
        auto odd = std::make_unique<test_client>(rig.sock);
        REQUIRE(::prctl(PR_SET_NAME, name) == 0);
        std::vector<d::client> many;
        for (int i = 0; i < 1100; ++i) many.push_back(test_client::connect(rig.sock));
        test_client w(rig.sock);
        const auto s = wait_status(w, [](const d::status_reply& x) { return x.clients_total == 1102; }, 10s);
        CHECK(s.clients_total == 1102);
        CHECK(s.clients.size() < s.clients_total);
        CHECK(s.clients.size() > 500);
        bool escaped = false;
        for (const auto& c : s.clients) escaped = escaped || c.comm == "esc\\x1b[2Jx";
        CHECK(escaped);
        const auto log = rig.log();
        CHECK(log.find("(esc\\x1b[2Jx) connected") != std::string::npos);
        CHECK(log.find('\x1b') == std::string::npos);
    }
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &saved) == 0);
}

TEST_CASE("--socket-group and --allow-gid take a group name, as the unit file passes them" *
          cxv::test::skip_unless(::getuid() == 0 && ::getgrgid(65534) != nullptr,
                                 "group names: not root, or no group 65534 (nogroup)")) {
    const group* g = ::getgrgid(65534);
    REQUIRE(g != nullptr);
    const std::string name = g->gr_name;
    daemon_rig rig({"--socket-group", name, "--allow-gid", name});
    struct stat st {};
    REQUIRE(::stat(rig.sock.c_str(), &st) == 0);
    CHECK(st.st_gid == 65534);
    CHECK((st.st_mode & 0777) == 0660);
}
