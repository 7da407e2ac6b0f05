// PLACEHOLDER: being written; every handler here refuses its command for now.
#include "sim/firmware.h"

namespace cxv::sim {

cmd_reply firmware::create_cq(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::destroy_cq(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::query_cq(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }
cmd_reply firmware::modify_cq(cmd_ctx&) { return fail(hw::cmd_status::BAD_OP, hw::cmd_syndrome::UNKNOWN_OPCODE); }

void firmware::cq_doorbell(std::uint64_t) {}

}  // namespace cxv::sim
