/* apps/app_common.h — what volt-fashion-mnist and volt-text-classification share: the
 * trainer flags (parsing, --help lines, the volt_trainer_config they fill), the
 * ModelCheckpoint both use, rank-0-only output, --memory-report and --export-full.
 * For the apps only (not installed); written against the public headers, like the apps. */
#ifndef VOLT_APP_COMMON_H
#define VOLT_APP_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "volt/core.h"
#include "volt/trainer.h"

/* The trainer flags both apps take; each app keeps its own model and data flags. */
typedef struct app_trainer_opts {
    const char *root;               /* --root: logs and checkpoints */
    const char *precision;          /* --precision, default "32-true" */
    const char *strategy;           /* --strategy, default "single" */
    const char *export_full;        /* --export-full PATH; NULL = no export */
    uint64_t seed;                  /* --seed, default 42 */
    int workers;                    /* --workers, default 1 */
    int64_t limit_train, limit_val, limit_test;   /* --limit-*-batches; -1 = all */
    bool resume;                    /* --resume: fit from "last" */
    bool progress;                  /* false after --no-progress */
    bool memory_report;             /* --memory-report */
} app_trainer_opts;

/* Defaults; root is borrowed (a string literal). */
void app_trainer_opts_init(app_trainer_opts *o, const char *root);
/* A flag without a value (--resume, --no-progress, --memory-report): true if it is one. */
bool app_trainer_switch(const char *flag, app_trainer_opts *o);
/* Whether flag is one of the trainer flags that take a value (--root, --strategy, ...). */
bool app_trainer_has_flag(const char *flag);
/* A flag with a value: 1 = ours and stored, 0 = not ours, -1 = ours but a bad value (*why
 * says what is wanted, e.g. " (want an integer >= 1)"). value is borrowed (argv). */
int app_trainer_flag(const char *flag, const char *value, app_trainer_opts *o, const char **why);
/* The --help lines of those flags (--root, --seed and --resume are the app's own text). */
void app_trainer_usage(FILE *f);
/* Copy the flags into cfg (after volt_trainer_config_init). */
void app_trainer_config(const app_trainer_opts *o, volt_trainer_config *cfg);

/* ModelCheckpoint(monitor="val_acc", mode="max", save_top_k=1, save_last=True) in a fixed
 * folder (so --resume finds "last"), with the app's filename template. */
volt_status app_add_checkpoint(volt_trainer *t, const char *dirpath, const char *filename);

/* --memory-report: a callback that prints the per-rank memory table (stdout, rank 0) once,
 * at the end of the first train batch that took an optimizer step (so the activation peak
 * is known). Collective: on_train_batch_end runs on every rank at the same batch. */
volt_status app_add_memory_report(volt_trainer *t);
/* Collective (every rank calls them). After fit: the memory table again, if asked. After
 * test: --export-full, if asked, of the weights test ran with (rank 0 writes the file and
 * says where). 0 = ok, 1 = failed (message on stderr). */
int app_after_fit(volt_trainer *t, const app_trainer_opts *o, const char *app);
int app_after_test(volt_trainer *t, const app_trainer_opts *o, const char *app);

/* This process's rank before the trainer exists, from the launcher's environment
 * (OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID); 0 when none is set. */
int app_env_rank(void);
/* The world size the same way (OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS); 1 when none. */
int app_env_world(void);

bool app_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool app_parse_f(const char *s, float lo, float hi, float *out);
double app_now_s(void);
/* "<app>: <what> failed (<status>): <msg>" on stderr; returns 1 (the exit status). */
int app_fail(const char *app, const char *what, volt_status st, const char *msg);

#endif
