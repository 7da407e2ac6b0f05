// PLACEHOLDER: being written; every handler here refuses its command for now.
#include "sim/firmware.h"

namespace cxv::sim {

cmd_reply firmware::query_hca_vport_context(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::query_hca_vport_gid(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::query_hca_vport_pkey(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::query_nic_vport_context(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::modify_nic_vport_context(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::mad_ifc(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }

}  // namespace cxv::sim
