// hw/'s WQE, CQE and doorbell definitions against rdma-core's infiniband/mlx5dv.h (Debian
// libibverbs-dev), which NVIDIA's user-space code builds WQEs with for real cards.
// Builders are compared byte for byte on random inputs; structures field by field.
#include <infiniband/mlx5dv.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>

#include <doctest/doctest.h>

#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "hw/wqe.h"

namespace hw = cxv::hw;

namespace {

constexpr int kRounds = 20000;

template <typename A, typename B>
bool same_bytes(const A& a, const B& b) {
    static_assert(sizeof(A) == sizeof(B));
    return std::memcmp(&a, &b, sizeof(A)) == 0;
}

// Fills an object with random bytes so that a builder that forgets a field is caught.
template <typename T>
void scribble(T& t, std::mt19937_64& rng) {
    auto* p = reinterpret_cast<unsigned char*>(&t);
    for (std::size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<unsigned char>(rng());
}

}  // namespace

TEST_CASE("segment layouts match mlx5dv.h") {
#define SAME_OFFSET(ours, theirs, field) CHECK(offsetof(ours, field) == offsetof(theirs, field))
    CHECK(sizeof(hw::wqe_ctrl_seg) == sizeof(mlx5_wqe_ctrl_seg));
    SAME_OFFSET(hw::wqe_ctrl_seg, mlx5_wqe_ctrl_seg, opmod_idx_opcode);
    SAME_OFFSET(hw::wqe_ctrl_seg, mlx5_wqe_ctrl_seg, qpn_ds);
    SAME_OFFSET(hw::wqe_ctrl_seg, mlx5_wqe_ctrl_seg, signature);
    SAME_OFFSET(hw::wqe_ctrl_seg, mlx5_wqe_ctrl_seg, dci_stream_channel_id);
    SAME_OFFSET(hw::wqe_ctrl_seg, mlx5_wqe_ctrl_seg, fm_ce_se);
    SAME_OFFSET(hw::wqe_ctrl_seg, mlx5_wqe_ctrl_seg, imm);

    CHECK(sizeof(hw::wqe_raddr_seg) == sizeof(mlx5_wqe_raddr_seg));
    SAME_OFFSET(hw::wqe_raddr_seg, mlx5_wqe_raddr_seg, raddr);
    SAME_OFFSET(hw::wqe_raddr_seg, mlx5_wqe_raddr_seg, rkey);

    CHECK(sizeof(hw::wqe_atomic_seg) == sizeof(mlx5_wqe_atomic_seg));
    SAME_OFFSET(hw::wqe_atomic_seg, mlx5_wqe_atomic_seg, swap_add);
    SAME_OFFSET(hw::wqe_atomic_seg, mlx5_wqe_atomic_seg, compare);

    CHECK(sizeof(hw::wqe_data_seg) == sizeof(mlx5_wqe_data_seg));
    SAME_OFFSET(hw::wqe_data_seg, mlx5_wqe_data_seg, byte_count);
    SAME_OFFSET(hw::wqe_data_seg, mlx5_wqe_data_seg, lkey);
    SAME_OFFSET(hw::wqe_data_seg, mlx5_wqe_data_seg, addr);

    CHECK(sizeof(hw::wqe_inline_seg) == sizeof(mlx5_wqe_inl_data_seg));

    // The UMR control segment (rdma-core calls the octowords KLM's, and leaves the high
    // offset bits reserved), and the memory key context segment that follows it: the mkc
    // layout's first 64 bytes.
    CHECK(sizeof(hw::wqe_umr_ctrl_seg) == sizeof(mlx5_wqe_umr_ctrl_seg));
    SAME_OFFSET(hw::wqe_umr_ctrl_seg, mlx5_wqe_umr_ctrl_seg, flags);
    CHECK(offsetof(hw::wqe_umr_ctrl_seg, xlt_octowords) == offsetof(mlx5_wqe_umr_ctrl_seg, klm_octowords));
    CHECK(offsetof(hw::wqe_umr_ctrl_seg, xlt_offset) == offsetof(mlx5_wqe_umr_ctrl_seg, translation_offset));
    SAME_OFFSET(hw::wqe_umr_ctrl_seg, mlx5_wqe_umr_ctrl_seg, mkey_mask);
    CHECK(hw::umr_mkey_seg_size == sizeof(mlx5_wqe_mkey_context_seg));
    CHECK(hw::ifc::mkc::start_addr::bit_offset / 8 == offsetof(mlx5_wqe_mkey_context_seg, start_addr));
    CHECK(hw::ifc::mkc::len::bit_offset / 8 == offsetof(mlx5_wqe_mkey_context_seg, len));
    CHECK(hw::ifc::mkc::pd::bit_offset / 8 == offsetof(mlx5_wqe_mkey_context_seg, flags_pd) + 1);
    CHECK(hw::ifc::mkc::translations_octword_size::bit_offset / 8 ==
          offsetof(mlx5_wqe_mkey_context_seg, translations_octword_size));
    CHECK(hw::ifc::mkc::log_page_size::bit_offset / 8 == offsetof(mlx5_wqe_mkey_context_seg, log_page_size));
    CHECK(hw::ifc::mkc::mkey_7_0::bit_offset / 8 == offsetof(mlx5_wqe_mkey_context_seg, qpn_mkey) + 3);
    {
        // The free bit and the access bits where rdma-core's byte masks put them.
        std::array<std::byte, hw::ifc::mkc::size_bytes> c{};
        hw::ifc::set<hw::ifc::mkc::free>(c.data(), 1);
        hw::ifc::set<hw::ifc::mkc::a>(c.data(), 1);
        hw::ifc::set<hw::ifc::mkc::lr>(c.data(), 1);
        mlx5_wqe_mkey_context_seg theirs{};
        std::memcpy(&theirs, c.data(), sizeof(theirs));
        CHECK(theirs.free == MLX5_WQE_MKEY_CONTEXT_FREE);
        CHECK(theirs.access_flags ==
              (MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC | MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_READ));
    }

    CHECK(sizeof(hw::wqe_av) == sizeof(mlx5_wqe_av));
    CHECK(offsetof(hw::wqe_av, qkey) == offsetof(mlx5_wqe_av, key.qkey.qkey));
    SAME_OFFSET(hw::wqe_av, mlx5_wqe_av, dqp_dct);
    SAME_OFFSET(hw::wqe_av, mlx5_wqe_av, stat_rate_sl);
    SAME_OFFSET(hw::wqe_av, mlx5_wqe_av, fl_mlid);
    SAME_OFFSET(hw::wqe_av, mlx5_wqe_av, rlid);
    SAME_OFFSET(hw::wqe_av, mlx5_wqe_av, rmac);
    SAME_OFFSET(hw::wqe_av, mlx5_wqe_av, tclass);
    SAME_OFFSET(hw::wqe_av, mlx5_wqe_av, hop_limit);
    SAME_OFFSET(hw::wqe_av, mlx5_wqe_av, grh_gid_fl);
    SAME_OFFSET(hw::wqe_av, mlx5_wqe_av, rgid);
    CHECK(sizeof(hw::wqe_datagram_seg) == sizeof(mlx5_wqe_datagram_seg));

    CHECK(sizeof(hw::wqe_srq_next_seg) == sizeof(mlx5_wqe_srq_next_seg));
    SAME_OFFSET(hw::wqe_srq_next_seg, mlx5_wqe_srq_next_seg, next_wqe_index);
    SAME_OFFSET(hw::wqe_srq_next_seg, mlx5_wqe_srq_next_seg, signature);

    CHECK(sizeof(hw::cqe64) == sizeof(mlx5_cqe64));
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, wqe_id);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, ml_path);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, slid);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, flags_rqpn);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, hds_ip_ext);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, l4_hdr_type_etc);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, vlan_info);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, srqn_uidx);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, imm_inval_pkey);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, app);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, app_op);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, app_info);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, byte_cnt);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, timestamp);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, sop_drop_qpn);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, wqe_counter);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, signature);
    SAME_OFFSET(hw::cqe64, mlx5_cqe64, op_own);
    // The Ethernet receive CQE's flags and header types.
    CHECK(hw::cqe_l2_ok == MLX5_CQE_L2_OK);
    CHECK(hw::cqe_l3_ok == MLX5_CQE_L3_OK);
    CHECK(hw::cqe_l4_ok == MLX5_CQE_L4_OK);
    CHECK(static_cast<int>(hw::cqe_l3_hdr_type::NONE) == MLX5_CQE_L3_HDR_TYPE_NONE);
    CHECK(static_cast<int>(hw::cqe_l3_hdr_type::IPV6) == MLX5_CQE_L3_HDR_TYPE_IPV6);
    CHECK(static_cast<int>(hw::cqe_l3_hdr_type::IPV4) == MLX5_CQE_L3_HDR_TYPE_IPV4);

    CHECK(sizeof(hw::wqe_eth_seg) == sizeof(mlx5_wqe_eth_seg));
    SAME_OFFSET(hw::wqe_eth_seg, mlx5_wqe_eth_seg, cs_flags);
    SAME_OFFSET(hw::wqe_eth_seg, mlx5_wqe_eth_seg, mss);
    SAME_OFFSET(hw::wqe_eth_seg, mlx5_wqe_eth_seg, inline_hdr_sz);
    SAME_OFFSET(hw::wqe_eth_seg, mlx5_wqe_eth_seg, inline_hdr_start);
    SAME_OFFSET(hw::wqe_eth_seg, mlx5_wqe_eth_seg, inline_hdr);
    CHECK(hw::eth_wqe_l3_csum == MLX5_ETH_WQE_L3_CSUM);
    CHECK(hw::eth_wqe_l4_csum == MLX5_ETH_WQE_L4_CSUM);
    CHECK(sizeof(hw::err_cqe64) == sizeof(mlx5_err_cqe));
    SAME_OFFSET(hw::err_cqe64, mlx5_err_cqe, srqn);
    SAME_OFFSET(hw::err_cqe64, mlx5_err_cqe, vendor_err_synd);
    SAME_OFFSET(hw::err_cqe64, mlx5_err_cqe, syndrome);
    SAME_OFFSET(hw::err_cqe64, mlx5_err_cqe, s_wqe_opcode_qpn);
    SAME_OFFSET(hw::err_cqe64, mlx5_err_cqe, wqe_counter);
    SAME_OFFSET(hw::err_cqe64, mlx5_err_cqe, signature);
    SAME_OFFSET(hw::err_cqe64, mlx5_err_cqe, op_own);
#undef SAME_OFFSET
}

TEST_CASE("constants match mlx5dv.h") {
    std::size_t n = 0;
#define SAME(ours, theirs)                                                 \
    CHECK_MESSAGE(static_cast<std::uint64_t>(ours) ==                      \
                      static_cast<std::uint64_t>(theirs), #theirs);       \
    ++n;
    // WQE opcodes (rdma-core calls LSO "TSO").
    SAME(hw::wqe_opcode::NOP, MLX5_OPCODE_NOP);
    SAME(hw::wqe_opcode::SEND_INVAL, MLX5_OPCODE_SEND_INVAL);
    SAME(hw::wqe_opcode::RDMA_WRITE, MLX5_OPCODE_RDMA_WRITE);
    SAME(hw::wqe_opcode::RDMA_WRITE_IMM, MLX5_OPCODE_RDMA_WRITE_IMM);
    SAME(hw::wqe_opcode::SEND, MLX5_OPCODE_SEND);
    SAME(hw::wqe_opcode::SEND_IMM, MLX5_OPCODE_SEND_IMM);
    SAME(hw::wqe_opcode::LSO, MLX5_OPCODE_TSO);
    SAME(hw::wqe_opcode::RDMA_READ, MLX5_OPCODE_RDMA_READ);
    SAME(hw::wqe_opcode::ATOMIC_CS, MLX5_OPCODE_ATOMIC_CS);
    SAME(hw::wqe_opcode::ATOMIC_FA, MLX5_OPCODE_ATOMIC_FA);
    SAME(hw::wqe_opcode::ATOMIC_MASKED_CS, MLX5_OPCODE_ATOMIC_MASKED_CS);
    SAME(hw::wqe_opcode::ATOMIC_MASKED_FA, MLX5_OPCODE_ATOMIC_MASKED_FA);
    SAME(hw::wqe_opcode::LOCAL_INVAL, MLX5_OPCODE_LOCAL_INVAL);
    SAME(hw::wqe_opcode::CONFIG_CMD, MLX5_OPCODE_CONFIG_CMD);
    SAME(hw::wqe_opcode::UMR, MLX5_OPCODE_UMR);
    // UMR control segment flags and mkey_mask bits.
    SAME(hw::umr_inline, MLX5_WQE_UMR_CTRL_FLAG_INLINE);
    SAME(hw::umr_check_key_free, MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE);
    SAME(hw::umr_translation_offset_en, MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET);
    SAME(hw::umr_mask_len, MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN);
    SAME(hw::umr_mask_start_addr, MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR);
    SAME(hw::umr_mask_en_sigerr, MLX5_WQE_UMR_CTRL_MKEY_MASK_SIG_ERR);
    SAME(hw::umr_mask_bsf_en, MLX5_WQE_UMR_CTRL_MKEY_MASK_BSF_ENABLE);
    SAME(hw::umr_mask_key, MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY);
    SAME(hw::umr_mask_qpn, MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN);
    SAME(hw::umr_mask_lw, MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE);
    SAME(hw::umr_mask_rr, MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ);
    SAME(hw::umr_mask_rw, MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE);
    SAME(hw::umr_mask_a, MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC);
    SAME(hw::umr_mask_free, MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE);
    // CQE opcodes.
    SAME(hw::cqe_opcode::REQ, MLX5_CQE_REQ);
    SAME(hw::cqe_opcode::RESP_WR_IMM, MLX5_CQE_RESP_WR_IMM);
    SAME(hw::cqe_opcode::RESP_SEND, MLX5_CQE_RESP_SEND);
    SAME(hw::cqe_opcode::RESP_SEND_IMM, MLX5_CQE_RESP_SEND_IMM);
    SAME(hw::cqe_opcode::RESP_SEND_INV, MLX5_CQE_RESP_SEND_INV);
    SAME(hw::cqe_opcode::RESIZE_CQ, MLX5_CQE_RESIZE_CQ);
    SAME(hw::cqe_opcode::NO_PACKET, MLX5_CQE_NO_PACKET);
    SAME(hw::cqe_opcode::SIGNATURE_ERR, MLX5_CQE_SIG_ERR);  // SIG_ERR is a <signal.h> macro
    SAME(hw::cqe_opcode::REQ_ERR, MLX5_CQE_REQ_ERR);
    SAME(hw::cqe_opcode::RESP_ERR, MLX5_CQE_RESP_ERR);
    SAME(hw::cqe_opcode::INVALID, MLX5_CQE_INVALID);
    // Error CQE syndromes.
#define SAME_SYNDROME(name, value) SAME(hw::cqe_syndrome::name, MLX5_CQE_SYNDROME_##name)
    CXV_CQE_SYNDROMES(SAME_SYNDROME)
#undef SAME_SYNDROME
    // Control segment flags and sizes.
    SAME(hw::ctrl_cq_update, MLX5_WQE_CTRL_CQ_UPDATE);
    SAME(hw::ctrl_solicited, MLX5_WQE_CTRL_SOLICITED);
    SAME(hw::fm_ce_se(hw::fence_mode::small_and_fence, false, false), MLX5_WQE_CTRL_FENCE);
    SAME(hw::fm_ce_se(hw::fence_mode::initiator_small, false, false),
         MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE);
    SAME(hw::send_wqe_bb, MLX5_SEND_WQE_BB);
    SAME(hw::send_wqe_shift, MLX5_SEND_WQE_SHIFT);
    SAME(hw::inline_seg_flag, MLX5_INLINE_SEG);
    SAME(hw::invalid_lkey, MLX5_INVALID_LKEY);
    SAME(hw::extended_ud_av, MLX5_EXTENDED_UD_AV);
    SAME(hw::cqe_owner_mask, MLX5_CQE_OWNER_MASK);
    // Doorbells.
    SAME(hw::rcv_dbr, MLX5_RCV_DBR);
    SAME(hw::snd_dbr, MLX5_SND_DBR);
    SAME(hw::cq_db_req_not, MLX5_CQ_DB_REQ_NOT);
    SAME(hw::cq_db_req_not_sol, MLX5_CQ_DB_REQ_NOT_SOL);
    SAME(hw::uar_cq_doorbell, MLX5_CQ_DOORBELL);
#undef SAME
    MESSAGE("mlx5dv conformance: ", n, " constants compared");
}

TEST_CASE("WQE builders produce mlx5dv.h's bytes") {
    std::mt19937_64 rng(2026);
    for (int round = 0; round < kRounds; ++round) {
        const auto r = rng();
        const std::uint16_t pi = static_cast<std::uint16_t>(r);
        const std::uint8_t opmod = static_cast<std::uint8_t>(r >> 16);
        const std::uint32_t qpn = static_cast<std::uint32_t>(r >> 24) & 0xffffff;
        const std::uint8_t ds = static_cast<std::uint8_t>(r >> 48) & 0x3f;
        const std::uint8_t fm_ce_se = static_cast<std::uint8_t>(r >> 56);
        const std::uint32_t imm = static_cast<std::uint32_t>(rng());
        const std::uint8_t signature = static_cast<std::uint8_t>(rng());
        const std::uint8_t opcode = static_cast<std::uint8_t>(rng());

        mlx5_wqe_ctrl_seg theirs_ctrl;
        hw::wqe_ctrl_seg ours_ctrl;
        std::memset(&theirs_ctrl, 0, sizeof(theirs_ctrl));
        scribble(ours_ctrl, rng);
        mlx5dv_set_ctrl_seg(&theirs_ctrl, pi, opcode, opmod, qpn, fm_ce_se, ds, signature, imm);
        hw::set_ctrl_seg(ours_ctrl, pi, static_cast<hw::wqe_opcode>(opcode), opmod, qpn, ds,
                         fm_ce_se, hw::be32{imm}, signature);
        REQUIRE(same_bytes(ours_ctrl, theirs_ctrl));
        CHECK(hw::ctrl_wqe_index(ours_ctrl) == pi);
        CHECK(hw::ctrl_qpn(ours_ctrl) == qpn);
        CHECK(hw::ctrl_ds(ours_ctrl) == ds);
        CHECK(static_cast<unsigned>(hw::ctrl_opcode(ours_ctrl)) == opcode);
        CHECK(hw::ctrl_opmod(ours_ctrl) == opmod);

        const std::uint32_t len = static_cast<std::uint32_t>(rng());
        const std::uint32_t lkey = static_cast<std::uint32_t>(rng());
        const std::uint64_t addr = rng();
        mlx5_wqe_data_seg theirs_data;
        hw::wqe_data_seg ours_data;
        scribble(theirs_data, rng);
        scribble(ours_data, rng);
        mlx5dv_set_data_seg(&theirs_data, len, lkey, static_cast<uintptr_t>(addr));
        hw::set_data_seg(ours_data, len, lkey, addr);
        REQUIRE(same_bytes(ours_data, theirs_data));

        // The datagram segment: mlx5dv takes the 64-bit key with the Q_Key in the upper
        // half for UD (it writes key as one big-endian 64-bit value).
        const std::uint32_t qkey = static_cast<std::uint32_t>(rng());
        const std::uint32_t dqpn = static_cast<std::uint32_t>(rng()) & 0xffffff;
        const bool ext = rng() & 1;
        const auto r2 = rng();
        std::uint8_t rmac[6], rgid[16];
        for (auto& b : rmac) b = static_cast<std::uint8_t>(rng());
        for (auto& b : rgid) b = static_cast<std::uint8_t>(rng());
        const std::uint32_t grh_gid_fl = static_cast<std::uint32_t>(rng());
        mlx5_wqe_datagram_seg theirs_dg;
        hw::wqe_datagram_seg ours_dg;
        scribble(theirs_dg, rng);
        std::memset(theirs_dg.av.reserved0, 0, sizeof(theirs_dg.av.reserved0));
        scribble(ours_dg, rng);
        mlx5dv_set_dgram_seg(&theirs_dg, std::uint64_t{qkey} << 32, dqpn, ext,
                             static_cast<std::uint8_t>(r2), static_cast<std::uint8_t>(r2 >> 8),
                             static_cast<std::uint16_t>(r2 >> 16), rmac,
                             static_cast<std::uint8_t>(r2 >> 32),
                             static_cast<std::uint8_t>(r2 >> 40), grh_gid_fl, rgid);
        hw::set_datagram_seg(ours_dg, qkey, dqpn, ext, static_cast<std::uint8_t>(r2),
                             static_cast<std::uint8_t>(r2 >> 8),
                             static_cast<std::uint16_t>(r2 >> 16), rmac,
                             static_cast<std::uint8_t>(r2 >> 32),
                             static_cast<std::uint8_t>(r2 >> 40), grh_gid_fl, rgid);
        REQUIRE(same_bytes(ours_dg, theirs_dg));

        // No mlx5dv builder for these: compare against its structures' fields.
        const std::uint64_t raddr = rng();
        const std::uint32_t rkey = static_cast<std::uint32_t>(rng());
        hw::wqe_raddr_seg ours_raddr;
        scribble(ours_raddr, rng);
        hw::set_raddr_seg(ours_raddr, raddr, rkey);
        mlx5_wqe_raddr_seg theirs_raddr{};
        theirs_raddr.raddr = htobe64(raddr);
        theirs_raddr.rkey = htobe32(rkey);
        REQUIRE(same_bytes(ours_raddr, theirs_raddr));

        const std::uint64_t swap_add = rng(), compare = rng();
        hw::wqe_atomic_seg ours_atomic;
        hw::set_atomic_seg(ours_atomic, swap_add, compare);
        mlx5_wqe_atomic_seg theirs_atomic{};
        theirs_atomic.swap_add = htobe64(swap_add);
        theirs_atomic.compare = htobe64(compare);
        REQUIRE(same_bytes(ours_atomic, theirs_atomic));

        const std::uint32_t inl = static_cast<std::uint32_t>(rng()) & 0x3ff;
        hw::wqe_inline_seg ours_inl;
        hw::set_inline_seg(ours_inl, inl);
        mlx5_wqe_inl_data_seg theirs_inl{};
        theirs_inl.byte_count = htobe32(inl | MLX5_INLINE_SEG);
        REQUIRE(same_bytes(ours_inl, theirs_inl));

        const std::uint16_t next = static_cast<std::uint16_t>(rng());
        hw::wqe_srq_next_seg ours_next;
        scribble(ours_next, rng);
        hw::set_srq_next_seg(ours_next, next);
        mlx5_wqe_srq_next_seg theirs_next{};
        theirs_next.next_wqe_index = htobe16(next);
        REQUIRE(same_bytes(ours_next, theirs_next));
    }
    MESSAGE("mlx5dv conformance: ", kRounds, " random rounds of 7 segment builders");
}

TEST_CASE("CQE accessors read what mlx5dv.h reads") {
    std::mt19937_64 rng(7);
    for (int round = 0; round < kRounds; ++round) {
        std::array<std::uint64_t, 8> raw;
        for (auto& w : raw) w = rng();
        mlx5_cqe64 theirs;
        hw::cqe64 ours;
        std::memcpy(&theirs, raw.data(), 64);
        std::memcpy(&ours, raw.data(), 64);

        REQUIRE(hw::cqe_get_owner(ours.op_own) == mlx5dv_get_cqe_owner(&theirs));
        REQUIRE(hw::cqe_get_se(ours.op_own) == mlx5dv_get_cqe_se(&theirs));
        REQUIRE(hw::cqe_get_format(ours.op_own) == mlx5dv_get_cqe_format(&theirs));
        REQUIRE(static_cast<unsigned>(hw::cqe_get_opcode(ours.op_own)) ==
                mlx5dv_get_cqe_opcode(&theirs));
        REQUIRE(hw::cqe_qpn(ours) == (be32toh(theirs.sop_drop_qpn) & 0xffffff));
        REQUIRE(hw::cqe_srqn(ours) == (be32toh(theirs.srqn_uidx) & 0xffffff));
        REQUIRE(hw::cqe_src_qpn(ours) == (be32toh(theirs.flags_rqpn) & 0xffffff));
        REQUIRE(ours.byte_cnt.value() == be32toh(theirs.byte_cnt));
        REQUIRE(ours.wqe_counter.value() == be16toh(theirs.wqe_counter));
        REQUIRE(ours.slid.value() == be16toh(theirs.slid));
        REQUIRE(ours.timestamp.value() == be64toh(theirs.timestamp));
        REQUIRE(ours.imm_inval_pkey.raw == theirs.imm_inval_pkey);

        hw::err_cqe64 ours_err;
        mlx5_err_cqe theirs_err;
        std::memcpy(&ours_err, raw.data(), 64);
        std::memcpy(&theirs_err, raw.data(), 64);
        REQUIRE(ours_err.syndrome == theirs_err.syndrome);
        REQUIRE(ours_err.vendor_err_synd == theirs_err.vendor_err_synd);
        REQUIRE(hw::err_cqe_qpn(ours_err) == (be32toh(theirs_err.s_wqe_opcode_qpn) & 0xffffff));
        REQUIRE(hw::err_cqe_wqe_opcode(ours_err) == (be32toh(theirs_err.s_wqe_opcode_qpn) >> 24));

        // And the owner bit written by make_op_own reads back through mlx5dv.
        const auto op = static_cast<hw::cqe_opcode>(rng() & 0xf);
        const bool se = rng() & 1;
        const std::uint8_t owner = rng() & 1;
        theirs.op_own = hw::make_op_own(op, se, owner);
        REQUIRE(mlx5dv_get_cqe_owner(&theirs) == owner);
        REQUIRE(mlx5dv_get_cqe_se(&theirs) == se);
        REQUIRE(mlx5dv_get_cqe_opcode(&theirs) == static_cast<unsigned>(op));
    }
    MESSAGE("mlx5dv conformance: ", kRounds, " random CQEs read both ways");
}
