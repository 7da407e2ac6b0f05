// The scenarios of cxv_wire_peer (peer.cc): what each side posts and checks. Included
// once, by peer.cc.
#pragma once

namespace {

// RC SEND sizes around the path MTU (1024 by default): empty, short, one packet exactly,
// one byte over, several packets.
constexpr std::uint32_t kSendSizes[] = {0, 1, 100, 1024, 1025, 3000, 4096, 9001};
constexpr std::size_t kSends = sizeof(kSendSizes) / sizeof(kSendSizes[0]);

// Offsets in each side's 4 MiB region.
constexpr std::size_t kSource = 0x000000;      // client: what it sends
constexpr std::size_t kRcRecv = 0x100000;      // server: RC receive k at + k * 16 KiB
constexpr std::size_t kWriteAt = 0x200000;     // server: RDMA WRITE target
constexpr std::size_t kWriteImmAt = 0x210000;  // server: WRITE with immediate target
constexpr std::size_t kReadAt = 0x220000;      // server: RDMA READ source
constexpr std::size_t kAtomicAt = 0x230000;    // server: FetchAdd word, CmpSwap word + 8
constexpr std::size_t kUcRecv = 0x240000;      // server: UC receive
constexpr std::size_t kUcWriteAt = 0x250000;   // server: UC WRITE with immediate target
constexpr std::size_t kUdRecv = 0x260000;      // both: UD receive (40-byte GRH + data)
constexpr std::size_t kReadInto = 0x300000;    // client: READ destination
constexpr std::size_t kAtomicInto = 0x310000;  // client: atomics' original values
constexpr std::uint32_t kImmSend = 0x12345678, kImmWrite = 0xabcdef01, kImmUc = 0x55aa55aa;

std::uint32_t be(std::uint32_t v) { return __builtin_bswap32(v); }

ibv_send_wr wr_of(std::uint64_t id, ibv_wr_opcode op, ibv_sge* s, int n) {
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.opcode = op;
    wr.sg_list = s;
    wr.num_sge = n;
    return wr;
}

// An RDMA WRITE or READ (or with immediate) to the peer's address `raddr`.
ibv_send_wr rdma_wr(std::uint64_t id, ibv_wr_opcode op, ibv_sge* s, std::uint64_t raddr, std::uint32_t rkey) {
    ibv_send_wr wr = wr_of(id, op, s, 1);
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    return wr;
}

std::uint64_t word(side& s, std::size_t off) {
    std::uint64_t v;
    std::memcpy(&v, s.at(off), 8);
    return v;
}

void expect_true(bool ok, const char* what) {
    if (!ok) fail("%s", what);
}

int traffic_server(side& s, const args& a) {
    // UC and UD receives, the READ source and the atomic words first; then "ready";
    // then the RC receives, late: only once the client's first SEND has met an RNR NAK.
    s.recv(s.uc(), 300, kUcRecv, 4096);
    s.recv(s.uc(), 301, kUcRecv + 0x4000, 4096);
    s.recv(s.ud(), 400, kUdRecv, 4096 + 40);
    fill(s.at(kReadAt), 9000, 77);
    const std::uint64_t add0 = 1000, cmp0 = 5;
    std::memcpy(s.at(kAtomicAt), &add0, 8);
    std::memcpy(s.at(kAtomicAt + 8), &cmp0, 8);
    publish(a.oob + "/ready", "ready");
    // The responder counts out_of_buffer when a SEND finds no receive WQE, and on RC
    // answers with an RNR NAK (IBA 9.7.5.2.8); the UC and UD receives are all posted.
    s.await_q_counter(&cxv::q_counter_values::out_of_buffer, 1, 30s,
                      "server: the client's first RC SEND met no RNR NAK (out_of_buffer)");
    constexpr unsigned kRc = kSends + 4;  // the SENDs, two with immediate, a WRITE with immediate, "done"
    for (unsigned k = 0; k < kRc; ++k) s.recv(s.rc(), k, kRcRecv + k * 0x4000, 0x4000);

    std::vector<ibv_wc> rc, uc, ud;
    const auto end = clock_type::now() + 30s;
    while (rc.size() < kRc || uc.size() < 2 || ud.size() < 1) {
        if (clock_type::now() > end) fail("server: %zu RC, %zu UC, %zu UD receives of %u, 2, 1", rc.size(), uc.size(), ud.size(), kRc);
        const ibv_wc wc = s.next();
        if (wc.status != IBV_WC_SUCCESS) fail("server: receive %llu failed: %d", static_cast<unsigned long long>(wc.wr_id), wc.status);
        (wc.qp_num == s.rc().qpn() ? rc : wc.qp_num == s.uc().qpn() ? uc : ud).push_back(wc);
    }
    for (unsigned k = 0; k < kSends; ++k) {
        expect_true(rc[k].wr_id == k && rc[k].opcode == IBV_WC_RECV, "server: RC receives out of order");
        expect_true(rc[k].byte_len == kSendSizes[k], "server: RC SEND length");
        expect_true(same(s.at(kRcRecv + k * 0x4000), kSendSizes[k], k), "server: RC SEND data");
    }
    expect_true(rc[kSends].opcode == IBV_WC_RECV && (rc[kSends].wc_flags & IBV_WC_WITH_IMM) &&
                    rc[kSends].imm_data == be(kImmSend) && rc[kSends].byte_len == 2000 &&
                    same(s.at(kRcRecv + kSends * 0x4000), 2000, 40),
                "server: RC SEND with immediate");
    expect_true(rc[kSends + 1].opcode == IBV_WC_RECV && rc[kSends + 1].imm_data == be(kImmSend + 1) &&
                    rc[kSends + 1].byte_len == 16 && same(s.at(kRcRecv + (kSends + 1) * 0x4000), 16, 41),
                "server: a one-packet RC SEND with immediate");
    expect_true(rc[kSends + 2].opcode == IBV_WC_RECV_RDMA_WITH_IMM && rc[kSends + 2].imm_data == be(kImmWrite) &&
                    rc[kSends + 2].byte_len == 5000,
                "server: RC WRITE with immediate completion");
    expect_true(rc[kSends + 3].byte_len == 8, "server: the last RC receive is 'done'");
    expect_true(same(s.at(kWriteAt), 10000, 50), "server: RDMA WRITE data");
    expect_true(same(s.at(kWriteImmAt), 5000, 51), "server: RDMA WRITE with immediate data");
    expect_true(word(s, kAtomicAt) == add0 + 23, "server: FetchAdd result");
    expect_true(word(s, kAtomicAt + 8) == 99, "server: CmpSwap result");
    expect_true(uc[0].wr_id == 300 && uc[0].byte_len == 2000 && same(s.at(kUcRecv), 2000, 60), "server: UC SEND");
    expect_true(uc[1].opcode == IBV_WC_RECV_RDMA_WITH_IMM && uc[1].imm_data == be(kImmUc) &&
                    same(s.at(kUcWriteAt), 3000, 61),
                "server: UC WRITE with immediate");
    expect_true(ud[0].byte_len == 1000 + 40 && (ud[0].wc_flags & IBV_WC_GRH) && ud[0].src_qp == s.peer().ud &&
                    same(s.at(kUdRecv + 40), 1000, 70),
                "server: UD SEND (GRH, source QP, data)");
    // A UD SEND back.
    fill(s.at(kSource), 500, 71);
    ibv_sge g = s.sge(kSource, 500);
    ibv_send_wr wr = s.ud_wr(401, &g);
    s.send(s.ud(), wr);
    s.expect(IBV_WC_SEND, 401);
    return 0;
}

// What the client posted, one line per WR, for the capture test to compare with what
// tshark decodes: kind, destination QP, remote address, R_Key, length, and for atomics
// the swap/add and compare operands.
struct post_log {
    std::FILE* f;
    explicit post_log(const std::string& path) : f(std::fopen(path.c_str(), "w")) {
        if (f == nullptr) fail("cannot write %s", path.c_str());
    }
    ~post_log() { std::fclose(f); }
    void add(const char* kind, std::uint32_t qpn, const ibv_send_wr& wr, std::uint64_t len) {
        const bool atomic = wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
        const std::uint64_t va = atomic ? wr.wr.atomic.remote_addr : wr.wr.rdma.remote_addr;
        const std::uint32_t rkey = atomic ? wr.wr.atomic.rkey : wr.wr.rdma.rkey;
        std::fprintf(f, "%s %x %llx %x %llu %llx %llx\n", kind, qpn, static_cast<unsigned long long>(va), rkey,
                     static_cast<unsigned long long>(len),
                     static_cast<unsigned long long>(atomic ? (wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? wr.wr.atomic.swap : wr.wr.atomic.compare_add) : 0),
                     static_cast<unsigned long long>(wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? wr.wr.atomic.compare_add : 0));
        std::fflush(f);
    }
};

int traffic_client(side& s, const args& a) {
    s.recv(s.ud(), 410, kUdRecv, 4096 + 40);
    await_file(a.oob + "/ready");
    const endpoint& p = s.peer();
    post_log log(a.oob + "/posted");
    for (unsigned k = 0; k < kSends; ++k) {
        fill(s.at(kSource + k * 0x4000), kSendSizes[k], k);
        ibv_sge g = s.sge(kSource + k * 0x4000, kSendSizes[k]);
        ibv_send_wr wr = wr_of(k, IBV_WR_SEND, &g, kSendSizes[k] ? 1 : 0);
        s.send(s.rc(), wr);
        log.add("SEND", p.rc, wr, kSendSizes[k]);
        s.expect(IBV_WC_SEND, k);
    }
    fill(s.at(kSource), 2000, 40);
    ibv_sge g = s.sge(kSource, 2000);
    ibv_send_wr wr = wr_of(100, IBV_WR_SEND_WITH_IMM, &g, 1);
    wr.imm_data = be(kImmSend);
    s.send(s.rc(), wr);
    log.add("SEND_IMM", p.rc, wr, 2000);
    s.expect(IBV_WC_SEND, 100);
    fill(s.at(kSource), 16, 41);
    g = s.sge(kSource, 16);
    wr = wr_of(101, IBV_WR_SEND_WITH_IMM, &g, 1);
    wr.imm_data = be(kImmSend + 1);
    s.send(s.rc(), wr);
    log.add("SEND_IMM", p.rc, wr, 16);
    s.expect(IBV_WC_SEND, 101);

    fill(s.at(kSource), 10000, 50);
    g = s.sge(kSource, 10000);
    wr = rdma_wr(200, IBV_WR_RDMA_WRITE, &g, p.addr + kWriteAt, p.rkey);
    s.send(s.rc(), wr);
    log.add("WRITE", p.rc, wr, 10000);
    s.expect(IBV_WC_RDMA_WRITE, 200);

    fill(s.at(kSource + 0x10000), 5000, 51);
    g = s.sge(kSource + 0x10000, 5000);
    wr = rdma_wr(201, IBV_WR_RDMA_WRITE_WITH_IMM, &g, p.addr + kWriteImmAt, p.rkey);
    wr.imm_data = be(kImmWrite);
    s.send(s.rc(), wr);
    log.add("WRITE_IMM", p.rc, wr, 5000);
    s.expect(IBV_WC_RDMA_WRITE, 201);

    g = s.sge(kReadInto, 9000);
    wr = rdma_wr(202, IBV_WR_RDMA_READ, &g, p.addr + kReadAt, p.rkey);
    s.send(s.rc(), wr);
    log.add("READ", p.rc, wr, 9000);
    const ibv_wc rd = s.expect(IBV_WC_RDMA_READ, 202);
    expect_true(rd.byte_len == 9000 && same(s.at(kReadInto), 9000, 77), "client: RDMA READ data");
    g = s.sge(kReadInto + 0x4000, 100);
    wr = rdma_wr(205, IBV_WR_RDMA_READ, &g, p.addr + kReadAt + 8, p.rkey);
    s.send(s.rc(), wr);
    log.add("READ", p.rc, wr, 100);
    s.expect(IBV_WC_RDMA_READ, 205);
    expect_true(std::memcmp(s.at(kReadInto + 0x4000), s.at(kReadInto + 8), 100) == 0, "client: one-packet READ data");

    g = s.sge(kAtomicInto, 8);
    wr = wr_of(203, IBV_WR_ATOMIC_FETCH_AND_ADD, &g, 1);
    wr.wr.atomic.remote_addr = p.addr + kAtomicAt;
    wr.wr.atomic.rkey = p.rkey;
    wr.wr.atomic.compare_add = 23;
    s.send(s.rc(), wr);
    log.add("FETCH_ADD", p.rc, wr, 8);
    s.expect(IBV_WC_FETCH_ADD, 203);
    expect_true(word(s, kAtomicInto) == 1000, "client: FetchAdd original value");

    g = s.sge(kAtomicInto + 8, 8);
    wr = wr_of(204, IBV_WR_ATOMIC_CMP_AND_SWP, &g, 1);
    wr.wr.atomic.remote_addr = p.addr + kAtomicAt + 8;
    wr.wr.atomic.rkey = p.rkey;
    wr.wr.atomic.compare_add = 5;
    wr.wr.atomic.swap = 99;
    s.send(s.rc(), wr);
    log.add("CMP_SWAP", p.rc, wr, 8);
    s.expect(IBV_WC_COMP_SWAP, 204);
    expect_true(word(s, kAtomicInto + 8) == 5, "client: CmpSwap original value");

    fill(s.at(kSource), 2000, 60);
    g = s.sge(kSource, 2000);
    wr = wr_of(300, IBV_WR_SEND, &g, 1);
    s.send(s.uc(), wr);
    log.add("UC_SEND", p.uc, wr, 2000);
    s.expect(IBV_WC_SEND, 300);
    fill(s.at(kSource + 0x10000), 3000, 61);
    g = s.sge(kSource + 0x10000, 3000);
    wr = rdma_wr(301, IBV_WR_RDMA_WRITE_WITH_IMM, &g, p.addr + kUcWriteAt, p.rkey);
    wr.imm_data = be(kImmUc);
    s.send(s.uc(), wr);
    log.add("UC_WRITE_IMM", p.uc, wr, 3000);
    s.expect(IBV_WC_RDMA_WRITE, 301);

    fill(s.at(kSource), 1000, 70);
    g = s.sge(kSource, 1000);
    wr = s.ud_wr(400, &g);
    s.send(s.ud(), wr);
    log.add("UD_SEND", p.ud, wr, 1000);
    s.expect(IBV_WC_SEND, 400);

    // A WRITE with a wrong R_Key, on a QP pair of its own: the responder NAKs it.
    g = s.sge(kSource, 64);
    wr = rdma_wr(500, IBV_WR_RDMA_WRITE, &g, p.addr + kWriteAt, p.rkey ^ 0x100);
    s.send(s.rc_bad(), wr);
    log.add("BAD_WRITE", p.rc_bad, wr, 64);
    s.expect(IBV_WC_RDMA_WRITE, 500, IBV_WC_REM_ACCESS_ERR);

    fill(s.at(kSource), 8, 99);
    g = s.sge(kSource, 8);
    wr = wr_of(600, IBV_WR_SEND, &g, 1);
    s.send(s.rc(), wr);
    log.add("SEND", p.rc, wr, 8);
    s.expect(IBV_WC_SEND, 600);

    const ibv_wc back = s.expect(IBV_WC_RECV, 410);
    expect_true(back.byte_len == 540 && (back.wc_flags & IBV_WC_GRH) && same(s.at(kUdRecv + 40), 500, 71),
                "client: the server's UD SEND");
    // The requester waited out the server's RNR NAK and sent again (the SEND completed).
    expect_true(s.q_counters().rnr_nak_retry_err >= 1, "client: no RNR NAK retried after (rnr_nak_retry_err)");
    return 0;
}

int run_traffic(side& s, const args& a) { return a.role == "server" ? traffic_server(s, a) : traffic_client(s, a); }

// --- stream ------------------------------------------------------------------------------

constexpr std::uint32_t kStreamSizes[] = {8, 300, 1500, 4096 + 17, 64, 2048};
constexpr unsigned kWindow = 32;
constexpr std::size_t kSlot = 0x2000;

int stream_server(side& s, const args& a) {
    const unsigned n = a.count;
    unsigned posted = 0, got = 0;
    const auto post = [&] {
        while (posted < n && posted - got < 2 * kWindow) {
            s.recv(s.rc(), posted, kRcRecv + (posted % (2 * kWindow)) * kSlot, kSlot);
            ++posted;
        }
    };
    post();
    publish(a.oob + "/ready", "ready");
    const auto end = clock_type::now() + 120s;
    while (got < n) {
        if (clock_type::now() > end) fail("server: %u of %u messages", got, n);
        const ibv_wc wc = s.next(60s);
        if (wc.status != IBV_WC_SUCCESS) fail("server: receive %u failed: %d", got, wc.status);
        if (wc.wr_id != got) fail("server: receive %llu completed, expected %u", static_cast<unsigned long long>(wc.wr_id), got);
        const std::uint32_t size = kStreamSizes[got % std::size(kStreamSizes)];
        const std::byte* at = s.at(kRcRecv + (got % (2 * kWindow)) * kSlot);
        std::uint32_t seq;
        std::memcpy(&seq, at, 4);
        if (wc.byte_len != size || seq != got || !same(at + 4, size - 4, got)) {
            fail("server: message %u: %u bytes, sequence %u (a loss, a duplicate or reordering)", got, wc.byte_len, seq);
        }
        ++got;
        post();
    }
    publish(a.oob + "/received", std::to_string(got));
    if (!a.hold.empty()) await_file(a.oob + "/" + a.hold, 60s);
    return 0;
}

int stream_client(side& s, const args& a) {
    await_file(a.oob + "/ready");
    const unsigned n = a.count;
    unsigned posted = 0, done = 0;
    bool paused = false;
    std::uint32_t timeouts = 0;
    const auto end = clock_type::now() + 120s;
    while (done < n) {
        while (posted < n && posted - done < kWindow) {
            if (a.pause_at != 0 && posted == a.pause_at) {
                publish(a.oob + "/paused", std::to_string(posted));
                await_file(a.oob + "/pulled", 60s);
                timeouts = s.q_counters().local_ack_timeout_err;
                paused = true;
            }
            const std::uint32_t size = kStreamSizes[posted % std::size(kStreamSizes)];
            std::byte* at = s.at(kSource + (posted % kWindow) * kSlot);
            std::memcpy(at, &posted, 4);
            fill(at + 4, size - 4, posted);
            ibv_sge g = s.sge(kSource + (posted % kWindow) * kSlot, size);
            ibv_send_wr wr = wr_of(posted, IBV_WR_SEND, &g, 1);
            s.send(s.rc(), wr);
            ++posted;
        }
        if (paused) {
            // What was posted after the pull went into the pulled cable: no ACK came, the
            // requester's ACK timer fired. Then the test may put the cable back.
            s.await_q_counter(&cxv::q_counter_values::local_ack_timeout_err, timeouts + 1, 30s,
                              "client: no ACK timeout while the cable was out (local_ack_timeout_err)");
            publish(a.oob + "/lost", "lost");
            paused = false;
        }
        if (clock_type::now() > end) fail("client: %u of %u sends completed", done, n);
        const ibv_wc wc = s.next(60s);
        if (wc.status != IBV_WC_SUCCESS || wc.wr_id != done) {
            fail("client: send %llu completed with status %d, expected %u", static_cast<unsigned long long>(wc.wr_id), wc.status, done);
        }
        ++done;
    }
    await_file(a.oob + "/received", 60s);
    return 0;
}

int run_stream(side& s, const args& a) { return a.role == "server" ? stream_server(s, a) : stream_client(s, a); }

// --- gone --------------------------------------------------------------------------------

int run_gone(side& s, const args& a) {
    if (a.role == "server") {
        publish(a.oob + "/ready", "ready");
        std::fflush(nullptr);
        ::_exit(0);  // as a crash: nothing is torn down, the cable is simply gone
    }
    await_file(a.oob + "/ready");
    std::this_thread::sleep_for(300ms);
    ibv_sge g = s.sge(kSource, 100);
    ibv_send_wr wr = wr_of(1, IBV_WR_SEND, &g, 1);
    s.send(s.rc(), wr);
    s.expect(IBV_WC_SEND, 1, IBV_WC_RETRY_EXC_ERR);
    return 0;
}

}  // namespace
