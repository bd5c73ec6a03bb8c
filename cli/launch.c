/* Lightning's launcher for volt programs: trainer.devices = N with a distributed strategy,
 * outside an MPI job, runs the program under mpirun with N ranks, with the flags
 * scripts/volt-run uses (--oversubscribe, root allowed in containers, one OpenMP thread per
 * rank unless OMP_NUM_THREADS is set, VOLT_* settings forwarded), and ends with its status.
 *
 * Ctrl-C / SIGTERM reach the ranks as such: mpirun runs in a process group of its own (so a
 * terminal's Ctrl-C reaches this launcher only), and the launcher sends each signal it gets to
 * mpirun's children, the ranks, which stop at their next step as one process does (trainer:
 * every rank stops at the same step, OnExceptionCheckpoint saves) and exit 130 / 143, which the
 * launcher then exits with. mpirun itself would, on SIGINT or SIGTERM, abort the job: SIGTERM to
 * the ranks a second later and SIGKILL one more second later, cutting their save short (Open
 * MPI forwards neither signal). With a terminal on stdin, mpirun gets --stdin none (a process
 * group in the background must not read the terminal). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
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

static volatile sig_atomic_t g_pending;   /* a signal the launcher got, not yet passed on */
static void on_signal(int sig) { g_pending = sig; }

/* The parent pid in /proc/<pid>/stat (after the command's closing parenthesis), -1 if unreadable. */
static pid_t parent_of(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    int ppid = -1;
    if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1) return -1;
    return (pid_t)ppid;
}

/* sig to every child of mpirun (the ranks on this node), not to mpirun. */
static void pass_on(pid_t mpirun_pid, int sig) {
    DIR *d = opendir("/proc");
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        char *end = NULL;
        const long pid = strtol(e->d_name, &end, 10);
        if (pid > 0 && end && !*end && parent_of((pid_t)pid) == mpirun_pid) kill((pid_t)pid, sig);
    }
    closedir(d);
}

/* Runs av (mpirun) in its own process group, passes SIGINT / SIGTERM on to its children, and
 * exits with its status (128 + the signal that ended it). Returns only when it could not start. */
static volt_status run_mpirun(volt_cli *c, char **av, long long devices) {
    int fds[2];   /* exec's errno back from the child (close-on-exec: EOF when the exec worked) */
    if (pipe(fds) != 0) return volt__cli_seterr(c, "cannot launch %lld ranks: pipe: %s", devices, strerror(errno)), VOLT_ERR_IO;
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;   /* no SA_RESTART: waitpid returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    const pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        close(fds[0]);
        execvp(av[0], av);
        const int e = errno;
        if (write(fds[1], &e, sizeof e) < 0) {}
        _exit(127);
    }
    close(fds[1]);
    int e = 0;
    const bool exec_failed = pid > 0 && read(fds[0], &e, sizeof e) == (ssize_t)sizeof e;
    close(fds[0]);
    if (pid < 0 || exec_failed) {
        if (exec_failed) waitpid(pid, NULL, 0);
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        volt__cli_seterr(c, "cannot run '%s' to launch %lld ranks: %s (apt-get install openmpi-bin, "
                         "or launch with scripts/volt-run -n N)", av[0], devices, strerror(pid < 0 ? errno : e));
        return VOLT_ERR_IO;
    }
    setpgid(pid, pid);   /* also here: whichever of the two runs first */
    int ws = 0;
    for (;;) {
        if (g_pending) {
            const int sig = g_pending;
            g_pending = 0;
            pass_on(pid, sig);
        }
        const pid_t r = waitpid(pid, &ws, 0);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) { ws = 1 << 8; break; }
    }
    fflush(NULL);
    exit(WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 1);
}

volt_status volt_cli_launch(volt_cli *c, int argc, char **argv) {
    int64_t devices = volt_cli_int(c, "trainer.devices");
    const char *strategy = volt__strategy_resolve(volt_cli_str(c, "trainer.strategy"), (int)devices,
                                                  (int)volt_cli_int(c, "trainer.num_nodes"));
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
    if (isatty(0)) { av[k++] = "--stdin"; av[k++] = "none"; }
    for (int i = 0; fwd[i]; i++)
        if (getenv(fwd[i])) { av[k++] = "-x"; av[k++] = (char *)fwd[i]; }
    for (int i = 0; i < argc; i++) av[k++] = argv[i];
    av[k] = NULL;
    fprintf(stderr, "%s: launching %lld ranks (%s): %s --oversubscribe -np %lld %s ...\n", argv[0], (long long)devices,
            strategy, mpirun, (long long)devices, argv[0]);
    fflush(stdout);
    fflush(stderr);
    volt_status st = run_mpirun(c, av, (long long)devices);
    free(av);
    return st;
}
