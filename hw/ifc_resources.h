// The basic resources and their commands: UARs and protection domains, event queues and
// the events they carry, memory keys, user memory (UMEM) registrations and completion
// queues. Names and offsets follow the PRM's tables.
#pragma once

#include "hw/ifc_cmd.h"
#include "hw/layout.h"

namespace cxv::hw::ifc {

// --- UAR and protection domain ---------------------------------------------------------

// PRM ALLOC_UAR / DEALLOC_UAR: a UAR is one doorbell page of BAR0, named by its index.
#define CXV_IFC_alloc_uar_in(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(uid, 0x010, 16)                    \
    F(op_mod, 0x030, 16)
CXV_IFC_LAYOUT(alloc_uar_in, 0x80)

#define CXV_IFC_alloc_uar_out(F, S, A, T) \
    F(status, 0x000, 8)                   \
    F(syndrome, 0x020, 32)                \
    F(uar, 0x048, 24)
CXV_IFC_LAYOUT(alloc_uar_out, 0x80)

#define CXV_IFC_dealloc_uar_in(F, S, A, T) \
    F(opcode, 0x000, 16)                   \
    F(uid, 0x010, 16)                      \
    F(op_mod, 0x030, 16)                   \
    F(uar, 0x048, 24)
CXV_IFC_LAYOUT(dealloc_uar_in, 0x80)

#define CXV_IFC_dealloc_uar_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(dealloc_uar_out, 0x80)

// PRM ALLOC_PD / DEALLOC_PD: a protection domain number, 24 bits.
#define CXV_IFC_alloc_pd_in(F, S, A, T) \
    F(opcode, 0x000, 16)                \
    F(uid, 0x010, 16)                   \
    F(op_mod, 0x030, 16)
CXV_IFC_LAYOUT(alloc_pd_in, 0x80)

#define CXV_IFC_alloc_pd_out(F, S, A, T) \
    F(status, 0x000, 8)                  \
    F(syndrome, 0x020, 32)               \
    F(pd, 0x048, 24)
CXV_IFC_LAYOUT(alloc_pd_out, 0x80)

#define CXV_IFC_dealloc_pd_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)                  \
    F(pd, 0x048, 24)
CXV_IFC_LAYOUT(dealloc_pd_in, 0x80)

#define CXV_IFC_dealloc_pd_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(dealloc_pd_out, 0x80)

// --- event queues ----------------------------------------------------------------------

// PRM Table: EQ Context. The ring holds 2^log_eq_size 64-byte entries in pages of
// 4 KiB << log_page_size; intr is the MSI-X vector, uar_page the UAR whose EQ doorbell
// arms it, st its arming state.
#define CXV_IFC_eqc(F, S, A, T)    \
    F(status, 0x000, 4)            \
    F(ec, 0x00d, 1)                \
    F(oi, 0x00e, 1)                \
    F(st, 0x014, 4)                \
    F(page_offset, 0x054, 6)       \
    F(log_eq_size, 0x063, 5)       \
    F(uar_page, 0x068, 24)         \
    F(intr, 0x0b4, 12)             \
    F(log_page_size, 0x0c3, 5)     \
    F(consumer_counter, 0x148, 24) \
    F(producer_counter, 0x168, 24)
CXV_IFC_LAYOUT(eqc, 0x200)

// PRM CREATE_EQ: the context, which event types the EQ receives (bit n of the bitmask,
// counted from the least significant bit of the first 64-bit word, is event type n),
// then the ring's page list.
#define CXV_IFC_create_eq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(uid, 0x010, 16)                    \
    F(op_mod, 0x030, 16)                 \
    S(eq_context_entry, 0x080, eqc)      \
    A(event_bitmask, 0x2c0, 64, 4)       \
    A(pas, 0x880, 64, 0)
CXV_IFC_LAYOUT(create_eq_in, 0x880)

#define CXV_IFC_create_eq_out(F, S, A, T) \
    F(status, 0x000, 8)                   \
    F(syndrome, 0x020, 32)                \
    F(eq_number, 0x058, 8)
CXV_IFC_LAYOUT(create_eq_out, 0x80)

// PRM DESTROY_EQ.
#define CXV_IFC_destroy_eq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(op_mod, 0x030, 16)                  \
    F(eq_number, 0x058, 8)
CXV_IFC_LAYOUT(destroy_eq_in, 0x80)

#define CXV_IFC_destroy_eq_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_eq_out, 0x80)

// PRM QUERY_EQ: the output mirrors CREATE_EQ's input, with a single 64-bit event
// bitmask.
#define CXV_IFC_query_eq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                \
    F(op_mod, 0x030, 16)                \
    F(eq_number, 0x058, 8)
CXV_IFC_LAYOUT(query_eq_in, 0x80)

#define CXV_IFC_query_eq_out(F, S, A, T) \
    F(status, 0x000, 8)                  \
    F(syndrome, 0x020, 32)               \
    S(eq_context_entry, 0x080, eqc)      \
    F(event_bitmask, 0x2c0, 64)          \
    A(pas, 0x880, 64, 0)
CXV_IFC_LAYOUT(query_eq_out, 0x880)

// --- event queue entries and their payloads --------------------------------------------

// PRM Table: Event Queue Entry. 64 bytes; the 28-byte event_data is read with one of
// the payload layouts below, chosen by event_type. The owner bit flips on each pass of
// the hardware around the ring.
#define CXV_IFC_eqe(F, S, A, T) \
    F(event_type, 0x008, 8)     \
    F(event_sub_type, 0x018, 8) \
    A(event_data, 0x100, 8, 28) \
    F(signature, 0x1f0, 8)      \
    F(owner, 0x1ff, 1)
CXV_IFC_LAYOUT(eqe, 0x200)

// PRM Completion Event: a CQ armed for notification has a new completion.
#define CXV_IFC_comp_event(F, S, A, T) \
    F(cq_number, 0x0c8, 24)
CXV_IFC_LAYOUT(comp_event, 0xe0)

// PRM Command Interface Completion Event: bit n set = command queue entry n completed.
#define CXV_IFC_cmd_inter_comp_event(F, S, A, T) \
    F(command_completion_vector, 0x000, 32)
CXV_IFC_LAYOUT(cmd_inter_comp_event, 0xe0)

// PRM Page Request Event: the device wants num_pages more (negative: fewer) pages for
// function_id, to be given with MANAGE_PAGES.
#define CXV_IFC_pages_req_event(F, S, A, T) \
    F(function_id, 0x010, 16)               \
    F(num_pages, 0x020, 32)
CXV_IFC_LAYOUT(pages_req_event, 0xe0)

// PRM Port State Change Event: which port; the EQE's event_sub_type says what changed.
#define CXV_IFC_port_state_change_event(F, S, A, T) \
    F(port_num, 0x040, 4)
CXV_IFC_LAYOUT(port_state_change_event, 0xe0)

// PRM QP and SRQ affiliated events (path migration, communication established, last
// WQE reached, SRQ limit, catastrophic and access errors): which queue, of which type.
#define CXV_IFC_qp_events(F, S, A, T) \
    F(type, 0x0a0, 8)                 \
    F(qpn_rqn_sqn, 0x0c8, 24)
CXV_IFC_LAYOUT(qp_events, 0xe0)

// PRM DCT affiliated events (DCT key violation, DCT drained).
#define CXV_IFC_dct_events(F, S, A, T) \
    F(dct_number, 0x0c8, 24)
CXV_IFC_LAYOUT(dct_events, 0xe0)

// PRM CQ Error Event: overrun or access violation on cqn.
#define CXV_IFC_cq_error(F, S, A, T) \
    F(cqn, 0x008, 24)                \
    F(syndrome, 0x058, 8)
CXV_IFC_LAYOUT(cq_error, 0xe0)

// The start of an event about a general object (PRM Object Change Event and the
// general object events): the object's type and id.
#define CXV_IFC_affiliated_event_header(F, S, A, T) \
    F(obj_type, 0x010, 16)                          \
    F(obj_id, 0x020, 32)
CXV_IFC_LAYOUT(affiliated_event_header, 0x40)

// PRM GEN_EQE: software asks the device to post the given entry on eq_number. Linux
// spells the entry as 64 bytes; we give it the EQE layout (same offset and size).
#define CXV_IFC_gen_eqe_in(F, S, A, T) \
    F(opcode, 0x000, 16)               \
    F(op_mod, 0x030, 16)               \
    F(eq_number, 0x058, 8)             \
    S(eqe, 0x080, eqe)
CXV_IFC_LAYOUT(gen_eqe_in, 0x280)

// --- memory keys -----------------------------------------------------------------------

// PRM Table: Memory Key Context. The 32-bit key is (index << 8) | mkey_7_0; access_mode
// is split in two fields (bits 4:2 and 1:0). a/rw/rr/lw/lr are the atomic, remote
// write/read and local write/read permissions; the translation table has
// translations_octword_size 16-byte units, pages of 2^log_page_size bytes.
#define CXV_IFC_mkc(F, S, A, T)                    \
    F(free, 0x001, 1)                              \
    F(access_mode_4_2, 0x003, 3)                   \
    F(relaxed_ordering_write, 0x00d, 1)            \
    F(small_fence_on_rdma_read_response, 0x00f, 1) \
    F(umr_en, 0x010, 1)                            \
    F(a, 0x011, 1)                                 \
    F(rw, 0x012, 1)                                \
    F(rr, 0x013, 1)                                \
    F(lw, 0x014, 1)                                \
    F(lr, 0x015, 1)                                \
    F(access_mode_1_0, 0x016, 2)                   \
    F(ma_translation_mode, 0x01a, 2)               \
    F(qpn, 0x020, 24)                              \
    F(mkey_7_0, 0x038, 8)                          \
    F(length64, 0x060, 1)                          \
    F(bsf_en, 0x061, 1)                            \
    F(sync_umr, 0x062, 1)                          \
    F(expected_sigerr_count, 0x065, 1)             \
    F(en_rinval, 0x067, 1)                         \
    F(pd, 0x068, 24)                               \
    F(start_addr, 0x080, 64)                       \
    F(len, 0x0c0, 64)                              \
    F(bsf_octword_size, 0x100, 32)                 \
    F(translations_octword_size, 0x1a0, 32)        \
    F(relaxed_ordering_read, 0x1d9, 1)             \
    F(log_page_size, 0x1db, 5)
CXV_IFC_LAYOUT(mkc, 0x200)

// PRM CREATE_MKEY: the context, then the translation entries (MTTs of two dwords, KLMs
// of four) as a list of dwords, as Linux declares it. With mkey_umem_valid the
// translation comes from the UMEM mkey_umem_id, from byte mkey_umem_offset on (PRM
// fields Linux 6.1 leaves reserved; rdma-core, UCX and DPDK name them).
#define CXV_IFC_create_mkey_in(F, S, A, T)         \
    F(opcode, 0x000, 16)                           \
    F(uid, 0x010, 16)                              \
    F(op_mod, 0x030, 16)                           \
    F(pg_access, 0x060, 1)                         \
    F(mkey_umem_valid, 0x061, 1)                   \
    S(memory_key_mkey_entry, 0x080, mkc)           \
    F(translations_octword_actual_size, 0x300, 32) \
    F(mkey_umem_id, 0x320, 32)                     \
    F(mkey_umem_offset, 0x340, 64)                 \
    A(klm_pas_mtt, 0x880, 32, 0)
CXV_IFC_LAYOUT(create_mkey_in, 0x880)

#define CXV_IFC_create_mkey_out(F, S, A, T) \
    F(status, 0x000, 8)                     \
    F(syndrome, 0x020, 32)                  \
    F(mkey_index, 0x048, 24)
CXV_IFC_LAYOUT(create_mkey_out, 0x80)

// PRM DESTROY_MKEY.
#define CXV_IFC_destroy_mkey_in(F, S, A, T) \
    F(opcode, 0x000, 16)                    \
    F(uid, 0x010, 16)                       \
    F(op_mod, 0x030, 16)                    \
    F(mkey_index, 0x048, 24)
CXV_IFC_LAYOUT(destroy_mkey_in, 0x80)

#define CXV_IFC_destroy_mkey_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_mkey_out, 0x80)

// PRM QUERY_MKEY: the context and the first two 16-byte translation octwords (a BSF, a
// KLM or a pair of MTTs each).
#define CXV_IFC_query_mkey_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(op_mod, 0x030, 16)                  \
    F(mkey_index, 0x048, 24)              \
    F(pg_access, 0x060, 1)
CXV_IFC_LAYOUT(query_mkey_in, 0x80)

#define CXV_IFC_query_mkey_out(F, S, A, T) \
    F(status, 0x000, 8)                    \
    F(syndrome, 0x020, 32)                 \
    S(memory_key_mkey_entry, 0x080, mkc)   \
    A(bsf0_klm0_pas_mtt0_1, 0x880, 8, 16)  \
    A(bsf1_klm1_pas_mtt2_3, 0x900, 8, 16)
CXV_IFC_LAYOUT(query_mkey_out, 0x980)

// --- user memory (UMEM) ----------------------------------------------------------------

// PRM Table: MTT Entry. One translated page: its address (bits 63:8) and the read and
// write enables.
#define CXV_IFC_mtt(F, S, A, T) \
    F(ptag_63_32, 0x000, 32)    \
    F(ptag_31_8, 0x020, 24)     \
    F(wr_en, 0x03e, 1)          \
    F(rd_en, 0x03f, 1)
CXV_IFC_LAYOUT(mtt, 0x40)

// PRM UMEM object: num_of_mtt pages of 2^log_page_size bytes, the buffer starting
// page_offset bytes into the first. The MTT list follows the structure and runs to the
// end of the command.
#define CXV_IFC_umem(F, S, A, T) \
    F(ats, 0x080, 1)             \
    F(log_page_size, 0x09b, 5)   \
    F(page_offset, 0x0a0, 32)    \
    F(num_of_mtt, 0x0c0, 64)     \
    T(mtt, 0x100, mtt, 0)
CXV_IFC_LAYOUT(umem, 0x100)

// PRM CREATE_UMEM / DESTROY_UMEM. CREATE_UMEM's MTT list is umem's flexible tail.
#define CXV_IFC_create_umem_in(F, S, A, T) \
    F(opcode, 0x000, 16)                   \
    F(uid, 0x010, 16)                      \
    F(op_mod, 0x030, 16)                   \
    S(umem, 0x080, umem)
CXV_IFC_LAYOUT(create_umem_in, 0x180)

#define CXV_IFC_create_umem_out(F, S, A, T) \
    F(status, 0x000, 8)                     \
    F(syndrome, 0x020, 32)                  \
    F(umem_id, 0x048, 24)
CXV_IFC_LAYOUT(create_umem_out, 0x80)

#define CXV_IFC_destroy_umem_in(F, S, A, T) \
    F(opcode, 0x000, 16)                    \
    F(uid, 0x010, 16)                       \
    F(op_mod, 0x030, 16)                    \
    F(umem_id, 0x048, 24)
CXV_IFC_LAYOUT(destroy_umem_in, 0x80)

#define CXV_IFC_destroy_umem_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_umem_out, 0x80)

// --- completion queues -----------------------------------------------------------------

// PRM Table: Completion Queue Context. 2^log_cq_size entries of 64 or 128 bytes
// (cqe_sz); c_eqn_or_apu_element is the EQ that receives the completion events;
// cq_period/cq_max_count moderate them; dbr_addr is the doorbell record, which holds
// the consumer index and the arm state.
#define CXV_IFC_cqc(F, S, A, T)           \
    F(status, 0x000, 4)                   \
    F(dbr_umem_valid, 0x006, 1)           \
    F(apu_cq, 0x007, 1)                   \
    F(cqe_sz, 0x008, 3)                   \
    F(cc, 0x00b, 1)                       \
    F(scqe_break_moderation_en, 0x00d, 1) \
    F(oi, 0x00e, 1)                       \
    F(cq_period_mode, 0x00f, 2)           \
    F(cqe_comp_en, 0x011, 1)              \
    F(mini_cqe_res_format, 0x012, 2)      \
    F(st, 0x014, 4)                       \
    F(cqe_compression_layout, 0x01e, 2)   \
    F(dbr_umem_id, 0x020, 32)             \
    F(page_offset, 0x054, 6)              \
    F(log_cq_size, 0x063, 5)              \
    F(uar_page, 0x068, 24)                \
    F(cq_period, 0x084, 12)               \
    F(cq_max_count, 0x090, 16)            \
    F(c_eqn_or_apu_element, 0x0a0, 32)    \
    F(log_page_size, 0x0c3, 5)            \
    F(last_notified_index, 0x108, 24)     \
    F(last_solicit_index, 0x128, 24)      \
    F(consumer_counter, 0x148, 24)        \
    F(producer_counter, 0x168, 24)        \
    F(dbr_addr, 0x1c0, 64)
CXV_IFC_LAYOUT(cqc, 0x200)

// PRM CREATE_CQ: the context, then the ring's page list (or, with cq_umem_valid, a
// UMEM named in the context).
#define CXV_IFC_create_cq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(uid, 0x010, 16)                    \
    F(op_mod, 0x030, 16)                 \
    S(cq_context, 0x080, cqc)            \
    F(cq_umem_offset, 0x280, 64)         \
    F(cq_umem_id, 0x2c0, 32)             \
    F(cq_umem_valid, 0x2e0, 1)           \
    A(pas, 0x880, 64, 0)
CXV_IFC_LAYOUT(create_cq_in, 0x880)

#define CXV_IFC_create_cq_out(F, S, A, T) \
    F(status, 0x000, 8)                   \
    F(syndrome, 0x020, 32)                \
    F(cqn, 0x048, 24)
CXV_IFC_LAYOUT(create_cq_out, 0x80)

// PRM DESTROY_CQ.
#define CXV_IFC_destroy_cq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)                  \
    F(cqn, 0x048, 24)
CXV_IFC_LAYOUT(destroy_cq_in, 0x80)

#define CXV_IFC_destroy_cq_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_cq_out, 0x80)

// PRM QUERY_CQ.
#define CXV_IFC_query_cq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                \
    F(op_mod, 0x030, 16)                \
    F(cqn, 0x048, 24)
CXV_IFC_LAYOUT(query_cq_in, 0x80)

#define CXV_IFC_query_cq_out(F, S, A, T) \
    F(status, 0x000, 8)                  \
    F(syndrome, 0x020, 32)               \
    S(cq_context, 0x080, cqc)            \
    A(pas, 0x880, 64, 0)
CXV_IFC_LAYOUT(query_cq_out, 0x880)

// PRM MODIFY_CQ: op_mod 0 modifies moderation and the EQ, op_mod 1 resizes. The dword
// at 0x60 is a bit mask of the context fields to change; Linux declares it as a union
// of modify_field_select and resize_field_select, both single 32-bit masks, so we
// describe it as the one 32-bit field.
#define CXV_IFC_modify_cq_in(F, S, A, T)                  \
    F(opcode, 0x000, 16)                                  \
    F(uid, 0x010, 16)                                     \
    F(op_mod, 0x030, 16)                                  \
    F(cqn, 0x048, 24)                                     \
    F(modify_field_select_resize_field_select, 0x060, 32) \
    S(cq_context, 0x080, cqc)                             \
    F(cq_umem_valid, 0x2e0, 1)                            \
    A(pas, 0x880, 64, 0)
CXV_IFC_LAYOUT(modify_cq_in, 0x880)

#define CXV_IFC_modify_cq_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(modify_cq_out, 0x80)

// Every layout in this file, as (C++ name, PRM name) pairs for tests and printers.
#define CXV_IFC_LAYOUTS_RESOURCES(X)                    \
    X(alloc_uar_in, alloc_uar_in)                       \
    X(alloc_uar_out, alloc_uar_out)                     \
    X(dealloc_uar_in, dealloc_uar_in)                   \
    X(dealloc_uar_out, dealloc_uar_out)                 \
    X(alloc_pd_in, alloc_pd_in)                         \
    X(alloc_pd_out, alloc_pd_out)                       \
    X(dealloc_pd_in, dealloc_pd_in)                     \
    X(dealloc_pd_out, dealloc_pd_out)                   \
    X(eqc, eqc)                                         \
    X(create_eq_in, create_eq_in)                       \
    X(create_eq_out, create_eq_out)                     \
    X(destroy_eq_in, destroy_eq_in)                     \
    X(destroy_eq_out, destroy_eq_out)                   \
    X(query_eq_in, query_eq_in)                         \
    X(query_eq_out, query_eq_out)                       \
    X(eqe, eqe)                                         \
    X(comp_event, comp_event)                           \
    X(cmd_inter_comp_event, cmd_inter_comp_event)       \
    X(pages_req_event, pages_req_event)                 \
    X(port_state_change_event, port_state_change_event) \
    X(qp_events, qp_events)                             \
    X(dct_events, dct_events)                           \
    X(cq_error, cq_error)                               \
    X(affiliated_event_header, affiliated_event_header) \
    X(gen_eqe_in, gen_eqe_in)                           \
    X(mkc, mkc)                                         \
    X(create_mkey_in, create_mkey_in)                   \
    X(create_mkey_out, create_mkey_out)                 \
    X(destroy_mkey_in, destroy_mkey_in)                 \
    X(destroy_mkey_out, destroy_mkey_out)               \
    X(query_mkey_in, query_mkey_in)                     \
    X(query_mkey_out, query_mkey_out)                   \
    X(mtt, mtt)                                         \
    X(umem, umem)                                       \
    X(create_umem_in, create_umem_in)                   \
    X(create_umem_out, create_umem_out)                 \
    X(destroy_umem_in, destroy_umem_in)                 \
    X(destroy_umem_out, destroy_umem_out)               \
    X(cqc, cqc)                                         \
    X(create_cq_in, create_cq_in)                       \
    X(create_cq_out, create_cq_out)                     \
    X(destroy_cq_in, destroy_cq_in)                     \
    X(destroy_cq_out, destroy_cq_out)                   \
    X(query_cq_in, query_cq_in)                         \
    X(query_cq_out, query_cq_out)                       \
    X(modify_cq_in, modify_cq_in)                       \
    X(modify_cq_out, modify_cq_out)

}  // namespace cxv::hw::ifc
