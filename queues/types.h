// What the fast path takes and gives: scatter/gather entries and work completions.
//
// Both have exactly the layout (and, for completions, the numeric codes) of libibverbs'
// ibv_sge and ibv_wc, so that api/ can hand a caller's ibv_sge array to post() and
// poll straight into the caller's ibv_wc array, with no copy; tests/api checks the
// layouts against <infiniband/verbs.h>. queues/ itself does not include verbs.h.
#pragma once

#include <cstdint>

namespace cxv::queues {

struct sge {
    std::uint64_t addr;
    std::uint32_t length;
    std::uint32_t lkey;
};
static_assert(sizeof(sge) == 16);

// ibv_wc_status values.
enum wc_status : std::uint32_t {
    wc_success = 0,
    wc_loc_len_err = 1,
    wc_loc_qp_op_err = 2,
    wc_loc_prot_err = 4,
    wc_wr_flush_err = 5,
    wc_mw_bind_err = 6,
    wc_bad_resp_err = 7,
    wc_loc_access_err = 8,
    wc_rem_inv_req_err = 9,
    wc_rem_access_err = 10,
    wc_rem_op_err = 11,
    wc_retry_exc_err = 12,
    wc_rnr_retry_exc_err = 13,
    wc_rem_abort_err = 16,
    wc_general_err = 21,
};

// ibv_wc_opcode values.
enum wc_opcode : std::uint32_t {
    wc_send = 0,
    wc_rdma_write = 1,
    wc_rdma_read = 2,
    wc_comp_swap = 3,
    wc_fetch_add = 4,
    wc_recv = 1u << 7,
    wc_recv_rdma_with_imm = (1u << 7) + 1,
};

// ibv_wc_flags bits.
inline constexpr unsigned wc_with_grh = 1u << 0;
inline constexpr unsigned wc_with_imm = 1u << 1;
inline constexpr unsigned wc_with_ip_csum_ok = 1u << 2;

struct work_completion {
    std::uint64_t wr_id;
    std::uint32_t status;  // wc_status
    std::uint32_t opcode;  // wc_opcode
    std::uint32_t vendor_err;
    std::uint32_t byte_len;
    std::uint32_t imm_data;  // network byte order, as the CQE carries it
    std::uint32_t qp_num;
    std::uint32_t src_qp;
    unsigned wc_flags;
    std::uint16_t pkey_index;
    std::uint16_t slid;
    std::uint8_t sl;
    std::uint8_t dlid_path_bits;
};
static_assert(sizeof(work_completion) == 48);

}  // namespace cxv::queues
