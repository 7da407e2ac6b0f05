// Opcode and status tables of the PRM, each with names for printing.
//
// Each table is an X-macro so that one list gives the enum, the name lookup and the
// conformance checks (tests/hw compares command opcodes with Linux's MLX5_CMD_OP_* and
// WQE/CQE values with rdma-core's mlx5dv.h).
#pragma once

#include <cstdint>
#include <string_view>

namespace cxv::hw {

// Firmware command opcodes (PRM "Command Reference"). X(C++ name, PRM name, value):
// the PRM spells the QP-to-error and QP-to-reset commands with a leading digit.
#define CXV_CMD_OPCODES_X(X)                                                         \
    X(QUERY_HCA_CAP, QUERY_HCA_CAP, 0x100)                                           \
    X(QUERY_ADAPTER, QUERY_ADAPTER, 0x101)                                           \
    X(INIT_HCA, INIT_HCA, 0x102)                                                     \
    X(TEARDOWN_HCA, TEARDOWN_HCA, 0x103)                                             \
    X(ENABLE_HCA, ENABLE_HCA, 0x104)                                                 \
    X(DISABLE_HCA, DISABLE_HCA, 0x105)                                               \
    X(QUERY_PAGES, QUERY_PAGES, 0x107)                                               \
    X(MANAGE_PAGES, MANAGE_PAGES, 0x108)                                             \
    X(SET_HCA_CAP, SET_HCA_CAP, 0x109)                                               \
    X(QUERY_ISSI, QUERY_ISSI, 0x10a)                                                 \
    X(SET_ISSI, SET_ISSI, 0x10b)                                                     \
    X(SET_DRIVER_VERSION, SET_DRIVER_VERSION, 0x10d)                                 \
    X(CREATE_MKEY, CREATE_MKEY, 0x200)                                               \
    X(QUERY_MKEY, QUERY_MKEY, 0x201)                                                 \
    X(DESTROY_MKEY, DESTROY_MKEY, 0x202)                                             \
    X(QUERY_SPECIAL_CONTEXTS, QUERY_SPECIAL_CONTEXTS, 0x203)                         \
    X(CREATE_EQ, CREATE_EQ, 0x301)                                                   \
    X(DESTROY_EQ, DESTROY_EQ, 0x302)                                                 \
    X(QUERY_EQ, QUERY_EQ, 0x303)                                                     \
    X(GEN_EQE, GEN_EQE, 0x304)                                                       \
    X(CREATE_CQ, CREATE_CQ, 0x400)                                                   \
    X(DESTROY_CQ, DESTROY_CQ, 0x401)                                                 \
    X(QUERY_CQ, QUERY_CQ, 0x402)                                                     \
    X(MODIFY_CQ, MODIFY_CQ, 0x403)                                                   \
    X(CREATE_QP, CREATE_QP, 0x500)                                                   \
    X(DESTROY_QP, DESTROY_QP, 0x501)                                                 \
    X(RST2INIT_QP, RST2INIT_QP, 0x502)                                               \
    X(INIT2RTR_QP, INIT2RTR_QP, 0x503)                                               \
    X(RTR2RTS_QP, RTR2RTS_QP, 0x504)                                                 \
    X(RTS2RTS_QP, RTS2RTS_QP, 0x505)                                                 \
    X(SQERR2RTS_QP, SQERR2RTS_QP, 0x506)                                             \
    X(QP_2ERR, 2ERR_QP, 0x507)                                                       \
    X(QP_2RST, 2RST_QP, 0x50a)                                                       \
    X(QUERY_QP, QUERY_QP, 0x50b)                                                     \
    X(SQD_RTS_QP, SQD_RTS_QP, 0x50c)                                                 \
    X(MAD_IFC, MAD_IFC, 0x50d)                                                       \
    X(INIT2INIT_QP, INIT2INIT_QP, 0x50e)                                             \
    X(CREATE_SRQ, CREATE_SRQ, 0x700)                                                 \
    X(DESTROY_SRQ, DESTROY_SRQ, 0x701)                                               \
    X(QUERY_SRQ, QUERY_SRQ, 0x702)                                                   \
    X(ARM_RQ, ARM_RQ, 0x703)                                                         \
    X(CREATE_XRC_SRQ, CREATE_XRC_SRQ, 0x705)                                         \
    X(DESTROY_XRC_SRQ, DESTROY_XRC_SRQ, 0x706)                                       \
    X(QUERY_XRC_SRQ, QUERY_XRC_SRQ, 0x707)                                           \
    X(ARM_XRC_SRQ, ARM_XRC_SRQ, 0x708)                                               \
    X(QUERY_VPORT_STATE, QUERY_VPORT_STATE, 0x750)                                   \
    X(MODIFY_VPORT_STATE, MODIFY_VPORT_STATE, 0x751)                                 \
    X(QUERY_NIC_VPORT_CONTEXT, QUERY_NIC_VPORT_CONTEXT, 0x754)                       \
    X(MODIFY_NIC_VPORT_CONTEXT, MODIFY_NIC_VPORT_CONTEXT, 0x755)                     \
    X(QUERY_ROCE_ADDRESS, QUERY_ROCE_ADDRESS, 0x760)                                 \
    X(SET_ROCE_ADDRESS, SET_ROCE_ADDRESS, 0x761)                                     \
    X(QUERY_HCA_VPORT_CONTEXT, QUERY_HCA_VPORT_CONTEXT, 0x762)                       \
    X(MODIFY_HCA_VPORT_CONTEXT, MODIFY_HCA_VPORT_CONTEXT, 0x763)                     \
    X(QUERY_HCA_VPORT_GID, QUERY_HCA_VPORT_GID, 0x764)                               \
    X(QUERY_HCA_VPORT_PKEY, QUERY_HCA_VPORT_PKEY, 0x765)                             \
    X(QUERY_VPORT_COUNTER, QUERY_VPORT_COUNTER, 0x770)                               \
    X(ALLOC_Q_COUNTER, ALLOC_Q_COUNTER, 0x771)                                       \
    X(DEALLOC_Q_COUNTER, DEALLOC_Q_COUNTER, 0x772)                                   \
    X(QUERY_Q_COUNTER, QUERY_Q_COUNTER, 0x773)                                       \
    X(ALLOC_PD, ALLOC_PD, 0x800)                                                     \
    X(DEALLOC_PD, DEALLOC_PD, 0x801)                                                 \
    X(ALLOC_UAR, ALLOC_UAR, 0x802)                                                   \
    X(DEALLOC_UAR, DEALLOC_UAR, 0x803)                                               \
    X(ACCESS_REG, ACCESS_REG, 0x805)                                                 \
    X(ATTACH_TO_MCG, ATTACH_TO_MCG, 0x806)                                           \
    X(DETACH_FROM_MCG, DETACH_FROM_MCG, 0x807)                                       \
    X(ALLOC_XRCD, ALLOC_XRCD, 0x80e)                                                 \
    X(DEALLOC_XRCD, DEALLOC_XRCD, 0x80f)                                             \
    X(ALLOC_TRANSPORT_DOMAIN, ALLOC_TRANSPORT_DOMAIN, 0x816)                         \
    X(DEALLOC_TRANSPORT_DOMAIN, DEALLOC_TRANSPORT_DOMAIN, 0x817)                     \
    X(CREATE_TIR, CREATE_TIR, 0x900)                                                 \
    X(MODIFY_TIR, MODIFY_TIR, 0x901)                                                 \
    X(DESTROY_TIR, DESTROY_TIR, 0x902)                                               \
    X(QUERY_TIR, QUERY_TIR, 0x903)                                                   \
    X(CREATE_SQ, CREATE_SQ, 0x904)                                                   \
    X(MODIFY_SQ, MODIFY_SQ, 0x905)                                                   \
    X(DESTROY_SQ, DESTROY_SQ, 0x906)                                                 \
    X(QUERY_SQ, QUERY_SQ, 0x907)                                                     \
    X(CREATE_RQ, CREATE_RQ, 0x908)                                                   \
    X(MODIFY_RQ, MODIFY_RQ, 0x909)                                                   \
    X(DESTROY_RQ, DESTROY_RQ, 0x90a)                                                 \
    X(QUERY_RQ, QUERY_RQ, 0x90b)                                                     \
    X(CREATE_RMP, CREATE_RMP, 0x90c)                                                 \
    X(MODIFY_RMP, MODIFY_RMP, 0x90d)                                                 \
    X(DESTROY_RMP, DESTROY_RMP, 0x90e)                                               \
    X(QUERY_RMP, QUERY_RMP, 0x90f)                                                   \
    X(CREATE_TIS, CREATE_TIS, 0x912)                                                 \
    X(MODIFY_TIS, MODIFY_TIS, 0x913)                                                 \
    X(DESTROY_TIS, DESTROY_TIS, 0x914)                                               \
    X(QUERY_TIS, QUERY_TIS, 0x915)                                                   \
    X(CREATE_RQT, CREATE_RQT, 0x916)                                                 \
    X(MODIFY_RQT, MODIFY_RQT, 0x917)                                                 \
    X(DESTROY_RQT, DESTROY_RQT, 0x918)                                               \
    X(QUERY_RQT, QUERY_RQT, 0x919)                                                   \
    X(SET_FLOW_TABLE_ROOT, SET_FLOW_TABLE_ROOT, 0x92f)                               \
    X(CREATE_FLOW_TABLE, CREATE_FLOW_TABLE, 0x930)                                   \
    X(DESTROY_FLOW_TABLE, DESTROY_FLOW_TABLE, 0x931)                                 \
    X(QUERY_FLOW_TABLE, QUERY_FLOW_TABLE, 0x932)                                     \
    X(CREATE_FLOW_GROUP, CREATE_FLOW_GROUP, 0x933)                                   \
    X(DESTROY_FLOW_GROUP, DESTROY_FLOW_GROUP, 0x934)                                 \
    X(QUERY_FLOW_GROUP, QUERY_FLOW_GROUP, 0x935)                                     \
    X(SET_FLOW_TABLE_ENTRY, SET_FLOW_TABLE_ENTRY, 0x936)                             \
    X(QUERY_FLOW_TABLE_ENTRY, QUERY_FLOW_TABLE_ENTRY, 0x937)                         \
    X(DELETE_FLOW_TABLE_ENTRY, DELETE_FLOW_TABLE_ENTRY, 0x938)                       \
    X(ALLOC_FLOW_COUNTER, ALLOC_FLOW_COUNTER, 0x939)                                 \
    X(DEALLOC_FLOW_COUNTER, DEALLOC_FLOW_COUNTER, 0x93a)                             \
    X(QUERY_FLOW_COUNTER, QUERY_FLOW_COUNTER, 0x93b)                                 \
    X(MODIFY_FLOW_TABLE, MODIFY_FLOW_TABLE, 0x93c)                                   \
    X(CREATE_GENERAL_OBJECT, CREATE_GENERAL_OBJECT, 0xa00)                           \
    X(MODIFY_GENERAL_OBJECT, MODIFY_GENERAL_OBJECT, 0xa01)                           \
    X(QUERY_GENERAL_OBJECT, QUERY_GENERAL_OBJECT, 0xa02)                             \
    X(DESTROY_GENERAL_OBJECT, DESTROY_GENERAL_OBJECT, 0xa03)                         \
    X(CREATE_UMEM, CREATE_UMEM, 0xa08)                                               \
    X(DESTROY_UMEM, DESTROY_UMEM, 0xa0a)

#define CXV_CMD_OPCODES(X) CXV_CMD_OPCODES_X(X)

enum class cmd_opcode : std::uint16_t {
#define CXV_ENUM_ENTRY(name, prm, value) name = value,
    CXV_CMD_OPCODES_X(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// Command status (output dword 0, bits 31:24; PRM "Command Return Status").
#define CXV_CMD_STATUSES(X)            \
    X(OK, 0x00)                        \
    X(INTERNAL_ERR, 0x01)              \
    X(BAD_OP, 0x02)                    \
    X(BAD_PARAM, 0x03)                 \
    X(BAD_SYS_STATE, 0x04)             \
    X(BAD_RESOURCE, 0x05)              \
    X(RESOURCE_BUSY, 0x06)             \
    X(EXCEED_LIM, 0x08)                \
    X(BAD_RES_STATE, 0x09)             \
    X(BAD_INDEX, 0x0a)                 \
    X(NO_RESOURCES, 0x0f)              \
    X(BAD_QP_STATE, 0x10)              \
    X(BAD_PKT, 0x30)                   \
    X(BAD_SIZE_OUTS_CQES, 0x40)        \
    X(BAD_INPUT_LEN, 0x50)             \
    X(BAD_OUTPUT_LEN, 0x51)

enum class cmd_status : std::uint8_t {
#define CXV_ENUM_ENTRY(name, value) name = value,
    CXV_CMD_STATUSES(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// Delivery status of the command interface itself (cmd_queue_entry.status, 7 bits):
// whether the entry and its mailboxes could be read at all.
#define CXV_CMD_DELIVERY_STATUSES(X) \
    X(OK, 0x00)                      \
    X(SIGNATURE_ERR, 0x01)           \
    X(TOKEN_ERR, 0x02)               \
    X(BAD_BLOCK_NUMBER, 0x03)        \
    X(OUTPUT_POINTER_ALIGN_ERR, 0x04) \
    X(INPUT_POINTER_ALIGN_ERR, 0x05) \
    X(FW_ERR, 0x06)                  \
    X(INPUT_LENGTH_ERR, 0x07)        \
    X(OUTPUT_LENGTH_ERR, 0x08)       \
    X(RESERVED_NOT_ZERO, 0x09)       \
    X(BAD_COMMAND_TYPE, 0x10)

enum class cmd_delivery_status : std::uint8_t {
#define CXV_ENUM_ENTRY(name, value) name = value,
    CXV_CMD_DELIVERY_STATUSES(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// cmd_queue_entry.type: the only transport the PRM defines.
inline constexpr std::uint8_t cmd_queue_entry_type_pcie = 0x7;

// WQE opcodes (control segment opmod_idx_opcode bits 7:0; PRM "Send WQE Opcodes").
#define CXV_WQE_OPCODES(X)        \
    X(NOP, 0x00)                  \
    X(SEND_INVAL, 0x01)           \
    X(RDMA_WRITE, 0x08)           \
    X(RDMA_WRITE_IMM, 0x09)       \
    X(SEND, 0x0a)                 \
    X(SEND_IMM, 0x0b)             \
    X(LSO, 0x0e)                  \
    X(RDMA_READ, 0x10)            \
    X(ATOMIC_CS, 0x11)            \
    X(ATOMIC_FA, 0x12)            \
    X(ATOMIC_MASKED_CS, 0x14)     \
    X(ATOMIC_MASKED_FA, 0x15)     \
    X(BIND_MW, 0x18)              \
    X(CONFIG_CMD, 0x1f)           \
    X(LOCAL_INVAL, 0x1b)          \
    X(UMR, 0x25)

enum class wqe_opcode : std::uint8_t {
#define CXV_ENUM_ENTRY(name, value) name = value,
    CXV_WQE_OPCODES(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// CQE opcodes (op_own bits 7:4; PRM "CQE Opcodes").
#define CXV_CQE_OPCODES(X)     \
    X(REQ, 0x0)                \
    X(RESP_WR_IMM, 0x1)        \
    X(RESP_SEND, 0x2)          \
    X(RESP_SEND_IMM, 0x3)      \
    X(RESP_SEND_INV, 0x4)      \
    X(RESIZE_CQ, 0x5)          \
    X(NO_PACKET, 0x6)          \
    X(SIGNATURE_ERR, 0xc)      \
    X(REQ_ERR, 0xd)            \
    X(RESP_ERR, 0xe)           \
    X(INVALID, 0xf)

enum class cqe_opcode : std::uint8_t {
#define CXV_ENUM_ENTRY(name, value) name = value,
    CXV_CQE_OPCODES(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// Error CQE syndromes (PRM "Error CQE" syndrome field).
#define CXV_CQE_SYNDROMES(X)                  \
    X(LOCAL_LENGTH_ERR, 0x01)                 \
    X(LOCAL_QP_OP_ERR, 0x02)                  \
    X(LOCAL_PROT_ERR, 0x04)                   \
    X(WR_FLUSH_ERR, 0x05)                     \
    X(MW_BIND_ERR, 0x06)                      \
    X(BAD_RESP_ERR, 0x10)                     \
    X(LOCAL_ACCESS_ERR, 0x11)                 \
    X(REMOTE_INVAL_REQ_ERR, 0x12)             \
    X(REMOTE_ACCESS_ERR, 0x13)                \
    X(REMOTE_OP_ERR, 0x14)                    \
    X(TRANSPORT_RETRY_EXC_ERR, 0x15)          \
    X(RNR_RETRY_EXC_ERR, 0x16)                \
    X(REMOTE_ABORTED_ERR, 0x22)

enum class cqe_syndrome : std::uint8_t {
#define CXV_ENUM_ENTRY(name, value) name = value,
    CXV_CQE_SYNDROMES(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// Event types (EQE event_type; PRM "Event Queue Element" table of events), and the bit
// of each in an EQ's 64-bit event bitmask.
#define CXV_EVENT_TYPES(X)                     \
    X(COMP, 0x00)                              \
    X(PATH_MIG, 0x01)                          \
    X(COMM_EST, 0x02)                          \
    X(SQ_DRAINED, 0x03)                        \
    X(SRQ_LAST_WQE, 0x13)                      \
    X(SRQ_RQ_LIMIT, 0x14)                      \
    X(CQ_ERROR, 0x04)                          \
    X(WQ_CATAS_ERROR, 0x05)                    \
    X(PATH_MIG_FAILED, 0x07)                   \
    X(WQ_INVAL_REQ_ERROR, 0x10)                \
    X(WQ_ACCESS_ERROR, 0x11)                   \
    X(SRQ_CATAS_ERROR, 0x12)                   \
    X(INTERNAL_ERROR, 0x08)                    \
    X(PORT_CHANGE, 0x09)                       \
    X(GPIO_EVENT, 0x15)                        \
    X(REMOTE_CONFIG, 0x19)                     \
    X(DB_BF_CONGESTION, 0x1a)                  \
    X(STALL_EVENT, 0x1b)                       \
    X(CMD, 0x0a)                               \
    X(PAGE_REQUEST, 0x0b)                      \
    X(PAGE_FAULT, 0x0c)                        \
    X(NIC_VPORT_CHANGE, 0x0d)

enum class event_type : std::uint8_t {
#define CXV_ENUM_ENTRY(name, value) name = value,
    CXV_EVENT_TYPES(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// What an affiliated event is about (PRM "Events", the EQE's queue number): a CQ, a QP
// (its send or receive queue) or an SRQ; none for an unaffiliated type. The one table the
// daemon routes by and the verbs layer reports by.
enum class event_object : std::uint8_t { none, cq, qp, srq };
constexpr event_object affiliated_object(event_type t) noexcept {
    switch (t) {
    case event_type::CQ_ERROR: return event_object::cq;
    case event_type::COMM_EST:
    case event_type::SQ_DRAINED:
    case event_type::SRQ_LAST_WQE:  // names the QP whose last WQE left the SRQ
    case event_type::WQ_CATAS_ERROR:
    case event_type::WQ_INVAL_REQ_ERROR:
    case event_type::WQ_ACCESS_ERROR:
    case event_type::PATH_MIG:
    case event_type::PATH_MIG_FAILED: return event_object::qp;
    case event_type::SRQ_CATAS_ERROR:
    case event_type::SRQ_RQ_LIMIT: return event_object::srq;
    default: return event_object::none;
    }
}

// Port state change subtypes (EQE sub_type of a PORT_CHANGE event).
#define CXV_PORT_CHANGE_SUBTYPES(X) \
    X(DOWN, 0x1)                    \
    X(ACTIVE, 0x4)                  \
    X(INITIALIZED, 0x5)             \
    X(LID, 0x6)                     \
    X(PKEY, 0x7)                    \
    X(GUID, 0x8)                    \
    X(CLIENT_REREG, 0x9)

enum class port_change_subtype : std::uint8_t {
#define CXV_ENUM_ENTRY(name, value) name = value,
    CXV_PORT_CHANGE_SUBTYPES(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// Names for printing; an unknown value gives an empty view.
std::string_view name(cmd_opcode v) noexcept;
std::string_view name(cmd_status v) noexcept;
std::string_view name(cmd_delivery_status v) noexcept;
std::string_view name(wqe_opcode v) noexcept;
std::string_view name(cqe_opcode v) noexcept;
std::string_view name(cqe_syndrome v) noexcept;
std::string_view name(event_type v) noexcept;
std::string_view name(port_change_subtype v) noexcept;

}  // namespace cxv::hw
