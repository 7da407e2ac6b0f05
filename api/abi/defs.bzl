"""The ABI libraries' one shape: a shared object named by its soname."""

def abi_library(name, version_script, srcs = [], deps = []):
    """A shared library `name` (its soname too) exporting what `version_script` names, with
    rdma-core's symbol versions, and nothing left undefined."""
    native.cc_binary(
        name = name,
        srcs = srcs,
        additional_linker_inputs = [version_script],
        linkopts = [
            "-Wl,-soname," + name,
            "-Wl,--version-script=$(location %s)" % version_script,
            "-Wl,--no-undefined",
        ],
        linkshared = 1,
        visibility = ["//visibility:public"],
        deps = deps,
    )
