// Fuzz target: arbitrary command queue entries and mailbox contents go through the
// model's command interface (entry, mailbox chain, firmware) exactly as a driver's would.
// The model must never crash, hang or write outside the output it was given, and must
// always answer with a PRM-shaped reply: ownership returned, a defined delivery status,
// and, when delivered, a defined command status (with a syndrome when it is not OK).
//
// Input layout: byte 0 slot, byte 1 flags, bytes 2-3 ilen, 4-5 olen, 6 token, then
// the command input. Flags: bit 0 bring the HCA up first (so object commands get past
// the state checks), bit 1 corrupt a mailbox block number, bit 2 ring no doorbell.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "hw/cmd_layouts.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "sim/pci/bar.h"
#include "sim/device_port.h"
#include "sim/eqs.h"
#include "sim/firmware/cmd_engine.h"
#include "sim/faults.h"
#include "sim/firmware/firmware.h"
#include "sim/objects/tables.h"
#include "sim/q_counting.h"
#include "sim/transport/engine.h"
#include "sim/transport/hooks.h"
#include "sim/pci/iommu.h"
#include "sim/pci/msix.h"
#include "sim/trace.h"

namespace {

namespace ifc = cxv::hw::ifc;
using namespace cxv;

constexpr std::uint64_t kCmdq = 0x10000;
constexpr std::uint64_t kMail = 0x100000;   // mailboxes, 1 KiB apart
constexpr std::size_t kMailBytes = 256 * 1024;
constexpr std::uint64_t kPages = 0x1000000;  // firmware pages given at bring-up
constexpr std::size_t kPageBytes = 128 * 4096;

// The device's parts the firmware is given, wired as sim::device wires them (without
// a wire: the port has no link).
struct rig : sim::transport_hooks {
    sim::device_config cfg;
    std::unique_ptr<sim::bar0> bar;
    sim::iommu mmu;
    sim::msix_table msix{8};
    sim::trace tr;
    sim::fault_plan faults;
    sim::object_tables tables;
    sim::q_counting q_counts{tables.q_counters};
    sim::event_queues eqs{mmu, msix, tr};
    std::unique_ptr<sim::transport_engine> xport;
    std::unique_ptr<sim::device_port> port;
    std::unique_ptr<sim::firmware> fw;
    std::unique_ptr<sim::cmd_engine> engine;
    std::byte* cmdq;
    std::byte* mail;
    std::byte* pages;
    unsigned runs = 0;

    rig() {
        cfg.bar0_size = 1 << 20;
        bar = std::move(sim::bar0::create(cfg.bar0_size)).value();
        cmdq = alloc(4096);
        mail = alloc(kMailBytes);
        pages = alloc(kPageBytes);
        mmu.map(kCmdq, cmdq, 4096, true, true);
        mmu.map(kMail, mail, kMailBytes, true, true);
        mmu.map(kPages, pages, kPageBytes, true, true);
        xport = std::make_unique<sim::transport_engine>(cfg, *bar, mmu, tr, tables, *this);
        port = std::make_unique<sim::device_port>(cfg, tr, eqs, *xport);
        fw = std::make_unique<sim::firmware>(cfg, *bar, mmu, msix, tr, tables, eqs, *port, *xport);
        engine = std::make_unique<sim::cmd_engine>(*bar, mmu, *fw, eqs, tr, faults);
        reset();
    }
    void transmit(sim::wire::packet&& p) override { port->transmit(std::move(p)); }
    void async_event(hw::event_type type, std::span<const std::byte> data) override { eqs.post_event(type, 0, data); }
    void completion_event(std::uint32_t eqn, std::span<const std::byte> data) override {
        eqs.completion_event(eqn, data);
    }
    void count(const sim::qp_object& qp, std::uint32_t sim::q_counter_values::*what) override { q_counts.count(qp, what); }
    void count_req_error(const sim::qp_object& qp, hw::cqe_syndrome why) override { q_counts.req_error(qp, why); }
    std::uint64_t timestamp() override { return 0; }
    void transmit_frame(std::vector<std::byte>&, sim::wire::ip_checksums) override {}
    void count_resp_error(const sim::qp_object& qp, hw::cqe_syndrome why, bool cqe) override {
        q_counts.resp_error(qp, why, cqe);
    }

    static std::byte* alloc(std::size_t n) {
        void* p = std::aligned_alloc(4096, n);
        std::memset(p, 0, n);
        return static_cast<std::byte*>(p);
    }
    void reset() {
        fw->reset();
        engine->reset();
        bar->store32(0x10, 0);
        bar->store32(0x14, static_cast<std::uint32_t>(kCmdq));
        engine->poll();  // latch the queue address
    }

    // Posts one command (ilen/olen bytes) in a slot, with a correct chain unless told
    // otherwise, runs the device once, and returns the entry's last byte.
    std::uint8_t run(unsigned slot, const std::byte* in, std::size_t ilen, std::size_t olen,
                     std::uint8_t token, bool corrupt, bool ring) {
        std::byte* e = cmdq + slot * 64;
        std::memset(e, 0, 64);
        ifc::set<ifc::cmd_queue_entry::type>(e, 7);
        ifc::set<ifc::cmd_queue_entry::input_length>(e, static_cast<std::uint32_t>(ilen));
        ifc::set<ifc::cmd_queue_entry::output_length>(e, static_cast<std::uint32_t>(olen));
        ifc::set<ifc::cmd_queue_entry::token>(e, token);
        if (ilen) std::memcpy(ifc::at<ifc::cmd_queue_entry::command_input_inline_data>(e), in, std::min<std::size_t>(16, ilen));
        const std::size_t nin = ilen > 16 ? (ilen - 16 + 511) / 512 : 0;
        const std::size_t nout = olen > 16 ? (olen - 16 + 511) / 512 : 0;
        const std::size_t max_blocks = kMailBytes / 1024;
        auto chain = [&](std::size_t first, std::size_t n) -> std::uint64_t {
            for (std::size_t i = 0; i < n; ++i) {
                std::byte* b = mail + (first + i) * 1024;
                std::memset(b, 0, 576);
                const std::uint64_t next = i + 1 < n ? kMail + (first + i + 1) * 1024 : 0;
                ifc::set<ifc::cmd_if_box::next_pointer_63_32>(b, static_cast<std::uint32_t>(next >> 32));
                ifc::set<ifc::cmd_if_box::next_pointer_31_10>(b, static_cast<std::uint32_t>(next >> 10) & 0x3fffff);
                ifc::set<ifc::cmd_if_box::block_number>(b, static_cast<std::uint32_t>(i + (corrupt && i == n / 2)));
                ifc::set<ifc::cmd_if_box::token>(b, token);
            }
            return n ? kMail + first * 1024 : 0;
        };
        if (nin + nout <= max_blocks) {
            const std::uint64_t ih = chain(0, nin), oh = chain(nin, nout);
            for (std::size_t i = 0; i < nin; ++i) {
                const std::size_t off = 16 + i * 512;
                std::memcpy(mail + i * 1024, in + off, std::min<std::size_t>(512, ilen - off));
            }
            ifc::set<ifc::cmd_queue_entry::input_mailbox_pointer_63_32>(e, static_cast<std::uint32_t>(ih >> 32));
            ifc::set<ifc::cmd_queue_entry::input_mailbox_pointer_31_9>(e, static_cast<std::uint32_t>(ih >> 9) & 0x7fffff);
            ifc::set<ifc::cmd_queue_entry::output_mailbox_pointer_63_32>(e, static_cast<std::uint32_t>(oh >> 32));
            ifc::set<ifc::cmd_queue_entry::output_mailbox_pointer_31_9>(e, static_cast<std::uint32_t>(oh >> 9) & 0x7fffff);
        }
        ifc::set<ifc::cmd_queue_entry::ownership>(e, 1);
        if (ring) bar->store32(0x18, 1u << slot);
        engine->poll();
        return std::to_integer<std::uint8_t>(e[63]);
    }

    bool simple(std::uint16_t opcode, std::uint16_t op_mod, std::vector<std::byte> in = {}) {
        if (in.size() < 16) in.resize(16);
        ifc::set<ifc::cmd_in::opcode>(in.data(), opcode);
        ifc::set<ifc::cmd_in::op_mod>(in.data(), op_mod);
        run(0, in.data(), in.size(), 16, 0, false, true);
        return ifc::get<ifc::cmd_out::status>(ifc::at<ifc::cmd_queue_entry::command_output_inline_data>(cmdq)) == 0;
    }

    void bring_up() {
        simple(0x104, 0);  // ENABLE_HCA
        std::size_t given = 0;
        for (std::uint16_t mod : {1, 2}) {  // boot, init pages
            simple(0x107, mod);
            const std::uint32_t n = ifc::get<ifc::query_pages_out::num_pages>(
                ifc::at<ifc::cmd_queue_entry::command_output_inline_data>(cmdq));
            std::vector<std::byte> in(16 + 8 * n);
            ifc::set<ifc::manage_pages_in::input_num_entries>(in.data(), n);
            for (std::uint32_t i = 0; i < n && given < kPageBytes / 4096; ++i, ++given) {
                ifc::set<ifc::manage_pages_in::pas>(in.data(), i, kPages + given * 4096);
            }
            simple(0x108, 1, in);
        }
        simple(0x102, 0);  // INIT_HCA
    }
};

bool known_status(std::uint32_t s) {
    switch (static_cast<hw::cmd_status>(s)) {
#define CXV_CASE(name, value) case hw::cmd_status::name:
        CXV_CMD_STATUSES(CXV_CASE)
#undef CXV_CASE
        return true;
    }
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static rig r;
    if (size < 7) return 0;
    const unsigned slot = data[0] % 32;
    const std::uint8_t flags = data[1];
    std::size_t ilen = (data[2] | data[3] << 8);
    std::size_t olen = (data[4] | data[5] << 8);
    const std::uint8_t token = data[6];
    std::vector<std::byte> in(reinterpret_cast<const std::byte*>(data + 7),
                              reinterpret_cast<const std::byte*>(data + size));
    ilen = std::min(ilen, in.size());
    olen = std::min<std::size_t>(olen, 64 * 1024);

    if (++r.runs % 512 == 0) r.reset();
    if ((flags & 1) && r.fw->state() != sim::hca_state::initialized) r.bring_up();

    // Output canary: the device must not write past olen into the mailbox area.
    const std::uint8_t status_own = r.run(slot, in.data(), ilen, olen, token, flags & 2, !(flags & 4));
    if (flags & 4) {
        // No doorbell: the command must still be the driver's... until a doorbell comes.
        if ((status_own & 1) == 0) std::abort();
        r.bar->store32(0x18, 1u << slot);
        r.engine->poll();
    }
    const std::byte* e = r.cmdq + slot * 64;
    const std::uint8_t last = std::to_integer<std::uint8_t>(e[63]);
    if (last & 1) std::abort();  // ownership must come back
    const std::uint8_t delivery = last >> 1;
    bool delivery_known = false;
    switch (static_cast<hw::cmd_delivery_status>(delivery)) {
#define CXV_CASE(name, value) case hw::cmd_delivery_status::name:
        CXV_CMD_DELIVERY_STATUSES(CXV_CASE)
#undef CXV_CASE
        delivery_known = true;
    }
    if (!delivery_known) std::abort();
    if (delivery == 0 && olen >= 8) {
        const std::byte* out = ifc::at<ifc::cmd_queue_entry::command_output_inline_data>(e);
        const std::uint32_t status = ifc::get<ifc::cmd_out::status>(out);
        const std::uint32_t syndrome = ifc::get<ifc::cmd_out::syndrome>(out);
        if (!known_status(status)) std::abort();
        if ((status == 0) != (syndrome == 0)) std::abort();
    }
    return 0;
}
