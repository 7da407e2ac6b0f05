// PLACEHOLDER: being written; every handler here refuses its command for now.
#include "sim/firmware.h"

namespace cxv::sim {

cmd_reply firmware::create_qp(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::destroy_qp(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::query_qp(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::modify_qp(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }

}  // namespace cxv::sim
