/* ibv_fork_init(3) through cxv exec, in a program built against rdma-core: registered
 * memory is kept out of a forked child (MADV_DONTFORK) for as long as some MR holds it,
 * counted per page as rdma-core counts it, so deregistering one MR leaves the pages a
 * second MR shares protected. The kernel's view is read back from /proc/self/smaps (the
 * "dc" VmFlag: do not copy this area on fork). Each check prints "ok NAME" or
 * "FAIL NAME: ..."; exits 0 when every check passed. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* Exported by libibverbs (IBVERBS_1.0) but declared only in rdma-core's provider header. */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

static int failures;

#define DIE(what)                                                                \
    do {                                                                         \
        fprintf(stderr, "%s failed: %s\n", what, strerror(errno ? errno : EIO)); \
        exit(1);                                                                 \
    } while (0)

/* Whether the mapping holding `p` is marked do-not-copy, -1 if no mapping holds it. */
static int dontfork(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (f == NULL) DIE("fopen /proc/self/smaps");
    char line[512];
    int in = 0, r = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        } else if (in && strncmp(line, "VmFlags:", 8) == 0) {
            r = strstr(line, " dc") != NULL;
            break;
        }
    }
    fclose(f);
    return r;
}

/* Checks that pages [0, npages) of `buf` are protected exactly where want[i] is 1. */
static void expect(const char *name, char *buf, long page, const int *want, int npages) {
    char got[64] = {0}, exp[64] = {0};
    for (int i = 0; i < npages; ++i) {
        got[i] = (char)('0' + dontfork(buf + i * page));
        exp[i] = (char)('0' + want[i]);
    }
    if (strcmp(got, exp) == 0) {
        printf("ok %s\n", name);
    } else {
        ++failures;
        printf("FAIL %s: pages do-not-copy %s, expected %s\n", name, got, exp);
    }
}

int main(void) {
    if (ibv_fork_init() != 0) DIE("ibv_fork_init");
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list == NULL || n == 0) DIE("ibv_get_device_list");
    struct ibv_context *ctx = ibv_open_device(list[0]);
    if (ctx == NULL) DIE("ibv_open_device");
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    if (pd == NULL) DIE("ibv_alloc_pd");

    const long page = sysconf(_SC_PAGESIZE);
    char *buf = mmap(NULL, 6 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) DIE("mmap");
    memset(buf, 1, 6 * page);

    const int none[6] = {0, 0, 0, 0, 0, 0};
    expect("nothing registered", buf, page, none, 6);
    /* a: pages 1-2 (a range that starts and ends inside them); b: pages 2-3; c = b again. */
    struct ibv_mr *a = ibv_reg_mr(pd, buf + page + 100, 2 * page - 200, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *b = ibv_reg_mr(pd, buf + 2 * page, 2 * page, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *c = ibv_reg_mr(pd, buf + 2 * page, 2 * page, IBV_ACCESS_LOCAL_WRITE);
    if (a == NULL || b == NULL || c == NULL) DIE("ibv_reg_mr");
    const int abc[6] = {0, 1, 1, 1, 0, 0};
    expect("three overlapping MRs", buf, page, abc, 6);
    if (ibv_dereg_mr(a) != 0) DIE("ibv_dereg_mr");
    const int bc[6] = {0, 0, 1, 1, 0, 0};
    expect("the shared page stays after one MR goes", buf, page, bc, 6);
    if (ibv_dereg_mr(b) != 0) DIE("ibv_dereg_mr");
    expect("the same range registered twice, one gone", buf, page, bc, 6);

    /* A child really does not get the protected pages: it may read page 0, and page 2
     * faults in it. */
    pid_t child = fork();
    if (child == 0) {
        signal(SIGSEGV, SIG_DFL); /* a sanitizer's handler would turn the fault into an abort */
        volatile char x = buf[0];
        (void)x;
        x = buf[2 * page];
        _exit(0);
    }
    int st = 0;
    waitpid(child, &st, 0);
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) {
        printf("ok a forked child faults on a registered page\n");
    } else {
        ++failures;
        printf("FAIL a forked child faults on a registered page: status %d\n", st);
    }

    if (ibv_dereg_mr(c) != 0) DIE("ibv_dereg_mr");
    expect("all MRs gone", buf, page, none, 6);
    /* ibv_dontfork_range/ibv_dofork_range nest the same way. */
    if (ibv_dontfork_range(buf, page) != 0 || ibv_dontfork_range(buf, page) != 0) DIE("ibv_dontfork_range");
    ibv_dofork_range(buf, page);
    const int first[6] = {1, 0, 0, 0, 0, 0};
    expect("dontfork twice, dofork once", buf, page, first, 6);
    ibv_dofork_range(buf, page);
    ibv_dofork_range(buf, page); /* one too many: nothing to release */
    expect("dofork as often as dontfork", buf, page, none, 6);

    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
