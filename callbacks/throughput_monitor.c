/* ThroughputMonitor (Lightning's lightning.pytorch.callbacks.ThroughputMonitor over fabric's
 * Throughput): a rolling window of the last window_size batches per stage (train, validate,
 * test, predict), logged as "<stage><sep><key>" metrics through volt_trainer_log_metric. Train
 * logs after the optimizer steps that make global_step a multiple of log_every_n_steps (the
 * steps the loggers write a row for), validate, test and predict at the end of their loop.
 *
 * Timing: the trainer's clock (CLOCK_MONOTONIC) read on the host at each batch end; no device
 * synchronisation is added. On a device the trainer already waits at every training step for
 * the values it logged (one device->host read after backward), so a batch end is at most the
 * optimizer step's kernels ahead of the device, and a window's rate (a difference of batch
 * ends window_size - 1 batches apart) is the device's rate. Validation inside fit, from the
 * last train batch end to the end of validation, is not counted in train's time (Lightning).
 *
 * The callback is moved to the front of the callbacks by callbacks/defaults.c, so what it logs
 * at a train batch end is in the loggers' row of that step. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "volt/trainer.h"
#include "callbacks/throughput_monitor.h"

/* ---- the window (fabric's Throughput) ----------------------------------------------------- */

volt_status volt__cb_tput_init(volt_cb_tput *w, int64_t cap) {
    memset(w, 0, sizeof *w);
    if (cap < 2) return VOLT_ERR_INVALID_ARG;
    w->cap = cap;
    w->time = calloc((size_t)cap, sizeof *w->time);
    w->flops = calloc((size_t)cap, sizeof *w->flops);
    w->batches = calloc((size_t)cap, sizeof *w->batches);
    w->samples = calloc((size_t)cap, sizeof *w->samples);
    w->lengths = calloc((size_t)cap, sizeof *w->lengths);
    if (!w->time || !w->flops || !w->batches || !w->samples || !w->lengths) {
        volt__cb_tput_free(w);
        return VOLT_ERR_NOMEM;
    }
    volt__cb_tput_reset(w);
    return VOLT_OK;
}

void volt__cb_tput_free(volt_cb_tput *w) {
    free(w->time);
    free(w->flops);
    free(w->batches);
    free(w->samples);
    free(w->lengths);
    memset(w, 0, sizeof *w);
}

void volt__cb_tput_reset(volt_cb_tput *w) {
    w->n = w->head = w->n_nolen = w->n_noflops = 0;
    w->has_lengths = w->has_flops = true;
}

void volt__cb_tput_update(volt_cb_tput *w, double time, int64_t batches, int64_t samples, int64_t lengths, double flops) {
    if (!w->cap) return;
    int64_t i;
    if (w->n < w->cap) {
        i = (w->head + w->n++) % w->cap;
    } else {           /* full: the newest replaces the oldest */
        i = w->head;
        w->head = (w->head + 1) % w->cap;
        w->n_nolen -= w->lengths[i] < 0;
        w->n_noflops -= w->flops[i] < 0;
    }
    w->time[i] = time;
    w->batches[i] = batches;
    w->samples[i] = samples;
    w->lengths[i] = lengths;
    w->flops[i] = flops;
    /* an entry without them spoils the window until it leaves */
    w->n_nolen += lengths < 0;
    w->n_noflops += flops < 0;
    w->has_lengths = w->n_nolen == 0;
    w->has_flops = w->n_noflops == 0;
}

void volt__cb_tput_compute(const volt_cb_tput *w, int world, double available_flops, const char *sep,
                           volt_cb_tput_emit_fn emit, void *ctx) {
    if (!w->n) return;
    char key[64];
    const int64_t first = w->head, last = (w->head + w->n - 1) % w->cap;
    const double ws = world > 1 ? (double)world : 1.0;
    emit(ctx, "time", w->time[last]);
    emit(ctx, "batches", (double)w->batches[last]);
    emit(ctx, "samples", (double)w->samples[last]);
    if (w->has_lengths) emit(ctx, "lengths", (double)w->lengths[last]);
    const double dt = w->time[last] - w->time[first];
    if (w->n < w->cap || !(dt > 0)) return;   /* Lightning: rates once the window is full */
    const double dev_bps = (double)(w->batches[last] - w->batches[first]) / dt;
    const double dev_sps = (double)(w->samples[last] - w->samples[first]) / dt;
    snprintf(key, sizeof key, "device%sbatches_per_sec", sep);
    emit(ctx, key, dev_bps);
    snprintf(key, sizeof key, "device%ssamples_per_sec", sep);
    emit(ctx, key, dev_sps);
    if (world > 1) {
        emit(ctx, "batches_per_sec", dev_bps * ws);
        emit(ctx, "samples_per_sec", dev_sps * ws);
    }
    if (w->has_lengths) {
        const double dev_ips = (double)(w->lengths[last] - w->lengths[first]) / dt;
        snprintf(key, sizeof key, "device%sitems_per_sec", sep);
        emit(ctx, key, dev_ips);
        if (world > 1) emit(ctx, "items_per_sec", dev_ips * ws);
    }
    if (w->has_flops) {
        /* the FLOPs done after the window's first batch end: every entry's but the first's */
        double f = 0;
        for (int64_t k = 1; k < w->n; k++) f += w->flops[(w->head + k) % w->cap];
        const double dev_fps = f / dt;
        if (world > 1) emit(ctx, "flops_per_sec", dev_fps * ws);
        snprintf(key, sizeof key, "device%sflops_per_sec", sep);
        emit(ctx, key, dev_fps);
        if (available_flops > 0) {
            snprintf(key, sizeof key, "device%smfu", sep);
            emit(ctx, key, dev_fps / available_flops);
        }
    }
}

/* ---- peak FLOP/s by device name (Lightning's _CUDA_FLOPS, dense figures) --------------------- */

typedef struct peak_row { const char *name; double f32, tf32, bf16, f16; } peak_row;
/* matched in this order against the lowercased name: the more specific names first */
static const peak_row peaks[] = {
    { "h100 nvl", 133.8e12, 989.4e12, 1978.8e12, 1978.8e12 },
    { "h100 pcie", 51.2e12, 378e12, 756e12, 756e12 },
    { "h100", 66.9e12, 494.7e12, 989.4e12, 989.4e12 },        /* SXM (HBM3) */
    { "h200", 66.9e12, 494.7e12, 989.4e12, 989.4e12 },        /* H100 SXM's compute */
    { "a100", 19.5e12, 156e12, 312e12, 312e12 },
    { "a10g", 31.2e12, 62.5e12, 125e12, 125e12 },
    { "l40", 90.5e12, 90.5e12, 181e12, 181e12 },
    { "l4", 30.3e12, 60e12, 121e12, 121e12 },
    { "rtx 4090", 82.6e12, 82.6e12, 82.6e12, 82.6e12 },
    { "rtx 3090", 35.6e12, 35.6e12, 35.6e12, 35.6e12 },
    { "v100 pcie", 14e12, 0, 0, 112e12 },
    { "v100", 15.7e12, 0, 0, 125e12 },                         /* SXM */
    { "t4", 8.1e12, 0, 0, 65e12 },
};

double volt_available_flops(const char *device_name, const char *precision, const char *matmul_precision) {
    if (!device_name || !*device_name) return 0;
    char lc[128];
    size_t n = 0;
    for (; device_name[n] && n + 1 < sizeof lc; n++) lc[n] = (char)tolower((unsigned char)device_name[n]);
    lc[n] = 0;
    const peak_row *r = NULL;
    for (size_t i = 0; i < sizeof peaks / sizeof peaks[0] && !r; i++) {
        if (!strcmp(peaks[i].name, "h100 pcie")) {   /* "NVIDIA H100 PCIe", or its HBM2e */
            if (strstr(lc, "h100") && (strstr(lc, "pcie") || strstr(lc, "hbm2e"))) r = &peaks[i];
        } else if (!strcmp(peaks[i].name, "h100 nvl")) {
            if (strstr(lc, "h100") && strstr(lc, "nvl")) r = &peaks[i];
        } else if (!strcmp(peaks[i].name, "v100 pcie")) {
            if (strstr(lc, "v100") && strstr(lc, "pcie")) r = &peaks[i];
        } else if (strstr(lc, peaks[i].name)) {
            r = &peaks[i];
        }
    }
    if (!r) return 0;
    const char *p = precision ? precision : "32-true";
    if (!strncmp(p, "bf16", 4)) return r->bf16;
    if (!strncmp(p, "16", 2)) return r->f16;
    const bool tf32 = matmul_precision && (!strcmp(matmul_precision, "high") || !strcmp(matmul_precision, "medium"));
    return tf32 ? r->tf32 : r->f32;
}

/* ---- the callback ----------------------------------------------------------------------------- */

enum { ST_TRAIN, ST_VALIDATE, ST_TEST, ST_PREDICT, ST_N };
static const char *const stage_names[ST_N] = { "train", "validate", "test", "predict" };   /* Lightning's RunningStage values */

typedef struct tput_stage {
    volt_cb_tput w;
    double t0, elapsed;              /* clock at the stage's start (moved past validation); last update's time */
    int64_t batches, samples, lengths;
} tput_stage;

typedef struct tmon {
    volt_throughput_config cfg;      /* separator and device_name point at the copies below */
    char *sep, *device_name;
    volt_cb_now_fn now;
    void *now_ctx;
    tput_stage st[ST_N];
    double available;                /* peak FLOP/s of this device for the run's precision; 0: none */
    bool training;                   /* between on_train_start and on_train_end */
    bool noted;                      /* the "no peak, no mfu" note was printed */
    int64_t seen_step;               /* global_step at the last train batch end */
    volt_trainer *t;                 /* for emit */
    const char *stage;               /* for emit */
    volt_status err;                 /* emit's first failure */
} tmon;

static double tm_now(const tmon *m) {
    if (m->now) return m->now(m->now_ctx);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool tm_off(volt_trainer *t) {
    const volt_trainer_config *c = volt_trainer_get_config(t);
    return c && c->fast_dev_run > 0;
}

/* A stage starts: an empty window and totals, the peak for this run's precision. */
static void tm_start(tmon *m, volt_trainer *t, int s) {
    tput_stage *x = &m->st[s];
    volt__cb_tput_reset(&x->w);
    x->batches = x->samples = x->lengths = 0;
    x->elapsed = 0;
    x->t0 = tm_now(m);
    const volt_trainer_config *c = volt_trainer_get_config(t);
    /* the name given, else the device's own (cuda: "NVIDIA H200", as nvidia-smi prints it) */
    const char *name = m->device_name ? m->device_name : volt_trainer_device_name(t);
    m->available = m->cfg.peak_tflops > 0 ? m->cfg.peak_tflops * 1e12
                 : volt_available_flops(name, c ? c->precision : NULL, c ? c->matmul_precision : NULL);
    const char *acc = volt_trainer_accelerator(t);
    if (!m->available && m->cfg.flops_fn && !m->noted && acc && !strcmp(acc, "cuda") && volt_trainer_is_global_zero(t)) {
        fprintf(stderr, "volt: ThroughputMonitor: no peak FLOP/s for %s%s%s: device/mfu is not logged (set peak_tflops, or "
                "device_name to one of the table's, e.g. --throughput.peak_tflops 989.4)\n",
                name ? "'" : "this device", name ? name : "", name ? "'" : "");
        m->noted = true;
    }
}

static volt_status tm_update(tmon *m, volt_trainer *t, int s, const volt_batch *b) {
    tput_stage *x = &m->st[s];
    const volt_throughput_config *c = &m->cfg;
    const int64_t bs = c->batch_size_fn ? c->batch_size_fn(c->fn_ctx, t, b) : b->size;
    if (bs < 0) return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ThroughputMonitor: batch_size_fn returned %lld", (long long)bs);
    int64_t len = -1;
    if (c->length_fn) {
        len = c->length_fn(c->fn_ctx, t, b);
        if (len < 0) return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ThroughputMonitor: length_fn returned %lld", (long long)len);
        x->lengths += len;
    }
    double fl = -1;
    if (c->flops_fn) {
        fl = c->flops_fn(c->fn_ctx, t, b);
        if (!(fl >= 0)) return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ThroughputMonitor: flops_fn returned %g", fl);
    }
    x->batches++;
    x->samples += bs;
    x->elapsed = tm_now(m) - x->t0;
    volt__cb_tput_update(&x->w, x->elapsed, x->batches, x->samples, c->length_fn ? x->lengths : -1, fl);
    return VOLT_OK;
}

static void tm_emit(void *ctx, const char *key, double v) {
    tmon *m = ctx;
    char name[160];
    snprintf(name, sizeof name, "%s%s%s", m->stage, m->sep, key);
    volt_status st = volt_trainer_log_metric(m->t, name, v, VOLT_LOG_STEP);
    if (st < 0 && m->err == VOLT_OK) m->err = st;
}

static volt_status tm_log(tmon *m, volt_trainer *t, int s) {
    m->t = t;
    m->stage = stage_names[s];
    m->err = VOLT_OK;
    volt__cb_tput_compute(&m->st[s].w, volt_trainer_world_size(t), m->available, m->sep, tm_emit, m);
    return m->err;
}

static volt_status tm_on_train_start(void *self, volt_trainer *t) {
    tmon *m = self;
    if (tm_off(t)) return VOLT_OK;
    tm_start(m, t, ST_TRAIN);
    m->training = true;
    m->seen_step = volt_trainer_global_step(t);
    return VOLT_OK;
}

static volt_status tm_on_train_end(void *self, volt_trainer *t) {
    (void)t;
    ((tmon *)self)->training = false;
    return VOLT_OK;
}

/* Every batch counts; the log comes after the optimizer steps the loggers write a row for. */
static volt_status tm_on_train_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)i;
    tmon *m = self;
    if (tm_off(t) || !m->training) return VOLT_OK;
    VOLT_TRY(tm_update(m, t, ST_TRAIN, b));
    const int64_t gs = volt_trainer_global_step(t);
    if (gs == m->seen_step) return VOLT_OK;   /* accumulating, or a skipped step (16-mixed) */
    m->seen_step = gs;
    const volt_trainer_config *c = volt_trainer_get_config(t);
    const int64_t every = c && c->log_every_n_steps > 0 ? c->log_every_n_steps : 50;
    return gs % every == 0 ? tm_log(m, t, ST_TRAIN) : VOLT_OK;
}

static volt_status tm_on_validation_start(void *self, volt_trainer *t) {
    if (tm_off(t) || volt_trainer_sanity_checking(t)) return VOLT_OK;
    tm_start(self, t, ST_VALIDATE);
    return VOLT_OK;
}

static volt_status tm_on_validation_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)i;
    if (tm_off(t) || volt_trainer_sanity_checking(t)) return VOLT_OK;
    return tm_update(self, t, ST_VALIDATE, b);
}

static volt_status tm_on_validation_epoch_end(void *self, volt_trainer *t) {
    if (tm_off(t) || volt_trainer_sanity_checking(t)) return VOLT_OK;
    return tm_log(self, t, ST_VALIDATE);
}

/* Inside fit: train's clock skips from its last batch end to here, so validation is not in
 * train's time or rates (Lightning's on_validation_end). */
static volt_status tm_on_validation_end(void *self, volt_trainer *t) {
    tmon *m = self;
    if (tm_off(t) || volt_trainer_sanity_checking(t) || !m->training) return VOLT_OK;
    m->st[ST_TRAIN].t0 = tm_now(m) - m->st[ST_TRAIN].elapsed;
    return VOLT_OK;
}

static volt_status tm_on_test_start(void *self, volt_trainer *t) {
    if (tm_off(t)) return VOLT_OK;
    tm_start(self, t, ST_TEST);
    return VOLT_OK;
}

static volt_status tm_on_test_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)i;
    return tm_off(t) ? VOLT_OK : tm_update(self, t, ST_TEST, b);
}

static volt_status tm_on_test_epoch_end(void *self, volt_trainer *t) {
    return tm_off(t) ? VOLT_OK : tm_log(self, t, ST_TEST);
}

/* predict as test (Lightning's on_predict_batch_end updates and logs; here once, at the end) */
static volt_status tm_on_predict_start(void *self, volt_trainer *t) {
    if (tm_off(t)) return VOLT_OK;
    tm_start(self, t, ST_PREDICT);
    return VOLT_OK;
}

static volt_status tm_on_predict_batch_end(void *self, volt_trainer *t, const volt_tensor *pred, const volt_batch *b, int64_t i) {
    (void)pred;
    (void)i;
    return tm_off(t) ? VOLT_OK : tm_update(self, t, ST_PREDICT, b);
}

static volt_status tm_on_predict_epoch_end(void *self, volt_trainer *t) {
    return tm_off(t) ? VOLT_OK : tm_log(self, t, ST_PREDICT);
}

static void tm_on_exception(void *self, volt_trainer *t, volt_status st) {
    (void)t;
    (void)st;
    ((tmon *)self)->training = false;
}

static void tm_destroy(void *self) {
    tmon *m = self;
    if (!m) return;
    for (int s = 0; s < ST_N; s++) volt__cb_tput_free(&m->st[s].w);
    free(m->sep);
    free(m->device_name);
    free(m);
}

static const volt_callback_ops tm_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "ThroughputMonitor",
    .on_train_start = tm_on_train_start,
    .on_train_end = tm_on_train_end,
    .on_train_batch_end = tm_on_train_batch_end,
    .on_validation_start = tm_on_validation_start,
    .on_validation_end = tm_on_validation_end,
    .on_validation_epoch_end = tm_on_validation_epoch_end,
    .on_validation_batch_end = tm_on_validation_batch_end,
    .on_test_start = tm_on_test_start,
    .on_test_epoch_end = tm_on_test_epoch_end,
    .on_test_batch_end = tm_on_test_batch_end,
    .on_predict_start = tm_on_predict_start,
    .on_predict_epoch_end = tm_on_predict_epoch_end,
    .on_predict_batch_end = tm_on_predict_batch_end,
    .destroy = tm_destroy,
    .on_exception = tm_on_exception,
};

void volt_throughput_config_init(volt_throughput_config *cfg) {
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_THROUGHPUT_CONFIG_VERSION;
    cfg->window_size = 100;
    cfg->separator = "/";
}

volt_status volt__add_throughput_monitor_clock(volt_trainer *t, const volt_throughput_config *cfg, volt_cb_now_fn now,
                                               void *ctx) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    volt_throughput_config c;
    if (!cfg) volt_throughput_config_init(&c);
    else if (!VOLT_VERSION_OK(cfg->version, VOLT_THROUGHPUT_CONFIG_VERSION))
        return volt_trainer_fail(t, VOLT_ERR_VERSION, "volt_throughput_config: version %u, this library knows 1..%u "
                                 "(call volt_throughput_config_init)", cfg->version, VOLT_THROUGHPUT_CONFIG_VERSION);
    else c = *cfg;
    if (c.window_size < 2)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ThroughputMonitor: window_size must be >= 2 (got %lld): the rates "
                                 "are differences across the window", (long long)c.window_size);
    if (!c.separator || !*c.separator || strlen(c.separator) > 8)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ThroughputMonitor: separator must be 1 to 8 characters");
    if (!(c.peak_tflops >= 0))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ThroughputMonitor: peak_tflops must be >= 0 (got %g)", c.peak_tflops);
    tmon *m = calloc(1, sizeof *m);
    if (!m) return VOLT_ERR_NOMEM;
    m->cfg = c;
    m->now = now;
    m->now_ctx = ctx;
    m->sep = strdup(c.separator);
    m->device_name = c.device_name ? strdup(c.device_name) : NULL;
    volt_status st = m->sep && (!c.device_name || m->device_name) ? VOLT_OK : VOLT_ERR_NOMEM;
    for (int s = 0; s < ST_N && st == VOLT_OK; s++) st = volt__cb_tput_init(&m->st[s].w, c.window_size);
    if (st < 0) {
        tm_destroy(m);
        return st;
    }
    m->cfg.separator = m->sep;
    m->cfg.device_name = m->device_name;
    return volt_trainer_add_callback(t, &tm_ops, m);
}

volt_status volt_add_throughput_monitor(volt_trainer *t, const volt_throughput_config *cfg) {
    return volt__add_throughput_monitor_clock(t, cfg, NULL, NULL);
}
