/* Trainer object: configuration, callbacks, accessors. The loops are in loop.c, the
 * checkpoint I/O in checkpoint.c, logging in metrics.c. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/fsutil.h"
#include "trainer/trainer_internal.h"
#include "strategies/comm/comm.h"

volt_status volt_trainer_fail(volt_trainer *t, volt_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    volt__set_err(t->errmsg, sizeof t->errmsg, fmt, ap);
    va_end(ap);
    t->err_agreed = false;
    return st;
}

volt_status volt_trainer_fail_agreed(volt_trainer *t, volt_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    volt__set_err(t->errmsg, sizeof t->errmsg, fmt, ap);
    va_end(ap);
    t->err_agreed = t->world > 1;
    return st;
}

bool volt_trainer_error_agreed(const volt_trainer *t) { return t && t->err_agreed; }

int64_t volt_trainer_num_eval_batches(const volt_trainer *t) { return t ? t->num_eval_batches : -1; }
int volt_trainer_dataloader_idx(const volt_trainer *t) { return t && t->n_eval_dl > 0 ? t->eval_dl : -1; }
int volt_trainer_num_eval_dataloaders(const volt_trainer *t) { return t ? t->n_eval_dl : 0; }

void volt_trainer_config_init(volt_trainer_config *c) {
    *c = (volt_trainer_config){
        .version = VOLT_TRAINER_CONFIG_VERSION, .max_epochs = -2 /* "unset": 1000 unless max_steps */,
        .max_steps = -1, .accumulate_grad_batches = 1, .gradient_clip_val = 0.f,
        .gradient_clip_algorithm = "norm", .val_check_interval = 0, .check_val_every_n_epoch = 1,
        .limit_train_batches = -1, .limit_val_batches = -1, .limit_test_batches = -1,
        .limit_predict_batches = -1, .num_sanity_val_steps = 2, .log_every_n_steps = 50,
        .fast_dev_run = 0, .deterministic = true, .seed = 42, .default_root_dir = ".",
        .enable_progress_bar = true, .enable_checkpointing = true, .enable_logger = true,
        .logger_name = "lightning_logs", .precision = "32-true", .strategy = "auto",
        .devices = 1, .num_nodes = 1, .run_config_json = NULL,
        .grad_scaler_init_scale = 65536.f, .grad_scaler_growth_factor = 2.f,
        .grad_scaler_backoff_factor = 0.5f, .grad_scaler_growth_interval = 2000,
        .optimizer_dtype = "auto", .run_fingerprint = NULL, .resume_anyway = false,
        .enable_model_summary = true, .enable_tensorboard = true, .enable_plots = true,
        .accelerator = "auto", .compile = false, .matmul_precision = "highest",
        .strategy_reduce_dtype = "fp32", .strategy_comm = "auto", .profiler = NULL,
        .max_time = NULL, .min_epochs = -1, .min_steps = -1, .overfit_batches = 0, .detect_anomaly = false,
        .handle_signals = true, .use_distributed_sampler = true,
    };
}

static char *dup_or(const char *s, const char *dflt) { return strdup(s ? s : dflt); }

/* matmul_precision: "high"/"medium" allow TF32 in f32 GEMMs; a backend without TF32 GEMMs
 * would ignore it, and a flag that does nothing is refused (docs/CUDA.md). The word here, the
 * device's capability once it is known (check_tf32). */
static volt_status check_matmul_precision(volt_trainer *t) {
    const char *m = t->cfg.matmul_precision;
    if (strcmp(m, "highest") && strcmp(m, "high") && strcmp(m, "medium"))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: matmul_precision must be \"highest\", \"high\" or \"medium\", got \"%s\"", m);
    return VOLT_OK;
}
static volt_status check_tf32(volt_trainer *t) {
    const char *m = t->cfg.matmul_precision;
    if (strcmp(m, "highest") && !(t->dev->caps & VOLT_DEV_TF32))
        return volt__terr(t, VOLT_ERR_UNSUPPORTED, "trainer: matmul_precision=\"%s\" allows TF32 GEMMs, which backend '%s' has none "
                          "of (its f32 GEMMs are always full f32): use \"highest\"", m, t->dev->be->name);
    return VOLT_OK;
}

volt_status volt_parse_duration(const char *s, double *seconds) {
    double d = -1, h = -1, m = -1, sec = -1;
    int end = 0;
    if (!s || !seconds || sscanf(s, "%lf:%lf:%lf:%lf%n", &d, &h, &m, &sec, &end) != 4 || s[end] || !(d >= 0 && d <= 1e6) ||
        !(h >= 0 && h <= 1e9) || !(m >= 0 && m <= 1e9) || !(sec >= 0 && sec <= 1e12) || d != floor(d) || h != floor(h) ||
        m != floor(m))
        return VOLT_ERR_INVALID_ARG;
    *seconds = ((d * 24 + h) * 60 + m) * 60 + sec;
    return VOLT_OK;
}

/* max_time "DD:HH:MM:SS" (Lightning's string form; fractional seconds allowed) into seconds. */
static volt_status parse_max_time(volt_trainer *t, const char *s) {
    t->max_time_s = 0;
    if (!s || !*s) return VOLT_OK;
    if (volt_parse_duration(s, &t->max_time_s) < 0)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: max_time must be \"DD:HH:MM:SS\" (days, hours, minutes, seconds), got \"%s\"", s);
    if (t->max_time_s <= 0) return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: max_time \"%s\" is no time at all", s);
    return VOLT_OK;
}

/* Lightning's float limits: a fraction in (0, 1], or a count, not both. */
static volt_status check_fractions(volt_trainer *t) {
    volt_trainer_config *c = &t->cfg;
    const struct { const char *name; double f; int64_t count, unset; } l[] = {
        { "train", c->limit_train_fraction, c->limit_train_batches, -1 },
        { "val", c->limit_val_fraction, c->limit_val_batches, -1 },
        { "test", c->limit_test_fraction, c->limit_test_batches, -1 },
        { "predict", c->limit_predict_fraction, c->limit_predict_batches, -1 },
    };
    for (size_t i = 0; i < sizeof l / sizeof l[0]; i++) {
        if (l[i].count < -1)
            return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: limit_%s_batches must be >= 0 (or -1: all), got %lld",
                              l[i].name, (long long)l[i].count);
        if (!(l[i].f >= 0 && l[i].f <= 1))
            return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: limit_%s_fraction must be in (0, 1] (0: unset), got %g",
                              l[i].name, l[i].f);
        if (l[i].f > 0 && l[i].count != l[i].unset)
            return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: limit_%s_batches is a count (%lld) and a fraction (%g): "
                              "give one", l[i].name, (long long)l[i].count, l[i].f);
    }
    if (!(c->overfit_fraction >= 0 && c->overfit_fraction <= 1))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: overfit_fraction must be in (0, 1] (0: unset), got %g", c->overfit_fraction);
    if (c->reload_dataloaders_every_n_epochs < 0)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: reload_dataloaders_every_n_epochs must be >= 0 (0: never), got %lld",
                          (long long)c->reload_dataloaders_every_n_epochs);
    if (c->reload_dataloaders_every_n_epochs > 0 && (c->overfit_batches != 0 || c->overfit_fraction > 0))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: reload_dataloaders_every_n_epochs with overfit_batches: overfitting "
                          "trains on the same batches every epoch, there is nothing to reload");
    if (c->overfit_fraction > 0 && c->overfit_batches != 0)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: overfit_batches is a count (%lld) and a fraction (%g): give one",
                          (long long)c->overfit_batches, c->overfit_fraction);
    if (!(c->val_check_fraction >= 0 && c->val_check_fraction <= 1))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: val_check_fraction must be in (0, 1] (0: unset), got %g",
                          c->val_check_fraction);
    if (c->val_check_fraction > 0 && c->val_check_interval != 0)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: val_check_interval is a count (%lld) and a fraction (%g): give one",
                          (long long)c->val_check_interval, c->val_check_fraction);
    return VOLT_OK;
}

/* A trainer holding its own copy of cfg (strings duplicated) with the defaults that depend on
 * other fields applied (max_epochs, fast_dev_run's limits): NULL when out of memory. */
static volt_trainer *trainer_new(const volt_trainer_config *cfg) {
    volt_trainer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->cfg = *cfg;
    /* "" is the current folder, as None and "" are Lightning's (never "/<logger_name>") */
    t->root_dir = dup_or(cfg->default_root_dir && *cfg->default_root_dir ? cfg->default_root_dir : NULL, ".");
    t->logger_name = dup_or(cfg->logger_name, "lightning_logs");
    t->precision = dup_or(cfg->precision, "32-true");
    /* "auto" (also NULL: the default, as for the other names) resolved here (ddp when the job has
     * several processes): what the summary, the run's config and checkpoints name */
    t->strategy_name = dup_or(volt__strategy_resolve(cfg->strategy ? cfg->strategy : "auto", cfg->devices, cfg->num_nodes),
                              "single");
    t->clip_algo = dup_or(cfg->gradient_clip_algorithm, "norm");
    t->run_config_json = cfg->run_config_json ? strdup(cfg->run_config_json) : NULL;
    t->run_fingerprint = cfg->run_fingerprint ? strdup(cfg->run_fingerprint) : NULL;
    t->accelerator = dup_or(cfg->accelerator, "auto");
    t->matmul_precision = dup_or(cfg->matmul_precision, "highest");
    t->cfg.matmul_precision = t->matmul_precision;
    t->reduce_dtype = cfg->strategy_reduce_dtype ? strdup(cfg->strategy_reduce_dtype) : NULL;
    t->comm = cfg->strategy_comm ? strdup(cfg->strategy_comm) : NULL;
    t->max_time = cfg->max_time && *cfg->max_time ? strdup(cfg->max_time) : NULL;
    t->cfg.strategy_reduce_dtype = t->reduce_dtype;
    t->cfg.strategy_comm = t->comm;
    t->cfg.accelerator = t->accelerator;
    t->cfg.run_fingerprint = t->run_fingerprint;
    t->cfg.default_root_dir = t->root_dir;
    t->cfg.logger_name = t->logger_name;
    t->cfg.precision = t->precision;
    t->cfg.strategy = t->strategy_name;
    t->cfg.gradient_clip_algorithm = t->clip_algo;
    t->cfg.run_config_json = t->run_config_json;
    t->cfg.max_time = t->max_time;   /* the caller's strings are not kept */
    t->rank = 0;
    t->world = 1;
    t->num_eval_batches = -1;
    t->eval_dl = -1;
    t->est_steps = -1;
    t->add_defaults = volt__add_default_callbacks;
    t->order_callbacks = volt__order_callbacks;
    volt_trainer_config *c = &t->cfg;
    if (c->max_epochs == -2) c->max_epochs = c->max_steps < 0 ? 1000 : -1;
    if (c->fast_dev_run > 0) {
        c->max_epochs = 1;
        c->max_steps = c->fast_dev_run;
        c->limit_train_batches = c->limit_val_batches = c->limit_test_batches = c->limit_predict_batches = c->fast_dev_run;
        c->limit_train_fraction = c->limit_val_fraction = c->limit_test_fraction = c->limit_predict_fraction = 0;
        c->val_check_fraction = 0;
        c->val_check_interval = 0;        /* Lightning's fast_dev_run: validation at the epoch's end */
        c->check_val_every_n_epoch = 1;
        c->num_sanity_val_steps = 0;
        c->enable_checkpointing = false;
        c->enable_logger = false;
    }
    return t;
}

/* The checks of the settings alone, and what they imply (overfit_batches' limits): nothing
 * is made (no device, strategy or comm), so a wrong setting fails before any of that
 * (volt_trainer_create) or before a program reads its data (volt_trainer_config_check). */
static volt_status check_settings(volt_trainer *t) {
    volt_trainer_config *c = &t->cfg;
    if (c->logger_name && !volt__path_stays_under(c->logger_name))   /* the logs' folder under default_root_dir */
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: logger_name \"%s\" would put the logs outside default_root_dir "
                          "(an absolute path or a '..'): name a folder under it", c->logger_name);
    if (c->accumulate_grad_batches < 1)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: accumulate_grad_batches must be >= 1, got %lld", (long long)c->accumulate_grad_batches);
    if (strcmp(c->gradient_clip_algorithm, "norm") && strcmp(c->gradient_clip_algorithm, "value"))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: gradient_clip_algorithm must be \"norm\" or \"value\", got \"%s\"", c->gradient_clip_algorithm);
    if (!(c->gradient_clip_val >= 0) || !isfinite(c->gradient_clip_val))   /* NaN passed "< 0" and clipped nothing */
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: gradient_clip_val must be a finite number >= 0 (0: no clipping), "
                          "got %g", (double)c->gradient_clip_val);
    if (c->val_check_interval < 0 || (c->val_check_interval > 0 && c->val_check_interval % c->accumulate_grad_batches))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: val_check_interval (%lld) must be >= 0 and a multiple of accumulate_grad_batches (%lld)",
                          (long long)c->val_check_interval, (long long)c->accumulate_grad_batches);
    if (c->num_sanity_val_steps < -1)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: num_sanity_val_steps must be >= 0 (or -1: all), got %lld",
                          (long long)c->num_sanity_val_steps);
    if (c->check_val_every_n_epoch < 0)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: check_val_every_n_epoch must be >= 1 (or 0: Lightning's None, "
                          "validation every val_check_interval train batches counted across epochs), got %lld",
                          (long long)c->check_val_every_n_epoch);
    if (c->check_val_every_n_epoch == 0 && (c->val_check_fraction > 0 || c->val_check_interval <= 0))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: check_val_every_n_epoch=0 (None) validates every val_check_interval "
                          "train batches across epochs: give val_check_interval a count of batches (%s)",
                          c->val_check_fraction > 0 ? "a fraction of an epoch was given" : "it is 0");
    if (c->log_every_n_steps < 1)   /* 0 was taken as 1 without a word */
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: log_every_n_steps must be >= 1, got %lld", (long long)c->log_every_n_steps);
    if (c->max_epochs == 0 || c->max_steps == 0 || c->max_epochs < -1 || c->max_steps < -1)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: max_epochs and max_steps must be >= 1 (or -1: no limit), got %lld "
                          "and %lld", (long long)c->max_epochs, (long long)c->max_steps);
    if (c->devices < 1 || c->num_nodes < 1)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: devices and num_nodes must be >= 1, got %d and %d", (int)c->devices,
                          (int)c->num_nodes);
    /* every backend's reductions run in a fixed order (no atomics, no split sums that vary):
     * there is no faster nondeterministic kernel for false to allow, and a flag that does
     * nothing is refused */
    if (!c->deterministic)
        return volt__terr(t, VOLT_ERR_UNSUPPORTED, "trainer: deterministic=false: volt has no nondeterministic kernels to "
                          "allow (every backend reduces in a fixed order; a run repeats bit for bit): leave it true");
    VOLT_TRY(parse_max_time(t, c->max_time));
    if (c->min_epochs < -1 || c->min_steps < -1)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: min_epochs and min_steps must be >= 0 (or -1: none)");
    if (c->overfit_batches < 0)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: overfit_batches must be >= 0, got %lld", (long long)c->overfit_batches);
    VOLT_TRY(check_fractions(t));
    if (c->overfit_batches > 0) {   /* Lightning: the same N train batches, N val batches */
        c->limit_train_batches = c->overfit_batches;
        c->limit_val_batches = c->overfit_batches;
        c->limit_train_fraction = c->limit_val_fraction = 0;
    } else if (c->overfit_fraction > 0) {   /* ... or that fraction of each */
        c->limit_train_batches = c->limit_val_batches = -1;
        c->limit_train_fraction = c->limit_val_fraction = c->overfit_fraction;
    }
    VOLT_TRY(check_matmul_precision(t));
    return volt__prof_check(t);
}

static volt_strategy_config strategy_config(const volt_trainer *t) {
    const volt_trainer_config *c = &t->cfg;
    volt_strategy_config sc = { .name = c->strategy, .timeout_s = 300, .devices = c->devices, .num_nodes = c->num_nodes,
                                .accelerator = c->accelerator /* the trainer's device kind: comm and params agree */,
                                .reduce_dtype = c->strategy_reduce_dtype, .comm = c->strategy_comm };
    const char *to = getenv("VOLT_COMM_TIMEOUT");
    if (to && atof(to) > 0) sc.timeout_s = atof(to);
    return sc;
}

/* A NULL config or one of an unknown version: the message, on a shell made from defaults as
 * create's other failures are (NULL when even that fails). */
static volt_status config_unusable(const volt_trainer_config *cfg, volt_trainer **shell, char *err, size_t errlen) {
    const volt_status st = cfg ? VOLT_ERR_VERSION : VOLT_ERR_INVALID_ARG;
    char m[256];
    if (!cfg) volt__errf(m, sizeof m, st, "trainer: config is NULL (volt_trainer_config_init fills one)");
    else volt__errf(m, sizeof m, st, "trainer: config version %u unknown (this volt knows 1..%u; volt_trainer_config_init sets it)",
                    (unsigned)cfg->version, VOLT_TRAINER_CONFIG_VERSION);
    if (err && errlen) snprintf(err, errlen, "%s", m);
    if (shell) {
        volt_trainer_config d;
        volt_trainer_config_init(&d);
        if ((*shell = trainer_new(&d))) volt__terr(*shell, st, "%s", m);
    }
    return st;
}

volt_status volt_trainer_create(const volt_trainer_config *cfg, volt_trainer **out) {
    if (!out) return VOLT_ERR_INVALID_ARG;
    *out = NULL;
    if (!cfg || !VOLT_VERSION_OK(cfg->version, VOLT_TRAINER_CONFIG_VERSION)) return config_unusable(cfg, out, NULL, 0);
    volt_trainer *t = trainer_new(cfg);
    if (!t) return VOLT_ERR_NOMEM;
    *out = t;
    VOLT_TRY(check_settings(t));
    VOLT_TRY(volt__prec_create(t));
    volt_strategy_config sc = strategy_config(t);
    char err[512] = "";
    volt_status st = volt__strategy_create(&sc, &t->strategy, err, sizeof err);
    if (st < 0) return volt__terr(t, st, "trainer: %s", err);
    volt__strategy_set_precision(t->strategy, t->prec);   /* the strategy owns the plugin (Lightning's shape) */
    t->rank = t->strategy->rank;
    t->world = t->strategy->world;
    if (!(t->strategy->row->flags & VOLT_STRAT_MULTI_PROCESS) && volt__comm_launched_size() > 1 &&
        volt__comm_launched_rank() == 0)   /* volt-run -n 2 with strategy single: each process alone */
        fprintf(stderr, "volt: warning: strategy '%s' in a job of %d launched processes: each trains alone, on all of "
                "the data; use a distributed strategy (\"ddp\", or \"auto\") for them to train together\n",
                t->strategy_name, volt__comm_launched_size());
    VOLT_TRY(volt__trainer_resolve_device(t));
    VOLT_TRY(check_tf32(t));
    return volt__compile_check_config(t);
}

volt_status volt_trainer_config_check(const volt_trainer_config *cfg, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!cfg || !VOLT_VERSION_OK(cfg->version, VOLT_TRAINER_CONFIG_VERSION)) return config_unusable(cfg, NULL, err, errlen);
    volt_trainer *t = trainer_new(cfg);
    if (!t) return VOLT_ERR_NOMEM;
    volt_status st = check_settings(t);
    if (st >= 0) st = volt__prec_create(t);   /* the precision's own checks; freed with the shell */
    if (st >= 0) {
        volt_strategy_config sc = strategy_config(t);
        char e[512] = "";
        if ((st = volt__strategy_config_check(&sc, e, sizeof e)) < 0) volt__terr(t, st, "trainer: %s", e);
    }
    if (st >= 0) {   /* the accelerator names a backend with a device present (none opened) */
        char e[512] = "";
        if (!volt__device_resolve(t->cfg.accelerator, e, sizeof e))
            st = volt__terr(t, VOLT_ERR_UNSUPPORTED, "trainer: accelerator=\"%s\": %s", t->cfg.accelerator, e);
    }
    if (st < 0 && err && errlen) snprintf(err, errlen, "%s", t->errmsg);
    volt_trainer_destroy(t);
    return st;
}

void volt_trainer_destroy(volt_trainer *t) {
    if (!t) return;
    volt__loop_release_module(t);
    /* the graphs first: before the step, optimizer and store whose memory they use, and before
     * the comm, whose NCCL finalize / abort waits until every graph that captured one of its
     * collectives is destroyed (NCCL >= 2.26: in the other order a compiled ddp run hung here) */
    volt__compile_destroy(t);
    for (int i = 0; i < t->n_cbs; i++)
        if (t->cbs[i].ops->destroy) t->cbs[i].ops->destroy(t->cbs[i].self);
    volt__module_callbacks_free(t);
    volt_scheduler_destroy(t->sched);
    volt_optimizer_destroy(t->opt);
    if (t->strategy) volt__strategy_destroy(t->strategy);   /* with the precision plugin */
    else volt__precision_destroy(t->prec);
    volt_step_destroy(t->step);
    volt_params_destroy(t->ps);
    volt__transfer_free(t);
    volt__metrics_free(t);
    volt__prof_destroy(t);
    volt__write_check_free(t);
    free(t->root_dir); free(t->logger_name); free(t->precision); free(t->strategy_name);
    free(t->clip_algo); free(t->run_config_json); free(t->run_fingerprint); free(t->log_dir);
    free(t->accelerator);
    for (int i = 0; i < t->n_last_cands; i++) free(t->last_cands[i]);
    free(t->matmul_precision);
    free(t->reduce_dtype);
    free(t->comm);
    free(t->max_time);
    free(t);
}

const char *volt_trainer_errmsg(const volt_trainer *t) { return t ? t->errmsg : "no trainer (NULL)"; }

/* Lightning's accelerator + devices: "auto" resolves ($VOLT_ACCELERATOR, cuda when present,
 * cpu); a rank of an N-device job on a multi-device accelerator uses device local_rank % count
 * (OMPI_COMM_WORLD_LOCAL_RANK..., volt__comm_local_rank: the device its comm is made on). Errors name what is known and present (volt__device_get). */
volt_status volt__trainer_resolve_device(volt_trainer *t) {
    char err[512] = "";
    const char *acc = t->cfg.accelerator;
    volt_device *d = NULL;
    volt_status st = volt__device_get(acc, 0, &d, err, sizeof err);
    if (st < 0) return volt__terr(t, st, "trainer: accelerator=\"%s\": %s", acc, err);
    int count = d->be->device_count();
    if (!volt__dev_host_addressable(d) && t->cfg.devices > count)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: devices=%d but accelerator '%s' has %d device%s",
                          t->cfg.devices, d->be->name, count, count == 1 ? "" : "s");
    int ordinal = count > 1 ? volt__comm_local_rank() % count : 0;   /* the comm's device (strategies/parallel) */
    if (ordinal && (st = volt__device_get(d->be->name, ordinal, &d, err, sizeof err)) < 0)
        return volt__terr(t, st, "trainer: accelerator=\"%s\": %s", acc, err);
    t->dev = d;
    return VOLT_OK;
}

const char *volt_trainer_accelerator(const volt_trainer *t) { return t ? t->dev ? t->dev->be->name : NULL : NULL; }
int volt_trainer_device_index(const volt_trainer *t) { return t ? t->dev ? t->dev->ordinal : -1 : -1; }
const char *volt_trainer_device_name(const volt_trainer *t) {
    const char *n = t && t->dev ? volt__dev_name(t->dev) : NULL;
    return n && *n ? n : NULL;
}

volt_status volt_trainer_add_callback(volt_trainer *t, const volt_callback_ops *ops, void *self) {
    if (!t) {   /* the callback is still owned: given back as on any failure */
        if (ops && VOLT_VERSION_OK(ops->version, VOLT_CALLBACK_OPS_VERSION) && ops->destroy) ops->destroy(self);
        return VOLT_ERR_INVALID_ARG;
    }
    if (!ops || !VOLT_VERSION_OK(ops->version, VOLT_CALLBACK_OPS_VERSION)) {
        if (ops && ops->destroy) ops->destroy(self);
        return volt__terr(t, VOLT_ERR_VERSION, "add_callback: unknown callback table version");
    }
    if (t->n_cbs == VOLT_MAX_CALLBACKS) {
        if (ops->destroy) ops->destroy(self);
        return volt__terr(t, VOLT_ERR_NOMEM, "add_callback: more than %d callbacks", VOLT_MAX_CALLBACKS);
    }
    /* checkpoint hooks keep entries under "callback.<name>[#k].": a name with '.' or '#' could
     * meet another callback's, and a long one would be cut in the key */
    const char *n = ops->name ? ops->name : "";
    if (ops->version >= 5u && (ops->on_save_checkpoint || ops->on_load_checkpoint) &&
        (!*n || strlen(n) > 100 || strchr(n, '.') || strchr(n, '#'))) {
        if (ops->destroy) ops->destroy(self);
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "add_callback: callback '%.40s%s' has checkpoint hooks, so its name must be "
                          "1 to 100 bytes without '.' or '#' (its entries are kept under callback.<name>.)", n,
                          strlen(n) > 40 ? "..." : "");
    }
    t->cbs[t->n_cbs++] = (volt_cb){ ops, self, false };
    return VOLT_OK;
}

int volt_trainer_num_callbacks(const volt_trainer *t) { return t ? t->n_cbs : 0; }

bool volt_trainer_configuring_callbacks(const volt_trainer *t, int *first) {
    if (first) *first = t && t->configuring_cbs ? t->cbs_first_module : 0;
    return t && t->configuring_cbs;
}

const char *volt_trainer_callback_name(const volt_trainer *t, int i) {
    return i >= 0 && i < t->n_cbs ? t->cbs[i].ops->name : NULL;
}

volt_status volt_trainer_move_callback(volt_trainer *t, int from, int to) {
    if (t->configuring_cbs)   /* the callbacks the module adds are the ones from cbs_first_module on */
        return volt__terr(t, VOLT_ERR_STATE, "move_callback: not inside configure_callbacks (the callbacks are ordered once "
                          "it returned)");
    if (from < 0 || from >= t->n_cbs || to < 0 || to >= t->n_cbs)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "move_callback: index %d -> %d out of range (%d callbacks)",
                          from, to, t->n_cbs);
    volt_cb cb = t->cbs[from];
    if (from < to) memmove(&t->cbs[from], &t->cbs[from + 1], sizeof(volt_cb) * (size_t)(to - from));
    else memmove(&t->cbs[to + 1], &t->cbs[to], sizeof(volt_cb) * (size_t)(from - to));
    t->cbs[to] = cb;
    return VOLT_OK;
}

int64_t volt_trainer_current_epoch(const volt_trainer *t) { return t ? t->epoch : 0; }
int64_t volt_trainer_global_step(const volt_trainer *t) { return t ? t->global_step : 0; }
int64_t volt_trainer_num_train_batches(const volt_trainer *t) { return t ? t->num_train_batches : 0; }
int64_t volt_trainer_estimated_stepping_batches(const volt_trainer *t) { return t ? t->est_steps : -1; }
int64_t volt_trainer_batch_in_epoch(const volt_trainer *t) { return t ? t->batch_in_epoch : 0; }
volt_stage volt_trainer_stage(const volt_trainer *t) { return t ? t->stage : VOLT_STAGE_FIT; }
bool volt_trainer_sanity_checking(const volt_trainer *t) { return t ? t->sanity : false; }

volt_status volt_trainer_track_step_loss(volt_trainer *t) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (t->in_step) return volt__terr(t, VOLT_ERR_STATE, "volt_trainer_track_step_loss: not inside a step");
    if (!t->track_step_loss) volt__compile_free(t);   /* graphs captured without the loss's copy */
    t->track_step_loss = true;
    return VOLT_OK;
}

bool volt_trainer_step_loss(const volt_trainer *t, double *out) {
    if (!t || !t->step_loss_set) return false;
    if (out) *out = t->step_loss;
    return true;
}
volt_trainer_fn volt_trainer_state_fn(const volt_trainer *t) { return t ? t->fn : VOLT_FN_NONE; }
bool volt_trainer_is_global_zero(const volt_trainer *t) { return t ? t->rank == 0 : false; }
int volt_trainer_rank(const volt_trainer *t) { return t ? t->rank : 0; }
int volt_trainer_world_size(const volt_trainer *t) { return t ? t->world : 1; }
const volt_trainer_config *volt_trainer_get_config(const volt_trainer *t) { return &t->cfg; }

volt_status volt_trainer_set_accumulate_grad_batches(volt_trainer *t, int64_t n) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (n < 1) return volt__terr(t, VOLT_ERR_INVALID_ARG, "accumulate_grad_batches must be >= 1, got %lld", (long long)n);
    if (t->cfg.val_check_interval > 0 && t->cfg.val_check_interval % n)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "accumulate_grad_batches %lld: val_check_interval (%lld) must be a "
                          "multiple of it", (long long)n, (long long)t->cfg.val_check_interval);
    if (t->in_step || (t->fitting && t->batch_in_epoch % t->cfg.accumulate_grad_batches != 0))
        return volt__terr(t, VOLT_ERR_STATE, "accumulate_grad_batches: set inside an accumulation window (batch %lld of "
                          "the epoch, windows of %lld): set it between windows, e.g. at an epoch start",
                          (long long)t->batch_in_epoch, (long long)t->cfg.accumulate_grad_batches);
    if (n == t->cfg.accumulate_grad_batches) return VOLT_OK;
    t->cfg.accumulate_grad_batches = n;
    volt__compile_free(t);   /* the captured steps divide by the old factor */
    return VOLT_OK;
}
/* The caller reads the values (a callback between steps, the app after fit): ZeRO's gathers
 * after the last step complete first (a failure stays on the strategy; the next collective
 * reports it). */
volt_params *volt_trainer_params(const volt_trainer *t) {
    if (t->ps && t->strategy) volt__strategy_wait_params(t->strategy);
    return t->ps;
}
volt_optimizer *volt_trainer_optimizer(const volt_trainer *t) { return t ? t->opt : NULL; }
volt_scheduler *volt_trainer_scheduler(const volt_trainer *t) { return t ? t->sched : NULL; }
void volt_trainer_request_stop(volt_trainer *t) { t->should_stop = true; }
bool volt_trainer_should_stop(const volt_trainer *t) { return t ? t->should_stop : false; }
const char *volt_trainer_log_dir(const volt_trainer *t) { return t ? t->log_dir : NULL; }

volt_status volt_trainer_set_log_dir(volt_trainer *t, const char *dir) {
    char buf[4096];
    if (t->world > 1) {   /* rank 0's choice wins: every rank logs/saves under the same names */
        snprintf(buf, sizeof buf, "%s", dir ? dir : "");
        volt_status st = volt__strategy_broadcast(t->strategy, buf, sizeof buf, 0, "log dir");
        if (st < 0) return volt__terr(t, st, "set_log_dir: broadcast failed: %s", volt__strategy_errmsg(t->strategy));
        dir = buf[0] ? buf : NULL;
    }
    char *d = dir ? strdup(dir) : NULL;
    if (dir && !d) return VOLT_ERR_NOMEM;
    free(t->log_dir);
    t->log_dir = d;
    return VOLT_OK;
}

volt_status volt_trainer_add_last_candidate(volt_trainer *t, const char *path) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (!path || !*path) return volt__terr(t, VOLT_ERR_INVALID_ARG, "add_last_candidate: no path");
    for (int i = 0; i < t->n_last_cands; i++)   /* a module's OnExceptionCheckpoint comes at every call */
        if (!strcmp(t->last_cands[i], path)) return VOLT_OK;
    if (t->n_last_cands >= (int)(sizeof t->last_cands / sizeof t->last_cands[0]))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "add_last_candidate: more than %d files",
                          (int)(sizeof t->last_cands / sizeof t->last_cands[0]));
    if (!(t->last_cands[t->n_last_cands] = strdup(path))) return VOLT_ERR_NOMEM;
    t->n_last_cands++;
    return VOLT_OK;
}

void volt_trainer_set_ckpt_resolver(volt_trainer *t, const volt_ckpt_resolver *r) {
    if (r && !VOLT_VERSION_OK(r->version, VOLT_CKPT_RESOLVER_VERSION)) {
        volt_trainer_fail(t, VOLT_ERR_VERSION, "volt_ckpt_resolver: version %u, this library knows 1..%u "
                          "(set .version = VOLT_CKPT_RESOLVER_VERSION)", r->version, VOLT_CKPT_RESOLVER_VERSION);
        return;
    }
    if (t->configuring_cbs) {   /* a module's callback: taken once configure_callbacks returned (module_callbacks.c) */
        if (r) t->pending_resolver = *r;
        t->has_pending_resolver = r != NULL;
        return;
    }
    if (r) { t->resolver = *r; t->has_resolver = true; }
    else t->has_resolver = false;
}

const volt_ckpt_resolver *volt_trainer_ckpt_resolver(const volt_trainer *t) {
    if (t->configuring_cbs) return t->has_pending_resolver ? &t->pending_resolver : NULL;
    return t->has_resolver ? &t->resolver : NULL;
}

/* ---- memory report ---------------------------------------------------------------------------- */
volt_status volt_trainer_memory_report(volt_trainer *t, volt_memory_report *out) {
    memset(out, 0, sizeof *out);
    if (!t->ps || !volt_params_finalized(t->ps))
        return volt__terr(t, VOLT_ERR_STATE, "memory_report: no model yet (call it from a hook, or after fit/test)");
    volt__strategy_memory_report(t->strategy, out);
    out->strategy = volt__strategy_name(t->strategy);
    out->rank = t->rank;
    out->world = t->world;
    out->activation_peak_bytes = t->step ? (int64_t)volt_step_arena_peak(t->step) : 0;
    return VOLT_OK;
}

volt_status volt_trainer_device_memory(volt_trainer *t, volt_device_memory *out) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (!out) return volt__terr(t, VOLT_ERR_INVALID_ARG, "device_memory: out is NULL");
    memset(out, 0, sizeof *out);
    if (!t->dev) return volt__terr(t, VOLT_ERR_STATE, "device_memory: the trainer has no device");
    char err[256] = "";
    volt_status st = volt__dev_memory_stats(t->dev, out, err, sizeof err);
    return st < 0 ? volt__terr(t, st, "device_memory: %s", err) : VOLT_OK;
}

#define MEM_FIELDS 10
static void mem_row(const volt_memory_report *m, double *v) {
    const int64_t f[MEM_FIELDS] = { m->param_bytes, m->grad_bytes, m->optim_bytes, m->master_bytes,
                                    m->held_param_bytes, m->held_grad_bytes, m->held_optim_bytes,
                                    m->activation_peak_bytes, m->numel, m->padded_numel };
    for (int i = 0; i < MEM_FIELDS; i++) v[i] = (double)f[i];
}

volt_status volt_trainer_print_memory_report(volt_trainer *t, FILE *f) {
    volt_memory_report m;
    VOLT_TRY(volt_trainer_memory_report(t, &m));
    const int W = t->world;
    double *all = calloc((size_t)W * MEM_FIELDS, sizeof *all);
    if (!all) return volt__terr(t, VOLT_ERR_NOMEM, "memory_report: out of memory");
    mem_row(&m, all + (size_t)t->rank * MEM_FIELDS);
    volt_status st = VOLT_OK;
    if (W > 1) {   /* each rank fills its row; mean over ranks times W = the table */
        st = volt__strategy_all_reduce_mean(t->strategy, all, W * MEM_FIELDS, "memory report");
        for (int i = 0; i < W * MEM_FIELDS; i++) all[i] = all[i] * W;
    }
    if (st < 0) {
        free(all);
        return volt__terr(t, st, "memory_report: %s", volt__strategy_errmsg(t->strategy));
    }
    if (t->rank == 0 && f) {
        const double MiB = 1024.0 * 1024.0;
        fprintf(f, "memory report: strategy %s, %d rank%s, %lld parameters (%lld padded), MiB per rank\n",
                m.strategy, W, W > 1 ? "s" : "", (long long)m.numel, (long long)m.padded_numel);
        fprintf(f, "%5s %10s %10s %10s %10s | %10s %10s %10s | %12s\n", "rank", "params", "grads", "optim",
                "total", "held prm", "held grad", "held opt", "activ. peak");
        for (int r = 0; r < W; r++) {
            const double *v = all + (size_t)r * MEM_FIELDS;
            fprintf(f, "%5d %10.2f %10.2f %10.2f %10.2f | %10.2f %10.2f %10.2f | %12.2f\n", r, v[0] / MiB, v[1] / MiB,
                    v[2] / MiB, (v[0] + v[1] + v[2] + v[3]) / MiB, v[4] / MiB, v[5] / MiB, v[6] / MiB, v[7] / MiB);
        }
        fprintf(f, "(params/grads/optim: the strategy's formula, docs/STRATEGIES.md; held: resident in the process now)\n");
        fflush(f);
    }
    free(all);
    return VOLT_OK;
}
