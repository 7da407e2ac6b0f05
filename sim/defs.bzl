"""Who may depend on the model's packages: tests, benchmarks, tools and the model itself;
never driver/, queues/ or api/ (the driver must not know the model exists)."""

SIM_VISIBILITY = [
    "//bench:__subpackages__",
    "//sim:__subpackages__",
    "//tests:__subpackages__",
    "//tools:__subpackages__",
]
