// cxv list and cxv info of the functions a cxvd serves (CXV_DAEMON or --socket): what the
// daemon says of them (HELLO), and for info what a client attached through it sees.
#pragma once

#include <string>

namespace cxv::tool {

// The socket `cxv list` / `cxv info` ask: --socket if given, else $CXV_DAEMON, else
// empty (PCI discovery and VFIO as without a daemon).
std::string daemon_socket(const std::string& given);

int print_daemon_list(const std::string& socket, bool json);
// `bdf` empty: the daemon's first function. What HELLO tells of it and its vport counters
// now (COUNTERS); nothing is claimed, brought up or torn down.
int print_daemon_info(const std::string& socket, const std::string& bdf, bool json);

}  // namespace cxv::tool
