#include "tests/sim/harness.h"

#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "hw/barrier.h"

namespace cxv::test {

namespace {

constexpr std::size_t kEntry = 64;
constexpr std::size_t kBlock = ifc::cmd_if_box::size_bytes;
constexpr std::size_t kBlockData = 512;
constexpr std::size_t kMailboxStride = 1024;  // mailboxes are 1 KiB aligned

std::size_t blocks_for(std::size_t len) { return len > 16 ? (len - 16 + kBlockData - 1) / kBlockData : 0; }

}  // namespace

dma_buffer::dma_buffer(sim::iommu& mmu, std::uint64_t iova, std::size_t size)
    : mmu_(mmu), iova_(iova), size_((size + 4095) & ~std::size_t{4095}) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, size_) != 0) throw std::bad_alloc();
    std::memset(p, 0, size_);
    p_ = static_cast<std::byte*>(p);
    if (mmu_.map(iova_, p_, size_, true, true) != sim::map_error::none) {
        std::free(p);
        throw std::runtime_error("dma_buffer: map failed");
    }
}

dma_buffer::~dma_buffer() {
    unmap();
    std::free(p_);
}

void dma_buffer::unmap() {
    if (mapped_) (void)mmu_.unmap(iova_, size_);
    mapped_ = false;
}

harness::harness(sim::device_config cfg) {
    auto d = sim::device::create(cfg);
    if (!d) throw std::runtime_error(d.error().message);
    dev_ = std::move(d).value();
}

harness::~harness() {
    // Unmap and free DMA memory while the device (and its IOMMU) still exists; once
    // unmapped, the device thread cannot touch it. Then stop the device.
    cmdq_.reset();
    buffers_.clear();
    dev_.reset();
    for (int fd : fds_) close(fd);
}

std::uint32_t harness::bar_load32(std::size_t off) {
    return hw::from_be(*reinterpret_cast<volatile std::uint32_t*>(bar() + off));
}

void harness::bar_store32(std::size_t off, std::uint32_t v) {
    *reinterpret_cast<volatile std::uint32_t*>(bar() + off) = hw::to_be(v);
}

std::uint64_t harness::next_iova(std::size_t size) {
    const std::uint64_t a = iova_next_;
    iova_next_ += (size + 0xffff) & ~std::uint64_t{0xffff};
    return a;
}

dma_buffer& harness::alloc(std::size_t size) {
    buffers_.push_back(std::make_unique<dma_buffer>(dev_->mmu(), next_iova(size), size));
    return *buffers_.back();
}

bool harness::wait_boot(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (bar_load32(0x1fc) & 0x80000000u) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

void harness::set_cmdq() {
    cmdq_ = std::make_unique<dma_buffer>(dev_->mmu(), next_iova(4096), 4096);
    const std::uint32_t lo = bar_load32(0x14);
    bar_store32(0x10, static_cast<std::uint32_t>(cmdq_->iova() >> 32));
    bar_store32(0x14, static_cast<std::uint32_t>(cmdq_->iova()) | (lo & 0));
    // The device latches the address and restores its read-only fields.
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while ((bar_load32(0x14) & 0xff) != 0x56 && std::chrono::steady_clock::now() < end) {
        std::this_thread::yield();
    }
}

void harness::post(unsigned slot, std::span<const std::byte> in, std::size_t olen, bool ring,
                   std::uint8_t token, std::optional<std::uint32_t> corrupt_block) {
    std::byte* e = cmdq_->data() + slot * kEntry;
    std::memset(e, 0, kEntry);
    ifc::set<ifc::cmd_queue_entry::type>(e, hw::cmd_queue_entry_type_pcie);
    ifc::set<ifc::cmd_queue_entry::input_length>(e, static_cast<std::uint32_t>(in.size()));
    ifc::set<ifc::cmd_queue_entry::output_length>(e, static_cast<std::uint32_t>(olen));
    ifc::set<ifc::cmd_queue_entry::token>(e, token);
    std::memcpy(ifc::at<ifc::cmd_queue_entry::command_input_inline_data>(e), in.data(),
                std::min<std::size_t>(16, in.size()));

    // Mailbox chains: input blocks, then output blocks, 1 KiB apart in one buffer.
    const std::size_t nin = blocks_for(in.size()), nout = blocks_for(olen);
    if (nin + nout) {
        dma_buffer& mb = alloc((nin + nout) * kMailboxStride);
        auto chain = [&](std::size_t first, std::size_t n, std::uint64_t* head) {
            for (std::size_t i = 0; i < n; ++i) {
                std::byte* b = mb.data() + (first + i) * kMailboxStride;
                const std::uint64_t next = i + 1 < n ? mb.iova() + (first + i + 1) * kMailboxStride : 0;
                ifc::set<ifc::cmd_if_box::next_pointer_63_32>(b, static_cast<std::uint32_t>(next >> 32));
                ifc::set<ifc::cmd_if_box::next_pointer_31_10>(b, static_cast<std::uint32_t>(next >> 10) & 0x3fffff);
                const bool corrupt = corrupt_block && *corrupt_block == first + i;
                ifc::set<ifc::cmd_if_box::block_number>(b, static_cast<std::uint32_t>(i + (corrupt ? 7 : 0)));
                ifc::set<ifc::cmd_if_box::token>(b, token);
            }
            *head = n ? mb.iova() + first * kMailboxStride : 0;
        };
        std::uint64_t in_head = 0, out_head = 0;
        chain(0, nin, &in_head);
        chain(nin, nout, &out_head);
        for (std::size_t i = 0; i < nin; ++i) {
            const std::size_t off = 16 + i * kBlockData;
            std::memcpy(mb.data() + i * kMailboxStride, in.data() + off, std::min(kBlockData, in.size() - off));
        }
        ifc::set<ifc::cmd_queue_entry::input_mailbox_pointer_63_32>(e, static_cast<std::uint32_t>(in_head >> 32));
        ifc::set<ifc::cmd_queue_entry::input_mailbox_pointer_31_9>(e, static_cast<std::uint32_t>(in_head >> 9) & 0x7fffff);
        ifc::set<ifc::cmd_queue_entry::output_mailbox_pointer_63_32>(e, static_cast<std::uint32_t>(out_head >> 32));
        ifc::set<ifc::cmd_queue_entry::output_mailbox_pointer_31_9>(e, static_cast<std::uint32_t>(out_head >> 9) & 0x7fffff);
    }
    // Hand the entry to the device, then ring.
    hw::to_device();
    ifc::set<ifc::cmd_queue_entry::ownership>(e, 1);
    hw::to_device();
    if (ring) bar_store32(0x18, 1u << slot);
}

bool harness::owned(unsigned slot) {
    hw::from_device();
    return ifc::get<ifc::cmd_queue_entry::ownership>(cmdq_->data() + slot * kEntry) != 0;
}

bool harness::wait_slot(unsigned slot, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (owned(slot)) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::yield();
    }
    return true;
}

cmd_result harness::collect(unsigned slot, std::size_t olen) {
    cmd_result r;
    r.completed = !owned(slot);
    const std::byte* e = cmdq_->data() + slot * kEntry;
    r.delivery_status = static_cast<std::uint8_t>(ifc::get<ifc::cmd_queue_entry::status>(e));
    r.out.assign(olen, std::byte{0});
    std::memcpy(r.out.data(), ifc::at<ifc::cmd_queue_entry::command_output_inline_data>(e),
                std::min<std::size_t>(16, olen));
    std::uint64_t next =
        (std::uint64_t{ifc::get<ifc::cmd_queue_entry::output_mailbox_pointer_63_32>(e)} << 32) |
        (std::uint64_t{ifc::get<ifc::cmd_queue_entry::output_mailbox_pointer_31_9>(e)} << 9);
    for (std::size_t off = 16; off < olen && next; off += kBlockData) {
        // Find the buffer holding this IOVA.
        for (const auto& b : buffers_) {
            if (next >= b->iova() && next < b->iova() + b->size()) {
                const std::byte* blk = b->data() + (next - b->iova());
                std::memcpy(r.out.data() + off, blk, std::min(kBlockData, olen - off));
                next = (std::uint64_t{ifc::get<ifc::cmd_if_box::next_pointer_63_32>(blk)} << 32) |
                       (std::uint64_t{ifc::get<ifc::cmd_if_box::next_pointer_31_10>(blk)} << 10);
                break;
            }
        }
    }
    if (olen >= 8) {
        r.status = static_cast<hw::cmd_status>(ifc::get<ifc::cmd_out::status>(r.out.data()));
        r.syndrome = ifc::get<ifc::cmd_out::syndrome>(r.out.data());
    }
    return r;
}

cmd_result harness::exec(std::span<const std::byte> in, std::size_t olen) {
    return exec(in, olen, post_options{});
}

cmd_result harness::exec(std::span<const std::byte> in, std::size_t olen, const post_options& o) {
    post(o.slot, in, olen, o.ring, o.token, o.corrupt_block);
    wait_slot(o.slot, o.timeout);
    return collect(o.slot, olen);
}

cmd_result harness::simple(hw::cmd_opcode op, std::uint16_t op_mod, std::size_t olen) {
    return exec(input<ifc::cmd_in>(op, op_mod, 8), olen);
}

cmd_result harness::enable_hca() {
    return exec(input<ifc::enable_hca_in>(hw::cmd_opcode::ENABLE_HCA), 16);
}

cmd_result harness::give_pages(std::uint16_t query_op_mod) {
    auto q = exec(input<ifc::query_pages_in>(hw::cmd_opcode::QUERY_PAGES, query_op_mod), 16);
    if (q.status != hw::cmd_status::OK) return q;
    return manage_pages(1, ifc::get<ifc::query_pages_out::num_pages>(q.out.data()));
}

cmd_result harness::manage_pages(std::uint16_t op_mod, std::uint32_t n) {
    dma_buffer& pages = alloc(std::size_t{n} * 4096 + 4096);
    auto in = input<ifc::manage_pages_in>(hw::cmd_opcode::MANAGE_PAGES, op_mod, std::size_t{n} * 8);
    ifc::set<ifc::manage_pages_in::input_num_entries>(in.data(), n);
    for (std::uint32_t i = 0; i < n; ++i) {
        ifc::set<ifc::manage_pages_in::pas>(in.data(), i, pages.iova() + std::uint64_t{i} * 4096);
    }
    return exec(in, 16, post_options{.slot = 31});
}

cmd_result harness::set_issi(unsigned issi) {
    auto in = input<ifc::set_issi_in>(hw::cmd_opcode::SET_ISSI);
    ifc::set<ifc::set_issi_in::current_issi>(in.data(), issi);
    return exec(in, 16);
}

cmd_result harness::init_hca() { return exec(input<ifc::init_hca_in>(hw::cmd_opcode::INIT_HCA), 16); }

bool harness::bring_up() {
    if (!wait_boot()) return false;
    set_cmdq();
    if (enable_hca().status != hw::cmd_status::OK) return false;
    if (set_issi(1).status != hw::cmd_status::OK) return false;
    if (give_pages(1).status != hw::cmd_status::OK) return false;
    if (give_pages(2).status != hw::cmd_status::OK) return false;
    return init_hca().status == hw::cmd_status::OK;
}

bool harness::bring_up_link_disabled() {
    if (!wait_boot()) return false;
    set_cmdq();
    if (enable_hca().status != hw::cmd_status::OK) return false;
    if (set_issi(1).status != hw::cmd_status::OK) return false;
    if (give_pages(1).status != hw::cmd_status::OK) return false;
    auto cur = exec(input<ifc::query_hca_cap_in>(hw::cmd_opcode::QUERY_HCA_CAP, 1), ifc::query_hca_cap_out::size_bytes);
    if (cur.status != hw::cmd_status::OK) return false;
    auto in = input<ifc::set_hca_cap_in>(hw::cmd_opcode::SET_HCA_CAP, 0);
    std::byte* cap = ifc::at<ifc::set_hca_cap_in::capability>(in.data());
    std::memcpy(cap, ifc::at<ifc::query_hca_cap_out::capability>(cur.out.data()), ifc::cmd_hca_cap::size_bytes);
    ifc::set<ifc::cmd_hca_cap::disable_link_up>(cap, 1);
    if (exec(in, 16).status != hw::cmd_status::OK) return false;
    if (give_pages(2).status != hw::cmd_status::OK) return false;
    return init_hca().status == hw::cmd_status::OK;
}

int harness::vport_state() {
    auto r = exec(input<ifc::query_vport_state_in>(hw::cmd_opcode::QUERY_VPORT_STATE), ifc::query_vport_state_out::size_bytes);
    if (r.status != hw::cmd_status::OK) return -1;
    return static_cast<int>(ifc::get<ifc::query_vport_state_out::state>(r.out.data()));
}

bool harness::wait_port_active(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (vport_state() != 1) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

std::uint32_t harness::alloc_uar() {
    auto r = exec(input<ifc::alloc_uar_in>(hw::cmd_opcode::ALLOC_UAR), 16);
    return r.status == hw::cmd_status::OK ? ifc::get<ifc::alloc_uar_out::uar>(r.out.data()) : 0;
}

cmd_result harness::create_eq(eq& e, std::uint32_t uar, unsigned log_size, std::uint64_t bitmask,
                              unsigned vector) {
    const std::size_t bytes = std::size_t{64} << log_size;
    e.buf = std::make_unique<dma_buffer>(dev_->mmu(), next_iova(bytes), bytes);
    // Every owner bit starts at 1: not yet valid on the first pass.
    for (std::size_t i = 0; i < (std::size_t{1} << log_size); ++i) e.buf->data()[i * 64 + 63] = std::byte{1};
    e.log_size = log_size;
    e.uar = uar;
    e.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    fds_.push_back(e.fd);
    dev_->msix().set(vector, e.fd);

    const std::size_t npages = (bytes + 4095) / 4096;
    auto in = input<ifc::create_eq_in>(hw::cmd_opcode::CREATE_EQ, 0, npages * 8);
    std::byte* eqc = ifc::at<ifc::create_eq_in::eq_context_entry>(in.data());
    ifc::set<ifc::eqc::log_eq_size>(eqc, log_size);
    ifc::set<ifc::eqc::uar_page>(eqc, uar);
    ifc::set<ifc::eqc::intr>(eqc, vector);
    ifc::set<ifc::eqc::log_page_size>(eqc, 0);
    ifc::set<ifc::create_eq_in::event_bitmask>(in.data(), 0, bitmask);
    for (std::size_t i = 0; i < npages; ++i) {
        ifc::set<ifc::create_eq_in::pas>(in.data(), i, e.buf->iova() + i * 4096);
    }
    auto r = exec(in, 16);
    if (r.status == hw::cmd_status::OK) e.eqn = ifc::get<ifc::create_eq_out::eq_number>(r.out.data());
    return r;
}

void harness::arm_eq(const eq& e) {
    bar_store32(e.uar * 4096 + 0x40, (e.eqn << 24) | (e.ci & 0xffffff));
}

std::optional<std::vector<std::byte>> harness::next_eqe(eq& e) {
    const std::uint32_t nent = 1u << e.log_size;
    const std::byte* p = e.buf->data() + (e.ci & (nent - 1)) * 64;
    const unsigned owner = std::to_integer<unsigned>(p[63]) & 1;
    if (owner != ((e.ci >> e.log_size) & 1)) return std::nullopt;
    hw::from_device();
    std::vector<std::byte> v(p, p + 64);
    ++e.ci;
    return v;
}

std::optional<std::vector<std::byte>> harness::wait_eqe(eq& e, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    do {
        if (auto v = next_eqe(e)) return v;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } while (std::chrono::steady_clock::now() < end);
    return std::nullopt;
}

std::uint64_t harness::read_eventfd(int fd) {
    std::uint64_t v = 0;
    if (::read(fd, &v, sizeof(v)) != sizeof(v)) return 0;
    return v;
}

}  // namespace cxv::test
