// The setup the model's tests share: fixtures that bring a device up with the objects a
// test binds to, the inputs of the CREATE_* commands, the commands that name one object
// (destroy, dealloc, query), and the check of a command's outcome. All of it drives the
// model through the harness (BAR0, DMA, commands), as a driver would; what a test cannot
// go on without is REQUIREd.
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <vector>

#include "tests/sim/harness.h"

namespace cxv::test {

// --- checks and bring-up ------------------------------------------------------------

// CHECKs a command's status and syndrome (naming the syndrome it got); a failure also
// names the caller's line.
void check_status(const cmd_result& r, cmd_status st, cmd_syndrome syn,
                  std::source_location where = std::source_location::current());

// The refusals most checks end in: BAD_PARAM/BAD_PARAMETER, RESOURCE_BUSY/RESOURCE_IN_USE,
// BAD_RES_STATE/BAD_RESOURCE_STATE.
void bad_parameter(const cmd_result& r, std::source_location where = std::source_location::current());
void in_use(const cmd_result& r, std::source_location where = std::source_location::current());
void bad_state(const cmd_result& r, std::source_location where = std::source_location::current());
// REQUIREs success (naming the syndrome otherwise); returns r.
const cmd_result& require_ok(const cmd_result& r);

// A command input of `bytes` (Linux's MLX5_ST_SZ_BYTES of its layout, and what follows
// it) with opcode and op_mod set where every input has them, at Linux's offsets.
std::vector<std::byte> linux_command(std::size_t bytes, cmd_opcode op, std::uint16_t op_mod = 0);
// QUERY_HCA_CAP with `op_mod` (type << 1 | current), the whole output.
cmd_result query_cap(harness& h, std::uint16_t op_mod);

// REQUIREs the boot, then gives the device its command queue: where a driver is before
// ENABLE_HCA.
void boot(harness& h);
// The same, then ENABLE_HCA, REQUIREd to succeed.
void boot_and_enable(harness& h);

// --- the commands that name one object ------------------------------------------------

// The input of a command that names one object by its number (Field): the caller's uid
// where the layout has one, `extra` bytes after the layout.
template <typename In, typename Field>
std::vector<std::byte> named_input(cmd_opcode op, std::uint32_t n, std::uint16_t uid = 0, std::size_t extra = 0) {
    auto in = harness::input<In>(op, 0, extra);
    if constexpr (requires { typename In::uid; }) ifc::set<typename In::uid>(in.data(), uid);
    ifc::set<Field>(in.data(), n);
    return in;
}

std::uint32_t alloc_pd(harness& h, std::uint16_t uid = 0);  // REQUIREd to succeed
cmd_result dealloc_pd(harness& h, std::uint32_t pd, std::uint16_t uid = 0);
cmd_result dealloc_uar(harness& h, std::uint32_t uar, std::uint16_t uid = 0);
cmd_result destroy_eq(harness& h, std::uint32_t eqn);
cmd_result destroy_cq(harness& h, std::uint32_t cqn, std::uint16_t uid = 0);
cmd_result destroy_srq(harness& h, std::uint32_t srqn, std::uint16_t uid = 0);
cmd_result destroy_qp(harness& h, std::uint32_t qpn, std::uint16_t uid = 0);
cmd_result destroy_mkey(harness& h, std::uint32_t index, std::uint16_t uid = 0);
// `len`: the input's length (rdma-core sends 48 bytes, the size of create_umem_in).
cmd_result destroy_umem(harness& h, std::uint32_t id, std::uint16_t uid = 0,
                        std::size_t len = ifc::destroy_umem_in::size_bytes);
// The output has room for `npas` page-list entries.
cmd_result query_cq(harness& h, std::uint32_t cqn, std::size_t npas = 1);
cmd_result query_srq(harness& h, std::uint32_t srqn, std::size_t npas = 1);
cmd_result query_qp(harness& h, std::uint32_t qpn, std::size_t npas = 1);

// --- CREATE_* inputs ----------------------------------------------------------------------

// What CREATE_CQ gets; defaults make a valid 16-entry CQ once buf and dbr are set.
struct cq_spec {
    unsigned log_size = 4;
    std::uint32_t uar = 0;
    std::uint32_t eqn = 0;
    std::uint64_t buf = 0;  // first page IOVA
    std::size_t npas = 0;   // 0: as many as the ring needs
    std::uint64_t dbr = 0;
    unsigned cqe_sz = 0;
    unsigned log_page_size = 0;
    unsigned page_offset = 0;
    std::uint32_t uid = 0;
};
std::vector<std::byte> create_cq_in(const cq_spec& s);
std::byte* cqc_of(std::vector<std::byte>& create_cq_in);
std::uint32_t cqn_of(const cmd_result& r);

// An SRQ of 2^log_size WQEs of 16 << log_stride bytes in `buf`, page list of npas
// entries (default: as many as the buffer needs, one per 4 KiB page).
struct srq_spec {
    unsigned log_size = 4;
    unsigned log_stride = 2;  // 64-byte WQEs
    unsigned log_page = 0;
    unsigned page_offset = 0;
    std::uint32_t pd = 0;
    std::uint32_t cqn = 0;
    std::uint16_t uid = 0;
    std::uint64_t dbr = 0;  // 0: the last 64 bytes of buf
    std::uint32_t lwm = 0;
    std::uint32_t xrcd = 0;
    bool cont = false;
    int npas = -1;
    std::uint64_t pas_delta = 0;  // added to every page address
};
cmd_result create_srq(harness& h, const dma_buffer& buf, const srq_spec& s);
std::uint32_t srqn_of(const cmd_result& r);
// A 16-entry CQ on a fresh UAR and EQ (of user `uid`). Returns cqn.
std::uint32_t create_small_cq(harness& h, std::uint16_t uid = 0);
// A UD QP on a UAR of its own whose receive side is the SRQ (or XRC SRQ, or RMP) srqn,
// with no RQ of its own. Returns qpn.
std::uint32_t create_srq_qp(harness& h, std::uint32_t pd, std::uint32_t cqn, std::uint32_t srqn);

// What CREATE_QP gets (PM state MIGRATED, the page list from buf, 4 KiB apart).
struct qp_spec {
    std::uint32_t st = 0;  // RC 0, UC 1, UD 2
    std::uint32_t pd = 0;
    std::uint32_t uar = 0;
    std::uint32_t cqn = 0;  // send and receive
    unsigned log_rq_size = 4;
    unsigned log_rq_stride = 2;
    unsigned log_sq_size = 4;
    std::uint32_t srqn = 0;  // receive from this SRQ (rq_type 1) instead of an RQ
    std::uint64_t buf = 0;
    std::size_t npas = 1;
    std::uint64_t dbr = 0;
};
std::vector<std::byte> create_qp_in(const qp_spec& s);
std::uint32_t qpn_of(const cmd_result& r);

// CREATE_UMEM as rdma-core builds it (facts §6.2): 48 bytes and the MTT list, each entry a page
// address | wr_en << 1 | rd_en.
std::vector<std::byte> create_umem_in(unsigned log_page, std::uint32_t page_offset,
                                      const std::vector<std::uint64_t>& mtt, std::uint16_t uid = 0);
std::uint32_t umem_id_of(const cmd_result& r);
// A UMEM of the first `pages` 4 KiB pages of `mem`, read/write, the region starting
// page_offset bytes into the first page. Returns the umem id or 0.
std::uint32_t create_umem(harness& h, const dma_buffer& mem, std::size_t pages, std::uint32_t page_offset = 0,
                          std::uint16_t uid = 0);

// --- fixtures -------------------------------------------------------------------------

// A device brought up, with a PD of uid 0.
struct booted {
    harness h;
    std::uint32_t pd = 0;
    booted();
};

// A device brought up, with a UAR and on it an EQ of 2^log_size entries subscribed to
// `bitmask`, signalling MSI-X `vector`. (With no event subscribed the EQ still gets the
// completion events of the CQs that name it.)
struct eq_env {
    harness h;
    std::uint32_t uar = 0;
    harness::eq eq;
    explicit eq_env(unsigned log_size = 4, std::uint64_t bitmask = 0, unsigned vector = 0);
};

// A device brought up with what a QP binds to: a UAR, an EQ on it (as eq_env's), a PD
// and a CQ.
struct qp_env {
    harness h;
    std::uint32_t uar = 0, pd = 0, cq = 0;
    harness::eq eq;

    // With up = false the test brings the device up itself, then calls setup().
    explicit qp_env(sim::device_config cfg = {}, bool up = true);
    void setup();
    // 64 CQEs in one page; the doorbell record in the next. Returns cqn or 0.
    std::uint32_t create_cq();
    // 16 receive WQEs of 64 bytes in one page; the doorbell record in the next. Returns
    // srqn or 0.
    std::uint32_t create_srq();
    // A CREATE_QP input: 16 receive WQEs of 64 bytes then 16 send WQE-BBs, in one page;
    // `npas` page-list entries; the doorbell record in the buffer's last page. srqn: on
    // that SRQ instead of an RQ; cqn: that CQ instead of `cq`.
    std::vector<std::byte> qp_input(std::uint32_t st, std::size_t npas = 1, std::uint32_t srqn = 0,
                                    std::uint32_t cqn = 0);
    // CREATE_QP, REQUIREd to succeed. Returns qpn.
    std::uint32_t create_qp(const std::vector<std::byte>& in);
    std::uint32_t create_qp(std::uint32_t st, std::uint32_t srqn = 0, std::uint32_t cqn = 0);
};

}  // namespace cxv::test
