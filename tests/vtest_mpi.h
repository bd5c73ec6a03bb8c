/* vtest_mpi.h — the end of a multi-rank test: this rank's verdict (vtest_finish), the worst
 * of every rank's on all of them (a rank that failed fails the run wherever mpirun looks),
 * then MPI_Finalize. Included in place of <mpi.h>, after vtest.h. */
#ifndef VTEST_MPI_H
#define VTEST_MPI_H
#include <mpi.h>
#include "vtest.h"

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
#endif
