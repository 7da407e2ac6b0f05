"""mlx5_probe_test.sh's runs: Linux's mlx5 drivers in User-Mode Linux against the model."""

def mlx5_probe_test(name, modules = [], tags = []):
    """One run of mlx5_probe_test.sh; `modules`: what it loads after mlx5_core ("ib")."""
    native.sh_test(
        name = name,
        size = "medium",
        srcs = ["mlx5_probe_test.sh"],
        args = [
            "$(location //sim/uml:cxv-sim-uml)",
            "$(location //tools/uml:kernel)",
            "$(location //tools/uml:init.sh)",
            "$(location //tests/qemu:guest_test_lib.sh)",
        ] + modules,
        data = [
            "//sim/uml:cxv-sim-uml",
            "//tests/qemu:guest_test_lib.sh",
            "//tools/uml:init.sh",
            "//tools/uml:kernel",
        ],
        tags = [
            "exclusive",
            "no-sandbox",
        ] + tags,
    )
