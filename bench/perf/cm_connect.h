// cxv-perf -R: the QPs connected with rdma_cm(3), as perftest's -R connects them with
// rdma-core's librdmacm, here through cxv's own (api/abi: the code librdmacm.so.1 is made
// of, linked in; docs/exec.md). On -p, in order:
//
//   1. The run's link: an RC connection of its own, its QP made by rdma_create_qp, that
//      carries the parameters and the barriers, as perftest's -R carries them over an
//      rdma_cm connection. Its request's private data names the test, the transport and
//      the QP count; the server rejects a client that differs (rdma_reject, the reason as
//      private data) and then listens again on the same port for the test QPs.
//   2. Once the parameters agree, one connection per test QP (RC, UC: an RDMA_PS_TCP id;
//      UD: RDMA_PS_UDP), each naming cxv-perf's own QP by number (rdma_conn_param's
//      qp_num) with its buffer's address, rkey and length, its LID and GID as private
//      data. The PSNs are the manager's (rdma_init_qp_attr); cxv-perf moves its QPs with
//      its own attributes (connect_qp) before rdma_accept and before rdma_establish.
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/perf/oob.h"
#include "bench/perf/setup.h"

namespace cxv::perf {

// What an rdma_cm event says, copied before rdma_ack_cm_event.
struct cm_event_copy {
    rdma_cm_event_type type{};
    int status = 0;
    rdma_cm_id* id = nullptr;
    rdma_cm_id* listen_id = nullptr;
    std::uint32_t qp_num = 0;
    std::vector<std::uint8_t> data;  // the private data
};

class cm_link final : public link {
public:
    // Server: listens on `port` and accepts the client's link within `timeout`.
    static result<std::unique_ptr<cm_link>> accept(const options& o, const function& fn, unsigned port,
                                                   std::chrono::milliseconds timeout);
    // Client: connects the link to host:port, retrying while nobody listens for `retry_for`.
    static result<std::unique_ptr<cm_link>> connect(const options& o, const function& fn, const std::string& host,
                                                    unsigned port, std::chrono::milliseconds retry_for);
    // The test QPs' connections, QP 0 first (the server: each within `timeout`).
    status connect_qps(side& s, std::chrono::milliseconds timeout);
    ~cm_link() override;

    status send(const void* p, std::size_t n) override;
    status recv(void* p, std::size_t n, std::chrono::milliseconds timeout) override;
    bool readable() override;

private:
    explicit cm_link(const options& o) : o_(o) {}
    status open_channel(const function& fn);
    status make_link_qp();
    status listen(unsigned port, rdma_port_space ps);
    status resolve(rdma_cm_id* id);  // to dst_: its address, then its route
    // The next event for `want` (an id, or a listener's request) within `timeout`: from
    // the backlog first. Events of other ids are dropped; the peer's disconnect of any
    // ends the wait.
    result<cm_event_copy> next_event(rdma_cm_id* want, std::chrono::milliseconds timeout, const std::string& what);
    // 1: a completion in `wc`; 0: none by `end`; -1: none, and the peer disconnected.
    // Events that come meanwhile go to the backlog (a request may come while the link
    // waits for its send's completion).
    int take(ibv_cq* cq, ibv_comp_channel* cc, ibv_wc& wc, std::chrono::steady_clock::time_point end);

    const options& o_;
    bool server_ = false;
    std::string peer_;         // HOST:PORT (the client)
    sockaddr_storage dst_{};   // its address (the client)
    rdma_event_channel* ec_ = nullptr;
    rdma_cm_id* listener_ = nullptr;
    rdma_cm_id* link_ = nullptr;
    bool linked_ = false;
    std::vector<rdma_cm_id*> qp_ids_;
    std::unique_ptr<std::byte[]> buf_;
    ibv_mr* mr_ = nullptr;
    std::optional<ibv_wc> pending_;  // a received message readable() took from the CQ
    bool peer_gone_ = false;
    std::deque<cm_event_copy> backlog_;
};

}  // namespace cxv::perf
