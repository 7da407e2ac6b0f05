/* A small MPI ping-pong for tests/exec/ucx_test: rank 0 sends a buffer of a known
 * pattern to rank 1, which checks it and sends it back changed; rank 0 checks the
 * answer. Sizes from 8 bytes to 1 MiB (UCX's eager and rendezvous protocols), a few
 * rounds each. Prints "pingpong ok SIZE ROUNDS USEC" per size on rank 0 (the mean round
 * trip) and exits 0, or names the first wrong byte and exits 1. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kRounds = 20 };

static unsigned char pattern(size_t i, int round, int answer) {
    return (unsigned char)(i * 7 + (size_t)round * 13 + (answer ? 101 : 0));
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "mpi_pingpong: needs 2 ranks, has %d\n", size);
        MPI_Finalize();
        return 1;
    }
    const size_t sizes[] = {8, 4096, 65536, 1 << 20};
    unsigned char* buf = malloc(1 << 20);
    if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
    int bad = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0] && !bad; ++s) {
        const size_t n = sizes[s];
        const double start = MPI_Wtime();
        for (int r = 0; r < kRounds && !bad; ++r) {
            if (rank == 0) {
                for (size_t i = 0; i < n; ++i) buf[i] = pattern(i, r, 0);
                MPI_Send(buf, (int)n, MPI_BYTE, 1, r, MPI_COMM_WORLD);
                memset(buf, 0, n);
                MPI_Recv(buf, (int)n, MPI_BYTE, 1, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (size_t i = 0; i < n && !bad; ++i) {
                    if (buf[i] != pattern(i, r, 1)) {
                        fprintf(stderr, "mpi_pingpong: rank 0: size %zu round %d byte %zu is %u, not %u\n", n, r,
                                i, buf[i], pattern(i, r, 1));
                        bad = 1;
                    }
                }
            } else {
                MPI_Recv(buf, (int)n, MPI_BYTE, 0, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (size_t i = 0; i < n && !bad; ++i) {
                    if (buf[i] != pattern(i, r, 0)) {
                        fprintf(stderr, "mpi_pingpong: rank 1: size %zu round %d byte %zu is %u, not %u\n", n, r,
                                i, buf[i], pattern(i, r, 0));
                        bad = 1;
                    }
                }
                for (size_t i = 0; i < n; ++i) buf[i] = pattern(i, r, 1);
                MPI_Send(buf, (int)n, MPI_BYTE, 0, r, MPI_COMM_WORLD);
            }
        }
        if (rank == 0 && !bad) {
            printf("pingpong ok %zu %d %.1f\n", n, kRounds, (MPI_Wtime() - start) * 1e6 / kRounds);
            fflush(stdout);
        }
    }
    free(buf);
    if (bad) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
    return 0;
}
