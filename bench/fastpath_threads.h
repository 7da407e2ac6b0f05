// The multi-producer ring from several threads at once (fastpath's scaling line): each
// thread posts its share while whichever thread finds the ring full frees what the
// device would have completed. Out of fastpath.cc, as fastpath_rdma_core.h is.
#pragma once

namespace cxv::bench {

struct producer_ops {
    void* ring;
    bool (*post)(void* ring);     // one WR; false when the ring is full
    void (*retire)(void* ring);   // everything published is complete (one thread at a time)
};

struct scaling_figures {
    double ns_per_post = -1;  // wall time over the posts of one thread
    double posts_per_us = -1; // all threads' posts over the wall time
};

// `threads` threads post `posts` WRs each, started together; -1 figures when a thread
// could not post for 10 s (a ring that never frees) or the run took over a minute.
scaling_figures run_producers(const producer_ops& ops, unsigned threads, unsigned posts);

}  // namespace cxv::bench
