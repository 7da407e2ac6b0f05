"""Who may depend on driver/ packages: everything above the driver, never sim/."""

DRIVER_VISIBILITY = [
    "//api:__subpackages__",
    "//bench:__subpackages__",
    "//daemon:__subpackages__",
    "//driver:__subpackages__",
    "//tests:__subpackages__",
    "//tools:__subpackages__",
]
