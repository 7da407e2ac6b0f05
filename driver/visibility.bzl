"""Who may depend on driver/ packages: everything above the driver, never sim/."""

DRIVER_VISIBILITY = [
    "//api:__subpackages__",
    "//bench:__subpackages__",
    "//client:__pkg__",
    "//daemon:__subpackages__",
    "//driver:__subpackages__",
    "//tests:__subpackages__",
    "//tools:__subpackages__",
]

def driver_library(name, deps = [], **kwargs):
    """A driver/ library: visible to the layers above the driver, built on base/, hw/ and fmt."""
    native.cc_library(
        name = name,
        visibility = DRIVER_VISIBILITY,
        deps = ["//base", "//hw", "@fmt"] + deps,
        **kwargs
    )
