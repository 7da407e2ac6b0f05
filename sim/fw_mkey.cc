// PLACEHOLDER: being written; every handler here refuses its command for now.
#include "sim/firmware.h"

namespace cxv::sim {

cmd_reply firmware::create_mkey(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::destroy_mkey(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::query_mkey(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::create_umem(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::destroy_umem(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }

}  // namespace cxv::sim
