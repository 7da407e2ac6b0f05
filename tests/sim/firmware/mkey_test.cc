// Memory keys and UMEMs: creation checks, reference counting, QUERY_MKEY, and the
// translation through a key that the transport engine will apply.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "sim/transport/mkey_translate.h"
#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;
using sim::translate_status;

namespace {

constexpr std::uint8_t kVariant = 0x5a;  // mkey_7_0 of every key these tests create
constexpr std::uint64_t kPresent = 0x3;  // MTT rd_en | wr_en

std::byte* mkc_of(std::vector<std::byte>& in) {
    return ifc::at<ifc::create_mkey_in::memory_key_mkey_entry>(in.data());
}

// A CREATE_MKEY input shaped as rdma-core's VFIO provider sends it (facts §6.1): an MTT
// key with pg_access, entries `iova | 3`, the list padded to whole octwords, lr/lw/rr/rw.
std::vector<std::byte> mkey_in(std::uint32_t pd, std::uint64_t start, std::uint64_t len, unsigned log_page,
                               const std::vector<std::uint64_t>& mtt) {
    const std::size_t octwords = (mtt.size() + 1) / 2;
    auto in = H::input<ifc::create_mkey_in>(cmd_opcode::CREATE_MKEY, 0, octwords * 16);
    ifc::set<ifc::create_mkey_in::pg_access>(in.data(), 1);
    ifc::set<ifc::create_mkey_in::translations_octword_actual_size>(in.data(),
                                                                   static_cast<std::uint32_t>(octwords));
    std::byte* m = mkc_of(in);
    ifc::set<ifc::mkc::access_mode_1_0>(m, 1);
    ifc::set<ifc::mkc::lr>(m, 1);
    ifc::set<ifc::mkc::lw>(m, 1);
    ifc::set<ifc::mkc::rr>(m, 1);
    ifc::set<ifc::mkc::rw>(m, 1);
    ifc::set<ifc::mkc::qpn>(m, 0xffffff);
    ifc::set<ifc::mkc::mkey_7_0>(m, kVariant);
    ifc::set<ifc::mkc::pd>(m, pd);
    ifc::set<ifc::mkc::start_addr>(m, start);
    ifc::set<ifc::mkc::len>(m, len);
    ifc::set<ifc::mkc::log_page_size>(m, log_page);
    ifc::set<ifc::mkc::translations_octword_size>(m, static_cast<std::uint32_t>(octwords));
    for (std::size_t i = 0; i < mtt.size(); ++i) {
        ifc::set<ifc::create_mkey_in::klm_pas_mtt>(in.data(), 2 * i, static_cast<std::uint32_t>(mtt[i] >> 32));
        ifc::set<ifc::create_mkey_in::klm_pas_mtt>(in.data(), 2 * i + 1, static_cast<std::uint32_t>(mtt[i]));
    }
    return in;
}

std::uint32_t index_of(const test::cmd_result& r) {
    return ifc::get<ifc::create_mkey_out::mkey_index>(r.out.data());
}

// The output holds `entries` MTT entries (at least the layout's four).
test::cmd_result query_mkey(H& h, std::uint32_t index, std::size_t entries = 4) {
    return h.exec(named_input<ifc::query_mkey_in, ifc::query_mkey_in::mkey_index>(cmd_opcode::QUERY_MKEY, index),
                  ifc::query_mkey_out::size_bytes - 32 + std::max<std::size_t>(entries, 4) * 8);
}

std::uint64_t queried_mtt(const test::cmd_result& r, std::size_t i) {
    std::uint64_t be;
    std::memcpy(&be, r.out.data() + ifc::query_mkey_out::bsf0_klm0_pas_mtt0_1::bit_offset / 8 + i * 8, 8);
    return hw::from_be(be);
}

// DESTROY_UMEM as rdma-core sends it: sized as create_umem_in, 48 bytes.
test::cmd_result destroy_umem_48(H& h, std::uint32_t id, std::uint16_t uid = 0) {
    return destroy_umem(h, id, uid, ifc::create_umem_in::size_bytes);
}

// A firmware page where the next object's context goes: every page no object uses is
// taken back (MANAGE_PAGES take), and the lowest of them given again.
std::uint64_t first_icm_page(H& h) {
    constexpr std::uint32_t kAll = 4096;
    auto take = H::input<ifc::manage_pages_in>(cmd_opcode::MANAGE_PAGES, 2);
    ifc::set<ifc::manage_pages_in::input_num_entries>(take.data(), kAll);
    auto r = h.exec(take, ifc::manage_pages_out::size_bytes + kAll * 8, {.slot = 31});
    REQUIRE(r.status == cmd_status::OK);
    const std::uint32_t n = ifc::get<ifc::manage_pages_out::output_num_entries>(r.out.data());
    REQUIRE(n > 0);
    std::uint64_t page = ~std::uint64_t{0};
    for (std::uint32_t i = 0; i < n; ++i) page = std::min(page, ifc::get<ifc::manage_pages_out::pas>(r.out.data(), i));
    auto give = H::input<ifc::manage_pages_in>(cmd_opcode::MANAGE_PAGES, 1, 8);
    ifc::set<ifc::manage_pages_in::input_num_entries>(give.data(), 1);
    ifc::set<ifc::manage_pages_in::pas>(give.data(), 0, page);
    REQUIRE(h.exec(give, 16, {.slot = 31}).status == cmd_status::OK);
    return page;
}

// The model's view of a created key, rebuilt from QUERY_MKEY (what the firmware stored).
sim::mkey_object queried_key(H& h, std::uint32_t index, std::size_t entries) {
    auto q = query_mkey(h, index, entries);
    REQUIRE(q.status == cmd_status::OK);
    sim::mkey_object mk;
    mk.index = index;
    std::memcpy(mk.mkc.data(), ifc::at<ifc::query_mkey_out::memory_key_mkey_entry>(q.out.data()),
                ifc::mkc::size_bytes);
    for (std::size_t i = 0; i < entries; ++i) mk.translations.push_back(queried_mtt(q, i));
    mk.pg_access = true;
    return mk;
}

}  // namespace

// --- CREATE_MKEY / QUERY_MKEY / DESTROY_MKEY ---------------------------------------

TEST_CASE("CREATE_MKEY: an MTT key as rdma-core registers it; QUERY_MKEY reads it back") {
    booted b;
    auto& buf = b.h.alloc(3 * 4096);
    // 8 KiB starting 0x100 into the first page: three pages, padded to two octwords.
    const std::uint64_t va = 0x7f0000001100;
    const std::vector<std::uint64_t> mtt{buf.iova() | kPresent, (buf.iova() + 4096) | kPresent,
                                         (buf.iova() + 8192) | kPresent};
    auto r = b.h.exec(mkey_in(b.pd, va, 8192, 12, mtt), 16);
    REQUIRE(r.status == cmd_status::OK);
    const std::uint32_t index = index_of(r);
    CHECK(index != 0);
    CHECK(index <= 0xffffff);
    auto r2 = b.h.exec(mkey_in(b.pd, va, 8192, 12, mtt), 16);
    REQUIRE(r2.status == cmd_status::OK);
    CHECK(index_of(r2) != index);

    auto q = query_mkey(b.h, index, 4);
    REQUIRE(q.status == cmd_status::OK);
    const std::byte* m = ifc::at<ifc::query_mkey_out::memory_key_mkey_entry>(q.out.data());
    CHECK(ifc::get<ifc::mkc::access_mode_1_0>(m) == 1);
    CHECK(ifc::get<ifc::mkc::mkey_7_0>(m) == kVariant);
    CHECK(ifc::get<ifc::mkc::pd>(m) == b.pd);
    CHECK(ifc::get<ifc::mkc::start_addr>(m) == va);
    CHECK(ifc::get<ifc::mkc::len>(m) == 8192);
    CHECK(ifc::get<ifc::mkc::log_page_size>(m) == 12);
    CHECK(ifc::get<ifc::mkc::rw>(m) == 1);
    CHECK(ifc::get<ifc::mkc::a>(m) == 0);
    CHECK(ifc::get<ifc::mkc::free>(m) == 0);
    for (std::size_t i = 0; i < 3; ++i) CHECK(queried_mtt(q, i) == mtt[i]);
    CHECK(queried_mtt(q, 3) == 0);  // the padding entry

    // The PD is in use until both keys are gone.
    CHECK(dealloc_pd(b.h, b.pd).status == cmd_status::RESOURCE_BUSY);
    REQUIRE(destroy_mkey(b.h, index).status == cmd_status::OK);
    CHECK(dealloc_pd(b.h, b.pd).status == cmd_status::RESOURCE_BUSY);
    REQUIRE(destroy_mkey(b.h, index_of(r2)).status == cmd_status::OK);
    CHECK(dealloc_pd(b.h, b.pd).status == cmd_status::OK);
}

TEST_CASE("QUERY_MKEY returns as many MTT entries as its output holds") {
    booted b;
    std::vector<std::uint64_t> mtt;
    for (std::uint64_t i = 0; i < 10; ++i) mtt.push_back((0x40000000 + i * 0x10000) | kPresent);
    auto r = b.h.exec(mkey_in(b.pd, 0x10000, 10 * 0x10000, 16, mtt), 16);
    REQUIRE(r.status == cmd_status::OK);
    auto q = query_mkey(b.h, index_of(r), 10);
    REQUIRE(q.status == cmd_status::OK);
    for (std::size_t i = 0; i < 10; ++i) CHECK(queried_mtt(q, i) == mtt[i]);
    auto q2 = query_mkey(b.h, index_of(r), 4);  // the layout's four
    REQUIRE(q2.status == cmd_status::OK);
    CHECK(q2.out.size() == ifc::query_mkey_out::size_bytes);
    CHECK(queried_mtt(q2, 3) == mtt[3]);
    CHECK(query_mkey(b.h, index_of(r) + 1).synd() == cmd_syndrome::UNKNOWN_RESOURCE);
}

TEST_CASE("CREATE_MKEY refuses access modes other than MTT, and PA outside uid 0") {
    booted b;
    for (unsigned mode : {2u, 3u}) {  // KLM and KSM: not modelled yet
        auto in = mkey_in(b.pd, 0x1000, 4096, 12, {0x200000 | kPresent});
        ifc::set<ifc::mkc::access_mode_1_0>(mkc_of(in), mode);
        check_status(b.h.exec(in, 16), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    }
    auto icm = mkey_in(b.pd, 0x1000, 4096, 12, {0x200000 | kPresent});
    ifc::set<ifc::mkc::access_mode_4_2>(mkc_of(icm), 1);  // SW ICM
    check_status(b.h.exec(icm, 16), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);

    // PA, 2^64 bytes: the function's own driver (uid 0) may; a DevX user may not.
    auto pa = H::input<ifc::create_mkey_in>(cmd_opcode::CREATE_MKEY);
    ifc::set<ifc::mkc::lr>(mkc_of(pa), 1);
    ifc::set<ifc::mkc::length64>(mkc_of(pa), 1);
    ifc::set<ifc::mkc::qpn>(mkc_of(pa), 0xffffff);
    ifc::set<ifc::mkc::pd>(mkc_of(pa), b.pd);
    auto r = b.h.exec(pa, 16);
    REQUIRE(r.status == cmd_status::OK);
    CHECK(destroy_mkey(b.h, index_of(r)).status == cmd_status::OK);
    const std::uint32_t user_pd = alloc_pd(b.h, 7);
    ifc::set<ifc::create_mkey_in::uid>(pa.data(), 7);
    ifc::set<ifc::mkc::pd>(mkc_of(pa), user_pd);
    check_status(b.h.exec(pa, 16), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    // length64 needs len 0, and only a PA key covers 2^64 bytes.
    auto l64 = mkey_in(b.pd, 0, 4096, 12, {0x200000 | kPresent});
    ifc::set<ifc::mkc::length64>(mkc_of(l64), 1);
    check_status(b.h.exec(l64, 16), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
}

TEST_CASE("CREATE_MKEY checks the protection domain") {
    booted b;
    check_status(b.h.exec(mkey_in(b.pd + 100, 0x1000, 4096, 12, {0x200000 | kPresent}), 16), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PD);
    // A PD of another user.
    const std::uint32_t other = alloc_pd(b.h, 3);
    check_status(b.h.exec(mkey_in(other, 0x1000, 4096, 12, {0x200000 | kPresent}), 16), cmd_status::BAD_RESOURCE,
                 cmd_syndrome::FOREIGN_RESOURCE);
    CHECK(dealloc_pd(b.h, b.pd).status == cmd_status::OK);  // nothing took a reference
}

TEST_CASE("CREATE_MKEY checks the page size and the MTT entries' alignment") {
    booted b;
    check_status(b.h.exec(mkey_in(b.pd, 0x1000, 2048, 11, {0x200000 | kPresent}), 16), cmd_status::BAD_PARAM,
                 cmd_syndrome::LOG_SIZE_TOO_SMALL);
    // 64 KiB pages: every entry on a 64 KiB boundary (its low bits are only the enables).
    check_status(b.h.exec(mkey_in(b.pd, 0x10000, 0x20000, 16, {0x200000 | kPresent, 0x211000 | kPresent}), 16),
                 cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    check_status(b.h.exec(mkey_in(b.pd, 0x1000, 4096, 12, {0x200000 | 0x4 | kPresent}), 16), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_ALIGNMENT);
    CHECK(b.h.exec(mkey_in(b.pd, 0x10000, 0x20000, 16, {0x200000 | kPresent, 0x220000 | kPresent}), 16).status ==
          cmd_status::OK);
}

TEST_CASE("CREATE_MKEY: the translations must cover the range and be in the command") {
    booted b;
    // 4 KiB at offset 0x800 spans two pages: one octword of two entries is needed.
    const std::vector<std::uint64_t> two{0x200000 | kPresent, 0x300000 | kPresent};
    CHECK(b.h.exec(mkey_in(b.pd, 0x800, 4096, 12, two), 16).status == cmd_status::OK);
    // Three pages need two octwords: a table of one is too small.
    check_status(b.h.exec(mkey_in(b.pd, 0x800, 8192, 12, two), 16), cmd_status::BAD_PARAM, cmd_syndrome::PAS_TOO_SHORT);
    // A table big enough, but fewer entries given than the range needs.
    auto partial = mkey_in(b.pd, 0x800, 8192, 12, two);
    ifc::set<ifc::mkc::translations_octword_size>(mkc_of(partial), 2);
    check_status(b.h.exec(partial, 16), cmd_status::BAD_PARAM, cmd_syndrome::PAS_TOO_SHORT);
    // More entries announced than the table holds.
    auto over = mkey_in(b.pd, 0x800, 4096, 12, two);
    ifc::set<ifc::create_mkey_in::translations_octword_actual_size>(over.data(), 2);
    check_status(b.h.exec(over, 16), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    // Announced, but the command ends before the entries.
    auto cut = mkey_in(b.pd, 0x800, 8192, 12, two);
    ifc::set<ifc::mkc::translations_octword_size>(mkc_of(cut), 2);
    ifc::set<ifc::create_mkey_in::translations_octword_actual_size>(cut.data(), 2);
    check_status(b.h.exec(cut, 16), cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);
}

TEST_CASE("CREATE_MKEY in the free state needs no translations yet") {
    booted b;
    // As Linux creates its cache keys: free, a table of 8 octwords, none given.
    auto in = mkey_in(b.pd, 0, 16 * 4096, 12, {});
    ifc::set<ifc::mkc::free>(mkc_of(in), 1);
    ifc::set<ifc::mkc::umr_en>(mkc_of(in), 1);
    ifc::set<ifc::mkc::translations_octword_size>(mkc_of(in), 8);
    auto r = b.h.exec(in, 16);
    REQUIRE(r.status == cmd_status::OK);
    auto q = query_mkey(b.h, index_of(r));
    CHECK(ifc::get<ifc::mkc::free>(ifc::at<ifc::query_mkey_out::memory_key_mkey_entry>(q.out.data())) == 1);
    // The table must still cover the range.
    ifc::set<ifc::mkc::translations_octword_size>(mkc_of(in), 7);
    check_status(b.h.exec(in, 16), cmd_status::BAD_PARAM, cmd_syndrome::PAS_TOO_SHORT);
}

TEST_CASE("CREATE_MKEY refuses what the device does not offer or the PRM does not allow") {
    booted b;
    auto fails = [&](auto&& tweak) {
        auto in = mkey_in(b.pd, 0x1000, 4096, 12, {0x200000 | kPresent});
        tweak(in);
        check_status(b.h.exec(in, 16), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    };
    fails([](auto& in) { ifc::set<ifc::mkc::qpn>(mkc_of(in), 5); });          // bound to a QP
    fails([](auto& in) { ifc::set<ifc::mkc::bsf_en>(mkc_of(in), 1); });       // signature
    fails([](auto& in) { ifc::set<ifc::mkc::bsf_octword_size>(mkc_of(in), 4); });
    fails([](auto& in) { ifc::set<ifc::mkc::ma_translation_mode>(mkc_of(in), 1); });  // ATS
    fails([](auto& in) { ifc::set<ifc::mkc::relaxed_ordering_write>(mkc_of(in), 1); });
    fails([](auto& in) { ifc::set<ifc::mkc::relaxed_ordering_read>(mkc_of(in), 1); });
    // The range may not run past the top of the address space.
    fails([](auto& in) { ifc::set<ifc::mkc::start_addr>(mkc_of(in), ~std::uint64_t{0} - 0x7ff); });
}

TEST_CASE("DESTROY_MKEY: unknown and foreign keys") {
    booted b;
    auto r = b.h.exec(mkey_in(b.pd, 0x1000, 4096, 12, {0x200000 | kPresent}), 16);
    REQUIRE(r.status == cmd_status::OK);
    auto foreign = destroy_mkey(b.h, index_of(r), 9);
    CHECK(foreign.status == cmd_status::BAD_RESOURCE);
    CHECK(foreign.synd() == cmd_syndrome::FOREIGN_RESOURCE);
    CHECK(destroy_mkey(b.h, index_of(r)).status == cmd_status::OK);
    auto gone = destroy_mkey(b.h, index_of(r));
    CHECK(gone.status == cmd_status::BAD_RESOURCE);
    CHECK(gone.synd() == cmd_syndrome::UNKNOWN_RESOURCE);
    CHECK(query_mkey(b.h, index_of(r)).synd() == cmd_syndrome::UNKNOWN_RESOURCE);
}

TEST_CASE("MKEY contexts live in firmware pages: a fault there fails the command, changing nothing") {
    booted b;
    const std::uint64_t page = first_icm_page(b.h);
    b.h.dev().mmu().inject_fault(page, 4096);
    const auto faults = b.h.dev().mmu().fault_count();
    auto in = mkey_in(b.pd, 0x1000, 4096, 12, {0x200000 | kPresent});
    check_status(b.h.exec(in, 16), cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    CHECK(b.h.dev().mmu().fault_count() > faults);
    CHECK(dealloc_pd(b.h, b.pd).status == cmd_status::OK);  // no reference was taken

    const auto pd = alloc_pd(b.h);
    auto r = b.h.exec(mkey_in(pd, 0x1000, 4096, 12, {0x200000 | kPresent}), 16);
    REQUIRE(r.status == cmd_status::OK);  // its context is where the failed one's was
    b.h.dev().mmu().inject_fault(page, 4096);
    auto q = query_mkey(b.h, index_of(r));
    CHECK(q.status == cmd_status::INTERNAL_ERR);
    CHECK(q.synd() == cmd_syndrome::IOMMU_FAULT);
}

// --- CREATE_UMEM / DESTROY_UMEM ----------------------------------------------------

TEST_CASE("CREATE_UMEM as rdma-core sends it; DESTROY_UMEM with its 48-byte input") {
    booted b;
    auto& buf = b.h.alloc(4096);
    // An 8-byte doorbell record 0x2b0 into its page: one read/write entry.
    auto r = b.h.exec(create_umem_in(0, 0x2b0, {buf.iova() | kPresent}), 16);
    REQUIRE(r.status == cmd_status::OK);
    const std::uint32_t id = umem_id_of(r);
    CHECK(id != 0);
    // 16 KiB at a page boundary: log_page_size 2, one entry, read only.
    auto& big = b.h.alloc(16384);
    auto r2 = b.h.exec(create_umem_in(2, 0, {big.iova() | 0x1}), 16);
    REQUIRE(r2.status == cmd_status::OK);
    CHECK(umem_id_of(r2) != id);
    CHECK(destroy_umem_48(b.h, id).status == cmd_status::OK);
    CHECK(destroy_umem_48(b.h, umem_id_of(r2)).status == cmd_status::OK);
}

TEST_CASE("CREATE_UMEM checks its page offset, entry count, list and alignment") {
    booted b;
    check_status(b.h.exec(create_umem_in(0, 4096, {0x200000 | kPresent}), 16), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PARAMETER);
    check_status(b.h.exec(create_umem_in(0, 0, {}), 16), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PARAMETER);  // no pages
    auto cut = create_umem_in(0, 0, {0x200000 | kPresent});
    ifc::set<ifc::umem::num_of_mtt>(ifc::at<ifc::create_umem_in::umem>(cut.data()), 2);
    check_status(b.h.exec(cut, 16), cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);
    // 8 KiB pages need 8 KiB aligned entries.
    check_status(b.h.exec(create_umem_in(1, 0, {0x201000 | kPresent}), 16), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_ALIGNMENT);
    // No ATS on this device.
    auto ats = create_umem_in(0, 0, {0x200000 | kPresent});
    ifc::set<ifc::umem::ats>(ifc::at<ifc::create_umem_in::umem>(ats.data()), 1);
    check_status(b.h.exec(ats, 16), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    CHECK(b.h.exec(create_umem_in(1, 0x1ff8, {0x202000 | kPresent}), 16).status == cmd_status::OK);
}

TEST_CASE("DESTROY_UMEM: unknown, foreign and in-use UMEMs are refused") {
    booted b;
    auto r = b.h.exec(create_umem_in(0, 0, {0x200000 | kPresent}, 4), 16);
    REQUIRE(r.status == cmd_status::OK);
    const std::uint32_t id = umem_id_of(r);
    CHECK(destroy_umem_48(b.h, id + 1, 4).synd() == cmd_syndrome::UNKNOWN_RESOURCE);
    auto foreign = destroy_umem_48(b.h, id, 0);
    CHECK(foreign.status == cmd_status::BAD_RESOURCE);
    CHECK(foreign.synd() == cmd_syndrome::FOREIGN_RESOURCE);

    // A key of the same user over the UMEM holds it.
    const std::uint32_t pd = alloc_pd(b.h, 4);
    auto in = mkey_in(pd, 0x1000, 4096, 0, {});
    ifc::set<ifc::create_mkey_in::uid>(in.data(), 4);
    ifc::set<ifc::create_mkey_in::mkey_umem_valid>(in.data(), 1);
    ifc::set<ifc::create_mkey_in::mkey_umem_id>(in.data(), id);
    auto k = b.h.exec(in, 16);
    REQUIRE(k.status == cmd_status::OK);
    auto busy = destroy_umem_48(b.h, id, 4);
    CHECK(busy.status == cmd_status::RESOURCE_BUSY);
    CHECK(busy.synd() == cmd_syndrome::RESOURCE_IN_USE);
    REQUIRE(destroy_mkey(b.h, index_of(k), 4).status == cmd_status::OK);
    CHECK(destroy_umem_48(b.h, id, 4).status == cmd_status::OK);
}

TEST_CASE("CREATE_MKEY over a UMEM: the UMEM must exist, be the user's and hold the range") {
    booted b;
    // Two 4 KiB pages, the buffer 0x100 into the first: 8192 - 0x100 bytes.
    auto r = b.h.exec(create_umem_in(0, 0x100, {0x200000 | kPresent, 0x300000 | kPresent}), 16);
    REQUIRE(r.status == cmd_status::OK);
    const std::uint32_t id = umem_id_of(r);
    auto over = [&](std::uint32_t umem, std::uint64_t offset, std::uint64_t len) {
        auto in = mkey_in(b.pd, 0x7000, len, 0, {});
        ifc::set<ifc::create_mkey_in::mkey_umem_valid>(in.data(), 1);
        ifc::set<ifc::create_mkey_in::mkey_umem_id>(in.data(), umem);
        ifc::set<ifc::create_mkey_in::mkey_umem_offset>(in.data(), offset);
        ifc::set<ifc::create_mkey_in::translations_octword_actual_size>(in.data(), 1);  // as UCX sends it
        return in;
    };
    check_status(b.h.exec(over(id + 1, 0, 64), 16), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(b.h.exec(over(id, 0x100, 8192 - 0x1ff), 16), cmd_status::BAD_PARAM, cmd_syndrome::PAS_TOO_SHORT);
    check_status(b.h.exec(over(id, 8192, 0), 16), cmd_status::BAD_PARAM, cmd_syndrome::PAS_TOO_SHORT);
    auto ok = b.h.exec(over(id, 0x100, 8192 - 0x200), 16);
    REQUIRE(ok.status == cmd_status::OK);
    // Another user's UMEM.
    auto u7 = b.h.exec(create_umem_in(0, 0, {0x400000 | kPresent}, 7), 16);
    REQUIRE(u7.status == cmd_status::OK);
    check_status(b.h.exec(over(umem_id_of(u7), 0, 64), 16), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
}

TEST_CASE("UMEM contexts live in firmware pages: a fault there fails CREATE_UMEM") {
    booted b;
    b.h.dev().mmu().inject_fault(first_icm_page(b.h), 4096);
    check_status(b.h.exec(create_umem_in(0, 0, {0x200000 | kPresent}), 16), cmd_status::INTERNAL_ERR,
                 cmd_syndrome::IOMMU_FAULT);
    auto r = b.h.exec(create_umem_in(0, 0, {0x200000 | kPresent}), 16);
    REQUIRE(r.status == cmd_status::OK);
    CHECK(umem_id_of(r) != 0);
}

// --- translation through a created key ---------------------------------------------

TEST_CASE("translate: an MTT key maps addresses page by page, with its checks") {
    booted b;
    // Three 4 KiB pages, deliberately not contiguous in IOVA; the middle one read-only.
    const std::uint64_t va = 0x7f0000001100;
    const std::vector<std::uint64_t> mtt{0x500000 | kPresent, 0x800000 | 0x1, 0x801000 | kPresent};
    auto in = mkey_in(b.pd, va, 8192, 12, mtt);
    auto r = b.h.exec(in, 16);
    REQUIRE(r.status == cmd_status::OK);
    const std::uint32_t key = (index_of(r) << 8) | kVariant;
    const sim::mkey_object mk = queried_key(b.h, index_of(r), 4);
    std::vector<sim::iova_range> out;

    // Within the first page.
    REQUIRE(sim::translate(mk, nullptr, key, b.pd, va, 16, sim::access_local_read, out) == translate_status::ok);
    CHECK(out == std::vector<sim::iova_range>{{0x500100, 16}});
    // Across all three pages: the second and third are contiguous and merge.
    REQUIRE(sim::translate(mk, nullptr, key, b.pd, va + 0x100, 8192 - 0x100, sim::access_remote_read, out) ==
            translate_status::ok);
    CHECK(out == std::vector<sim::iova_range>{{0x500200, 0xe00}, {0x800000, 0x1100}});
    // Zero bytes at the end are fine; one more is not.
    CHECK(sim::translate(mk, nullptr, key, b.pd, va + 8192, 0, sim::access_local_read, out) ==
          translate_status::ok);
    CHECK(out.empty());
    CHECK(sim::translate(mk, nullptr, key, b.pd, va + 8191, 2, sim::access_local_read, out) ==
          translate_status::out_of_bounds);
    CHECK(out.empty());
    CHECK(sim::translate(mk, nullptr, key, b.pd, va - 1, 1, sim::access_local_read, out) ==
          translate_status::out_of_bounds);
    // The key's variant byte, its PD, its rights (no atomics) and the page enables.
    CHECK(sim::translate(mk, nullptr, key ^ 1, b.pd, va, 1, sim::access_local_read, out) ==
          translate_status::key_mismatch);
    CHECK(sim::translate(mk, nullptr, key, b.pd + 1, va, 1, sim::access_local_read, out) ==
          translate_status::pd_mismatch);
    CHECK(sim::translate(mk, nullptr, key, b.pd, va, 8, sim::access_remote_atomic, out) ==
          translate_status::access_denied);
    CHECK(sim::translate(mk, nullptr, key, b.pd, va + 0xf00, 0x200, sim::access_remote_write, out) ==
          translate_status::page_fault);
    CHECK(sim::translate(mk, nullptr, key, b.pd, va + 0xf00, 0x200, sim::access_remote_read, out) ==
          translate_status::ok);
    // Without pg_access the enables are not consulted.
    sim::mkey_object plain = mk;
    plain.pg_access = false;
    CHECK(sim::translate(plain, nullptr, key, b.pd, va + 0xf00, 0x200, sim::access_remote_write, out) ==
          translate_status::ok);
}

TEST_CASE("translate: local-only keys, large pages, free keys and PA keys") {
    booted b;
    // No remote rights: lr/lw only. 2 MiB pages, the key 0x1234 into its page.
    auto in = mkey_in(b.pd, 0x40001234, 0x300000, 21, {0x10000000 | kPresent, 0x10200000 | kPresent});
    ifc::set<ifc::mkc::rr>(mkc_of(in), 0);
    ifc::set<ifc::mkc::rw>(mkc_of(in), 0);
    auto r = b.h.exec(in, 16);
    REQUIRE(r.status == cmd_status::OK);
    const std::uint32_t key = (index_of(r) << 8) | kVariant;
    const sim::mkey_object mk = queried_key(b.h, index_of(r), 2);
    std::vector<sim::iova_range> out;
    REQUIRE(sim::translate(mk, nullptr, key, b.pd, 0x40001234, 0x300000, sim::access_local_write, out) ==
            translate_status::ok);
    CHECK(out == std::vector<sim::iova_range>{{0x10001234, 0x300000}});
    CHECK(sim::translate(mk, nullptr, key, b.pd, 0x40001234, 8, sim::access_remote_read, out) ==
          translate_status::access_denied);

    auto fr = mkey_in(b.pd, 0, 4096, 12, {});
    ifc::set<ifc::mkc::free>(mkc_of(fr), 1);
    ifc::set<ifc::mkc::translations_octword_size>(mkc_of(fr), 1);
    auto f = b.h.exec(fr, 16);
    REQUIRE(f.status == cmd_status::OK);
    CHECK(sim::translate(queried_key(b.h, index_of(f), 0), nullptr, (index_of(f) << 8) | kVariant, b.pd, 0, 1,
                         sim::access_local_read, out) == translate_status::free_key);

    auto pa = H::input<ifc::create_mkey_in>(cmd_opcode::CREATE_MKEY);
    ifc::set<ifc::mkc::lr>(mkc_of(pa), 1);
    ifc::set<ifc::mkc::lw>(mkc_of(pa), 1);
    ifc::set<ifc::mkc::length64>(mkc_of(pa), 1);
    ifc::set<ifc::mkc::qpn>(mkc_of(pa), 0xffffff);
    ifc::set<ifc::mkc::mkey_7_0>(mkc_of(pa), kVariant);
    ifc::set<ifc::mkc::pd>(mkc_of(pa), b.pd);
    auto p = b.h.exec(pa, 16);
    REQUIRE(p.status == cmd_status::OK);
    const sim::mkey_object pk = queried_key(b.h, index_of(p), 0);
    const std::uint32_t pkey = (index_of(p) << 8) | kVariant;
    REQUIRE(sim::translate(pk, nullptr, pkey, b.pd, 0x123456789, 64, sim::access_local_write, out) ==
            translate_status::ok);
    CHECK(out == std::vector<sim::iova_range>{{0x123456789, 64}});
    CHECK(sim::translate(pk, nullptr, pkey, b.pd, ~std::uint64_t{0} - 3, 8, sim::access_local_read, out) ==
          translate_status::out_of_bounds);
}

TEST_CASE("translate: a key over a UMEM goes through the UMEM's pages and enables") {
    booted b;
    // The UMEM: 8 KiB pages (log_page_size 1), the buffer 0x2b0 into the first page;
    // the second page read-only.
    const std::vector<std::uint64_t> mtt{0x600000 | kPresent, 0x900000 | 0x1};
    auto u = b.h.exec(create_umem_in(1, 0x2b0, mtt), 16);
    REQUIRE(u.status == cmd_status::OK);
    auto in = mkey_in(b.pd, 0x10000, 0x2000, 0, {});
    ifc::set<ifc::create_mkey_in::mkey_umem_valid>(in.data(), 1);
    ifc::set<ifc::create_mkey_in::mkey_umem_id>(in.data(), umem_id_of(u));
    ifc::set<ifc::create_mkey_in::mkey_umem_offset>(in.data(), 0x1000);
    auto r = b.h.exec(in, 16);
    REQUIRE(r.status == cmd_status::OK);

    sim::mkey_object mk = queried_key(b.h, index_of(r), 0);
    mk.umem_id = umem_id_of(u);
    mk.umem_offset = 0x1000;
    sim::umem_object um;
    um.id = umem_id_of(u);
    um.log_page_size = 1;
    um.page_offset = 0x2b0;
    um.mtt = mtt;
    const std::uint32_t key = (index_of(r) << 8) | kVariant;
    std::vector<sim::iova_range> out;
    // Key byte 0 is UMEM byte 0x1000, i.e. 0x12b0 into the first 8 KiB page.
    REQUIRE(sim::translate(mk, &um, key, b.pd, 0x10000, 0x2000, sim::access_local_read, out) ==
            translate_status::ok);
    CHECK(out == std::vector<sim::iova_range>{{0x6012b0, 0xd50}, {0x900000, 0x12b0}});
    CHECK(sim::translate(mk, &um, key, b.pd, 0x10000, 0x100, sim::access_local_write, out) ==
          translate_status::ok);
    CHECK(sim::translate(mk, &um, key, b.pd, 0x10000, 0x2000, sim::access_local_write, out) ==
          translate_status::page_fault);
    CHECK(sim::translate(mk, nullptr, key, b.pd, 0x10000, 1, sim::access_local_read, out) ==
          translate_status::page_fault);
}

// --- firmware pages going back ------------------------------------------------------

TEST_CASE("pages no object uses go back: a negative PAGE_REQUEST once two batches are spare, one at a time, "
          "never below the boot and init pages") {
    constexpr std::uint64_t kPageRequestBit = 1ull << 0x0b;
    eq_env env(6, kPageRequestBit);
    auto& [h, uar, e] = env;
    const auto pdr = h.simple(cmd_opcode::ALLOC_PD);
    REQUIRE(pdr.status == cmd_status::OK);
    const std::uint32_t pd = ifc::get<ifc::alloc_pd_out::pd>(pdr.out.data());
    // 128 pages past boot (16) and init (64), as answers to page requests are.
    REQUIRE(h.manage_pages(1, 128).status == cmd_status::OK);
    const std::size_t owned = h.dev().pages_owned();
    REQUIRE(owned == 16 + 64 + 128);
    // A key whose MTT (32,768 entries of one page: 16 slots of 32 a page) takes 64 pages.
    auto& buf = h.alloc(4096);
    const std::vector<std::uint64_t> mtt(32768, buf.iova() | kPresent);
    auto r = h.exec(mkey_in(pd, 0, mtt.size() * 4096, 12, mtt), 16);
    REQUIRE(r.status == cmd_status::OK);
    CHECK_FALSE(h.wait_eqe(e, std::chrono::milliseconds(100)));  // taking pages asks nothing back
    REQUIRE(destroy_mkey(h, index_of(r)).status == cmd_status::OK);
    // Nearly all pages are spare again: the firmware offers back what it got past boot
    // and init (128), or all it has spare but one batch (16): a page or so holds the EQ.
    auto eqe = h.wait_eqe(e);
    REQUIRE(eqe);
    CHECK(ifc::get<ifc::eqe::event_type>(eqe->data()) == 0x0b);
    const auto asked = static_cast<std::int32_t>(
        ifc::get<ifc::pages_req_event::num_pages>(ifc::at<ifc::eqe::event_data>(eqe->data())));
    CHECK(asked <= -120);
    CHECK(asked >= -128);
    // While that request is unanswered, more freed memory asks nothing more.
    auto again = h.exec(mkey_in(pd, 0, mtt.size() * 4096, 12, mtt), 16);
    REQUIRE(again.status == cmd_status::OK);
    REQUIRE(destroy_mkey(h, index_of(again)).status == cmd_status::OK);
    CHECK_FALSE(h.wait_eqe(e, std::chrono::milliseconds(100)));
    // The driver takes them (HCA_RETURN_PAGES): 128 pages come back, each given before.
    auto in = H::input<ifc::manage_pages_in>(cmd_opcode::MANAGE_PAGES, 2);
    ifc::set<ifc::manage_pages_in::input_num_entries>(in.data(), 128);
    const auto back = h.exec(in, ifc::manage_pages_out::size_bytes + 128 * 8, {.slot = 31});
    REQUIRE(back.status == cmd_status::OK);
    CHECK(ifc::get<ifc::manage_pages_out::output_num_entries>(back.out.data()) == 128);
    CHECK(h.dev().pages_owned() == 16 + 64);
    // At the boot and init pages, freeing more asks for nothing.
    auto last = h.exec(mkey_in(pd, 0, 4096, 12, {buf.iova() | kPresent}), 16);
    REQUIRE(last.status == cmd_status::OK);
    REQUIRE(destroy_mkey(h, index_of(last)).status == cmd_status::OK);
    CHECK_FALSE(h.wait_eqe(e, std::chrono::milliseconds(100)));
}

TEST_CASE("a UMR posted to the device changes the key QUERY_MKEY reads: the firmware's copy follows the engine's") {
    using qpc = ifc::qpc;
    qp_env e;
    // Linux's UMR QP: REG_UMR, no PD, to RTS with only a port.
    auto qin = e.qp_input(ifc::qpc_values::st_reg_umr);
    dma_buffer& buf = e.h.last_buffer();
    ifc::set<qpc::pd>(ifc::at<ifc::create_qp_in::qpc>(qin.data()), 0);
    const std::uint32_t qpn = e.create_qp(qin);
    for (cmd_opcode op : {cmd_opcode::RST2INIT_QP, cmd_opcode::INIT2RTR_QP, cmd_opcode::RTR2RTS_QP}) {
        auto in = H::input<ifc::rst2init_qp_in>(op);
        ifc::set<ifc::rst2init_qp_in::qpn>(in.data(), qpn);
        if (op == cmd_opcode::RST2INIT_QP) {
            ifc::set<ifc::ads::vhca_port_num>(
                ifc::at<qpc::primary_address_path>(ifc::at<ifc::rst2init_qp_in::qpc>(in.data())), 1);
        }
        REQUIRE(e.h.exec(in, 16).status == cmd_status::OK);
    }
    // A key as mlx5_ib's cache makes them: free, UMR enabled, 2 octowords, no entries yet.
    auto kin = mkey_in(e.pd, 0, 0, 12, {});
    ifc::set<ifc::create_mkey_in::pg_access>(kin.data(), 0);
    ifc::set<ifc::mkc::free>(mkc_of(kin), 1);
    ifc::set<ifc::mkc::umr_en>(mkc_of(kin), 1);
    ifc::set<ifc::mkc::translations_octword_size>(mkc_of(kin), 2);
    const auto k = e.h.exec(kin, 16);
    REQUIRE(k.status == cmd_status::OK);
    const std::uint32_t index = index_of(k);
    CHECK(ifc::get<ifc::mkc::free>(ifc::at<ifc::query_mkey_out::memory_key_mkey_entry>(
              query_mkey(e.h, index).out.data())) == 1);

    // UMR at WQE 0 (the send queue after 16 receive WQEs of 64 bytes): enable the key on
    // two pages, the entries inline; 144 bytes, 9 octowords, 3 basic blocks.
    std::byte* wqe = buf.data() + 16 * 64;
    hw::wqe_ctrl_seg ctrl{};
    hw::set_ctrl_seg(ctrl, 0, hw::wqe_opcode::UMR, 0, qpn, 9, hw::ctrl_cq_update, hw::be32::from(index << 8));
    hw::wqe_umr_ctrl_seg u{};
    u.flags = hw::umr_inline | hw::umr_check_key_free;
    u.xlt_octowords = hw::be16::from(1);
    u.mkey_mask = hw::be64::from(hw::umr_mask_free | hw::umr_mask_key | hw::umr_mask_start_addr | hw::umr_mask_len |
                                 hw::umr_mask_lw);
    std::array<std::byte, hw::umr_mkey_seg_size> seg{};
    ifc::set<ifc::mkc::mkey_7_0>(seg.data(), 0x77);
    ifc::set<ifc::mkc::start_addr>(seg.data(), 0x10000);
    ifc::set<ifc::mkc::len>(seg.data(), 8192);
    ifc::set<ifc::mkc::lw>(seg.data(), 1);
    const std::array<hw::be64, 2> entries{hw::be64::from(0x7000 | kPresent), hw::be64::from(0x9000 | kPresent)};
    std::memcpy(wqe, &ctrl, sizeof ctrl);
    std::memcpy(wqe + 16, &u, sizeof u);
    std::memcpy(wqe + 64, seg.data(), seg.size());
    std::memcpy(wqe + 128, entries.data(), sizeof entries);
    const hw::be32 counter = hw::be32::from(3);  // WQE-BBs posted
    std::memcpy(buf.data() + 4096 + 4, &counter, 4);
    std::atomic_thread_fence(std::memory_order_release);
    std::uint64_t first8;
    std::memcpy(&first8, wqe, 8);
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(e.h.bar() + std::size_t{e.uar} * hw::uar_page_size +
                                                                      hw::uar_bf_offset))
        .store(first8, std::memory_order_release);

    // The key as the firmware now reports it.
    test::cmd_result q;
    for (int i = 0; i < 3000; ++i) {
        q = query_mkey(e.h, index);
        REQUIRE(q.status == cmd_status::OK);
        if (ifc::get<ifc::mkc::free>(ifc::at<ifc::query_mkey_out::memory_key_mkey_entry>(q.out.data())) == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const std::byte* m = ifc::at<ifc::query_mkey_out::memory_key_mkey_entry>(q.out.data());
    CHECK(ifc::get<ifc::mkc::free>(m) == 0);
    CHECK(ifc::get<ifc::mkc::mkey_7_0>(m) == 0x77);
    CHECK(ifc::get<ifc::mkc::start_addr>(m) == 0x10000);
    CHECK(ifc::get<ifc::mkc::len>(m) == 8192);
    CHECK(ifc::get<ifc::mkc::lw>(m) == 1);
    CHECK(ifc::get<ifc::mkc::rw>(m) == 1);  // as created: not in the mask
    CHECK(ifc::get<ifc::mkc::umr_en>(m) == 1);
    CHECK(queried_mtt(q, 0) == (0x7000 | kPresent));
    CHECK(queried_mtt(q, 1) == (0x9000 | kPresent));
    REQUIRE(destroy_mkey(e.h, index).status == cmd_status::OK);
}
