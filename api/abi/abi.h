// cxv's libibverbs.so.1: what its parts share. The library exports rdma-core's ibv_*
// names with rdma-core's symbol versions (libibverbs.map) and answers them with cxv's C
// API (api/cxv_verbs.h), whose handles already have libibverbs' layouts; nothing here
// links or loads rdma-core's libibverbs.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <cerrno>

#define CXV_ABI_EXPORT extern "C" __attribute__((visibility("default")))

namespace cxv::abi {

// One function of the device list: the struct ibv_device handed out (first, so a
// handle converts back) and the PCI address it stands for.
struct device_entry {
    ibv_device dev{};
    char bdf[32] = {};
    unsigned index = 0;  // N of mlx5_N
    // From the vport context, read once (opening the function if it is not open).
    bool ids_known = false;
    std::uint64_t node_guid = 0, sys_image_guid = 0;  // host order
};

device_entry* entry_of(ibv_device* d);
device_entry* entry_of(ibv_context* ctx);

// Reads the node and system image GUIDs of an open context into its entry.
int read_ids(ibv_context* ctx, device_entry& e);

// verbs_context's create_cq_ex (objects.cc).
ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr);

// verbs_context's create_qp_ex (objects.cc): cxv_create_qp_init_ex with the inline room
// rdma-core's provider would give.
ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr);

// The inline room rdma-core's mlx5 provider gives a send queue with these attributes (RC,
// UC, UD; other types: max_inline_data as asked)
// (objects.cc): what programs written on it may post inline without asking for it.
unsigned provider_inline_room(ibv_qp_type type, unsigned max_send_sge, unsigned max_inline_data);

// The most entries a CQ may be asked for: ibv_device_attr.max_cqe (query.cc).
int max_cqe(ibv_context* ctx);

// Fills the extended ops this library answers into the verbs_context in front of `ctx`.
void install_context_ops(ibv_context* ctx);

// errno = code; returns what the caller's man page says to return.
inline int fail_errno(int code) {
    errno = code;
    return code;
}
template <typename T>
T* fail_null(int code) {
    errno = code;
    return nullptr;
}

}  // namespace cxv::abi
