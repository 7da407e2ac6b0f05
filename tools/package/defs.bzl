"""The installed tree's pieces that Bazel 4.2 has no rule for."""

def _static_archive_impl(ctx):
    """One archive of every library of this workspace that `deps` link, position-independent
    (Debian's compiler makes PIE executables), and the link flags they carry (-lfmt, ...)."""
    archives = []
    seen = {}
    flags = []
    for dep in ctx.attr.deps:
        for linker_input in dep[CcInfo].linking_context.linker_inputs.to_list():
            for flag in linker_input.user_link_flags:
                if flag not in flags:
                    flags.append(flag)
            for library in linker_input.libraries:
                archive = library.pic_static_library or library.static_library
                if archive == None or archive.owner.workspace_name != "":
                    continue
                if archive.path not in seen:
                    seen[archive.path] = True
                    archives.append(archive)

    # ar's MRI script: the members of every archive, duplicates of a name kept.
    script = ctx.actions.declare_file(ctx.label.name + ".mri")
    ctx.actions.write(
        script,
        "CREATE %s\n" % ctx.outputs.archive.path +
        "".join(["ADDLIB %s\n" % a.path for a in archives]) +
        "SAVE\nEND\n",
    )
    ctx.actions.run_shell(
        inputs = archives + [script],
        outputs = [ctx.outputs.archive],
        command = "ar -M < %s && ranlib %s" % (script.path, ctx.outputs.archive.path),
        mnemonic = "StaticArchive",
        progress_message = "Archiving %s" % ctx.outputs.archive.short_path,
    )
    ctx.actions.write(ctx.outputs.link_flags, " ".join(flags) + "\n")

static_archive = rule(
    implementation = _static_archive_impl,
    attrs = {
        "deps": attr.label_list(providers = [CcInfo]),
        "archive": attr.output(mandatory = True),
        "link_flags": attr.output(mandatory = True),
    },
)

def _workspace_headers_impl(ctx):
    """Every header of this workspace that `deps` compile with (make_tree.sh keeps those the
    public headers include)."""
    headers = []
    for dep in ctx.attr.deps:
        for h in dep[CcInfo].compilation_context.headers.to_list():
            if h.owner.workspace_name == "" and h.is_source:
                headers.append(h)
    return [DefaultInfo(files = depset(headers))]

workspace_headers = rule(
    implementation = _workspace_headers_impl,
    attrs = {"deps": attr.label_list(providers = [CcInfo])},
)
