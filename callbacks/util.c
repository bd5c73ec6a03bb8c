/* Small helpers the built-in callbacks share (see callbacks/util.h): Python-style number
 * formatting, mkdir -p, the logger's version folder, atomic text files, CSV line splitting. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "core/err.h"
#include "callbacks/util.h"

/* ---- numbers ------------------------------------------------------------------------------ */

void volt__cb_repr(double v, char *out, size_t n) {
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

volt_status volt__cb_format_number(double v, bool is_int, const char *spec, char *out, size_t n) {
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
        volt__cb_repr(v, r, sizeof r);
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
/* ---- comparing scores ------------------------------------------------------------------- */

bool volt__cb_better(double a, double b, volt_mode mode) {
    return mode == VOLT_MAX ? a > b : a < b;
}

/* ---- files ----------------------------------------------------------------------------------- */

int volt__cb_next_version(const char *root) {
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

volt_status volt__cb_write_text(const char *path, const char *text, char *err, size_t errlen) {
    return volt__write_text_atomic(path, text, err, errlen);
}

/* ---- metrics.csv ------------------------------------------------------------------------------- */

int volt__cb_csv_split(const char *line, char ***cells) {
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

bool volt__cb_has(const volt_trainer *t, const char *name) {
    int first = 0;   /* inside a module's configure_callbacks the trainer's own are replaced: not counted */
    (void)volt_trainer_configuring_callbacks(t, &first);
    for (int i = first; i < volt_trainer_num_callbacks(t); i++) {
        const char *n = volt_trainer_callback_name(t, i);
        if (n && !strcmp(n, name)) return true;
    }
    return false;
}

/* ---- JSON ---------------------------------------------------------------------------------- */
/* Numbers as raw text that reads back to the same double (volt__cb_json_print). */
static bool exact_numbers(cJSON *o) {
    for (cJSON *it = o ? o->child : NULL; it; it = it->next) {
        if (cJSON_IsObject(it) || cJSON_IsArray(it)) {
            if (!exact_numbers(it)) return false;
            continue;
        }
        const double d = it->valuedouble;
        if (!cJSON_IsNumber(it) || !isfinite(d)) continue;   /* cJSON writes inf / nan as null */
        char buf[64];
        if (d == floor(d) && fabs(d) < 1e17) snprintf(buf, sizeof buf, "%.0f", d);
        else
            for (int prec = 15; prec <= 17; prec++) {   /* the shortest that reads back exactly */
                snprintf(buf, sizeof buf, "%.*g", prec, d);
                if (strtod(buf, NULL) == d) break;
            }
        cJSON *raw = cJSON_CreateRaw(buf);
        if (raw && it->string && !(raw->string = strdup(it->string))) {   /* an object member keeps its key */
            cJSON_Delete(raw);
            return false;
        }
        if (!raw || !cJSON_ReplaceItemViaPointer(o, it, raw)) {   /* by pointer: a key given twice is two items */
            cJSON_Delete(raw);
            return false;
        }
        it = raw;
    }
    return true;
}

char *volt__cb_json_print(const cJSON *o, bool formatted) {
    cJSON *dup = o ? cJSON_Duplicate(o, true) : NULL;
    char *s = dup && exact_numbers(dup) ? (formatted ? cJSON_Print(dup) : cJSON_PrintUnformatted(dup)) : NULL;
    cJSON_Delete(dup);
    return s;
}

bool volt__cb_has_logger(const volt_trainer *t) {
    const volt_trainer_config *c = volt_trainer_get_config(t);
    if (c && (c->enable_logger || c->fast_dev_run > 0)) return true;
    for (int i = 0; i < volt_trainer_num_callbacks(t); i++) {
        const char *n = volt_trainer_callback_name(t, i);
        const size_t len = n ? strlen(n) : 0;
        if (len >= 6 && !strcmp(n + len - 6, "Logger")) return true;
    }
    return false;
}

cJSON *volt__cb_json_score(double v) {
    if (isfinite(v)) return cJSON_CreateNumber(v);
    return cJSON_CreateString(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

bool volt__cb_json_get_score(const cJSON *j, double *out) {
    if (cJSON_IsNumber(j)) { *out = j->valuedouble; return true; }
    if (!cJSON_IsString(j)) return false;
    const char *s = j->valuestring;
    if (!strcmp(s, "inf")) *out = INFINITY;
    else if (!strcmp(s, "-inf")) *out = -INFINITY;
    else if (!strcmp(s, "nan")) *out = NAN;
    else return false;
    return true;
}
