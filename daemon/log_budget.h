// How many lines one source (a client connection, or all refused connections together)
// may put in cxvd's log: at most `per_second` in any one-second window, and the rest
// counted, to be reported in one line once the window is over. A client that loops on a
// refused request would otherwise write journald full (its own rate limit then drops
// everyone's lines, the other clients' and the daemon's own, not only the flood's).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>

namespace cxv::daemon {

class log_budget {
public:
    using clock = std::chrono::steady_clock;
    static constexpr unsigned default_per_second = 10;
    static constexpr clock::duration window = std::chrono::seconds(1);

    explicit log_budget(unsigned per_second = default_per_second) noexcept : per_second_(per_second) {}

    // Whether a line may be logged at `now`. When this opens a new window and the last one
    // had lines held back, `missed` gets their count (log it first, so the lines stay in
    // order), else 0.
    bool admit(clock::time_point now, std::uint64_t& missed) noexcept {
        missed = 0;
        if (!open_ || now >= start_ + window) {
            missed = std::exchange(held_, 0);
            open_ = true;
            start_ = now;
            used_ = 0;
        }
        if (used_ < per_second_) {
            ++used_;
            return true;
        }
        ++held_;
        return false;
    }
    // Lines held back in a window that is over by `now` (0 if none, or it is still open):
    // their count, which is then reported. For a source that went quiet after its flood.
    std::uint64_t expired(clock::time_point now) noexcept {
        if (held_ == 0 || now < start_ + window) return 0;
        return std::exchange(held_, 0);
    }
    // Everything held back, whatever the window (the source goes).
    std::uint64_t take() noexcept { return std::exchange(held_, 0); }
    // When expired() will have a count to report (none: nothing held back).
    std::optional<clock::time_point> due() const noexcept {
        if (held_ == 0) return std::nullopt;
        return start_ + window;
    }

private:
    unsigned per_second_;
    bool open_ = false;
    clock::time_point start_{};
    unsigned used_ = 0;
    std::uint64_t held_ = 0;
};

}  // namespace cxv::daemon
