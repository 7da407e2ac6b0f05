/* Memory as unmodified programs register it (malloc, memalign, anonymous mmap, a static
 * array), written before ibv_reg_mr: through cxvd (CXV_DAEMON) registration re-backs the
 * pages with a memfd at the same addresses (docs/daemon.md, "Memory of unmodified
 * programs"). Checked: the contents are kept; RDMA WRITEs from another QP land where
 * the program reads them; what the program stores is what an RDMA READ fetches; two
 * MRs over the same pages; deregistration keeps the contents and the range registers
 * again; a range over pages of an MR that still lives and beyond them is refused with
 * EBUSY and registers once that MR is gone. Then fork: with `rebacking fork` the program
 * calls ibv_fork_init first and a child has nothing mapped at a registered buffer
 * (MADV_DONTFORK, given again after the re-backing); without it the child shares the
 * re-backed pages with the parent (no copy-on-write). */
#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define PAGE 4096
static char in_bss[3 * PAGE];

static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qa, *qb;
static unsigned char *scratch;
static struct ibv_mr *scratch_mr;

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(seed + i * 7 + (i >> 8));
}
static int same(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; ++i) {
        if (p[i] != (unsigned char)(seed + i * 7 + (i >> 8))) return 0;
    }
    return 1;
}

/* One RDMA op from qa on [local, +len) of `lkey` to `remote` of `rkey`; 0 on success. */
static int rdma(enum ibv_wr_opcode op, void *local, uint32_t lkey, void *remote, uint32_t rkey, size_t len) {
    struct ibv_sge sge = {.addr = (uintptr_t)local, .length = (uint32_t)len, .lkey = lkey};
    struct ibv_send_wr wr = {.wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED};
    wr.wr.rdma.remote_addr = (uintptr_t)remote;
    wr.wr.rdma.rkey = rkey;
    struct ibv_send_wr *bad;
    if (ibv_post_send(qa, &wr, &bad)) return -1;
    struct ibv_wc wc;
    for (long spins = 0; spins < 200000000L; ++spins) {
        const int n = ibv_poll_cq(cq, 1, &wc);
        if (n < 0) return -1;
        if (n == 1) return wc.status == IBV_WC_SUCCESS ? 0 : (int)wc.status;
        if (spins > 1000) usleep(100);
    }
    return -2;
}

/* Whether [p, p + len) is mapped from a re-backing memfd now (/proc/self/maps). */
static int rebacked(const void *p) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int found = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo && (uintptr_t)p < hi) {
            found = strstr(line, "/memfd:cxv-reback") != NULL;
            break;
        }
    }
    if (f) fclose(f);
    return found;
}

/* Registers `buf` (filled before), checks it, moves data both ways. */
static void exercise(const char *what, unsigned char *buf, size_t len, unsigned seed) {
    char name[128];
    fill(buf, len, seed);
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                                     IBV_ACCESS_REMOTE_READ);
    snprintf(name, sizeof name, "%s: registered", what);
    CHECK(name, mr != NULL, "ibv_reg_mr: %s", strerror(errno));
    if (mr == NULL) return;
    snprintf(name, sizeof name, "%s: contents kept", what);
    CHECK(name, same(buf, len, seed), "bytes written before registration changed");
    if (getenv("CXV_DAEMON") != NULL) {
        snprintf(name, sizeof name, "%s: re-backed by a memfd", what);
        CHECK(name, rebacked(buf) && rebacked(buf + len - 1), "not a cxv-reback mapping in /proc/self/maps");
    }
    /* The device writes, the program reads at the same addresses. */
    fill(scratch, len, seed + 1);
    snprintf(name, sizeof name, "%s: RDMA WRITE lands", what);
    const int w = rdma(IBV_WR_RDMA_WRITE, scratch, scratch_mr->lkey, buf, mr->rkey, len);
    CHECK(name, w == 0 && same(buf, len, seed + 1), "status %d", w);
    /* The program writes, the device reads. */
    fill(buf, len, seed + 2);
    memset(scratch, 0, len);
    snprintf(name, sizeof name, "%s: RDMA READ fetches the program's stores", what);
    const int r = rdma(IBV_WR_RDMA_READ, scratch, scratch_mr->lkey, buf, mr->rkey, len);
    CHECK(name, r == 0 && same(scratch, len, seed + 2), "status %d", r);
    snprintf(name, sizeof name, "%s: deregistered", what);
    CHECK(name, ibv_dereg_mr(mr) == 0, "%s", strerror(errno));
    snprintf(name, sizeof name, "%s: contents kept after deregistration", what);
    CHECK(name, same(buf, len, seed + 2), "changed by ibv_dereg_mr");
}

/* A registered malloc'd buffer across fork(2). */
static void fork_check(int fork_init) {
    unsigned char *buf = memalign(PAGE, 2 * PAGE);
    fill(buf, 2 * PAGE, 71);
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, 2 * PAGE, IBV_ACCESS_LOCAL_WRITE);
    CHECK("fork: registered", mr != NULL, "%s", strerror(errno));
    if (mr == NULL) return;
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        /* No malloc or stdio here: with ibv_fork_init the heap pages of registered
         * buffers are not in the child. msync(2) fails with ENOMEM on unmapped memory. */
        const int here = msync(buf, PAGE, MS_ASYNC) == 0;
        if (fork_init) _exit(here ? 1 : 0);
        buf[10] = 0x99; /* a store the parent sees: the pages are shared */
        _exit(here ? 0 : 1);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    if (fork_init) {
        CHECK("fork: with ibv_fork_init the child has nothing at the buffer", WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "status %d", st);
    } else {
        CHECK("fork: the child has the buffer", WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
        if (getenv("CXV_DAEMON") != NULL) {
            CHECK("fork: re-backed pages are shared with the child", buf[10] == 0x99, "%#x", buf[10]);
        }
    }
    ibv_dereg_mr(mr);
    free(buf);
}

int main(int argc, char **argv) {
    const int fork_init = argc > 1 && strcmp(argv[1], "fork") == 0;
    if (fork_init && ibv_fork_init() != 0) DIE("ibv_fork_init");
    struct ibv_device **list = open_first_device();
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    if (!pd || !cq) DIE("pd/cq");
    struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
    qa = ibv_create_qp(pd, &ia);
    qb = ibv_create_qp(pd, &ia);
    if (!qa || !qb) DIE("ibv_create_qp");
    connect_rc(qa, qb->qp_num);
    connect_rc(qb, qa->qp_num);
    scratch = malloc(8 * PAGE);
    scratch_mr = ibv_reg_mr(pd, scratch, 8 * PAGE, IBV_ACCESS_LOCAL_WRITE);
    if (!scratch || !scratch_mr) DIE("scratch MR");

    unsigned char *heap = malloc(10000);
    exercise("malloc", heap + 3, 9990, 11);
    unsigned char *aligned = memalign(PAGE, 3 * PAGE);
    exercise("memalign", aligned, 3 * PAGE, 23);
    unsigned char *anon = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (anon == MAP_FAILED) DIE("mmap");
    exercise("anonymous mmap", anon + 100, 3 * PAGE, 37);
    exercise("static array", (unsigned char *)in_bss, sizeof in_bss, 41);
    /* Again over the same pages: registered as they are now. */
    exercise("memalign again", aligned, 3 * PAGE, 53);

    /* Two MRs over the same pages: the second inside the first; each works, and the
     * second outlives the first. A third from inside the first past its end grows the
     * first one's file; one from below into it cannot. */
    const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    unsigned char *two = memalign(PAGE, 5 * PAGE);
    fill(two, 5 * PAGE, 61);
    struct ibv_mr *outer = ibv_reg_mr(pd, two + PAGE, 3 * PAGE, rw);
    struct ibv_mr *inner = ibv_reg_mr(pd, two + 2 * PAGE + 100, PAGE, rw);
    CHECK("overlapping: both registered", outer && inner, "%s", strerror(errno));
    if (outer && inner) {
        CHECK("overlapping: contents kept", same(two, 5 * PAGE, 61), "changed");
        fill(scratch, PAGE, 62);
        int w = rdma(IBV_WR_RDMA_WRITE, scratch, scratch_mr->lkey, two + PAGE, outer->rkey, PAGE);
        CHECK("overlapping: write through the outer MR", w == 0 && same(two + PAGE, PAGE, 62), "status %d", w);
        struct ibv_mr *across = ibv_reg_mr(pd, two + 3 * PAGE, 2 * PAGE, rw);
        CHECK("overlapping: from inside a live MR past its end", across != NULL, "%s", strerror(errno));
        if (across) {
            CHECK("overlapping: contents kept past the end", same(two + 4 * PAGE, PAGE, 61 + 4 * PAGE * 7 + 16 * 4),
                  "changed");
            fill(scratch, 2 * PAGE, 64);
            w = rdma(IBV_WR_RDMA_WRITE, scratch, scratch_mr->lkey, two + 3 * PAGE, across->rkey, 2 * PAGE);
            CHECK("overlapping: write through the grown range", w == 0 && same(two + 3 * PAGE, 2 * PAGE, 64),
                  "status %d", w);
            fill(scratch, 3 * PAGE, 65);
            w = rdma(IBV_WR_RDMA_WRITE, scratch, scratch_mr->lkey, two + PAGE, outer->rkey, 3 * PAGE);
            CHECK("overlapping: the outer MR still lands after the growth", w == 0 && same(two + PAGE, 3 * PAGE, 65),
                  "status %d", w);
            ibv_dereg_mr(across);
        }
        if (getenv("CXV_DAEMON") != NULL) {
            struct ibv_mr *below = ibv_reg_mr(pd, two, 2 * PAGE, rw);
            CHECK("overlapping: from below into a live MR is EBUSY", below == NULL && errno == EBUSY, "%p errno %d",
                  (void *)below, errno);
            if (below) ibv_dereg_mr(below);
        }
        CHECK("overlapping: outer deregistered", ibv_dereg_mr(outer) == 0, "%s", strerror(errno));
        fill(scratch, PAGE, 63);
        w = rdma(IBV_WR_RDMA_WRITE, scratch, scratch_mr->lkey, two + 2 * PAGE + 100, inner->rkey, PAGE);
        CHECK("overlapping: the inner MR outlives the outer", w == 0 && same(two + 2 * PAGE + 100, PAGE, 63),
              "status %d", w);
        memset(scratch, 0, PAGE);
        w = rdma(IBV_WR_RDMA_READ, scratch, scratch_mr->lkey, two + 2 * PAGE + 100, inner->rkey, PAGE);
        CHECK("overlapping: read through the inner MR", w == 0 && same(scratch, PAGE, 63), "status %d", w);
        CHECK("overlapping: inner deregistered", ibv_dereg_mr(inner) == 0, "%s", strerror(errno));
        /* Nothing holds the pages now: the larger range registers, contents kept. */
        unsigned char *keep = malloc(5 * PAGE);
        memcpy(keep, two, 5 * PAGE);
        struct ibv_mr *whole = ibv_reg_mr(pd, two, 5 * PAGE, rw);
        CHECK("overlapping: the whole range once free", whole != NULL && memcmp(keep, two, 5 * PAGE) == 0, "%s",
              whole ? "contents changed" : strerror(errno));
        if (whole) {
            memset(scratch, 0, 5 * PAGE);
            w = rdma(IBV_WR_RDMA_READ, scratch, scratch_mr->lkey, two, whole->rkey, 5 * PAGE);
            CHECK("overlapping: read of the whole range", w == 0 && memcmp(scratch, keep, 5 * PAGE) == 0,
                  "status %d", w);
            ibv_dereg_mr(whole);
        }
        free(keep);
    }

    fork_check(fork_init);

    ibv_dereg_mr(scratch_mr);
    ibv_destroy_qp(qa);
    ibv_destroy_qp(qb);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    free(scratch);
    free(heap);
    free(aligned);
    free(two);
    munmap(anon, 4 * PAGE);
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
