// The firmware's objects: what the model remembers of each, in the form the transport
// engine will use. Each keeps the PRM context the driver gave (and later transitions
// changed) as bytes of the hw/ layout, so fields are read with ifc::get by their PRM
// names, plus the device-side state the context does not hold. Each also owns a slot of
// firmware memory (ICM) where its context is kept through the IOMMU, as on a card.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "hw/cqe.h"
#include "hw/ifc.h"
#include "hw/ifc_counters.h"
#include "hw/ifc_qp.h"
#include "hw/opcodes.h"
#include "sim/objects/pages.h"
#include "sim/objects/ring_deque.h"
#include "sim/wire/packet.h"

namespace cxv::sim {

// Object numbers (QPN, CQN, SRQN, EQN, mkey index, UMEM id) and the counters kept
// with them (CQ producer and consumer counters, PSNs) are 24 bits wide (PRM "QP
// Context", "Completion Queue Context", "Memory Key Context").
inline constexpr std::uint32_t kMask24 = 0xffffff;

// Counts the objects that refer to this one (a CQ used by QPs, a PD by MKEYs and QPs):
// an object with users may not be destroyed (RESOURCE_BUSY / RESOURCE_IN_USE).
struct referenced {
    std::uint32_t users = 0;
};

struct pd_object : referenced {
    std::uint32_t uid = 0;
};

// An XRC domain (ALLOC_XRCD): XRC SRQs name it.
struct xrcd_object : referenced {
    std::uint32_t uid = 0;
};

struct uar_object : referenced {
    std::uint32_t uid = 0;
};

struct mkey_object {
    std::uint32_t index = 0;   // mkey_index (24 bits); the key is index << 8 | mkey_7_0
    std::uint32_t uid = 0;
    std::array<std::byte, hw::ifc::mkc::size_bytes> mkc{};
    std::vector<std::uint64_t> translations;  // MTT entries as given (addresses | flags)
    bool pg_access = false;                   // created with pg_access: MTT bits 1:0 are wr/rd enables
    std::uint32_t umem_id = 0;                // when the translations come from a UMEM
    std::uint64_t umem_offset = 0;
    pages::slot icm{};
    std::vector<pages::slot> list_icm;  // the translation list, in firmware memory too
};

struct umem_object : referenced {
    std::uint32_t id = 0;
    std::uint32_t uid = 0;
    unsigned log_page_size = 0;   // relative to 4 KiB
    std::uint32_t page_offset = 0;
    std::vector<std::uint64_t> mtt;  // page addresses | access bits
    pages::slot icm{};
    std::vector<pages::slot> list_icm;  // the MTT list, in firmware memory too
};

struct cq_object : referenced {
    std::uint32_t cqn = 0;
    std::uint32_t uid = 0;
    std::array<std::byte, hw::ifc::cqc::size_bytes> cqc{};
    std::vector<std::uint64_t> pas;
    std::uint32_t umem_id = 0;       // cq_umem_valid: buffer in a UMEM
    std::uint64_t umem_offset = 0;
    std::uint32_t eqn = 0;
    std::uint32_t producer = 0;      // CQEs written
    std::uint32_t arm_sn = 0;        // last arm sequence number seen
    bool armed = false;
    bool armed_solicited = false;
    bool overrun = false;
    // The ring as the device keeps it translated (iommu::translate), when it lies in one
    // mapping at consecutive IOVAs: its IOVA and host address, kept while the IOMMU's
    // generation is `ring_mmu_generation` and the tables' is `ring_generation` (a resize
    // is a command). ring_host null: the ring is reached CQE by CQE.
    std::uint64_t ring_iova = 0;
    std::byte* ring_host = nullptr;
    std::uint64_t ring_mmu_generation = ~std::uint64_t{0}, ring_generation = ~std::uint64_t{0};
    pages::slot icm{};
};

// The Q counters (hw/ifc_counters.h's list; sim/firmware/fw_counters.cc says where each moves).
// Some stay 0: the model has no DC transport, memory windows, adaptive retransmission or
// congestion control.
// One Q counter set (ALLOC_Q_COUNTER; set 0 is the device's default). The values
// (hw::q_counter_values) are the model's own state, not kept in firmware pages; 32 bits
// each, wrapping as the PRM's fields do.
using hw::q_counter_values;

struct q_counter_object : referenced {  // users: QPs whose counter_set_id names it
    std::uint32_t id = 0;
    std::uint32_t uid = 0;
    q_counter_values v;
};

// The PRM's qpc.state values (hw/ifc_qp.h).
using hw::ifc::qp_state;

// A scatter/gather entry as a WQE gave it (byte_count 0 already turned into 2^31).
struct local_sge {
    std::uint32_t lkey = 0;
    std::uint64_t addr = 0;
    std::uint32_t len = 0;
};

// A send WQE the requester has taken from the ring and not yet completed: an RC request
// waits for its ACKs or responses; UC and UD WQEs complete as they are sent.
struct sq_request {
    std::uint16_t wqe_index = 0;
    std::uint32_t bbs = 1;          // WQE-BBs it takes in the ring
    hw::wqe_opcode op = hw::wqe_opcode::NOP;
    bool signaled = false;
    bool done = false;              // answered; completes once all before it have
    bool failed = false;            // completes with `error` and takes the QP to error
    hw::cqe_syndrome error = hw::cqe_syndrome::WR_FLUSH_ERR;
    std::uint32_t byte_cnt = 0;     // READ and atomics: bytes returned
    std::vector<local_sge> local;   // READ and atomics: where the response goes
    // The message, kept so that any of its packets can be sent again (IBA 9.7.5.1.3):
    // `msg` holds the route, the BTH fields every packet shares, the extended headers
    // and the whole gathered payload; segmenting it at `mtu` gives packet k of `npsn`.
    wire::packet msg;
    std::uint32_t psn = 0;          // first PSN (24 bits)
    std::uint32_t npsn = 1;         // PSNs it takes (a READ: its response packets)
    std::uint32_t mtu = 4096;
    std::uint32_t resp_got = 0;     // READ: response packets scattered, in order
    std::uint32_t rerequested = 0xffffffff;  // READ: resp_got when last asked again
};

// A receive WQE the responder has taken for a message in progress.
struct recv_slot {
    std::uint16_t index = 0;  // wqe_counter of its CQE
    bool srq = false;
    std::uint32_t srqn = 0;
    std::vector<local_sge> sges;
};

// The responder's saved result of an atomic (IBA 9.7.5.1.3: a duplicate atomic is
// answered from this, never executed again).
struct atomic_result {
    std::uint32_t psn = 0;
    std::uint64_t orig = 0;
};

// The transport engine's state of a QP (sim/transport/xport_*.cc).
struct qp_transport {
    bool kicked = false;            // a doorbell not yet followed to the doorbell record
    std::uint32_t sq_fetched = 0;   // WQE-BBs taken from the ring
    ring_deque<sq_request> outstanding;
    std::uint32_t next_psn = 0;     // requester: PSN of the next new message
    bool rnr_wait = false;          // RNR NAKed: resend from rnr_psn at retry_at
    std::uint32_t rnr_psn = 0;
    bool timer = false;             // an ACK timeout runs (until retry_at)
    std::chrono::steady_clock::time_point retry_at{};
    unsigned retries_left = 0, rnr_left = 0;
    // The last BlueFlame copy written for this QP, for the WQE it carries.
    std::array<std::byte, 256> bf{};
    std::uint32_t bf_len = 0;
    std::uint16_t bf_index = 0;
    std::uint32_t rq_flushed = 0;   // receive WQEs flushed while in error
    // Responder (IBA 9.7.4 "Responder Side"): the expected PSN, the count of completed
    // messages the AETH carries, whether a sequence-error NAK was sent for the current
    // gap, and the message in progress (a SEND into `wqe`, a WRITE to `write_va`).
    std::uint32_t epsn = 0;
    std::uint32_t msn = 0;
    bool nak_sent = false;
    std::uint8_t in_msg = 0;        // operation of the message in progress (0: none)
    bool have_wqe = false;
    recv_slot wqe;
    std::uint64_t msg_bytes = 0;    // bytes of the message in progress so far
    std::uint64_t write_va = 0;
    std::uint32_t write_rkey = 0, write_len = 0;
    std::deque<atomic_result> atomics;  // the last few, oldest first
};

// A work queue page's translation as the device keeps it (iommu::translate).
struct wq_translation {
    std::uint64_t generation = 0;
    std::byte* host = nullptr;  // null: none kept
};

struct qp_object {
    std::uint32_t qpn = 0;
    std::uint32_t uid = 0;
    qp_state state = qp_state::RST;
    std::array<std::byte, hw::ifc::qpc::size_bytes> qpc{};
    std::vector<std::uint64_t> pas;
    // The device's translations of the pas pages, filled as WQEs are read from them.
    mutable std::vector<wq_translation> pas_translated;
    std::uint32_t umem_id = 0;       // wq_umem_valid: buffer in a UMEM
    std::uint64_t umem_offset = 0;
    // Objects it holds (their users counts include this QP).
    std::uint32_t pd = 0, cqn_snd = 0, cqn_rcv = 0, srqn = 0;
    // Device-side progress (the transport engine's).
    std::uint32_t sq_consumer = 0;   // send WQE-BBs consumed
    std::uint32_t rq_consumer = 0;   // receive WQEs consumed
    // The receive counter last read from the doorbell record: receive WQEs up to it are
    // known posted (the driver only moves it forward), so the record is read again only
    // when they are used up.
    std::uint32_t rq_posted = 0;
    qp_transport x;
    pages::slot icm{};
};

// Which command made an SRQ: CREATE_SRQ, CREATE_XRC_SRQ or CREATE_RMP. All three share
// one number space (qpc.srqn_rmpn_xrqn) and one receive engine; each is destroyed by its
// own command. `srqc` holds the context in CREATE_SRQ's layout (an RMP's wq translated).
enum class srq_kind : std::uint8_t { basic, xrc, rmp };

struct srq_object : referenced {
    std::uint32_t srqn = 0;
    std::uint32_t uid = 0;
    srq_kind kind = srq_kind::basic;
    std::uint32_t xrcd = 0;  // an XRC SRQ's domain (held)
    std::array<std::byte, hw::ifc::srqc::size_bytes> srqc{};
    std::vector<std::uint64_t> pas;
    std::uint32_t pd = 0, cqn = 0;
    std::uint32_t lwm = 0;           // armed limit (ARM_RQ), 0 = not armed
    std::uint32_t consumer = 0;      // WQEs consumed
    std::uint16_t head = 0;          // the WQE the next receive takes (free list head)
    bool error = false;
    pages::slot icm{};
};

}  // namespace cxv::sim
