/* What the mlx5dv test programs share: the CQ doorbell record's words and a wait for a
 * CQE that software owns, read from a ring mlx5dv_init_obj gave (PRM "Completion
 * Queue"). */
#ifndef CXV_TESTS_EXEC_DV_CQE_H
#define CXV_TESTS_EXEC_DV_CQE_H

#include <stdint.h>
#include <time.h>

#include <infiniband/mlx5dv.h>

/* The CQ doorbell record: the consumer index, then the arm word (PRM "Completion Queue
 * Doorbell Record"). */
enum { cq_set_ci = 0, cq_arm_db = 1 };

static inline double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* The CQE at consumer index `ci` once software owns it (its owner bit equals the pass bit
 * of ci, and its opcode is not invalid); NULL after 10 s. */
static inline struct mlx5_cqe64 *wait_cqe(const struct mlx5dv_cq *cq, uint32_t ci) {
    struct mlx5_cqe64 *cqe = (struct mlx5_cqe64 *)((char *)cq->buf + (size_t)(ci & (cq->cqe_cnt - 1)) * cq->cqe_size);
    const double end = now() + 10;
    while (now() < end) {
        const uint8_t op_own = *(volatile uint8_t *)&cqe->op_own;
        if (mlx5dv_get_cqe_opcode(cqe) != MLX5_CQE_INVALID && (op_own & MLX5_CQE_OWNER_MASK) == !!(ci & cq->cqe_cnt)) {
            __atomic_thread_fence(__ATOMIC_ACQUIRE); /* the owner bit before the CQE's body */
            return cqe;
        }
    }
    return NULL;
}

#endif
