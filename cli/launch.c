/* Lightning's launcher for volt programs: trainer.devices = N with a distributed strategy,
 * outside an MPI job, re-executes the program under mpirun with N ranks, with the flags
 * scripts/volt-run uses (--oversubscribe, root allowed in containers, one OpenMP thread per
 * rank unless OMP_NUM_THREADS is set, VOLT_* settings forwarded). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli_internal.h"
#include "strategies/strategy.h"

bool volt_cli_in_mpi_job(void) {
    static const char *const vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", NULL };
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return true;
    }
    return false;
}

volt_status volt_cli_launch(volt_cli *c, int argc, char **argv) {
    const char *strategy = volt_cli_str(c, "trainer.strategy");
    int64_t devices = volt_cli_int(c, "trainer.devices");
    const volt_strategy_row *row = volt__strategy_find(strategy);   /* unknown: the trainer says so */
    bool dist = row && (row->flags & VOLT_STRAT_MULTI_PROCESS);
    if (volt_cli_in_mpi_job()) return VOLT_OK;
    if (!dist) return VOLT_OK;          /* devices > 1 with "single": the trainer says why not */
    if (devices <= 1) {
        fprintf(stderr, "%s: strategy '%s' on one process (not inside an MPI job): it runs as a world of 1. "
                        "Pass --trainer.devices N to launch N ranks, or use scripts/volt-run -n N.\n",
                argv[0], strategy);
        return VOLT_OK;
    }
    const char *mpirun = getenv("MPIRUN");
    if (!mpirun || !*mpirun) mpirun = "mpirun";
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    setenv("OMP_NUM_THREADS", "1", 0);
    static const char *const fwd[] = { "VOLT_COMM_TIMEOUT", "VOLT_TEST_TMP", NULL };
    char **av = calloc((size_t)argc + 16, sizeof *av);
    if (!av) return VOLT_ERR_NOMEM;
    char np[32];
    snprintf(np, sizeof np, "%lld", (long long)devices);
    int k = 0;
    av[k++] = (char *)mpirun;
    av[k++] = "--oversubscribe";
    av[k++] = "-np";
    av[k++] = np;
    av[k++] = "-x";
    av[k++] = "OMP_NUM_THREADS";
    for (int i = 0; fwd[i]; i++)
        if (getenv(fwd[i])) { av[k++] = "-x"; av[k++] = (char *)fwd[i]; }
    for (int i = 0; i < argc; i++) av[k++] = argv[i];
    av[k] = NULL;
    fprintf(stderr, "%s: launching %lld ranks (%s): %s --oversubscribe -np %lld %s ...\n", argv[0], (long long)devices,
            strategy, mpirun, (long long)devices, argv[0]);
    fflush(stdout);
    fflush(stderr);
    execvp(mpirun, av);
    int e = errno;
    free(av);
    volt__cli_seterr(c, "cannot run '%s' to launch %lld ranks: %s (apt-get install openmpi-bin, "
             "or launch with scripts/volt-run -n N)", mpirun, (long long)devices, strerror(e));
    return VOLT_ERR_IO;
}
