/* The host side of every checkpoint transfer (save, load, resharding, export_full): one
 * staging area per call, sized for the largest unit and allocated once, through which unit
 * values and optimizer states move between the device and the file one unit at a time, by
 * explicit copies (volt__dev_d2h / volt__dev_h2d). Dtype conversions (16-bit storage and
 * states <-> the f32 the files hold) run on the host buffer, never on device memory. The
 * checkpoint code never dereferences a unit buffer, a grad or an optimizer state: on
 * "cpu-strict" it would fault. See trainer/checkpoint_internal.h, docs/CHECKPOINTS.md. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer/checkpoint_internal.h"

static _Atomic uint64_t g_stagings;   /* staging areas allocated (tests: one per call) */

uint64_t volt__ckpt_stagings(void) { return atomic_load(&g_stagings); }

static volt_device *ck_dev(volt_trainer *t) { return t->ps->dev ? t->ps->dev : volt__device_cpu(); }

volt_status stage_open(volt_trainer *t, ck_stage *s) {
    memset(s, 0, sizeof *s);
    s->dev = ck_dev(t);
    int64_t cap = 1;
    for (int u = 0; u < volt_params_unit_count(t->ps); u++)
        if (volt_unit_numel(volt_params_unit_at(t->ps, u)) > cap) cap = volt_unit_numel(volt_params_unit_at(t->ps, u));
    const bool narrow = volt_params_dtype(t->ps) != VOLT_F32 || (t->opt && volt_optimizer_state_dtype(t->opt) != VOLT_F32);
    s->cap = cap;
    s->f32 = malloc(sizeof(float) * (size_t)cap);
    if (narrow) s->raw = malloc(sizeof(uint16_t) * (size_t)cap);   /* 16-bit values or states, as stored */
    if (!s->f32 || (narrow && !s->raw)) {
        stage_close(s);
        return VOLT_ERR_NOMEM;
    }
    atomic_fetch_add(&g_stagings, 1);
    return VOLT_OK;
}

void stage_close(ck_stage *s) {
    free(s->f32);
    free(s->raw);
    s->f32 = NULL;
    s->raw = NULL;
}

/* n elements of dtype dt at device address src into s->f32: one D2H copy, widened on the
 * host when 16-bit (exact). */
static const float *stage_fetch(ck_stage *s, const void *src, volt_dtype dt, int64_t n) {
    if (n > s->cap || n < 0) return NULL;
    float *dst = s->f32;
    if (s->into) {
        if ((size_t)n > s->into_cap - s->into_used) return NULL;
        dst = s->into + s->into_used;
        s->into_used += (size_t)n;
    }
    if (dt == VOLT_F32) {
        volt__dev_d2h(s->dev, dst, src, sizeof(float) * (size_t)n);
        return dst;
    }
    if (!s->raw) return NULL;
    volt__dev_d2h(s->dev, s->raw, src, volt_dtype_size(dt) * (size_t)n);
    volt_convert(dst, VOLT_F32, s->raw, dt, n);
    return dst;
}

const float *stage_values(volt_trainer *t, ck_stage *s, int u, int64_t lo, int64_t hi) {
    const volt_unit *un = volt_params_unit_at(t->ps, u);
    const volt_dtype dt = volt_params_dtype(t->ps);
    const char *base = volt_unit_values(un);   /* device memory */
    if (!base || lo < 0 || hi < lo) return NULL;
    return stage_fetch(s, base + (size_t)lo * volt_dtype_size(dt), dt, hi - lo);
}

const float *stage_state(volt_trainer *t, ck_stage *s, int u, int k, int64_t *lo, int64_t *hi) {
    *lo = *hi = 0;
    const void *buf = volt_optimizer_state_raw(t->opt, u, k, lo, hi);   /* device memory */
    if (!buf || *hi <= *lo) return NULL;
    return stage_fetch(s, buf, volt_optimizer_state_dtype(t->opt), *hi - *lo);
}

void stage_put(ck_stage *s, void *dst, volt_dtype dt, const float *src, int64_t n) {
    if (n <= 0 || n > s->cap) return;
    if (dt == VOLT_F32) {
        volt__dev_h2d(s->dev, dst, src, sizeof(float) * (size_t)n);
        return;
    }
    volt_convert(s->raw, dt, src, VOLT_F32, n);   /* rounded to nearest even, as before */
    volt__dev_h2d(s->dev, dst, s->raw, volt_dtype_size(dt) * (size_t)n);
}

/* ---- streamed files ------------------------------------------------------------------------- */
volt_status ck_stream_open(const char *path, const volt_st_writer *w, volt_st_stream **out, char *err, size_t errlen) {
    volt_status st = volt_st_stream_create(path, out, err, errlen);
    for (int i = 0; st >= 0 && i < volt_st_writer_meta_count(w); i++) {
        const char *k, *v;
        if ((st = volt_st_writer_meta_at(w, i, &k, &v)) >= 0) st = volt_st_stream_meta(*out, k, v);
        if (st < 0) snprintf(err, errlen, "%s", volt_st_stream_errmsg(*out));
    }
    if (st < 0 && *out) {
        volt_st_stream_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* Tensors of w (module extras) whose element size is >= 4 (big) or < 4: declared and
 * written around the f32 weights so every tensor stays aligned to its element size. */
static bool extra_in(const volt_st_writer *w, int i, bool big) {
    volt_dtype dt = VOLT_F32;
    volt_st_writer_tensor_at(w, i, NULL, &dt, NULL, NULL);
    return (volt_dtype_size(dt) >= 4) == big;
}

volt_status ck_stream_extras(volt_st_stream *s, const volt_st_writer *w, bool big, bool write) {
    for (size_t es = big ? 8 : 2; big ? es >= 4 : es >= 1; es /= 2)   /* element size descending, stable */
        for (int i = 0; i < volt_st_writer_count(w); i++) {
            const char *name;
            volt_dtype dt;
            volt_shape shape;
            const void *data;
            if (!extra_in(w, i, big) || volt_st_writer_tensor_at(w, i, &name, &dt, &shape, &data) < 0 ||
                volt_dtype_size(dt) != es)
                continue;
            VOLT_TRY(write ? volt_st_stream_write(s, name, data) : volt_st_stream_declare(s, name, dt, shape));
        }
    return VOLT_OK;
}
