/* vtest_mpi.h — the end of a multi-rank test: this rank's verdict (vtest_finish), the worst
 * of every rank's on all of them (a rank that failed fails the run wherever mpirun looks),
 * then MPI_Finalize. Included in place of <mpi.h>, after vtest.h. */
#ifndef VTEST_MPI_H
#define VTEST_MPI_H
#include <mpi.h>
#include "vtest.h"

static inline int vtest_mpi_finish(void) {
    int rc = vtest_finish(), any = rc;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
}
#endif
