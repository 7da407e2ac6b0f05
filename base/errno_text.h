// errno values as people read them: an error that names what failed and why, and the
// symbolic name (EPERM) for log lines a person greps.
#pragma once

#include <cstring>
#include <string>
#include <string_view>

#include "base/result.h"

namespace cxv {

// "what: strerror(e)", with e as the error's code.
inline error sys_error(int e, std::string_view what) {
    std::string text(what);
    text += ": ";
    text += std::strerror(e);
    return error{e, std::move(text)};
}

// "EPERM"; "errno 4095" for a value the C library has no name for.
inline std::string errno_name(int e) {
    const char* n = ::strerrorname_np(e);
    return n != nullptr ? std::string(n) : "errno " + std::to_string(e);
}

}  // namespace cxv
