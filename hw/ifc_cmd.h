// The initialization segment and the command interface (PRM "Initialization Segment",
// "Command Queue Entry", "Command Mailbox"; Linux names them initial_seg,
// cmd_queue_entry, cmd_if_box).
#pragma once

#include "hw/layout.h"

namespace cxv::hw::ifc {

// The health buffer sits inside the initialization segment at byte 0x200.
#define CXV_IFC_health_buffer(F, S, A, T) \
    F(assert_existptr, 0x100, 32)         \
    F(assert_callra, 0x120, 32)           \
    F(time, 0x160, 32)                    \
    F(fw_version, 0x180, 32)              \
    F(hw_id, 0x1a0, 32)                   \
    F(rfr, 0x1c0, 1)                      \
    F(valid, 0x1c4, 1)                    \
    F(severity, 0x1c5, 3)                 \
    F(irisc_index, 0x1e0, 8)              \
    F(synd, 0x1e8, 8)                     \
    F(ext_synd, 0x1f0, 16)
CXV_IFC_LAYOUT(health_buffer, 0x200)

// BAR0 offset 0: the initialization segment. The driver reads log_cmdq_size and
// log_cmdq_stride before it writes the command queue address into the same dword.
#define CXV_IFC_initial_seg(F, S, A, T)         \
    F(fw_rev_minor, 0x000, 16)                  \
    F(fw_rev_major, 0x010, 16)                  \
    F(cmd_interface_rev, 0x020, 16)             \
    F(fw_rev_subminor, 0x030, 16)               \
    F(cmdq_phy_addr_63_32, 0x080, 32)           \
    F(cmdq_phy_addr_31_12, 0x0a0, 20)           \
    F(nic_interface, 0x0b6, 2)                  \
    F(log_cmdq_size, 0x0b8, 4)                  \
    F(log_cmdq_stride, 0x0bc, 4)                \
    F(command_doorbell_vector, 0x0c0, 32)       \
    F(initializing, 0xfe0, 1)                   \
    F(nic_interface_supported, 0xfe5, 3)        \
    F(embedded_cpu, 0xfe8, 1)                   \
    S(health_buffer, 0x1000, health_buffer)     \
    F(no_dram_nic_offset, 0x1200, 32)           \
    F(clear_int, 0x807f, 1)                     \
    F(health_syndrome, 0x8080, 8)               \
    F(health_counter, 0x8088, 24)
CXV_IFC_LAYOUT(initial_seg, 0x20060)

// One 64-byte command queue entry; 16 bytes of input and output travel inline, the
// rest in chains of mailboxes.
#define CXV_IFC_cmd_queue_entry(F, S, A, T)          \
    F(type, 0x000, 8)                                \
    F(input_length, 0x020, 32)                       \
    F(input_mailbox_pointer_63_32, 0x040, 32)        \
    F(input_mailbox_pointer_31_9, 0x060, 23)         \
    A(command_input_inline_data, 0x080, 8, 16)       \
    A(command_output_inline_data, 0x100, 8, 16)      \
    F(output_mailbox_pointer_63_32, 0x180, 32)       \
    F(output_mailbox_pointer_31_9, 0x1a0, 23)        \
    F(output_length, 0x1c0, 32)                      \
    F(token, 0x1e0, 8)                               \
    F(signature, 0x1e8, 8)                           \
    F(status, 0x1f8, 7)                              \
    F(ownership, 0x1ff, 1)
CXV_IFC_LAYOUT(cmd_queue_entry, 0x200)

// A command mailbox block: 512 data bytes, then the chain link (the next block's
// address, 1 KiB aligned) and the block's position in the chain.
#define CXV_IFC_cmd_if_box(F, S, A, T)       \
    A(mailbox_data, 0x000, 8, 512)           \
    F(next_pointer_63_32, 0x1180, 32)        \
    F(next_pointer_31_10, 0x11a0, 22)        \
    F(block_number, 0x11c0, 32)              \
    F(token, 0x11e8, 8)                      \
    F(ctrl_signature, 0x11f0, 8)             \
    F(signature, 0x11f8, 8)
CXV_IFC_LAYOUT(cmd_if_box, 0x1200)

// Every command input starts with opcode and op_mod, every output with status and
// syndrome.
#define CXV_IFC_cmd_in(F, S, A, T) \
    F(opcode, 0x000, 16)           \
    F(op_mod, 0x030, 16)           \
    A(command, 0x040, 0x20, 0)
CXV_IFC_LAYOUT(cmd_in, 0x40)

#define CXV_IFC_cmd_out(F, S, A, T) \
    F(status, 0x000, 8)             \
    F(syndrome, 0x020, 32)          \
    F(command_output, 0x040, 32)
CXV_IFC_LAYOUT(cmd_out, 0x60)

// The table of the many command outputs that carry nothing but status and syndrome.
#define CXV_IFC_STATUS_OUT(F, S, A, T) \
    F(status, 0x000, 8)                \
    F(syndrome, 0x020, 32)

// A physical (IOVA) address of a 4 KiB page in a command's page list.
#define CXV_IFC_cmd_pas(F, S, A, T) \
    F(pa_h, 0x000, 32)              \
    F(pa_l, 0x020, 20)
CXV_IFC_LAYOUT(cmd_pas, 0x40)

// Every layout in this file, as (C++ name, PRM name) pairs for tests and printers.
#define CXV_IFC_LAYOUTS_CMD(X) \
    X(health_buffer, health_buffer) \
    X(initial_seg, initial_seg) \
    X(cmd_queue_entry, cmd_queue_entry) \
    X(cmd_if_box, cmd_if_box) \
    X(cmd_in, cmd_in) \
    X(cmd_out, cmd_out) \
    X(cmd_pas, cmd_pas)

}  // namespace cxv::hw::ifc
