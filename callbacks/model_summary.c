/* ModelSummary and the results table, as Lightning prints them (stdout, rank 0):
 *  - at fit start, one row per parameter unit (a layer or block): name, type (guessed from
 *    its parameter shapes: Linear, Conv2d, LayerNorm, Embedding, or Block for a unit of
 *    several layers), parameters, trainable ones, size in MB (the storage dtype's bytes),
 *    then the totals;
 *  - after a standalone validate / test, the loop's metrics, sorted by name, in Lightning's
 *    "Test metric / DataLoader 0" table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/trainer.h"

static void human(int64_t n, char *out, size_t len) {   /* Lightning's get_human_readable_count */
    static const char *const units[] = { "", " K", " M", " B", " T" };
    double v = (double)n;
    int u = 0;
    while (v >= 1000.0 && u < 4) { v /= 1000.0; u++; }
    if (u == 0) snprintf(out, len, "%lld", (long long)n);
    else snprintf(out, len, "%.1f%s", v, units[u]);
}

static const char *unit_type(const volt_unit *u) {
    int n = volt_unit_param_count(u);
    int lin = 0, conv = 0, ln = 0, emb = 0, weights = 0;
    for (int i = 0; i < n; i++) {
        const volt_tensor *p = volt_unit_param(u, i);
        const char *nm = p->name ? p->name : "";
        const char *dot = strrchr(nm, '.');
        const char *leaf = dot ? dot + 1 : nm;
        if (strcmp(leaf, "weight")) continue;
        weights++;
        bool has_bias = false;
        char want[256];
        snprintf(want, sizeof want, "%.*sbias", (int)(leaf - nm), nm);
        for (int j = 0; j < n && !has_bias; j++) has_bias = volt_unit_param(u, j)->name && !strcmp(volt_unit_param(u, j)->name, want);
        if (p->shape.ndim == 4) conv++;
        else if (p->shape.ndim == 1) ln++;
        else if (p->shape.ndim == 2 && (has_bias || !strstr(nm, "embed"))) lin++;
        else emb++;
    }
    if (weights == 1) return conv ? "Conv2d" : ln ? "LayerNorm" : lin ? "Linear" : emb ? "Embedding" : "Params";
    if (weights == 0) return "Params";
    if (emb) return "Embeddings";
    return "Block";
}

static volt_status ms_on_fit_start(void *self, volt_trainer *t) {
    if (!volt_trainer_is_global_zero(t)) return VOLT_OK;
    const volt_params *ps = volt_trainer_params(t);
    if (!ps) return VOLT_OK;
    int nu = volt_params_unit_count(ps);
    size_t width = 4;
    for (int i = 0; i < nu; i++) {
        size_t l = strlen(volt_unit_name(volt_params_unit_at(ps, i)));
        if (l > width) width = l;
    }
    if (width > 60) width = 60;
    /* where the run lives, as Lightning's "GPU available / used" lines */
    const char *dname = volt_trainer_device_name(t);   /* "NVIDIA H200"; none on cpu */
    const int world = volt_trainer_world_size(t);   /* devices 1 under volt-run -n 2: the launched ranks */
    printf("Accelerator: %s (device %d%s%s), devices: %d, strategy: %s", volt_trainer_accelerator(t),
           volt_trainer_device_index(t), dname ? ": " : "", dname ? dname : "", volt_trainer_get_config(t)->devices,
           volt_trainer_get_config(t)->strategy);
    if (world > 1) printf(", ranks: %d", world);
    putchar('\n');
    int64_t total = 0, trainable = 0, bytes = 0;
    size_t esz = volt_params_dtype(ps) == VOLT_F32 ? 4 : 2;
    int iw = nu >= 100 ? 3 : nu >= 10 ? 2 : 1;
    char line[512];
    int w = snprintf(line, sizeof line, "%*s | %-*s | %-10s | %-7s | %-9s | %s", iw, "", (int)width, "Name", "Type", "Params",
                     "Trainable", "Size (MB)");
    printf("%s\n", line);
    for (int k = 0; k < w && k < (int)sizeof line - 1; k++) putchar('-');
    putchar('\n');
    for (int i = 0; i < nu; i++) {
        const volt_unit *u = volt_params_unit_at(ps, i);
        int64_t n = 0, tr = 0;
        for (int j = 0; j < volt_unit_param_count(u); j++) {
            const volt_tensor *p = volt_unit_param(u, j);
            int64_t c = volt_tensor_numel(p);
            n += c;
            if (p->flags & VOLT_TENSOR_REQUIRES_GRAD) tr += c;
        }
        total += n;
        trainable += tr;
        bytes += n * (int64_t)esz;
        char hn[32], ht[32];
        human(n, hn, sizeof hn);
        human(tr, ht, sizeof ht);
        printf("%*d | %-*.*s | %-10s | %-7s | %-9s | %.3f\n", iw, i, (int)width, (int)width, volt_unit_name(u), unit_type(u), hn,
               ht, (double)(n * (int64_t)esz) / 1e6);
    }
    for (int k = 0; k < w && k < (int)sizeof line - 1; k++) putchar('-');
    putchar('\n');
    char a[32], b[32], c[32];
    human(trainable, a, sizeof a);
    human(total - trainable, b, sizeof b);
    human(total, c, sizeof c);
    printf("%-10sTrainable params\n%-10sNon-trainable params\n%-10sTotal params\n%-10.3fTotal estimated model params size (MB)\n",
           a, b, c, (double)bytes / 1e6);
    fflush(stdout);
    return VOLT_OK;
}

/* ---- the results table ------------------------------------------------------------------------- */
typedef struct ms {
    int n, cap;
    char **names;
    double *vals;
} ms;

static void rt_visit(void *ctx, const char *name, double value, unsigned flags) {
    ms *m = ctx;
    if ((flags & VOLT_LOG_NO_LOGGER) || !(flags & VOLT_LOG_EPOCH) || m->n == m->cap) return;
    char *d = strdup(name);
    if (!d) return;
    m->names[m->n] = d;
    m->vals[m->n++] = value;
}

/* The loader a metric is of: "<name>/dataloader_idx_<k>" -> k, else -1 (every loader's). */
static int metric_dl(const char *name) {
    const char *p = strstr(name, "/dataloader_idx_");
    if (!p) return -1;
    char *end;
    const long k = strtol(p + 16, &end, 10);
    return *end || end == p + 16 || k < 0 || k >= VOLT_MAX_EVAL_DATALOADERS ? -1 : (int)k;
}

/* Lightning's table: a row per metric, a column per loader ("DataLoader 0", ...); with several
 * loaders a metric of loader k ("val_loss/dataloader_idx_k") has its value in column k only. */
static void results_table(ms *m, volt_trainer *t, const char *title) {
    if (!volt_trainer_is_global_zero(t) || volt_trainer_sanity_checking(t)) return;
    m->n = 0;
    volt_trainer_visit_fresh_metrics(t, rt_visit, m);
    for (int i = 1; i < m->n; i++)       /* sort by name (a few rows) */
        for (int j = i; j > 0 && strcmp(m->names[j - 1], m->names[j]) > 0; j--) {
            char *tn = m->names[j]; m->names[j] = m->names[j - 1]; m->names[j - 1] = tn;
            double tv = m->vals[j]; m->vals[j] = m->vals[j - 1]; m->vals[j - 1] = tv;
        }
    int cols = volt_trainer_num_eval_dataloaders(t);
    if (cols < 1) cols = 1;
    if (m->n) {
        int namew = 32;
        for (int i = 0; i < m->n; i++)
            if ((int)strlen(m->names[i]) + 2 > namew) namew = (int)strlen(m->names[i]) + 2;
        char rule[3 * 400 + 1];   /* '─' is 3 bytes; as wide as the table, 80 at least */
        int w = 8 + namew + 14 * cols;
        if (w < 80) w = 80;
        if (w > 400) w = 400;
        for (int i = 0; i < w; i++) memcpy(rule + 3 * i, "─", 3);
        rule[3 * w] = 0;
        printf("%s\n%*s%-*s", rule, 8, "", namew, title);
        for (int c = 0; c < cols; c++) {
            char h[24];
            snprintf(h, sizeof h, "DataLoader %d", c);
            printf("%14s", h);
        }
        printf("\n%s\n", rule);
        for (int i = 0; i < m->n; i++) {
            const int dl = cols > 1 ? metric_dl(m->names[i]) : -1;
            printf("%*s%-*s", 8, "", namew, m->names[i]);
            for (int c = 0; c < cols; c++) {
                if (dl < 0 || dl == c) printf("%14.10g", m->vals[i]);
                else printf("%14s", "");
            }
            printf("\n");
        }
        printf("%s\n", rule);
        fflush(stdout);
    }
    for (int i = 0; i < m->n; i++) free(m->names[i]);
    m->n = 0;
}

/* a standalone validate's table; fit's validations (stage VALIDATE too) print none */
static volt_status ms_val_end(void *self, volt_trainer *t) {
    if (volt_trainer_state_fn(t) != VOLT_FN_FIT) results_table(self, t, "Validate metric");
    return VOLT_OK;
}
static volt_status ms_test_end(void *self, volt_trainer *t) { results_table(self, t, "Test metric"); return VOLT_OK; }

static void ms_destroy(void *self) {
    ms *m = self;
    if (!m) return;
    free(m->names);
    free(m->vals);
    free(m);
}

static const volt_callback_ops ms_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "ModelSummary",
    .on_fit_start = ms_on_fit_start,
    .on_validation_end = ms_val_end,
    .on_test_end = ms_test_end,
    .destroy = ms_destroy,
};

volt_status volt_add_model_summary(volt_trainer *t) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    ms *m = calloc(1, sizeof *m);
    if (!m) return VOLT_ERR_NOMEM;
    m->cap = 128;
    m->names = calloc((size_t)m->cap, sizeof *m->names);
    m->vals = calloc((size_t)m->cap, sizeof *m->vals);
    if (!m->names || !m->vals) { ms_destroy(m); return VOLT_ERR_NOMEM; }
    return volt_trainer_add_callback(t, &ms_ops, m);
}
