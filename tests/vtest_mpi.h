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

/* n rows of the same linear function of 4 features (row i's values depend on i alone: every
 * rank makes the same dataset), the data of the multi-rank callback tests. */
static inline volt_dataset *vtest_rows4(int n) {
    float *x = malloc(sizeof(float) * 4 * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    CHECK(x && y, "out of memory");
    volt_dataset *ds = NULL;
    if (x && y) {
        for (int i = 0; i < n; i++) {
            y[i] = 0.1f;
            for (int j = 0; j < 4; j++) {
                x[i * 4 + j] = (float)((i * 7 + j * 3) % 11) / 11.0f - 0.5f;
                y[i] += (float)(j + 1) * 0.25f * x[i * 4 + j];
            }
        }
        volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(4) }, { "y", VOLT_F32, VOLT_SHAPE(1) } };
        const void *d[2] = { x, y };
        CHECK_OK(volt_dataset_from_arrays(2, f, d, n, &ds));   /* copied */
    }
    free(x);
    free(y);
    return ds;
}
#endif
