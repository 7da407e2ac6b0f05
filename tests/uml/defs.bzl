"""The UML tests' runs: Linux's mlx5 drivers in User-Mode Linux against the model."""

def uml_test(name, script, args = [], data = [], **kwargs):
    """One run of `script`, whose first four arguments are the backend (cxv-sim-uml), the
    kernel script, UML's init and guest_test_lib.sh, and `args` the rest (each a label of
    `data` or a word). Alone on the machine (the BUILD file says why)."""
    native.sh_test(
        name = name,
        size = "medium",
        srcs = [script],
        args = [
            "$(location //sim/uml:cxv-sim-uml)",
            "$(location //tools/uml:kernel)",
            "$(location //tools/uml:init.sh)",
            "$(location //tests/qemu:guest_test_lib.sh)",
        ] + args,
        data = [
            "//sim/uml:cxv-sim-uml",
            "//tests/qemu:guest_test_lib.sh",
            "//tools/uml:init.sh",
            "//tools/uml:kernel",
        ] + data,
        tags = [
            "exclusive",
            "no-sandbox",
        ],
        **kwargs
    )

def mlx5_probe_test(name, modules = []):
    """One run of mlx5_probe_test.sh; `modules`: what it loads after mlx5_core ("ib")."""
    uml_test(name = name, script = "mlx5_probe_test.sh", args = modules)

# What the two-kernel tests of NVMe over Fabrics take beyond the four (nvmeof_test.sh).
NVMEOF_ARGS = [
    "$(location two_kernels.sh)",
    "$(location //sim:cxv-sim)",
    "$(location //tools/cxv)",
    "$(location differential.py)",
]
NVMEOF_DATA = [
    "differential.py",
    "two_kernels.sh",
    "//api/abi:libibverbs.so.1",
    "//sim:cxv-sim",
    "//tools/cxv",
]
