#pragma once

namespace cxv::tool {

// cxv exec [--device BDF] [--] PROGRAM [ARGS...]: runs PROGRAM with the directory of cxv's
// libibverbs.so.1 and librdmacm.so.1 first on LD_LIBRARY_PATH (and CXV_DEVICE=BDF with --device). Returns only on failure.
int exec_program(int argc, char** argv);

}  // namespace cxv::tool
