"""Macros the test packages share."""

def doctest_test(name, srcs = None, deps = [], **kwargs):
    """A cc_test linked with doctest's main(); srcs defaults to [name + ".cc"]."""
    native.cc_test(
        name = name,
        srcs = srcs if srcs != None else [name + ".cc"],
        deps = deps + [
            "//tests:doctest_main",
            "@doctest",
        ],
        **kwargs
    )

def doctest_tests(srcs, deps = [], **kwargs):
    """One doctest_test per source file, named after it without ".cc" (a_test.cc: a_test)."""
    for f in srcs:
        doctest_test(name = f[:-3], srcs = [f], deps = deps, **kwargs)

def test_library(name, **kwargs):
    """A helper library for tests only (fixtures, rigs, expected values), visible to every test package."""
    native.cc_library(
        name = name,
        testonly = True,
        visibility = kwargs.pop("visibility", ["//tests:__subpackages__"]),
        **kwargs
    )
