/* TensorBoardLogger: <log_dir>/events.out.tfevents.<secs>.<host>.<pid>.volt, rank 0, beside
 * the CSV logger's metrics.csv (on by default, as in Lightning).
 *
 * The file is a TFRecord stream of tensorboard.Event protos (tests/tensorboard/ event.proto, summary.proto):
 *   record = uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
 * (little-endian; masked crc = ((crc >> 15) | (crc << 17)) + 0xa282ead8, crc32c Castagnoli).
 * Events: file_version "brain.Event:2"; one scalar summary per metric row the CSV logger
 * writes (steps every log_every_n_steps, epoch means, validation / test), at the same step;
 * at fit start the hparams plugin's session_start_info (every trainer setting:
 * trainer/config_fields.h) and the
 * run config (run_config_json) as a text summary "config". Protobuf is written by hand: a few
 * varint / length-delimited fields. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "volt/trainer.h"
#include "callbacks/util.h"
#include "trainer/config_fields.h"

/* ---- crc32c ---------------------------------------------------------------------------------- */
static uint32_t volt_cb_crc32c(const void *data, size_t n) {
    static uint32_t table[256];
    static int ready;                /* benign: every thread computes the same table */
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

static uint32_t masked_crc(const void *data, size_t n) {
    uint32_t c = volt_cb_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---- protobuf writing -------------------------------------------------------------------------- */
typedef struct pb { unsigned char *b; size_t n, cap; bool oom; } pb;

static void pb_bytes(pb *p, const void *d, size_t n) {
    if (p->oom || n == 0) return;     /* an empty message (a scalar's tensor_shape) has no bytes */
    if (p->n + n > p->cap) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap < p->n + n) cap *= 2;
        unsigned char *nb = realloc(p->b, cap);
        if (!nb) { p->oom = true; return; }
        p->b = nb;
        p->cap = cap;
    }
    memcpy(p->b + p->n, d, n);
    p->n += n;
}
static void pb_varint(pb *p, uint64_t v) {
    unsigned char b[10];
    int k = 0;
    do { b[k] = (unsigned char)(v & 0x7f); v >>= 7; if (v) b[k] |= 0x80; k++; } while (v);
    pb_bytes(p, b, (size_t)k);
}
static void pb_key(pb *p, int field, int wire) { pb_varint(p, (uint64_t)field << 3 | (uint64_t)wire); }
static void pb_double(pb *p, int field, double v) { pb_key(p, field, 1); pb_bytes(p, &v, 8); }   /* x86/ARM: LE */
static void pb_float(pb *p, int field, float v) { pb_key(p, field, 5); pb_bytes(p, &v, 4); }
static void pb_int(pb *p, int field, int64_t v) { pb_key(p, field, 0); pb_varint(p, (uint64_t)v); }
static void pb_lenbytes(pb *p, int field, const void *d, size_t n) { pb_key(p, field, 2); pb_varint(p, n); pb_bytes(p, d, n); }
static void pb_str(pb *p, int field, const char *s) { pb_lenbytes(p, field, s, strlen(s)); }
static void pb_sub(pb *p, int field, pb *sub) { pb_lenbytes(p, field, sub->b, sub->n); p->oom |= sub->oom; free(sub->b); *sub = (pb){ 0 }; }

/* ---- the logger --------------------------------------------------------------------------------- */
typedef struct tbl {
    FILE *f;
    char *dir;
    bool val_after_batch;
    int64_t last_row_step;
    volt_status err;
} tbl;

static bool tb_off(const volt_trainer *t) {
    const volt_trainer_config *c = volt_trainer_get_config(t);
    return !volt_trainer_is_global_zero(t) || (c && c->fast_dev_run > 0);
}

static volt_status tb_record(tbl *l, volt_trainer *t, pb *ev) {
    if (ev->oom) { free(ev->b); return volt_trainer_fail(t, VOLT_ERR_NOMEM, "TensorBoardLogger: out of memory"); }
    uint64_t len = ev->n;
    uint32_t lc = masked_crc(&len, 8), dc = masked_crc(ev->b, ev->n);
    bool ok = fwrite(&len, 8, 1, l->f) == 1 && fwrite(&lc, 4, 1, l->f) == 1 && (ev->n == 0 || fwrite(ev->b, ev->n, 1, l->f) == 1) &&
              fwrite(&dc, 4, 1, l->f) == 1 && fflush(l->f) == 0;
    free(ev->b);
    *ev = (pb){ 0 };
    return ok ? VOLT_OK : volt_trainer_fail(t, VOLT_ERR_IO, "TensorBoardLogger: writing the event file in '%s' failed", l->dir);
}

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An Event { wall_time, step, summary } with the summary built by the caller. */
static volt_status tb_summary_event(tbl *l, volt_trainer *t, int64_t step, pb *summary) {
    pb ev = { 0 };
    pb_double(&ev, 1, wall_now());
    pb_int(&ev, 2, step);
    pb_sub(&ev, 5, summary);
    return tb_record(l, t, &ev);
}

static volt_status tb_open(tbl *l, volt_trainer *t) {
    if (tb_off(t)) return VOLT_OK;
    const char *ld = volt_trainer_log_dir(t);
    if (!ld) return VOLT_OK;                  /* the CSV logger picks the folder; none: no file */
    if (l->f && l->dir && !strcmp(l->dir, ld)) return VOLT_OK;
    if (l->f) fclose(l->f);
    l->f = NULL;
    free(l->dir);
    if (!(l->dir = strdup(ld))) return VOLT_ERR_NOMEM;
    char err[VOLT_CB_PATH_MAX + 128];
    volt_status st = volt__mkdirs(ld, err, sizeof err);
    if (st != VOLT_OK) return volt_trainer_fail(t, st, "TensorBoardLogger: %s", err);
    char host[128] = "localhost", path[VOLT_CB_PATH_MAX + 256];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    snprintf(path, sizeof path, "%s/events.out.tfevents.%lld.%s.%d.volt", ld, (long long)time(NULL), host, (int)getpid());
    l->f = fopen(path, "wb");
    if (!l->f) return volt_trainer_fail(t, VOLT_ERR_IO, "TensorBoardLogger: cannot create '%s'", path);
    pb ev = { 0 };
    pb_double(&ev, 1, wall_now());
    pb_int(&ev, 2, 0);
    pb_str(&ev, 3, "brain.Event:2");
    return tb_record(l, t, &ev);
}

typedef struct scal { pb summary; int n; unsigned need; } scal;

static void scal_visit(void *ctx, const char *name, double value, unsigned flags) {
    scal *s = ctx;
    if ((flags & VOLT_LOG_NO_LOGGER) || !name || (s->need && !(flags & s->need))) return;
    pb v = { 0 };
    pb_str(&v, 1, name);
    pb_float(&v, 2, (float)value);
    pb_sub(&s->summary, 1, &v);
    s->n++;
}

static volt_status tb_scalars(tbl *l, volt_trainer *t, int64_t step, unsigned need) {
    if (tb_off(t) || !l->f) return VOLT_OK;
    scal s = { { 0 }, 0, need };
    volt_trainer_visit_fresh_metrics(t, scal_visit, &s);
    if (!s.n) { free(s.summary.b); return VOLT_OK; }
    return tb_summary_event(l, t, step < 0 ? 0 : step, &s.summary);
}

/* hparams (session_start_info: every trainer setting) and the run config as text */
static volt_status tb_hparams(tbl *l, volt_trainer *t) {
    const volt_trainer_config *c = volt_trainer_get_config(t);
    if (!c) return VOLT_OK;
    pb ssi = { 0 };
    for (int i = 0; i < volt__n_trainer_config_fields; i++) {   /* every trainer setting */
        const volt__cfg_field *f = &volt__trainer_config_fields[i];
        if (!(f->flags & VOLT__CFG_HPARAM)) continue;
        volt__cfg_value hv = volt__cfg_get(f, c);
        pb val = { 0 }, entry = { 0 };                  /* google.protobuf.Value */
        if (f->type == VOLT__CFG_BOOL) pb_int(&val, 4, hv.b);      /* bool_value */
        else if (f->type == VOLT__CFG_STR && !hv.str) pb_int(&val, 1, 0);   /* null_value */
        else if (f->type == VOLT__CFG_STR) pb_str(&val, 3, hv.str);         /* string_value */
        else pb_double(&val, 2, hv.num);                /* number_value */
        pb_str(&entry, 1, f->name);
        pb_sub(&entry, 2, &val);
        pb_sub(&ssi, 1, &entry);                        /* map<string, Value> hparams = 1 */
    }
    pb_double(&ssi, 5, wall_now());                     /* start_time_secs */
    pb plugin_content = { 0 };
    pb_int(&plugin_content, 1, 0);                      /* HParamsPluginData.version */
    pb_sub(&plugin_content, 3, &ssi);                   /* session_start_info */
    pb pd = { 0 }, md = { 0 }, v = { 0 }, summary = { 0 };
    pb_str(&pd, 1, "hparams");
    pb_sub(&pd, 2, &plugin_content);
    pb_sub(&md, 1, &pd);
    pb_str(&v, 1, "_hparams_/session_start_info");
    pb_sub(&v, 9, &md);
    pb_sub(&summary, 1, &v);
    VOLT_TRY(tb_summary_event(l, t, 0, &summary));
    if (!c->run_config_json) return VOLT_OK;
    /* the config as a text summary: TensorProto { dtype DT_STRING, tensor_shape {}, string_val } */
    cJSON *o = cJSON_Parse(c->run_config_json);
    char *pretty = o ? volt__cb_json_print(o, true) : NULL;
    cJSON_Delete(o);
    const char *text = pretty ? pretty : c->run_config_json;
    /* markdown: indent by 4 spaces so TensorBoard shows it as a code block */
    size_t n = strlen(text), lines = 1;
    for (size_t i = 0; i < n; i++) lines += text[i] == '\n';
    char *md_text = malloc(n + 4 * lines + 1);
    if (!md_text) { free(pretty); return VOLT_ERR_NOMEM; }
    size_t k = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == 0 || text[i - 1] == '\n') { memcpy(md_text + k, "    ", 4); k += 4; }
        if (i < n) md_text[k++] = text[i];
    }
    md_text[k] = 0;
    free(pretty);
    pb tensor = { 0 }, shape = { 0 }, tpd = { 0 }, tmd = { 0 }, tv = { 0 }, tsum = { 0 };
    pb_int(&tensor, 1, 7);                              /* DT_STRING */
    pb_sub(&tensor, 2, &shape);                         /* scalar */
    pb_str(&tensor, 8, md_text);
    free(md_text);
    pb_str(&tpd, 1, "text");
    pb_sub(&tmd, 1, &tpd);
    pb_str(&tv, 1, "config/text_summary");
    pb_sub(&tv, 9, &tmd);
    pb_sub(&tv, 8, &tensor);
    pb_sub(&tsum, 1, &tv);
    return tb_summary_event(l, t, 0, &tsum);
}

static volt_status tb_on_fit_start(void *self, volt_trainer *t) {
    tbl *l = self;
    l->val_after_batch = false;
    l->last_row_step = -1;
    bool had = l->f != NULL;
    VOLT_TRY(tb_open(l, t));
    if (!l->f || had) return VOLT_OK;
    return tb_hparams(l, t);
}

static volt_status tb_on_test_start(void *self, volt_trainer *t) { return tb_open(self, t); }

static volt_status tb_on_train_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    tbl *l = self;
    l->val_after_batch = false;
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    int64_t gs = volt_trainer_global_step(t), n = cfg ? cfg->log_every_n_steps : 50;
    if (n <= 0 || gs <= 0 || gs == l->last_row_step || gs % n != 0) return VOLT_OK;
    l->last_row_step = gs;
    return tb_scalars(l, t, gs - 1, 0);
}

static volt_status tb_on_validation_start(void *self, volt_trainer *t) {
    tbl *l = self;
    if (volt_trainer_state_fn(t) != VOLT_FN_FIT) return tb_open(l, t);   /* a validate of its own */
    /* the train epoch means are fresh now; the validation replaces them */
    if (volt_trainer_sanity_checking(t)) return VOLT_OK;
    return tb_scalars(l, t, volt_trainer_global_step(t) - 1, VOLT_LOG_EPOCH);
}

static volt_status tb_on_validation_end(void *self, volt_trainer *t) {
    tbl *l = self;
    if (volt_trainer_sanity_checking(t)) return VOLT_OK;
    const bool in_fit = volt_trainer_state_fn(t) == VOLT_FN_FIT;   /* its stage is VALIDATE */
    l->val_after_batch = in_fit;
    int64_t gs = volt_trainer_global_step(t);
    return tb_scalars(l, t, in_fit ? gs - 1 : gs, 0);
}

static volt_status tb_on_train_epoch_end(void *self, volt_trainer *t) {
    tbl *l = self;
    if (l->val_after_batch) { l->val_after_batch = false; return VOLT_OK; }   /* written at validation start */
    return tb_scalars(l, t, volt_trainer_global_step(t) - 1, 0);
}

static volt_status tb_on_test_end(void *self, volt_trainer *t) { return tb_scalars(self, t, volt_trainer_global_step(t), 0); }

/* predict as test: its epoch-end metrics (ThroughputMonitor's predict keys) at its end */
static volt_status tb_on_predict_start(void *self, volt_trainer *t) { return tb_on_test_start(self, t); }
static volt_status tb_on_predict_end(void *self, volt_trainer *t) { return tb_on_test_end(self, t); }

static void tb_destroy(void *self) {
    tbl *l = self;
    if (!l) return;
    if (l->f) fclose(l->f);
    free(l->dir);
    free(l);
}

static const volt_callback_ops tb_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "TensorBoardLogger",
    .on_fit_start = tb_on_fit_start,
    .on_train_batch_end = tb_on_train_batch_end,
    .on_train_epoch_end = tb_on_train_epoch_end,
    .on_validation_start = tb_on_validation_start,
    .on_validation_end = tb_on_validation_end,
    .on_test_start = tb_on_test_start,
    .on_test_end = tb_on_test_end,
    .on_predict_start = tb_on_predict_start,
    .on_predict_end = tb_on_predict_end,
    .destroy = tb_destroy,
};

volt_status volt_add_tensorboard_logger(volt_trainer *t) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    tbl *l = calloc(1, sizeof *l);
    if (!l) return VOLT_ERR_NOMEM;
    l->last_row_step = -1;
    return volt_trainer_add_callback(t, &tb_ops, l);
}
