#include "daemon/owner.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "driver/cmd/cmd_queue.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"

namespace cxv::daemon {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

mapping::mapping(mapping&& o) noexcept
    : addr(o.addr), length(o.length), device_writes(o.device_writes), dma(std::move(o.dma)), users(o.users) {
    o.addr = nullptr;
    o.length = 0;
}

mapping& mapping::operator=(mapping&& o) noexcept {
    if (this != &o) {
        this->~mapping();
        new (this) mapping(std::move(o));
    }
    return *this;
}

mapping::~mapping() {
    dma = driver::vfio::dma_buffer{};  // out of the IOMMU before the memory goes
    if (addr != nullptr) ::munmap(addr, length);
    addr = nullptr;
}

const std::uint64_t* owned::holder(std::uint64_t iova, std::uint64_t len) const {
    if (len == 0 || iova + len < iova) return nullptr;
    auto it = maps.upper_bound(iova);
    if (it == maps.begin()) return nullptr;
    --it;
    if (iova >= it->first && iova + len <= it->first + it->second.length) return &it->first;
    return nullptr;
}

const std::uint64_t* owned::writable_holder(std::uint64_t iova, std::uint64_t len) const {
    const std::uint64_t* m = holder(iova, len);
    return m != nullptr && maps.at(*m).device_writes ? m : nullptr;
}

namespace {

constexpr std::uint32_t kMttMode = 1;       // mkc access_mode: MTT (PRM "Memory Key")
constexpr std::uint32_t kNoQpn = 0xffffff;  // mkc.qpn: not bound to a QP
constexpr unsigned kMinPageShift = 12, kMaxPageShift = 30;
// The quotas passed in are what is left to the trust domain (a uid, or a --domain-gid
// group) after its other connections.
constexpr const char* kPerUid = "; quotas count every connection of the uid (of its trust domain)";

error perm(std::string what) { return error{EPERM, std::move(what)}; }

// EDQUOT when `n` more page-list entries would pass what is left of the quota.
status within_translations(std::uint64_t n, const owned& o, const quotas& q, const char* name) {
    if (o.translations + n <= q.translations) return ok_status();
    const std::uint64_t more = q.translations > o.translations ? q.translations - o.translations : 0;
    return error{EDQUOT, fmt::format("{}: {} page-list entries (MTT or PAS) would pass the quota of firmware "
                                     "translations ({} held on this connection, room for {} more{}; "
                                     "--quota-translations)",
                                     name, n, o.translations, more, kPerUid)};
}

std::uint64_t translation_key(command_effect::object obj, std::uint32_t id) {
    return (std::uint64_t{static_cast<unsigned>(obj)} << 32) | id;
}
error inval(std::string what) { return error{EINVAL, std::move(what)}; }

template <typename In>
status long_enough(std::span<const std::byte> in, const char* name) {
    if (in.size() < In::size_bytes) {
        return error{EBADMSG, fmt::format("{}: input of {} bytes (its layout has {})", name, in.size(), In::size_bytes)};
    }
    // PRM: uid names a DevX user context; only the kernel may set it, and here only the
    // daemon would. A client's command leaves it 0.
    if (ifc::get<typename In::uid>(in.data()) != 0) return perm(fmt::format("{}: uid must be 0", name));
    return ok_status();
}

result<command_effect> check_create_cq(std::span<const std::byte> in, const owned& o, const device_facts& dev,
                                       const quotas& q) {
    if (auto s = long_enough<ifc::create_cq_in>(in, "CREATE_CQ"); !s) return s.error();
    if (o.cqs.size() >= q.cqs) {
        return error{EDQUOT, fmt::format("CREATE_CQ: the quota of CQs is reached ({} on this connection{})", o.cqs.size(),
                                         kPerUid)};
    }
    const std::byte* p = in.data();
    const std::byte* cqc = ifc::at<ifc::create_cq_in::cq_context>(p);
    if (ifc::get<ifc::create_cq_in::cq_umem_valid>(p) || ifc::get<ifc::cqc::dbr_umem_valid>(cqc) ||
        ifc::get<ifc::cqc::apu_cq>(cqc)) {
        return inval("CREATE_CQ: UMEM and APU CQs are not offered through the daemon (map memory instead)");
    }
    const std::uint32_t uar = ifc::get<ifc::cqc::uar_page>(cqc);
    if (!o.uars.contains(uar)) return perm(fmt::format("CREATE_CQ: UAR {} is not the client's", uar));
    const std::uint32_t eqn = ifc::get<ifc::cqc::c_eqn_or_apu_element>(cqc);
    if (eqn != dev.comp_eqn) {
        return perm(fmt::format("CREATE_CQ: EQ {} (a client's CQs report to the completion EQ {})", eqn, dev.comp_eqn));
    }
    const unsigned cqe_sz = ifc::get<ifc::cqc::cqe_sz>(cqc);
    const unsigned log_size = ifc::get<ifc::cqc::log_cq_size>(cqc);
    const unsigned page_shift = kMinPageShift + ifc::get<ifc::cqc::log_page_size>(cqc);
    if (cqe_sz > 1 || log_size > 24 || page_shift > kMaxPageShift || ifc::get<ifc::cqc::page_offset>(cqc) != 0) {
        return inval("CREATE_CQ: CQE size, CQ size, page size or page offset out of range");
    }
    // PRM "Completion Queue": the ring is 2^log_cq_size CQEs of 64 << cqe_sz bytes,
    // described by pas[] pages of 2^(12 + log_page_size) bytes.
    const std::uint64_t page = std::uint64_t{1} << page_shift;
    const std::uint64_t ring = (std::uint64_t{64} << cqe_sz) << log_size;
    const std::uint64_t pages = (ring + page - 1) / page;
    const std::size_t listed = (in.size() - ifc::create_cq_in::size_bytes) / 8;
    if ((in.size() - ifc::create_cq_in::size_bytes) % 8 || listed < pages) {
        return error{EBADMSG, fmt::format("CREATE_CQ: {} pages listed, the ring needs {}", listed, pages)};
    }
    if (auto s = within_translations(pages, o, q, "CREATE_CQ"); !s) return s.error();
    command_effect e;
    e.translations = pages;
    for (std::size_t i = 0; i < listed; ++i) {
        // The device writes CQEs: the page must be in memory mapped device-writable.
        const std::uint64_t pa = ifc::get<ifc::create_cq_in::pas>(p, i);
        const std::uint64_t* m = pa % page ? nullptr : o.writable_holder(pa, page);
        if (m == nullptr) {
            return perm(fmt::format("CREATE_CQ: page {} at IOVA 0x{:x} is not in the client's memory mapped "
                                    "device-writable", i, pa));
        }
        e.maps.insert(*m);
    }
    const std::uint64_t dbr = ifc::get<ifc::cqc::dbr_addr>(cqc);
    const std::uint64_t* m = dbr % 8 ? nullptr : o.writable_holder(dbr, 8);
    if (m == nullptr) {
        return perm(fmt::format("CREATE_CQ: doorbell record at IOVA 0x{:x} is not in the client's memory mapped "
                                "device-writable", dbr));
    }
    e.maps.insert(*m);
    e.uar = uar;
    e.what = command_effect::kind::create;
    e.obj = command_effect::object::cq;
    e.min_out = ifc::create_cq_out::size_bytes;
    return e;
}

result<command_effect> check_create_mkey(std::span<const std::byte> in, const owned& o, const quotas& q) {
    if (auto s = long_enough<ifc::create_mkey_in>(in, "CREATE_MKEY"); !s) return s.error();
    if (o.mkeys.size() >= q.mrs) {
        return error{EDQUOT, fmt::format("CREATE_MKEY: the quota of memory keys is reached ({} on this connection{})", o.mkeys.size(),
                                         kPerUid)};
    }
    const std::byte* p = in.data();
    const std::byte* mkc = ifc::at<ifc::create_mkey_in::memory_key_mkey_entry>(p);
    if (ifc::get<ifc::create_mkey_in::mkey_umem_valid>(p) || ifc::get<ifc::create_mkey_in::pg_access>(p)) {
        return inval("CREATE_MKEY: UMEM keys are not offered through the daemon (map memory instead)");
    }
    // Only MTT keys: a PA-mode key (access_mode 0) would reach any IOVA of the function,
    // another client's memory included; KLM and UMR keys indirect through other keys.
    if (ifc::get<ifc::mkc::access_mode_1_0>(mkc) != kMttMode || ifc::get<ifc::mkc::access_mode_4_2>(mkc) != 0 ||
        ifc::get<ifc::mkc::umr_en>(mkc) || ifc::get<ifc::mkc::bsf_en>(mkc) || ifc::get<ifc::mkc::length64>(mkc) ||
        ifc::get<ifc::mkc::free>(mkc)) {
        return perm("CREATE_MKEY: only MTT keys (no PA, KLM, UMR, BSF or 2^64-byte keys) through the daemon");
    }
    if (ifc::get<ifc::mkc::qpn>(mkc) != kNoQpn) return perm("CREATE_MKEY: a key bound to a QP");
    const std::uint32_t pd = ifc::get<ifc::mkc::pd>(mkc);
    if (!o.pds.contains(pd)) return perm(fmt::format("CREATE_MKEY: PD 0x{:x} is not the client's", pd));
    const unsigned shift = ifc::get<ifc::mkc::log_page_size>(mkc);
    if (shift < kMinPageShift || shift > kMaxPageShift) return inval("CREATE_MKEY: page size out of range");
    const std::uint64_t octwords = ifc::get<ifc::create_mkey_in::translations_octword_actual_size>(p);
    if (octwords != ifc::get<ifc::mkc::translations_octword_size>(mkc)) {
        return inval("CREATE_MKEY: translations_octword_size and _actual_size differ");
    }
    // PRM "MTT": 8-byte entries, two per 16-byte octword; the low bits are flags.
    const std::uint64_t mtts = octwords * 2;
    const std::size_t listed = (in.size() - ifc::create_mkey_in::size_bytes) / 8;
    if (mtts == 0 || listed < mtts) {
        return error{EBADMSG, fmt::format("CREATE_MKEY: {} translations declared, {} listed", mtts, listed)};
    }
    if (auto s = within_translations(mtts, o, q, "CREATE_MKEY"); !s) return s.error();
    const std::uint64_t page = std::uint64_t{1} << shift;
    // A key the device writes through (local or remote write, atomics) needs memory
    // mapped device-writable.
    const bool writes = ifc::get<ifc::mkc::lw>(mkc) || ifc::get<ifc::mkc::rw>(mkc) || ifc::get<ifc::mkc::a>(mkc);
    const std::uint64_t start = ifc::get<ifc::mkc::start_addr>(mkc), len = ifc::get<ifc::mkc::len>(mkc);
    // mtts * page < 2^64 (2^33 entries of at most 2^30 bytes) and the offset is below
    // one page, so the room is computed without overflow; len + offset could wrap.
    if (len > mtts * page - (start & (page - 1))) {
        return perm(fmt::format("CREATE_MKEY: {} bytes from 0x{:x} reach past its {} translations", len, start, mtts));
    }
    // The translations the key's bytes use (at least one); an odd count's padding entry
    // in the last octword is never reached by the device and may hold anything (the
    // driver leaves it 0). len + offset fits: checked above.
    const std::uint64_t used = std::max<std::uint64_t>(1, (len + (start & (page - 1)) + page - 1) / page);
    command_effect e;
    for (std::uint64_t i = 0; i < used; ++i) {
        const std::uint64_t hi = ifc::get<ifc::create_mkey_in::klm_pas_mtt>(p, 2 * i);
        const std::uint64_t lo = ifc::get<ifc::create_mkey_in::klm_pas_mtt>(p, 2 * i + 1);
        // PRM "MTT": bits 1:0 are the entry's read/write enables; every other bit is the
        // address, which must be aligned to the key's page size (so bits 11:2 are 0 too).
        const std::uint64_t addr = ((hi << 32) | lo) & ~std::uint64_t{3};
        const std::uint64_t* m = addr % page ? nullptr : writes ? o.writable_holder(addr, page) : o.holder(addr, page);
        if (m == nullptr) {
            return perm(fmt::format("CREATE_MKEY: translation {} to IOVA 0x{:x} is not a page of the client's "
                                    "memory{}", i, addr, writes ? " mapped device-writable" : ""));
        }
        e.maps.insert(*m);
    }
    e.what = command_effect::kind::create;
    e.obj = command_effect::object::mkey;
    e.pd = pd;
    e.translations = mtts;
    e.min_out = ifc::create_mkey_out::size_bytes;
    return e;
}

// The QP context fields that name things outside the QP: the client's own, or refused.
// rlky (the reserved lkey: IOVA access without a key) and counter sets (the daemon's)
// never through the daemon.
// `qp` is the QP a transition moves (nullptr for CREATE_QP), `mask` its opt_param_mask.
status check_qpc(const std::byte* qpc, const owned& o, const char* name, const owned::qp_uses* qp_now,
                 std::uint32_t mask) {
    namespace qp = ifc::qpc_values;
    namespace opt = ifc::qp_optpar;
    const bool create = qp_now == nullptr;
    if (ifc::get<ifc::qpc::rlky>(qpc)) return perm(fmt::format("{}: the reserved lkey (rlky) is not for clients", name));
    if (ifc::get<ifc::qpc::counter_set_id>(qpc) || (mask & opt::COUNTER_SET_ID)) {
        return perm(fmt::format("{}: Q counter sets are the daemon's", name));
    }
    if (ifc::get<ifc::qpc::dbr_umem_valid>(qpc)) return inval(fmt::format("{}: UMEM doorbell records", name));
    // Fields a client's QP has no use for, each a way around the books: deth_sqpn sends
    // as another QP number (GSI's job, PRM "QP Context"), CORE-Direct (cd_*) lets one QP
    // drive another's queues, a Q_Key with the MSB set is privileged (IBTA 10.2.4: only
    // a privileged consumer may use one), and ULP offload modes are the kernel's.
    if (ifc::get<ifc::qpc::deth_sqpn>(qpc) != 0) return perm(fmt::format("{}: deth_sqpn is not for clients", name));
    if (ifc::get<ifc::qpc::cd_master>(qpc) || ifc::get<ifc::qpc::cd_slave_send>(qpc) ||
        ifc::get<ifc::qpc::cd_slave_receive>(qpc)) {
        return perm(fmt::format("{}: CORE-Direct (cd_master, cd_slave_*) is not for clients", name));
    }
    if (ifc::get<ifc::qpc::q_key>(qpc) & 0x80000000u) {
        return perm(fmt::format("{}: a privileged Q_Key (MSB set) is not for clients", name));
    }
    if (ifc::get<ifc::qpc::ulp_stateless_offload_mode>(qpc) != 0) {
        return perm(fmt::format("{}: ulp_stateless_offload_mode is not for clients", name));
    }
    if (mask & opt::SRQN) return perm(fmt::format("{}: a QP's SRQ is set when it is created (SRQN)", name));
    // CREATE_QP sets PD, UAR and CQs: each the client's. The transitions do not change
    // PD, UAR or send CQ (PRM "QP State Machine"): a value there other than 0 or the one
    // recorded is refused rather than trusted to be ignored. The receive CQ changes with
    // CQN_RCV: then it must be the client's, 0 included.
    const std::uint32_t pd = ifc::get<ifc::qpc::pd>(qpc), uar = ifc::get<ifc::qpc::uar_page>(qpc);
    const std::uint32_t snd = ifc::get<ifc::qpc::cqn_snd>(qpc), rcv = ifc::get<ifc::qpc::cqn_rcv>(qpc);
    if (create) {
        if (!o.pds.contains(pd)) return perm(fmt::format("{}: PD 0x{:x} is not the client's", name, pd));
        if (!o.uars.contains(uar)) return perm(fmt::format("{}: UAR {} is not the client's", name, uar));
        for (const std::uint32_t cqn : {snd, rcv}) {
            if (!o.cqs.contains(cqn)) return perm(fmt::format("{}: CQ 0x{:x} is not the client's", name, cqn));
        }
    } else {
        if (pd != 0 && pd != qp_now->pd) return perm(fmt::format("{}: PD 0x{:x} is not the QP's", name, pd));
        if (uar != 0 && uar != qp_now->uar) return perm(fmt::format("{}: UAR {} is not the QP's", name, uar));
        if (snd != 0 && snd != qp_now->cqn_snd) return perm(fmt::format("{}: send CQ 0x{:x} is not the QP's", name, snd));
        if (mask & opt::CQN_RCV) {
            if (!o.cqs.contains(rcv)) return perm(fmt::format("{}: CQ 0x{:x} is not the client's", name, rcv));
        } else if (rcv != 0 && rcv != qp_now->cqn_rcv) {
            return perm(fmt::format("{}: receive CQ 0x{:x} is not the QP's (CQN_RCV not set)", name, rcv));
        }
    }
    // An SRQ (rq_type SRQ, PRM "QP Context") must be the client's, made on one of its
    // PDs (CREATE_RMP checked that); a transition names none or the QP's own.
    const std::uint32_t rq = ifc::get<ifc::qpc::rq_type>(qpc);
    const std::uint32_t srqn = ifc::get<ifc::qpc::srqn_rmpn_xrqn>(qpc);
    if (create && rq != qp::rq_regular && rq != qp::rq_zero_len && rq != qp::rq_srq) {
        return perm(fmt::format("{}: receive queue type {} (regular, zero-length or an SRQ)", name, rq));
    }
    if (create && rq == qp::rq_srq) {
        if (!o.srqs.contains(srqn)) return perm(fmt::format("{}: SRQ 0x{:x} is not the client's", name, srqn));
    } else if (create ? srqn != 0 : (srqn != 0 && srqn != qp_now->srq)) {
        return perm(fmt::format("{}: SRQ 0x{:x} is not the QP's", name, srqn));
    }
    if (ifc::get<ifc::qpc::xrcd>(qpc) != 0) {
        return perm(fmt::format("{}: XRC domains are not offered through the daemon yet", name));
    }
    return ok_status();
}

result<command_effect> check_create_qp(std::span<const std::byte> in, const owned& o, const quotas& q) {
    namespace qp = ifc::qpc_values;
    if (auto s = long_enough<ifc::create_qp_in>(in, "CREATE_QP"); !s) return s.error();
    if (o.qps.size() >= q.qps) return error{EDQUOT, fmt::format("CREATE_QP: the quota of QPs is reached ({} on this connection{})", o.qps.size(),
                                         kPerUid)};
    const std::byte* p = in.data();
    const std::byte* qpc = ifc::at<ifc::create_qp_in::qpc>(p);
    if (ifc::get<ifc::create_qp_in::wq_umem_valid>(p)) return inval("CREATE_QP: UMEM work queues");
    if (ifc::get<ifc::create_qp_in::input_qpn>(p)) return perm("CREATE_QP: a QP number of the client's choosing");
    const std::uint32_t st = ifc::get<ifc::qpc::st>(qpc);
    if (st != qp::st_rc && st != qp::st_uc && st != qp::st_ud) {
        return perm(fmt::format("CREATE_QP: service type {} (RC, UC and UD only)", st));
    }
    if (auto s = check_qpc(qpc, o, "CREATE_QP", nullptr, ifc::get<ifc::create_qp_in::opt_param_mask>(p)); !s) {
        return s.error();
    }
    // PRM "Work Queue Buffer": the RQ first (2^log_rq_size strides of 16 << log_rq_stride
    // bytes), then the SQ (2^log_sq_size 64-byte WQEBBs), on pages of 4 KiB << log_page_size.
    const unsigned page_shift = kMinPageShift + ifc::get<ifc::qpc::log_page_size>(qpc);
    if (page_shift > kMaxPageShift || ifc::get<ifc::qpc::page_offset>(qpc) != 0) {
        return inval("CREATE_QP: page size or page offset out of range");
    }
    const std::uint64_t rq = ifc::get<ifc::qpc::rq_type>(qpc) == qp::rq_regular
                                 ? (std::uint64_t{16} << ifc::get<ifc::qpc::log_rq_stride>(qpc))
                                       << ifc::get<ifc::qpc::log_rq_size>(qpc)
                                 : 0;
    const std::uint64_t sq = ifc::get<ifc::qpc::no_sq>(qpc) ? 0 : std::uint64_t{64} << ifc::get<ifc::qpc::log_sq_size>(qpc);
    const std::uint64_t page = std::uint64_t{1} << page_shift;
    const std::uint64_t pages = std::max<std::uint64_t>(1, (rq + sq + page - 1) / page);
    const std::size_t listed = (in.size() - ifc::create_qp_in::size_bytes) / 8;
    if ((in.size() - ifc::create_qp_in::size_bytes) % 8 || listed < pages) {
        return error{EBADMSG, fmt::format("CREATE_QP: {} pages listed, the work queues need {}", listed, pages)};
    }
    if (auto s = within_translations(pages, o, q, "CREATE_QP"); !s) return s.error();
    command_effect e;
    e.translations = pages;
    // The RQ (the first pages: PRM "Work Queue Buffer") and the doorbell record must be in
    // memory mapped device-writable, as the kernel registers a user QP's buffer and
    // doorbell page with write access; the SQ pages the device only reads.
    const std::uint64_t rq_pages = (rq + page - 1) / page;
    for (std::size_t i = 0; i < listed; ++i) {
        const std::uint64_t pa = ifc::get<ifc::create_qp_in::pas>(p, i);
        const bool w = i < rq_pages;
        const std::uint64_t* m = pa % page ? nullptr : w ? o.writable_holder(pa, page) : o.holder(pa, page);
        if (m == nullptr) {
            return perm(fmt::format("CREATE_QP: page {} at IOVA 0x{:x} is not in the client's memory{}", i, pa,
                                    w ? " mapped device-writable" : ""));
        }
        e.maps.insert(*m);
    }
    const std::uint64_t dbr = ifc::get<ifc::qpc::dbr_addr>(qpc);
    const std::uint64_t* m = dbr % 8 ? nullptr : o.writable_holder(dbr, 8);
    if (m == nullptr) {
        return perm(fmt::format("CREATE_QP: doorbell record at IOVA 0x{:x} is not in the client's memory mapped "
                                "device-writable", dbr));
    }
    e.maps.insert(*m);
    e.what = command_effect::kind::create;
    e.obj = command_effect::object::qp;
    e.pd = ifc::get<ifc::qpc::pd>(qpc);
    e.uar = ifc::get<ifc::qpc::uar_page>(qpc);
    e.cqn_snd = ifc::get<ifc::qpc::cqn_snd>(qpc);
    e.cqn_rcv = ifc::get<ifc::qpc::cqn_rcv>(qpc);
    e.cqs = {e.cqn_snd, e.cqn_rcv};
    if (ifc::get<ifc::qpc::rq_type>(qpc) == qp::rq_srq) e.srq = ifc::get<ifc::qpc::srqn_rmpn_xrqn>(qpc);
    e.min_out = ifc::create_qp_out::size_bytes;
    return e;
}

// A transition with a QP context (PRM "QP State Machine"): the client's QP, and the
// context names only the client's things.
template <typename In>
result<command_effect> check_modify_qp(std::span<const std::byte> in, const owned& o, const char* name) {
    if (auto s = long_enough<In>(in, name); !s) return s.error();
    const std::uint32_t qpn = ifc::get<typename In::qpn>(in.data());
    const auto it = o.qp_info.find(qpn);
    if (!o.qps.contains(qpn) || it == o.qp_info.end()) {
        return perm(fmt::format("{}: QP 0x{:x} is not the client's", name, qpn));
    }
    const std::byte* qpc = ifc::at<typename In::qpc>(in.data());
    const std::uint32_t mask = ifc::get<typename In::opt_param_mask>(in.data());
    if (auto s = check_qpc(qpc, o, name, &it->second, mask); !s) return s.error();
    command_effect e;
    if (mask & ifc::qp_optpar::CQN_RCV) {
        // The QP's receive CQ changes: the books follow, so that the new CQ cannot be
        // destroyed under the QP and the old one can be.
        e.what = command_effect::kind::modify;
        e.obj = command_effect::object::qp;
        e.id = qpn;
        e.new_cqn_rcv = true;
        e.cqn_rcv = ifc::get<ifc::qpc::cqn_rcv>(qpc);
    }
    return e;
}

template <typename In>
result<command_effect> check_qp_number(std::span<const std::byte> in, const owned& o, const char* name) {
    if (in.size() < In::size_bytes) return error{EBADMSG, fmt::format("{}: input shorter than its layout", name)};
    // uid at 0x10 as in every QP command (Linux's query_qp_in has it too; our layout of
    // QUERY_QP leaves it out): 0, as for every other forwarded command.
    if (ifc::get<ifc::destroy_qp_in::uid>(in.data()) != 0) return perm(fmt::format("{}: uid must be 0", name));
    const std::uint32_t qpn = ifc::get<typename In::qpn>(in.data());
    if (!o.qps.contains(qpn)) return perm(fmt::format("{}: QP 0x{:x} is not the client's", name, qpn));
    return command_effect{};
}

// CREATE_RMP (PRM "RMP Context"; a client's SRQ: cxv's driver runs at ISSI 1, where
// basic SRQs are RMPs): created ready, a linked-list wq (cyclic RMPs are XRQ territory),
// on the client's PD, not in UMEMs; the ring (2^log_wq_sz strides of 2^log_wq_stride
// bytes) and the doorbell record in memory the client mapped device-writable, as for a
// QP's receive queue.
result<command_effect> check_create_rmp(std::span<const std::byte> in, const owned& o, const quotas& q) {
    if (auto s = long_enough<ifc::create_rmp_in>(in, "CREATE_RMP"); !s) return s.error();
    if (o.srqs.size() >= q.srqs) {
        return error{EDQUOT, fmt::format("CREATE_RMP: the quota of SRQs is reached ({} on this connection{})",
                                         o.srqs.size(), kPerUid)};
    }
    const std::byte* p = in.data();
    const std::byte* rmpc = ifc::at<ifc::create_rmp_in::ctx>(p);
    const std::byte* wq = ifc::at<ifc::rmpc::wq>(rmpc);
    if (ifc::get<ifc::rmpc::state>(rmpc) != ifc::rmpc_values::state_rdy) return inval("CREATE_RMP: an RMP is created ready");
    if (ifc::get<ifc::wq::wq_type>(wq) != ifc::wq_values::type_linked_list || ifc::get<ifc::rmpc::basic_cyclic_rcv_wqe>(rmpc)) {
        return inval("CREATE_RMP: only linked-list WQEs");
    }
    if (ifc::get<ifc::wq::dbr_umem_valid>(wq) || ifc::get<ifc::wq::wq_umem_valid>(wq)) {
        return perm("CREATE_RMP: UMEMs are not offered through the daemon");
    }
    const std::uint32_t pd = ifc::get<ifc::wq::pd>(wq);
    if (!o.pds.contains(pd)) return perm(fmt::format("CREATE_RMP: PD 0x{:x} is not the client's", pd));
    const unsigned page_shift = kMinPageShift + ifc::get<ifc::wq::log_wq_pg_sz>(wq);
    if (page_shift > kMaxPageShift || ifc::get<ifc::wq::page_offset>(wq) != 0) {
        return inval("CREATE_RMP: page size or page offset out of range");
    }
    const std::uint64_t ring = (std::uint64_t{1} << ifc::get<ifc::wq::log_wq_stride>(wq)) << ifc::get<ifc::wq::log_wq_sz>(wq);
    const std::uint64_t page = std::uint64_t{1} << page_shift;
    const std::uint64_t pages = (ring + page - 1) / page;
    const std::size_t listed = (in.size() - ifc::create_rmp_in::size_bytes) / 8;
    if ((in.size() - ifc::create_rmp_in::size_bytes) % 8 || listed < pages) {
        return error{EBADMSG, fmt::format("CREATE_RMP: {} pages listed, the ring needs {}", listed, pages)};
    }
    if (auto s = within_translations(pages, o, q, "CREATE_RMP"); !s) return s.error();
    command_effect e;
    e.translations = pages;
    for (std::size_t i = 0; i < listed; ++i) {
        const std::uint64_t pa = ifc::get<ifc::wq::pas>(wq, i);
        const std::uint64_t* m = pa % page ? nullptr : o.writable_holder(pa, page);
        if (m == nullptr) {
            return perm(fmt::format("CREATE_RMP: page {} at IOVA 0x{:x} is not in the client's memory mapped "
                                    "device-writable", i, pa));
        }
        e.maps.insert(*m);
    }
    const std::uint64_t dbr = ifc::get<ifc::wq::dbr_addr>(wq);
    const std::uint64_t* m = dbr % 8 ? nullptr : o.writable_holder(dbr, 8);
    if (m == nullptr) {
        return perm(fmt::format("CREATE_RMP: doorbell record at IOVA 0x{:x} is not in the client's memory mapped "
                                "device-writable", dbr));
    }
    e.maps.insert(*m);
    e.what = command_effect::kind::create;
    e.obj = command_effect::object::srq;
    e.pd = pd;
    e.min_out = ifc::create_rmp_out::size_bytes;
    return e;
}

// DESTROY_RMP, QUERY_RMP, MODIFY_RMP: the client's RMP, uid 0 (at 0x10 in each; reserved
// in QUERY_RMP). MODIFY_RMP changes only the RMP's limit and state, the client's own.
result<command_effect> check_rmp_number(std::span<const std::byte> in, const owned& o, cmd_opcode op) {
    const char* name = op == cmd_opcode::DESTROY_RMP ? "DESTROY_RMP" : op == cmd_opcode::QUERY_RMP ? "QUERY_RMP" : "MODIFY_RMP";
    const std::size_t need = op == cmd_opcode::MODIFY_RMP ? ifc::modify_rmp_in::size_bytes : ifc::destroy_rmp_in::size_bytes;
    if (in.size() < need) return error{EBADMSG, fmt::format("{}: input shorter than its layout", name)};
    if (ifc::get<ifc::destroy_rmp_in::uid>(in.data()) != 0) return perm(fmt::format("{}: uid must be 0", name));
    // rmpn is at 0x48 in all three.
    const std::uint32_t rmpn = ifc::get<ifc::destroy_rmp_in::rmpn>(in.data());
    if (!o.srqs.contains(rmpn)) return perm(fmt::format("{}: RMP 0x{:x} is not the client's", name, rmpn));
    command_effect e;
    if (op == cmd_opcode::DESTROY_RMP) {
        for (const auto& [qpn, u] : o.qp_info) {
            if (u.srq == rmpn) return error{EBUSY, fmt::format("DESTROY_RMP: QP 0x{:x} still uses RMP 0x{:x}", qpn, rmpn)};
        }
        e.what = command_effect::kind::destroy;
        e.obj = command_effect::object::srq;
        e.id = rmpn;
    }
    if (op == cmd_opcode::QUERY_RMP) e.min_out = ifc::query_rmp_out::size_bytes;
    return e;
}

// The read-only queries of the function's own vport (other_vport 0, vport_number 0): what
// libibverbs asks of a port (node GUID, PortInfo, GIDs, P_Keys, logical state). Another
// vport's (an eswitch manager's view) is refused.
template <typename In>
status check_own_vport(std::span<const std::byte> in, const char* name) {
    if (in.size() < In::size_bytes) {
        return error{EBADMSG, fmt::format("{}: input of {} bytes (its layout has {})", name, in.size(), In::size_bytes)};
    }
    // Bits 0x10..0x1f, uid in other commands, are reserved here: 0 as in every command a
    // client sends.
    if (ifc::get<ifc::destroy_qp_in::uid>(in.data()) != 0) return perm(fmt::format("{}: uid must be 0", name));
    if (ifc::get<typename In::other_vport>(in.data()) != 0 || ifc::get<typename In::vport_number>(in.data()) != 0) {
        return perm(fmt::format("{}: another vport's context (other_vport/vport_number) is not the client's", name));
    }
    return ok_status();
}

}  // namespace

result<command_effect> check_command(std::span<const std::byte> in, std::uint32_t out_len, const owned& o,
                                     const device_facts& dev, const quotas& q) {
    if (in.size() < 8) return error{EBADMSG, "a command shorter than its opcode and op_mod"};
    const auto op = static_cast<cmd_opcode>(ifc::get<ifc::cmd_in::opcode>(in.data()));
    const std::string name(hw::name(op));
    result<command_effect> r = command_effect{};
    command_effect destroy;
    destroy.what = command_effect::kind::destroy;
    switch (op) {
    case cmd_opcode::ALLOC_PD:
        if (auto s = long_enough<ifc::alloc_pd_in>(in, "ALLOC_PD"); !s) return s.error();
        if (o.pds.size() >= q.pds) return error{EDQUOT, fmt::format("ALLOC_PD: the quota of PDs is reached ({} on this connection{})", o.pds.size(),
                                         kPerUid)};
        r = command_effect{};
        r->what = command_effect::kind::create;
        r->obj = command_effect::object::pd;
        r->min_out = ifc::alloc_pd_out::size_bytes;
        break;
    case cmd_opcode::DEALLOC_PD: {
        if (auto s = long_enough<ifc::dealloc_pd_in>(in, "DEALLOC_PD"); !s) return s.error();
        const std::uint32_t pd = ifc::get<ifc::dealloc_pd_in::pd>(in.data());
        if (!o.pds.contains(pd)) return perm(fmt::format("DEALLOC_PD: PD 0x{:x} is not the client's", pd));
        for (const auto& [k, kpd] : o.mkeys) {
            if (kpd == pd) return error{EBUSY, fmt::format("DEALLOC_PD: PD 0x{:x} still has memory key 0x{:x}", pd, k)};
        }
        for (const auto& [qpn, u] : o.qp_info) {
            if (u.pd == pd) return error{EBUSY, fmt::format("DEALLOC_PD: PD 0x{:x} still has QP 0x{:x}", pd, qpn)};
        }
        for (const auto& [srqn, u] : o.srq_info) {
            if (u.pd == pd) return error{EBUSY, fmt::format("DEALLOC_PD: PD 0x{:x} still has SRQ 0x{:x}", pd, srqn)};
        }
        destroy.obj = command_effect::object::pd;
        destroy.id = pd;
        r = destroy;
        break;
    }
    case cmd_opcode::CREATE_CQ:
        r = check_create_cq(in, o, dev, q);
        break;
    case cmd_opcode::DESTROY_CQ:
    case cmd_opcode::QUERY_CQ: {
        if (op == cmd_opcode::DESTROY_CQ) {
            if (auto s = long_enough<ifc::destroy_cq_in>(in, "DESTROY_CQ"); !s) return s.error();
        } else if (in.size() < ifc::query_cq_in::size_bytes) {
            return error{EBADMSG, "QUERY_CQ: input shorter than its layout"};
        } else if (ifc::get<ifc::destroy_cq_in::uid>(in.data()) != 0) {
            // uid at 0x10 as in DESTROY_CQ (our layout of QUERY_CQ leaves it out)
            return perm("QUERY_CQ: uid must be 0");
        }
        // destroy_cq_in and query_cq_in both hold cqn at 0x48.
        const std::uint32_t cqn = ifc::get<ifc::destroy_cq_in::cqn>(in.data());
        if (!o.cqs.contains(cqn)) return perm(fmt::format("{}: CQ 0x{:x} is not the client's", name, cqn));
        if (op == cmd_opcode::DESTROY_CQ) {
            for (const auto& [qpn, u] : o.qp_info) {
                if (u.cqs.contains(cqn)) return error{EBUSY, fmt::format("DESTROY_CQ: QP 0x{:x} still uses CQ 0x{:x}", qpn, cqn)};
            }
            destroy.obj = command_effect::object::cq;
            destroy.id = cqn;
            r = destroy;
        }
        break;
    }
    case cmd_opcode::CREATE_MKEY:
        r = check_create_mkey(in, o, q);
        break;
    case cmd_opcode::CREATE_QP:
        r = check_create_qp(in, o, q);
        break;
    case cmd_opcode::CREATE_RMP: r = check_create_rmp(in, o, q); break;
    case cmd_opcode::DESTROY_RMP:
    case cmd_opcode::QUERY_RMP:
    case cmd_opcode::MODIFY_RMP: r = check_rmp_number(in, o, op); break;
    case cmd_opcode::RST2INIT_QP: r = check_modify_qp<ifc::rst2init_qp_in>(in, o, "RST2INIT_QP"); break;
    case cmd_opcode::INIT2INIT_QP: r = check_modify_qp<ifc::init2init_qp_in>(in, o, "INIT2INIT_QP"); break;
    case cmd_opcode::INIT2RTR_QP: r = check_modify_qp<ifc::init2rtr_qp_in>(in, o, "INIT2RTR_QP"); break;
    case cmd_opcode::RTR2RTS_QP: r = check_modify_qp<ifc::rtr2rts_qp_in>(in, o, "RTR2RTS_QP"); break;
    case cmd_opcode::RTS2RTS_QP: r = check_modify_qp<ifc::rts2rts_qp_in>(in, o, "RTS2RTS_QP"); break;
    case cmd_opcode::SQERR2RTS_QP: r = check_modify_qp<ifc::sqerr2rts_qp_in>(in, o, "SQERR2RTS_QP"); break;
    case cmd_opcode::SQD_RTS_QP: r = check_modify_qp<ifc::sqd2rts_qp_in>(in, o, "SQD_RTS_QP"); break;
    case cmd_opcode::QP_2ERR: r = check_qp_number<ifc::qp_2err_in>(in, o, "2ERR_QP"); break;
    case cmd_opcode::QP_2RST: r = check_qp_number<ifc::qp_2rst_in>(in, o, "2RST_QP"); break;
    case cmd_opcode::QUERY_QP: r = check_qp_number<ifc::query_qp_in>(in, o, "QUERY_QP"); break;
    // A client's QP in a multicast group gets the group's packets, which is what every
    // member asked for; another client's QP is not its to attach.
    case cmd_opcode::ATTACH_TO_MCG: r = check_qp_number<ifc::attach_to_mcg_in>(in, o, "ATTACH_TO_MCG"); break;
    case cmd_opcode::DETACH_FROM_MCG: r = check_qp_number<ifc::detach_from_mcg_in>(in, o, "DETACH_FROM_MCG"); break;
    case cmd_opcode::DESTROY_QP: {
        r = check_qp_number<ifc::destroy_qp_in>(in, o, "DESTROY_QP");
        if (r) {
            destroy.obj = command_effect::object::qp;
            destroy.id = ifc::get<ifc::destroy_qp_in::qpn>(in.data());
            r = destroy;
        }
        break;
    }
    case cmd_opcode::QUERY_NIC_VPORT_CONTEXT:
        if (auto s = check_own_vport<ifc::query_nic_vport_context_in>(in, "QUERY_NIC_VPORT_CONTEXT"); !s) return s.error();
        break;
    case cmd_opcode::QUERY_HCA_VPORT_CONTEXT:
        if (auto s = check_own_vport<ifc::query_hca_vport_context_in>(in, "QUERY_HCA_VPORT_CONTEXT"); !s) return s.error();
        break;
    case cmd_opcode::QUERY_HCA_VPORT_GID:
        if (auto s = check_own_vport<ifc::query_hca_vport_gid_in>(in, "QUERY_HCA_VPORT_GID"); !s) return s.error();
        break;
    case cmd_opcode::QUERY_HCA_VPORT_PKEY:
        if (auto s = check_own_vport<ifc::query_hca_vport_pkey_in>(in, "QUERY_HCA_VPORT_PKEY"); !s) return s.error();
        break;
    case cmd_opcode::QUERY_VPORT_STATE:
        if (auto s = check_own_vport<ifc::query_vport_state_in>(in, "QUERY_VPORT_STATE"); !s) return s.error();
        break;
    case cmd_opcode::DESTROY_MKEY: {
        if (auto s = long_enough<ifc::destroy_mkey_in>(in, "DESTROY_MKEY"); !s) return s.error();
        const std::uint32_t idx = ifc::get<ifc::destroy_mkey_in::mkey_index>(in.data());
        if (!o.mkeys.contains(idx)) return perm(fmt::format("DESTROY_MKEY: key index 0x{:x} is not the client's", idx));
        destroy.obj = command_effect::object::mkey;
        destroy.id = idx;
        r = destroy;
        break;
    }
    default:
        return perm(fmt::format("{} (0x{:x}) is not on the daemon's allow-list", name, static_cast<unsigned>(op)));
    }
    if (r && out_len < r->min_out) {
        return inval(fmt::format("{}: output of {} bytes (its layout has {})", name, out_len, r->min_out));
    }
    return r;
}

namespace {

void use(owned& o, const std::set<std::uint64_t>& maps, int delta) {
    for (const auto iova : maps) {
        if (auto it = o.maps.find(iova); it != o.maps.end()) it->second.users += static_cast<unsigned>(delta);
    }
}

}  // namespace

void apply(const command_effect& e, std::span<const std::byte> out, owned& o) {
    using obj = command_effect::object;
    if (e.what == command_effect::kind::create) {
        // Every create output holds the new number at 0x48 (PRM: pd, cqn, mkey_index).
        const std::uint32_t id = ifc::get<ifc::create_cq_out::cqn>(out.data());
        if (e.obj == obj::pd) o.pds.insert(id);
        if (e.obj == obj::cq) {
            o.cqs.insert(id);
            o.cq_uar[id] = e.uar;
            o.cq_maps[id] = e.maps;
        }
        if (e.obj == obj::mkey) {
            o.mkeys.emplace(id, e.pd);
            o.mkey_maps[id] = e.maps;
        }
        if (e.obj == obj::qp) {
            o.qps.insert(id);
            o.qp_info[id] = owned::qp_uses{e.pd, e.uar, e.cqs, e.maps, e.cqn_snd, e.cqn_rcv, e.srq};
        }
        if (e.obj == obj::srq) {
            o.srqs.insert(id);
            o.srq_info[id] = owned::srq_uses{e.pd, e.maps};
        }
        use(o, e.maps, 1);
        if (e.translations != 0) {
            o.translations_of[translation_key(e.obj, id)] = e.translations;
            o.translations += e.translations;
        }
    } else if (e.what == command_effect::kind::modify) {
        if (e.obj == obj::qp && e.new_cqn_rcv) {
            if (auto it = o.qp_info.find(e.id); it != o.qp_info.end()) {
                it->second.cqn_rcv = e.cqn_rcv;
                it->second.cqs = {it->second.cqn_snd, e.cqn_rcv};
            }
        }
    } else if (e.what == command_effect::kind::destroy) {
        if (auto t = o.translations_of.find(translation_key(e.obj, e.id)); t != o.translations_of.end()) {
            o.translations -= t->second;
            o.translations_of.erase(t);
        }
        if (e.obj == obj::pd) o.pds.erase(e.id);
        if (e.obj == obj::cq) {
            o.cqs.erase(e.id);
            o.cq_uar.erase(e.id);
            use(o, o.cq_maps[e.id], -1);
            o.cq_maps.erase(e.id);
        }
        if (e.obj == obj::mkey) {
            o.mkeys.erase(e.id);
            use(o, o.mkey_maps[e.id], -1);
            o.mkey_maps.erase(e.id);
        }
        if (e.obj == obj::qp) {
            o.qps.erase(e.id);
            use(o, o.qp_info[e.id].maps, -1);
            o.qp_info.erase(e.id);
        }
        if (e.obj == obj::srq) {
            o.srqs.erase(e.id);
            use(o, o.srq_info[e.id].maps, -1);
            o.srq_info.erase(e.id);
        }
    }
}

std::uint64_t declared_translations(std::span<const std::byte> in) {
    if (in.size() < 8) return 0;
    const std::size_t n = in.size() / 8;  // at most what the input can list
    switch (static_cast<cmd_opcode>(ifc::get<ifc::cmd_in::opcode>(in.data()))) {
    case cmd_opcode::CREATE_MKEY:
        if (in.size() < ifc::create_mkey_in::size_bytes) return 0;
        return std::min<std::uint64_t>(
            n, 2 * std::uint64_t{ifc::get<ifc::create_mkey_in::translations_octword_actual_size>(in.data())});
    case cmd_opcode::CREATE_CQ:
        return in.size() < ifc::create_cq_in::size_bytes ? 0 : (in.size() - ifc::create_cq_in::size_bytes) / 8;
    case cmd_opcode::CREATE_QP:
        return in.size() < ifc::create_qp_in::size_bytes ? 0 : (in.size() - ifc::create_qp_in::size_bytes) / 8;
    case cmd_opcode::CREATE_RMP:
        return in.size() < ifc::create_rmp_in::size_bytes ? 0 : (in.size() - ifc::create_rmp_in::size_bytes) / 8;
    default: return 0;
    }
}

std::vector<teardown_step> teardown_commands(const owned& o) {
    using driver::command;
    using obj = command_effect::object;
    std::vector<teardown_step> steps;
    auto maps_of = [](const auto& m, std::uint32_t id) {
        const auto it = m.find(id);
        return it == m.end() ? std::set<std::uint64_t>{} : it->second;
    };
    for (const auto qpn : o.qps) {
        auto in = command<ifc::destroy_qp_in>(cmd_opcode::DESTROY_QP);
        ifc::set<ifc::destroy_qp_in::qpn>(in.data(), qpn);
        const auto it = o.qp_info.find(qpn);
        steps.push_back({std::move(in), obj::qp, qpn, it == o.qp_info.end() ? std::set<std::uint64_t>{} : it->second.maps});
    }
    for (const auto srqn : o.srqs) {
        auto in = command<ifc::destroy_rmp_in>(cmd_opcode::DESTROY_RMP);
        ifc::set<ifc::destroy_rmp_in::rmpn>(in.data(), srqn);
        const auto it = o.srq_info.find(srqn);
        steps.push_back({std::move(in), obj::srq, srqn, it == o.srq_info.end() ? std::set<std::uint64_t>{} : it->second.maps});
    }
    for (const auto cqn : o.cqs) {
        auto in = command<ifc::destroy_cq_in>(cmd_opcode::DESTROY_CQ);
        ifc::set<ifc::destroy_cq_in::cqn>(in.data(), cqn);
        steps.push_back({std::move(in), obj::cq, cqn, maps_of(o.cq_maps, cqn)});
    }
    for (const auto& [idx, pd] : o.mkeys) {
        auto in = command<ifc::destroy_mkey_in>(cmd_opcode::DESTROY_MKEY);
        ifc::set<ifc::destroy_mkey_in::mkey_index>(in.data(), idx);
        steps.push_back({std::move(in), obj::mkey, idx, maps_of(o.mkey_maps, idx)});
    }
    for (const auto pd : o.pds) {
        auto in = command<ifc::dealloc_pd_in>(cmd_opcode::DEALLOC_PD);
        ifc::set<ifc::dealloc_pd_in::pd>(in.data(), pd);
        steps.push_back({std::move(in), obj::pd, pd, {}});
    }
    return steps;
}

std::vector<std::vector<std::byte>> qp_reset_commands(std::uint32_t qpn) {
    // PRM "QP State Machine": 2RST from any state returns the QP to RST (its queues
    // flushed, nothing in flight); 2ERR when even that failed. DESTROY_QP is retried after.
    auto rst = driver::command<ifc::qp_2rst_in>(cmd_opcode::QP_2RST);
    ifc::set<ifc::qp_2rst_in::qpn>(rst.data(), qpn);
    auto err = driver::command<ifc::qp_2err_in>(cmd_opcode::QP_2ERR);
    ifc::set<ifc::qp_2err_in::qpn>(err.data(), qpn);
    return {std::move(rst), std::move(err)};
}

}  // namespace cxv::daemon
