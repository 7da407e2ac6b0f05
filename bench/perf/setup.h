// cxv-perf's resources: the function (opened once, shared by both sides in loopback), and
// one side's memory, MR, CQs and QPs, connected to the peer's from the out-of-band
// exchange. All of it made before any timed loop.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/cxv.h"
#include "bench/perf/oob.h"
#include "bench/perf/options.h"

namespace cxv::perf {

struct function {
    std::string bdf;
    // The name the function was opened by (cxv_open_device): -R's connection manager opens
    // it by that name too (CXV_DEVICE), and the process's contexts share it.
    std::string opened_as;
    std::shared_ptr<cxv::device> dev;  // the C API's context's, which it keeps open
    std::shared_ptr<cxv::pd> pd;
    cxv::port_info port;
    std::string firmware;
};
// Opens `bdf` (the first usable mlx5 function when empty) and waits for the port. Through
// the verbs-compatible C API (cxv_open_device), as librdmacm's contexts open it: VFIO
// lets one process hold the function, and the C API shares it among a process's contexts.
result<std::shared_ptr<function>> open_function(const std::string& bdf, unsigned ib_port);

// --loopback: both sides of a test in this process, joined by a channel pair; `side(fn,
// end, server)` runs one, the server's on a thread of its own. The client's error, else
// the server's ("the server side: ..."), else none.
using side_runner = std::function<status(std::shared_ptr<function> fn, channel& end, bool server)>;
status run_both_sides(std::shared_ptr<function> server_fn, std::shared_ptr<function> client_fn, const side_runner& side);

// Whether this process runs on cxv-sim's model (what `cxv-sim run` presents: its preload
// library in the process), not on a card.
bool on_model();

constexpr std::size_t kGrh = 40;  // a UD receive's GRH in front of the data (IBTA 11.4.1.2)
constexpr std::uint32_t kQkey = 0x11111111;
// RDMA READs and atomics a QP keeps outstanding, as initiator and as target (perftest's -o).
constexpr unsigned kOutstandingReads = 16;

// One side: per QP a send area and a receive area of `slots` message slots each. The
// peer's WRITEs, READs and atomics target the receive area; this side's READ and atomic
// results land in its send area (so that with -b the two never share bytes).
struct side {
    const options* o = nullptr;
    std::shared_ptr<function> fn;
    bool server = false;
    unsigned slots = 1;          // message slots per area
    std::size_t stride = 0;      // bytes per slot
    std::size_t max_msg = 0;     // the largest size this run sends
    unsigned inline_max = 0;     // inline up to this size
    std::byte* mem = nullptr;
    std::size_t mem_len = 0;
    std::unique_ptr<cxv::buffer> shared;  // through a cxvd: mem is this memfd's (else anonymous)
    std::shared_ptr<cxv::mr> mr;
    std::shared_ptr<cxv::cq> scq, rcq;
    std::vector<std::shared_ptr<cxv::qp>> qps;
    std::vector<wire_qp> local, remote;
    std::vector<cxv::api::address_handle> ahs;  // UD: one per QP, to the peer's
    std::string local_gid, remote_gid;          // printed
    // The bandwidth loop's state, made here so that the loop allocates nothing: per QP
    // the iterations posted and completed, and a post list of WRs with their SGEs (QP q's
    // at [q * -l, (q + 1) * -l)), their fixed fields set once a size.
    std::vector<std::uint64_t> posted, done;
    std::vector<ibv_send_wr> wrs;
    std::vector<ibv_sge> sges;

    side() = default;
    side(const side&) = delete;
    side& operator=(const side&) = delete;
    ~side();

    std::byte* send_area(unsigned q, std::size_t slot) const { return mem + (2 * q) * area() + slot * stride; }
    std::byte* recv_area(unsigned q, std::size_t slot) const { return mem + (2 * q + 1) * area() + slot * stride; }
    std::uint64_t remote_addr(unsigned q, std::size_t slot) const { return remote[q].vaddr + slot * stride; }
    std::size_t area() const { return slots * stride; }
};

// The side's memory, CQs and QPs (RST), sized for the run; `local` filled.
result<std::unique_ptr<side>> make_side(const options& o, std::shared_ptr<function> fn, bool server);
// `remote` filled: the QPs to RTS (UD: their address handles made).
status connect_side(side& s);
// The same for QP q alone, once remote[q] is known (-R: as its connection's handshake
// reaches that step). QPs are connected in order, 0 first.
status connect_qp(side& s, unsigned q);
// The RC ACK timeout (IBTA 4.096 us * 2^t): -u, else perftest's 14, or 18 on the model.
std::uint8_t ack_timeout(const options& o);
// Posts a receive into slot `slot` of QP q's receive area (wr_id q << 32 | slot).
int post_receive(side& s, unsigned q, std::size_t slot);

// The bytes of a message slot for `size` (64-byte aligned, a UD GRH included), whether
// a run's slots of that size fit the memory budget, and the largest power of two that
// does (0: none).
std::size_t slot_stride(const options& o, std::size_t size);
bool message_fits(const options& o, std::size_t size);
std::size_t message_limit(const options& o);
unsigned slots_of(const options& o);

}  // namespace cxv::perf
