"""The tests of two cxv-perf processes on the model."""

load("//tests:defs.bzl", "doctest_test")

def perf_pair_test(name, deps = []):
    """A doctest of cxv-perf processes under cxv-sim run, the binaries found by the environment."""
    doctest_test(
        name = name,
        size = "large",
        deps = deps,
        data = [
            "//bench/perf:cxv-perf",
            "//sim:cxv-sim",
        ],
        env = {
            "CXV_SIM": "$(rootpath //sim:cxv-sim)",
            "CXV_PERF": "$(rootpath //bench/perf:cxv-perf)",
        },
        tags = ["no-sandbox"],
    )
