// A transport engine on its own, for unit tests: object tables filled by hand (no
// command interface), host memory behind an IOMMU, and hooks that keep what the engine
// asks of the rest of the function -- messages on the wire, events, Q counts -- so that
// a test can look at them and deliver the messages back (a loopback wire).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "hw/wqe.h"
#include "sim/device_config.h"
#include "sim/objects/tables.h"
#include "sim/pci/bar.h"
#include "sim/pci/iommu.h"
#include "sim/trace.h"
#include "sim/transport/engine.h"
#include "sim/transport/hooks.h"

namespace cxv::sim::testing {

namespace ifc = hw::ifc;

struct event_seen {
    hw::event_type type;
    std::vector<std::byte> data;
};

class engine_rig : public transport_hooks {
public:
    static constexpr std::uint64_t kIova = 0x10000000;  // where host memory is mapped
    static constexpr std::size_t kMem = 1 << 20;
    static constexpr std::uint32_t kPd = 1;
    static constexpr std::uint32_t kMkeyIndex = 0x20;
    static constexpr std::uint32_t kKey = kMkeyIndex << 8;  // mkey_7_0 = 0

    explicit engine_rig(const device_config& cfg = {}) : cfg_(cfg), bar_(std::move(bar0::create(cfg_.bar0_size)).value()) {
        mem_ = static_cast<std::byte*>(std::aligned_alloc(4096, kMem));
        std::memset(mem_, 0, kMem);
        mmu.map(kIova, mem_, kMem, true, true);
        engine = std::make_unique<transport_engine>(cfg_, *bar_, mmu, tr, t, *this);
        add_pa_mkey();
    }
    ~engine_rig() { std::free(mem_); }
    const device_config& config() const noexcept { return cfg_; }
    engine_rig(const engine_rig&) = delete;
    engine_rig& operator=(const engine_rig&) = delete;

    // --- host memory ---
    // A fresh, zeroed, 4 KiB-aligned piece of host memory: its IOVA.
    std::uint64_t alloc(std::size_t bytes) {
        const std::uint64_t at = next_;
        next_ += (bytes + 4095) / 4096 * 4096;
        REQUIRE(next_ - kIova <= kMem);
        return at;
    }
    std::byte* host(std::uint64_t iova) { return mem_ + (iova - kIova); }
    // All of host memory mapped again, readable and writable or read-only, as a driver's
    // UNMAP_DMA and MAP_DMA would leave it.
    void remap(bool writable) {
        REQUIRE(mmu.unmap(kIova, kMem).has_value());
        REQUIRE(mmu.map(kIova, mem_, kMem, true, writable) == map_error::none);
    }
    template <typename T>
    void put(std::uint64_t iova, const T& v) { std::memcpy(host(iova), &v, sizeof(T)); }
    template <typename T>
    T get(std::uint64_t iova) {
        T v{};
        std::memcpy(&v, host(iova), sizeof(T));
        return v;
    }

    // --- objects in the tables ---
    // A CQ of 2^log_size 64-byte CQEs on EQ `eqn`, its ring (contiguous, one page address
    // per 4 KiB) and doorbell record in host memory (consumer index 0).
    cq_object& add_cq(std::uint32_t cqn, unsigned log_size, std::uint32_t eqn = 7) {
        cq_object cq;
        cq.cqn = cqn;
        cq.eqn = eqn;
        std::byte* c = cq.cqc.data();
        ifc::set<ifc::cqc::log_cq_size>(c, log_size);
        ifc::set<ifc::cqc::dbr_addr>(c, alloc(64));
        const std::uint64_t ring = alloc(std::size_t{64} << log_size);
        for (std::size_t off = 0; off < (std::size_t{64} << log_size); off += 4096) cq.pas.push_back(ring + off);
        ++t.eth.generation;  // as a command would
        return t.cqs[cqn] = std::move(cq);
    }
    // The CQE at ring index i of a CQ.
    hw::cqe64 cqe(std::uint32_t cqn, std::uint32_t i) {
        const cq_object& cq = t.cqs.at(cqn);
        return get<hw::cqe64>(cq.pas[0] + std::uint64_t{i} * 64);
    }

    // An RC QP in RTS connected to `remote`, with a 16-entry RQ of 16-byte WQEs (one data
    // segment each) and a 16-entry SQ, in one page; both queues complete to `cqn`.
    qp_object& add_rc_qp(std::uint32_t qpn, std::uint32_t remote, std::uint32_t cqn,
                         transport tp = transport::rc) {
        qp_object qp;
        qp.qpn = qpn;
        qp.state = qp_state::RTS;
        qp.pd = kPd;
        qp.cqn_snd = qp.cqn_rcv = cqn;
        std::byte* q = qp.qpc.data();
        ifc::set<ifc::qpc::st>(q, static_cast<std::uint32_t>(tp));
        ifc::set<ifc::qpc::state>(q, static_cast<std::uint32_t>(qp_state::RTS));
        ifc::set<ifc::qpc::log_sq_size>(q, 4);
        ifc::set<ifc::qpc::log_rq_size>(q, 4);
        ifc::set<ifc::qpc::log_rq_stride>(q, 0);
        ifc::set<ifc::qpc::mtu>(q, 5);
        ifc::set<ifc::qpc::remote_qpn>(q, remote);
        ifc::set<ifc::qpc::rre>(q, 1);
        ifc::set<ifc::qpc::rwe>(q, 1);
        ifc::set<ifc::qpc::rae>(q, 1);
        ifc::set<ifc::qpc::uar_page>(q, cfg_.first_uar);
        ifc::set<ifc::qpc::dbr_addr>(q, alloc(64));
        qp.pas.push_back(alloc(4096));
        engine->watch_bf_page(cfg_.first_uar);  // as CREATE_QP does
        return t.qps[qpn] = std::move(qp);
    }

    // The path MTU (qpc.mtu code: 1 = 256 ... 5 = 4096), the ACK timeout (4.096 us *
    // 2^t) and the retry budgets of a QP, as INIT2RTR/RTR2RTS set them.
    void set_path(std::uint32_t qpn, unsigned mtu_code, unsigned ack_timeout = 0, unsigned retry = 7,
                  unsigned rnr_retry = 7) {
        qp_object& qp = t.qps.at(qpn);
        std::byte* q = qp.qpc.data();
        ifc::set<ifc::qpc::mtu>(q, mtu_code);
        ifc::set<ifc::ads::ack_timeout>(ifc::at<ifc::qpc::primary_address_path>(q), ack_timeout);
        ifc::set<ifc::qpc::retry_count>(q, retry);
        ifc::set<ifc::qpc::rnr_retry>(q, rnr_retry);
        qp.x.retries_left = retry;
        qp.x.rnr_left = rnr_retry;
    }

    // Posts one receive WQE of `len` bytes at `addr` and updates the doorbell record.
    void post_recv(std::uint32_t qpn, std::uint64_t addr, std::uint32_t len) {
        qp_object& qp = t.qps.at(qpn);
        hw::wqe_data_seg d{};
        hw::set_data_seg(d, len, kKey, addr);
        put(qp.pas[0] + std::uint64_t{rq_posted_[qpn] % 16} * 16, d);
        ++rq_posted_[qpn];
        put(ifc::get<ifc::qpc::dbr_addr>(qp.qpc.data()), hw::be32::from(rq_posted_[qpn]));
    }

    // Posts one send WQE (its control segment filled here, then `segs` as given), updates
    // the doorbell record and rings the doorbell; then runs the wire until it is quiet.
    template <typename... Segs>
    void post_send(std::uint32_t qpn, hw::wqe_opcode op, bool signaled, const Segs&... segs) {
        post_send_imm(qpn, op, signaled, hw::be32{}, segs...);
    }
    // The same with the control segment's imm (an immediate, an invalidated key, the key
    // a UMR changes).
    template <typename... Segs>
    void post_send_imm(std::uint32_t qpn, hw::wqe_opcode op, bool signaled, hw::be32 imm, const Segs&... segs) {
        qp_object& qp = t.qps.at(qpn);
        const std::uint16_t idx = sq_posted_[qpn];
        const std::uint64_t at = qp.pas[0] + 16 * 16 + std::uint64_t{idx % 16u} * 64;
        std::size_t pos = sizeof(hw::wqe_ctrl_seg);
        ((put(at + pos, segs), pos += sizeof(Segs)), ...);
        const auto ds = static_cast<std::uint8_t>((pos + 15) / 16);
        sq_posted_[qpn] = static_cast<std::uint16_t>(idx + (pos + 63) / 64);  // WQE-BBs taken (not wrapped)
        hw::wqe_ctrl_seg ctrl{};
        hw::set_ctrl_seg(ctrl, idx, op, 0, qpn, ds, signaled ? hw::ctrl_cq_update : 0, imm);
        put(at, ctrl);
        put(ifc::get<ifc::qpc::dbr_addr>(qp.qpc.data()) + 4, hw::be32::from(sq_posted_[qpn]));
        const std::uint64_t qword0 =
            (std::uint64_t{ctrl.opmod_idx_opcode.value()} << 32) | ctrl.qpn_ds.value();
        const std::size_t off = std::size_t{cfg_.first_uar} * hw::uar_page_size + hw::uar_bf_offset;
        engine->sq_doorbell(cfg_.first_uar, off, qword0);
        if (auto_run) run_wire();
    }

    // Posts a signaled RDMA READ or WRITE (`op`) of `len` bytes between `local` and
    // `remote`, both under kKey, with post_send.
    void post_rdma(std::uint32_t qpn, hw::wqe_opcode op, std::uint64_t remote, std::uint32_t len,
                   std::uint64_t local) {
        hw::wqe_raddr_seg ra{};
        hw::set_raddr_seg(ra, remote, kKey);
        hw::wqe_data_seg d{};
        hw::set_data_seg(d, len, kKey, local);
        post_send(qpn, op, true, ra, d);
    }

    // Delivers every message on the wire back to the engine (a loopback) until none is
    // left, in batches as the device does: what is on the wire, then end_of_batch() (the
    // ACKs owed go out), again; the number delivered. Packets a test handed to receive()
    // itself are a batch that ends here first.
    std::size_t run_wire() {
        std::size_t n = 0;
        engine->end_of_batch();
        while (!wire.empty()) {
            for (std::size_t k = wire.size(); k > 0; --k) {
                wire::packet p = std::move(wire.front());
                wire.pop_front();
                engine->receive(p);
                ++n;
            }
            engine->end_of_batch();
        }
        return n;
    }

    // --- transport_hooks ---
    void transmit_frame(std::vector<std::byte>& f, wire::ip_checksums c) override {
        frames.emplace_back(f.begin(), f.end());
        computed.push_back(c);
    }
    std::vector<std::vector<std::byte>> frames;  // what SQs sent
    std::vector<wire::ip_checksums> computed;     // ... and the checksums computed in each
    void transmit(wire::packet&& p) override {
        sent.push_back(p);
        wire.push_back(std::move(p));
    }
    void async_event(hw::event_type type, std::span<const std::byte> data) override {
        events.push_back({type, {data.begin(), data.end()}});
    }
    void completion_event(std::uint32_t eqn, std::span<const std::byte> data) override {
        completions.push_back({eqn, ifc::get<ifc::comp_event::cq_number>(data.data())});
    }
    void count(const qp_object&, std::uint32_t q_counter_values::*what) override { ++(counted.*what); }
    void count_req_error(const qp_object&, hw::cqe_syndrome why) override { req_errors.push_back(why); }
    void count_resp_error(const qp_object&, hw::cqe_syndrome why, bool) override { resp_errors.push_back(why); }
    std::uint64_t timestamp() override { return now_ticks; }
    std::uint64_t now_ticks = 0x1234567890;  // what timestamp() answers

    iommu mmu;
    trace tr;
    object_tables t;
    std::unique_ptr<transport_engine> engine;
    std::deque<wire::packet> wire;
    std::vector<wire::packet> sent;  // every packet the engine transmitted, in order
    bool auto_run = true;            // post_send runs the wire until it is quiet
    std::vector<event_seen> events;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> completions;  // (eqn, cqn)
    q_counter_values counted;
    std::vector<hw::cqe_syndrome> req_errors, resp_errors;

private:
    // A physical-address key of PD kPd over all of memory with every access right.
    void add_pa_mkey() {
        mkey_object mk;
        mk.index = kMkeyIndex;
        std::byte* c = mk.mkc.data();
        ifc::set<ifc::mkc::lr>(c, 1);
        ifc::set<ifc::mkc::lw>(c, 1);
        ifc::set<ifc::mkc::rr>(c, 1);
        ifc::set<ifc::mkc::rw>(c, 1);
        ifc::set<ifc::mkc::a>(c, 1);
        ifc::set<ifc::mkc::pd>(c, kPd);
        ifc::set<ifc::mkc::length64>(c, 1);
        t.mkeys[kMkeyIndex] = std::move(mk);
    }

    device_config cfg_;
    std::unique_ptr<bar0> bar_;
    std::byte* mem_ = nullptr;
    std::uint64_t next_ = kIova;
    std::map<std::uint32_t, std::uint32_t> rq_posted_;
    std::map<std::uint32_t, std::uint16_t> sq_posted_;
};

}  // namespace cxv::sim::testing
