/* fault_run — the training job the fault tests (tests/faults.cmake, tests/fault_kill.sh)
 * kill, stop and starve (docs/RELIABILITY.md).
 *
 *   fault_run fit ROOT STRATEGY         train (or resume from ROOT's newest last checkpoint),
 *                                       2 epochs of 12 steps, ModelCheckpoint every 2 steps
 *                                       and at epoch end (save_last); rank 0 writes the final
 *                                       weights to ROOT/final.bin
 *   fault_run hang ROOT STRATEGY            rank 1 stops itself (SIGSTOP) at batch 3; the others
 *                                       must end the job with an error (VOLT_COMM_TIMEOUT)
 *   fault_run diskfull ROOT STRATEGY    the 3rd save fails with ENOSPC on rank 1 (sharded:
 *                                       mid-save); the previous checkpoint must stay loadable
 *   fault_run stepfail ROOT STRATEGY    rank 1 alone fails at batch 3 (its on_train_batch_start
 *                                       returns an error) and ends; the others must end within
 *                                       seconds, naming rank 1, not after the comm's timeout
 *                                       (FAULT_FAIL_IN=val: at validation batch 1 instead)
 *
 * Environment: FAULT_BATCH_MS sleeps in every batch (so random kill times spread over the
 * run), FAULT_FSYNC_MS sleeps in every fsync (saves take long enough to be hit),
 * FAULT_KILL_AT_FSYNC=k makes rank FAULT_KILL_RANK (default 0) SIGKILL itself at its k-th
 * fsync (inside a save: between the shard files and the index, or before a rename).
 * write() and fsync() are interposed: volt is linked statically, so its calls land here. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "../rel_model.h"

static int g_rank = -1;
static long g_fsyncs;
static volatile int g_enospc;   /* rank 1 fails its writes with ENOSPC while set */

static void sleep_ms(double ms) {
    if (ms <= 0) return;
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms * 1e6) % 1000000000L };
    nanosleep(&ts, NULL);
}

static double env_num(const char *k, double d) {
    const char *v = getenv(k);
    return v && *v ? atof(v) : d;
}

int fsync(int fd) {
    g_fsyncs++;
    long at = (long)env_num("FAULT_KILL_AT_FSYNC", 0);
    if (at > 0 && g_fsyncs == at && g_rank == (int)env_num("FAULT_KILL_RANK", 0)) {
        fprintf(stderr, "fault_run: rank %d: kill -9 at fsync #%ld\n", g_rank, g_fsyncs);
        raise(SIGKILL);
    }
    sleep_ms(env_num("FAULT_FSYNC_MS", 0));
    return (int)syscall(SYS_fsync, fd);
}

ssize_t write(int fd, const void *buf, size_t n) {
    struct stat sb;   /* files only: MPI's own pipes and sockets keep working */
    if (g_enospc && g_rank == 1 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) { errno = ENOSPC; return -1; }
    return syscall(SYS_write, fd, buf, n);
}

static volt_status slow_batch(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    g_rank = volt_trainer_rank(t);
    sleep_ms(env_num("FAULT_BATCH_MS", 0));
    return VOLT_OK;
}

static volt_status stop_batch(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    g_rank = volt_trainer_rank(t);
    if (g_rank == 1 && i == 3) {
        fprintf(stderr, "fault_run: rank 1: SIGSTOP at batch 3\n");
        raise(SIGSTOP);
    }
    return VOLT_OK;
}

/* stepfail: rank 1 alone fails at batch 3 of epoch 0's training, or with FAULT_FAIL_IN=val at
 * batch 1 of its validation (fsdp's forward gathers) (a hook's error, as a bad sample in its shard
 * would fail its step); the program then ends, as an app does */
static volt_status fail_batch(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    g_rank = volt_trainer_rank(t);
    const bool val = volt_trainer_stage(t) == VOLT_STAGE_VALIDATE;
    if (g_rank == 1 && i == (val ? 1 : 3) && volt_trainer_current_epoch(t) == 0) {
        fprintf(stderr, "fault_run: rank 1: failing alone at %s batch %lld\n", val ? "validation" : "training", (long long)i);
        return VOLT_ERR_INVALID_ARG;
    }
    return VOLT_OK;
}

static int g_saves;
static volt_status count_saves(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    /* ModelCheckpoint saves at the batch end of every 2nd step: before its 3rd save, starve */
    if (volt_trainer_global_step(t) % 2 == 0 && ++g_saves == 3) g_enospc = 1;
    return VOLT_OK;
}

static volt_status say_start(void *self, volt_trainer *t) {
    if (volt_trainer_rank(t) == 0) printf("fault_run: training starts at step %lld\n", (long long)volt_trainer_global_step(t));
    fflush(stdout);
    return VOLT_OK;
}

static const volt_callback_ops slow_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Slow", .on_train_batch_start = slow_batch,
                                            .on_train_start = say_start };
static const volt_callback_ops stop_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Stop", .on_train_batch_start = stop_batch };
static const volt_callback_ops fail_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "FailAlone", .on_train_batch_start = fail_batch };
static const volt_callback_ops fail_val_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "FailAlone",
                                                .on_validation_batch_start = fail_batch };
static const volt_callback_ops starve_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Starve", .on_train_batch_end = count_saves };

static volt_trainer *make(const char *root, const char *strategy) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_epochs = 2;
    c.enable_progress_bar = false;
    c.num_sanity_val_steps = 0;
    c.default_root_dir = root;
    c.strategy = strategy;
    c.seed = 11;
    volt_trainer *t = NULL;
    if (volt_trainer_create(&c, &t) != VOLT_OK) {
        fprintf(stderr, "fault_run: trainer: %s\n", t ? volt_trainer_errmsg(t) : "?");
        volt_trainer_destroy(t);
        return NULL;
    }
    g_rank = volt_trainer_rank(t);
    return t;
}

static int run_fit(const char *root, const char *strategy, int mode) {
    volt_trainer *t = make(root, strategy);
    if (!t) return 2;
    const int world = volt_trainer_world_size(t);
    volt_dataset *ds = rel_data();
    volt_loader *l = rel_loader(ds, 8 / world, true), *vl = rel_loader(ds, 16 / world, false);
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.save_last = true;
    cc.every_n_train_steps = mode == 2 ? 2 : 5;   /* mid-epoch (12 steps an epoch), and at epoch end */
    volt_add_model_checkpoint(t, &cc);
    const char *fail_in = getenv("FAULT_FAIL_IN");
    const bool in_val = fail_in && !strcmp(fail_in, "val");
    volt_trainer_add_callback(t, mode == 1 ? &stop_ops : mode == 3 ? (in_val ? &fail_val_ops : &fail_ops) : &slow_ops, NULL);
    if (mode == 2) volt_trainer_add_callback(t, &starve_ops, NULL);
    rel_mlp m = { 0 };
    volt_status st = volt_trainer_fit(t, &rel_ops, &m, l, vl, mode == 0 ? "last" : NULL);
    int rc = 0;
    if (st < 0) {
        fprintf(stderr, "fault_run: rank %d: fit: %s: %s\n", g_rank, volt_status_str(st), volt_trainer_errmsg(t));
        rc = 1;
    }
    if (mode == 2) {   /* the failed save must leave the previous checkpoint loadable */
        g_enospc = 0;
        const char *ld = volt_trainer_log_dir(t);
        char last[2048];
        snprintf(last, sizeof last, "%s/checkpoints/last.safetensors", ld ? ld : "?");
        volt_status vs = volt_trainer_validate(t, &rel_ops, &m, vl, last);
        printf("fault_run: rank %d: fit after ENOSPC: %s; validate '%s': %s %s\n", g_rank, volt_status_str(st), last,
               volt_status_str(vs), vs < 0 ? volt_trainer_errmsg(t) : "");
        rc = st == VOLT_ERR_IO && vs == VOLT_OK ? 0 : 1;
    } else if (st >= 0 && g_rank == 0) {
        int64_t n;
        float *w = rel_weights(t, &n);
        char p[2048];
        snprintf(p, sizeof p, "%s/final.bin", root);
        FILE *f = fopen(p, "wb");
        if (!f || fwrite(w, sizeof(float), (size_t)n, f) != (size_t)n) rc = 1;
        if (f) fclose(f);
        free(w);
    }
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_loader_destroy(vl);
    volt_dataset_destroy(ds);
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 4 && !strcmp(argv[1], "fit")) return run_fit(argv[2], argv[3], 0);
    if (argc >= 4 && !strcmp(argv[1], "hang")) return run_fit(argv[2], argv[3], 1);
    if (argc >= 4 && !strcmp(argv[1], "diskfull")) return run_fit(argv[2], argv[3], 2);
    if (argc >= 4 && !strcmp(argv[1], "stepfail")) return run_fit(argv[2], argv[3], 3);
    fprintf(stderr, "usage: fault_run fit|hang|diskfull|stepfail ROOT STRATEGY\n");
    return 2;
}
