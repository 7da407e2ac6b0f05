// Ethernet objects (sim/firmware/fw_eth.cc): transport domains, TISs, SQs, RQs, RQTs and
// TIRs as Linux 6.1's mlx5e makes them (en_common.c, en_main.c, en/params.c, en/rqt.c,
// en/tir.c), their refusals, and what an Ethernet port announces for them. Every input is
// written and every output read at the offsets of Linux's mlx5_ifc.h, never through hw/'s
// layouts, so that a layout mistake the model shares with hw/ shows here.
#include <array>
#include <set>
#include <vector>

#include <doctest/doctest.h>

#include "tests/sim/linux_ifc.h"
#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;

namespace {

// QUERY_HCA_CAP op_mod: type << 1 | HCA_CAP_OPMOD_GET_CUR (Linux's enum mlx5_cap_type).
constexpr std::uint16_t kCapGeneral = 0 << 1 | 1, kCapEthernetOffloads = 1 << 1 | 1;
// include/linux/mlx5/device.h: MLX5_L3_PROT_TYPE_IPV4, MLX5_L4_PROT_TYPE_TCP, MLX5_HASH_FIELD_SEL_*.
constexpr std::uint32_t kL3Ipv4 = 0, kL4Tcp = 0;
constexpr std::uint32_t kSelSrcIp = 1 << 0, kSelDstIp = 1 << 1, kSelL4Sport = 1 << 2, kSelL4Dport = 1 << 3;
constexpr unsigned kIndirect = MLX5_TIRC_DISP_TYPE_INDIRECT;
constexpr unsigned kLro = MLX5_TIRC_PACKET_MERGE_MASK_IPV4_LRO | MLX5_TIRC_PACKET_MERGE_MASK_IPV6_LRO;
// A Toeplitz key (the one of Microsoft's RSS verification suite): mlx5e fills 40 random bytes.
constexpr std::array<std::uint32_t, 10> kKey{0x6d5a56da, 0x255b0ec2, 0x4167253d, 0x43a38fb0, 0xd0ca2bcb,
                                             0xae7b30b4, 0x77cb2da3, 0x8030f20c, 0x6a42b73b, 0xbeac01fa};

// DESTROY_* and QUERY_* of the object numbered `n`: field `fld` of Linux's layout `typ`.
std::vector<std::byte> named(std::size_t bytes, cmd_opcode op, std::size_t off, std::size_t width, std::uint32_t n) {
    auto in = linux_command(bytes, op);
    linux_put(in, off, width, n);
    return in;
}
#define NAMED(typ, op, fld, n) \
    named(CXV_LINUX_BYTES(typ), cmd_opcode::op, CXV_LINUX_OFF(typ, fld), CXV_LINUX_WIDTH(typ, fld), (n))
// cmd_result name(H&, n): the command `op` of input `typ` naming object n, its output `out`.
#define BY_NUMBER(name, op, typ, fld, out) \
    cmd_result name(H& h, std::uint32_t n) { return h.exec(NAMED(typ, op, fld, n), CXV_LINUX_BYTES(out)); }

#define CAP(r, fld) CXV_LINUX_GET(query_hca_cap_out, (r).out, capability.fld)

// --- transport domain and TIS --------------------------------------------------------

cmd_result alloc_td(H& h, std::uint16_t uid = 0) {
    auto in = linux_command(CXV_LINUX_BYTES(alloc_transport_domain_in), cmd_opcode::ALLOC_TRANSPORT_DOMAIN);
    CXV_LINUX_SET(alloc_transport_domain_in, in, uid, uid);
    return h.exec(in, CXV_LINUX_BYTES(alloc_transport_domain_out));
}
std::uint32_t td_of(const cmd_result& r) { return CXV_LINUX_GET(alloc_transport_domain_out, r.out, transport_domain); }
cmd_result dealloc_td(H& h, std::uint32_t td, std::uint16_t uid = 0) {
    auto in = linux_command(CXV_LINUX_BYTES(dealloc_transport_domain_in), cmd_opcode::DEALLOC_TRANSPORT_DOMAIN);
    CXV_LINUX_SET(dealloc_transport_domain_in, in, uid, uid);
    CXV_LINUX_SET(dealloc_transport_domain_in, in, transport_domain, td);
    return h.exec(in, CXV_LINUX_BYTES(dealloc_transport_domain_out));
}

// As mlx5e_create_tises: prio tc << 1 and the domain (mlx5e_create_tis).
cmd_result create_tis(H& h, std::uint32_t td, unsigned tc = 0, std::uint16_t uid = 0) {
    auto in = linux_command(CXV_LINUX_BYTES(create_tis_in), cmd_opcode::CREATE_TIS);
    CXV_LINUX_SET(create_tis_in, in, uid, uid);
    CXV_LINUX_SET(create_tis_in, in, ctx.prio, tc << 1);
    CXV_LINUX_SET(create_tis_in, in, ctx.transport_domain, td);
    return h.exec(in, CXV_LINUX_BYTES(create_tis_out));
}
std::uint32_t tisn_of(const cmd_result& r) { return CXV_LINUX_GET(create_tis_out, r.out, tisn); }
cmd_result destroy_tis(H& h, std::uint32_t n, std::uint16_t uid = 0) {
    auto in = NAMED(destroy_tis_in, DESTROY_TIS, tisn, n);
    CXV_LINUX_SET(destroy_tis_in, in, uid, uid);
    return h.exec(in, CXV_LINUX_BYTES(destroy_tis_out));
}

// --- SQ and RQ -------------------------------------------------------------------------

std::size_t ring_pages(unsigned log_sz, unsigned log_stride, unsigned log_pg) {
    const std::uint64_t page = std::uint64_t{4096} << log_pg;
    return static_cast<std::size_t>(((std::uint64_t{1} << (log_sz + log_stride)) + page - 1) / page);
}

// What mlx5e_create_sq sends (the context of mlx5e_build_sq_param).
struct sq_spec {
    std::uint32_t cqn = 0, tisn = 0, pd = 0, uar = 0;
    std::uint64_t buf = 0, dbr = 0;
    unsigned state = MLX5_SQC_STATE_RST;
    unsigned wq_type = MLX5_WQ_TYPE_CYCLIC;
    unsigned log_wq_stride = 6;  // ilog2(MLX5_SEND_WQE_BB)
    unsigned log_wq_sz = 6;      // 64 WQE-BBs: one page
    unsigned tis_lst_sz = 1;
    int npas = -1;  // -1: the pages the ring needs
};

cmd_result create_sq(H& h, const sq_spec& s) {
    const std::size_t n = s.npas >= 0 ? static_cast<std::size_t>(s.npas) : ring_pages(s.log_wq_sz, s.log_wq_stride, 0);
    auto in = linux_command(CXV_LINUX_BYTES(create_sq_in) + 8 * n, cmd_opcode::CREATE_SQ);
    CXV_LINUX_SET(create_sq_in, in, ctx.tis_lst_sz, s.tis_lst_sz);
    CXV_LINUX_SET(create_sq_in, in, ctx.tis_num_0, s.tisn);
    CXV_LINUX_SET(create_sq_in, in, ctx.cqn, s.cqn);
    CXV_LINUX_SET(create_sq_in, in, ctx.state, s.state);
    CXV_LINUX_SET(create_sq_in, in, ctx.flush_in_error_en, 1);
    CXV_LINUX_SET(create_sq_in, in, ctx.wq.wq_type, s.wq_type);
    CXV_LINUX_SET(create_sq_in, in, ctx.wq.pd, s.pd);
    CXV_LINUX_SET(create_sq_in, in, ctx.wq.uar_page, s.uar);
    CXV_LINUX_SET(create_sq_in, in, ctx.wq.dbr_addr, s.dbr);
    CXV_LINUX_SET(create_sq_in, in, ctx.wq.log_wq_stride, s.log_wq_stride);
    CXV_LINUX_SET(create_sq_in, in, ctx.wq.log_wq_pg_sz, 0);
    CXV_LINUX_SET(create_sq_in, in, ctx.wq.log_wq_sz, s.log_wq_sz);
    for (std::size_t i = 0; i < n; ++i) linux_put(in, CXV_LINUX_BYTES(create_sq_in) * 8 + 64 * i, 64, s.buf + 4096 * i);
    return h.exec(in, CXV_LINUX_BYTES(create_sq_out));
}
std::uint32_t sqn_of(const cmd_result& r) { return CXV_LINUX_GET(create_sq_out, r.out, sqn); }

// As mlx5e_modify_sq: sq_state the state the driver believes, ctx.state the next one.
cmd_result modify_sq(H& h, std::uint32_t sqn, unsigned cur, unsigned next, std::uint64_t bitmask = 0) {
    auto in = linux_command(CXV_LINUX_BYTES(modify_sq_in), cmd_opcode::MODIFY_SQ);
    CXV_LINUX_SET(modify_sq_in, in, sq_state, cur);
    CXV_LINUX_SET(modify_sq_in, in, sqn, sqn);
    CXV_LINUX_SET(modify_sq_in, in, modify_bitmask, bitmask);
    CXV_LINUX_SET(modify_sq_in, in, ctx.state, next);
    return h.exec(in, CXV_LINUX_BYTES(modify_sq_out));
}
BY_NUMBER(query_sq, QUERY_SQ, query_sq_in, sqn, query_sq_out)
BY_NUMBER(destroy_sq, DESTROY_SQ, destroy_sq_in, sqn, destroy_sq_out)
unsigned sq_state(H& h, std::uint32_t sqn) {
    const auto q = require_ok(query_sq(h, sqn));
    return static_cast<unsigned>(CXV_LINUX_GET(query_sq_out, q.out, sq_context.state));
}

// What mlx5e_create_rq sends (the context of mlx5e_build_rq_param): by default a cyclic RQ
// of 1024 WQEs of one 16-byte data segment (MLX5E_PARAMS_DEFAULT_LOG_RQ_SIZE).
struct rq_spec {
    std::uint32_t cqn = 0, pd = 0;
    std::uint64_t buf = 0, dbr = 0;
    unsigned wq_type = MLX5_WQ_TYPE_CYCLIC;
    unsigned log_wq_stride = 4;
    unsigned log_wq_sz = 10;
    unsigned log_wqe_num_of_strides = 0, log_wqe_stride_size = 0;  // striding: less their bases 9 and 6
    unsigned mem_rq_type = 0;
    std::uint32_t counter_set_id = 0;
    unsigned vsd = 0, scatter_fcs = 0;
    int npas = -1;
};

cmd_result create_rq(H& h, const rq_spec& s) {
    const std::size_t n = s.npas >= 0 ? static_cast<std::size_t>(s.npas) : ring_pages(s.log_wq_sz, s.log_wq_stride, 0);
    auto in = linux_command(CXV_LINUX_BYTES(create_rq_in) + 8 * n, cmd_opcode::CREATE_RQ);
    CXV_LINUX_SET(create_rq_in, in, ctx.mem_rq_type, s.mem_rq_type);
    CXV_LINUX_SET(create_rq_in, in, ctx.vsd, s.vsd);
    CXV_LINUX_SET(create_rq_in, in, ctx.scatter_fcs, s.scatter_fcs);
    CXV_LINUX_SET(create_rq_in, in, ctx.state, MLX5_RQC_STATE_RST);
    CXV_LINUX_SET(create_rq_in, in, ctx.cqn, s.cqn);
    CXV_LINUX_SET(create_rq_in, in, ctx.counter_set_id, s.counter_set_id);
    CXV_LINUX_SET(create_rq_in, in, ctx.wq.wq_type, s.wq_type);
    CXV_LINUX_SET(create_rq_in, in, ctx.wq.pd, s.pd);
    CXV_LINUX_SET(create_rq_in, in, ctx.wq.dbr_addr, s.dbr);
    CXV_LINUX_SET(create_rq_in, in, ctx.wq.log_wq_stride, s.log_wq_stride);
    CXV_LINUX_SET(create_rq_in, in, ctx.wq.log_wq_pg_sz, 0);
    CXV_LINUX_SET(create_rq_in, in, ctx.wq.log_wq_sz, s.log_wq_sz);
    CXV_LINUX_SET(create_rq_in, in, ctx.wq.log_wqe_num_of_strides, s.log_wqe_num_of_strides);
    CXV_LINUX_SET(create_rq_in, in, ctx.wq.log_wqe_stride_size, s.log_wqe_stride_size);
    for (std::size_t i = 0; i < n; ++i) linux_put(in, CXV_LINUX_BYTES(create_rq_in) * 8 + 64 * i, 64, s.buf + 4096 * i);
    return h.exec(in, CXV_LINUX_BYTES(create_rq_out));
}
// The linked-list striding RQ mlx5e prefers: MLX5E_PARAMS_DEFAULT_LOG_RQ_SIZE_MPW (8) WQEs
// of 32 bytes (a next segment and one data segment).
rq_spec striding(rq_spec s) {
    s.wq_type = MLX5_WQ_TYPE_LINKED_LIST_STRIDING_RQ, s.log_wq_stride = 5, s.log_wq_sz = 3;
    return s;
}
std::uint32_t rqn_of(const cmd_result& r) { return CXV_LINUX_GET(create_rq_out, r.out, rqn); }

// MODIFY_RQ: `f` gives the fields the bitmask may change (vsd, scatter_fcs, counter_set_id).
cmd_result modify_rq(H& h, std::uint32_t rqn, unsigned cur, unsigned next, std::uint64_t bitmask = 0,
                     const rq_spec& f = {}) {
    auto in = linux_command(CXV_LINUX_BYTES(modify_rq_in), cmd_opcode::MODIFY_RQ);
    CXV_LINUX_SET(modify_rq_in, in, rq_state, cur);
    CXV_LINUX_SET(modify_rq_in, in, rqn, rqn);
    CXV_LINUX_SET(modify_rq_in, in, modify_bitmask, bitmask);
    CXV_LINUX_SET(modify_rq_in, in, ctx.state, next);
    CXV_LINUX_SET(modify_rq_in, in, ctx.vsd, f.vsd);
    CXV_LINUX_SET(modify_rq_in, in, ctx.scatter_fcs, f.scatter_fcs);
    CXV_LINUX_SET(modify_rq_in, in, ctx.counter_set_id, f.counter_set_id);
    return h.exec(in, CXV_LINUX_BYTES(modify_rq_out));
}
BY_NUMBER(query_rq, QUERY_RQ, query_rq_in, rqn, query_rq_out)
BY_NUMBER(destroy_rq, DESTROY_RQ, destroy_rq_in, rqn, destroy_rq_out)

std::uint32_t alloc_q_counter(H& h) {
    const auto r = require_ok(h.exec(linux_command(CXV_LINUX_BYTES(alloc_q_counter_in), cmd_opcode::ALLOC_Q_COUNTER),
                             CXV_LINUX_BYTES(alloc_q_counter_out)));
    return static_cast<std::uint32_t>(CXV_LINUX_GET(alloc_q_counter_out, r.out, counter_set_id));
}

// --- RQT and TIR -----------------------------------------------------------------------

// As mlx5e_rqt_init (create) and mlx5e_rqt_redirect (modify, bitmask.rqn_list): the
// context, then `entries` 32-bit rq_num entries (default: all of rqns); rqt_actual_size
// `actual` (default: rqns.size()).
std::vector<std::byte> rqt_input(cmd_opcode op, std::size_t layout_bytes, std::size_t ctx_bit, unsigned max,
                                 const std::vector<std::uint32_t>& rqns, int actual, int entries) {
    const std::size_t n = entries >= 0 ? static_cast<std::size_t>(entries) : rqns.size();
    auto in = linux_command(layout_bytes + 4 * n, op);
    linux_put(in, ctx_bit + CXV_LINUX_OFF(rqtc, rqt_max_size), CXV_LINUX_WIDTH(rqtc, rqt_max_size), max);
    linux_put(in, ctx_bit + CXV_LINUX_OFF(rqtc, rqt_actual_size), CXV_LINUX_WIDTH(rqtc, rqt_actual_size),
              actual >= 0 ? static_cast<std::size_t>(actual) : rqns.size());
    for (std::size_t i = 0; i < n && i < rqns.size(); ++i) {
        linux_put(in, layout_bytes * 8 + 32 * i + CXV_LINUX_OFF(rq_num, rq_num), CXV_LINUX_WIDTH(rq_num, rq_num),
                  rqns[i]);
    }
    return in;
}
cmd_result create_rqt(H& h, unsigned max, const std::vector<std::uint32_t>& rqns, int actual = -1, int entries = -1) {
    return h.exec(rqt_input(cmd_opcode::CREATE_RQT, CXV_LINUX_BYTES(create_rqt_in),
                            CXV_LINUX_OFF(create_rqt_in, rqt_context), max, rqns, actual, entries),
                  CXV_LINUX_BYTES(create_rqt_out));
}
std::uint32_t rqtn_of(const cmd_result& r) { return CXV_LINUX_GET(create_rqt_out, r.out, rqtn); }
cmd_result modify_rqt(H& h, std::uint32_t rqtn, const std::vector<std::uint32_t>& rqns, int actual = -1,
                      int entries = -1) {
    auto in = rqt_input(cmd_opcode::MODIFY_RQT, CXV_LINUX_BYTES(modify_rqt_in), CXV_LINUX_OFF(modify_rqt_in, ctx), 0,
                        rqns, actual, entries);
    CXV_LINUX_SET(modify_rqt_in, in, rqtn, rqtn);
    CXV_LINUX_SET(modify_rqt_in, in, bitmask.rqn_list, 1);
    return h.exec(in, CXV_LINUX_BYTES(modify_rqt_out));
}
BY_NUMBER(destroy_rqt, DESTROY_RQT, destroy_rqt_in, rqtn, destroy_rqt_out)

// A TIR context as mlx5e_tir_builder_* writes it.
struct tir_spec {
    std::uint32_t td = 0;
    unsigned disp_type = MLX5_TIRC_DISP_TYPE_DIRECT;
    std::uint32_t inline_rqn = 0, rqt = 0;
    unsigned hash_fn = MLX5_RX_HASH_FN_NONE;
    bool symmetric = false;
    std::array<std::uint32_t, 10> key{};
    std::uint32_t l3 = 0, l4 = 0, fields = 0;  // rx_hash_field_selector_outer
    unsigned packet_merge_mask = 0;
    unsigned tunneled = 0;
    unsigned self_lb_block = 0;
};

// Writes `s` into the tirc at bit `ctx` of `in`.
void put_tirc(std::vector<std::byte>& in, std::size_t ctx, const tir_spec& s) {
#define TIRC(fld, v) linux_put(in, ctx + CXV_LINUX_OFF(tirc, fld), CXV_LINUX_WIDTH(tirc, fld), (v))
    TIRC(transport_domain, s.td);
    TIRC(disp_type, s.disp_type);
    TIRC(inline_rqn, s.inline_rqn);
    TIRC(indirect_table, s.rqt);
    TIRC(tunneled_offload_en, s.tunneled);
    TIRC(rx_hash_fn, s.hash_fn);
    TIRC(rx_hash_symmetric, s.symmetric ? 1 : 0);
    TIRC(packet_merge_mask, s.packet_merge_mask);
    if (s.packet_merge_mask) {
        TIRC(lro_max_ip_payload_size, (64 * 1024 - 256) >> 8);  // mlx5e_tir_builder_build_packet_merge
        TIRC(lro_timeout_period_usecs, 32);
    }
    TIRC(self_lb_block, s.self_lb_block);
    TIRC(rx_hash_field_selector_outer.l3_prot_type, s.l3);
    TIRC(rx_hash_field_selector_outer.l4_prot_type, s.l4);
    TIRC(rx_hash_field_selector_outer.selected_fields, s.fields);
#undef TIRC
    for (std::size_t i = 0; i < s.key.size(); ++i)
        linux_put(in, ctx + CXV_LINUX_OFF(tirc, rx_hash_toeplitz_key) + 32 * i, 32, s.key[i]);
}

cmd_result create_tir(H& h, const tir_spec& s) {
    auto in = linux_command(CXV_LINUX_BYTES(create_tir_in), cmd_opcode::CREATE_TIR);
    put_tirc(in, CXV_LINUX_OFF(create_tir_in, ctx), s);
    return h.exec(in, CXV_LINUX_BYTES(create_tir_out));
}
std::uint32_t tirn_of(const cmd_result& r) { return CXV_LINUX_GET(create_tir_out, r.out, tirn); }
BY_NUMBER(query_tir, QUERY_TIR, query_tir_in, tirn, query_tir_out)
BY_NUMBER(destroy_tir, DESTROY_TIR, destroy_tir_in, tirn, destroy_tir_out)
struct tir_bitmask {
    unsigned self_lb_en = 0, hash = 0, packet_merge = 0;
};
cmd_result modify_tir(H& h, std::uint32_t tirn, const tir_bitmask& b, const tir_spec& s) {
    auto in = linux_command(CXV_LINUX_BYTES(modify_tir_in), cmd_opcode::MODIFY_TIR);
    CXV_LINUX_SET(modify_tir_in, in, tirn, tirn);
    CXV_LINUX_SET(modify_tir_in, in, bitmask.self_lb_en, b.self_lb_en);
    CXV_LINUX_SET(modify_tir_in, in, bitmask.hash, b.hash);
    CXV_LINUX_SET(modify_tir_in, in, bitmask.packet_merge, b.packet_merge);
    put_tirc(in, CXV_LINUX_OFF(modify_tir_in, ctx), s);
    return h.exec(in, CXV_LINUX_BYTES(modify_tir_out));
}
#define TIR_GET(r, fld) CXV_LINUX_GET(query_tir_out, (r).out, tir_context.fld)
std::uint64_t key_word(const cmd_result& q, std::size_t i) {
    return linux_bits(q.out, CXV_LINUX_OFF(query_tir_out, tir_context.rx_hash_toeplitz_key) + 32 * i, 32);
}

// An RSS TIR as mlx5e builds it for one traffic type: build_rqt, then build_rss with a
// symmetric Toeplitz hash over IPv4/TCP `fields`.
tir_spec rss_tir(std::uint32_t td, std::uint32_t rqt, std::uint32_t fields) {
    tir_spec s{.td = td, .disp_type = kIndirect, .rqt = rqt, .hash_fn = MLX5_RX_HASH_FN_TOEPLITZ, .symmetric = true};
    s.key = kKey, s.l3 = kL3Ipv4, s.l4 = kL4Tcp, s.fields = fields;
    return s;
}
// The 256 entries of mlx5e's RSS table spread uniformly over two RQs (mlx5e_rss_params_indir_init_uniform).
std::vector<std::uint32_t> spread(std::uint32_t a, std::uint32_t b) {
    std::vector<std::uint32_t> v(256);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = i % 2 ? b : a;
    return v;
}

// --- the fixture ---------------------------------------------------------------------------

// An Ethernet function brought up with what mlx5e_create_mdev_resources makes (a PD, a
// transport domain, a UAR) and a CQ; a ring buffer of 16 pages and a page of doorbell
// records that every queue here shares.
struct eth_env {
    H h{ethernet()};
    std::uint32_t pd = 0, uar = 0, td = 0, cq = 0;
    dma_buffer* ring = nullptr;
    unsigned dbrs = 0;

    eth_env() {
        REQUIRE(h.bring_up());
        pd = alloc_pd(h);
        td = td_of(require_ok(alloc_td(h)));
        uar = h.alloc_uar();
        cq = create_small_cq(h);
        ring = &h.alloc(17 * 4096);
    }
    std::uint64_t dbr() { return ring->iova() + 16 * 4096 + 64 * (dbrs++ % 64); }
    std::uint32_t tis() { return tisn_of(require_ok(create_tis(h, td))); }
    sq_spec sq(std::uint32_t tisn) {
        return {.cqn = cq, .tisn = tisn, .pd = pd, .uar = uar, .buf = ring->iova(), .dbr = dbr()};
    }
    rq_spec rq() { return {.cqn = cq, .pd = pd, .buf = ring->iova(), .dbr = dbr()}; }
    std::uint32_t new_sq(std::uint32_t tisn) { return sqn_of(require_ok(create_sq(h, sq(tisn)))); }
    std::uint32_t new_rq() { return rqn_of(require_ok(create_rq(h, rq()))); }
    std::uint32_t new_rqt(unsigned max, const std::vector<std::uint32_t>& rqns) {
        return rqtn_of(require_ok(create_rqt(h, max, rqns)));
    }
    std::uint32_t new_tir(const tir_spec& s) { return tirn_of(require_ok(create_tir(h, s))); }
};

}  // namespace

// --- capabilities ------------------------------------------------------------------------

TEST_CASE("QUERY_HCA_CAP on an Ethernet port: the general caps size the Ethernet objects; ETHERNET_OFFLOADS answers") {
    H h(ethernet());
    REQUIRE(h.bring_up());
    const auto g = require_ok(query_cap(h, kCapGeneral));
    CHECK(CAP(g, cmd_hca_cap.log_max_transport_domain) == 16);
    CHECK(CAP(g, cmd_hca_cap.log_max_rq) == 16);
    CHECK(CAP(g, cmd_hca_cap.log_max_sq) == 16);
    CHECK(CAP(g, cmd_hca_cap.log_max_tir) == 16);
    CHECK(CAP(g, cmd_hca_cap.log_max_tis) == 16);
    CHECK(CAP(g, cmd_hca_cap.log_max_rqt) == 16);
    CHECK(CAP(g, cmd_hca_cap.log_max_rqt_size) == 11);
    CHECK(CAP(g, cmd_hca_cap.log_max_wq_sz) == 16);
    CHECK(CAP(g, cmd_hca_cap.striding_rq) == 1);
    CHECK(CAP(g, cmd_hca_cap.nic_flow_table) == 1);
    CHECK(CAP(g, cmd_hca_cap.eth_net_offloads) == 1);

    const auto e = require_ok(query_cap(h, kCapEthernetOffloads));
    CHECK(CAP(e, per_protocol_networking_offload_caps.csum_cap) == 1);
    CHECK(CAP(e, per_protocol_networking_offload_caps.vlan_cap) == 1);
    CHECK(CAP(e, per_protocol_networking_offload_caps.self_lb_en_modifiable) == 1);
    CHECK(CAP(e, per_protocol_networking_offload_caps.wqe_inline_mode) == 2);  // MLX5_CAP_INLINE_MODE_NOT_REQUIRED
    CHECK(CAP(e, per_protocol_networking_offload_caps.rss_ind_tbl_cap) == 11);
    CHECK(CAP(e, per_protocol_networking_offload_caps.scatter_fcs) == 1);
    // No LRO: a TIR's packet_merge_mask is refused.
    CHECK(CAP(e, per_protocol_networking_offload_caps.lro_cap) == 0);
}

// --- transport domain and TIS ----------------------------------------------------------------

TEST_CASE_FIXTURE(
    eth_env, "ALLOC_TRANSPORT_DOMAIN: non-zero 24-bit domains; DEALLOC of an unknown, foreign or busy one is refused") {
    const auto a = require_ok(alloc_td(h));
    CHECK(td_of(a) != 0);
    CHECK(linux_bits(a.out, CXV_LINUX_OFF(alloc_transport_domain_out, reserved_at_40), 32) < (1u << 24));
    CHECK(td_of(a) != td);
    check_status(dealloc_td(h, 0xfedcba), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);

    const auto user = require_ok(alloc_td(h, 5));
    check_status(dealloc_td(h, td_of(user)), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    check_status(dealloc_td(h, td_of(a), 5), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    CHECK(dealloc_td(h, td_of(user), 5).status == cmd_status::OK);

    // Held by a TIS, then by a TIR.
    const auto tis = require_ok(create_tis(h, td_of(a)));
    in_use(dealloc_td(h, td_of(a)));
    REQUIRE(destroy_tis(h, tisn_of(tis)).status == cmd_status::OK);
    const auto tirn = new_tir({.td = td_of(a), .inline_rqn = new_rq()});
    in_use(dealloc_td(h, td_of(a)));
    REQUIRE(destroy_tir(h, tirn).status == cmd_status::OK);
    CHECK(dealloc_td(h, td_of(a)).status == cmd_status::OK);
    check_status(dealloc_td(h, td_of(a)), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
}

TEST_CASE_FIXTURE(eth_env,
                  "CREATE_TIS: needs a live domain of its uid; QUERY_TIS reads prio and domain back; an SQ holds it") {
    const auto r = require_ok(create_tis(h, td, 3));
    const auto tisn = tisn_of(r);
    const auto q = require_ok(h.exec(NAMED(query_tis_in, QUERY_TIS, tisn, tisn), CXV_LINUX_BYTES(query_tis_out)));
    CHECK(CXV_LINUX_GET(query_tis_out, q.out, tis_context.prio) == 6);
    CHECK(CXV_LINUX_GET(query_tis_out, q.out, tis_context.transport_domain) == td);
    const auto second = require_ok(create_tis(h, td, 1));
    CHECK(tisn_of(second) != tisn);

    bad_parameter(create_tis(h, 0x777));
    const auto gone = alloc_td(h);
    REQUIRE(dealloc_td(h, td_of(gone)).status == cmd_status::OK);
    bad_parameter(create_tis(h, td_of(gone)));
    // Another uid's domain. (The status is not pinned down by the specification.)
    const auto user_td = td_of(alloc_td(h, 5));
    for (const auto& f : {create_tis(h, user_td), create_tis(h, td, 0, 5)}) {
        CHECK(f.status != cmd_status::OK);
        CHECK_MESSAGE(f.synd() == cmd_syndrome::FOREIGN_RESOURCE, sim::name(f.synd()));
    }
    const auto user_tis = require_ok(create_tis(h, user_td, 0, 5));
    CHECK(destroy_tis(h, tisn_of(user_tis), 5).status == cmd_status::OK);

    const auto sqn = new_sq(tisn);
    in_use(destroy_tis(h, tisn));
    REQUIRE(destroy_sq(h, sqn).status == cmd_status::OK);
    CHECK(destroy_tis(h, tisn).status == cmd_status::OK);
    CHECK(destroy_tis(h, tisn_of(second)).status == cmd_status::OK);
}

// --- SQ ------------------------------------------------------------------------------------------

TEST_CASE_FIXTURE(
    eth_env,
    "CREATE_SQ: as mlx5e sends it, in RST whatever sqc.state says, numbered as QPs are; QUERY_SQ reads it back") {
    const auto tisn = tis();
    auto s = sq(tisn);
    s.state = MLX5_SQC_STATE_RDY;  // ignored: an SQ is created in RST
    const auto r = require_ok(create_sq(h, s));
    const auto q = require_ok(query_sq(h, sqn_of(r)));
    CHECK(CXV_LINUX_GET(query_sq_out, q.out, sq_context.state) == MLX5_SQC_STATE_RST);
    CHECK(CXV_LINUX_GET(query_sq_out, q.out, sq_context.cqn) == cq);
    CHECK(CXV_LINUX_GET(query_sq_out, q.out, sq_context.tis_num_0) == tisn);

    // sqns come from the QP number space: never a live QP's, at least 0x100.
    std::set<std::uint32_t> live{sqn_of(r)};
    CHECK(sqn_of(r) >= 0x100);
    for (int i = 0; i < 4; ++i) {
        auto& buf = h.alloc(2 * 4096);
        const auto qp = require_ok(h.exec(
            create_qp_in({.st = 2, .pd = pd, .uar = uar, .cqn = cq, .buf = buf.iova(), .dbr = buf.iova() + 4096}), 16));
        CHECK(live.insert(qpn_of(qp)).second);
        const auto sqn = new_sq(tisn);
        CHECK(sqn >= 0x100);
        CHECK(live.insert(sqn).second);
    }
}

TEST_CASE_FIXTURE(
    eth_env,
    "CREATE_SQ: the CQ, TIS list, TIS, wq type, stride, size, PD, UAR, doorbell record and page list are checked") {
    const auto tisn = tis();
    auto with = [&](auto change) {
        auto s = sq(tisn);
        change(s);
        return create_sq(h, s);
    };
    check_status(with([](sq_spec& s) { s.cqn = 0x4321; }), cmd_status::BAD_PARAM, cmd_syndrome::BAD_CQ);
    bad_parameter(with([](sq_spec& s) { s.tis_lst_sz = 2; }));
    bad_parameter(with([&](sq_spec& s) { s.tisn = tisn + 0x100; }));
    bad_parameter(with([](sq_spec& s) { s.wq_type = MLX5_WQ_TYPE_LINKED_LIST; }));
    bad_parameter(with([](sq_spec& s) { s.wq_type = MLX5_WQ_TYPE_CYCLIC_STRIDING_RQ; }));
    bad_parameter(with([](sq_spec& s) { s.log_wq_stride = 5; }));
    bad_parameter(with([](sq_spec& s) { s.log_wq_stride = 7; }));
    // 2^17 WQE-BBs, with the whole page list it would need.
    check_status(with([](sq_spec& s) { s.log_wq_sz = 17; }), cmd_status::BAD_PARAM, cmd_syndrome::LOG_SIZE_TOO_BIG);
    check_status(with([](sq_spec& s) { s.pd = 0xabcd; }), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PD);
    check_status(with([&](sq_spec& s) { s.uar = uar + 100; }), cmd_status::BAD_PARAM, cmd_syndrome::BAD_UAR);
    check_status(with([](sq_spec& s) { s.dbr += 4; }), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    // 256 WQE-BBs of 64 bytes need four pages.
    check_status(with([](sq_spec& s) { s.log_wq_sz = 8, s.npas = 3; }), cmd_status::BAD_INPUT_LEN,
                 cmd_syndrome::PAS_TOO_SHORT);
    const auto made = require_ok(with([](sq_spec& s) { s.log_wq_sz = 8, s.npas = 4; }));
    // No TIS at all (tis_lst_sz 0): Linux's mlx5e makes its ICOSQ so (en_main.c,
    // mlx5e_open_icosq), for NOPs and UMRs only; the TIS named beside it is not taken.
    const auto no_tis = require_ok(with([](sq_spec& s) { s.tis_lst_sz = 0, s.tisn = 0x4321; }));
    // Only the one SQ made with it holds the TIS.
    in_use(destroy_tis(h, tisn));
    REQUIRE(destroy_sq(h, sqn_of(made)).status == cmd_status::OK);
    CHECK(destroy_tis(h, tisn).status == cmd_status::OK);
    CHECK(destroy_sq(h, sqn_of(no_tis)).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(
    eth_env,
    "MODIFY_SQ: RST->RDY->RDY->ERR->RST->RDY->RST; other moves, a wrong sq_state and a modify_bitmask are refused") {
    const auto sqn = new_sq(tis());
    auto move = [&](unsigned cur, unsigned next) {
        const auto r = modify_sq(h, sqn, cur, next);
        CHECK_MESSAGE(r.status == cmd_status::OK, cur, "->", next, ": ", sim::name(r.synd()));
        CHECK(sq_state(h, sqn) == next);
    };
    auto refused = [&](unsigned cur, unsigned next, unsigned stays) {
        INFO(cur, "->", next);
        bad_state(modify_sq(h, sqn, cur, next));
        CHECK(sq_state(h, sqn) == stays);
    };
    refused(MLX5_SQC_STATE_RST, MLX5_SQC_STATE_ERR, MLX5_SQC_STATE_RST);
    refused(MLX5_SQC_STATE_RST, MLX5_SQC_STATE_RST, MLX5_SQC_STATE_RST);
    refused(MLX5_SQC_STATE_RDY, MLX5_SQC_STATE_RDY, MLX5_SQC_STATE_RST);  // the SQ is not in RDY
    // mlx5e's rate limit (bit 0) and QoS group (bit 2) updates.
    bad_parameter(modify_sq(h, sqn, MLX5_SQC_STATE_RST, MLX5_SQC_STATE_RDY, 1));
    bad_parameter(modify_sq(h, sqn, MLX5_SQC_STATE_RST, MLX5_SQC_STATE_RDY, 4));
    CHECK(sq_state(h, sqn) == MLX5_SQC_STATE_RST);
    move(MLX5_SQC_STATE_RST, MLX5_SQC_STATE_RDY);
    move(MLX5_SQC_STATE_RDY, MLX5_SQC_STATE_RDY);
    refused(MLX5_SQC_STATE_RST, MLX5_SQC_STATE_RDY, MLX5_SQC_STATE_RDY);  // the SQ is not in RST
    move(MLX5_SQC_STATE_RDY, MLX5_SQC_STATE_ERR);
    refused(MLX5_SQC_STATE_ERR, MLX5_SQC_STATE_RDY, MLX5_SQC_STATE_ERR);
    move(MLX5_SQC_STATE_ERR, MLX5_SQC_STATE_RST);
    move(MLX5_SQC_STATE_RST, MLX5_SQC_STATE_RDY);
    move(MLX5_SQC_STATE_RDY, MLX5_SQC_STATE_RST);
}

TEST_CASE_FIXTURE(eth_env, "DESTROY_SQ: in any state; the sqn is then unknown") {
    const auto tisn = tis();
    const auto rst = new_sq(tisn), rdy = new_sq(tisn), err = new_sq(tisn);
    require_ok(modify_sq(h, rdy, MLX5_SQC_STATE_RST, MLX5_SQC_STATE_RDY));
    require_ok(modify_sq(h, err, MLX5_SQC_STATE_RST, MLX5_SQC_STATE_RDY));
    require_ok(modify_sq(h, err, MLX5_SQC_STATE_RDY, MLX5_SQC_STATE_ERR));
    for (const auto sqn : {rst, rdy, err}) {
        CHECK(destroy_sq(h, sqn).status == cmd_status::OK);
        CHECK(query_sq(h, sqn).status != cmd_status::OK);
    }
    CHECK(destroy_tis(h, tisn).status == cmd_status::OK);
}

// --- RQ ------------------------------------------------------------------------------------------

TEST_CASE_FIXTURE(eth_env, "CREATE_RQ: cyclic and striding RQs as mlx5e sends them; QUERY_RQ reads them back") {
    const auto counter = alloc_q_counter(h);
    auto s = rq();
    s.counter_set_id = counter, s.vsd = s.scatter_fcs = 1;
    const auto r = require_ok(create_rq(h, s));
    const auto q = require_ok(query_rq(h, rqn_of(r)));
    CHECK(CXV_LINUX_GET(query_rq_out, q.out, rq_context.state) == MLX5_RQC_STATE_RST);
    CHECK(CXV_LINUX_GET(query_rq_out, q.out, rq_context.cqn) == cq);
    CHECK(CXV_LINUX_GET(query_rq_out, q.out, rq_context.counter_set_id) == counter);
    CHECK(CXV_LINUX_GET(query_rq_out, q.out, rq_context.vsd) == 1);
    CHECK(CXV_LINUX_GET(query_rq_out, q.out, rq_context.scatter_fcs) == 1);

    // The linked-list striding RQ mlx5e prefers, and a cyclic striding one.
    auto mpw = striding(rq());
    mpw.log_wqe_num_of_strides = 2, mpw.log_wqe_stride_size = 1;
    const auto m = require_ok(create_rq(h, mpw));
    CHECK(rqn_of(m) != rqn_of(r));
    mpw.wq_type = MLX5_WQ_TYPE_CYCLIC_STRIDING_RQ, mpw.log_wq_stride = 4, mpw.dbr = dbr();
    CHECK(create_rq(h, mpw).status == cmd_status::OK);
}

// mlx5e_open_drop_rq: mlx5e_build_drop_rq_param sets wq_type, log_wq_stride and the
// counter only, so the drop RQ's wq.pd is 0 and it has one WQE. Linux opens it at every
// probe of an Ethernet function; firmware accepts it.
TEST_CASE_FIXTURE(eth_env,
                  "CREATE_RQ: the drop RQ mlx5e opens at probe (wq.pd 0, one 16-byte WQE) is accepted and made ready") {
    auto s = rq();
    s.pd = 0, s.log_wq_sz = 0;
    s.counter_set_id = alloc_q_counter(h);
    const auto r = require_ok(create_rq(h, s));
    CHECK(modify_rq(h, rqn_of(r), MLX5_RQC_STATE_RST, MLX5_RQC_STATE_RDY).status == cmd_status::OK);
    CHECK(destroy_rq(h, rqn_of(r)).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(
    eth_env, "CREATE_RQ: memory type, CQ, wq type, strides, counter, PD, doorbell record and page list are checked") {
    auto with = [&](auto change) {
        auto s = rq();
        change(s);
        return create_rq(h, s);
    };
    bad_parameter(with([](rq_spec& s) { s.mem_rq_type = 1; }));
    check_status(with([](rq_spec& s) { s.cqn = 0x4321; }), cmd_status::BAD_PARAM, cmd_syndrome::BAD_CQ);
    bad_parameter(with([](rq_spec& s) { s.wq_type = MLX5_WQ_TYPE_LINKED_LIST; }));
    // Cyclic WQEs of 16 to 512 bytes (max_wqe_sz_rq).
    bad_parameter(with([](rq_spec& s) { s.log_wq_stride = 3; }));
    bad_parameter(with([](rq_spec& s) { s.log_wq_stride = 10, s.log_wq_sz = 2; }));
    CHECK(with([](rq_spec& s) { s.log_wq_stride = 9, s.log_wq_sz = 3; }).status == cmd_status::OK);
    // log_wqe_num_of_strides up to 7 (2^16 strides); log_wqe_stride_size is 3 bits in
    // Linux's layout, so no value past 7 can be written.
    bad_parameter(with([](rq_spec& s) {
        s = striding(s);
        s.log_wqe_num_of_strides = 8;
    }));
    require_ok(with([](rq_spec& s) {
        s = striding(s);
        s.log_wqe_num_of_strides = s.log_wqe_stride_size = 7;
    }));
    bad_parameter(with([](rq_spec& s) { s.counter_set_id = 0x7e; }));
    check_status(with([](rq_spec& s) { s.pd = 0xabcd; }), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PD);
    check_status(with([](rq_spec& s) { s.dbr += 4; }), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    // 1024 WQEs of 16 bytes need four pages.
    check_status(with([](rq_spec& s) { s.npas = 3; }), cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
    check_status(with([](rq_spec& s) {
                     s = striding(s);
                     s.log_wq_sz = 8, s.npas = 1;
                 }),
                 cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
}

TEST_CASE_FIXTURE(
    eth_env,
    "MODIFY_RQ: the SQ's state rules; bitmask bits 1-3 change vsd, scatter_fcs, counter_set_id; others are refused") {
    const auto rqn = new_rq();
    auto ctx = [&] { return require_ok(query_rq(h, rqn)).out; };
#define RQC(fld) CXV_LINUX_GET(query_rq_out, ctx(), rq_context.fld)
    auto modify = [&](unsigned cur, unsigned next, std::uint64_t bitmask = 0, const rq_spec& f = {}) {
        return modify_rq(h, rqn, cur, next, bitmask, f);
    };
    constexpr unsigned rst = MLX5_RQC_STATE_RST, rdy = MLX5_RQC_STATE_RDY, err = MLX5_RQC_STATE_ERR;
    bad_state(modify(rst, err));
    bad_state(modify(rst, rst));
    bad_state(modify(rdy, rdy));  // the RQ is not in RDY
    require_ok(modify(rst, rdy));
    CHECK(RQC(state) == rdy);

    // mlx5e_modify_rq_vsd and mlx5e_modify_rq_scatter_fcs: RDY -> RDY with one bit each;
    // what the bitmask leaves out is not changed.
    require_ok(modify(rdy, rdy, MLX5_MODIFY_RQ_IN_MODIFY_BITMASK_VSD, {.vsd = 1, .scatter_fcs = 1}));
    CHECK(RQC(vsd) == 1);
    CHECK(RQC(scatter_fcs) == 0);
    require_ok(modify(rdy, rdy, MLX5_MODIFY_RQ_IN_MODIFY_BITMASK_SCATTER_FCS, {.scatter_fcs = 1}));
    CHECK(RQC(vsd) == 1);
    CHECK(RQC(scatter_fcs) == 1);
    const auto counter = alloc_q_counter(h);
    require_ok(modify(rdy, rdy, MLX5_MODIFY_RQ_IN_MODIFY_BITMASK_RQ_COUNTER_SET_ID, {.counter_set_id = counter}));
    CHECK(RQC(counter_set_id) == counter);
    for (const std::uint64_t bit : {std::uint64_t{1}, std::uint64_t{1} << 4, std::uint64_t{1} << 40}) {
        INFO("modify_bitmask ", bit);
        bad_parameter(modify(rdy, rdy, bit));
    }
    CHECK(RQC(vsd) == 1);

    require_ok(modify(rdy, err));
    CHECK(RQC(state) == err);
    bad_state(modify(err, rdy));
    require_ok(modify(err, rst));
    require_ok(modify(rst, rdy));
    require_ok(modify(rdy, rst));
    CHECK(RQC(state) == rst);
#undef RQC
    CHECK(destroy_rq(h, rqn).status == cmd_status::OK);
}

// --- RQT -----------------------------------------------------------------------------------------

TEST_CASE_FIXTURE(
    eth_env, "CREATE_RQT: mlx5e's direct (1) and RSS (256) tables hold their RQs; MODIFY_RQT replaces the entries") {
    const auto a = new_rq(), b = new_rq(), c = new_rq();
    const auto direct = new_rqt(1, {a});  // mlx5e_rqt_init_direct, indirection disabled
    const auto rss = new_rqt(256, spread(a, b));
    CHECK(rss != direct);
    in_use(destroy_rq(h, a));
    in_use(destroy_rq(h, b));

    // mlx5e_rqt_redirect_direct: the direct table now names c only.
    REQUIRE(modify_rqt(h, direct, {c}).status == cmd_status::OK);
    in_use(destroy_rq(h, c));
    // The RSS table over c only (the channels went down to one): a and b are free.
    REQUIRE(modify_rqt(h, rss, std::vector<std::uint32_t>(256, c)).status == cmd_status::OK);
    CHECK(destroy_rq(h, a).status == cmd_status::OK);
    CHECK(destroy_rq(h, b).status == cmd_status::OK);
    REQUIRE(destroy_rqt(h, direct).status == cmd_status::OK);
    in_use(destroy_rq(h, c));
    REQUIRE(destroy_rqt(h, rss).status == cmd_status::OK);
    CHECK(destroy_rq(h, c).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(eth_env, "CREATE_RQT and MODIFY_RQT: sizes, entries and the input length are checked") {
    const auto a = new_rq();
    bad_parameter(create_rqt(h, 0, {a}, 0));
    bad_parameter(create_rqt(h, 2049, {a}));
    const auto biggest = create_rqt(h, 2048, {a});  // 1 << log_max_rqt_size
    CHECK(biggest.status == cmd_status::OK);
    bad_parameter(create_rqt(h, 2, {a, a, a}));
    bad_parameter(create_rqt(h, 4, {a, a + 0x1000}));
    check_status(create_rqt(h, 4, {a, a, a, a}, 4, 2), cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);

    const auto rqt = new_rqt(4, {a, a});
    bad_parameter(modify_rqt(h, rqt, {a, a, a, a, a}));
    bad_parameter(modify_rqt(h, rqt, {a, a + 0x1000}));
    check_status(modify_rqt(h, rqt, {a, a, a}, 3, 1), cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);
    CHECK(modify_rqt(h, rqt, {a, a, a, a}).status == cmd_status::OK);
    CHECK(destroy_rqt(h, rqt).status == cmd_status::OK);
    CHECK(destroy_rqt(h, rqtn_of(biggest)).status == cmd_status::OK);
    CHECK(destroy_rq(h, a).status == cmd_status::OK);
}

// --- TIR -----------------------------------------------------------------------------------------

TEST_CASE_FIXTURE(eth_env,
                  "CREATE_TIR: an inline TIR and mlx5e's RSS and direct TIRs; QUERY_TIR reads the context back") {
    const auto a = new_rq(), b = new_rq();
    // mlx5e_tir_builder_build_inline.
    const auto inline_tir = new_tir({.td = td, .inline_rqn = a});
    auto q = require_ok(query_tir(h, inline_tir));
    CHECK(TIR_GET(q, disp_type) == MLX5_TIRC_DISP_TYPE_DIRECT);
    CHECK(TIR_GET(q, inline_rqn) == a);
    CHECK(TIR_GET(q, rx_hash_fn) == MLX5_RX_HASH_FN_NONE);
    CHECK(TIR_GET(q, transport_domain) == td);

    // build_rqt + build_rss (Toeplitz over IPv4/TCP 4-tuple), as for mlx5e's TT_IPV4_TCP TIR.
    const auto rss_rqt = new_rqt(256, spread(a, b));
    const auto rss = new_tir(rss_tir(td, rss_rqt, kSelSrcIp | kSelDstIp | kSelL4Sport | kSelL4Dport));
    q = require_ok(query_tir(h, rss));
    CHECK(TIR_GET(q, disp_type) == kIndirect);
    CHECK(TIR_GET(q, indirect_table) == rss_rqt);
    CHECK(TIR_GET(q, rx_hash_fn) == MLX5_RX_HASH_FN_TOEPLITZ);
    for (std::size_t i = 0; i < kKey.size(); ++i) CHECK(key_word(q, i) == kKey[i]);
    CHECK(TIR_GET(q, rx_hash_field_selector_outer.l3_prot_type) == kL3Ipv4);
    CHECK(TIR_GET(q, rx_hash_field_selector_outer.l4_prot_type) == kL4Tcp);
    CHECK(TIR_GET(q, rx_hash_field_selector_outer.selected_fields) ==
          (kSelSrcIp | kSelDstIp | kSelL4Sport | kSelL4Dport));
    CHECK(TIR_GET(q, transport_domain) == td);

    // mlx5e's per-channel "direct" TIR: indirect to a one-entry RQT, inverted XOR8 (build_direct).
    const auto direct_rqt = new_rqt(256, {b});
    const auto direct_tir =
        new_tir({.td = td, .disp_type = kIndirect, .rqt = direct_rqt, .hash_fn = MLX5_RX_HASH_FN_INVERTED_XOR8});
    q = require_ok(query_tir(h, direct_tir));
    CHECK(TIR_GET(q, indirect_table) == direct_rqt);
    CHECK(TIR_GET(q, rx_hash_fn) == MLX5_RX_HASH_FN_INVERTED_XOR8);

    // What the TIRs name is held: the RQ of the inline TIR, the RQTs.
    in_use(destroy_rqt(h, rss_rqt));
    in_use(destroy_rqt(h, direct_rqt));
    REQUIRE(destroy_tir(h, rss).status == cmd_status::OK);
    REQUIRE(destroy_tir(h, direct_tir).status == cmd_status::OK);
    CHECK(destroy_rqt(h, rss_rqt).status == cmd_status::OK);
    CHECK(destroy_rqt(h, direct_rqt).status == cmd_status::OK);
    CHECK(destroy_rq(h, b).status == cmd_status::OK);
    in_use(destroy_rq(h, a));
    REQUIRE(destroy_tir(h, inline_tir).status == cmd_status::OK);
    CHECK(destroy_rq(h, a).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(eth_env,
                  "CREATE_TIR: the domain, dispatch, RQ, RQT, hash function, LRO and tunnel offload are checked") {
    const auto rqn = new_rq();
    const auto rqt = new_rqt(1, {rqn});
    bad_parameter(create_tir(h, {.td = 0x777, .inline_rqn = rqn}));
    bad_parameter(create_tir(h, {.td = td, .inline_rqn = rqn + 0x1000}));
    bad_parameter(create_tir(h, {.td = td, .disp_type = kIndirect, .rqt = rqt + 0x1000}));
    bad_parameter(create_tir(h, {.td = td, .disp_type = kIndirect, .rqt = rqt, .hash_fn = 3}));
    // An RQ number is no RQT number.
    bad_parameter(create_tir(h, {.td = td, .disp_type = kIndirect, .rqt = rqn == rqt ? rqn + 1 : rqn}));
    CHECK(create_tir(h, {.td = td, .disp_type = 2, .inline_rqn = rqn, .rqt = rqt}).status == cmd_status::BAD_PARAM);
    // mlx5e_tir_builder_build_packet_merge with LRO, and tunneled offload.
    bad_parameter(create_tir(h, {.td = td, .disp_type = kIndirect, .rqt = rqt, .packet_merge_mask = kLro}));
    bad_parameter(create_tir(h, {.td = td, .disp_type = kIndirect, .rqt = rqt, .tunneled = 1}));
    // None of them holds anything.
    CHECK(destroy_rqt(h, rqt).status == cmd_status::OK);
    CHECK(destroy_rq(h, rqn).status == cmd_status::OK);
    CHECK(dealloc_td(h, td).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(
    eth_env,
    "MODIFY_TIR: bitmask.hash replaces the hash, bitmask.self_lb_en the loopback block; packet_merge is refused") {
    const auto rqt = new_rqt(256, {new_rq()});
    const auto tirn = new_tir(rss_tir(td, rqt, kSelSrcIp | kSelDstIp));
    auto query = [&] { return require_ok(query_tir(h, tirn)); };

    // ethtool -X: a new key and hash function (mlx5e_tir_builder_build_rss on a modify builder).
    tir_spec hash{.hash_fn = MLX5_RX_HASH_FN_INVERTED_XOR8,
                  .l3 = 1,
                  .l4 = 1,
                  .fields = kSelSrcIp | kSelDstIp | kSelL4Sport | kSelL4Dport};
    REQUIRE(modify_tir(h, tirn, {.hash = 1}, hash).status == cmd_status::OK);
    auto q = query();
    CHECK(TIR_GET(q, rx_hash_fn) == MLX5_RX_HASH_FN_INVERTED_XOR8);
    CHECK(TIR_GET(q, rx_hash_field_selector_outer.l3_prot_type) == 1);
    CHECK(TIR_GET(q, rx_hash_field_selector_outer.l4_prot_type) == 1);
    CHECK(TIR_GET(q, rx_hash_field_selector_outer.selected_fields) == hash.fields);
    CHECK(TIR_GET(q, indirect_table) == rqt);
    hash.hash_fn = MLX5_RX_HASH_FN_TOEPLITZ;
    hash.key = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    REQUIRE(modify_tir(h, tirn, {.hash = 1}, hash).status == cmd_status::OK);
    q = query();
    CHECK(TIR_GET(q, rx_hash_fn) == MLX5_RX_HASH_FN_TOEPLITZ);
    for (std::size_t i = 0; i < hash.key.size(); ++i) CHECK(key_word(q, i) == i + 1);

    // mlx5e_refresh_tirs: block unicast and multicast self-loopback, then allow it again.
    REQUIRE(modify_tir(h, tirn, {.self_lb_en = 1}, {.self_lb_block = 3}).status == cmd_status::OK);
    q = query();
    CHECK(TIR_GET(q, self_lb_block) == 3);
    CHECK(TIR_GET(q, rx_hash_fn) == MLX5_RX_HASH_FN_TOEPLITZ);  // the hash untouched
    REQUIRE(modify_tir(h, tirn, {.self_lb_en = 1}, {}).status == cmd_status::OK);
    CHECK(TIR_GET(query(), self_lb_block) == 0);

    bad_parameter(
        modify_tir(h, tirn, {.packet_merge = 1}, {.packet_merge_mask = MLX5_TIRC_PACKET_MERGE_MASK_IPV4_LRO}));
    CHECK(TIR_GET(query(), packet_merge_mask) == 0);
}
