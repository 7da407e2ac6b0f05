// The string and rate helpers of libibverbs (ibv_wc_status_str(3), ibv_event_type_str(3),
// ibv_rate_to_mult(3), ibv_rate_to_mbps(3)).
#include "api/abi/abi.h"
#include "api/cxv.h"

CXV_ABI_EXPORT const char* ibv_wc_status_str(enum ibv_wc_status status) {
    return cxv::wc_status_str(status);
}

CXV_ABI_EXPORT const char* ibv_node_type_str(enum ibv_node_type node_type) {
    switch (node_type) {
    case IBV_NODE_CA: return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH: return "InfiniBand switch";
    case IBV_NODE_ROUTER: return "InfiniBand router";
    case IBV_NODE_RNIC: return "iWARP NIC";
    case IBV_NODE_USNIC: return "usNIC";
    case IBV_NODE_USNIC_UDP: return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED: return "unspecified";
    default: return "unknown";
    }
}

CXV_ABI_EXPORT const char* ibv_port_state_str(enum ibv_port_state port_state) {
    switch (port_state) {
    case IBV_PORT_NOP: return "no state change (NOP)";
    case IBV_PORT_DOWN: return "down";
    case IBV_PORT_INIT: return "init";
    case IBV_PORT_ARMED: return "armed";
    case IBV_PORT_ACTIVE: return "active";
    case IBV_PORT_ACTIVE_DEFER: return "active defer";
    }
    return "unknown";
}

CXV_ABI_EXPORT const char* ibv_event_type_str(enum ibv_event_type event) {
    switch (event) {
    case IBV_EVENT_CQ_ERR: return "CQ error";
    case IBV_EVENT_QP_FATAL: return "local work queue catastrophic error";
    case IBV_EVENT_QP_REQ_ERR: return "invalid request local work queue error";
    case IBV_EVENT_QP_ACCESS_ERR: return "local access violation work queue error";
    case IBV_EVENT_COMM_EST: return "communication established";
    case IBV_EVENT_SQ_DRAINED: return "send queue drained";
    case IBV_EVENT_PATH_MIG: return "path migrated";
    case IBV_EVENT_PATH_MIG_ERR: return "path migration request error";
    case IBV_EVENT_DEVICE_FATAL: return "local catastrophic error";
    case IBV_EVENT_PORT_ACTIVE: return "port active";
    case IBV_EVENT_PORT_ERR: return "port error";
    case IBV_EVENT_LID_CHANGE: return "LID change";
    case IBV_EVENT_PKEY_CHANGE: return "P_Key change";
    case IBV_EVENT_SM_CHANGE: return "SM change";
    case IBV_EVENT_SRQ_ERR: return "SRQ catastrophic error";
    case IBV_EVENT_SRQ_LIMIT_REACHED: return "SRQ limit reached";
    case IBV_EVENT_QP_LAST_WQE_REACHED: return "last WQE reached";
    case IBV_EVENT_CLIENT_REREGISTER: return "client reregistration";
    case IBV_EVENT_GID_CHANGE: return "GID table change";
    case IBV_EVENT_WQ_FATAL: return "WQ fatal";
    }
    return "unknown";
}

namespace {
// IBTA 9.11 static rate codes: (enum ibv_rate, multiple of 2.5 Gb/s, Mb/s).
struct rate_row {
    ibv_rate rate;
    int mult;
    int mbps;
};
constexpr rate_row rates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},      {IBV_RATE_5_GBPS, 2, 5000},       {IBV_RATE_10_GBPS, 4, 10000},
    {IBV_RATE_20_GBPS, 8, 20000},      {IBV_RATE_30_GBPS, 12, 30000},    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},     {IBV_RATE_80_GBPS, 32, 80000},    {IBV_RATE_120_GBPS, 48, 120000},
    {IBV_RATE_14_GBPS, 0, 14062},      {IBV_RATE_56_GBPS, 0, 56250},     {IBV_RATE_112_GBPS, 0, 112500},
    {IBV_RATE_168_GBPS, 0, 168750},    {IBV_RATE_25_GBPS, 10, 25781},    {IBV_RATE_100_GBPS, 40, 103125},
    {IBV_RATE_200_GBPS, 80, 206250},   {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},     {IBV_RATE_400_GBPS, 160, 425000}, {IBV_RATE_600_GBPS, 240, 637500},
};
}  // namespace

CXV_ABI_EXPORT int ibv_rate_to_mult(enum ibv_rate rate) {
    for (const auto& r : rates) {
        if (r.rate == rate && r.mult != 0) return r.mult;
    }
    return -1;
}
CXV_ABI_EXPORT enum ibv_rate mult_to_ibv_rate(int mult) {
    for (const auto& r : rates) {
        if (r.mult == mult && mult != 0) return r.rate;
    }
    return IBV_RATE_MAX;
}
CXV_ABI_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate) {
    for (const auto& r : rates) {
        if (r.rate == rate) return r.mbps;
    }
    return -1;
}
CXV_ABI_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps) {
    for (const auto& r : rates) {
        if (r.mbps == mbps) return r.rate;
    }
    return IBV_RATE_MAX;
}
