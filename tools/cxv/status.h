// cxv status: what a running cxvd serves (through its socket): functions, firmware, port
// state, and every client with its objects and pinned memory.
#pragma once

#include <string>

namespace cxv::tool {

// `socket` empty: CXV_DAEMON, else /run/cxv/cxvd.sock.
int print_status(const std::string& socket);

}  // namespace cxv::tool
