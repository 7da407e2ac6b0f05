// What one client owns on one function, and the checks a forwarded PRM command passes
// before the daemon runs it: the kernel's DevX does the same bookkeeping (every object
// number, UAR index and address in a command must be the caller's). Nothing here talks
// to the device; server.cc runs the commands.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <vector>

#include "base/result.h"
#include "driver/vfio/vfio.h"

namespace cxv::daemon {

struct quotas {
    std::uint32_t qps = 1024;
    std::uint32_t cqs = 1024;
    std::uint32_t mrs = 4096;  // mkeys
    std::uint32_t pds = 256;
    std::uint32_t uars = 64;
    std::uint32_t srqs = 1024;
    std::uint64_t pinned_bytes = std::uint64_t{1} << 30;
    // MAP_MEMORY mappings over all functions, however small: each is a VMA in the daemon
    // (vm.max_map_count, 65,530 by default, is the whole daemon's), an IOMMU mapping and
    // an entry in its books, so bytes alone do not bound them (4 KiB pages, one by one).
    std::uint32_t mappings = 4096;
    // Page-list entries the firmware keeps for the objects on a function: a key's MTT, a
    // queue's PAS. Each costs firmware memory (ICM, in pages the daemon gives the card),
    // whatever memory it names, so pinned bytes do not bound them: one pinned page listed
    // 524,288 times is a 2 GiB key and 4 MiB of firmware memory. The default is four
    // times what the pinned-bytes quota takes to register once in 4 KiB pages.
    std::uint64_t translations = std::uint64_t{1} << 20;
};

// Client memory the daemon mapped from the client's fd and into the IOMMU.
struct mapping {
    void* addr = nullptr;  // the daemon's MAP_SHARED view
    std::uint64_t length = 0;
    bool device_writes = false;  // mapped writable for the device (MAP_MEMORY's flag)
    driver::vfio::dma_buffer dma;
    unsigned users = 0;  // the client's objects whose memory is here (unmap waits for 0)
    mapping() = default;
    mapping(mapping&&) noexcept;
    mapping& operator=(mapping&&) noexcept;
    ~mapping();  // DMA unmap, then munmap
};

struct owned {
    std::map<std::uint64_t, mapping> maps;  // by IOVA
    std::set<std::uint32_t> uars, pds, cqs, qps, srqs;
    std::map<std::uint32_t, std::uint32_t> mkeys;  // mkey index → PD
    std::map<std::uint32_t, std::uint32_t> cq_uar;  // CQ → its UAR
    struct qp_uses {
        std::uint32_t pd = 0, uar = 0;
        std::set<std::uint32_t> cqs;
        std::set<std::uint64_t> maps;
        std::uint32_t cqn_snd = 0, cqn_rcv = 0;  // the CQs by role (cqs is their set)
        std::uint32_t srq = 0;                   // the SRQ its receives come from (0: none)
    };
    std::map<std::uint32_t, qp_uses> qp_info;  // what each QP holds on to
    struct srq_uses {
        std::uint32_t pd = 0;
        std::set<std::uint64_t> maps;
    };
    std::map<std::uint32_t, srq_uses> srq_info;
    // The mappings (by IOVA) each CQ and mkey uses: unmapping memory an object still
    // uses would let the IOVA be reused for another client while the device writes it.
    std::map<std::uint32_t, std::set<std::uint64_t>> cq_maps, mkey_maps;
    std::uint64_t pinned = 0;
    // Page-list entries per object (translation_key) and in all (quotas::translations).
    std::map<std::uint64_t, std::uint64_t> translations_of;
    std::uint64_t translations = 0;
    // The mapping that holds all of [iova, iova + len), if one does.
    const std::uint64_t* holder(std::uint64_t iova, std::uint64_t len) const;
    bool holds(std::uint64_t iova, std::uint64_t len) const { return holder(iova, len) != nullptr; }
    // The same, for memory the device writes: only a mapping made with device_writes.
    const std::uint64_t* writable_holder(std::uint64_t iova, std::uint64_t len) const;
    bool empty() const {
        return maps.empty() && uars.empty() && pds.empty() && cqs.empty() && mkeys.empty() && qps.empty() &&
               srqs.empty();
    }
};

// What a command will do once the firmware has run it.
struct command_effect {
    enum class kind { none, create, destroy, modify } what = kind::none;
    enum class object { none, pd, cq, mkey, qp, srq } obj = object::none;
    std::uint32_t id = 0;   // destroy, modify: the object
    std::uint32_t pd = 0;   // create mkey, SRQ: its PD
    std::uint32_t srq = 0;  // create QP: its SRQ (0: none)
    std::size_t min_out = 16;  // bytes of output the daemon needs to read the new id
    std::uint32_t uar = 0;     // create CQ, QP: its UAR
    std::set<std::uint32_t> cqs;  // create QP: its CQs
    std::uint32_t cqn_snd = 0, cqn_rcv = 0;  // create QP: its CQs by role; modify QP: the new receive CQ
    bool new_cqn_rcv = false;                // modify QP: the transition moves the receive CQ (CQN_RCV)
    std::set<std::uint64_t> maps;  // create: the mappings the object uses
    std::uint64_t translations = 0;  // create key, CQ, QP, SRQ: the page-list entries the firmware keeps
};

// What a command's input declares it will make the firmware keep in page-list entries
// (CREATE_MKEY's MTT, a queue's PAS; 0 for others), read before the checks: counted
// against the trust domain's quota while the command is in flight.
std::uint64_t declared_translations(std::span<const std::byte> in);

struct device_facts {
    std::uint32_t comp_eqn = 0;  // the only EQ a client's CQ may report to
};

// Checks a command's input against the allow-list (PD, CQ, MKEY, SRQ and QP commands) and
// the client's objects and quotas.
// EPERM for an opcode not allowed or an object, UAR, EQ or address not the client's;
// EINVAL for fields this slice does not allow (UMEM, PA-mode keys, ...); EDQUOT over a
// quota; EBADMSG for an input shorter than its layout.
result<command_effect> check_command(std::span<const std::byte> in, std::uint32_t out_len, const owned& o,
                                     const device_facts& dev, const quotas& q);

// Records a command's effect once it succeeded (the new object's number from `out`).
void apply(const command_effect& e, std::span<const std::byte> out, owned& o);

// The destroy commands for everything a client still owns, in dependency order (QPs,
// SRQs, CQs, mkeys, PDs), each with the object and the mappings it uses (kept, not
// unmapped, when its destroy fails: the device may still write there); UARs and memory
// are the caller's to release after.
struct teardown_step {
    std::vector<std::byte> in;
    command_effect::object obj = command_effect::object::none;
    std::uint32_t id = 0;
    std::set<std::uint64_t> maps;
};
std::vector<teardown_step> teardown_commands(const owned& o);
// The commands that move a QP out of the way when DESTROY_QP failed: 2RST, then 2ERR.
std::vector<std::vector<std::byte>> qp_reset_commands(std::uint32_t qpn);

}  // namespace cxv::daemon
