// For the test programs that run as processes of their own (peers under cxv-sim, not
// doctest binaries): a failure is one line on stderr, prefixed with the program's name,
// and exit status 1.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "base/result.h"

namespace cxv::test {

// Set by main() to the program's name.
inline const char* program_name = "test program";

[[noreturn]] inline void die(const std::string& what) {
    std::fprintf(stderr, "%s: %s\n", program_name, what.c_str());
    std::exit(1);
}

template <typename T>
T must(result<T> r, const char* what) {
    if (!r) die(std::string(what) + ": " + r.error().message);
    return std::move(r).value();
}

inline void must(const status& s, const char* what) {
    if (!s) die(std::string(what) + ": " + s.error().message);
}

}  // namespace cxv::test
