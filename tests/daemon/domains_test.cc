// cxvd's trust domains (issue 33, docs/daemon.md "Trust model"): a function serves one
// trust domain at a time -- a uid, or the members of a --domain-gid group -- because a
// client given the device fd (ALLOC_UAR) can write anywhere in the function's BAR. A
// second domain is refused with the reason; it gets the function once the first one's
// clients are gone, after a reset where one of them had the device fd, and not while a
// process of the first still holds that fd; a tenant that kills its own function leaves
// another domain's function and cxvd serving. Clients of other uids are forked children
// that setuid(2) (root only: skipped, and said, otherwise).
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <cerrno>
#include <functional>
#include <optional>
#include <string>

#include <doctest/doctest.h>

#include "api/cxv.h"
#include "hw/doorbell.h"
#include "hw/init_seg.h"
#include "tests/daemon/rig.h"
#include "tests/daemon/tenants.h"
#include "tests/skip.h"

using namespace cxv::test;
using namespace std::chrono_literals;

namespace {

constexpr uid_t kFirst = 65533, kSecond = 65534, kThird = 65532;

// MAP_MEMORY of a page of its own, as `uid` (and `groups`), on a connection of its own.
outcome map_as(const std::string& sock, uid_t uid, const std::vector<gid_t>& groups = {}) {
    return as_uid(sock, uid, groups, [](d::client& c) { return map_page(c, sealed_memfd(4096)); });
}

// map_as until it succeeds or `limit` passes; the last outcome.
outcome map_until_served(const std::string& sock, uid_t uid, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    outcome o = map_as(sock, uid);
    while (!(o.stage == 0 && o.err == 0) && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(50ms);
        o = map_as(sock, uid);
    }
    return o;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A UAR and, through the device fd that comes with it, a mapping of BAR0 from offset
// `at` (relative to BAR0: the UAR's own page when null) as a driver makes: `use` gets the
// mapping; the fd and the mapping are kept (the connection too unless `hang_up`) until the
// child is let go. True when all of it worked.
template <typename Use>
bool with_bar(const std::string& sock, bool hang_up, std::optional<std::uint64_t> at, Use use,
              const std::function<void(bool)>& hold) {
    std::optional<d::client> c;
    if (auto made = d::client::connect(sock)) c.emplace(std::move(made).value());
    if (!c || !c->hello()) return false;
    auto a = c->call(d::msg_type::alloc_uar, d::body(d::alloc_uar_req{0}));
    if (!a || a->err != 0 || a->fds.size() != 1) return false;
    auto u = d::parse_alloc_uar_reply(a->payload);
    if (!u) return false;
    const std::uint64_t bar0 = u->mmap_offset - std::uint64_t{u->uar} * cxv::hw::uar_page_size;
    const std::uint64_t offset = at ? bar0 + *at : u->mmap_offset;
    void* bar = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, a->fds[0].get(), static_cast<off_t>(offset));
    if (bar == MAP_FAILED) return false;
    use(static_cast<std::byte*>(bar));
    if (hang_up) c.reset();
    hold(true);
    return true;
}

// A client that gets a UAR and with it the device fd, maps its page of the BAR as a
// driver does, then hangs up on cxvd but keeps the fd and the mapping (the review's
// attack: a tenant that left, still holding the function) until let go.
struct fd_keeper : held_child {
    fd_keeper(const std::string& sock, uid_t uid)
        : held_child(uid, {}, [&](auto& hold) { with_bar(sock, true, std::nullopt, [](std::byte*) {}, hold); }) {
        REQUIRE_MESSAGE(ready, "the client as uid ", uid, " did not get and map a UAR");
    }
};

}  // namespace

TEST_CASE("a function serves one trust domain: another uid is refused EBUSY with the reason, then served once "
          "the first uid's clients are gone" *
          cxv::test::skip_unless(root(), "tenants as other uids: not root, cannot take another uid")) {
    daemon_rig rig({"--allow-uid", std::to_string(kFirst), "--allow-uid", std::to_string(kSecond)});
    open_to_all(rig);
    {
        tenant first(rig.sock, kFirst, 1);  // holds the function (a mapping)
        // The same uid on another connection is the same domain.
        const outcome same = map_as(rig.sock, kFirst);
        CHECK(same.stage == 0);
        CHECK_MESSAGE(same.err == 0, same.text);

        const outcome other = map_as(rig.sock, kSecond);
        REQUIRE(other.stage == 0);
        CHECK(other.err == EBUSY);
        CHECK_MESSAGE(has(other.text, "in use by another trust domain"), other.text);
        CHECK(has(other.text, "--domain-gid"));
        CHECK(has(other.text, "SR-IOV"));
        CHECK_MESSAGE(!has(other.text, std::to_string(kFirst)), "names the other tenant: ", other.text);
        // What is not a function's still answers: HELLO (as_uid said it) and STATUS.
        CHECK(status_as(rig.sock, kSecond).devices.size() == 1);
        // COUNTERS (what `cxv info` shows of a function a cxvd holds) claims nothing: the
        // domain using the function and the operator read them, another domain may not.
        const auto counters = [](d::client& c) { return c.call(d::msg_type::counters, d::body(d::counters_req{0})); };
        const outcome theirs = as_uid(rig.sock, kSecond, {}, counters);
        REQUIRE(theirs.stage == 0);
        CHECK(theirs.err == EPERM);
        CHECK_MESSAGE(has(theirs.text, "its counters are for the trust domain that uses it"), theirs.text);
        const outcome own = as_uid(rig.sock, kFirst, {}, counters);
        REQUIRE(own.stage == 0);
        CHECK_MESSAGE(own.err == 0, own.text);
        auto named = d::parse_counters_reply(own.payload);
        REQUIRE(named);
        CHECK(named->counters.at(0).first == "rx_unicast_packets");
        test_client viewer(rig.sock);
        auto mine = viewer.c.call(d::msg_type::counters, d::body(d::counters_req{0}));
        REQUIRE(mine);
        CHECK_MESSAGE(mine->err == 0, mine->text);
        // So does the operator's own use of the function: root is a domain too.
        test_client op(rig.sock);
        auto pd = op.command(cxv::driver::command<ifc::alloc_pd_in>(cxv::hw::cmd_opcode::ALLOC_PD),
                             ifc::alloc_pd_out::size_bytes);
        CHECK(pd.err == EBUSY);
    }
    // The first uid's clients gone (no device fd went out: no reset), the second's turn.
    const outcome later = map_until_served(rig.sock, kSecond, 10000ms);
    CHECK(later.stage == 0);
    CHECK_MESSAGE(later.err == 0, later.text);
    const std::string log = rig.log();
    CHECK_MESSAGE(has(log, "free (the last client of uid " + std::to_string(kFirst) + " is gone)"), log);
    CHECK(!has(log, "reset and brought up again"));
}

TEST_CASE("--domain-gid: members of one group are one trust domain, whatever their uids: one function, one "
          "quota, one STATUS view" *
          cxv::test::skip_unless(root(), "tenants as other uids: not root, cannot take another uid")) {
    constexpr gid_t kTeam = 65530;
    daemon_rig rig({"--allow-uid", std::to_string(kFirst), "--allow-uid", std::to_string(kSecond), "--allow-uid",
                    std::to_string(kThird), "--domain-gid", std::to_string(kTeam), "--quota-mappings", "4"});
    open_to_all(rig);
    tenant first(rig.sock, kFirst, 3, {kTeam});  // 3 of the domain's 4 mappings
    const outcome mate = map_as(rig.sock, kSecond, {kTeam});
    CHECK(mate.stage == 0);
    CHECK_MESSAGE(mate.err == 0, mate.text);
    // The quota is the domain's: with `first`'s 3 held, a member's second is refused.
    const outcome over = as_uid(rig.sock, kSecond, {kTeam}, [](d::client& c) {
        const int fd = sealed_memfd(4096);
        auto a = map_page(c, fd);
        if (!a || a->err != 0) return a;
        return map_page(c, fd);
    });
    CHECK(over.stage == 0);
    CHECK(over.err == EDQUOT);
    CHECK_MESSAGE(has(over.text, "group " + std::to_string(kTeam) + " has 4 mappings"), over.text);
    // STATUS shows a member the domain's clients, whatever their uids.
    const auto seen = status_as(rig.sock, kSecond, {kTeam});
    bool sees_first = false;
    for (const auto& c : seen.clients) sees_first = sees_first || c.pid == first.pid;
    CHECK(sees_first);
    const outcome outsider = map_as(rig.sock, kThird);
    REQUIRE(outsider.stage == 0);
    CHECK(outsider.err == EBUSY);
    CHECK_MESSAGE(has(outsider.text, "in use by another trust domain"), outsider.text);
    CHECK(has(rig.log(), "now used by group " + std::to_string(kTeam)));
}

TEST_CASE("--share-functions and --domain-gid together are refused at start") {
    scratch s;
    const ran r = run({env_path("CXV_SIM"), "run", "--", env_path("CXVD"), "--socket", s.dir + "/cxvd.sock",
                       "--share-functions", "--domain-gid", "0"},
                      s.dir + "/cxvd.log", 60s);
    CHECK(r.status != 0);
    CHECK_MESSAGE(has(r.output, "--share-functions and --domain-gid"), r.output);
}

TEST_CASE("a tenant that had the device fd: the function is reset before another domain gets it, and not while "
          "the tenant, gone from cxvd, still holds the fd" *
          cxv::test::skip_unless(root(), "tenants as other uids: not root, cannot take another uid")) {
    daemon_rig rig({"--allow-uid", std::to_string(kFirst), "--allow-uid", std::to_string(kSecond)});
    open_to_all(rig);
    fd_keeper first(rig.sock, kFirst);  // a UAR, its BAR page mapped, then hung up

    // Its teardown done, the function is reset and waits to be brought up again until no
    // process holds it: meanwhile another domain is told to try again.
    const auto end = std::chrono::steady_clock::now() + 20s;
    outcome o = map_as(rig.sock, kSecond);
    while (o.stage == 0 && o.err == EBUSY && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(20ms);
        o = map_as(rig.sock, kSecond);
    }
    REQUIRE(o.stage == 0);
    CHECK(o.err == EAGAIN);
    CHECK_MESSAGE(has(o.text, "brought up again"), o.text);
    // And still, a second later: the keeper has not let go.
    std::this_thread::sleep_for(1000ms);
    o = map_as(rig.sock, kSecond);
    CHECK(o.err == EAGAIN);
    std::string log = rig.log();
    CHECK_MESSAGE(has(log, "reset and brought up again before another trust domain may use it"), log);
    CHECK_MESSAGE(has(log, "still held open by another process"), log);

    // The keeper gone: the function comes up again, and the second domain is served.
    first.release();
    o = map_until_served(rig.sock, kSecond, 30000ms);
    CHECK(o.stage == 0);
    CHECK_MESSAGE(o.err == 0, o.text);
}

namespace {

// The review's attack on `rig`'s two functions: a tenant (uid kFirst) kills the first
// through its device fd; root's domain goes on using the second meanwhile.
void kill_own_function(daemon_rig& rig) {
    open_to_all(rig);
    test_client mine(rig.sock);  // root's domain, on the second function
    REQUIRE(mine.hello.devices.size() == 2);
    const std::string victim = mine.hello.devices[0].bdf, other = mine.hello.devices[1].bdf;
    auto alloc_pd_on = [&](std::uint16_t dev) {
        d::command_req r;
        r.device = dev;
        r.out_len = ifc::alloc_pd_out::size_bytes;
        r.in = cxv::driver::command<ifc::alloc_pd_in>(cxv::hw::cmd_opcode::ALLOC_PD);
        return mine.call(d::msg_type::command, d::body(r));
    };
    REQUIRE(alloc_pd_on(1).err == 0);

    // The tenant: a UAR on the first function, and through the device fd that comes with
    // it, the health syndrome written into the initialization segment (PRM "Health
    // Buffer"): the function is dead for whoever uses it. It stays (fd, connection) until
    // let go, so that the death is found before the hand-over's reset would clear it.
    held_child attacker(kFirst, {}, [&](auto& hold) {
        with_bar(rig.sock, false, std::uint64_t{0},
                 [](std::byte* seg) {
                     ifc::set<ifc::health_buffer::synd>(seg + cxv::hw::init_seg_offset::health_buffer, 0x5);
                 },
                 hold);
    });
    REQUIRE_MESSAGE(attacker.ready, "the tenant did not write through its device fd");

    // cxvd finds the first function dead and recovers it; the second goes on serving
    // root's domain meanwhile, and cxvd with it.
    std::string log;
    const auto end = std::chrono::steady_clock::now() + 30s;
    unsigned served = 0;
    while (std::chrono::steady_clock::now() < end) {
        served += alloc_pd_on(1).err == 0 ? 1 : 0;
        log = rig.log();
        // The tenant, dropped with the fatal event, lets go of its fd: the function can
        // be opened again.
        if (has(log, victim + ": the function is dead")) attacker.release();
        if (has(log, victim + ": recovered")) break;
        std::this_thread::sleep_for(20ms);
    }
    attacker.release();
    INFO("daemon log: ", log);
    CHECK(has(log, victim + ": the function is dead"));
    CHECK(has(log, victim + ": recovered"));
    CHECK(!has(log, other + ": the function is dead"));
    CHECK(served > 0);
    CHECK(alloc_pd_on(1).err == 0);
    CHECK(rig.proc->running());
    // The first function is anyone's again (its tenant gone, the function reset).
    CHECK(alloc_pd_on(0).err == 0);
}

}  // namespace

TEST_CASE("the review's attack: a tenant that kills its own function through the device fd leaves another "
          "domain's function, and cxvd, serving" *
          cxv::test::skip_unless(root(), "tenants as other uids: not root, cannot take another uid")) {
    daemon_rig rig({"--allow-uid", std::to_string(kFirst)}, {"--devices", "2"});
    kill_own_function(rig);
}

TEST_CASE("the same with SR-IOV: cxvd serves two VFs of a kernel PF; a tenant that kills its VF leaves the other "
          "VF, the PF and cxvd serving" *
          cxv::test::skip_unless(root(), "tenants as other uids: not root, cannot take another uid")) {
    // The PF stays with mlx5_core (it does the PF's part); its VFs go to vfio-pci, and
    // cxvd owns those two only: a tenant's device fd is its VF's, never the PF's.
    const std::string make_vfs =
        "echo 2 > /sys/bus/pci/devices/0000:c5:00.0/sriov_numvfs && "
        "for f in 0000:c5:00.1 0000:c5:00.2; do echo vfio-pci > /sys/bus/pci/devices/$f/driver_override; "
        "echo $f > /sys/bus/pci/drivers/mlx5_core/unbind; echo $f > /sys/bus/pci/drivers_probe; done";
    daemon_rig rig({"--allow-uid", std::to_string(kFirst), "--device", "0000:c5:00.1", "--device", "0000:c5:00.2"},
                   {"--set", "kernel_driver=mlx5_core", "--set", "sriov_totalvfs=2"}, make_vfs);
    test_client probe(rig.sock);
    REQUIRE(probe.hello.devices.size() == 2);
    CHECK(probe.hello.devices[0].bdf == "0000:c5:00.1");
    CHECK(probe.hello.devices[1].bdf == "0000:c5:00.2");
    kill_own_function(rig);
}

TEST_CASE("cxvd as the PF's driver over vfio-pci (--vfs 2): it enables the VFs, serves them and never the PF; a "
          "tenant that kills its VF leaves the other VF, the PF and cxvd serving; the VFs go with cxvd" *
          cxv::test::skip_unless(root(), "tenants as other uids: not root, cannot take another uid")) {
    daemon_rig rig({"--allow-uid", std::to_string(kFirst), "--device", "0000:c5:00.0", "--vfs", "2"},
                   {"--set", "sriov_totalvfs=2", "--set", "vfio_pci_enable_sriov=Y"});
    CHECK(has(rig.log(), "0000:c5:00.0: 2 VFs enabled: 0000:c5:00.1 0000:c5:00.2"));
    test_client probe(rig.sock);
    REQUIRE(probe.hello.devices.size() == 2);
    CHECK(probe.hello.devices[0].bdf == "0000:c5:00.1");
    CHECK(probe.hello.devices[1].bdf == "0000:c5:00.2");
    CHECK(probe.hello.devices[0].mac != probe.hello.devices[1].mac);
    kill_own_function(rig);
    REQUIRE(::kill(rig.pid(), SIGTERM) == 0);
    CHECK(rig.proc->wait(std::chrono::steady_clock::now() + 20s) == 0);
    CHECK(has(rig.log(), "0000:c5:00.0: VFs disabled"));
}

TEST_CASE("cxvd --vfs restarted after a crash: VFs an earlier PF user left enabled are disabled, then made anew") {
    // What a killed cxvd leaves: the PF's VFs enabled, nobody holding them.
    daemon_rig rig({"--device", "0000:c5:00.0", "--vfs", "2"},
                   {"--set", "sriov_totalvfs=2", "--set", "vfio_pci_enable_sriov=Y"},
                   "echo 2 > /sys/bus/pci/devices/0000:c5:00.0/sriov_numvfs");
    const std::string log = rig.log();
    CHECK_MESSAGE(has(log, "0000:c5:00.0: 2 VFs left enabled by an earlier user of the PF: disabling them first"), log);
    CHECK(has(log, "0000:c5:00.0: 2 VFs enabled: 0000:c5:00.1 0000:c5:00.2"));
    test_client c(rig.sock);
    REQUIRE(c.hello.devices.size() == 2);
    CHECK(c.hello.devices[1].bdf == "0000:c5:00.2");
}

TEST_CASE("cxvd --vfs where vfio-pci cannot enable VFs: it stops at start and says what to configure") {
    scratch dir;
    const ran r = run({env_path("CXV_SIM"), "run", "--port-type", "eth", "--set", "sriov_totalvfs=2", "--",
                       env_path("CXVD"), "--socket", dir.dir + "/s", "--device", "0000:c5:00.0", "--vfs", "2"},
                      dir.dir + "/log", 60s);
    CHECK(r.status == 1);
    CHECK_MESSAGE(has(r.output, "enable_sriov=1"), r.output);
    const ran range = run({env_path("CXV_SIM"), "run", "--port-type", "eth", "--set", "sriov_totalvfs=2", "--",
                           env_path("CXVD"), "--socket", dir.dir + "/s", "--device", "0000:c5:00.0", "--vfs", "3"},
                          dir.dir + "/log2", 60s);
    CHECK(range.status == 1);
    CHECK_MESSAGE(has(range.output, "it offers 1 to 2 VFs"), range.output);
}

TEST_CASE("HELLO says which functions another trust domain uses, and a client that names none takes a free one" *
          cxv::test::skip_unless(root(), "tenants as other uids: not root, cannot take another uid")) {
    daemon_rig rig({"--allow-uid", std::to_string(kFirst), "--allow-uid", std::to_string(kSecond)}, {"--devices", "2"});
    open_to_all(rig);
    tenant first(rig.sock, kFirst, 1);  // holds the first function (a mapping)
    // As the second uid: HELLO's flags, and the order cxv::daemon_functions gives a
    // program (the free function first: ibv_get_device_list's mlx5_0).
    const outcome seen = as_uid(rig.sock, kSecond, {}, [&](d::client&) -> cxv::result<d::client::answer> {
        auto c = d::client::connect(rig.sock);
        if (!c) return c.error();
        auto h = c->hello();
        if (!h) return h.error();
        auto order = cxv::daemon_functions(rig.sock);
        if (!order) return order.error();
        d::client::answer a;
        std::string text;
        for (const auto& dev : h->devices) text += dev.other_domain ? "taken " : "free ";
        for (const auto& bdf : *order) text += bdf + " ";
        a.text = text;
        return a;
    });
    REQUIRE(seen.stage == 0);
    CHECK(seen.text == "taken free 0000:c5:00.1 0000:c5:00.0 ");
    // The holder's own view: its function is not another's.
    test_client root_view(rig.sock);
    CHECK(root_view.hello.devices[0].other_domain);  // root is another domain than kFirst
    CHECK_FALSE(root_view.hello.devices[1].other_domain);
}
