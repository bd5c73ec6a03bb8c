/* vtest_mpi.h — the end of a multi-rank test: this rank's verdict (vtest_finish), the worst
 * of every rank's on all of them (a rank that failed fails the run wherever mpirun looks),
 * then MPI_Finalize. Included in place of <mpi.h>, after vtest.h. */
#ifndef VTEST_MPI_H
#define VTEST_MPI_H
#include <mpi.h>
#include "vtest.h"
#include "volt/volt.h"

/* MPI up (funneled threads), this rank and the world size. 77 (after MPI_Finalize, with the
 * SKIP line) unless 2 <= world <= 8, the worlds these tests are written for; else 0. */
static inline int vtest_mpi_start(int *argc, char ***argv, int *rank, int *world) {
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, world);
    if (*world >= 2 && *world <= 8) return 0;
    printf("SKIP: run with 2 to 8 ranks (mpirun -np N), got %d\n", *world);
    MPI_Finalize();
    return 77;
}

static inline int vtest_mpi_finish(void) {
    int rc = vtest_finish(), any = rc;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
}

/* Two units (fc1: 4 -> 4 and a ReLU, fc2: 4 -> 1), so that fsdp gives the first back when a
 * forward moves on to the second and the next forward gathers it again: the model of the
 * multi-rank callback tests (a test's module struct starts with one). */
typedef struct vtest_mlp2 { volt_tensor *w1, *b1, *w2, *b2; } vtest_mlp2;
static inline volt_status vtest_mlp2_setup(void *self, volt_params *ps) {
    vtest_mlp2 *u = self;
    VOLT_TRY(volt_params_unit(ps, "fc1"));
    VOLT_TRY(volt_param_new(ps, "fc1.weight", VOLT_SHAPE(4, 4), VOLT_INIT_TORCH_LINEAR, &u->w1));
    VOLT_TRY(volt_param_new(ps, "fc1.bias", VOLT_SHAPE(4), VOLT_INIT_ZEROS, &u->b1));
    VOLT_TRY(volt_params_unit(ps, "fc2"));
    VOLT_TRY(volt_param_new(ps, "fc2.weight", VOLT_SHAPE(1, 4), VOLT_INIT_TORCH_LINEAR, &u->w2));
    return volt_param_new(ps, "fc2.bias", VOLT_SHAPE(1), VOLT_INIT_ZEROS, &u->b2);
}
static inline volt_tensor *vtest_mlp2_forward(vtest_mlp2 *u, volt_step *s, const volt_batch *b) {
    return volt_linear(s, volt_relu(s, volt_linear(s, volt_batch_x(b), u->w1, u->b1)), u->w2, u->b2);
}
#endif
