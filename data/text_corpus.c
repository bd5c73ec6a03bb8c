/* Text corpora: texts + labels in memory, the IMDB / CSV / TSV loaders and the seeded
 * split. See volt/text.h and docs/TEXT_DATA.md. (The SpamAssassin loader and the mail
 * body extraction are in text_mail.c, the tokenized dataset and its cache in
 * text_dataset.c.)
 *
 * Storage: all texts back to back in one growing byte buffer, each followed by a NUL,
 * with n+1 offsets; labels in an int32 array. */
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
#include "volt/text.h"
#include "core/err.h"
#include "core/rng.h"
#include "data/text_internal.h"

struct volt_corpus {
    char *name;
    int64_t n, cap;            /* texts, capacity of off/labels */
    int64_t *off;              /* n+1 offsets into buf; text i is buf[off[i] .. off[i+1]-1) */
    int32_t *labels;
    char *buf;
    size_t buf_len, buf_cap;
    int num_classes;
};

/* ---- the corpus ------------------------------------------------------------------------ */

volt_status volt_corpus_create(const char *name, volt_corpus **out) {
    if (!out) return VOLT_ERR_INVALID_ARG;
    *out = NULL;
    volt_corpus *c = calloc(1, sizeof *c);
    if (!c) return VOLT_ERR_NOMEM;
    c->name = strdup(name ? name : "corpus");
    c->off = malloc(sizeof *c->off);
    if (!c->name || !c->off) { volt_corpus_destroy(c); return VOLT_ERR_NOMEM; }
    c->off[0] = 0;
    *out = c;
    return VOLT_OK;
}

void volt_corpus_destroy(volt_corpus *c) {
    if (!c) return;
    free(c->name);
    free(c->off);
    free(c->labels);
    free(c->buf);
    free(c);
}

static volt_status corpus_reserve(volt_corpus *c, int64_t n_more, size_t bytes_more) {
    if (c->n + n_more > c->cap) {
        int64_t cap = c->cap ? c->cap : 256;
        while (cap < c->n + n_more) cap *= 2;
        int64_t *off = realloc(c->off, (size_t)(cap + 1) * sizeof *off);
        if (!off) return VOLT_ERR_NOMEM;
        c->off = off;
        int32_t *lab = realloc(c->labels, (size_t)cap * sizeof *lab);
        if (!lab) return VOLT_ERR_NOMEM;
        c->labels = lab;
        c->cap = cap;
    }
    if (bytes_more > SIZE_MAX / 2 - c->buf_len) return VOLT_ERR_NOMEM;
    if (c->buf_len + bytes_more > c->buf_cap) {
        size_t cap = c->buf_cap ? c->buf_cap : 65536;
        while (cap < c->buf_len + bytes_more) cap *= 2;
        char *b = realloc(c->buf, cap);
        if (!b) return VOLT_ERR_NOMEM;
        c->buf = b;
        c->buf_cap = cap;
    }
    return VOLT_OK;
}

volt_status volt_corpus_add(volt_corpus *c, const char *text, size_t len, int32_t label) {
    if (!c || label < 0 || label == INT32_MAX || (!text && len)) return VOLT_ERR_INVALID_ARG;   /* label + 1 must fit */
    VOLT_TRY(corpus_reserve(c, 1, len + 1));
    if (len) memcpy(c->buf + c->buf_len, text, len);
    c->buf[c->buf_len + len] = '\0';
    c->buf_len += len + 1;
    c->labels[c->n] = label;
    c->off[++c->n] = (int64_t)c->buf_len;
    if (label >= c->num_classes) c->num_classes = label + 1;
    return VOLT_OK;
}

int64_t volt_corpus_len(const volt_corpus *c) { return c ? c->n : 0; }

const char *volt_corpus_text(const volt_corpus *c, int64_t i, size_t *len) {
    if (!c || i < 0 || i >= c->n) { if (len) *len = 0; return NULL; }
    if (len) *len = (size_t)(c->off[i + 1] - c->off[i] - 1);
    return c->buf + c->off[i];
}

int32_t volt_corpus_label(const volt_corpus *c, int64_t i) {
    return (!c || i < 0 || i >= c->n) ? -1 : c->labels[i];
}

int volt_corpus_num_classes(const volt_corpus *c) { return c ? c->num_classes : 0; }

int64_t volt_corpus_label_count(const volt_corpus *c, int32_t label) {
    int64_t k = 0;
    for (int64_t i = 0; c && i < c->n; i++) k += c->labels[i] == label;
    return k;
}

const char *volt_corpus_name(const volt_corpus *c) { return c ? c->name : NULL; }

/* ---- files ------------------------------------------------------------------------------ */

/* Read a whole file into a malloc'ed, NUL-terminated buffer. */
static volt_status read_file(const char *path, char **out, size_t *len, char *err, size_t errlen) {
    *out = NULL;
    *len = 0;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return volt__errf(err, errlen, VOLT_ERR_IO, "'%s' is a directory, not a file", path);
    /* a FIFO or device would block or never end: regular files only (opened without
     * blocking, checked on the open file) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return volt__errf(err, errlen, VOLT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return volt__errf(err, errlen, VOLT_ERR_IO, "'%s' is not a regular file", path);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); return volt__errf(err, errlen, VOLT_ERR_NOMEM, "'%s': out of memory", path); }
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    if (!b) { fclose(f); return volt__errf(err, errlen, VOLT_ERR_NOMEM, "'%s': out of memory", path); }
    for (;;) {
        if (cap - n < 2) {
            char *nb = cap > SIZE_MAX / 4 ? NULL : realloc(b, cap * 2);
            if (!nb) { free(b); fclose(f); return volt__errf(err, errlen, VOLT_ERR_NOMEM, "'%s': out of memory", path); }
            b = nb;
            cap *= 2;
        }
        size_t r = fread(b + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    bool bad = ferror(f);
    int e = errno;
    fclose(f);
    if (bad) { free(b); return volt__errf(err, errlen, VOLT_ERR_IO, "read error on '%s': %s", path, strerror(e)); }
    b[n] = '\0';
    *out = b;
    *len = n;
    return VOLT_OK;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Texts must be UTF-8, as Python's open() and pandas read them: the tokenizer would drop an
 * ill-formed byte (a Latin-1 'é') without a word, so the text a model sees silently loses
 * letters. VOLT_ERR_CORRUPT naming `what` (the file, and its line when `lines`), else VOLT_OK. */
static volt_status check_utf8(const char *what, const char *b, size_t n, bool lines, char *err, size_t errlen) {
    size_t at = volt__utf8_invalid_at(b, n);
    if (at == n) return VOLT_OK;
    long long line = 1;
    for (size_t i = 0; lines && i < at; i++) line += b[i] == '\n';
    char where[48] = "";
    if (lines) snprintf(where, sizeof where, "line %lld: ", line);
    return volt__errf(err, errlen, VOLT_ERR_CORRUPT, "%s: %sbyte %zu (0x%02x) is not UTF-8 (another encoding, such as "
                      "Latin-1? convert the file: iconv -f latin1 -t utf-8)", what, where, at, (unsigned)(unsigned char)b[at]);
}

/* ---- IMDB ------------------------------------------------------------------------------- */

typedef struct name_list { char **v; size_t n, cap; } name_list;

static void names_free(name_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    *l = (name_list){ 0 };
}

static bool names_push(name_list *l, const char *s) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(s))) return false;
    l->n++;
    return true;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Append every *.txt file of `folder` (sorted by name) with `label`. */
static volt_status add_txt_folder(volt_corpus *c, const char *folder, int32_t label, char *err, size_t errlen) {
    DIR *d = opendir(folder);
    if (!d) return volt__errf(err, errlen, VOLT_ERR_IO, "imdb: cannot open folder '%s': %s", folder, strerror(errno));
    name_list names = { 0 };
    volt_status st = VOLT_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !ends_with(e->d_name, ".txt")) continue;
        if (!names_push(&names, e->d_name)) { st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "imdb: out of memory"); break; }
    }
    closedir(d);
    if (st == VOLT_OK && names.n) qsort(names.v, names.n, sizeof *names.v, cmp_str);
    /* The files are read on the OpenMP threads (50,000 small files: most of the time is
     * open/read/close), then added in name order; an error names the first failing file in
     * that order, as a serial read would (read again to say why). */
    size_t plen = strlen(folder) + 2;
    char **text = st == VOLT_OK && names.n ? calloc(names.n, sizeof *text) : NULL;
    size_t *len = text ? calloc(names.n, sizeof *len) : NULL;
    if (st == VOLT_OK && names.n && !len) st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "imdb: out of memory");
    char **path = len ? calloc(names.n, sizeof *path) : NULL;
    if (st == VOLT_OK && names.n && !path) st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "imdb: out of memory");
    for (size_t i = 0; st == VOLT_OK && i < names.n; i++) {
        if (!(path[i] = malloc(plen + strlen(names.v[i])))) { st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "imdb: out of memory"); break; }
        sprintf(path[i], "%s/%s", folder, names.v[i]);
    }
    if (st == VOLT_OK && names.n) {
        long long first_bad = -1;
#pragma omp parallel for schedule(dynamic, 64)
        for (long long i = 0; i < (long long)names.n; i++) {
            char e[8];
            if (read_file(path[i], &text[i], &len[i], e, sizeof e) != VOLT_OK) {
#pragma omp critical(imdb_first_bad)
                if (first_bad < 0 || i < first_bad) first_bad = i;
            }
        }
        if (first_bad >= 0) {
            char *t = NULL;
            size_t n = 0;
            st = read_file(path[first_bad], &t, &n, err, errlen);
            free(t);
            if (st == VOLT_OK) st = volt__errf(err, errlen, VOLT_ERR_IO, "imdb: '%s' could not be read", path[first_bad]);
        }
    }
    for (size_t i = 0; st == VOLT_OK && i < names.n; i++) {
        char what[4200];
        snprintf(what, sizeof what, "imdb: '%s'", path[i]);
        if ((st = check_utf8(what, text[i], len[i], false, err, errlen)) != VOLT_OK) break;
        st = volt_corpus_add(c, text[i], len[i], label);
        if (st != VOLT_OK) st = volt__errf(err, errlen, st, "imdb: out of memory");
    }
    for (size_t i = 0; i < names.n && path; i++) {
        free(path[i]);
        if (text) free(text[i]);
    }
    free(path);
    free(text);
    free(len);
    names_free(&names);
    return st;
}

volt_status volt_corpus_load_imdb(const char *dir, volt_corpus **out, char *err, size_t errlen) {
    if (!out) return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "imdb: NULL out");
    *out = NULL;
    if (!dir) return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "imdb: NULL folder");
    static const struct { const char *sub; int32_t label; } parts[] = {
        { "train/pos", 1 }, { "train/neg", 0 }, { "test/pos", 1 }, { "test/neg", 0 } };
    /* Check every folder up front so a missing one fails fast, before reading 50k files. */
    char path[4096];
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return volt__errf(err, errlen, VOLT_ERR_IO, "imdb: folder '%s' not found (expected aclImdb/)", dir);
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, parts[p].sub) >= sizeof path)
            return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "imdb: path too long: '%s'", dir);
        if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return volt__errf(err, errlen, VOLT_ERR_IO, "imdb: folder '%s' not found", path);
    }
    volt_corpus *c;
    if (volt_corpus_create("aclImdb", &c) != VOLT_OK) return volt__errf(err, errlen, VOLT_ERR_NOMEM, "imdb: out of memory");
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
        snprintf(path, sizeof path, "%s/%s", dir, parts[p].sub);
        volt_status st = add_txt_folder(c, path, parts[p].label, err, errlen);
        if (st != VOLT_OK) { volt_corpus_destroy(c); return st; }
    }
    *out = c;
    return VOLT_OK;
}

/* ---- labels ------------------------------------------------------------------------------ */

/* A label field: optional spaces, optional '+', digits, optional spaces; < 2^31 - 1 (so the
 * class count, label + 1, is an int). */
static bool parse_label(const char *s, size_t n, int32_t *out) {
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    if (i < n && s[i] == '+') i++;
    size_t d0 = i;
    int64_t v = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        v = v * 10 + (s[i] - '0');
        if (v >= INT32_MAX) return false;
        i++;
    }
    if (i == d0) return false;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) i++;
    if (i != n) return false;
    *out = (int32_t)v;
    return true;
}

static void quote_snippet(const char *s, size_t n, char *buf, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < cap; i++) buf[k++] = (s[i] == '\n' || s[i] == '\r') ? ' ' : s[i];
    if (n && k < n && k + 4 <= cap) { buf[k++] = '.'; buf[k++] = '.'; buf[k++] = '.'; }
    buf[k] = '\0';
}

/* ---- CSV ---------------------------------------------------------------------------------- */

typedef struct csv_field { size_t start, len; } csv_field;

typedef struct csv_parser {
    char *b;                   /* the file, NUL-terminated; quoted fields are unescaped in place */
    size_t n, pos;
    int64_t line;              /* 1-based line of pos */
    csv_field *f;
    int nf, capf;
} csv_parser;

/* Parse one record starting at p->pos into p->f. Returns 1 on a record, 0 at EOF, <0 on a
 * malformed record with *why set. Fields point into p->b (unescaped in place). */
static int csv_record(csv_parser *p, const char **why) {
    p->nf = 0;
    if (p->pos >= p->n) return 0;
    for (;;) {
        if (p->nf == p->capf) {
            int cap = p->capf ? p->capf * 2 : 8;
            csv_field *f = realloc(p->f, (size_t)cap * sizeof *f);
            if (!f) { *why = "out of memory"; return -2; }
            p->f = f;
            p->capf = cap;
        }
        csv_field *fld = &p->f[p->nf++];
        if (p->pos < p->n && p->b[p->pos] == '"') {
            /* quoted: unescape in place, "" -> " */
            size_t w = ++p->pos;
            fld->start = w;
            for (;;) {
                if (p->pos >= p->n) { *why = "unterminated quoted field"; return -1; }
                char ch = p->b[p->pos];
                if (ch == '"') {
                    if (p->pos + 1 < p->n && p->b[p->pos + 1] == '"') { p->b[w++] = '"'; p->pos += 2; continue; }
                    p->pos++;
                    break;
                }
                if (ch == '\n') p->line++;
                p->b[w++] = ch;
                p->pos++;
            }
            fld->len = w - fld->start;
            if (p->pos < p->n && p->b[p->pos] == '\r' && (p->pos + 1 >= p->n || p->b[p->pos + 1] == '\n')) p->pos++;
            if (p->pos < p->n && p->b[p->pos] != ',' && p->b[p->pos] != '\n') {
                *why = "unexpected character after a closing quote (a quote inside a quoted field must be doubled)";
                return -1;
            }
        } else {
            fld->start = p->pos;
            while (p->pos < p->n && p->b[p->pos] != ',' && p->b[p->pos] != '\n') {
                if (p->b[p->pos] == '"') { *why = "quote inside an unquoted field"; return -1; }
                p->pos++;
            }
            fld->len = p->pos - fld->start;
            if (fld->len && p->b[fld->start + fld->len - 1] == '\r' && (p->pos >= p->n || p->b[p->pos] == '\n'))
                fld->len--;
        }
        if (p->pos >= p->n) return 1;
        if (p->b[p->pos] == '\n') { p->pos++; p->line++; return 1; }
        p->pos++;                              /* ',' */
    }
}

static bool csv_blank_line(const csv_parser *p) {
    size_t i = p->pos;
    if (i < p->n && p->b[i] == '\r') i++;
    return i >= p->n || p->b[i] == '\n';
}

static void csv_skip_line(csv_parser *p) {
    while (p->pos < p->n && p->b[p->pos] != '\n') p->pos++;
    if (p->pos < p->n) { p->pos++; p->line++; }
}

volt_status volt_corpus_load_csv(const char *path, volt_corpus **out, char *err, size_t errlen) {
    if (!out) return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "csv: NULL out");
    *out = NULL;
    if (!path) return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "csv: NULL path");
    csv_parser p = { .line = 1 };
    volt_status st = read_file(path, &p.b, &p.n, err, errlen);
    if (st != VOLT_OK) return st;
    volt_corpus *c = NULL;
    const char *why = NULL;
    char what[4200];
    snprintf(what, sizeof what, "csv '%s'", path);
    if ((st = check_utf8(what, p.b, p.n, true, err, errlen)) != VOLT_OK) goto done;
    if (p.n >= 3 && memcmp(p.b, "\xEF\xBB\xBF", 3) == 0) p.pos = 3;
    while (p.pos < p.n && csv_blank_line(&p)) csv_skip_line(&p);
    int64_t rec_line = p.line;
    int r = csv_record(&p, &why);
    if (r == 0) { st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "csv '%s': empty file (expected a header 'text,label')", path); goto done; }
    if (r < 0) goto malformed;
    int text_col = -1, label_col = -1, ncols = p.nf;
    for (int i = 0; i < p.nf; i++) {
        const char *s = p.b + p.f[i].start;
        size_t n = p.f[i].len;
        while (n && (s[n - 1] == ' ')) n--;
        while (n && *s == ' ') { s++; n--; }
        if (n == 4 && memcmp(s, "text", 4) == 0 && text_col < 0) text_col = i;
        else if (n == 5 && memcmp(s, "label", 5) == 0 && label_col < 0) label_col = i;
    }
    if (text_col < 0 || label_col < 0) {
        st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "csv '%s': line %lld: the header must name a 'text' and a 'label' column",
                     path, (long long)rec_line);
        goto done;
    }
    if (volt_corpus_create(path, &c) != VOLT_OK) { st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "csv '%s': out of memory", path); goto done; }
    for (;;) {
        while (p.pos < p.n && csv_blank_line(&p)) csv_skip_line(&p);
        rec_line = p.line;
        r = csv_record(&p, &why);
        if (r == 0) break;
        if (r < 0) goto malformed;
        if (p.nf != ncols) {
            st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "csv '%s': line %lld: %d fields, the header has %d",
                         path, (long long)rec_line, p.nf, ncols);
            goto done;
        }
        int32_t label;
        const csv_field *lf = &p.f[label_col], *tf = &p.f[text_col];
        if (!parse_label(p.b + lf->start, lf->len, &label)) {
            char snip[40];
            quote_snippet(p.b + lf->start, lf->len, snip, sizeof snip);
            st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "csv '%s': line %lld: label '%s' is not an integer in [0, 2^31 - 1)",
                         path, (long long)rec_line, snip);
            goto done;
        }
        if (volt_corpus_add(c, p.b + tf->start, tf->len, label) != VOLT_OK) {
            st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "csv '%s': out of memory", path);
            goto done;
        }
    }
    st = VOLT_OK;
    goto done;
malformed:
    st = volt__errf(err, errlen, r == -2 ? VOLT_ERR_NOMEM : VOLT_ERR_CORRUPT, "csv '%s': line %lld: %s",
                 path, (long long)rec_line, why);
done:
    free(p.b);
    free(p.f);
    if (st == VOLT_OK) *out = c;
    else volt_corpus_destroy(c);
    return st;
}

/* ---- TSV ---------------------------------------------------------------------------------- */

volt_status volt_corpus_load_tsv(const char *path, volt_corpus **out, char *err, size_t errlen) {
    if (!out) return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "tsv: NULL out");
    *out = NULL;
    if (!path) return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "tsv: NULL path");
    char *b;
    size_t n;
    volt_status st = read_file(path, &b, &n, err, errlen);
    if (st != VOLT_OK) return st;
    char what[4200];
    snprintf(what, sizeof what, "tsv '%s'", path);
    if ((st = check_utf8(what, b, n, true, err, errlen)) != VOLT_OK) { free(b); return st; }
    volt_corpus *c = NULL;
    if (volt_corpus_create(path, &c) != VOLT_OK) { free(b); return volt__errf(err, errlen, VOLT_ERR_NOMEM, "tsv '%s': out of memory", path); }
    size_t pos = (n >= 3 && memcmp(b, "\xEF\xBB\xBF", 3) == 0) ? 3 : 0;
    for (int64_t line = 1; pos < n; line++) {
        char *nl = memchr(b + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - b) : n, next = nl ? end + 1 : n;
        size_t len = end - pos;
        if (len && b[pos + len - 1] == '\r') len--;
        const char *s = b + pos;
        pos = next;
        if (len == 0) continue;
        if (line == 1 && len == 10 && memcmp(s, "text\tlabel", 10) == 0) continue;
        if (memchr(s, '\r', len)) {   /* CR-only line ends would merge rows, the label read from the last */
            st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "tsv '%s': line %lld: a carriage return inside the line (CR-only "
                            "line ends?): lines end in LF or CRLF", path, (long long)line);
            break;
        }
        const char *tab = NULL;
        for (size_t i = len; i-- > 0;) if (s[i] == '\t') { tab = s + i; break; }
        if (!tab) {
            st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "tsv '%s': line %lld: no tab (expected text<TAB>label)", path, (long long)line);
            break;
        }
        int32_t label;
        size_t tlen = (size_t)(tab - s), llen = len - tlen - 1;
        if (!parse_label(tab + 1, llen, &label)) {
            char snip[40];
            quote_snippet(tab + 1, llen, snip, sizeof snip);
            st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "tsv '%s': line %lld: label '%s' is not an integer in [0, 2^31 - 1)",
                         path, (long long)line, snip);
            break;
        }
        if (volt_corpus_add(c, s, tlen, label) != VOLT_OK) {
            st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "tsv '%s': out of memory", path);
            break;
        }
    }
    free(b);
    if (st != VOLT_OK) { volt_corpus_destroy(c); return st; }
    *out = c;
    return VOLT_OK;
}

/* ---- split --------------------------------------------------------------------------------- */

#define SPLIT_KEY_TAG 0x7E57C0DE5B11D5EDull     /* separates split draws from other streams */

static volt_status corpus_subset(const volt_corpus *c, const int64_t *idx, int64_t k, const char *suffix,
                                 volt_corpus **out) {
    *out = NULL;
    size_t nl = strlen(c->name) + strlen(suffix) + 2;
    char *name = malloc(nl);
    if (!name) return VOLT_ERR_NOMEM;
    snprintf(name, nl, "%s/%s", c->name, suffix);
    volt_corpus *s;
    volt_status st = volt_corpus_create(name, &s);
    free(name);
    if (st != VOLT_OK) return st;
    size_t bytes = 0;
    for (int64_t i = 0; i < k; i++) bytes += (size_t)(c->off[idx[i] + 1] - c->off[idx[i]]);
    if ((st = corpus_reserve(s, k, bytes)) != VOLT_OK) { volt_corpus_destroy(s); return st; }
    for (int64_t i = 0; i < k; i++) {
        size_t len;
        const char *t = volt_corpus_text(c, idx[i], &len);
        volt_corpus_add(s, t, len, c->labels[idx[i]]);        /* reserved: cannot fail */
    }
    s->num_classes = c->num_classes;
    *out = s;
    return VOLT_OK;
}

volt_status volt_corpus_split(const volt_corpus *c, int64_t n_train, int64_t n_val, int64_t n_test,
                              uint64_t seed, volt_corpus **train, volt_corpus **val, volt_corpus **test) {
    if (train) *train = NULL;
    if (val) *val = NULL;
    if (test) *test = NULL;
    if (!c || n_train < 0 || n_val < 0 || n_test < 0 || n_train > c->n || n_val > c->n - n_train ||
        n_test > c->n - n_train - n_val)
        return VOLT_ERR_INVALID_ARG;
    int64_t n = c->n;
    int64_t *perm = malloc((size_t)(n ? n : 1) * sizeof *perm);
    if (!perm) return VOLT_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        uint32_t ctr[4] = { (uint32_t)i, (uint32_t)((uint64_t)i >> 32), 0, 0 }, r4[4];
        volt__philox4x32(seed ^ SPLIT_KEY_TAG, ctr, r4);
        uint64_t r = (uint64_t)r4[0] | ((uint64_t)r4[1] << 32);
        int64_t j = (int64_t)(r % ((uint64_t)i + 1));       /* bias < (i+1) / 2^64 */
        int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    volt_corpus *parts[3] = { NULL, NULL, NULL };
    volt_corpus **outs[3] = { train, val, test };
    const int64_t counts[3] = { n_train, n_val, n_test };
    static const char *const suffix[3] = { "train", "val", "test" };
    volt_status st = VOLT_OK;
    int64_t at = 0;
    for (int k = 0; k < 3 && st == VOLT_OK; k++) {
        if (outs[k]) st = corpus_subset(c, perm + at, counts[k], suffix[k], &parts[k]);
        at += counts[k];
    }
    free(perm);
    if (st != VOLT_OK) {
        for (int k = 0; k < 3; k++) volt_corpus_destroy(parts[k]);
        return st;
    }
    for (int k = 0; k < 3; k++) if (outs[k]) *outs[k] = parts[k];
    return VOLT_OK;
}

volt_status volt_corpus_split_frac(const volt_corpus *c, double f_train, double f_val, uint64_t seed,
                                   volt_corpus **train, volt_corpus **val, volt_corpus **test) {
    if (train) *train = NULL;
    if (val) *val = NULL;
    if (test) *test = NULL;
    if (!c || !(f_train >= 0) || !(f_val >= 0) || !(f_train + f_val <= 1.0 + 1e-12)) return VOLT_ERR_INVALID_ARG;
    int64_t n = c->n;
    int64_t nt = (int64_t)llround(f_train * (double)n), nv = (int64_t)llround(f_val * (double)n);
    if (nt > n) nt = n;
    if (nv > n - nt) nv = n - nt;
    return volt_corpus_split(c, nt, nv, n - nt - nv, seed, train, val, test);
}
