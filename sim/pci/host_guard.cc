#include "sim/pci/host_guard.h"

#if defined(__x86_64__)
#include <ucontext.h>

#include <cstdint>
#else
#include <csetjmp>
#include <cstring>
#endif

namespace cxv::sim::host_guard {

#if defined(__x86_64__)

// The copy routine. Every instruction that touches host memory lies between
// cxv_guard_begin and cxv_guard_end, and none of them has pushed anything on the stack,
// so a fault there is recovered by resuming at cxv_guard_fault, which returns 1.
// In: %rdi destination, %rsi source, %rdx length. Out: %eax 0, or 1 if it faulted.
// A read of 256 bytes or more is one `rep movsb` (the order of a read does not matter);
// everything else goes in ascending addresses as write() describes.
asm(R"(
    .text
    .p2align 4
    .globl cxv_guard_read
    .hidden cxv_guard_read
    .type cxv_guard_read, @function
    .globl cxv_guard_write
    .hidden cxv_guard_write
    .type cxv_guard_write, @function
    .globl cxv_guard_begin
    .hidden cxv_guard_begin
    .globl cxv_guard_end
    .hidden cxv_guard_end
    .globl cxv_guard_fault
    .hidden cxv_guard_fault
cxv_guard_begin:
cxv_guard_read:
    cmp $256, %rdx
    jb cxv_guard_write
    mov %rdx, %rcx
    rep movsb
    xor %eax, %eax
    ret
cxv_guard_write:
    cmp $16, %rdx
    jb 3f
    xor %ecx, %ecx
1:  movdqu (%rsi,%rcx), %xmm0
    movdqu %xmm0, (%rdi,%rcx)
    add $16, %rcx
    lea 16(%rcx), %rax
    cmp %rdx, %rax
    jbe 1b
    cmp %rdx, %rcx
    je 2f
    movdqu -16(%rsi,%rdx), %xmm0
    movdqu %xmm0, -16(%rdi,%rdx)
2:  xor %eax, %eax
    ret
3:  test $8, %dl
    jz 4f
    mov (%rsi), %rax
    mov %rax, (%rdi)
    add $8, %rsi
    add $8, %rdi
4:  test $4, %dl
    jz 5f
    mov (%rsi), %eax
    mov %eax, (%rdi)
    add $4, %rsi
    add $4, %rdi
5:  test $2, %dl
    jz 6f
    movzwl (%rsi), %eax
    mov %ax, (%rdi)
    add $2, %rsi
    add $2, %rdi
6:  test $1, %dl
    jz 7f
    movzbl (%rsi), %eax
    mov %al, (%rdi)
7:  xor %eax, %eax
    ret
cxv_guard_end:
cxv_guard_fault:
    mov $1, %eax
    ret
    .size cxv_guard_read, cxv_guard_write - cxv_guard_read
    .size cxv_guard_write, cxv_guard_end - cxv_guard_write
)");

extern "C" {
int cxv_guard_read(std::byte* dst, const std::byte* src, std::size_t len) noexcept;
int cxv_guard_write(std::byte* dst, const std::byte* src, std::size_t len) noexcept;
extern const char cxv_guard_begin[], cxv_guard_end[], cxv_guard_fault[];
}

bool write(std::byte* host, const std::byte* src, std::size_t len) noexcept {
    return cxv_guard_write(host, src, len) == 0;
}

bool read(std::byte* dst, const std::byte* host, std::size_t len) noexcept {
    return cxv_guard_read(dst, host, len) == 0;
}

bool recover(void* ucontext) noexcept {
    if (ucontext == nullptr) return false;
    auto& pc = static_cast<ucontext_t*>(ucontext)->uc_mcontext.gregs[REG_RIP];
    const auto at = static_cast<std::uintptr_t>(pc);
    if (at < reinterpret_cast<std::uintptr_t>(cxv_guard_begin) || at >= reinterpret_cast<std::uintptr_t>(cxv_guard_end)) {
        return false;
    }
    pc = static_cast<greg_t>(reinterpret_cast<std::uintptr_t>(cxv_guard_fault));
    return true;
}

#else

namespace {

struct frame {
    sigjmp_buf env;
};
thread_local frame* t_frame = nullptr;

template <typename F>
bool guarded(F&& copy) noexcept {
    frame f;
    frame* outer = t_frame;
    if (sigsetjmp(f.env, 0) != 0) {
        t_frame = outer;
        return false;
    }
    t_frame = &f;
    copy();
    t_frame = outer;
    return true;
}

}  // namespace

bool write(std::byte* host, const std::byte* src, std::size_t len) noexcept {
    return guarded([&] {
        std::size_t at = 0;
        if (len >= 16) {
            for (; at + 16 <= len; at += 16) {
                std::memcpy(host + at, src + at, 16);
                asm volatile("" ::: "memory");
            }
            if (at != len) std::memcpy(host + len - 16, src + len - 16, 16);
            return;
        }
        for (std::size_t piece = 8; piece != 0; piece /= 2) {
            if ((len & piece) == 0) continue;
            std::memcpy(host + at, src + at, piece);
            asm volatile("" ::: "memory");
            at += piece;
        }
    });
}

bool read(std::byte* dst, const std::byte* host, std::size_t len) noexcept {
    return guarded([&] { std::memcpy(dst, host, len); });
}

bool recover(void*) noexcept {
    if (t_frame != nullptr) siglongjmp(t_frame->env, 1);
    return false;
}

#endif

}  // namespace cxv::sim::host_guard
