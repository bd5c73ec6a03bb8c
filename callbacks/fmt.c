/* The pure logic of the built-in callbacks (see callbacks/fmt.h): Python-style number
 * formatting, checkpoint file-name templates, top-k bookkeeping, the EarlyStopping
 * decision, progress-bar text and small file helpers. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "callbacks/fmt.h"
#include "core/err.h"

#define cb_err volt__errf   /* core/err.h */

/* ---- numbers ------------------------------------------------------------------------------ */

void volt_cb_repr(double v, char *out, size_t n) {
    if (!n) return;
    if (isnan(v)) { snprintf(out, n, "nan"); return; }
    if (isinf(v)) { snprintf(out, n, v < 0 ? "-inf" : "inf"); return; }
    if (v == 0) { snprintf(out, n, signbit(v) ? "-0.0" : "0.0"); return; }
    /* Shortest %.*e that reads back exactly: its digits and decimal exponent. */
    char e[40];
    for (int p = 0; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p, v);
        if (strtod(e, NULL) == v) break;
    }
    const char *s = e;
    bool neg = *s == '-';
    if (neg) s++;
    char digits[24];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9' && nd < 23) digits[nd++] = *s;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int exp10 = *s == 'e' ? atoi(s + 1) : 0;
    int decpt = exp10 + 1;                 /* digits d1d2... mean 0.d1d2... x 10^decpt */
    char buf[64];
    size_t k = 0;
    if (neg) buf[k++] = '-';
    if (decpt > -4 && decpt <= 16) {       /* Python's repr switches to exponent outside */
        if (decpt <= 0) {
            buf[k++] = '0'; buf[k++] = '.';
            for (int i = 0; i < -decpt; i++) buf[k++] = '0';
            for (int i = 0; i < nd; i++) buf[k++] = digits[i];
        } else if (decpt >= nd) {
            for (int i = 0; i < nd; i++) buf[k++] = digits[i];
            for (int i = nd; i < decpt; i++) buf[k++] = '0';
            buf[k++] = '.'; buf[k++] = '0';
        } else {
            for (int i = 0; i < decpt; i++) buf[k++] = digits[i];
            buf[k++] = '.';
            for (int i = decpt; i < nd; i++) buf[k++] = digits[i];
        }
        buf[k] = 0;
    } else {
        buf[k++] = digits[0];
        if (nd > 1) {
            buf[k++] = '.';
            for (int i = 1; i < nd; i++) buf[k++] = digits[i];
        }
        snprintf(buf + k, sizeof buf - k, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    snprintf(out, n, "%s", buf);
}

volt_status volt_cb_format_number(double v, bool is_int, const char *spec, char *out, size_t n) {
    if (!out || !n) return VOLT_ERR_INVALID_ARG;
    const char *p = spec ? spec : "";
    char sign = 0, type = 0;
    bool zero = false;
    int width = -1, prec = -1;
    if (*p == '+' || *p == '-' || *p == ' ') sign = *p++;
    if (*p == '0') { zero = true; p++; }
    if (*p >= '0' && *p <= '9') {
        width = 0;
        while (*p >= '0' && *p <= '9' && width < 1000) width = width * 10 + (*p++ - '0');
    }
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return VOLT_ERR_INVALID_ARG;
        prec = 0;
        while (*p >= '0' && *p <= '9' && prec < 100) prec = prec * 10 + (*p++ - '0');
    }
    if (*p && strchr("deEfFgG%", *p)) type = *p++;
    if (*p) return VOLT_ERR_INVALID_ARG;             /* fill/align, grouping, '#': unsupported */

    char body[512];
    char fl[8];
    size_t fk = 0;
    fl[fk++] = '%';
    if (sign == '+' || sign == ' ') fl[fk++] = sign;
    if (zero) fl[fk++] = '0';
    fl[fk] = 0;
    if (type == 'd' || (is_int && type == 0)) {
        /* Python rejects 'd' for a float; we round it rather than fail a save. */
        if (!is_int && !isfinite(v)) return VOLT_ERR_INVALID_ARG;
        long long iv = is_int ? (long long)v : llround(v);
        char f2[16];
        snprintf(f2, sizeof f2, "%s%slld", fl, width >= 0 ? "*" : "");
        if (width >= 0) snprintf(body, sizeof body, f2, width, iv);
        else snprintf(body, sizeof body, f2, iv);
    } else if (type == 0 && prec < 0) {
        char r[64];
        volt_cb_repr(v, r, sizeof r);
        const char *sg = (sign == '+' && v >= 0 && !signbit(v)) ? "+" : (sign == ' ' && !signbit(v)) ? " " : "";
        size_t len = strlen(r) + strlen(sg);
        size_t pad = width > 0 && (size_t)width > len ? (size_t)width - len : 0;
        if (zero && isfinite(v)) {
            const char *digits = r[0] == '-' ? r + 1 : r;
            const char *neg = r[0] == '-' ? "-" : sg;
            snprintf(body, sizeof body, "%s%0*d%s", neg, (int)pad, 0, digits);
            if (pad == 0) snprintf(body, sizeof body, "%s%s", neg, digits);
        } else {
            snprintf(body, sizeof body, "%*s%s%s", (int)pad, "", sg, r);
        }
    } else {
        double x = v;
        char conv = type;
        if (type == '%') { x = v * 100.0; conv = 'f'; }
        if (type == 0) conv = 'g';
        if (type == 'F') conv = 'f';
        if (prec < 0) prec = 6;
        int w = width;
        if (type == '%' && w > 0) w--;               /* the '%' counts in the width */
        char f2[24];
        snprintf(f2, sizeof f2, "%s%s.*%c", fl, w >= 0 ? "*" : "", conv);
        if (w >= 0) snprintf(body, sizeof body, f2, w, prec, x);
        else snprintf(body, sizeof body, f2, prec, x);
        if (isnan(x)) {                              /* C may print "-nan"; Python "nan" */
            char *q = strstr(body, "-nan");
            if (q) *q = ' ';
        }
        if (type == 0 && isfinite(x) && !strpbrk(body, ".e"))
            strncat(body, ".0", sizeof body - strlen(body) - 1);   /* format(2.0, '.3') = '2.0' */
        if (type == '%') strncat(body, "%", sizeof body - strlen(body) - 1);
    }
    if (strlen(body) >= n) return VOLT_ERR_INVALID_ARG;
    memcpy(out, body, strlen(body) + 1);
    return VOLT_OK;
}

/* ---- ModelCheckpoint file names ------------------------------------------------------------- */

typedef struct { char *out; size_t n, k; bool over; } cb_buf;

static void cb_put(cb_buf *b, const char *s, size_t len) {
    if (b->k + len + 1 > b->n) { b->over = true; return; }
    memcpy(b->out + b->k, s, len);
    b->k += len;
    b->out[b->k] = 0;
}

volt_status volt_cb_format_name(const char *tmpl, volt_cb_lookup_fn lookup, void *ctx, int ver,
                                char *out, size_t n, char *err, size_t errlen) {
    if (!tmpl || !out || !n) return cb_err(err, errlen, VOLT_ERR_INVALID_ARG, "no template");
    cb_buf b = { out, n, 0, false };
    out[0] = 0;
    for (const char *p = tmpl; *p;) {
        if (*p == '{' && p[1] == '{') { cb_put(&b, "{", 1); p += 2; continue; }
        if (*p == '}' && p[1] == '}') { cb_put(&b, "}", 1); p += 2; continue; }
        if (*p == '}')
            return cb_err(err, errlen, VOLT_ERR_INVALID_ARG, "filename template '%s': single '}'", tmpl);
        if (*p != '{') { cb_put(&b, p, 1); p++; continue; }
        const char *name = p + 1, *q = name;
        while (*q && *q != ':' && *q != '}' && *q != '{') q++;
        size_t nl = (size_t)(q - name);
        if (*q != ':' && *q != '}')
            return cb_err(err, errlen, VOLT_ERR_INVALID_ARG, "filename template '%s': unclosed '{'", tmpl);
        if (nl == 0 || nl >= 256)
            return cb_err(err, errlen, VOLT_ERR_INVALID_ARG, "filename template '%s': empty or too long field name", tmpl);
        char key[256], spec[64] = "";
        memcpy(key, name, nl);
        key[nl] = 0;
        if (*q == ':') {
            const char *s = q + 1, *e = s;
            while (*e && *e != '}' && *e != '{') e++;
            if (*e != '}' || (size_t)(e - s) >= sizeof spec)
                return cb_err(err, errlen, VOLT_ERR_INVALID_ARG, "filename template '%s': bad format spec for '%s'", tmpl, key);
            memcpy(spec, s, (size_t)(e - s));
            spec[e - s] = 0;
            q = e;
        }
        double v = 0;
        bool is_int = true;                          /* unknown names format as 0 (Lightning) */
        if (lookup && !lookup(ctx, key, &v, &is_int)) { v = 0; is_int = true; }
        char num[256];
        if (volt_cb_format_number(v, is_int, spec, num, sizeof num) != VOLT_OK)
            return cb_err(err, errlen, VOLT_ERR_INVALID_ARG, "filename template '%s': unsupported format spec '%s' for '%s'", tmpl, spec, key);
        cb_put(&b, key, nl);
        cb_put(&b, "=", 1);
        cb_put(&b, num, strlen(num));
        p = q + 1;
    }
    if (ver > 0) {
        char v[24];
        int len = snprintf(v, sizeof v, "-v%d", ver);
        cb_put(&b, v, (size_t)len);
    }
    if (b.over) return cb_err(err, errlen, VOLT_ERR_INVALID_ARG, "filename template '%s': name too long", tmpl);
    return VOLT_OK;
}

/* ---- top-k ------------------------------------------------------------------------------------ */

double volt_cb_topk_sanitize(double score, volt_mode mode) {
    if (isnan(score)) return mode == VOLT_MIN ? INFINITY : -INFINITY;
    return score;
}

bool volt_cb_better(double a, double b, volt_mode mode) {
    return mode == VOLT_MAX ? a > b : a < b;
}

bool volt_cb_topk_should_save(const volt_cb_topk *tk, int k, volt_mode mode, double score) {
    if (k == 0) return false;
    if (k < 0 || tk->n < k) return true;
    int w = volt_cb_topk_worst(tk, mode);
    return volt_cb_better(volt_cb_topk_sanitize(score, mode), tk->e[w].score, mode);
}

int volt_cb_topk_best(const volt_cb_topk *tk, volt_mode mode) {
    int b = -1;
    for (int i = 0; i < tk->n; i++)
        if (b < 0 || volt_cb_better(tk->e[i].score, tk->e[b].score, mode)) b = i;
    return b;
}

int volt_cb_topk_worst(const volt_cb_topk *tk, volt_mode mode) {
    int w = -1;
    for (int i = 0; i < tk->n; i++)          /* "not better than" keeps the latest among ties */
        if (w < 0 || !volt_cb_better(tk->e[i].score, tk->e[w].score, mode)) w = i;
    return w;
}

int volt_cb_topk_find(const volt_cb_topk *tk, const char *path) {
    for (int i = 0; i < tk->n; i++)
        if (strcmp(tk->e[i].path, path) == 0) return i;
    return -1;
}

volt_status volt_cb_topk_push(volt_cb_topk *tk, const char *path, double score) {
    if (tk->n == tk->cap) {
        int cap = tk->cap ? tk->cap * 2 : 8;
        volt_cb_topk_entry *e = realloc(tk->e, (size_t)cap * sizeof *e);
        if (!e) return VOLT_ERR_NOMEM;
        tk->e = e;
        tk->cap = cap;
    }
    char *p = strdup(path);
    if (!p) return VOLT_ERR_NOMEM;
    tk->e[tk->n].path = p;
    tk->e[tk->n].score = score;
    tk->n++;
    return VOLT_OK;
}

char *volt_cb_topk_take(volt_cb_topk *tk, int i) {
    if (i < 0 || i >= tk->n) return NULL;
    char *p = tk->e[i].path;
    memmove(tk->e + i, tk->e + i + 1, (size_t)(tk->n - i - 1) * sizeof *tk->e);
    tk->n--;
    return p;
}

void volt_cb_topk_clear(volt_cb_topk *tk) {
    for (int i = 0; i < tk->n; i++) free(tk->e[i].path);
    free(tk->e);
    tk->e = NULL;
    tk->n = tk->cap = 0;
}

/* ---- EarlyStopping --------------------------------------------------------------------------- */

void volt_cb_es_init(volt_cb_es_state *st, volt_mode mode) {
    st->best = mode == VOLT_MAX ? -INFINITY : INFINITY;
    st->wait = 0;
    st->stopped_epoch = 0;
}

bool volt_cb_es_update(const volt_early_stopping_config *cfg, volt_cb_es_state *st, double current,
                       char *reason, size_t n) {
    char dummy[8];
    if (!reason || !n) { reason = dummy; n = sizeof dummy; }
    reason[0] = 0;
    const char *mon = cfg->monitor ? cfg->monitor : "?";
    volt_mode mode = cfg->mode;
    const char *op = mode == VOLT_MAX ? ">" : "<";
    char cur[64];
    volt_cb_repr(current, cur, sizeof cur);
    if (cfg->check_finite && !isfinite(current)) {
        snprintf(reason, n, "Monitored metric %s = %s is not finite. Previous best value was %.3f. "
                 "Signaling Trainer to stop.", mon, cur, st->best);
        return true;
    }
    if (cfg->has_stopping_threshold && volt_cb_better(current, cfg->stopping_threshold, mode)) {
        snprintf(reason, n, "Stopping threshold reached: %s = %s %s %g. Signaling Trainer to stop.",
                 mon, cur, op, (double)cfg->stopping_threshold);
        return true;
    }
    if (cfg->has_divergence_threshold && volt_cb_better(-current, -(double)cfg->divergence_threshold, mode)) {
        snprintf(reason, n, "Divergence threshold reached: %s = %s %s %g. Signaling Trainer to stop.",
                 mon, cur, mode == VOLT_MAX ? "<" : ">", (double)cfg->divergence_threshold);
        return true;
    }
    double delta = fabs((double)cfg->min_delta);
    bool improved = mode == VOLT_MAX ? current - delta > st->best : current + delta < st->best;
    if (improved) {
        if (isfinite(st->best))
            snprintf(reason, n, "Metric %s improved by %.3f >= min_delta = %g. New best score: %.3f",
                     mon, fabs(st->best - current), (double)cfg->min_delta, current);
        else
            snprintf(reason, n, "Metric %s improved. New best score: %.3f", mon, current);
        st->best = current;
        st->wait = 0;
        return false;
    }
    st->wait++;
    if (st->wait >= cfg->patience) {
        snprintf(reason, n, "Monitored metric %s did not improve in the last %lld records. "
                 "Best score: %.3f. Signaling Trainer to stop.", mon, (long long)st->wait, st->best);
        return true;
    }
    return false;
}

/* ---- progress bar text ------------------------------------------------------------------------- */

void volt_cb_fmt_duration(double secs, char *out, size_t n) {
    if (!(secs >= 0) || !isfinite(secs) || secs > 1e9) { snprintf(out, n, "?"); return; }
    long long s = (long long)secs;
    long long h = s / 3600, m = (s / 60) % 60, r = s % 60;
    if (h) snprintf(out, n, "%lld:%02lld:%02lld", h, m, r);
    else snprintf(out, n, "%02lld:%02lld", m, r);
}

size_t volt_cb_progress_line(char *out, size_t n, const char *prefix, int64_t done, int64_t total,
                             int64_t start, double elapsed, const char *postfix) {
    if (!n) return 0;
    char el[32], rem[32], rate[32];
    volt_cb_fmt_duration(elapsed, el, sizeof el);
    int64_t timed = done - (start > 0 ? start : 0);
    double r = elapsed > 0 && timed > 0 ? (double)timed / elapsed : 0;
    if (r <= 0) snprintf(rate, sizeof rate, "?it/s");
    else if (r < 1) snprintf(rate, sizeof rate, "%.2fs/it", 1.0 / r);
    else snprintf(rate, sizeof rate, r >= 100 ? "%.0fit/s" : r >= 10 ? "%.1fit/s" : "%.2fit/s", r);
    const char *pf = postfix && *postfix ? postfix : NULL;
    int len;
    if (total > 0) {
        if (r > 0) volt_cb_fmt_duration((double)(total - done) / r, rem, sizeof rem);
        else snprintf(rem, sizeof rem, "?");
        len = snprintf(out, n, "%s: %lld/%lld [%s<%s, %s%s%s]", prefix, (long long)done,
                       (long long)total, el, rem, rate, pf ? ", " : "", pf ? pf : "");
    } else {
        len = snprintf(out, n, "%s: %lld [%s, %s%s%s]", prefix, (long long)done, el, rate,
                       pf ? ", " : "", pf ? pf : "");
    }
    if (len < 0) { out[0] = 0; return 0; }
    return (size_t)len < n ? (size_t)len : n - 1;
}

/* ---- files ----------------------------------------------------------------------------------- */

volt_status volt_cb_mkdirs(const char *path, char *err, size_t errlen) {
    char buf[VOLT_CB_PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf)
        return cb_err(err, errlen, VOLT_ERR_INVALID_ARG, "bad directory path '%s'", path);
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return cb_err(err, errlen, VOLT_ERR_IO, "cannot create directory '%s': %s", buf, strerror(errno));
        buf[i] = c;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return cb_err(err, errlen, VOLT_ERR_IO, "'%s' is not a directory", path);
    return VOLT_OK;
}

int volt_cb_next_version(const char *root) {
    DIR *d = opendir(root);
    if (!d) return 0;
    int best = -1;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "version_", 8) != 0) continue;
        const char *s = de->d_name + 8;
        if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 9) continue;
        char full[VOLT_CB_PATH_MAX];
        struct stat sb;
        snprintf(full, sizeof full, "%s/%s", root, de->d_name);
        if (stat(full, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        int v = atoi(s);
        if (v > best) best = v;
    }
    closedir(d);
    return best + 1;
}

volt_status volt_cb_write_text(const char *path, const char *text, char *err, size_t errlen) {
    char tmp[VOLT_CB_PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return cb_err(err, errlen, VOLT_ERR_INVALID_ARG, "path too long: '%s'", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return cb_err(err, errlen, VOLT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return cb_err(err, errlen, VOLT_ERR_IO, "cannot write '%s': %s", tmp, strerror(e));
        }
        off += (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        unlink(tmp);
        return cb_err(err, errlen, VOLT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return cb_err(err, errlen, VOLT_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(e));
    }
    return VOLT_OK;
}

/* ---- metrics.csv ------------------------------------------------------------------------------- */

int volt_cb_csv_split(const char *line, char ***cells) {
    int n = 0, cap = 8;
    char **c = malloc((size_t)cap * sizeof *c);
    size_t blen = strlen(line) + 1;
    char *buf = malloc(blen);
    if (!c || !buf) { free(c); free(buf); return -1; }
    const char *p = line;
    for (;;) {
        size_t k = 0;
        if (*p == '"') {
            p++;
            for (;;) {
                if (!*p) goto fail;                    /* unterminated quote */
                if (*p == '"') {
                    if (p[1] == '"') { buf[k++] = '"'; p += 2; continue; }
                    p++;
                    break;
                }
                buf[k++] = *p++;
            }
            if (*p && *p != ',') goto fail;
        } else {
            while (*p && *p != ',') buf[k++] = *p++;
        }
        buf[k] = 0;
        if (n == cap) {
            char **c2 = realloc(c, (size_t)(cap *= 2) * sizeof *c);
            if (!c2) goto fail;
            c = c2;
        }
        if (!(c[n] = strdup(buf))) goto fail;
        n++;
        if (!*p) break;
        p++;                                           /* the comma */
    }
    free(buf);
    *cells = c;
    return n;
fail:
    for (int i = 0; i < n; i++) free(c[i]);
    free(c);
    free(buf);
    return -1;
}

static void free_cells(char **c, int n) {
    for (int i = 0; i < n; i++) free(c[i]);
    free(c);
}

static void put_cell(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\r\n")) { fputs(s, f); return; }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('"', f);
}

static void put_header(FILE *f, const volt_cb_csv *c) {
    for (int i = 0; i < c->ncols; i++) {
        if (i) fputc(',', f);
        put_cell(f, c->cols[i]);
    }
    fputc('\n', f);
}

/* One line of a file into a growing buffer (without the newline); false at EOF. */
static bool read_line(FILE *f, char **buf, size_t *cap) {
    size_t k = 0;
    int ch;
    if (!*buf) { *cap = 256; if (!(*buf = malloc(*cap))) return false; }
    while ((ch = fgetc(f)) != EOF && ch != '\n') {
        if (k + 2 > *cap) {
            char *b = realloc(*buf, *cap * 2);
            if (!b) return false;
            *buf = b;
            *cap *= 2;
        }
        (*buf)[k++] = (char)ch;
    }
    if (k && (*buf)[k - 1] == '\r') k--;
    (*buf)[k] = 0;
    return ch != EOF || k > 0;
}

volt_status volt_cb_csv_open(volt_cb_csv *c, const char *path, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (!(c->path = strdup(path))) return VOLT_ERR_NOMEM;
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    if (f && read_line(f, &line, &cap) && line[0]) {
        char **cells;
        int n = volt_cb_csv_split(line, &cells);
        fclose(f);
        free(line);
        if (n < 0) {
            snprintf(err, errlen, "'%s': cannot parse the header line", path);
            volt_cb_csv_close(c);
            return VOLT_ERR_CORRUPT;
        }
        c->cols = cells;
        c->ncols = n;
        c->on_disk = true;
        return VOLT_OK;
    }
    if (f) fclose(f);
    free(line);
    static const char *const base[] = { "epoch", "step" };
    if (!(c->cols = calloc(2, sizeof *c->cols))) { volt_cb_csv_close(c); return VOLT_ERR_NOMEM; }
    for (int i = 0; i < 2; i++)
        if (!(c->cols[c->ncols++] = strdup(base[i]))) { volt_cb_csv_close(c); return VOLT_ERR_NOMEM; }
    return VOLT_OK;
}

void volt_cb_csv_close(volt_cb_csv *c) {
    if (!c) return;
    free_cells(c->cols, c->ncols);
    free(c->path);
    memset(c, 0, sizeof *c);
}

static int col_index(const volt_cb_csv *c, const char *name) {
    for (int i = 0; i < c->ncols; i++)
        if (strcmp(c->cols[i], name) == 0) return i;
    return -1;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Rewrite the file with the current (wider) header: each old row's cells move under their
 * column's new position. Atomic: path.tmp, then rename. */
static volt_status csv_rewrite(volt_cb_csv *c, char *err, size_t errlen) {
    char tmp[VOLT_CB_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", c->path);
    FILE *in = fopen(c->path, "r");
    if (!in) { snprintf(err, errlen, "cannot read '%s': %s", c->path, strerror(errno)); return VOLT_ERR_IO; }
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        snprintf(err, errlen, "cannot write '%s': %s", tmp, strerror(errno));
        return VOLT_ERR_IO;
    }
    volt_status st = VOLT_OK;
    char *line = NULL, **old = NULL;
    size_t cap = 0;
    int nold = -1;
    int *map = NULL;
    if (!read_line(in, &line, &cap) || (nold = volt_cb_csv_split(line, &old)) < 0) {
        snprintf(err, errlen, "'%s': cannot parse the header line", c->path);
        st = VOLT_ERR_CORRUPT;
    } else if (!(map = malloc((size_t)(nold ? nold : 1) * sizeof *map))) {
        st = VOLT_ERR_NOMEM;
    } else {
        for (int i = 0; i < nold; i++) map[i] = col_index(c, old[i]);
        put_header(out, c);
        const char **row = calloc((size_t)c->ncols, sizeof *row);
        if (!row) st = VOLT_ERR_NOMEM;
        while (st == VOLT_OK && read_line(in, &line, &cap)) {
            if (!line[0]) continue;
            char **cells;
            int n = volt_cb_csv_split(line, &cells);
            if (n < 0) { snprintf(err, errlen, "'%s': cannot parse a row", c->path); st = VOLT_ERR_CORRUPT; break; }
            for (int i = 0; i < c->ncols; i++) row[i] = "";
            for (int i = 0; i < n && i < nold; i++)
                if (map[i] >= 0) row[map[i]] = cells[i];
            for (int i = 0; i < c->ncols; i++) {
                if (i) fputc(',', out);
                put_cell(out, row[i]);
            }
            fputc('\n', out);
            free_cells(cells, n);
        }
        free(row);
    }
    if (old) free_cells(old, nold);
    free(map);
    free(line);
    fclose(in);
    if (fflush(out) != 0 || ferror(out)) {
        if (st == VOLT_OK) { snprintf(err, errlen, "cannot write '%s'", tmp); st = VOLT_ERR_IO; }
    }
    fclose(out);
    if (st == VOLT_OK && rename(tmp, c->path) != 0) {
        snprintf(err, errlen, "cannot rename '%s': %s", tmp, strerror(errno));
        st = VOLT_ERR_IO;
    }
    if (st != VOLT_OK) remove(tmp);
    return st;
}

volt_status volt_cb_csv_write_row(volt_cb_csv *c, int64_t epoch, int64_t step, int n,
                                  const char *const *names, const double *vals, char *err, size_t errlen) {
    int added = 0;
    for (int i = 0; i < n; i++) {
        if (!names[i] || strcmp(names[i], "epoch") == 0 || strcmp(names[i], "step") == 0) continue;
        if (col_index(c, names[i]) >= 0) continue;
        char **cols = realloc(c->cols, (size_t)(c->ncols + 1) * sizeof *cols);
        if (!cols) return VOLT_ERR_NOMEM;
        c->cols = cols;
        if (!(c->cols[c->ncols] = strdup(names[i]))) return VOLT_ERR_NOMEM;
        c->ncols++;
        added++;
    }
    if (added) {
        /* epoch, step stay in front (where they are); the metric columns are sorted. */
        int lead = 0;
        while (lead < c->ncols && (strcmp(c->cols[lead], "epoch") == 0 || strcmp(c->cols[lead], "step") == 0)) lead++;
        qsort(c->cols + lead, (size_t)(c->ncols - lead), sizeof *c->cols, cmp_str);
        if (c->on_disk) VOLT_TRY(csv_rewrite(c, err, errlen));
    }
    FILE *f = fopen(c->path, c->on_disk ? "a" : "w");
    if (!f) { snprintf(err, errlen, "cannot write '%s': %s", c->path, strerror(errno)); return VOLT_ERR_IO; }
    if (!c->on_disk) put_header(f, c);
    for (int j = 0; j < c->ncols; j++) {
        if (j) fputc(',', f);
        char num[64] = "";
        if (strcmp(c->cols[j], "epoch") == 0) snprintf(num, sizeof num, "%lld", (long long)epoch);
        else if (strcmp(c->cols[j], "step") == 0) snprintf(num, sizeof num, "%lld", (long long)step);
        else
            for (int i = n - 1; i >= 0; i--)           /* the last value given for a name wins */
                if (names[i] && strcmp(names[i], c->cols[j]) == 0) { volt_cb_repr(vals[i], num, sizeof num); break; }
        fputs(num, f);
    }
    fputc('\n', f);
    bool bad = fflush(f) != 0 || ferror(f);
    if (fclose(f) != 0 || bad) { snprintf(err, errlen, "cannot write '%s'", c->path); return VOLT_ERR_IO; }
    c->on_disk = true;
    return VOLT_OK;
}
