// fastpath's other side: rdma-core's mlx5 provider built from a user's source tree and
// driven in the same shapes (bench/rdma_core/), and the callgrind count both sides share.
// Kept out of fastpath.cc, the translation unit callgrind measures, so that its code
// cannot change how the compiler inlines cxv's fast path there.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace cxv::bench {

// The rdma-core release docs/performance.md's side-by-side figures come from (its newest
// tag when they were taken); another tree is measured all the same, and said to differ.
inline constexpr const char* kPinnedRdmaCore = "64.0";

// Instructions per WR or CQE of `op`: valgrind --tool=callgrind counting only inside the
// functions matching `toggle`, over `program` + {--loop op --iters N} for N = 2000 and
// 12000, the difference divided by the extra WRs or CQEs. -1 when a run failed.
double callgrind_per_op(const std::vector<std::string>& program, const std::string& toggle, const std::string& op,
                        unsigned per_call);

// rdma-core's provider, built into a temporary directory (removed on destruction).
class rdma_core_side {
public:
    // Builds `tree` (an rdma-core source tree) with bench/rdma_core/build.sh and the
    // compiler and flags fastpath itself was built with. `self` is fastpath's own path,
    // beside which Bazel keeps the scripts (its runfiles).
    static result<rdma_core_side> create(const std::string& tree, const std::string& self);
    rdma_core_side(rdma_core_side&& o) noexcept;
    rdma_core_side& operator=(rdma_core_side&&) = delete;
    rdma_core_side(const rdma_core_side&) = delete;
    ~rdma_core_side();

    // What was built: the release, the tree, the compiler and flags, the stand-ins.
    const std::string& description() const noexcept { return info_; }
    // PACKAGE_VERSION of the tree's CMakeLists.txt ("64.0").
    const std::string& release() const noexcept { return release_; }
    // Whether the harness has `op` (bench/fastpath.cc's names), and its WRs or CQEs per call.
    bool has(const std::string& op, unsigned& per_call) const;
    // The median ns per WR or CQE over `repeats` runs of `calls` calls, as fastpath times
    // its own; -1 when the run failed.
    double ns_per_op(const std::string& op, unsigned repeats, unsigned calls) const;
    double instructions_per_op(const std::string& op, unsigned per_call) const;

private:
    rdma_core_side() = default;
    std::string dir_;  // the build; empty once moved from
    std::string program_;
    std::string info_;
    std::string release_;
    std::vector<std::pair<std::string, unsigned>> ops_;
};

}  // namespace cxv::bench
