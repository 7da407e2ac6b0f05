// Fuzz target: cxvd's request parser and session order (protocol/codec.h), the checks
// a forwarded PRM command passes (daemon/owner.h, against a client that owns a little of
// everything), and the reply parsers a client runs on what a daemon sends. No input may crash them or read
// out of bounds (run under ASan); a request that parses must encode again to the same
// bytes. The first input byte picks the fds that come with the message (none, a memfd,
// a socket, or two). libFuzzer entry point; daemon_fuzz_regress_main.cc drives it in CI.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "daemon/owner.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "protocol/codec.h"

namespace d = cxv::daemon;
namespace ifc = cxv::hw::ifc;
using cxv::hw::cmd_opcode;

namespace {

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "daemon fuzz: %s\n", what);
    std::abort();
}

struct fds {
    int file = -1, sock[2] = {-1, -1};
    fds() {
        file = ::memfd_create("daemon-fuzz", MFD_CLOEXEC);
        if (file < 0 || ::ftruncate(file, 1 << 20) != 0) fail("memfd");
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock) != 0) fail("socketpair");
    }
};

// A client with one 1 MiB mapping at IOVA 1 MiB, UAR 5, PD 3, CQ 7, mkey 9, QP 7 and
// SRQ 11.
const d::owned& some_client() {
    static d::owned* o = [] {
        auto* x = new d::owned;
        x->maps[1 << 20].length = 1 << 20;
        x->maps[1 << 20].device_writes = true;
        x->uars = {5};
        x->pds = {3};
        x->cqs = {7};
        x->mkeys = {{9, 3}};
        x->qps = {7};
        x->qp_info[7] = d::owned::qp_uses{3, 5, {7}, {1 << 20}, 7, 7, 0};
        x->srqs = {11};
        x->srq_info[11] = d::owned::srq_uses{3, {1 << 20}};
        return x;
    }();
    return *o;
}

std::vector<std::byte> reencode(const d::request& r) {
    switch (r.type) {
    case d::msg_type::hello: return d::encode(r.type, r.hdr.seq, d::body(r.hello));
    case d::msg_type::status: return d::encode(r.type, r.hdr.seq, {});
    case d::msg_type::map_memory: return d::encode(r.type, r.hdr.seq, d::body(r.map));
    case d::msg_type::unmap_memory: return d::encode(r.type, r.hdr.seq, d::body(r.unmap));
    case d::msg_type::alloc_uar: return d::encode(r.type, r.hdr.seq, d::body(r.alloc_uar));
    case d::msg_type::dealloc_uar: return d::encode(r.type, r.hdr.seq, d::body(r.dealloc_uar));
    case d::msg_type::command: return d::encode(r.type, r.hdr.seq, d::body(r.command));
    case d::msg_type::events: return d::encode(r.type, r.hdr.seq, d::body(r.events));
    case d::msg_type::counters: return d::encode(r.type, r.hdr.seq, d::body(r.counters));
    case d::msg_type::event: break;  // never a request: parse_request refuses it
    case d::msg_type::command_fd:
        return d::encode(r.type, r.hdr.seq,
                         d::body(d::command_fd_req{r.command.device, r.command.out_len,
                                                   static_cast<std::uint32_t>(r.command.in.size())}));
    }
    fail("a parsed request of no known type");
}

bool in_memory(std::uint64_t a, std::uint64_t len) {
    return a >= (1u << 20) && len <= (1u << 20) && a - (1u << 20) <= (1u << 20) - len;
}

// The oracle for a command the checks let through: every object number and address it
// names is the fuzzed client's, whatever the bytes (the checks' own code is not reused).
void expect_owned(std::span<const std::byte> in) {
    const auto& o = some_client();
    const std::byte* p = in.data();
    const auto op = static_cast<cmd_opcode>(ifc::get<ifc::cmd_in::opcode>(p));
    if (ifc::get<ifc::destroy_qp_in::uid>(p) != 0) fail("a command with a uid allowed");
    auto qpc_ok = [&](const std::byte* qpc, bool create, std::uint32_t mask) {
        const auto pd = ifc::get<ifc::qpc::pd>(qpc), uar = ifc::get<ifc::qpc::uar_page>(qpc);
        const auto snd = ifc::get<ifc::qpc::cqn_snd>(qpc), rcv = ifc::get<ifc::qpc::cqn_rcv>(qpc);
        if (ifc::get<ifc::qpc::rlky>(qpc) || ifc::get<ifc::qpc::counter_set_id>(qpc)) fail("rlky or a counter set allowed");
        if (ifc::get<ifc::qpc::deth_sqpn>(qpc) || ifc::get<ifc::qpc::cd_master>(qpc) ||
            (ifc::get<ifc::qpc::q_key>(qpc) & 0x80000000u)) {
            fail("deth_sqpn, CORE-Direct or a privileged Q_Key allowed");
        }
        const auto srqn = ifc::get<ifc::qpc::srqn_rmpn_xrqn>(qpc);
        if (ifc::get<ifc::qpc::xrcd>(qpc) != 0) fail("an XRC domain allowed");
        if (create) {
            if (!o.pds.contains(pd) || !o.uars.contains(uar) || !o.cqs.contains(snd) || !o.cqs.contains(rcv)) {
                fail("CREATE_QP on another's PD, UAR or CQ allowed");
            }
            const bool on_srq = ifc::get<ifc::qpc::rq_type>(qpc) == ifc::qpc_values::rq_srq;
            if (on_srq ? !o.srqs.contains(srqn) : srqn != 0) fail("CREATE_QP on another's SRQ allowed");
            return;
        }
        if (srqn != 0 || (mask & ifc::qp_optpar::SRQN)) fail("a transition naming an SRQ allowed");
        if ((pd != 0 && pd != 3) || (uar != 0 && uar != 5) || (snd != 0 && snd != 7)) fail("a transition naming another's PD, UAR or CQ");
        if ((mask & ifc::qp_optpar::CQN_RCV) ? !o.cqs.contains(rcv) : (rcv != 0 && rcv != 7)) {
            fail("a transition moving the receive CQ to another's");
        }
    };
    switch (op) {
    case cmd_opcode::DEALLOC_PD:
        if (!o.pds.contains(ifc::get<ifc::dealloc_pd_in::pd>(p))) fail("DEALLOC_PD of another's PD allowed");
        break;
    case cmd_opcode::DESTROY_CQ:
    case cmd_opcode::QUERY_CQ:
        if (!o.cqs.contains(ifc::get<ifc::destroy_cq_in::cqn>(p))) fail("a CQ command on another's CQ allowed");
        break;
    case cmd_opcode::DESTROY_MKEY:
        if (!o.mkeys.contains(ifc::get<ifc::destroy_mkey_in::mkey_index>(p))) fail("DESTROY_MKEY of another's key");
        break;
    case cmd_opcode::CREATE_CQ: {
        const std::byte* cqc = ifc::at<ifc::create_cq_in::cq_context>(p);
        if (!o.uars.contains(ifc::get<ifc::cqc::uar_page>(cqc)) || ifc::get<ifc::cqc::c_eqn_or_apu_element>(cqc) != 8) {
            fail("CREATE_CQ on another's UAR or EQ allowed");
        }
        if (!in_memory(ifc::get<ifc::cqc::dbr_addr>(cqc), 8)) fail("CREATE_CQ with a doorbell record outside");
        const std::uint64_t page = std::uint64_t{4096} << ifc::get<ifc::cqc::log_page_size>(cqc);
        for (std::size_t i = 0; i < (in.size() - ifc::create_cq_in::size_bytes) / 8; ++i) {
            if (!in_memory(ifc::get<ifc::create_cq_in::pas>(p, i), page)) fail("CREATE_CQ with a page outside");
        }
        break;
    }
    case cmd_opcode::CREATE_MKEY: {
        const std::byte* mkc = ifc::at<ifc::create_mkey_in::memory_key_mkey_entry>(p);
        if (!o.pds.contains(ifc::get<ifc::mkc::pd>(mkc))) fail("CREATE_MKEY on another's PD allowed");
        if (ifc::get<ifc::mkc::access_mode_1_0>(mkc) != 1) fail("a key other than MTT allowed");
        const std::uint64_t page = std::uint64_t{1} << ifc::get<ifc::mkc::log_page_size>(mkc);
        const std::uint64_t n = 2 * std::uint64_t{ifc::get<ifc::create_mkey_in::translations_octword_actual_size>(p)};
        // The translations the key's bytes reach (an odd count's padding entry is not).
        const std::uint64_t start = ifc::get<ifc::mkc::start_addr>(mkc), len = ifc::get<ifc::mkc::len>(mkc);
        const std::uint64_t off = start & (page - 1);
        if (len > n * page || off > n * page - len) fail("CREATE_MKEY longer than its translations");
        const std::uint64_t reached = std::max<std::uint64_t>(1, (len + off + page - 1) / page);
        for (std::uint64_t i = 0; i < reached; ++i) {
            const std::uint64_t e = (std::uint64_t{ifc::get<ifc::create_mkey_in::klm_pas_mtt>(p, 2 * i)} << 32) |
                                    ifc::get<ifc::create_mkey_in::klm_pas_mtt>(p, 2 * i + 1);
            if (!in_memory(e & ~std::uint64_t{3}, page)) fail("CREATE_MKEY with a translation outside");
        }
        break;
    }
    case cmd_opcode::CREATE_QP: {
        const std::byte* qpc = ifc::at<ifc::create_qp_in::qpc>(p);
        qpc_ok(qpc, true, 0);
        if (!in_memory(ifc::get<ifc::qpc::dbr_addr>(qpc), 8)) fail("CREATE_QP with a doorbell record outside");
        const std::uint64_t page = std::uint64_t{4096} << ifc::get<ifc::qpc::log_page_size>(qpc);
        for (std::size_t i = 0; i < (in.size() - ifc::create_qp_in::size_bytes) / 8; ++i) {
            if (!in_memory(ifc::get<ifc::create_qp_in::pas>(p, i), page)) fail("CREATE_QP with a page outside");
        }
        break;
    }
    case cmd_opcode::RST2INIT_QP:
    case cmd_opcode::INIT2INIT_QP:
    case cmd_opcode::INIT2RTR_QP:
    case cmd_opcode::RTR2RTS_QP:
    case cmd_opcode::RTS2RTS_QP:
    case cmd_opcode::SQERR2RTS_QP:
    case cmd_opcode::SQD_RTS_QP:
        // Every transition's layout has qpn, opt_param_mask and qpc where RTS2RTS has them.
        if (!o.qps.contains(ifc::get<ifc::rts2rts_qp_in::qpn>(p))) fail("a transition of another's QP allowed");
        qpc_ok(ifc::at<ifc::rts2rts_qp_in::qpc>(p), false, ifc::get<ifc::rts2rts_qp_in::opt_param_mask>(p));
        break;
    case cmd_opcode::QP_2ERR:
    case cmd_opcode::QP_2RST:
    case cmd_opcode::QUERY_QP:
    case cmd_opcode::DESTROY_QP:
        if (!o.qps.contains(ifc::get<ifc::destroy_qp_in::qpn>(p))) fail("a QP command on another's QP allowed");
        break;
    case cmd_opcode::CREATE_RMP: {
        const std::byte* wq = ifc::at<ifc::rmpc::wq>(ifc::at<ifc::create_rmp_in::ctx>(p));
        if (!o.pds.contains(ifc::get<ifc::wq::pd>(wq))) fail("CREATE_RMP on another's PD allowed");
        if (ifc::get<ifc::wq::wq_umem_valid>(wq) || ifc::get<ifc::wq::dbr_umem_valid>(wq)) fail("CREATE_RMP in UMEMs");
        if (!in_memory(ifc::get<ifc::wq::dbr_addr>(wq), 8)) fail("CREATE_RMP with a doorbell record outside");
        const std::uint64_t page = std::uint64_t{4096} << ifc::get<ifc::wq::log_wq_pg_sz>(wq);
        for (std::size_t i = 0; i < (in.size() - ifc::create_rmp_in::size_bytes) / 8; ++i) {
            if (!in_memory(ifc::get<ifc::wq::pas>(wq, i), page)) fail("CREATE_RMP with a page outside");
        }
        break;
    }
    case cmd_opcode::DESTROY_RMP:
    case cmd_opcode::QUERY_RMP:
    case cmd_opcode::MODIFY_RMP:
        if (!o.srqs.contains(ifc::get<ifc::destroy_rmp_in::rmpn>(p))) fail("an RMP command on another's RMP allowed");
        break;
    case cmd_opcode::ALLOC_PD: break;
    // Read-only queries of the function's own vport; every layout has other_vport at 0x40
    // and vport_number at 0x50.
    case cmd_opcode::QUERY_NIC_VPORT_CONTEXT:
    case cmd_opcode::QUERY_HCA_VPORT_CONTEXT:
    case cmd_opcode::QUERY_HCA_VPORT_GID:
    case cmd_opcode::QUERY_HCA_VPORT_PKEY:
    case cmd_opcode::QUERY_VPORT_STATE:
        if (ifc::get<ifc::query_vport_state_in::other_vport>(p) != 0 ||
            ifc::get<ifc::query_vport_state_in::vport_number>(p) != 0) {
            fail("a query of another vport allowed");
        }
        break;
    default: fail("a command off the allow-list allowed");
    }
}

}  // namespace

// Commands the checks let through, for the CI driver to see that its inputs reach them.
long daemon_fuzz_commands_allowed = 0;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static fds f;
    static d::session session;  // one connection's order across inputs, as the daemon keeps it
    if (size == 0) return 0;
    const int sets[4][2] = {{-1, -1}, {f.file, -1}, {f.sock[0], -1}, {f.file, f.file}};
    const unsigned pick = data[0] % 4;
    const std::size_t nfds = pick == 0 ? 0 : pick == 3 ? 2 : 1;
    std::span<const int> fd_span(sets[pick], nfds);
    std::span<const std::byte> msg(reinterpret_cast<const std::byte*>(data + 1), size - 1);
    // 0xfd: one fd, a sealed memfd holding the bytes after the header and COMMAND_FD's
    // body (the message is what comes before), so a COMMAND_FD's input is fuzzed too.
    cxv::unique_fd sealed;
    int sealed_set[1] = {-1};
    if (data[0] == 0xfd) {
        const std::size_t skip = std::min<std::size_t>(msg.size(), d::header_bytes + 10);
        auto m = d::sealed_memfd(msg.subspan(skip));
        if (!m) fail("a sealed memfd");
        sealed = std::move(m).value();
        sealed_set[0] = sealed.get();
        fd_span = std::span<const int>(sealed_set, 1);
        msg = msg.first(skip);
    }

    d::request r;
    const auto s = d::parse_request(msg, fd_span, r);
    if (s) {
        if (r.type == d::msg_type::map_memory && r.fd != f.file) fail("MAP_MEMORY took an fd that is not a file");
        if (r.type != d::msg_type::map_memory && r.fd != -1) fail("an fd kept by a request that takes none");
        const auto again = reencode(r);
        // Map flags other than bit 0 are refused, so a parsed request re-encodes exactly.
        if (again.size() != msg.size() || std::memcmp(again.data(), msg.data(), msg.size()) != 0) {
            fail("a parsed request does not encode to its own bytes");
        }
        (void)session.accept(r);
        if (r.type == d::msg_type::command || r.type == d::msg_type::command_fd) {
            const auto e = d::check_command(r.command.in, r.command.out_len, some_client(), d::device_facts{8},
                                            d::quotas{});
            if (!e && (e.error().code <= 0 || e.error().message.empty())) fail("a command refused without errno or text");
            if (e && e->min_out > r.command.out_len) fail("a command allowed with too short an output");
            daemon_fuzz_commands_allowed += e.ok();
            if (e) expect_owned(r.command.in);
        }
    } else {
        const auto& e = s.error();
        if (e.code <= 0 || e.message.empty()) fail("a refusal without errno or text");
        // The error reply the daemon would send must itself parse.
        const auto rep = d::encode_reply(r.hdr.type, r.hdr.seq, e.code, e.message);
        d::reply back;
        if (!d::parse_reply(rep, back) || back.err != e.code) fail("an error reply does not parse");
    }
    // What a client reads from a daemon it cannot trust.
    d::reply rep;
    if (d::parse_reply(msg, rep)) {
        (void)d::parse_hello_reply(rep.payload);
        (void)d::parse_status_reply(rep.payload);
        (void)d::parse_map_memory_reply(rep.payload);
        (void)d::parse_alloc_uar_reply(rep.payload);
    }
    return 0;
}
