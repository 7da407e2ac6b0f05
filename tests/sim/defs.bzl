"""Macros of the model's tests (tests/sim and its sub-packages)."""

load("//tests:defs.bzl", "doctest_tests")

def model_tests(deps = []):
    """Every *_test.cc of the package a test of its own, driving the model through the
    harness of tests/sim and checking its outputs against Linux's mlx5_ifc.h; `deps` adds
    to what they all use."""
    doctest_tests(
        native.glob(["*_test.cc"]),
        deps = deps + [
            "//hw",
            "//sim:model",
            "//tests/hw:linux_mlx5_ifc",
            "//tests/sim:harness",
            "//tests/sim:linux_ifc",
            "//tests/sim:objects",
            "@fmt",
        ],
    )
