"""Tests that run under the VFIO presentation layer (`cxv-sim run -- <test binary>`)."""

def sim_test(name, srcs, deps = [], devices = 1, port_type = "ib", sim_args = [], size = "medium", **kwargs):
    """A doctest binary run by `cxv-sim run --devices N --port-type T -- <binary>`.

    The binary is an ordinary program: it finds the emulated devices only through the
    Linux VFIO and sysfs interfaces the preload library presents.
    """
    native.cc_binary(
        name = name + "_bin",
        testonly = True,
        srcs = srcs,
        deps = deps + ["//tests:doctest_main", "@doctest"],
    )
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tests/vfio:run_under_sim.sh"],
        args = [
            "$(location //sim:cxv-sim)",
            "--devices",
            str(devices),
            "--port-type",
            port_type,
        ] + sim_args + [
            "--",
            "$(location :" + name + "_bin)",
        ],
        data = [
            "//sim:cxv-sim",
            ":" + name + "_bin",
        ],
        **kwargs
    )

def sim_program_test(name, program, devices = 1, args = [], sim_args = [], **kwargs):
    """Any program (not a doctest binary) run by `cxv-sim run --devices N SIM_ARGS -- <program> ARGS`.

    The test passes when the program exits 0.
    """
    native.sh_test(
        name = name,
        srcs = ["//tests/vfio:run_under_sim.sh"],
        args = [
            "$(location //sim:cxv-sim)",
            "--devices",
            str(devices),
        ] + sim_args + [
            "--",
            "$(location " + program + ")",
        ] + args,
        data = [
            program,
            "//sim:cxv-sim",
        ],
        **kwargs
    )
