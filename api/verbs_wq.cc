// Receive work queues, indirection tables and RSS QPs (ibv_create_wq(3),
// ibv_create_rwq_ind_table(3), ibv_create_qp_ex(3) with rx_hash_conf), as Linux's mlx5_ib
// makes them for rdma-core: a WQ is an RQ of the Ethernet transport (a raw packet QP of
// cxv's with receives only, whose number is the RQ's), an indirection table an RQT of
// the WQs' RQs, and an RSS QP an indirect TIR hashing over the table, which
// ibv_create_flow steers to.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include <fmt/format.h>

#include "api/cxv.h"
#include "api/cxv_verbs.h"
#include "api/verbs_handles.h"
#include "driver/res/eth.h"

namespace {

using namespace cxv;
using namespace cxv::api::handles;

struct c_wq : ibv_wq {
    std::shared_ptr<cxv::qp> q;  // a raw packet QP of receives only
};
struct c_ind : ibv_rwq_ind_table {
    std::shared_ptr<driver::rqt> table;
    std::vector<std::shared_ptr<cxv::qp>> wqs;  // held while the table lists them
};

c_wq* wq_of(ibv_wq* w) { return static_cast<c_wq*>(w); }

int post_wq_recv(ibv_wq* w, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) { return wq_of(w)->q->post_recv(wr, bad_wr); }

}  // namespace

extern "C" {

ibv_wq* cxv_create_wq(ibv_context* ctx, ibv_wq_init_attr* attr) {
    if (attr == nullptr || attr->pd == nullptr || attr->cq == nullptr) {
        fail(EINVAL, "ibv_create_wq: a PD and a CQ are needed");
        return nullptr;
    }
    if (attr->wq_type != IBV_WQT_RQ) {
        fail(EINVAL, "ibv_create_wq: wq_type IBV_WQT_RQ only");
        return nullptr;
    }
    const std::uint32_t flags = (attr->comp_mask & IBV_WQ_INIT_ATTR_FLAGS) != 0 ? attr->create_flags : 0;
    if ((flags & ~std::uint32_t{IBV_WQ_FLAGS_CVLAN_STRIPPING}) != 0) {
        fail(EOPNOTSUPP, "ibv_create_wq: of the create flags only VLAN stripping (no FCS scatter, delay drop, end "
                         "padding)");
        return nullptr;
    }
    if ((attr->comp_mask & ~std::uint32_t{IBV_WQ_INIT_ATTR_FLAGS}) != 0) {
        fail(EINVAL, "ibv_create_wq: unknown comp_mask bits");
        return nullptr;
    }
    c_device* c = dev_of(ctx);
    if (!c->ethernet) {
        fail(EOPNOTSUPP, "ibv_create_wq: WQs are of an Ethernet port");
        return nullptr;
    }
    if (attr->max_wr == 0) {
        fail(EINVAL, "ibv_create_wq: max_wr 0");
        return nullptr;
    }
    cxv::qp::attr a;
    a.type = qp_type::raw_packet;
    a.domain = pd_of(attr->pd)->pd;
    a.send_cq = a.recv_cq = cq_of(attr->cq)->cq;
    a.cap.max_send_wr = 0;
    a.cap.max_recv_wr = attr->max_wr;
    a.cap.max_recv_sge = attr->max_sge == 0 ? 1 : attr->max_sge;
    a.strip_vlan = (flags & IBV_WQ_FLAGS_CVLAN_STRIPPING) != 0;
    auto q = cxv::qp::create(*c->dev, a);
    if (!q) {
        fail(q.error().code, q.error().message);
        return nullptr;
    }
    auto* w = new (std::nothrow) c_wq();
    if (w == nullptr) {
        fail(ENOMEM, "out of memory");
        return nullptr;
    }
    w->context = ctx;
    w->wq_context = attr->wq_context;
    w->pd = attr->pd;
    w->cq = attr->cq;
    w->wq_num = w->handle = q.value()->qpn();
    w->state = IBV_WQS_RESET;
    w->wq_type = IBV_WQT_RQ;
    w->post_recv = post_wq_recv;
    pthread_mutex_init(&w->mutex, nullptr);
    pthread_cond_init(&w->cond, nullptr);
    const auto granted = q.value()->capabilities();
    attr->max_wr = granted.max_recv_wr;
    attr->max_sge = granted.max_recv_sge;
    w->q = std::move(q).value();
    hold_context(ctx);
    return w;
}

// IBV_WQS_RESET → RDY readies the RQ; RDY → ERR, and any state → RESET (PRM "RQ State
// Machine"); curr_wq_state, when given, must be the WQ's.
int cxv_modify_wq(ibv_wq* wq, ibv_wq_attr* attr) {
    if (attr == nullptr) return fail(EINVAL, "ibv_modify_wq: no attributes");
    constexpr std::uint32_t known = IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE | IBV_WQ_ATTR_FLAGS;
    if ((attr->attr_mask & ~known) != 0) return fail(EINVAL, "ibv_modify_wq: unknown attr_mask bits");
    if ((attr->attr_mask & IBV_WQ_ATTR_FLAGS) != 0 && attr->flags_mask != 0) {
        return fail(EOPNOTSUPP, "ibv_modify_wq: no flags (VLAN stripping, FCS scatter, delay drop)");
    }
    if ((attr->attr_mask & IBV_WQ_ATTR_CURR_STATE) != 0 && attr->curr_wq_state != wq->state) {
        return fail(EINVAL, "ibv_modify_wq: curr_wq_state is not the WQ's");
    }
    if ((attr->attr_mask & IBV_WQ_ATTR_STATE) == 0) return 0;
    const ibv_wq_state to = attr->wq_state;
    c_wq* w = wq_of(wq);
    status s = ok_status();
    if (to == IBV_WQS_RESET) {
        s = w->q->modify(qp_state::reset, {});
    } else if (to == IBV_WQS_ERR) {
        s = w->q->modify(qp_state::error, {});
    } else if (to == IBV_WQS_RDY && wq->state == IBV_WQS_RESET) {
        s = w->q->modify(qp_state::init, {});
    } else if (to != IBV_WQS_RDY || wq->state != IBV_WQS_RDY) {
        return fail(EINVAL, fmt::format("ibv_modify_wq: no move from state {} to {}", static_cast<int>(wq->state),
                                        static_cast<int>(to)));
    }
    if (!s) return fail(s.error().code, s.error().message);
    wq->state = to;
    return 0;
}

int cxv_destroy_wq(ibv_wq* wq) {
    c_wq* w = wq_of(wq);
    if (w->q.use_count() > 1) return fail(EBUSY, "ibv_destroy_wq: an indirection table still lists the WQ");
    if (auto s = w->q->destroy(); !s) return fail(s.error().code, s.error().message);
    pthread_mutex_destroy(&w->mutex);
    pthread_cond_destroy(&w->cond);
    ibv_context* ctx = w->context;
    delete w;
    release_context(ctx);
    return 0;
}

ibv_rwq_ind_table* cxv_create_rwq_ind_table(ibv_context* ctx, ibv_rwq_ind_table_init_attr* attr) {
    if (attr == nullptr || attr->ind_tbl == nullptr || attr->comp_mask != 0 || attr->log_ind_tbl_size > 16) {
        fail(EINVAL, "ibv_create_rwq_ind_table: 2^log_ind_tbl_size WQs (up to 2^16), comp_mask 0");
        return nullptr;
    }
    auto* t = new (std::nothrow) c_ind();
    if (t == nullptr) {
        fail(ENOMEM, "out of memory");
        return nullptr;
    }
    std::unique_ptr<c_ind> owned(t);
    const std::size_t n = std::size_t{1} << attr->log_ind_tbl_size;
    std::vector<std::shared_ptr<driver::rq>> rqs;
    for (std::size_t i = 0; i < n; ++i) {
        ibv_wq* w = attr->ind_tbl[i];
        if (w == nullptr || w->context != ctx) {
            fail(EINVAL, fmt::format("ibv_create_rwq_ind_table: entry {} is not a WQ of this context", i));
            return nullptr;
        }
        t->wqs.push_back(wq_of(w)->q);
        rqs.push_back(wq_of(w)->q->raw_rq());
    }
    auto r = driver::rqt::create(rqs);
    if (!r) {
        fail(r.error().code, r.error().message);
        return nullptr;
    }
    t->table = std::move(r).value();
    t->context = ctx;
    t->ind_tbl_handle = t->ind_tbl_num = static_cast<int>(t->table->rqtn());
    t->comp_mask = 0;
    hold_context(ctx);
    return owned.release();
}

int cxv_destroy_rwq_ind_table(ibv_rwq_ind_table* table) {
    auto* t = static_cast<c_ind*>(table);
    if (t->table.use_count() > 1) return fail(EBUSY, "ibv_destroy_rwq_ind_table: an RSS QP still hashes over it");
    if (auto s = t->table->destroy(); !s) return fail(s.error().code, s.error().message);
    ibv_context* ctx = t->context;
    delete t;
    release_context(ctx);
    return 0;
}

}  // extern "C"

namespace cxv::api::handles {

// The hash fields as mlx5_ib takes them (create_rss_raw_qp_tir): IPv4 or IPv6 addresses
// (not both), TCP or UDP ports (not both); with no field, a table of one WQ (a TIR that
// only steers). Toeplitz with a 40-byte key only.
ibv_qp* create_rss_qp(ibv_context* ctx, ibv_qp_init_attr_ex* attr) {
    const std::uint32_t both = IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_IND_TABLE;
    if ((attr->comp_mask & both) != both || attr->rwq_ind_tbl == nullptr || attr->qp_type != IBV_QPT_RAW_PACKET) {
        fail(EINVAL, "ibv_create_qp_ex: an RSS QP is a raw packet QP with rx_hash_conf and an indirection table");
        return nullptr;
    }
    const ibv_rx_hash_conf& h = attr->rx_hash_conf;
    const std::uint64_t f = h.rx_hash_fields_mask;
    if (h.rx_hash_function != IBV_RX_HASH_FUNC_TOEPLITZ || h.rx_hash_key_len != 40 || h.rx_hash_key == nullptr) {
        fail(EINVAL, "ibv_create_qp_ex: Toeplitz hashing with a 40-byte key");
        return nullptr;
    }
    constexpr std::uint64_t v4 = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4;
    constexpr std::uint64_t v6 = IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6;
    constexpr std::uint64_t tcp = IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP;
    constexpr std::uint64_t udp = IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP;
    if ((f & ~(v4 | v6 | tcp | udp)) != 0) {
        fail(EOPNOTSUPP, "ibv_create_qp_ex: hash fields other than IP addresses and TCP/UDP ports (inner, IPsec)");
        return nullptr;
    }
    auto* t = static_cast<c_ind*>(attr->rwq_ind_tbl);
    if (((f & v4) && (f & v6)) || ((f & tcp) && (f & udp)) || (f == 0 && t->wqs.size() != 1)) {
        fail(EINVAL, "ibv_create_qp_ex: IPv4 and IPv6, or TCP and UDP, hashed together (or no field over several WQs)");
        return nullptr;
    }
    driver::rx_hash rh;
    rh.toeplitz = true;
    std::memcpy(rh.key.data(), h.rx_hash_key, 40);
    rh.l3_type = (f & v6) ? driver::rx_hash::l3::ipv6 : driver::rx_hash::l3::ipv4;
    rh.l4_type = (f & tcp) ? driver::rx_hash::l4::tcp : (f & udp) ? driver::rx_hash::l4::udp : driver::rx_hash::l4::none;
    rh.selected = 0;
    if (f & (IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_SRC_IPV6)) rh.selected |= driver::rx_hash::src_ip;
    if (f & (IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_DST_IPV6)) rh.selected |= driver::rx_hash::dst_ip;
    if (f & (IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_SRC_PORT_UDP)) rh.selected |= driver::rx_hash::l4_sport;
    if (f & (IBV_RX_HASH_DST_PORT_TCP | IBV_RX_HASH_DST_PORT_UDP)) rh.selected |= driver::rx_hash::l4_dport;
    auto q = cxv::qp::create_rss(*dev_of(ctx)->dev, t->table, rh);
    if (!q) {
        fail(q.error().code, q.error().message);
        return nullptr;
    }
    auto* out = new (std::nothrow) c_qp();
    if (out == nullptr) {
        fail(ENOMEM, "out of memory");
        return nullptr;
    }
    ibv_qp& b = out->qp_base;
    b.context = ctx;
    b.qp_context = attr->qp_context;
    b.pd = attr->pd;
    b.qp_num = b.handle = q.value()->qpn();
    b.state = IBV_QPS_RESET;
    b.qp_type = IBV_QPT_RAW_PACKET;
    pthread_mutex_init(&b.mutex, nullptr);
    pthread_cond_init(&b.cond, nullptr);
    attr->cap = {};
    out->qp = std::move(q).value();
    hold_context(ctx);  // (cxv_destroy_qp lets go of it)
    return &out->qp_base;
}

}  // namespace cxv::api::handles
