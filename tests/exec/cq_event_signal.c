/* ibv_get_cq_event interrupted by a signal, as rdma-core's read() of the channel fd is:
 * a handler installed without SA_RESTART (qperf's timer) makes it return -1 with EINTR;
 * one installed with SA_RESTART (signal(3)) lets it go on waiting until the completion
 * event comes. Through cxv exec, in a program built against rdma-core. Each check prints
 * "ok NAME" or "FAIL NAME: ..."; exits 0 when every check passed. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tests/exec/check.h"

static volatile sig_atomic_t alarms;
static void on_alarm(int sig) {
    (void)sig;
    ++alarms;
}

static void handle_alarm(int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGALRM, &sa, NULL)) DIE("sigaction");
}

static void alarm_in_ms(long ms) {
    struct itimerval t = {.it_value = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000}};
    if (setitimer(ITIMER_REAL, &t, NULL)) DIE("setitimer");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct ibv_qp *qp;
static struct ibv_mr *mr;
static char buf[64];

/* Posts a signaled RDMA WRITE to the QP itself after `arg` milliseconds. */
static void *post_later(void *arg) {
    usleep((useconds_t)(long)arg * 1000);
    struct ibv_sge s = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
    struct ibv_send_wr w = {.wr_id = 9, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                            .send_flags = IBV_SEND_SIGNALED,
                            .wr.rdma = {.remote_addr = (uintptr_t)(buf + 32), .rkey = mr->rkey}},
                       *bad;
    if (ibv_post_send(qp, &w, &bad)) DIE("ibv_post_send");
    return NULL;
}

/* A wait that never ends is a failure, not a hung test. */
static void *watchdog(void *arg) {
    (void)arg;
    sleep(20);
    printf("FAIL watchdog: still waiting after 20 s\n");
    _exit(1);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the watchdog takes no signal */
    pthread_t dog;
    pthread_create(&dog, NULL, watchdog, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    struct ibv_device **list = open_first_device();
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
    struct ibv_cq *cq = ch ? ibv_create_cq(ctx, 16, NULL, ch, 0) : NULL;
    mr = cq ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
    struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
    qp = mr ? ibv_create_qp(pd, &ia) : NULL;
    if (qp == NULL) DIE("setup");
    connect_rc(qp, qp->qp_num);
    if (ibv_req_notify_cq(cq, 0)) DIE("ibv_req_notify_cq");

    /* No SA_RESTART: the wait ends with EINTR when the timer fires. */
    handle_alarm(0);
    alarm_in_ms(200);
    struct ibv_cq *ev_cq = NULL;
    void *ev_ctx = NULL;
    double t0 = now_s();
    errno = 0;
    int r = ibv_get_cq_event(ch, &ev_cq, &ev_ctx);
    const int err = errno;
    CHECK("a handler without SA_RESTART interrupts ibv_get_cq_event with EINTR",
          r == -1 && err == EINTR && alarms == 1, "returned %d errno %d (%s), %d alarms, %.2f s", r, err,
          strerror(err), (int)alarms, now_s() - t0);

    /* SA_RESTART: the wait goes on past the signal until the event. */
    handle_alarm(SA_RESTART);
    alarm_in_ms(100);
    pthread_t poster;
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the alarm is the waiting thread's */
    pthread_create(&poster, NULL, post_later, (void *)400L);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    t0 = now_s();
    r = ibv_get_cq_event(ch, &ev_cq, &ev_ctx);
    const double waited = now_s() - t0;
    pthread_join(poster, NULL);
    CHECK("a handler with SA_RESTART lets ibv_get_cq_event wait on for the event",
          r == 0 && ev_cq == cq && alarms == 2 && waited > 0.3, "returned %d errno %d, %d alarms, %.2f s", r, errno,
          (int)alarms, waited);
    if (r == 0) ibv_ack_cq_events(cq, 1);
    struct ibv_wc wc;
    CHECK("the completion", ibv_poll_cq(cq, 1, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9, "-");

    ibv_destroy_qp(qp);
    ibv_destroy_cq(cq);
    ibv_destroy_comp_channel(ch);
    ibv_dereg_mr(mr);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
