// Cross-implementation traffic: an RC QP created through Debian's libmlx5 VFIO provider
// with DevX (buffers in UMEMs, WQEs built with mlx5dv.h's helpers, CQEs read through
// struct mlx5_cqe64) exchanges SEND with immediate and RDMA WRITE with immediate with an
// RC QP of cxv's driver on another emulated function, both directions; and two DevX QPs
// do the same in loopback on one function. Neither side's WQEs or CQEs are built or
// parsed by the other's code.
#include <atomic>
#include <chrono>
#include <thread>

#include "api/cxv.h"
#include "tests/vfio/devx_common.h"

namespace cxv::test::vfio {
namespace {

constexpr unsigned kLogRq = 4, kLogSq = 4, kLogCq = 6;
constexpr std::size_t kRqStride = 64;

// An RC QP made with DevX, its CQ, and the WQE/CQE handling an mlx5dv user writes.
struct devx_rc {
    env& e;
    umem cq_ring{e.ctx, 4096};
    umem cq_dbr{e.ctx, 64};
    umem wq{e.ctx, 8192};
    umem qp_dbr{e.ctx, 64};
    created cq, qp;
    std::uint32_t cqn = 0, qpn = 0;
    std::uint32_t ci = 0, sq_pi = 0, rq_pi = 0;

    explicit devx_rc(env& en) : e(en) {
        cq = obj_create(e.ctx, cq_input(e, e.eqn, cq_ring, cq_dbr, kLogCq), ifc::create_cq_out::size_bytes);
        REQUIRE_MESSAGE(cq.obj != nullptr, describe(cmd_opcode::CREATE_CQ, cq.r));
        cqn = ifc::get<ifc::create_cq_out::cqn>(cq.r.data());
        qp = obj_create(e.ctx, qp_input(e, cqn, wq, qp_dbr), ifc::create_qp_out::size_bytes);
        REQUIRE_MESSAGE(qp.obj != nullptr, describe(cmd_opcode::CREATE_QP, qp.r));
        qpn = ifc::get<ifc::create_qp_out::qpn>(qp.r.data());
    }
    ~devx_rc() {
        CHECK(mlx5dv_devx_obj_destroy(qp.obj) == 0);
        CHECK(mlx5dv_devx_obj_destroy(cq.obj) == 0);
    }

    // RST -> INIT -> RTR -> RTS towards (lid, remote), counting to Q counter set
    // `counter_set_id` (0: the default set).
    void connect(std::uint32_t lid, std::uint32_t remote, std::uint32_t counter_set_id = 0) {
        auto init = transition<ifc::rst2init_qp_in>(cmd_opcode::RST2INIT_QP, qpn);
        std::byte* q = ifc::at<ifc::rst2init_qp_in::qpc>(init.data());
        ifc::set<ads::vhca_port_num>(ifc::at<qpc::primary_address_path>(q), 1);
        ifc::set<qpc::counter_set_id>(q, counter_set_id);
        ifc::set<qpc::rre>(q, 1);
        ifc::set<qpc::rwe>(q, 1);
        step(qp.obj, init);
        auto rtr = transition<ifc::init2rtr_qp_in>(cmd_opcode::INIT2RTR_QP, qpn);
        q = ifc::at<ifc::init2rtr_qp_in::qpc>(rtr.data());
        ifc::set<qpc::mtu>(q, 3);
        ifc::set<qpc::log_msg_max>(q, 20);
        ifc::set<qpc::remote_qpn>(q, remote);
        ifc::set<qpc::min_rnr_nak>(q, 1);
        ifc::set<ads::rlid>(ifc::at<qpc::primary_address_path>(q), lid);
        ifc::set<ads::vhca_port_num>(ifc::at<qpc::primary_address_path>(q), 1);
        step(qp.obj, rtr);
        auto rts = transition<ifc::rtr2rts_qp_in>(cmd_opcode::RTR2RTS_QP, qpn);
        q = ifc::at<ifc::rtr2rts_qp_in::qpc>(rts.data());
        ifc::set<qpc::retry_count>(q, 7);
        ifc::set<qpc::rnr_retry>(q, 7);
        ifc::set<ads::ack_timeout>(ifc::at<qpc::primary_address_path>(q), 14);
        step(qp.obj, rts);
        REQUIRE(qp_state(qp.obj, qpn) == qp_rts);
    }

    // A receive WQE of one data segment, ended by the invalid L_Key; the record's
    // receive counter tells the device (PRM "Receive WQE", "Doorbell Record").
    void post_recv(std::uint32_t lkey, void* addr, std::uint32_t len) {
        auto* seg = reinterpret_cast<mlx5_wqe_data_seg*>(wq.addr + (rq_pi & ((1u << kLogRq) - 1)) * kRqStride);
        mlx5dv_set_data_seg(seg, len, lkey, reinterpret_cast<std::uintptr_t>(addr));
        mlx5dv_set_data_seg(seg + 1, 0, MLX5_INVALID_LKEY, 0);
        ++rq_pi;
        std::atomic_thread_fence(std::memory_order_release);
        reinterpret_cast<volatile __be32*>(qp_dbr.addr)[MLX5_RCV_DBR] = htobe32(rq_pi & 0xffff);
    }

    // A signaled SEND_IMM or RDMA_WRITE_IMM of one SGE: ctrl [+ raddr] + data segment, the
    // record's send counter, then the first 8 bytes of the WQE to the UAR's register.
    void post_send(std::uint8_t opcode, std::uint32_t imm_host, std::uint32_t lkey, void* addr, std::uint32_t len,
                   std::uint64_t raddr = 0, std::uint32_t rkey = 0) {
        std::byte* sq = wq.addr + (std::size_t{kRqStride} << kLogRq);
        auto* ctrl = reinterpret_cast<mlx5_wqe_ctrl_seg*>(sq + (sq_pi & ((1u << kLogSq) - 1)) * MLX5_SEND_WQE_BB);
        auto* next = reinterpret_cast<std::byte*>(ctrl + 1);
        std::uint8_t ds = 2;
        if (opcode == MLX5_OPCODE_RDMA_WRITE_IMM) {
            auto* r = reinterpret_cast<mlx5_wqe_raddr_seg*>(next);
            r->raddr = htobe64(raddr);
            r->rkey = htobe32(rkey);
            r->reserved = 0;
            next += sizeof(*r);
            ds = 3;
        }
        mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(next), len, lkey, reinterpret_cast<std::uintptr_t>(addr));
        mlx5dv_set_ctrl_seg(ctrl, sq_pi & 0xffff, opcode, 0, qpn, MLX5_WQE_CTRL_CQ_UPDATE, ds, 0, htobe32(imm_host));
        ++sq_pi;
        std::atomic_thread_fence(std::memory_order_release);
        reinterpret_cast<volatile __be32*>(qp_dbr.addr)[MLX5_SND_DBR] = htobe32(sq_pi & 0xffff);
        std::atomic_thread_fence(std::memory_order_release);
        std::uint64_t first;
        std::memcpy(&first, ctrl, 8);
        *static_cast<volatile std::uint64_t*>(e.uar->reg_addr) = first;
    }

    // The next CQE, waited for; the consumer index goes to the CQ's doorbell record.
    mlx5_cqe64 poll() {
        auto* ring = reinterpret_cast<mlx5_cqe64*>(cq_ring.addr);
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        for (;;) {
            mlx5_cqe64* c = &ring[ci & ((1u << kLogCq) - 1)];
            const std::uint8_t op = mlx5dv_get_cqe_opcode(c);
            if (op != MLX5_CQE_INVALID && mlx5dv_get_cqe_owner(c) == ((ci >> kLogCq) & 1)) {
                std::atomic_thread_fence(std::memory_order_acquire);
                mlx5_cqe64 out = *c;
                if (op == MLX5_CQE_REQ_ERR || op == MLX5_CQE_RESP_ERR) {
                    const auto* err = reinterpret_cast<const mlx5_err_cqe*>(&out);
                    MESSAGE("DevX QP ", qpn, ": error CQE, syndrome 0x", std::hex, unsigned{err->syndrome},
                            " vendor 0x", unsigned{err->vendor_err_synd});
                }
                ++ci;
                reinterpret_cast<volatile __be32*>(cq_dbr.addr)[0]  /* update_ci */ = htobe32(ci & 0xffffff);
                return out;
            }
            REQUIRE_MESSAGE(std::chrono::steady_clock::now() < end, "no CQE on DevX CQ ", cqn);
            std::this_thread::yield();
        }
    }
};

// A buffer of libmlx5's, registered with ibv_reg_mr.
struct devx_mr {
    aligned_buffer mem{4096, 1 << 16};
    ibv_mr* mr = nullptr;
    explicit devx_mr(ibv_pd* pd) {
        mr = ibv_reg_mr(pd, mem.get(), mem.size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
        REQUIRE_MESSAGE(mr != nullptr, "ibv_reg_mr: ", std::strerror(errno));
    }
    ~devx_mr() { CHECK(ibv_dereg_mr(mr) == 0); }
    std::byte* at(std::size_t off) const { return mem.get() + off; }
};

void fill(std::byte* p, std::size_t n, unsigned seed) {
    for (std::size_t i = 0; i < n; ++i) p[i] = std::byte(static_cast<unsigned char>(seed + i * 13));
}

template <typename T>
T take(cxv::result<T> r) {
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    return std::move(r).value();
}

ibv_wc wait_wc(cxv::cq& cq) {
    ibv_wc wc{};
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (cq.poll(1, &wc) == 0) {
        REQUIRE_MESSAGE(std::chrono::steady_clock::now() < end, "no completion on cxv's CQ");
        std::this_thread::yield();
    }
    return wc;
}

}  // namespace

TEST_CASE("cxv's RC QP <-> an RC QP of libmlx5 DevX on another function, both directions") {
    // libmlx5 on function 1.
    env e(kBdf[1]);
    REQUIRE(wait_port_active(e.ctx));
    const std::uint32_t their_lid = ifc::get<ifc::hca_vport_context::lid>(query_vport(e.ctx).data());
    devx_rc theirs(e);
    devx_mr tmr(e.pd);
    // cxv on function 0.
    auto dev = take(cxv::device::open(kBdf[0]));
    auto pd = take(dev->alloc_pd());
    std::vector<std::byte> buf(1 << 16);
    auto mr = take(cxv::mr::create(pd, buf.data(), buf.size(), cxv::access_local_write | cxv::access_remote_write));
    auto cq = take(cxv::cq::create(*dev, 64));
    cxv::qp::attr qa;
    qa.domain = pd;
    qa.send_cq = qa.recv_cq = cq;
    qa.cap = {16, 16, 1, 1, 0};
    auto ours = take(cxv::qp::create(*dev, qa));
    const auto port = take(dev->port(1));

    theirs.connect(port.lid, ours->qpn());
    cxv::qp::modify_attr m;
    m.access = cxv::access_local_write | cxv::access_remote_write;
    m.dest_qpn = theirs.qpn;
    m.ah.dlid = static_cast<std::uint16_t>(their_lid);
    m.path_mtu = 3;
    for (auto s : {cxv::qp_state::init, cxv::qp_state::rtr, cxv::qp_state::rts}) {
        const auto st = ours->modify(s, m);
        REQUIRE_MESSAGE(st.ok(), (st.ok() ? "" : st.error().message));
    }

    // cxv -> libmlx5: SEND with immediate.
    theirs.post_recv(tmr.mr->lkey, tmr.at(0), 1024);
    fill(buf.data(), 256, 1);
    ibv_sge s{reinterpret_cast<std::uint64_t>(buf.data()), 256, mr->lkey()};
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htobe32(0xabcd0001);
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ours->post_send(&wr, &bad) == 0);
    mlx5_cqe64 c = theirs.poll();
    CHECK(mlx5dv_get_cqe_opcode(&c) == MLX5_CQE_RESP_SEND_IMM);
    CHECK(be32toh(c.byte_cnt) == 256);
    CHECK(be32toh(c.imm_inval_pkey) == 0xabcd0001);
    CHECK((be32toh(c.sop_drop_qpn) & 0xffffff) == theirs.qpn);
    CHECK(be16toh(c.wqe_counter) == 0);
    CHECK(std::memcmp(tmr.at(0), buf.data(), 256) == 0);
    ibv_wc wc = wait_wc(*cq);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_SEND);

    // cxv -> libmlx5: RDMA WRITE with immediate into libmlx5's registered memory.
    theirs.post_recv(tmr.mr->lkey, tmr.at(0), 1024);
    fill(buf.data() + 4096, 3000, 2);
    s = {reinterpret_cast<std::uint64_t>(buf.data() + 4096), 3000, mr->lkey()};
    wr.wr_id = 2;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htobe32(0xabcd0002);
    wr.wr.rdma.remote_addr = reinterpret_cast<std::uint64_t>(tmr.at(8192));
    wr.wr.rdma.rkey = tmr.mr->rkey;
    REQUIRE(ours->post_send(&wr, &bad) == 0);
    c = theirs.poll();
    CHECK(mlx5dv_get_cqe_opcode(&c) == MLX5_CQE_RESP_WR_IMM);
    CHECK(be32toh(c.byte_cnt) == 3000);
    CHECK(be32toh(c.imm_inval_pkey) == 0xabcd0002);
    CHECK(std::memcmp(tmr.at(8192), buf.data() + 4096, 3000) == 0);
    wc = wait_wc(*cq);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_RDMA_WRITE);

    // libmlx5 -> cxv: SEND with immediate into a receive posted through cxv.
    ibv_sge r{reinterpret_cast<std::uint64_t>(buf.data() + 0x8000), 2048, mr->lkey()};
    ibv_recv_wr rwr{};
    rwr.wr_id = 10;
    rwr.sg_list = &r;
    rwr.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    REQUIRE(ours->post_recv(&rwr, &rbad) == 0);
    fill(tmr.at(0x4000), 777, 3);
    theirs.post_send(MLX5_OPCODE_SEND_IMM, 0x5150, tmr.mr->lkey, tmr.at(0x4000), 777);
    wc = wait_wc(*cq);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_RECV);
    CHECK(wc.wr_id == 10);
    CHECK(wc.byte_len == 777);
    CHECK((wc.wc_flags & IBV_WC_WITH_IMM) != 0);
    CHECK(be32toh(wc.imm_data) == 0x5150);
    CHECK(std::memcmp(buf.data() + 0x8000, tmr.at(0x4000), 777) == 0);
    c = theirs.poll();
    CHECK(mlx5dv_get_cqe_opcode(&c) == MLX5_CQE_REQ);
    CHECK(be16toh(c.wqe_counter) == 0);
    CHECK((be32toh(c.sop_drop_qpn) >> 24) == MLX5_OPCODE_SEND_IMM);

    // libmlx5 -> cxv: RDMA WRITE with immediate into cxv's registered memory.
    rwr.wr_id = 11;
    REQUIRE(ours->post_recv(&rwr, &rbad) == 0);
    fill(tmr.at(0x6000), 5000, 4);
    theirs.post_send(MLX5_OPCODE_RDMA_WRITE_IMM, 0x5151, tmr.mr->lkey, tmr.at(0x6000), 5000,
                     reinterpret_cast<std::uint64_t>(buf.data() + 0xa000), mr->rkey());
    wc = wait_wc(*cq);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
    CHECK(wc.byte_len == 5000);
    CHECK(be32toh(wc.imm_data) == 0x5151);
    CHECK(std::memcmp(buf.data() + 0xa000, tmr.at(0x6000), 5000) == 0);
    c = theirs.poll();
    CHECK(mlx5dv_get_cqe_opcode(&c) == MLX5_CQE_REQ);
    CHECK(be16toh(c.wqe_counter) == 1);
    CHECK((be32toh(c.sop_drop_qpn) >> 24) == MLX5_OPCODE_RDMA_WRITE_IMM);
}

TEST_CASE("two libmlx5 DevX RC QPs in loopback on one function") {
    env e(kBdf[1]);
    REQUIRE(wait_port_active(e.ctx));
    const std::uint32_t lid = ifc::get<ifc::hca_vport_context::lid>(query_vport(e.ctx).data());
    devx_rc a(e), b(e);
    devx_mr mem(e.pd);
    a.connect(lid, b.qpn);
    b.connect(lid, a.qpn);
    for (unsigned round = 0; round < 20; ++round) {
        devx_rc& tx = round % 2 ? b : a;
        devx_rc& rx = round % 2 ? a : b;
        rx.post_recv(mem.mr->lkey, mem.at(0x8000), 2048);
        fill(mem.at(0), 1500, round);
        if (round % 4 < 2) {
            tx.post_send(MLX5_OPCODE_SEND_IMM, round, mem.mr->lkey, mem.at(0), 1500);
        } else {
            tx.post_send(MLX5_OPCODE_RDMA_WRITE_IMM, round, mem.mr->lkey, mem.at(0), 1500,
                         reinterpret_cast<std::uint64_t>(mem.at(0x8000)), mem.mr->rkey);
        }
        mlx5_cqe64 rc = rx.poll();
        CHECK(mlx5dv_get_cqe_opcode(&rc) == (round % 4 < 2 ? MLX5_CQE_RESP_SEND_IMM : MLX5_CQE_RESP_WR_IMM));
        CHECK(be32toh(rc.byte_cnt) == 1500);
        CHECK(be32toh(rc.imm_inval_pkey) == round);
        CHECK(std::memcmp(mem.at(0x8000), mem.at(0), 1500) == 0);
        mlx5_cqe64 sc = tx.poll();
        CHECK(mlx5dv_get_cqe_opcode(&sc) == MLX5_CQE_REQ);
    }
}

TEST_CASE("DevX: a QP on its own Q counter set counts the WRITEs it executed as responder") {
    env e(kBdf[1]);
    REQUIRE(wait_port_active(e.ctx));  // the SM assigns the LID
    const std::uint32_t lid = ifc::get<ifc::hca_vport_context::lid>(query_vport(e.ctx).data());
    const result alloc = general_cmd(e.ctx, input<ifc::alloc_q_counter_in>(cmd_opcode::ALLOC_Q_COUNTER),
                                     ifc::alloc_q_counter_out::size_bytes);
    REQUIRE_MESSAGE(alloc.ok(), describe(cmd_opcode::ALLOC_Q_COUNTER, alloc));
    const std::uint32_t set = ifc::get<ifc::alloc_q_counter_out::counter_set_id>(alloc.data());
    CHECK(set != 0);
    const auto query = [&] {
        auto in = input<ifc::query_q_counter_in>(cmd_opcode::QUERY_Q_COUNTER);
        ifc::set<ifc::query_q_counter_in::counter_set_id>(in.data(), set);
        const result r = general_cmd(e.ctx, in, ifc::query_q_counter_out::size_bytes);
        REQUIRE_MESSAGE(r.ok(), describe(cmd_opcode::QUERY_Q_COUNTER, r));
        return r;
    };
    auto dealloc = input<ifc::dealloc_q_counter_in>(cmd_opcode::DEALLOC_Q_COUNTER);
    ifc::set<ifc::dealloc_q_counter_in::counter_set_id>(dealloc.data(), set);
    {
        devx_rc a(e), b(e);
        devx_mr mem(e.pd);
        a.connect(lid, b.qpn, set);  // a counts to the new set, b to the default one
        b.connect(lid, a.qpn);
        const auto write = [&](devx_rc& tx, devx_rc& rx, unsigned id) {
            rx.post_recv(mem.mr->lkey, mem.at(0x8000), 2048);
            tx.post_send(MLX5_OPCODE_RDMA_WRITE_IMM, id, mem.mr->lkey, mem.at(0), 512,
                         reinterpret_cast<std::uint64_t>(mem.at(0x8000)), mem.mr->rkey);
            mlx5_cqe64 rc = rx.poll();
            CHECK(mlx5dv_get_cqe_opcode(&rc) == MLX5_CQE_RESP_WR_IMM);
            mlx5_cqe64 sc = tx.poll();
            CHECK(mlx5dv_get_cqe_opcode(&sc) == MLX5_CQE_REQ);
        };
        for (unsigned i = 0; i < 2; ++i) write(a, b, i);  // b executes: not a's set
        CHECK(ifc::get<ifc::query_q_counter_out::rx_write_requests>(query().data()) == 0);
        for (unsigned i = 0; i < 3; ++i) write(b, a, 10 + i);
        const result r = query();
        CHECK(ifc::get<ifc::query_q_counter_out::rx_write_requests>(r.data()) == 3);
        CHECK(ifc::get<ifc::query_q_counter_out::out_of_buffer>(r.data()) == 0);
        CHECK(ifc::get<ifc::query_q_counter_out::req_cqe_error>(r.data()) == 0);
        // A set a QP counts to stays.
        const result busy = general_cmd(e.ctx, dealloc, ifc::dealloc_q_counter_out::size_bytes);
        CHECK(busy.err == EREMOTEIO);
        CHECK_MESSAGE(busy.status() == cmd_status::RESOURCE_BUSY, describe(cmd_opcode::DEALLOC_Q_COUNTER, busy));
    }
    const result freed = general_cmd(e.ctx, dealloc, ifc::dealloc_q_counter_out::size_bytes);
    CHECK_MESSAGE(freed.ok(), describe(cmd_opcode::DEALLOC_Q_COUNTER, freed));
}

}  // namespace cxv::test::vfio
