// result<T>: a value or an error, the return type of every create() in cxv (std::expected
// arrives in C++23; this is the subset we use). It is not part of the hardware interface,
// so it lives in base/, the package of vocabulary types that every layer (hw/ included)
// may use and that knows nothing of ConnectX.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace cxv {

struct error {
    int code = 0;         // an errno value, for the C API and for callers to branch on
    std::string message;  // what a person needs to act on it
};

template <typename T>
class [[nodiscard]] result {
public:
    result(T value) : v_(std::move(value)) {}
    result(::cxv::error e) : v_(std::move(e)) {}

    bool ok() const noexcept { return v_.index() == 0; }
    explicit operator bool() const noexcept { return ok(); }

    T& value() & { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    const T& value() const& { return std::get<0>(v_); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }

    const ::cxv::error& error() const& { return std::get<1>(v_); }

private:
    std::variant<T, ::cxv::error> v_;
};

// For operations with nothing to return.
struct done {};
using status = result<done>;
inline status ok_status() { return done{}; }

}  // namespace cxv
