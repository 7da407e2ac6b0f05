// cxv-perf -R: the QPs connected by the connection manager's protocol, the one cxv's
// librdmacm.so.1 speaks (api/abi/cm_wire.h), as perftest's -R connects them with
// rdma_cm(7). One TCP connection per QP, as one rdma_cm_id per QP: the client sends a
// REQ, the server moves its QP to RTS and answers with a REP (or a REJ saying why), the
// client moves its QP to RTS and sends the RTU (none for UD, as rdma_cm). Each side's
// buffer address, rkey and length travel as the REQ's and REP's private data. The first
// connection then carries the rest of the run's exchange (parameters, barriers), as
// perftest's -R exchanges them over its connected QPs.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "bench/perf/oob.h"
#include "bench/perf/setup.h"

namespace cxv::perf {

// Server: accepts QP 0's connection within `first_timeout`, the others within
// `timeout`, and answers each REQ. Returns the connections, the first one the channel.
result<std::vector<channel>> cm_accept(side& s, listener& l, std::chrono::milliseconds first_timeout,
                                       std::chrono::milliseconds timeout);
// Client: connects each QP to host:port (a refused connection retried for `retry_for`).
result<std::vector<channel>> cm_connect(side& s, const std::string& host, unsigned port,
                                        std::chrono::milliseconds retry_for);

}  // namespace cxv::perf
