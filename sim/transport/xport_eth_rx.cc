// The Ethernet receive pipeline (PRM "Flow Steering", "Transport Interface Receive",
// "Receive WQE", "Multi-Packet WQE", "Completion Queue Entry Format"): a frame from the
// wire meets the root flow table; the first entry (lowest flow index) whose values equal
// the frame's headers under its group's criteria decides: drop, count, forward to TIRs
// (each a copy) and on to tables of a higher level; a miss goes to the table's miss
// table or is dropped. A TIR hands the frame to its RQ, or to the RQ its RQT's entry
// names by the frame's hash; the RQ's next WQE takes it, and its CQ gets a CQE saying
// what the device found: length, checksums, header types, VLAN, hash, flow tag and the
// time the frame arrived.
#include <algorithm>
#include <array>
#include <cstring>

#include "hw/cqe.h"
#include "hw/wqe.h"
#include "sim/transport/engine.h"
#include "sim/transport/eth_headers.h"

namespace cxv::sim {

namespace {

namespace ifc = hw::ifc;
namespace wv = ifc::wq_values;
using m = ifc::fte_match_set_lyr_2_4;
constexpr std::size_t kImage = match_image_bytes;  // the outer headers and the misc parameters
static_assert(kImage == flow_match_bytes);
// How deep forwarding between tables may go: levels only rise (at most 64 of them).
constexpr unsigned kMaxHops = 64;
// Striding RQ encodings (Linux MLX5_MPWQE_LOG_NUM_STRIDES_BASE, _LOG_STRIDE_SZ_BASE).
constexpr unsigned kLogNumStridesBase = 9, kLogStrideSizeBase = 6;

// Eight bytes at a time: a card compares the whole masked image at once.
bool matches(const std::array<std::byte, kImage>& image, const flow_group& g, const flow_entry& e) {
    static_assert(kImage % 8 == 0);
    std::uint64_t differ = 0;
    for (std::size_t i = 0; i < kImage; i += 8) {
        std::uint64_t v, c, want;
        std::memcpy(&v, image.data() + i, 8);
        std::memcpy(&c, g.criteria.data() + i, 8);
        std::memcpy(&want, e.match.data() + i, 8);
        differ |= (v & c) ^ want;
    }
    return differ == 0;
}

}  // namespace

bool transport_engine::receive_frame(std::span<const std::byte> frame, wire::ip_checksums known) {
    const eth_headers* parsed = rx_parse_.parse(frame, true, known);
    if (parsed == nullptr) return false;
    const eth_headers& h = *parsed;  // good while no other frame is received
    trace_.count(&counters::frames_received);
    steering_decision& d = steered_;
    const eth_match_fields& fields = h;
    if (d.generation != t_.eth.generation || std::memcmp(&d.fields, &fields, sizeof fields) != 0) {
        d.fields = fields;
        steer(d);
        d.generation = t_.eth.generation;
    }
    for (flow_counter* c : d.counters) {
        ++c->packets;
        c->octets += frame.size();
    }
    bool delivered = false;
    for (const steered_tir& to : d.tirs) delivered |= deliver_to_tir(to, frame, h);
    if (!delivered) trace_.count(&counters::frames_dropped);
    return delivered;
}

// The objects it names are kept as pointers: only a command creates or destroys one, and
// every command changes the tables' generation.
void transport_engine::steer(steering_decision& d) {
    d.counters.clear();
    d.tirs.clear();
    std::array<std::byte, kImage> image;  // match_image writes all of it
    match_image(d.fields, image);
    eth_tables& eth = t_.eth;
    std::uint32_t table = eth.root_table;
    // Each step goes to a table of a higher level: at most kMaxHops of them.
    for (unsigned hop = 0; table != 0 && hop < kMaxHops; ++hop) {
        const auto ft = eth.flow_tables.find(table);
        if (ft == eth.flow_tables.end()) break;
        const flow_table& t = ft->second;
        const flow_entry* hit = nullptr;
        for (const auto& [index, e] : t.entries) {
            const auto g = t.groups.find(e.group_id);
            if (g != t.groups.end() && matches(image, g->second, e)) {
                hit = &e;
                break;
            }
        }
        if (hit == nullptr) {
            table = t.miss_action == static_cast<std::uint8_t>(ifc::flow_table_miss_action::FWD) ? t.miss_table : 0;
            continue;
        }
        for (const std::uint32_t c : hit->counters) {
            if (auto fc = eth.flow_counters.find(c); fc != eth.flow_counters.end()) d.counters.push_back(&fc->second);
        }
        table = 0;
        if ((hit->action & static_cast<std::uint16_t>(ifc::flow_action::FWD_DEST)) == 0) break;  // drop or allow
        for (const flow_destination& dest : hit->destinations) {
            if (dest.type == ifc::flow_destination_type::TIR) {
                steered_tir to{dest.id, hit->flow_tag};
                if (const auto tir = eth.tirs.find(dest.id); tir != eth.tirs.end()) {
                    to.tir = &tir->second;
                    if (tir->second.rqtn == 0) {
                        const auto rq = eth.rqs.find(tir->second.inline_rqn);
                        if (rq != eth.rqs.end()) to.rq = &rq->second;
                    }
                }
                d.tirs.push_back(to);
            } else if (table == 0) {
                table = dest.id;  // steering goes on there (entries take one table destination)
            }
        }
    }
}

bool transport_engine::deliver_to_tir(const steered_tir& to, std::span<const std::byte> frame, const eth_headers& h) {
    if (to.tir == nullptr) return false;
    const rx_hash_result hash = rx_hash(to.tir->tirc.data(), h);
    if (to.rq != nullptr) return deliver_to_rq(*to.rq, frame, h, hash, to.flow_tag);
    if (to.tir->rqtn == 0) return false;  // its RQ is gone
    const auto rqt = t_.eth.rqts.find(to.tir->rqtn);
    if (rqt == t_.eth.rqts.end() || rqt->second.rqns.empty()) return false;
    // The RQT's entry the hash picks (a hash-less TIR: the first).
    const auto rq = t_.eth.rqs.find(rqt->second.rqns[hash.value % rqt->second.rqns.size()]);
    if (rq == t_.eth.rqs.end()) return false;
    return deliver_to_rq(rq->second, frame, h, hash, to.flow_tag);
}

bool transport_engine::deliver_to_rq(wq_object& rq, std::span<const std::byte> frame, const eth_headers& h,
                                     const rx_hash_result& hash, std::uint32_t flow_tag) {
    if (rq.state != wq_state::RDY) return false;
    const std::byte* rqc = rq.ctx.data();
    const std::byte* wq = ifc::at<ifc::rqc::wq>(rqc);
    // VLAN stripping (vsd 0): the tag leaves the frame for the CQE.
    const bool strip = h.vlan && ifc::get<ifc::rqc::vsd>(rqc) == 0;
    std::span<const std::byte> data = frame;
    if (strip) {
        rx_frame_.resize(frame.size() - 4);
        std::memcpy(rx_frame_.data(), frame.data(), 12);
        std::memcpy(rx_frame_.data() + 12, frame.data() + 16, frame.size() - 16);
        data = rx_frame_;
    }
    const unsigned type = ifc::get<ifc::wq::wq_type>(wq);
    const std::uint32_t size = 1u << ifc::get<ifc::wq::log_wq_sz>(wq);
    const std::size_t stride = std::size_t{1} << ifc::get<ifc::wq::log_wq_stride>(wq);
    if (((rq.posted - rq.consumer) & 0xffff) == 0) {
        const auto producer = wq_dbr(rq, false);
        if (producer) rq.posted = *producer;
    }
    if (((rq.posted - rq.consumer) & 0xffff) == 0) {
        trace_.count(&counters::frames_no_wqe);  // out of buffer: dropped, as a card drops it
        return false;
    }
    std::array<std::byte, 512> buf;
    const std::uint32_t index = rq.consumer & (size - 1);
    hw::cqe64 c{};
    c.op_own = hw::make_op_own(hw::cqe_opcode::RESP_SEND, false, 0);
    const bool striding = type == wv::type_cyclic_striding || type == wv::type_linked_list_striding;
    std::uint32_t byte_cnt = static_cast<std::uint32_t>(data.size());
    if (!striding) {
        if (stride > buf.size() || !wq_read(rq, std::uint64_t{index} * stride, buf.data(), stride)) return false;
        std::vector<local_sge>& sges = rx_sges_;
        sges.clear();
        parse_scatter(buf.data(), stride, sges);
        if (scatter(rq.pd, sges, 0, data, data.size()) != hw::cqe_syndrome{}) {
            trace_.count(&counters::frames_dropped);
            ++rq.consumer;  // the WQE is used: its CQE says what went wrong
            hw::cqe64 e{};
            auto& err = reinterpret_cast<hw::err_cqe64&>(e);
            err.syndrome = static_cast<std::uint8_t>(hw::cqe_syndrome::LOCAL_LENGTH_ERR);
            err.s_wqe_opcode_qpn = hw::be32::from(rq.n);
            // The RQ's user index, as its good CQEs carry it (and the SQ's error CQEs).
            err.srqn = hw::be32::from(ifc::get<ifc::rqc::user_index>(rqc));
            err.wqe_counter = hw::be16::from(static_cast<std::uint16_t>(index));
            err.op_own = hw::make_op_own(hw::cqe_opcode::RESP_ERR, false, 0);
            push_cqe(rq.cqn, e, false);
            return false;
        }
        c.wqe_counter = hw::be16::from(static_cast<std::uint16_t>(rq.consumer));
        ++rq.consumer;
    } else {
        // One buffer of strides per WQE (after its 16-byte next segment); a packet takes
        // the strides it fills from where the last one stopped. One that does not fit in
        // what is left closes the WQE with a filler CQE and goes to the next.
        std::vector<local_sge>& sges = rq.mpwqe;
        if (sges.empty()) {
            if (stride > buf.size() || !wq_read(rq, std::uint64_t{index} * stride, buf.data(), stride)) return false;
            parse_scatter(buf.data() + 16, stride - 16, sges);
        }
        const std::uint32_t nstrides = 1u << (kLogNumStridesBase + ifc::get<ifc::wq::log_wqe_num_of_strides>(wq));
        const unsigned log_stride = kLogStrideSizeBase + ifc::get<ifc::wq::log_wqe_stride_size>(wq);
        const std::uint32_t stride_bytes = 1u << log_stride;
        const std::uint32_t need = static_cast<std::uint32_t>((data.size() + stride_bytes - 1) >> log_stride);
        if (sges.empty() || need > nstrides) return false;
        if (rq.stride + need > nstrides) {
            hw::cqe64 f{};
            f.op_own = c.op_own;
            f.byte_cnt = hw::be32::from(hw::mpwrq_filler | (nstrides - rq.stride) << hw::mpwrq_strides_shift);
            f.wqe_id = hw::be16::from(static_cast<std::uint16_t>(rq.consumer));
            f.wqe_counter = hw::be16::from(static_cast<std::uint16_t>(rq.stride));
            f.srqn_uidx = hw::be32::from(ifc::get<ifc::rqc::user_index>(rqc));
            push_cqe(rq.cqn, f, false);
            rq.stride = 0;
            ++rq.consumer;
            rq.end_mpwqe();
            return deliver_to_rq(rq, frame, h, hash, flow_tag);
        }
        if (scatter_mpwqe(rq, std::size_t{rq.stride} * stride_bytes, data) != hw::cqe_syndrome{}) {
            trace_.count(&counters::frames_dropped);
            return false;
        }
        c.wqe_id = hw::be16::from(static_cast<std::uint16_t>(rq.consumer));
        c.wqe_counter = hw::be16::from(static_cast<std::uint16_t>(rq.stride));
        byte_cnt = (need << hw::mpwrq_strides_shift) | (byte_cnt & hw::mpwrq_byte_cnt_mask);
        rq.stride += need;
        if (rq.stride == nstrides) {
            rq.stride = 0;
            ++rq.consumer;
            rq.end_mpwqe();
        }
    }
    c.byte_cnt = hw::be32::from(byte_cnt);
    c.srqn_uidx = hw::be32::from(ifc::get<ifc::rqc::user_index>(rqc));
    c.sop_drop_qpn = hw::be32::from(flow_tag & 0xffffff);
    c.timestamp = hw::be64::from(hooks_.timestamp());
    c.rss_hash_result = hw::be32::from(hash.value);
    c.rss_hash_type = hash.type;
    const auto l3 = h.ip_version == 4 ? hw::cqe_l3_hdr_type::IPV4
                    : h.ip_version == 6 ? hw::cqe_l3_hdr_type::IPV6
                                        : hw::cqe_l3_hdr_type::NONE;
    const auto l4 = h.udp ? hw::cqe_l4_hdr_type::UDP
                    : h.tcp ? ((h.tcp_flags & 0x10) ? hw::cqe_l4_hdr_type::TCP_ACK_AND_DATA : hw::cqe_l4_hdr_type::TCP_NO_ACK)
                            : hw::cqe_l4_hdr_type::NONE;
    c.l4_hdr_type_etc = hw::cqe_l4_l3_hdr_type(l4, l3, strip);
    c.hds_ip_ext = static_cast<std::uint8_t>(hw::cqe_l2_ok | (h.l3_ok && h.ip_version != 0 ? hw::cqe_l3_ok : 0) |
                                             (h.l4_ok ? hw::cqe_l4_ok : 0));
    c.check_sum = hw::be16::from(ip_packet_sum(frame, h));
    if (strip) {
        c.vlan_info = hw::be16::from(static_cast<std::uint16_t>(h.prio << 13 | h.cfi << 12 | h.vid));
    }
    push_cqe(rq.cqn, c, false);
    trace_.count(&counters::frames_delivered);
    return true;
}

// A packet into the striding RQ's current WQE at byte `skip` of its buffer, through the
// buffer's kept translation (wq_object::mpwqe_iovas). A buffer whose keys do not translate
// as a whole goes the ordinary way (scatter), which translates only what it writes.
hw::cqe_syndrome transport_engine::scatter_mpwqe(wq_object& rq, std::size_t skip, std::span<const std::byte> data) {
    if (rq.mpwqe_iovas.empty() || rq.mpwqe_generation != t_.eth.generation) {
        rq.mpwqe_iovas.clear();
        std::vector<iova_range>& ranges = rx_ranges_;
        for (const local_sge& s : rq.mpwqe) {
            if (!remote_access(rq.pd, s.lkey, s.addr, s.len, access_local_write, ranges)) {
                rq.mpwqe_iovas.clear();
                return scatter(rq.pd, rq.mpwqe, skip, data, 0);
            }
            for (const iova_range& r : ranges) rq.mpwqe_iovas.push_back({r.iova, r.len, nullptr});
        }
        rq.mpwqe_generation = t_.eth.generation;
        rq.mpwqe_mmu_generation = ~std::uint64_t{0};
    }
    if (rq.mpwqe_mmu_generation != mmu_.generation()) {
        rq.mpwqe_mmu_generation = mmu_.generation();
        for (auto& r : rq.mpwqe_iovas) {
            std::uint64_t generation = 0;
            r.host = mmu_.translate(r.iova, r.len, true, generation);
            if (generation != rq.mpwqe_mmu_generation) r.host = nullptr;
        }
    }
    std::uint64_t capacity = 0;
    for (const auto& r : rq.mpwqe_iovas) capacity += r.len;
    if (capacity < skip + data.size()) return hw::cqe_syndrome::LOCAL_LENGTH_ERR;
    std::uint64_t pos = 0;  // where the range starts in the buffer
    std::size_t done = 0;
    for (const auto& r : rq.mpwqe_iovas) {
        if (done == data.size()) break;
        if (skip + done < pos + r.len) {
            const std::uint64_t from = skip + done - pos;
            const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(r.len - from, data.size() - done));
            const bool kept = r.host != nullptr &&
                              mmu_.write_cached(rq.mpwqe_mmu_generation, r.host + from, data.data() + done, n);
            if (!kept && !mmu_.write(r.iova + from, data.data() + done, n)) {
                trace_.count(&counters::iommu_faults);
                return hw::cqe_syndrome::LOCAL_PROT_ERR;
            }
            done += n;
        }
        pos += r.len;
    }
    return hw::cqe_syndrome{};
}

}  // namespace cxv::sim
