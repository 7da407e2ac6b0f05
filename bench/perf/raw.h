// cxv-perf's raw Ethernet tests: perftest's raw_ethernet_bw, raw_ethernet_lat and
// raw_ethernet_burst_lat on cxv's raw Ethernet queues (api/cxv_eth.h), with perftest's
// options for them (-B/-E MACs, -J/-j IPv4 addresses, -K/-k ports, --tcp, --burst_size,
// --reply_every) and its columns, plus percentiles and JSON. Unlike perftest's raw tests,
// the two sides meet over cxv-perf's TCP exchange (-p): they agree on the parameters,
// learn each other's MAC, and the client starts only once the server's queue and rule
// are in place.
#pragma once

#include <string_view>

namespace cxv::perf {

bool is_raw_test(std::string_view name);
// The whole run for argv (argv[1] a raw test); the process's exit status.
int run_raw(int argc, char** argv);

}  // namespace cxv::perf
