/* The apps' shared part (apps/app_common.h). */
#include "app_common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const volt_cli_key app_run_keys[] = {
    { "data.num_workers", VOLT_CLI_INT, "1", "data loader threads (0 = load in the main thread)", "workers", NULL, 0, 64 },
    { "ckpt_path", VOLT_CLI_STRING, NULL,
      "fit: resume from it; validate/test/predict: the weights (a path, or \"last\": the newest of the checkpoint folder's last, last-vN and on_exception files)", NULL, NULL, 0, 0 },
    { "resume", VOLT_CLI_BOOL, "false", "fit: continue from the last checkpoint (ckpt_path \"last\")", NULL, NULL, 0, 0 },
    { "test_after_fit", VOLT_CLI_BOOL, "true", "fit: then test with the best checkpoint (the recipe)", NULL, NULL, 0, 0 },
    { "memory_report", VOLT_CLI_BOOL, "false",
      "print the per-rank memory table after the first optimizer step and after fit", "memory-report", NULL, 0, 0 },
    { "export_full", VOLT_CLI_STRING, NULL,
      "after test, write the weights test ran with as one plain f32 safetensors file", "export-full", NULL, 0, 0 },
    /* nullable (Lightning's monitor: Optional[str]); its default "val_acc" is app_run_defaults' */
    { "checkpoint.monitor", VOLT_CLI_STRING, NULL, "ModelCheckpoint: the metric ranking checkpoints (null: none, keep the latest)", NULL, NULL, 0, 0 },
    { "checkpoint.mode", VOLT_CLI_STRING, "max", "ModelCheckpoint: keep the highest or lowest", NULL, "max|min", 0, 0 },
    { "checkpoint.save_top_k", VOLT_CLI_INT, "1", "ModelCheckpoint: best files kept (-1 = all)", NULL, NULL, -1, 1e6 },
    { "checkpoint.save_last", VOLT_CLI_BOOL, "true", "ModelCheckpoint: also keep last.safetensors", NULL, NULL, 0, 0 },
    { "checkpoint.filename", VOLT_CLI_STRING, NULL, "ModelCheckpoint: file name template (null = the app's)", NULL, NULL, 0, 0 },
    { "checkpoint.auto_insert_metric_name", VOLT_CLI_BOOL, "true", "ModelCheckpoint: name=value in file names (\"epoch=2-val_acc=0.88\"); false: the values alone (\"2-0.88\")", NULL, NULL, 0, 0 },
    { "checkpoint.enable_version_counter", VOLT_CLI_BOOL, "true", "ModelCheckpoint: a name taken by another file gets -v1, -v2...; false: overwrite it", NULL, NULL, 0, 0 },
    { "checkpoint.save_weights_only", VOLT_CLI_BOOL, "false", "ModelCheckpoint: the weights and loop state without the optimizer (a third of the size; test loads it, fit cannot resume from it)", NULL, NULL, 0, 0 },
    { "checkpoint.async_save", VOLT_CLI_BOOL, "false", "ModelCheckpoint: write checkpoints in a background thread from a host copy while training goes on (as Lightning's AsyncCheckpointIO; under sharded strategies every rank writes its shard and the next save point commits them)", NULL, NULL, 0, 0 },
    { "checkpoint.on_exception", VOLT_CLI_BOOL, "true", "OnExceptionCheckpoint: when fit fails or is interrupted (Ctrl-C, SIGTERM), save on_exception.safetensors beside the checkpoints to resume from with --ckpt_path", NULL, NULL, 0, 0 },
    { "checkpoint.verbose", VOLT_CLI_BOOL, "false", "ModelCheckpoint: print each save point's decision (\"Epoch 2, global step 72: 'val_acc' reached 0.87500 (best 0.87500), saving model to '...' as top 1\")", NULL, NULL, 0, 0 },
    { "checkpoint.train_time_interval", VOLT_CLI_FLOAT, "0", "ModelCheckpoint: seconds; save (top-k and last) at the train batch end once this much time has passed since the last such save or train start, instead of after each validation (rank 0's clock decides); 0 = off (Lightning's train_time_interval)", NULL, NULL, 0, 1e15 },
    { "early_stopping.monitor", VOLT_CLI_STRING, NULL, "EarlyStopping (Lightning's): the metric to watch, e.g. val_loss; stops fit when it has not improved for early_stopping.patience checks (one per validation); null = off", NULL, NULL, 0, 0 },
    { "early_stopping.mode", VOLT_CLI_STRING, "min", "EarlyStopping: min (a loss) or max (an accuracy)", NULL, "min|max", 0, 0 },
    { "early_stopping.patience", VOLT_CLI_INT, "3", "EarlyStopping: checks with no improvement before stopping", NULL, NULL, 0, 1e12 },
    { "early_stopping.min_delta", VOLT_CLI_FLOAT, "0", "EarlyStopping: the least change that counts as an improvement", NULL, NULL, 0, 1e30 },
    { "early_stopping.stopping_threshold", VOLT_CLI_FLOAT, NULL, "EarlyStopping: stop at once when the metric is better than this (null = none)", NULL, NULL, -1e30, 1e30 },
    { "early_stopping.divergence_threshold", VOLT_CLI_FLOAT, NULL, "EarlyStopping: stop at once when the metric is worse than this (null = none)", NULL, NULL, -1e30, 1e30 },
    { "early_stopping.check_finite", VOLT_CLI_BOOL, "true", "EarlyStopping: stop when the metric is NaN or infinite", NULL, NULL, 0, 0 },
    { "early_stopping.verbose", VOLT_CLI_BOOL, "false", "EarlyStopping: also print each improvement (the reason for a stop is printed always)", NULL, NULL, 0, 0 },
    { "early_stopping.check_on_train_epoch_end", VOLT_CLI_BOOL, NULL, "EarlyStopping: check at every train epoch's end only (true), at validation ends only (false), or null (Lightning's None): true when validation runs at every epoch's end (check_val_every_n_epoch 1, no val_check_interval), else false", NULL, NULL, 0, 0 },
    { "weight_averaging.mode", VOLT_CLI_STRING, "none", "weight averaging (Lightning's WeightAveraging): \"ema\" (EMAWeightAveraging; also on when weight_averaging.decay is given), \"swa\" (the equal average of every update), \"none\"; validation, the end of fit and the checkpoints' weights use the average", NULL, "none|ema|swa", 0, 0 },
    { "weight_averaging.decay", VOLT_CLI_FLOAT, "0.999", "weight averaging, EMA: avg = decay*avg + (1-decay)*weights, in [0, 1)", NULL, NULL, 0, 1 },
    { "weight_averaging.update_every_n_steps", VOLT_CLI_INT, "1", "weight averaging: update after every Nth optimizer step", NULL, NULL, 1, 1e12 },
    { "weight_averaging.update_starting_at_step", VOLT_CLI_INT, "-1", "weight averaging: first optimizer step (0-based) that updates (-1 = from the first)", NULL, NULL, -1, 1e12 },
    { "weight_averaging.update_starting_at_epoch", VOLT_CLI_INT, "-1", "weight averaging: also update at the end of each epoch from this one (0-based; -1 = never)", NULL, NULL, -1, 1e12 },
    { "accumulation.scheduling", VOLT_CLI_STRING, NULL, "GradientAccumulationScheduler (Lightning's): EPOCH:FACTOR,... (e.g. \"0:8,4:4,8:1\": 8 batches per optimizer step in epochs 0-3, 4 in 4-7, then 1; epochs 0-based, before the first given 1); leave trainer.accumulate_grad_batches at 1", NULL, NULL, 0, 0 },
    { "finetuning.backbone", VOLT_CLI_STRING, NULL, "BackboneFinetuning (Lightning's): the backbone's parameters, fnmatch globs on the whole name, comma-separated (text app: \"distilbert.*\"); frozen until finetuning.unfreeze_backbone_at_epoch, then trained in an optimizer group of their own whose lr starts at a tenth of the model's and grows each epoch; null = off", NULL, NULL, 0, 0 },
    { "finetuning.unfreeze_backbone_at_epoch", VOLT_CLI_INT, "10", "BackboneFinetuning: the epoch (0-based) at whose start the backbone is unfrozen", NULL, NULL, 0, 1e12 },
    { "finetuning.multiplier", VOLT_CLI_FLOAT, "1.5", "BackboneFinetuning: the backbone's lr is multiplied by this at each later epoch start (Lightning's multiplicative lambda_func)", NULL, NULL, 0, 1e9 },
    { "finetuning.backbone_initial_ratio_lr", VOLT_CLI_FLOAT, "0.1", "BackboneFinetuning: the backbone's first lr as a fraction of the model's current lr", NULL, NULL, 0, 1e9 },
    { "finetuning.backbone_initial_lr", VOLT_CLI_FLOAT, NULL, "BackboneFinetuning: the backbone's first lr itself (null = backbone_initial_ratio_lr x the model's)", NULL, NULL, 0, 1e9 },
    { "finetuning.should_align", VOLT_CLI_BOOL, "true", "BackboneFinetuning: at the epoch starts after the unfreeze, hold the backbone's lr at the model's (the first, backbone_initial_*, is not held)", NULL, NULL, 0, 0 },
    { "finetuning.verbose", VOLT_CLI_BOOL, "false", "BackboneFinetuning: print the lrs at each change", NULL, NULL, 0, 0 },
    { "throughput.enabled", VOLT_CLI_BOOL, "false", "ThroughputMonitor (Lightning's): log train/, validate/, test/ and predict/ batches, samples (and, where the app knows them, items and FLOPs) per second over a window of batches, MFU with a peak, and the totals; also on when another throughput.* key is given", "throughput", NULL, 0, 0 },
    { "throughput.window_size", VOLT_CLI_INT, "100", "ThroughputMonitor: batches in the rolling window (rates appear once it is full)", NULL, NULL, 2, 1e6 },
    { "throughput.peak_tflops", VOLT_CLI_FLOAT, "0", "ThroughputMonitor: the device's peak TFLOP/s for device/mfu (0: from the device name's table; none: no mfu)", NULL, NULL, 0, 1e9 },
    { "throughput.device_name", VOLT_CLI_STRING, NULL, "ThroughputMonitor: the GPU's name for the peak table (e.g. \"NVIDIA H100 80GB HBM3\", as nvidia-smi prints it; default: the device's own name)", NULL, NULL, 0, 0 },
    { "lr_monitor.log_momentum", VOLT_CLI_BOOL, "false", "LearningRateMonitor: also log each group's momentum (Adam's beta1, SGD's momentum) as lr-<Optimizer>-momentum", NULL, NULL, 0, 0 },
    { "lr_monitor.log_weight_decay", VOLT_CLI_BOOL, "false", "LearningRateMonitor: also log each group's weight decay as lr-<Optimizer>-weight_decay", NULL, NULL, 0, 0 },
    { "lr_monitor.logging_interval", VOLT_CLI_STRING, "step", "LearningRateMonitor: log the lr at every optimizer step (step) or once per epoch, the epoch's starting lr in the epoch's row (epoch); the apps keep step (Lightning's None, the scheduler's own interval, is the library's default)", NULL, "step|epoch", 0, 0 },
    { "tuner.scale_batch_size", VOLT_CLI_STRING, NULL, "fit: first Lightning's batch size finder: power doubles the batch size from tuner.init_val until a step runs out of memory; binsearch then bisects; the largest that ran is used for fit (train and val loaders; weights restored after; one process only), and the test after it searches its loader the same way; null = off", NULL, "power|binsearch", 0, 0 },
    { "tuner.steps_per_trial", VOLT_CLI_INT, "3", "the batch size finder: optimizer steps per batch size tried", NULL, NULL, 1, 100000 },
    { "tuner.init_val", VOLT_CLI_INT, "2", "the batch size finder: the first batch size tried", NULL, NULL, 1, 1e12 },
    { "tuner.max_trials", VOLT_CLI_INT, "25", "the batch size finder: batch sizes tried at most (binsearch: that ran)", NULL, NULL, 1, 100000 },
    { "device_stats.enabled", VOLT_CLI_BOOL, "false", "DeviceStatsMonitor (Lightning's): log the device's stats before and after the batches whose step the loggers write (every trainer.log_every_n_steps): on cuda the bytes allocated and reserved (current, peak), on the cpu the host's cpu_percent, cpu_vm_percent and cpu_swap_percent; also on when device_stats.cpu_stats is given", "device-stats", NULL, 0, 0 },
    { "device_stats.cpu_stats", VOLT_CLI_BOOL, NULL, "DeviceStatsMonitor: the host's stats too (true), never (false: on the cpu nothing is logged), or null: only when the device is the cpu", NULL, NULL, 0, 0 },
    { "spike_detection.enabled", VOLT_CLI_BOOL, "false", "SpikeDetection (Lightning's): end fit when a training batch's loss spikes against the running mean of the last ones, writing the batches to skip on a rerun (it and the one before) to a JSON list; also on when another spike_detection.* key is given", "spike-detection", NULL, 0, 0 },
    { "spike_detection.mode", VOLT_CLI_STRING, "min", "SpikeDetection: min (a loss that rises may be a spike) or max", NULL, "min|max", 0, 0 },
    { "spike_detection.window", VOLT_CLI_INT, "10", "SpikeDetection: losses in the running mean", NULL, NULL, 1, 1e6 },
    { "spike_detection.warmup", VOLT_CLI_INT, "1", "SpikeDetection: the first batches of each epoch not checked", NULL, NULL, 0, 1e15 },
    { "spike_detection.atol", VOLT_CLI_FLOAT, NULL, "SpikeDetection: a spike differs from the running mean by at least this (null: no absolute tolerance)", NULL, NULL, 0, 1e300 },
    { "spike_detection.rtol", VOLT_CLI_FLOAT, NULL, "SpikeDetection: ... and by at least this times the mean (null: no relative tolerance)", NULL, NULL, 0, 1e300 },
    { "spike_detection.exclude_batches_path", VOLT_CLI_STRING, NULL, "SpikeDetection: the JSON file (a .json path) or its folder (skip_batches.json in it); null: <root>/skip_batches.json", NULL, NULL, 0, 0 },
    { "spike_detection.finite_only", VOLT_CLI_BOOL, "true", "SpikeDetection: a loss that is not finite is a spike (false: judged by the tolerances, never tracked)", NULL, NULL, 0, 0 },
    { "timer.duration", VOLT_CLI_STRING, NULL, "Timer (Lightning's): stop fit once training has run this long, \"DD:HH:MM:SS\" (a resumed fit counts its checkpoint's time); null: no Timer", NULL, NULL, 0, 0 },
    { "timer.interval", VOLT_CLI_STRING, "step", "Timer: check the time after every training batch (step) or at each epoch's end (epoch)", NULL, "step|epoch", 0, 0 },
    { "timer.verbose", VOLT_CLI_BOOL, "true", "Timer: say when the time is up", NULL, NULL, 0, 0 },
};
const int app_n_run_keys = (int)(sizeof app_run_keys / sizeof app_run_keys[0]);

/* Defaults of nullable keys (a NULL default in the table makes a key nullable; every key with
 * a value default refuses null): checkpoint.monitor null = ModelCheckpoint without a metric. */
static const char *const app_run_defaults[] = { "checkpoint.monitor", "val_acc", "spike_detection.rtol", "2", NULL };

/* The run keys' checks that need no data: a usage error (message printed, returns 2) now,
 * not after the data is read or the whole fit ran. */
static int check_run_keys(const char *prog, const volt_cli *c) {
    const char *ex = volt_cli_str(c, "export_full"), *sub = volt_cli_subcommand(c);
    char why[600];
    if (ex && !app_out_path_ok(ex, why, sizeof why)) return app_usage(prog, "--export_full '%s': %s", ex, why);
    /* the file is the weights a test ran with: refused where no test runs, not silently unwritten */
    if (ex && (!strcmp(sub, "validate") || !strcmp(sub, "predict")))
        return app_usage(prog, "--export_full is written after a test, and %s runs none (run test --ckpt_path FILE "
                         "--export_full '%s')", sub, ex);
    if (ex && !strcmp(sub, "fit") && !volt_cli_bool(c, "test_after_fit"))
        return app_usage(prog, "--export_full is written after the test after fit, and --test_after_fit false runs none "
                         "(drop one of the two)");
    if (ex && volt_cli_float(c, "trainer.limit_test_batches") == 0)
        return app_usage(prog, "--export_full is written after a test, and --trainer.limit_test_batches 0 runs none");
    /* a file name, not a path: '/' or ".." would write outside the checkpoint folder */
    const char *fn = volt_cli_str(c, "checkpoint.filename");
    if (fn && (strchr(fn, '/') || !strcmp(fn, ".") || !strcmp(fn, "..")))
        return app_usage(prog, "bad value '%s' for --checkpoint.filename: a file name template, not a path (no '/', "
                         "not '.' or '..'): the files go in the app's checkpoint folder", fn);
    const char *dur = volt_cli_str(c, "timer.duration");
    double secs = 0;
    if (dur && *dur && (volt_parse_duration(dur, &secs) < 0 || !(secs > 0)))
        return app_usage(prog, "bad value '%s' for --timer.duration: want \"DD:HH:MM:SS\" (days, hours, minutes, "
                         "seconds; e.g. 00:12:00:00), more than no time", dur);
    return 0;
}

int app_cli_parse(const char *prog, const char *desc, const volt_cli_key *keys, int n_keys,
                  volt_cli_key buf[APP_MAX_KEYS], const char *const *defaults, const char *subcommands, int argc,
                  char **argv, volt_cli **out) {
    *out = NULL;
    if (n_keys + app_n_run_keys > APP_MAX_KEYS) { fprintf(stderr, "%s: too many keys\n", prog); return 1; }
    memcpy(buf, keys, sizeof *keys * (size_t)n_keys);
    memcpy(buf + n_keys, app_run_keys, sizeof *keys * (size_t)app_n_run_keys);
    volt_cli_config cc = { .version = VOLT_CLI_CONFIG_VERSION, .prog = prog, .description = desc, .keys = buf,
                           .n_keys = n_keys + app_n_run_keys, .default_subcommand = "fit",
                           .subcommands = subcommands };
    volt_cli *c = NULL;
    volt_status st = volt_cli_create(&cc, &c);
    for (int i = 0; st == VOLT_OK && app_run_defaults[i]; i += 2) st = volt_cli_set_default(c, app_run_defaults[i], app_run_defaults[i + 1]);
    for (int i = 0; st == VOLT_OK && defaults && defaults[i]; i += 2) st = volt_cli_set_default(c, defaults[i], defaults[i + 1]);
    if (st < 0) {
        fprintf(stderr, "%s: %s\n", prog, c ? volt_cli_errmsg(c) : volt_status_str(st));
        volt_cli_destroy(c);
        return 1;
    }
    int r = volt_cli_parse(c, argc, argv);
    if (r != VOLT_CLI_RUN) { volt_cli_destroy(c); return r == VOLT_CLI_DONE ? -1 : 2; }
    if (check_run_keys(prog, c)) { volt_cli_destroy(c); return 2; }
    st = volt_cli_launch(c, argc, argv);      /* returns only when nothing was launched */
    if (st < 0) {
        fprintf(stderr, "%s: %s\n", prog, volt_cli_errmsg(c));
        volt_cli_destroy(c);
        return 1;
    }
    *out = c;
    return 0;
}

/* The folder path names its entry in (trailing slashes dropped): "." for a bare name, "/"
 * for an entry of the root. */
static void parent_of(const char *path, char *dir, size_t n) {
    snprintf(dir, n, "%s", path);
    size_t l = strlen(dir);
    while (l > 1 && dir[l - 1] == '/') dir[--l] = 0;
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, n, ".");
    else if (slash == dir) dir[1] = 0;   /* "/x": the root */
    else *slash = 0;
}

/* dir exists as a folder this process can write into; else false and why */
static bool parent_ok(const char *dir, char *why, size_t n) {
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) { snprintf(why, n, "its folder '%s' does not exist", dir); return false; }
    if (access(dir, W_OK) != 0) { snprintf(why, n, "its folder '%s' is not writable: %s", dir, strerror(errno)); return false; }
    return true;
}

bool app_out_path_ok(const char *path, char *why, size_t n) {
    struct stat sb;
    if (!*path) { snprintf(why, n, "an empty path"); return false; }
    if ((stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) || path[strlen(path) - 1] == '/') {
        snprintf(why, n, "is a folder (a file path is wanted)");
        return false;
    }
    char dir[4096];
    parent_of(path, dir, sizeof dir);
    return parent_ok(dir, why, n);
}

bool app_out_dir_ok(const char *path, char *why, size_t n) {
    struct stat sb;
    if (!*path) { snprintf(why, n, "an empty path"); return false; }
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return true;
        snprintf(why, n, "there is a file of that name (a folder is wanted)");
        return false;
    }
    if (lstat(path, &sb) == 0) { snprintf(why, n, "is a link to nothing (a folder is wanted)"); return false; }
    char dir[4096];
    parent_of(path, dir, sizeof dir);
    return parent_ok(dir, why, n);
}

bool app_skip_test(volt_trainer *t, const volt_cli *c) {
    if (volt_cli_float(c, "trainer.limit_test_batches") != 0) return false;
    if (volt_trainer_is_global_zero(t)) {
        printf("no test: trainer.limit_test_batches is 0 (Lightning skips the test then)\n");
        fflush(stdout);
    }
    return true;
}

const char *app_fit_ckpt(const volt_cli *c) {
    const char *p = volt_cli_str(c, "ckpt_path");
    if (p) return p;
    return volt_cli_bool(c, "resume") ? "last" : NULL;
}

int app_usage(const char *app, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", app);
    vfprintf(stderr, fmt, ap);
    fputs(" (try --help)\n", stderr);
    va_end(ap);
    return 2;
}

void app_trainer_opts_from_cli(const volt_cli *c, app_trainer_opts *o) {
    *o = (app_trainer_opts){
        .root = volt_cli_str(c, "trainer.default_root_dir"), .precision = volt_cli_str(c, "trainer.precision"),
        .strategy = volt_cli_str(c, "trainer.strategy"), .export_full = volt_cli_str(c, "export_full"),
        .seed = (uint64_t)volt_cli_int(c, "trainer.seed"), .workers = (int)volt_cli_int(c, "data.num_workers"),
        .memory_report = volt_cli_bool(c, "memory_report"),
    };
    if (!o->root || !*o->root) o->root = ".";   /* "" is the current folder, as the trainer reads it (never "/checkpoints") */
    if (!o->precision) o->precision = "32-true";
    if (!o->strategy) o->strategy = "auto";
}

/* A callback's keys given without its key that turns it on (monitor, backbone): an error
 * naming the first, rather than a setting that does nothing. */
static volt_status orphan_keys(volt_trainer *t, const volt_cli *c, const char *const *keys, size_t n, const char *main_key,
                               const char *example) {
    for (size_t i = 0; i < n; i++)
        if (volt_cli_was_set(c, keys[i]))
            return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "--%s is set but %s is not: %s", keys[i], main_key, example);
    return VOLT_OK;
}

/* EarlyStopping from the early_stopping.* keys: off without a monitor (another key given
 * without it is an error). Added before ModelCheckpoint, so a checkpoint saved at a
 * validation holds the EarlyStopping state that already counts it (docs/CALLBACKS.md). */
static volt_status add_early_stopping(volt_trainer *t, const volt_cli *c) {
    static const char *const others[] = { "early_stopping.mode", "early_stopping.patience", "early_stopping.min_delta",
                                          "early_stopping.stopping_threshold", "early_stopping.divergence_threshold",
                                          "early_stopping.check_finite", "early_stopping.verbose",
                                          "early_stopping.check_on_train_epoch_end" };
    const char *mon = volt_cli_str(c, "early_stopping.monitor");
    if (!mon)
        return orphan_keys(t, c, others, sizeof others / sizeof others[0], "early_stopping.monitor",
                           "name the metric to watch (e.g. --early_stopping.monitor val_loss)");
    volt_early_stopping_config ec;
    volt_early_stopping_config_init(&ec);
    ec.monitor = mon;
    ec.mode = !strcmp(volt_cli_str(c, "early_stopping.mode"), "max") ? VOLT_MAX : VOLT_MIN;
    ec.patience = volt_cli_int(c, "early_stopping.patience");
    ec.min_delta = (float)volt_cli_float(c, "early_stopping.min_delta");
    if ((ec.has_stopping_threshold = !volt_cli_is_null(c, "early_stopping.stopping_threshold")))
        ec.stopping_threshold = (float)volt_cli_float(c, "early_stopping.stopping_threshold");
    if ((ec.has_divergence_threshold = !volt_cli_is_null(c, "early_stopping.divergence_threshold")))
        ec.divergence_threshold = (float)volt_cli_float(c, "early_stopping.divergence_threshold");
    ec.check_finite = volt_cli_bool(c, "early_stopping.check_finite");
    ec.verbose = volt_cli_bool(c, "early_stopping.verbose");
    if (!volt_cli_is_null(c, "early_stopping.check_on_train_epoch_end"))
        ec.check_on_train_epoch_end = volt_cli_bool(c, "early_stopping.check_on_train_epoch_end") ? 1 : 0;
    return volt_add_early_stopping(t, &ec);
}

volt_status app_add_checkpoint(volt_trainer *t, const volt_cli *c, const char *dirpath, const char *filename) {
    VOLT_TRY(add_early_stopping(t, c));
    const bool on_exc = volt_cli_bool(c, "checkpoint.on_exception");
    if (!volt_cli_bool(c, "trainer.enable_checkpointing"))   /* Lightning: no ModelCheckpoint then */
        return on_exc ? volt_add_on_exception_checkpoint(t, dirpath, NULL) : VOLT_OK;
    volt_checkpoint_config ck;
    volt_checkpoint_config_init(&ck);
    ck.dirpath = dirpath;
    ck.monitor = volt_cli_str(c, "checkpoint.monitor");
    ck.mode = !strcmp(volt_cli_str(c, "checkpoint.mode"), "min") ? VOLT_MIN : VOLT_MAX;
    ck.save_top_k = (int)volt_cli_int(c, "checkpoint.save_top_k");
    ck.save_last = volt_cli_bool(c, "checkpoint.save_last");
    ck.async_save = volt_cli_bool(c, "checkpoint.async_save");
    ck.save_weights_only = volt_cli_bool(c, "checkpoint.save_weights_only");
    ck.auto_insert_metric_name = volt_cli_bool(c, "checkpoint.auto_insert_metric_name");
    ck.enable_version_counter = volt_cli_bool(c, "checkpoint.enable_version_counter");
    ck.train_time_interval = volt_cli_float(c, "checkpoint.train_time_interval");
    ck.verbose = volt_cli_bool(c, "checkpoint.verbose");
    ck.filename = volt_cli_str(c, "checkpoint.filename") ? volt_cli_str(c, "checkpoint.filename") : filename;
    volt_status st = volt_add_model_checkpoint(t, &ck);
    if (st >= 0 && on_exc) st = volt_add_on_exception_checkpoint(t, dirpath, NULL);
    return st;
}

volt_status app_add_accumulation_scheduler(volt_trainer *t, const volt_cli *c) {
    const char *spec = volt_cli_str(c, "accumulation.scheduling");
    if (!spec || !*spec) return VOLT_OK;
    enum { MAX = 64 };
    int64_t ep[MAX], fa[MAX];
    int n = 0;
    bool bad = false;
    for (const char *p = spec; !bad;) {   /* EPOCH:FACTOR, then ',' and another, or the end */
        char *end;
        long long e = strtoll(p, &end, 10);
        bad = end == p || *end != ':' || n == MAX;
        if (bad) break;
        p = end + 1;
        long long f = strtoll(p, &end, 10);
        bad = end == p || (*end && *end != ',');
        if (bad) break;
        ep[n] = e;
        fa[n++] = f;
        if (!*end) break;
        p = end + 1;
    }
    if (bad || n == 0)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "--accumulation.scheduling '%s': want EPOCH:FACTOR,... "
                                 "(e.g. 0:8,4:4,8:1; at most %d entries)", spec, MAX);
    return volt_add_gradient_accumulation_scheduler(t, ep, fa, n);
}

volt_status app_add_backbone_finetuning(volt_trainer *t, const volt_cli *c) {
    const char *bb = volt_cli_str(c, "finetuning.backbone");
    if (!bb) {
        static const char *const others[] = { "finetuning.unfreeze_backbone_at_epoch", "finetuning.multiplier",
                                              "finetuning.backbone_initial_ratio_lr", "finetuning.backbone_initial_lr",
                                              "finetuning.should_align", "finetuning.verbose" };
        return orphan_keys(t, c, others, sizeof others / sizeof others[0], "finetuning.backbone",
                           "name the backbone's parameters (e.g. --finetuning.backbone 'distilbert.*')");
    }
    volt_backbone_finetuning_config bc;
    volt_backbone_finetuning_config_init(&bc);
    bc.backbone = bb;
    bc.unfreeze_backbone_at_epoch = volt_cli_int(c, "finetuning.unfreeze_backbone_at_epoch");
    bc.multiplier = volt_cli_float(c, "finetuning.multiplier");
    bc.backbone_initial_ratio_lr = volt_cli_float(c, "finetuning.backbone_initial_ratio_lr");
    if (!volt_cli_is_null(c, "finetuning.backbone_initial_lr")) bc.backbone_initial_lr = volt_cli_float(c, "finetuning.backbone_initial_lr");
    bc.should_align = volt_cli_bool(c, "finetuning.should_align");
    bc.verbose = volt_cli_bool(c, "finetuning.verbose");
    return volt_add_backbone_finetuning(t, &bc);
}

volt_status app_add_weight_averaging(volt_trainer *t, const volt_cli *c) {
    const char *mode = volt_cli_str(c, "weight_averaging.mode");
    const bool swa = mode && !strcmp(mode, "swa");
    const bool ema = (mode && !strcmp(mode, "ema")) || (!swa && volt_cli_was_set(c, "weight_averaging.decay") &&
                                                      !volt_cli_was_set(c, "weight_averaging.mode"));
    if (!swa && !ema) return VOLT_OK;
    volt_weight_averaging_config wc;
    volt_weight_averaging_config_init(&wc);
    wc.mode = swa ? VOLT_OPTIM_AVERAGE_SWA : VOLT_OPTIM_AVERAGE_EMA;
    wc.decay = (float)volt_cli_float(c, "weight_averaging.decay");
    wc.update_every_n_steps = volt_cli_int(c, "weight_averaging.update_every_n_steps");
    wc.update_starting_at_step = volt_cli_int(c, "weight_averaging.update_starting_at_step");
    wc.update_starting_at_epoch = volt_cli_int(c, "weight_averaging.update_starting_at_epoch");
    return volt_add_weight_averaging(t, &wc);
}

void app_print_fit_end(volt_trainer *t, const char *monitor, double fit_s) {
    if (!volt_trainer_is_global_zero(t)) return;
    if (fit_s >= 0) printf("Time elapsed %.2f min\n", fit_s / 60.0);
    int64_t eager = 0, captured = 0, replayed = 0;   /* all 0 without compile */
    volt_trainer_compile_stats(t, &eager, &captured, &replayed);
    if (eager + captured + replayed > 0)
        printf("compile: %lld training steps replayed, %lld captured, %lld eager\n", (long long)replayed,
               (long long)captured, (long long)eager);
    const char *best = volt_trainer_best_model_path(t);
    if (best && monitor) printf("best checkpoint: %s (%s %.4f)\n", best, monitor, volt_trainer_best_model_score(t));
    else if (best) printf("best checkpoint: %s (the latest: no monitor)\n", best);
    else   /* said, not silently tested on the final weights */
        printf("no best checkpoint (%s%s%s); a test after fit runs with the final weights\n", monitor ? "'" : "",
               monitor ? monitor : "no checkpoint was saved", monitor ? "' was never logged: no validation ran?" : "");
    fflush(stdout);
}

void app_print_test_end(volt_trainer *t, double test_acc) {
    if (!volt_trainer_is_global_zero(t)) return;
    printf("Test accuracy %.4f\n", test_acc);
    fflush(stdout);
}

void app_print_logs(volt_trainer *t) {
    if (volt_trainer_is_global_zero(t) && volt_trainer_log_dir(t)) printf("logs: %s\n", volt_trainer_log_dir(t));
    fflush(stdout);
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

volt_status app_add_spike_detection(volt_trainer *t, const volt_cli *c) {
    static const char *const others[] = { "spike_detection.mode", "spike_detection.window", "spike_detection.warmup",
                                           "spike_detection.atol", "spike_detection.rtol",
                                           "spike_detection.exclude_batches_path", "spike_detection.finite_only" };
    bool any = false;
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) any |= volt_cli_was_set(c, others[i]);
    if (!(volt_cli_was_set(c, "spike_detection.enabled") ? volt_cli_bool(c, "spike_detection.enabled") : any)) {
        if (any && volt_trainer_is_global_zero(t))
            fprintf(stderr, "note: spike_detection.* is set but spike_detection.enabled is false: no SpikeDetection\n");
        return VOLT_OK;
    }
    volt_spike_detection_config sc;
    volt_spike_detection_config_init(&sc);
    sc.mode = strcmp(volt_cli_str(c, "spike_detection.mode"), "max") ? VOLT_MIN : VOLT_MAX;
    sc.window = volt_cli_int(c, "spike_detection.window");
    sc.warmup = volt_cli_int(c, "spike_detection.warmup");
    sc.atol = volt_cli_is_null(c, "spike_detection.atol") ? NAN : volt_cli_float(c, "spike_detection.atol");
    sc.rtol = volt_cli_is_null(c, "spike_detection.rtol") ? NAN : volt_cli_float(c, "spike_detection.rtol");
    sc.exclude_batches_path = volt_cli_str(c, "spike_detection.exclude_batches_path");
    sc.finite_only = volt_cli_bool(c, "spike_detection.finite_only");
    return volt_add_spike_detection(t, &sc);
}

volt_status app_add_timer(volt_trainer *t, const volt_cli *c) {
    if (volt_cli_is_null(c, "timer.duration")) {
        if ((volt_cli_was_set(c, "timer.interval") || volt_cli_was_set(c, "timer.verbose")) && volt_trainer_is_global_zero(t))
            fprintf(stderr, "note: timer.* is set but timer.duration is null: no Timer\n");
        return VOLT_OK;
    }
    volt_timer_config tc;
    volt_timer_config_init(&tc);
    tc.duration = volt_cli_str(c, "timer.duration");
    tc.interval = strcmp(volt_cli_str(c, "timer.interval"), "epoch") ? VOLT_TIMER_STEP : VOLT_TIMER_EPOCH;
    tc.verbose = volt_cli_bool(c, "timer.verbose");
    return volt_add_timer(t, &tc, NULL);
}

bool app_throughput_on(const volt_cli *c) {
    if (volt_cli_was_set(c, "throughput.enabled")) return volt_cli_bool(c, "throughput.enabled");
    static const char *const others[] = { "throughput.window_size", "throughput.peak_tflops", "throughput.device_name" };
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        if (volt_cli_was_set(c, others[i])) return true;
    return volt_cli_bool(c, "throughput.enabled");
}

volt_status app_add_throughput(volt_trainer *t, const volt_cli *c, volt_batch_count_fn length_fn, volt_batch_flops_fn flops_fn,
                               void *ctx) {
    if (!app_throughput_on(c)) return VOLT_OK;
    volt_throughput_config tc;
    volt_throughput_config_init(&tc);
    tc.window_size = volt_cli_int(c, "throughput.window_size");
    tc.peak_tflops = volt_cli_float(c, "throughput.peak_tflops");
    tc.device_name = volt_cli_str(c, "throughput.device_name");
    tc.length_fn = length_fn;
    tc.flops_fn = flops_fn;
    tc.fn_ctx = ctx;
    if (!flops_fn && (volt_cli_was_set(c, "throughput.peak_tflops") || tc.device_name) && volt_trainer_is_global_zero(t))
        fprintf(stderr, "note: throughput.peak_tflops / device_name: this app counts no FLOPs per batch, so no device/mfu "
                        "(nor flops_per_sec) is logged\n");
    return volt_add_throughput_monitor(t, &tc);
}

volt_status app_add_device_stats(volt_trainer *t, const volt_cli *c) {
    const bool cpu_set = volt_cli_was_set(c, "device_stats.cpu_stats");
    if (!(volt_cli_was_set(c, "device_stats.enabled") ? volt_cli_bool(c, "device_stats.enabled") : cpu_set)) {
        if (cpu_set && volt_trainer_is_global_zero(t))
            fprintf(stderr, "note: device_stats.cpu_stats is set but device_stats.enabled is false: no DeviceStatsMonitor\n");
        return VOLT_OK;
    }
    volt_device_stats_config dc;
    volt_device_stats_config_init(&dc);
    if (!volt_cli_is_null(c, "device_stats.cpu_stats")) dc.cpu_stats = volt_cli_bool(c, "device_stats.cpu_stats") ? 1 : 0;
    return volt_add_device_stats_monitor(t, &dc);
}

volt_status app_add_lr_monitor(volt_trainer *t, const volt_cli *c) {
    /* Lightning refuses a LearningRateMonitor without a logger: with the loggers off
     * (--trainer.enable_logger false) the apps add none */
    const volt_trainer_config *tc = volt_trainer_get_config(t);
    if (tc && !tc->enable_logger && tc->fast_dev_run <= 0) return VOLT_OK;
    volt_lr_monitor_config lc;
    volt_lr_monitor_config_init(&lc);
    lc.log_momentum = volt_cli_bool(c, "lr_monitor.log_momentum");
    lc.log_weight_decay = volt_cli_bool(c, "lr_monitor.log_weight_decay");
    lc.logging_interval = strcmp(volt_cli_str(c, "lr_monitor.logging_interval"), "epoch") ? VOLT_LR_LOG_STEP : VOLT_LR_LOG_EPOCH;
    return volt_add_lr_monitor_ex(t, &lc);
}

int app_scale_batch_size(volt_trainer *t, const volt_cli *c, volt_loader *train, int64_t *was, const char *app) {
    static const char *const others[] = { "tuner.steps_per_trial", "tuner.init_val", "tuner.max_trials" };
    const char *mode = volt_cli_str(c, "tuner.scale_batch_size");
    *was = volt_loader_batch_size(train);
    if (!mode) {
        for (size_t i = 0; i < sizeof others / sizeof *others; i++)
            if (volt_cli_was_set(c, others[i]) && volt_trainer_is_global_zero(t)) {
                fprintf(stderr, "%s: --%s is set but tuner.scale_batch_size is null: no batch size search; set "
                        "--tuner.scale_batch_size power (or binsearch)\n", app, others[i]);
                return 2;
            }
        return 0;
    }
    if (volt_trainer_world_size(t) > 1) {   /* refused by the trainer too; said once, before any rank starts */
        if (volt_trainer_is_global_zero(t))
            fprintf(stderr, "%s: tuner.scale_batch_size: not supported with distributed strategies (%d processes): run it "
                    "on one process, then pass the size it finds as the batch size\n", app, volt_trainer_world_size(t));
        return 2;
    }
    /* BatchSizeFinder: the search at fit's start, fit's train and val loaders set to the size
     * found; a resumed fit takes the size from its checkpoint (the batches it resumes among) */
    volt_batch_size_finder_config bc;
    volt_batch_size_finder_config_init(&bc);
    bc.find.mode = !strcmp(mode, "binsearch") ? VOLT_BATCH_SCALE_BINSEARCH : VOLT_BATCH_SCALE_POWER;
    bc.find.steps_per_trial = volt_cli_int(c, "tuner.steps_per_trial");
    bc.find.init_val = volt_cli_int(c, "tuner.init_val");
    bc.find.max_trials = volt_cli_int(c, "tuner.max_trials");
    volt_status st = volt_add_batch_size_finder(t, &bc);
    return st < 0 ? app_fail_run(app, "scale_batch_size", st, t) : 0;
}

/* The finders' lines, printed by a callback at fit start (the finders have run by then: the lines
 * come before training, and stay in the log when fit fails or is stopped later) */
typedef struct tuner_report { const char *mode; int64_t bs_was; double lr_was; } tuner_report;

static volt_status tuner_report_fit_start(void *self, volt_trainer *t) {
    const tuner_report *r = self;
    if (!volt_trainer_is_global_zero(t)) return VOLT_OK;
    const volt_batch_size_result *b = volt_batch_size_finder_result(t);
    if (b && b->n_trials == 0) {
        printf("scale_batch_size: batch size %lld from the checkpoint for fit (was %lld)\n", (long long)b->batch_size,
               (long long)r->bs_was);
    } else if (b) {
        printf("scale_batch_size (%s):", r->mode ? r->mode : "?");
        for (int i = 0; i < b->n_trials && i < VOLT_BATCH_SIZE_TRIALS_MAX; i++)
            printf(" %lld%s", (long long)b->sizes[i], b->ran[i] ? "" : " (out of memory)");
        printf("; batch size %lld for fit (was %lld)\n", (long long)b->batch_size, (long long)r->bs_was);
    }
    const volt_lr_find_result *l = volt_lr_finder_result(t);
    if (l && l->n > 0 && isfinite(l->suggestion))
        printf("lr_find: %lld steps from %g to %g; suggested lr %g, used for fit\n", (long long)l->n, l->lrs[0], l->lrs[l->n - 1],
               l->suggestion);
    else if (l && l->n > 0) printf("lr_find: %lld steps, too few to suggest a learning rate; fit keeps lr %g\n", (long long)l->n, r->lr_was);
    else if (l && isfinite(l->suggestion)) printf("lr_find: lr %g from the checkpoint, used for fit\n", l->suggestion);
    fflush(stdout);
    return VOLT_OK;
}

static const volt_callback_ops tuner_report_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "TunerReport",
                                                    .on_fit_start = tuner_report_fit_start, .destroy = free };

int app_add_tuner_report(volt_trainer *t, const volt_cli *c, int64_t bs_was, double lr_was, const char *app) {
    tuner_report *r = malloc(sizeof *r);
    if (!r) return app_fail(app, "adding the tuner's report", VOLT_ERR_NOMEM, NULL);
    *r = (tuner_report){ volt_cli_str(c, "tuner.scale_batch_size"), bs_was, lr_was };
    volt_status st = volt_trainer_add_callback(t, &tuner_report_ops, r);
    return st < 0 ? app_fail_run(app, "adding the tuner's report", st, t) : 0;
}

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

int app_env_world(void) {   /* the variables the comm reads (strategies/comm/comm.c) */
    static const char *const vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL };
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

int app_fail_run(const char *app, const char *what, volt_status st, volt_trainer *t) {
    const int sig = st == VOLT_ERR_INTERRUPTED ? volt_trainer_interrupted(t) : 0;
    /* an error every rank agreed on is said once, by rank 0 (every rank still exits 1) */
    if (!sig && volt_trainer_error_agreed(t) && !volt_trainer_is_global_zero(t)) return 1;
    if (!sig) return app_fail(app, what, st, volt_trainer_errmsg(t));
    if (volt_trainer_is_global_zero(t)) fprintf(stderr, "%s: %s interrupted: %s\n", app, what, volt_trainer_errmsg(t));
    return 128 + sig;
}
