// The Ethernet transport objects (PRM "Transport Interface"): a transport domain, TISs
// (what an SQ sends through), SQs and RQs (rings of send and receive WQEs, each with a
// CQ), RQTs (tables of RQs for RSS) and TIRs (where steered packets go: one RQ, or the
// RQ an RQT's entry names by the packet's hash). Each is made by its firmware command
// and released by its destroy command; the objects it names are held until then.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "driver/res/cq.h"
#include "driver/res/object.h"
#include "driver/res/pd_mr.h"
#include "driver/res/q_counter.h"

namespace cxv::driver {

class transport_domain : public hca_object {
public:
    static result<std::shared_ptr<transport_domain>> create(hca& h);
    ~transport_domain();
    status destroy();
    std::uint32_t tdn() const noexcept { return tdn_; }
    hca& device() const noexcept { return owner(); }

private:
    explicit transport_domain(hca& h) : hca_object(h) {}
    std::uint32_t tdn_ = 0;
};

class tis : public hca_object {
public:
    // `prio`: the 802.1p priority of what goes out (tisc.prio, 0 to 15 as the PRM
    // encodes it).
    static result<std::shared_ptr<tis>> create(std::shared_ptr<transport_domain> td, unsigned prio = 0);
    ~tis();
    status destroy();
    std::uint32_t tisn() const noexcept { return tisn_; }

private:
    explicit tis(std::shared_ptr<transport_domain> td) : hca_object(td->device()), td_(std::move(td)) {}
    std::shared_ptr<transport_domain> td_;
    std::uint32_t tisn_ = 0;
};

// An SQ's and an RQ's state (PRM sqc.state, rqc.state).
enum class wq_state : std::uint8_t { reset = 0x0, ready = 0x1, error = 0x3 };

// A send queue: 2^log_size 64-byte WQE basic blocks, a doorbell record, a BlueFlame
// register; created in RST (ready() moves it to RDY).
class sq : public hca_object {
public:
    struct attr {
        std::shared_ptr<pd> domain;
        std::shared_ptr<cq> send_cq;
        std::shared_ptr<tis> transport;  // the TIS it sends through
        unsigned wqebbs = 256;           // rounded up to a power of two
        std::uint32_t user_index = 0;    // sqc.user_index: what its CQEs carry in srqn_uidx (24 bits)
    };
    static result<std::shared_ptr<sq>> create(const attr& a);
    ~sq();
    status destroy();
    // MODIFY_SQ from the state it is in to `to` (RST→RDY, RDY→RDY, RDY→ERR, RDY→RST,
    // ERR→RST).
    status modify(wq_state to);
    status ready() { return modify(wq_state::ready); }
    wq_state state() const noexcept { return state_; }
    result<wq_state> query();

    std::uint32_t sqn() const noexcept { return sqn_; }
    std::byte* wqes() const noexcept { return mem_.ring(); }
    unsigned wqebb_count() const noexcept { return 1u << log_size_; }
    std::byte* doorbell_record() const noexcept { return mem_.doorbell_record(); }
    std::uint64_t doorbell_record_iova() const noexcept { return mem_.doorbell_record_iova(); }
    hca& device() const noexcept { return owner(); }
    // The SQ's BlueFlame register (as qp::bf_register).
    std::byte* bf_register(bool write_combining) const noexcept;
    const hca::bf_reg& bf() const noexcept { return bf_; }
    const std::shared_ptr<cq>& completion_queue() const noexcept { return cq_; }

private:
    explicit sq(hca& h) : hca_object(h) {}
    std::shared_ptr<pd> pd_;
    std::shared_ptr<cq> cq_;
    std::shared_ptr<tis> tis_;
    queue_memory mem_;
    hca::bf_reg bf_{};
    bool bf_held_ = false;
    std::uint32_t sqn_ = 0;
    unsigned log_size_ = 0;
    wq_state state_ = wq_state::reset;
};

// A receive queue: a ring of 2^log_size WQEs (a scatter list each), or with `striding` a
// ring of multi-packet WQEs, each one buffer of 2^log_num_strides strides of
// 2^log_stride_size bytes that consecutive packets fill (PRM "Striding RQ"). Created in
// RST (ready() moves it to RDY).
class rq : public hca_object {
public:
    struct striding {
        unsigned log_num_strides = 9;   // 9 to 16
        unsigned log_stride_size = 6;   // 6 to 13
    };
    struct attr {
        std::shared_ptr<pd> domain;
        std::shared_ptr<cq> recv_cq;
        unsigned wqes = 256;     // rounded up to a power of two
        unsigned max_sge = 1;    // a cyclic RQ's scatter entries per WQE
        bool multi_packet = false;
        striding strides{};      // with multi_packet: one scatter entry per WQE
        bool strip_vlan = false;     // rqc.vsd 0: the device removes the VLAN tag
        bool keep_fcs = false;       // rqc.scatter_fcs
        std::shared_ptr<q_counter> counter;  // rqc.counter_set_id; none: the default set
        std::uint32_t user_index = 0;        // rqc.user_index: what its CQEs carry in srqn_uidx (24 bits)
        // An SQ whose doorbell record this RQ shares, its receive counter at offset 0 beside
        // the SQ's send counter at 4 (PRM "Doorbell Record"): a QP's one record, as
        // Linux's mlx5_ib gives a raw packet QP's SQ and RQ. None: a record of its own.
        std::shared_ptr<sq> shared_record;
    };
    static result<std::shared_ptr<rq>> create(const attr& a);
    ~rq();
    status destroy();
    status modify(wq_state to);
    status ready() { return modify(wq_state::ready); }
    wq_state state() const noexcept { return state_; }
    result<wq_state> query();

    std::uint32_t rqn() const noexcept { return rqn_; }
    std::byte* wqes() const noexcept { return mem_.ring(); }
    unsigned wqe_count() const noexcept { return 1u << log_size_; }
    unsigned wqe_shift() const noexcept { return wqe_shift_; }
    bool multi_packet() const noexcept { return multi_packet_; }
    std::byte* doorbell_record() const noexcept {
        return record_of_ ? record_of_->doorbell_record() : mem_.doorbell_record();
    }
    const std::shared_ptr<cq>& completion_queue() const noexcept { return cq_; }
    hca& device() const noexcept { return owner(); }

private:
    explicit rq(hca& h) : hca_object(h) {}
    std::shared_ptr<pd> pd_;
    std::shared_ptr<cq> cq_;
    std::shared_ptr<q_counter> counter_;
    std::shared_ptr<sq> record_of_;  // attr::shared_record
    queue_memory mem_;
    std::uint32_t rqn_ = 0;
    unsigned log_size_ = 0, wqe_shift_ = 0;
    bool multi_packet_ = false;
    wq_state state_ = wq_state::reset;
};

// An RQ table: the RQs a TIR's hash spreads over (entry hash mod size).
class rqt : public hca_object {
public:
    // `max_size` entries at most over its life (0: as many as `rqs`).
    static result<std::shared_ptr<rqt>> create(std::span<const std::shared_ptr<rq>> rqs, unsigned max_size = 0);
    ~rqt();
    status destroy();
    // MODIFY_RQT: the entries replaced.
    status modify(std::span<const std::shared_ptr<rq>> rqs);
    std::uint32_t rqtn() const noexcept { return rqtn_; }

private:
    explicit rqt(hca& h) : hca_object(h) {}
    std::vector<std::shared_ptr<rq>> rqs_;
    std::uint32_t rqtn_ = 0;
    unsigned max_size_ = 0;
};

// What a TIR's hash reads (PRM "RX Hash Field Select") and how (Toeplitz or inverted
// XOR8, the Toeplitz key).
struct rx_hash {
    enum class l3 : std::uint8_t { ipv4 = 0, ipv6 = 1 };
    enum class l4 : std::uint8_t { none, tcp, udp };
    enum fields : std::uint32_t { src_ip = 1u << 0, dst_ip = 1u << 1, l4_sport = 1u << 2, l4_dport = 1u << 3 };
    bool toeplitz = true;  // else inverted XOR8
    std::array<std::uint8_t, 40> key{};
    l3 l3_type = l3::ipv4;
    l4 l4_type = l4::none;
    std::uint32_t selected = src_ip | dst_ip;
};

// Loopback: what a TIR refuses of what the function itself sent (tirc.self_lb_block).
struct tir_loopback {
    bool block_unicast = false;
    bool block_multicast = false;
};

class tir : public hca_object {
public:
    using loopback = tir_loopback;
    // DIRECT: everything steered here goes to `to`.
    static result<std::shared_ptr<tir>> create(std::shared_ptr<transport_domain> td, std::shared_ptr<rq> to,
                                               loopback lb = {});
    // INDIRECT: the entry of `table` the packet's hash picks.
    static result<std::shared_ptr<tir>> create(std::shared_ptr<transport_domain> td, std::shared_ptr<rqt> table,
                                               const rx_hash& hash, loopback lb = {});
    ~tir();
    status destroy();
    // MODIFY_TIR: a new loopback block.
    status set_loopback(loopback lb);
    std::uint32_t tirn() const noexcept { return tirn_; }
    hca& device() const noexcept { return owner(); }

private:
    explicit tir(std::shared_ptr<transport_domain> td) : hca_object(td->device()), td_(std::move(td)) {}
    static result<std::shared_ptr<tir>> make(std::shared_ptr<transport_domain> td, std::shared_ptr<rq> to,
                                             std::shared_ptr<rqt> table, const rx_hash* hash, loopback lb);
    std::shared_ptr<transport_domain> td_;
    std::shared_ptr<rq> rq_;
    std::shared_ptr<rqt> rqt_;
    std::uint32_t tirn_ = 0;
};

}  // namespace cxv::driver
