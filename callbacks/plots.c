/* Metric plots: SVG line charts of a metrics.csv (the CSV logger's), one per group —
 * loss.svg (columns with "loss" in the name) and accuracy.svg ("acc") — each series against
 * the step column, train and val (and any other stage) in their own colours, with axes,
 * ticks and a legend. Plain SVG 1.1: any browser shows it. The callback draws them at the end
 * of fit (rank 0) into the log dir; `volt-plot metrics.csv` draws them from any run. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "volt/trainer.h"
#include "callbacks/util.h"

#define W 720
#define H 440
#define ML 70   /* margins: left, right, top, bottom */
#define MR 190
#define MT 40
#define MB 50

typedef struct series { char *name; int n, cap; double *x, *y; } series;

static const char *const colors[] = { "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f" };

static bool push(series *s, double x, double y) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        double *nx = realloc(s->x, (size_t)cap * sizeof *nx);
        if (!nx) return false;
        s->x = nx;
        double *ny = realloc(s->y, (size_t)cap * sizeof *ny);
        if (!ny) return false;
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n++] = y;
    return true;
}

/* A "nice" tick step for a span: 1, 2 or 5 times a power of ten, about n ticks. */
static double nice_step(double span, int n) {
    double raw = span / n, p = pow(10.0, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

static volt_status write_svg(const char *path, const char *title, const char *ylabel, series *ss, int ns, char *err, size_t errlen) {
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int i = 0; i < ns; i++)
        for (int k = 0; k < ss[i].n; k++) {
            x0 = fmin(x0, ss[i].x[k]); x1 = fmax(x1, ss[i].x[k]);
            y0 = fmin(y0, ss[i].y[k]); y1 = fmax(y1, ss[i].y[k]);
        }
    if (x1 <= x0) { x0 -= 1; x1 += 1; }
    if (y1 <= y0) { double d = fabs(y0) > 0 ? fabs(y0) * 0.1 : 1; y0 -= d; y1 += d; }
    double ys = nice_step(y1 - y0, 5), xs = nice_step(x1 - x0, 6);
    y0 = floor(y0 / ys) * ys;
    y1 = ceil(y1 / ys) * ys;
    const double pw = W - ML - MR, ph = H - MT - MB;
#define PX(x) (ML + ((x) - x0) / (x1 - x0) * pw)
#define PY(y) (MT + ph - ((y) - y0) / (y1 - y0) * ph)
    char tmp[VOLT_CB_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) { snprintf(err, errlen, "cannot write '%s': %s", tmp, strerror(errno)); return VOLT_ERR_IO; }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H, W, H);
    fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"16\" text-anchor=\"middle\">", ML + (int)pw / 2);
    xml_text(f, title);
    fputs("</text>\n", f);
    for (double y = y0; y <= y1 + ys * 1e-6; y += ys) {       /* horizontal grid + y ticks */
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n", (double)ML, PY(y), ML + pw, PY(y));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", ML - 6, PY(y) + 4, fabs(y) < ys * 1e-6 ? 0.0 : y);
    }
    for (double x = ceil(x0 / xs) * xs; x <= x1 + xs * 1e-6; x += xs)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.6g</text>\n", PX(x), MT + ph + 18, x);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n", ML, MT, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">step</text>\n", ML + pw / 2, H - 10);
    fprintf(f, "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.1f)\">", MT + ph / 2, MT + ph / 2);
    xml_text(f, ylabel);
    fputs("</text>\n", f);
    for (int i = 0; i < ns; i++) {
        const char *col = colors[i % 8];
        if (ss[i].n == 1) {
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", PX(ss[i].x[0]), PY(ss[i].y[0]), col);
        } else {
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
            for (int k = 0; k < ss[i].n; k++) fprintf(f, "%s%.1f,%.1f", k ? " " : "", PX(ss[i].x[k]), PY(ss[i].y[k]));
            fputs("\"/>\n", f);
            for (int k = 0; k < ss[i].n && ss[i].n <= 50; k++)
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", PX(ss[i].x[k]), PY(ss[i].y[k]), col);
        }
        int ly = MT + 10 + 20 * i;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>\n", W - MR + 15, ly, W - MR + 40, ly, col);
        fprintf(f, "<text x=\"%d\" y=\"%d\">", W - MR + 46, ly + 4);
        xml_text(f, ss[i].name);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
#undef PX
#undef PY
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        remove(tmp);
        return VOLT_ERR_IO;
    }
    return VOLT_OK;
}

volt_status volt_plot_metrics_csv(const char *csv_path, const char *out_prefix, int *n_written, char *err, size_t errlen) {
    *n_written = 0;
    FILE *f = fopen(csv_path, "r");
    if (!f) { snprintf(err, errlen, "cannot read '%s': %s", csv_path, strerror(errno)); return VOLT_ERR_IO; }
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {   /* fopen opens a folder; getline then reads nothing */
        fclose(f);
        snprintf(err, errlen, "'%s' is a directory (want a metrics.csv)", csv_path);
        return VOLT_ERR_IO;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    char **head = NULL;
    int nh = -1, step_col = -1, lineno = 0;
    series *ss = NULL;
    volt_status st = VOLT_OK;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!len) continue;
        char **cells = NULL;
        int n = volt__cb_csv_split(line, &cells);
        if (n < 0) { snprintf(err, errlen, "'%s' line %d: bad CSV", csv_path, lineno); st = VOLT_ERR_CORRUPT; break; }
        if (nh < 0) {
            head = cells;
            nh = n;
            for (int i = 0; i < n; i++) if (!strcmp(head[i], "step")) step_col = i;
            if (step_col < 0) { snprintf(err, errlen, "'%s': no 'step' column (not a volt/Lightning metrics.csv?)", csv_path); st = VOLT_ERR_CORRUPT; break; }
            ss = calloc((size_t)n, sizeof *ss);
            if (!ss) { st = VOLT_ERR_NOMEM; break; }
            continue;
        }
        char *end;
        double x = n > step_col ? strtod(cells[step_col], &end) : NAN;
        for (int i = 0; i < n && i < nh; i++) {
            if (i == step_col || !*cells[i] || !isfinite(x)) continue;
            double y = strtod(cells[i], &end);
            if (*end || !isfinite(y)) continue;
            if (!push(&ss[i], x, y)) { st = VOLT_ERR_NOMEM; break; }
        }
        for (int i = 0; i < n; i++) free(cells[i]);
        free(cells);
        if (st) break;
    }
    free(line);
    fclose(f);
    if (st == VOLT_OK && nh < 0) { snprintf(err, errlen, "'%s' is empty", csv_path); st = VOLT_ERR_CORRUPT; }
    static const struct { const char *key, *file, *title, *ylabel; } groups[] = {
        { "loss", "loss.svg", "Loss", "loss" }, { "acc", "accuracy.svg", "Accuracy", "accuracy" } };
    for (int g = 0; g < 2 && st == VOLT_OK; g++) {
        series pick[16];
        int np = 0;
        for (int i = 0; i < nh && np < 16; i++)
            if (ss[i].n && strstr(head[i], groups[g].key)) { pick[np] = ss[i]; pick[np].name = head[i]; np++; }
        if (!np) continue;
        char path[VOLT_CB_PATH_MAX];
        snprintf(path, sizeof path, "%s%s", out_prefix, groups[g].file);
        st = write_svg(path, groups[g].title, groups[g].ylabel, pick, np, err, errlen);
        if (st == VOLT_OK) (*n_written)++;
    }
    for (int i = 0; i < nh && ss; i++) { free(ss[i].x); free(ss[i].y); }
    free(ss);
    for (int i = 0; i < nh; i++) free(head[i]);
    free(head);
    if (st == VOLT_OK && *n_written == 0) { snprintf(err, errlen, "'%s' has no loss or accuracy values to plot", csv_path); st = VOLT_ERR_NOT_FOUND; }
    return st;
}

/* ---- the callback ------------------------------------------------------------------------------ */
static volt_status plots_on_fit_end(void *self, volt_trainer *t) {
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    const char *ld = volt_trainer_log_dir(t);
    if (!ld || !volt_trainer_is_global_zero(t) || (cfg && cfg->fast_dev_run > 0)) return VOLT_OK;
    char csv[VOLT_CB_PATH_MAX], prefix[VOLT_CB_PATH_MAX], err[VOLT_CB_PATH_MAX + 128];
    snprintf(csv, sizeof csv, "%s/metrics.csv", ld);
    snprintf(prefix, sizeof prefix, "%s/", ld);
    int n = 0;
    volt_status st = volt_plot_metrics_csv(csv, prefix, &n, err, sizeof err);
    /* a run too short to log anything has nothing to draw: not an error of the run */
    if (st == VOLT_ERR_NOT_FOUND || st == VOLT_ERR_IO) return VOLT_OK;
    return st < 0 ? volt_trainer_fail(t, st, "MetricPlots: %s", err) : VOLT_OK;
}

static void plots_destroy(void *self) { free(self); }

static const volt_callback_ops plots_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "MetricPlots",
    .on_fit_end = plots_on_fit_end,
    .destroy = plots_destroy,
};

volt_status volt_add_metric_plots(volt_trainer *t) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    int *self = calloc(1, sizeof *self);
    if (!self) return VOLT_ERR_NOMEM;
    return volt_trainer_add_callback(t, &plots_ops, self);
}
