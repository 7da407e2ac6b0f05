// Device, port, GID and P_Key queries, from the HCA's capabilities (QUERY_HCA_CAP, as
// bring-up read them) and its vport context, with the values Linux's mlx5_ib reports for
// the same capabilities (so ibv_devinfo shows what it shows on a ConnectX).
#include <arpa/inet.h>
#include <endian.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include "api/abi/abi.h"
#include "api/cxv.h"
#include "api/cxv_verbs.h"
#include "driver/hca/clock.h"
#include "driver/hca/hca.h"
#include "driver/vfio/vfio.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"

namespace cxv::abi {

namespace {

namespace ifc = hw::ifc;
using cap = ifc::cmd_hca_cap;

constexpr std::uint32_t mellanox_oui = 0x02c9;  // IEEE OUI: ibv_device_attr.vendor_id
constexpr int data_seg_bytes = 16;              // PRM: a WQE's data segment, control and RDMA segments

const std::byte* caps_of(ibv_context* ctx) { return verbs_device(ctx).hca().caps().data(); }

// PRM: gid_table_size and pkey_table_size are codes (Linux mlx5: 8 << code GIDs, 128 <<
// code P_Keys).
int gid_table_len(const std::byte* c) {
    const unsigned code = ifc::get<cap::gid_table_size>(c);
    return code > 4 ? 0 : 8 << code;
}
int pkey_table_len(ibv_context* ctx) {
    if (verbs_device(ctx).hca().ethernet()) return 1;
    return 128 << ifc::get<cap::pkey_table_size>(caps_of(ctx));
}

std::uint32_t pci_config(ibv_context* ctx, unsigned offset, unsigned width) {
    auto v = verbs_device(ctx).hca().device().config_read(offset, width);
    return v ? *v : 0;
}

}  // namespace

// PRM log_max_cq_sz: a CQ of at most 2^log_max_cq_sz CQEs; mlx5_ib rounds the entries
// asked for plus one up to a power of two, so the most a program may ask for is one less.
int max_cqe(ibv_context* ctx) { return (1 << ifc::get<cap::log_max_cq_sz>(caps_of(ctx))) - 1; }

namespace {

void fill_device_attr(ibv_context* ctx, ibv_device_attr& a) {
    std::memset(&a, 0, sizeof(a));
    const device_entry& e = *entry_of(ctx);
    driver::hca& hca = verbs_device(ctx).hca();
    const std::byte* c = hca.caps().data();
    std::snprintf(a.fw_ver, sizeof(a.fw_ver), "%s", hca.fw_version_string().c_str());
    a.node_guid = htobe64(e.node_guid);
    a.sys_image_guid = htobe64(e.sys_image_guid);
    a.max_mr_size = ~0ull;
    a.page_size_cap = ~0xfffull;  // 4 KiB pages and up
    a.vendor_id = mellanox_oui;
    a.vendor_part_id = pci_config(ctx, 0x02, 2);  // the PCI device ID, as mlx5_ib reports it
    a.hw_ver = pci_config(ctx, 0x08, 1);          // the PCI revision ID
    a.max_qp = 1 << ifc::get<cap::log_max_qp>(c);
    a.max_qp_wr = 1 << ifc::get<cap::log_max_qp_sz>(c);
    a.device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR | IBV_DEVICE_CHANGE_PHY_PORT |
                         IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN;
    // On an Ethernet port: raw packet QPs with checksum offload, and ibv_create_flow (as
    // mlx5_ib sets them).
    if (auto p = verbs_device(ctx).port(1); p && p->ethernet) {
        a.device_cap_flags |= IBV_DEVICE_RAW_IP_CSUM | IBV_DEVICE_MANAGED_FLOW_STEERING;
    }
    // PRM max_wqe_sz_sq/rq: a send WQE is a control and an RDMA segment and data segments.
    const int sq_sge = (static_cast<int>(ifc::get<cap::max_wqe_sz_sq>(c)) - 2 * data_seg_bytes) / data_seg_bytes;
    const int rq_sge = static_cast<int>(ifc::get<cap::max_wqe_sz_rq>(c)) / data_seg_bytes;
    a.max_sge = std::max(1, std::min(sq_sge, rq_sge));
    a.max_sge_rd = a.max_sge;
    a.max_cq = 1 << ifc::get<cap::log_max_cq>(c);
    a.max_cqe = max_cqe(ctx);
    a.max_mr = 1 << ifc::get<cap::log_max_mkey>(c);
    a.max_pd = 1 << ifc::get<cap::log_max_pd>(c);
    a.max_qp_rd_atom = 1 << ifc::get<cap::log_max_ra_res_qp>(c);
    a.max_qp_init_rd_atom = 1 << ifc::get<cap::log_max_ra_req_qp>(c);
    a.max_res_rd_atom = a.max_qp_rd_atom * a.max_qp;
    a.atomic_cap = IBV_ATOMIC_HCA;
    // Multicast groups and the QPs of each, as mlx5_ib reports them.
    a.max_mcast_grp = 1 << ifc::get<cap::log_max_mcg>(c);
    a.max_mcast_qp_attach = static_cast<int>(ifc::get<cap::max_qp_mcg>(c));
    a.max_total_mcast_qp_attach = a.max_mcast_qp_attach * a.max_mcast_grp;
    a.max_ah = INT_MAX;
    a.max_srq = 1 << ifc::get<cap::log_max_srq>(c);
    a.max_srq_wr = (1 << ifc::get<cap::log_max_srq_sz>(c)) - 1;
    a.max_srq_sge = std::max(1, rq_sge - 1);
    a.max_pkeys = static_cast<std::uint16_t>(pkey_table_len(ctx));
    a.local_ca_ack_delay = static_cast<std::uint8_t>(ifc::get<cap::local_ca_ack_delay>(c));
    a.phys_port_cnt = static_cast<std::uint8_t>(ifc::get<cap::num_ports>(c));
}

// The port as ibv_query_port(3) has it; only the fields up to `len` bytes are written.
int fill_port_attr(ibv_context* ctx, std::uint8_t port_num, ibv_port_attr& a) {
    ibv_port_attr out;
    if (const int r = cxv_query_port(ctx, port_num, &out); r != 0) return r;
    driver::hca& hca = verbs_device(ctx).hca();
    const std::byte* c = hca.caps().data();
    out.max_msg_sz = 1u << ifc::get<cap::log_max_msg>(c);
    out.gid_tbl_len = gid_table_len(c);
    out.pkey_tbl_len = static_cast<std::uint16_t>(pkey_table_len(ctx));
    // The link's speed and width as mlx5_ib reports them, from PTYS (driver
    // hca::port_speed): active_speed is the PTYS ib_proto bit itself (IB_SPEED_SDR 1 ..
    // IB_SPEED_NDR 128), 0 on an InfiniBand link that is down; active_width is
    // IB_WIDTH_1X 1, 2X 16, 4X 2, 8X 4, 12X 8. A RoCE link that is down, or in a mode
    // mlx5_ib does not translate: 4X QDR, its default.
    out.active_width = 2;
    out.active_speed = 4;
    if (auto sp = hca.query_port_speed(port_num)) {
        if (sp->ib_speed != 0 || !hca.ethernet()) out.active_speed = static_cast<std::uint8_t>(sp->ib_speed);
        switch (sp->ib_width) {
            case 1u << 0: out.active_width = 1; break;
            case 1u << 1: out.active_width = 16; break;
            case 1u << 3: out.active_width = 4; break;
            case 1u << 4: out.active_width = 8; break;
            default: break;
        }
    }
    if (out.link_layer == IBV_LINK_LAYER_ETHERNET) {
        // What mlx5_ib reports for a RoCE port.
        out.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
        out.phys_state = out.state == IBV_PORT_ACTIVE ? 5 : 3;  // LinkUp / Disabled
        out.max_vl_num = 0;
    } else {
        // PRM QUERY_HCA_VPORT_CONTEXT: the PortInfo fields the SM set.
        std::vector<std::byte> in(ifc::query_hca_vport_context_in::size_bytes);
        ifc::set<ifc::query_hca_vport_context_in::opcode>(
            in.data(), static_cast<std::uint32_t>(hw::cmd_opcode::QUERY_HCA_VPORT_CONTEXT));
        ifc::set<ifc::query_hca_vport_context_in::port_num>(in.data(), port_num);
        auto r = hca.exec(in, ifc::query_hca_vport_context_out::size_bytes);
        if (!r) return r.error().code ? r.error().code : EIO;
        const std::byte* v = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(r->data());
        using p = ifc::hca_vport_context;
        out.sm_lid = static_cast<std::uint16_t>(ifc::get<p::sm_lid>(v));
        out.lmc = static_cast<std::uint8_t>(ifc::get<p::lmc>(v));
        out.sm_sl = static_cast<std::uint8_t>(ifc::get<p::sm_sl>(v));
        out.subnet_timeout = static_cast<std::uint8_t>(ifc::get<p::subnet_timeout>(v));
        out.init_type_reply = static_cast<std::uint8_t>(ifc::get<p::init_type_reply>(v));
        out.port_cap_flags = ifc::get<p::cap_mask1>(v);
        out.port_cap_flags2 = static_cast<std::uint16_t>(ifc::get<p::cap_mask2>(v));
        out.qkey_viol_cntr = ifc::get<p::qkey_violation_counter>(v);
        out.bad_pkey_cntr = ifc::get<p::pkey_violation_counter>(v);
        out.phys_state = static_cast<std::uint8_t>(ifc::get<p::port_physical_state>(v));
        out.max_vl_num = 4;  // VL0-7
    }
    a = out;
    return 0;
}

// The GID at `index` of `port_num`: 0, ENODATA for an empty entry of the table, EINVAL
// beyond it.
int gid_at(ibv_context* ctx, std::uint32_t port_num, std::uint32_t index, ibv_gid& gid) {
    auto p = verbs_device(ctx).port(port_num);
    if (!p) return EINVAL;
    if (index >= static_cast<std::uint32_t>(gid_table_len(caps_of(ctx)))) return EINVAL;
    if (index >= p->gids.size()) return ENODATA;
    std::memcpy(gid.raw, p->gids[index].data(), 16);
    return 0;
}

// cxv programs RoCE v2 entries only; an InfiniBand port's GIDs are IB GIDs.
std::uint32_t gid_type(ibv_context* ctx) {
    return verbs_device(ctx).hca().ethernet() ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_IB;
}

int vctx_query_port(ibv_context* ctx, std::uint8_t port_num, ibv_port_attr* attr, size_t len) {
    ibv_port_attr a;
    if (const int r = fill_port_attr(ctx, port_num, a); r != 0) return r;
    std::memcpy(attr, &a, std::min(len, sizeof(a)));
    return 0;
}

int vctx_query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                         size_t size) {
    if (input != nullptr && input->comp_mask != 0) return EINVAL;
    ibv_device_attr_ex a;
    std::memset(&a, 0, sizeof(a));
    fill_device_attr(ctx, a.orig_attr);
    a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
    // No ODP, TSO, RSS, tag matching, packet pacing, CQ moderation or device memory.
    // Completion timestamps are the CQE's 63 bits of the device clock, as mlx5_ib's
    // timestamp_mask says; the clock's frequency is the device's, in kHz
    // (cmd_hca_cap.device_frequency_khz); ibv_query_rt_values_ex reads the clock. On an
    // Ethernet port, raw packet QPs fill IP checksums (IBV_SEND_IP_CSUM, checked on
    // receive: raw_packet_caps IP_CSUM, as mlx5_ib reports it with csum_cap).
    a.max_wq_type_rq = 0;
    a.hca_core_clock = hw::ifc::get<hw::ifc::cmd_hca_cap::device_frequency_khz>(caps_of(ctx));
    a.completion_timestamp_mask = a.hca_core_clock != 0 ? 0x7fffffffffffffffULL : 0;
    // And strip C-VLAN tags (IBV_QP_CREATE_CVLAN_STRIPPING, IBV_WQ_FLAGS_CVLAN_STRIPPING).
    if (a.orig_attr.device_cap_flags & IBV_DEVICE_RAW_IP_CSUM) {
        a.raw_packet_caps = IBV_RAW_PACKET_CAP_IP_CSUM | IBV_RAW_PACKET_CAP_CVLAN_STRIPPING;
    }
    std::memcpy(attr, &a, std::min(size, sizeof(a)));
    return 0;
}

// ibv_query_rt_values_ex(3): the raw clock, as rdma-core's mlx5 gives it (the timer's
// ticks in raw_clock.tv_nsec, tv_sec 0). EINVAL for any other value asked; EOPNOTSUPP
// where the clock cannot be read here (a function cxvd owns).
int vctx_query_rt_values(ibv_context* ctx, ibv_values_ex* values) {
    if ((values->comp_mask & ~std::uint32_t{IBV_VALUES_MASK_RAW_CLOCK}) != 0) return EINVAL;
    const bool raw = (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) != 0;
    values->comp_mask = 0;
    if (!raw) return 0;
    auto c = verbs_device(ctx).clock();
    if (!c) return c.error().code == ENOTSUP ? EOPNOTSUPP : c.error().code;
    values->raw_clock.tv_sec = 0;
    values->raw_clock.tv_nsec = static_cast<long>((*c)->read_ticks());
    values->comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
    return 0;
}

}  // namespace

void install_context_ops(ibv_context* ctx) {
    verbs_context* v = verbs_get_ctx(ctx);
    if (v == nullptr) return;
    v->query_port = vctx_query_port;
    v->query_device_ex = vctx_query_device_ex;
    v->query_rt_values = vctx_query_rt_values;
    v->create_cq_ex = create_cq_ex;
    v->create_qp_ex = create_qp_ex;
}

}  // namespace cxv::abi

using namespace cxv::abi;

CXV_ABI_EXPORT int ibv_query_device(ibv_context* context, ibv_device_attr* device_attr) {
    fill_device_attr(context, *device_attr);
    return 0;
}

// The exported form takes rdma-core's old port struct (everything before
// port_cap_flags2); <infiniband/verbs.h>'s inline ibv_query_port() calls the context's
// query_port op instead, which fills all of it.
#undef ibv_query_port
CXV_ABI_EXPORT int ibv_query_port(ibv_context* context, uint8_t port_num, _compat_ibv_port_attr* port_attr) {
    ibv_port_attr a;
    if (const int r = fill_port_attr(context, port_num, a); r != 0) return fail_errno(r);
    std::memcpy(port_attr, &a, offsetof(ibv_port_attr, port_cap_flags2));
    return 0;
}

// ibv_query_gid(3): an empty entry of the table reads as zeros, as with rdma-core; -1
// beyond the table.
CXV_ABI_EXPORT int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
    if (index < 0) return fail_errno(EINVAL), -1;
    const int r = gid_at(context, port_num, static_cast<std::uint32_t>(index), *gid);
    if (r == ENODATA) {
        std::memset(gid, 0, sizeof(*gid));
        return 0;
    }
    if (r != 0) return fail_errno(r), -1;
    return 0;
}

// rdma-core's private helper (enum ibv_gid_type_sysfs: 0 IB/RoCE v1, 1 RoCE v2).
CXV_ABI_EXPORT int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, int* type) {
    ibv_gid g;
    if (const int r = gid_at(context, port_num, index, g); r != 0) return fail_errno(r), -1;
    *type = gid_type(context) == IBV_GID_TYPE_ROCE_V2 ? 1 : 0;
    return 0;
}

CXV_ABI_EXPORT int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                                     ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
    if (flags != 0 || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
    ibv_gid g;
    if (const int r = gid_at(context, port_num, gid_index, g); r != 0) return r;
    std::memset(entry, 0, sizeof(*entry));
    entry->gid = g;
    entry->gid_index = gid_index;
    entry->port_num = port_num;
    entry->gid_type = gid_type(context);
    return 0;
}

CXV_ABI_EXPORT ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                                            uint32_t flags, size_t entry_size) {
    if (flags != 0 || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
    ibv_device_attr d;
    fill_device_attr(context, d);
    size_t n = 0;
    for (std::uint32_t port = 1; port <= d.phys_port_cnt; ++port) {
        auto p = cxv::verbs_device(context).port(port);
        if (!p) return -EIO;
        for (std::uint32_t i = 0; i < p->gids.size(); ++i) {
            if (n == max_entries) return -EINVAL;  // the table does not fit
            ibv_gid_entry& e = entries[n++];
            std::memset(&e, 0, sizeof(e));
            std::memcpy(e.gid.raw, p->gids[i].data(), 16);
            e.gid_index = i;
            e.port_num = port;
            e.gid_type = gid_type(context);
        }
    }
    return static_cast<ssize_t>(n);
}

// ibv_query_pkey(3): the default P_Key 0xffff at index 0 (the only one cxv's QPs use).
CXV_ABI_EXPORT int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
    ibv_port_attr a;
    if (fill_port_attr(context, port_num, a) != 0 || index < 0 || index >= a.pkey_tbl_len) {
        return fail_errno(EINVAL), -1;
    }
    *pkey = index == 0 ? htobe16(0xffff) : 0;
    return 0;
}

CXV_ABI_EXPORT int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
    __be16 at;
    for (int i = 0; ibv_query_pkey(context, port_num, i, &at) == 0; ++i) {
        if (at == pkey) return i;
    }
    return fail_errno(ENOENT), -1;
}
