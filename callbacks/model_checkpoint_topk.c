/* ModelCheckpoint's pure logic (see callbacks/model_checkpoint.h): Lightning's checkpoint
 * file-name templates and the top-k bookkeeping. The hooks are in callbacks/model_checkpoint.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/err.h"
#include "callbacks/model_checkpoint.h"
#include "callbacks/util.h"

/* ---- ModelCheckpoint file names ------------------------------------------------------------- */

typedef struct { char *out; size_t n, k; bool over; } cb_buf;

static void cb_put(cb_buf *b, const char *s, size_t len) {
    if (b->k + len + 1 > b->n) { b->over = true; return; }
    memcpy(b->out + b->k, s, len);
    b->k += len;
    b->out[b->k] = 0;
}

volt_status volt__cb_format_name(const char *tmpl, volt_cb_lookup_fn lookup, void *ctx, int ver, bool insert_names,
                                char *out, size_t n, char *err, size_t errlen) {
    if (!tmpl || !out || !n) return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "no template");
    cb_buf b = { out, n, 0, false };
    out[0] = 0;
    for (const char *p = tmpl; *p;) {
        if (*p == '{' && p[1] == '{') { cb_put(&b, "{", 1); p += 2; continue; }
        if (*p == '}' && p[1] == '}') { cb_put(&b, "}", 1); p += 2; continue; }
        if (*p == '}')
            return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "filename template '%s': single '}'", tmpl);
        if (*p != '{') { cb_put(&b, p, 1); p++; continue; }
        const char *name = p + 1, *q = name;
        while (*q && *q != ':' && *q != '}' && *q != '{') q++;
        size_t nl = (size_t)(q - name);
        if (*q != ':' && *q != '}')
            return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "filename template '%s': unclosed '{'", tmpl);
        if (nl == 0 || nl >= 256)
            return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "filename template '%s': empty or too long field name", tmpl);
        char key[256], spec[64] = "";
        memcpy(key, name, nl);
        key[nl] = 0;
        if (*q == ':') {
            const char *s = q + 1, *e = s;
            while (*e && *e != '}' && *e != '{') e++;
            if (*e != '}' || (size_t)(e - s) >= sizeof spec)
                return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "filename template '%s': bad format spec for '%s'", tmpl, key);
            memcpy(spec, s, (size_t)(e - s));
            spec[e - s] = 0;
            q = e;
        }
        double v = 0;
        bool is_int = true;                          /* unknown names format as 0 (Lightning) */
        if (lookup && !lookup(ctx, key, &v, &is_int)) { v = 0; is_int = true; }
        char num[256];
        if (volt__cb_format_number(v, is_int, spec, num, sizeof num) != VOLT_OK)
            return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "filename template '%s': unsupported format spec '%s' for '%s'", tmpl, spec, key);
        if (insert_names) {   /* "val_loss/dataloader_idx_0=" would make a folder: '_' for '/' keeps the file in dirpath */
            for (size_t c = 0; c < nl; c++)
                if (key[c] == '/') key[c] = '_';
            cb_put(&b, key, nl);
            cb_put(&b, "=", 1);
        }
        cb_put(&b, num, strlen(num));
        p = q + 1;
    }
    if (ver > 0) {
        char v[24];
        int len = snprintf(v, sizeof v, "-v%d", ver);
        cb_put(&b, v, (size_t)len);
    }
    if (b.over) return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "filename template '%s': name too long", tmpl);
    return VOLT_OK;
}

/* ---- top-k ------------------------------------------------------------------------------------ */

double volt__cb_topk_sanitize(double score, volt_mode mode) {
    if (isnan(score)) return mode == VOLT_MIN ? INFINITY : -INFINITY;
    return score;
}

bool volt__cb_topk_should_save(const volt_cb_topk *tk, int k, volt_mode mode, double score) {
    if (k == 0) return false;
    if (k < 0 || tk->n < k) return true;
    int w = volt__cb_topk_worst(tk, mode);
    return volt__cb_better(volt__cb_topk_sanitize(score, mode), tk->e[w].score, mode);
}

int volt__cb_topk_best(const volt_cb_topk *tk, volt_mode mode) {
    int b = -1;
    for (int i = 0; i < tk->n; i++)
        if (b < 0 || volt__cb_better(tk->e[i].score, tk->e[b].score, mode)) b = i;
    return b;
}

int volt__cb_topk_worst(const volt_cb_topk *tk, volt_mode mode) {
    int w = -1;
    for (int i = 0; i < tk->n; i++)          /* "not better than" keeps the latest among ties */
        if (w < 0 || !volt__cb_better(tk->e[i].score, tk->e[w].score, mode)) w = i;
    return w;
}

int volt__cb_topk_find(const volt_cb_topk *tk, const char *path) {
    for (int i = 0; i < tk->n; i++)
        if (strcmp(tk->e[i].path, path) == 0) return i;
    return -1;
}

volt_status volt__cb_topk_insert(volt_cb_topk *tk, int i, const char *path, double score) {
    if (i < 0 || i > tk->n) i = tk->n;
    if (tk->n == tk->cap) {
        int cap = tk->cap ? tk->cap * 2 : 8;
        volt_cb_topk_entry *e = realloc(tk->e, (size_t)cap * sizeof *e);
        if (!e) return VOLT_ERR_NOMEM;
        tk->e = e;
        tk->cap = cap;
    }
    char *p = strdup(path);
    if (!p) return VOLT_ERR_NOMEM;
    memmove(tk->e + i + 1, tk->e + i, (size_t)(tk->n - i) * sizeof *tk->e);
    tk->e[i].path = p;
    tk->e[i].score = score;
    tk->n++;
    return VOLT_OK;
}

volt_status volt__cb_topk_push(volt_cb_topk *tk, const char *path, double score) {
    return volt__cb_topk_insert(tk, tk->n, path, score);
}

char *volt__cb_topk_take(volt_cb_topk *tk, int i) {
    if (i < 0 || i >= tk->n) return NULL;
    char *p = tk->e[i].path;
    memmove(tk->e + i, tk->e + i + 1, (size_t)(tk->n - i - 1) * sizeof *tk->e);
    tk->n--;
    return p;
}

void volt__cb_topk_clear(volt_cb_topk *tk) {
    for (int i = 0; i < tk->n; i++) free(tk->e[i].path);
    free(tk->e);
    tk->e = NULL;
    tk->n = tk->cap = 0;
}
