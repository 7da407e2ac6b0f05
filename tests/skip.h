// Test cases that cannot run are skipped, never passed. A case that needs something this
// machine lacks is decorated when it registers:
//
//   TEST_CASE("tshark decodes ..." * cxv::test::skip_unless(cxv::test::on_path("tshark"),
//                                                           "tshark is not installed (tools/setup installs it)"))
//
// doctest then counts it as skipped, and the reason goes to the log as "SKIPPED: why".
// tools/test reports every such line, and under CI=true counts each as a failure: CI's
// machine has everything tools/setup installs and runs as root, so a skip there hides a
// test that should have run. Only "SKIPPED in this build: why" (skip_in_build: the
// sanitizer runtimes cannot do what the case checks) is reported and allowed everywhere.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <doctest/doctest.h>

namespace cxv::test {

inline doctest::skip skip_unless(bool can_run, const char* why) {
    if (!can_run) {
        std::printf("SKIPPED: %s\n", why);
        std::fflush(stdout);
    }
    return doctest::skip(!can_run);
}

inline doctest::skip skip_in_build(bool cannot_run, const char* why) {
    if (cannot_run) {
        std::printf("SKIPPED in this build: %s\n", why);
        std::fflush(stdout);
    }
    return doctest::skip(cannot_run);
}

// Whether `program` is an executable file in a directory of PATH (looked up without a
// shell or a child process, so it can decide a skip while the cases register).
inline bool on_path(std::string_view program) {
    const char* path = std::getenv("PATH");
    std::string_view rest = path != nullptr ? path : "/usr/bin:/bin";
    while (!rest.empty()) {
        const auto colon = rest.find(':');
        const std::string_view dir = rest.substr(0, colon);
        rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
        if (dir.empty()) continue;
        const std::string file = std::string(dir) + "/" + std::string(program);
        if (::access(file.c_str(), X_OK) == 0) return true;
    }
    return false;
}

}  // namespace cxv::test
