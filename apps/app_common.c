/* The apps' shared part (apps/app_common.h). */
#include "app_common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void app_trainer_opts_init(app_trainer_opts *o, const char *root) {
    *o = (app_trainer_opts){ .root = root, .precision = "32-true", .strategy = "single", .export_full = NULL,
                             .seed = 42, .workers = 1, .limit_train = -1, .limit_val = -1, .limit_test = -1,
                             .resume = false, .progress = true, .memory_report = false };
}

bool app_trainer_switch(const char *a, app_trainer_opts *o) {
    if (!strcmp(a, "--resume")) o->resume = true;
    else if (!strcmp(a, "--no-progress")) o->progress = false;
    else if (!strcmp(a, "--memory-report")) o->memory_report = true;
    else return false;
    return true;
}

static const char *const trainer_flags[] = { "--root", "--precision", "--strategy", "--export-full", "--seed",
                                             "--workers", "--limit-train-batches", "--limit-val-batches",
                                             "--limit-test-batches", NULL };

bool app_trainer_has_flag(const char *a) {
    for (int i = 0; trainer_flags[i]; i++)
        if (!strcmp(a, trainer_flags[i])) return true;
    return false;
}

int app_trainer_flag(const char *a, const char *v, app_trainer_opts *o, const char **why) {
    int64_t n = 0;
    bool ok = true;
    *why = "";
    if (!strcmp(a, "--root")) { ok = *v != 0; o->root = v; }
    else if (!strcmp(a, "--precision")) { ok = *v != 0; o->precision = v; }
    else if (!strcmp(a, "--strategy")) { ok = *v != 0; o->strategy = v; }
    else if (!strcmp(a, "--export-full")) { ok = *v != 0; o->export_full = v; }
    else if (!strcmp(a, "--seed")) { ok = app_parse_i64(v, 0, INT64_MAX, &n); o->seed = (uint64_t)n; *why = " (want an integer >= 0)"; }
    else if (!strcmp(a, "--workers")) { ok = app_parse_i64(v, 0, 64, &n); o->workers = (int)n; *why = " (want 0..64)"; }
    else if (!strcmp(a, "--limit-train-batches")) { ok = app_parse_i64(v, 1, INT64_MAX / 4, &o->limit_train); *why = " (want an integer >= 1)"; }
    else if (!strcmp(a, "--limit-val-batches")) { ok = app_parse_i64(v, 0, INT64_MAX / 4, &o->limit_val); *why = " (want an integer >= 0)"; }
    else if (!strcmp(a, "--limit-test-batches")) { ok = app_parse_i64(v, 1, INT64_MAX / 4, &o->limit_test); *why = " (want an integer >= 1)"; }
    else return 0;
    return ok ? 1 : -1;
}

void app_trainer_usage(FILE *f) {
    fputs("  --workers N                data loader threads (default 1; 0 = load in the main thread)\n"
          "  --precision P              32-true (default), 16-mixed, bf16-mixed, bf16-true, 16-true\n"
          "  --strategy S               single (default), ddp, deepspeed_stage_1, deepspeed_stage_2,\n"
          "                             fsdp, fsdp_shard_grad_op; launch N ranks with\n"
          "                             scripts/volt-run -n N <app> ... (--batch-size is per rank:\n"
          "                             the global batch is N times it, as in Lightning)\n"
          "  --limit-train-batches N    at most N train batches per epoch (default all)\n"
          "  --limit-val-batches N      at most N val batches (default all; 0 = no validation)\n"
          "  --limit-test-batches N     at most N test batches (default all)\n"
          "  --memory-report            print the per-rank memory table (params, grads, optimizer\n"
          "                             state, activation peak) after the first optimizer step\n"
          "                             and again after fit (rank 0 prints one row per rank)\n"
          "  --export-full PATH         after test, write the weights test ran with (the best\n"
          "                             checkpoint's, else the final ones) as one plain f32\n"
          "                             safetensors file, gathered from the shards if sharded\n"
          "  --no-progress              no progress bar\n",
          f);
}

void app_trainer_config(const app_trainer_opts *o, volt_trainer_config *tc) {
    tc->seed = o->seed;
    tc->limit_train_batches = o->limit_train;
    tc->limit_val_batches = o->limit_val;
    tc->limit_test_batches = o->limit_test;
    tc->default_root_dir = o->root;
    tc->enable_progress_bar = o->progress;
    tc->precision = o->precision;
    tc->strategy = o->strategy;
}

volt_status app_add_checkpoint(volt_trainer *t, const char *dirpath, const char *filename) {
    volt_checkpoint_config ck;
    volt_checkpoint_config_init(&ck);
    ck.dirpath = dirpath;
    ck.monitor = "val_acc";
    ck.mode = VOLT_MAX;
    ck.save_top_k = 1;
    ck.save_last = true;
    ck.filename = filename;
    return volt_add_model_checkpoint(t, &ck);
}

/* ---- --memory-report ------------------------------------------------------------------------ */
typedef struct mem_cb {
    int64_t start_step;    /* global step when this fit began (a resumed run starts past 0) */
    bool done;
} mem_cb;

static volt_status mem_on_train_start(void *self, volt_trainer *t) {
    mem_cb *m = self;
    m->start_step = volt_trainer_global_step(t);
    m->done = false;
    return VOLT_OK;
}

static volt_status mem_on_train_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx) {
    mem_cb *m = self;
    if (m->done || volt_trainer_global_step(t) <= m->start_step) return VOLT_OK;
    m->done = true;
    if (volt_trainer_is_global_zero(t)) {
        /* the progress bar redraws its stderr line in place: end it before the table */
        if (volt_trainer_get_config(t)->enable_progress_bar && isatty(STDERR_FILENO)) fputc('\n', stderr);
        printf("after the first optimizer step (step %lld):\n", (long long)volt_trainer_global_step(t));
    }
    volt_status st = volt_trainer_print_memory_report(t, stdout);   /* collective */
    return st < 0 ? st : VOLT_OK;
}

static const volt_callback_ops mem_cb_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION,
    .name = "app_memory_report",
    .on_train_start = mem_on_train_start,
    .on_train_batch_end = mem_on_train_batch_end,
    .destroy = free,
};

volt_status app_add_memory_report(volt_trainer *t) {
    mem_cb *m = calloc(1, sizeof *m);
    if (!m) return VOLT_ERR_NOMEM;
    return volt_trainer_add_callback(t, &mem_cb_ops, m);   /* owns m from here, even on failure */
}

int app_after_fit(volt_trainer *t, const app_trainer_opts *o, const char *app) {
    if (!o->memory_report) return 0;
    if (volt_trainer_is_global_zero(t)) printf("after fit (step %lld):\n", (long long)volt_trainer_global_step(t));
    volt_status st = volt_trainer_print_memory_report(t, stdout);   /* collective */
    fflush(stdout);
    return st < 0 ? app_fail(app, "the memory report", st, volt_trainer_errmsg(t)) : 0;
}

int app_after_test(volt_trainer *t, const app_trainer_opts *o, const char *app) {
    if (!o->export_full) return 0;
    volt_status st = volt_trainer_export_full(t, o->export_full);   /* collective */
    if (st < 0) return app_fail(app, "--export-full", st, volt_trainer_errmsg(t));
    if (volt_trainer_is_global_zero(t)) printf("exported the full weights (f32 safetensors) to %s\n", o->export_full);
    fflush(stdout);
    return 0;
}

/* ---- small helpers ---------------------------------------------------------------------------- */
/* The first of vars that is set to an integer >= lo, else dflt. */
static int env_int(const char *const *vars, int64_t lo, int dflt) {
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        int64_t r;
        if (v && *v && app_parse_i64(v, lo, INT32_MAX, &r)) return (int)r;
    }
    return dflt;
}

int app_env_rank(void) {
    static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", NULL };
    return env_int(vars, 0, 0);
}

int app_env_world(void) {
    static const char *const vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", NULL };
    return env_int(vars, 1, 1);
}

bool app_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool app_parse_f(const char *s, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) return false;
    *out = v;
    return true;
}

double app_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int app_fail(const char *app, const char *what, volt_status st, const char *msg) {
    fprintf(stderr, "%s: %s failed (%s)%s%s\n", app, what, volt_status_str(st), msg && *msg ? ": " : "", msg ? msg : "");
    return 1;
}
