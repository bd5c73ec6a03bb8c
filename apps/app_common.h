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
#include "volt/cli.h"

/* The keys both apps take besides trainer.* (volt_cli): data.num_workers, ckpt_path,
 * resume, test_after_fit, memory_report, export_full, checkpoint.*, weight_averaging.*, throughput.*. An app's key table is
 * its own keys followed by these (app_cli_create joins them). */
extern const volt_cli_key app_run_keys[];
extern const int app_n_run_keys;
#define APP_MAX_KEYS 96

/* Create the app's CLI from its own keys + app_run_keys (joined into buf, which must live
 * as long as the cli) and parse argv (subcommands: "fit|validate|test", NULL = all four). Returns 0 to go on, -1 to exit 0 (after --help,
 * --version, --print-config), else the exit status (2 on a usage error). Then self-launches under mpirun
 * when trainer.devices > 1 with a distributed strategy (volt_cli_launch). */
int app_cli_parse(const char *prog, const char *desc, const volt_cli_key *keys, int n_keys,
                  volt_cli_key buf[APP_MAX_KEYS], const char *const *defaults, const char *subcommands,
                  int argc, char **argv, volt_cli **out);
/* The fit ckpt_path from `resume` / `ckpt_path` (NULL = fresh). */
/* An output file path the program can create: not empty, not a folder, in a folder that exists
 * and is writable; else false and why. */
bool app_out_path_ok(const char *path, char *why, size_t n);
/* An output folder: not empty, a folder that exists or whose parent folder exists and is
 * writable (made later); else false and why. */
bool app_out_dir_ok(const char *path, char *why, size_t n);
const char *app_fit_ckpt(const volt_cli *c);
/* trainer.limit_test_batches 0: the test is skipped, said on stdout (rank 0); true then. */
bool app_skip_test(volt_trainer *t, const volt_cli *c);
/* "usage error" for a value the app checks itself: message on stderr, returns 2. */
int app_usage(const char *app, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The run options the apps read after parsing. */
typedef struct app_trainer_opts {
    const char *root;               /* trainer.default_root_dir */
    const char *precision, *strategy;
    const char *export_full;        /* NULL = no export */
    uint64_t seed;
    int workers;
    bool memory_report;
} app_trainer_opts;
void app_trainer_opts_from_cli(const volt_cli *c, app_trainer_opts *o);

/* ModelCheckpoint from the checkpoint.* keys (default monitor="val_acc", mode="max",
 * save_top_k=1, save_last=True) in a fixed folder (so --resume finds "last"), with the
 * app's filename template unless checkpoint.filename is set; none with
 * trainer.enable_checkpointing false. OnExceptionCheckpoint with checkpoint.on_exception.
 * EarlyStopping from the early_stopping.* keys, first (when early_stopping.monitor is set). */
volt_status app_add_checkpoint(volt_trainer *t, const volt_cli *c, const char *dirpath, const char *filename);

/* GradientAccumulationScheduler from accumulation.scheduling ("0:8,4:4,8:1"); nothing when
 * unset. INVALID_ARG (the trainer's message) for a malformed schedule. */
volt_status app_add_accumulation_scheduler(volt_trainer *t, const volt_cli *c);

/* WeightAveraging from the weight_averaging.* keys: mode "ema" (or only weight_averaging.decay
 * given) or "swa"; nothing for "none". */
volt_status app_add_weight_averaging(volt_trainer *t, const volt_cli *c);
/* BackboneFinetuning from the finetuning.* keys (off without finetuning.backbone; another key
 * given without it is an error). */
volt_status app_add_backbone_finetuning(volt_trainer *t, const volt_cli *c);

/* ThroughputMonitor from the throughput.* keys (on with throughput.enabled, or when another
 * throughput.* key is given and throughput.enabled is not): the app's items and FLOPs per
 * batch (NULL: none) with their ctx. */
bool app_throughput_on(const volt_cli *c);
volt_status app_add_throughput(volt_trainer *t, const volt_cli *c, volt_batch_count_fn length_fn, volt_batch_flops_fn flops_fn,
                               void *ctx);

/* The LearningRateMonitor both apps add, with the lr_monitor.* keys' flags. */
volt_status app_add_lr_monitor(volt_trainer *t, const volt_cli *c);

/* --tuner.scale_batch_size power|binsearch (Lightning's BatchSizeFinder), before fit: adds the
 * callback, whose search runs at fit's start and sets fit's train and val loaders to the size
 * found (a resumed fit: the checkpoint's size, no search). *was: the train loader's size now.
 * 0 when added or off; else the exit status (an error printed: a tuner.* key without the
 * mode, several processes, a bad setting). */
int app_scale_batch_size(volt_trainer *t, const volt_cli *c, volt_loader *train, int64_t *was, const char *app);
/* A callback printing the finders' lines at fit start (rank 0), once they ran: the batch sizes
 * tried and the one kept, or the checkpoint's ("was" bs_was), and lr_find's suggestion (or the
 * checkpoint's lr; lr_was when there is none). Nothing without a finder. 0, or 1 said. */
int app_add_tuner_report(volt_trainer *t, const volt_cli *c, int64_t bs_was, double lr_was, const char *app);

/* DeviceStatsMonitor from the device_stats.* keys (on with device_stats.enabled, or when
 * device_stats.cpu_stats is given and device_stats.enabled is not). */
volt_status app_add_device_stats(volt_trainer *t, const volt_cli *c);
/* SpikeDetection from the spike_detection.* keys (on when enabled, or when another is given). */
volt_status app_add_spike_detection(volt_trainer *t, const volt_cli *c);
/* A Timer from the timer.* keys (on when timer.duration is set; the others alone: a note). */
volt_status app_add_timer(volt_trainer *t, const volt_cli *c);

/* The closing lines both apps print (rank 0): "Time elapsed X.XX min" after fit,
 * "best checkpoint: PATH (val_acc X)" when there is one, then after test "Test accuracy X"
 * and "logs: DIR". fit_s < 0: no fit ran. */
void app_print_fit_end(volt_trainer *t, const char *monitor, double fit_s);
void app_print_test_end(volt_trainer *t, double test_acc);
void app_print_logs(volt_trainer *t);

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
int app_env_world(void);   /* the launcher's world size (1 outside a job) */

bool app_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool app_parse_f(const char *s, float lo, float hi, float *out);
double app_now_s(void);
/* "<app>: <what> failed (<status>): <msg>" on stderr; returns 1 (the exit status). */
int app_fail(const char *app, const char *what, volt_status st, const char *msg);
/* The same for fit / validate / test / predict: the exit code is 128 + the signal when a
 * SIGINT / SIGTERM stopped the run (130, 143: what a shell reports for a process the signal
 * ended), else 1. */
int app_fail_run(const char *app, const char *what, volt_status st, volt_trainer *t);

#endif
