/* DistilBERT: Hugging Face safetensors weights into the store distilbert's setup filled
 * (volt_distilbert_load; names and variants in volt/distilbert.h). Written only against the
 * public headers. Parameters live on the store's device: the file's tensors stay in it and are
 * all checked before the first is used; then each is read into one host staging buffer (sized
 * for the largest parameter, allocated once per load), widened to f32, rounded there to the
 * storage dtype when that is 16-bit, and copied over by volt_tensor_copy_from_host. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/distilbert.h"
#include "volt/dtype.h"
#include "volt/params.h"
#include "volt/safetensors.h"

#define NAME_MAX_ 128
#define PREFIX "distilbert."

static bool has_prefix(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }
static bool has_suffix(const char *s, const char *x) {
    size_t n = strlen(s), k = strlen(x);
    return n >= k && !strcmp(s + n - k, x);
}
static bool is_head(const char *name) { return has_prefix(name, "pre_classifier.") || has_prefix(name, "classifier."); }

/* The names a parameter may have in a HF file, in order of preference (at most 4). */
static int candidates(const char *name, char out[4][NAME_MAX_]) {
    int n = 0;
    snprintf(out[n++], NAME_MAX_, "%s", name);
    if (has_prefix(name, PREFIX)) snprintf(out[n++], NAME_MAX_, "%s", name + strlen(PREFIX));
    bool norm = strstr(name, "LayerNorm.") || strstr(name, "layer_norm.");
    const char *from = has_suffix(name, ".weight") ? ".weight" : has_suffix(name, ".bias") ? ".bias" : NULL;
    if (norm && from) {                            /* old TF-era names: gamma / beta */
        const char *to = !strcmp(from, ".weight") ? ".gamma" : ".beta";
        for (int i = 0, k = n; i < k; i++) {
            size_t base = strlen(out[i]) - strlen(from), tl = strlen(to);
            if (base + tl >= NAME_MAX_) continue;
            memcpy(out[n], out[i], base);
            memcpy(out[n] + base, to, tl + 1);
            n++;
        }
    }
    return n;
}

/* Every name some parameter may have in the file, sorted once per load: which file tensors
 * map to a parameter is a binary search, not a walk over the parameters (a file of many
 * tensors loaded in time linear in its size, not in its size times the model's). */
typedef struct name_tab {
    char (*names)[NAME_MAX_];
    int n;
} name_tab;

static int cmp_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static bool tab_has(const name_tab *t, const char *s) {
    return t->n && strlen(s) < NAME_MAX_ && bsearch(s, t->names, (size_t)t->n, NAME_MAX_, cmp_name) != NULL;
}

static volt_status tab_candidates(volt_params *ps, name_tab *t) {
    const int np = volt_params_count(ps);
    t->n = 0;
    t->names = malloc(sizeof *t->names * (size_t)(4 * np + 1));
    if (!t->names) return VOLT_ERR_NOMEM;
    for (int i = 0; i < np; i++) t->n += candidates(volt_params_at(ps, i)->name, t->names + t->n);
    qsort(t->names, (size_t)t->n, NAME_MAX_, cmp_name);
    return VOLT_OK;
}

/* Tensors of HF files that are expected and not parameters here: the MLM head of
 * DistilBertForMaskedLM, and the position_ids buffer older exports saved. */
static bool ignored(const char *fname) {
    if (has_prefix(fname, PREFIX)) fname += strlen(PREFIX);
    return has_prefix(fname, "vocab_transform.") || has_prefix(fname, "vocab_layer_norm.") ||
           has_prefix(fname, "vocab_projector.") || !strcmp(fname, "embeddings.position_ids");
}

/* DistilBERT's own parameters (the body and the head), in declaration order. */
static int model_params(volt_params *ps, volt_tensor **out) {
    int n = 0;
    for (int i = 0; i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        if (has_prefix(p->name, PREFIX) || is_head(p->name)) out[n++] = p;
    }
    return n;
}

/* Which file tensors the load reads: the ones some parameter maps to (the MLM head and other
 * extras stay in the file, never read). */
static bool wanted(const char *fname, void *ctx) { return tab_has(ctx, fname); }
static bool every(const char *fname, void *ctx) { (void)fname; (void)ctx; return true; }

/* The file tensor for each parameter (NULL: a head the file lacks), its shape and dtype
 * checked; nothing is read. */
static volt_status match(volt_params *ps, volt_st_file *f, const char *path, volt_tensor **params, int np,
                         char (*src)[NAME_MAX_], char *fresh, size_t freshlen) {
    for (int i = 0; i < np; i++) {
        volt_tensor *p = params[i];
        char cand[4][NAME_MAX_], a[64], b[64];
        int nc = candidates(p->name, cand), k;
        volt_st_info info;
        for (k = 0; k < nc; k++)
            if (volt_st_find(f, cand[k], &info) == VOLT_OK) break;
        snprintf(src[i], NAME_MAX_, "%s", k < nc ? cand[k] : "");
        if (k == nc) {
            if (is_head(p->name)) {          /* a body-only checkpoint: the head trains from its init */
                size_t len = strlen(fresh);
                snprintf(fresh + len, freshlen - len, "%s%s", len ? ", " : "", p->name);
                continue;
            }
            return volt_params_fail(ps, VOLT_ERR_NOT_FOUND, "distilbert: '%s': tensor '%s' missing (looked for '%s'%s)",
                                    path, p->name, cand[0], nc > 1 ? " and HF variants" : "");
        }
        if (!volt_shape_eq(info.shape, p->shape))
            return volt_params_fail(ps, VOLT_ERR_SHAPE, "distilbert: '%s': tensor '%s' has shape %s in the file, the model "
                                    "has %s (check the config: vocab_size, max_position, dim, hidden_dim, n_classes)",
                                    path, cand[k], volt_shape_str(info.shape, a, sizeof a), volt_shape_str(p->shape, b, sizeof b));
        if (info.dtype != VOLT_F32 && info.dtype != VOLT_BF16 && info.dtype != VOLT_F16)
            return volt_params_fail(ps, VOLT_ERR_DTYPE, "distilbert: '%s': tensor '%s' is %s; F32, BF16 or F16 load", path,
                                    cand[k], volt_dtype_name(info.dtype));
    }
    return VOLT_OK;
}

/* One parameter from its (checked) file tensor: the bytes as stored into raw, widened to f32
 * into stage when 16-bit (bf16/f16 -> f32 is exact), rounded to a 16-bit store's dtype, copied. */
static volt_status put(volt_params *ps, const volt_st_file *f, const char *path, volt_tensor *p, const char *fname,
                       float *stage, uint16_t *narrow, size_t cap) {
    char err[512];
    volt_st_info info;
    volt_st_find(f, fname, &info);   /* matched */
    const int64_t n = volt_tensor_numel(p);
    if (!n) return VOLT_OK;   /* nothing to read (an empty tensor is never deferred) */
    void *raw = info.dtype == VOLT_F32 ? (void *)stage : (void *)narrow;
    volt_status st = volt_st_read_deferred(f, fname, raw, info.dtype == VOLT_F32 ? cap * sizeof(float) : cap * sizeof(uint16_t),
                                           err, sizeof err);
    if (st < 0) return volt_params_fail(ps, st, "distilbert: %s", err);
    if (info.dtype != VOLT_F32) volt_convert(stage, VOLT_F32, narrow, info.dtype, n);   /* malloc'd: aligned */
    const void *host = stage;
    if (p->dtype != VOLT_F32) {   /* rounded to nearest even, as a conversion of the store does */
        volt_convert(narrow, p->dtype, stage, VOLT_F32, n);
        host = narrow;
    }
    if ((st = volt_tensor_copy_from_host(p, host)) < 0)
        return volt_params_fail(ps, st, "distilbert: '%s': cannot copy '%s' to the device", path, p->name);
    return VOLT_OK;
}

/* The file's tensors stay in it (volt_st_open_deferred): every one a parameter maps to is found,
 * its shape and dtype checked, and read through in pieces (its crc checked when the file keeps
 * crcs, as volt's do; a Hugging Face file keeps none) before the first value is copied; then
 * each is read once more, compared with what the check saw, and copied. Memory: one tensor. */
volt_status volt_distilbert_load(void *self, volt_params *ps, const char *path) {
    if (!self || !ps || !path) return VOLT_ERR_INVALID_ARG;
    if (!volt_params_find(ps, PREFIX "embeddings.word_embeddings.weight") || !volt_params_finalized(ps))
        return volt_params_fail(ps, VOLT_ERR_STATE, "distilbert: load '%s' needs setup and a finalized store", path);
    char err[512];
    volt_st_file *f;
    name_tab cands = { 0 }, used = { 0 };
    if (tab_candidates(ps, &cands) < 0) return volt_params_fail(ps, VOLT_ERR_NOMEM, "distilbert: '%s': out of memory", path);
    volt_status st = volt_st_open_deferred(path, wanted, every, &cands, &f, err, sizeof err);
    free(cands.names);
    if (st < 0) return volt_params_fail(ps, st, "distilbert: pretrained weights: %s", err);
    const int total = volt_params_count(ps);
    volt_tensor **params = malloc(sizeof *params * (size_t)(total + 1));
    char (*src)[NAME_MAX_] = malloc(sizeof *src * (size_t)(total + 1));   /* each parameter's file tensor ("": none) */
    if (!params || !src) { free(params); free(src); volt_st_close(f); return VOLT_ERR_NOMEM; }
    int np = model_params(ps, params);
    int64_t biggest = 1;
    for (int i = 0; i < np; i++)
        if (volt_tensor_numel(params[i]) > biggest) biggest = volt_tensor_numel(params[i]);
    float *stage = malloc(sizeof(float) * (size_t)biggest);   /* f32, as read */
    uint16_t *narrow = malloc(sizeof(uint16_t) * (size_t)biggest);   /* a 16-bit file's or store's values */
    char fresh[512] = "";
    if (!stage || !narrow) st = volt_params_fail(ps, VOLT_ERR_NOMEM, "distilbert: '%s': out of memory", path);
    if (st >= 0) st = match(ps, f, path, params, np, src, fresh, sizeof fresh);
    if (st >= 0 && (st = volt_st_check(f, err, sizeof err)) < 0) st = volt_params_fail(ps, st, "distilbert: %s", err);
    /* checked: from here on a failure means the file changed under the load, and the model's
     * values are partly replaced */
    for (int i = 0; i < np && st >= 0; i++)
        if (src[i][0] && (st = put(ps, f, path, params[i], src[i], stage, narrow, (size_t)biggest)) < 0) {
            char why[768];
            snprintf(why, sizeof why, "%s", volt_params_errmsg(ps));
            st = volt_params_fail(ps, st, "%s; the model's values were partly replaced (set it up afresh)", why);
        }
    if (st >= 0 && !volt_distilbert_get_config(self)->quiet) {   /* notes: one process of several says them */
        if (*fresh)
            fprintf(stderr, "distilbert: '%s': newly initialised (not in the checkpoint; train them): %s\n", path, fresh);
        /* unused: every file tensor no parameter took, a second name of one that another name
         * gave (both "distilbert.x" and "x", or ".weight" and ".gamma") included */
        used.names = src;
        used.n = np;
        qsort(src, (size_t)np, NAME_MAX_, cmp_name);   /* src is not read after this */
        int unused = 0;
        for (int i = 0; i < volt_st_count(f); i++) {
            const char *fn = volt_st_name(f, i);
            if (ignored(fn) || tab_has(&used, fn)) continue;
            if (unused++ < 5) fprintf(stderr, "distilbert: '%s': unused tensor '%s'\n", path, fn);
        }
        if (unused > 5) fprintf(stderr, "distilbert: '%s': ... %d unused tensors in all\n", path, unused);
    }
    free(stage);
    free(narrow);
    free(params);
    free(src);
    volt_st_close(f);
    return st;
}
