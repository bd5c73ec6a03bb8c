/* Mail bodies (RFC 822 / MIME) and the SpamAssassin corpus loader. See volt/text.h.
 *
 * The reader is lenient the way mail readers are, because a spam corpus is full of broken
 * mail: headers end at the first blank line or at the first line that is neither a header
 * nor a continuation; a multipart without a usable boundary is read as text; a missing
 * closing boundary ends the last part at the end of the body; bad quoted-printable or
 * base64 characters are kept or skipped, never fatal. Headers are never part of the
 * output: they hold Received:/X-Spam-* lines and list names that give the label away. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "volt/text.h"
#include "data/text_internal.h"
#include "core/err.h"

#define MIME_MAX_DEPTH 16

typedef struct mime_hdr {
    char type[64];             /* lowercased "text/plain"; "" when absent or unusable */
    char boundary[1024];       /* multipart boundary, "" if none; as long as a header value may be
                                  (RFC 2046 says 70, mail says otherwise: a cut one never matched,
                                  and the parts' headers became text) */
    char charset[48];          /* lowercased, "" if none */
    char cte[32];              /* lowercased Content-Transfer-Encoding, "" if none */
    bool attachment;           /* Content-Disposition: attachment */
} mime_hdr;

static unsigned char lc(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static bool ieq(const char *a, size_t n, const char *b) {
    if (strlen(b) != n) return false;
    for (size_t i = 0; i < n; i++) if (lc((unsigned char)a[i]) != lc((unsigned char)b[i])) return false;
    return true;
}

static bool ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Copy the token s[0..n) lowercased (and trimmed) into dst[cap]. */
static void copy_lower(char *dst, size_t cap, const char *s, size_t n) {
    while (n && ws(*s)) { s++; n--; }
    while (n && ws(s[n - 1])) n--;
    size_t k = 0;
    for (; k < n && k + 1 < cap; k++) dst[k] = (char)lc((unsigned char)s[k]);
    dst[k] = '\0';
}

/* Content-Type: type/subtype *(; name=value), value a token or a quoted string. */
static void parse_content_type(mime_hdr *h, const char *v, size_t n) {
    size_t i = 0;
    while (i < n && ws(v[i])) i++;
    size_t t0 = i;
    while (i < n && v[i] != ';' && !ws(v[i])) i++;
    copy_lower(h->type, sizeof h->type, v + t0, i - t0);
    if (!strchr(h->type, '/')) h->type[0] = '\0';           /* unusable: use the default */
    while (i < n) {
        while (i < n && v[i] != ';') i++;
        if (i >= n) break;
        i++;
        while (i < n && ws(v[i])) i++;
        size_t k0 = i;
        while (i < n && v[i] != '=' && v[i] != ';' && !ws(v[i])) i++;
        size_t klen = i - k0;
        while (i < n && ws(v[i])) i++;
        if (i >= n || v[i] != '=') continue;
        i++;
        while (i < n && ws(v[i])) i++;
        char val[1024];
        size_t vl = 0;
        if (i < n && v[i] == '"') {
            for (i++; i < n && v[i] != '"'; i++) {
                if (v[i] == '\\' && i + 1 < n) i++;
                if (vl + 1 < sizeof val) val[vl++] = v[i];
            }
            if (i < n) i++;
        } else {
            while (i < n && v[i] != ';' && !ws(v[i])) { if (vl + 1 < sizeof val) val[vl++] = v[i]; i++; }
        }
        val[vl] = '\0';
        if (ieq(v + k0, klen, "boundary") && !h->boundary[0]) snprintf(h->boundary, sizeof h->boundary, "%s", val);
        else if (ieq(v + k0, klen, "charset") && !h->charset[0]) copy_lower(h->charset, sizeof h->charset, val, vl);
    }
}

static void header_done(mime_hdr *h, const char *name, size_t nlen, const char *val, size_t vlen) {
    if (ieq(name, nlen, "content-type") && !h->type[0]) parse_content_type(h, val, vlen);
    else if (ieq(name, nlen, "content-transfer-encoding")) copy_lower(h->cte, sizeof h->cte, val, vlen);
    else if (ieq(name, nlen, "content-disposition")) {
        char d[16];
        copy_lower(d, sizeof d, val, vlen);
        h->attachment = strncmp(d, "attachment", 10) == 0;
    }
}

/* A header line: field-name (printable ASCII but ':') then ':'. Returns the name length. */
static size_t header_name(const char *s, size_t n) {
    size_t i = 0;
    while (i < n && s[i] > 32 && s[i] < 127 && s[i] != ':') i++;
    return (i > 0 && i < n && s[i] == ':') ? i : 0;
}

/* Parse the headers of the entity s[0..n) into h; returns the offset of its body. Header
 * values are unfolded into a bounded buffer (only the MIME fields are kept). */
static size_t parse_headers(const char *s, size_t n, mime_hdr *h) {
    memset(h, 0, sizeof *h);
    size_t i = 0;
    if (n >= 5 && memcmp(s, "From ", 5) == 0) {               /* mbox separator line */
        const char *nl = memchr(s, '\n', n);
        i = nl ? (size_t)(nl - s) + 1 : n;
    }
    const char *name = NULL;
    size_t nlen = 0;
    char val[1024];
    size_t vlen = 0;
    while (i < n) {
        const char *nl = memchr(s + i, '\n', n - i);
        size_t end = nl ? (size_t)(nl - s) : n, next = nl ? end + 1 : n;
        size_t len = end - i;
        if (len && s[end - 1] == '\r') len--;
        const char *line = s + i;
        if (len == 0) { i = next; break; }                     /* blank line: body follows */
        if ((line[0] == ' ' || line[0] == '\t') && name) {     /* continuation */
            size_t k = 0;
            while (k < len && (line[k] == ' ' || line[k] == '\t')) k++;
            if (vlen + 1 < sizeof val) val[vlen++] = ' ';
            for (; k < len && vlen + 1 < sizeof val; k++) val[vlen++] = line[k];
            i = next;
            continue;
        }
        size_t hn = header_name(line, len);
        if (!hn) break;                                        /* not a header: body starts here */
        if (name) header_done(h, name, nlen, val, vlen);
        name = line;
        nlen = hn;
        vlen = 0;
        for (size_t k = hn + 1; k < len && vlen + 1 < sizeof val; k++) val[vlen++] = line[k];
        i = next;
    }
    if (name) header_done(h, name, nlen, val, vlen);
    return i;
}

/* ---- transfer encodings ------------------------------------------------------------------ */

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = lc(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void decode_qp(volt__tbuf *b, const char *s, size_t n) {
    volt__tbuf_reserve(b, n);
    for (size_t i = 0; i < n;) {
        if (s[i] != '=') { volt__tbuf_putc(b, s[i++]); continue; }
        int h1 = i + 1 < n ? hexval((unsigned char)s[i + 1]) : -1, h2 = i + 2 < n ? hexval((unsigned char)s[i + 2]) : -1;
        if (h1 >= 0 && h2 >= 0) { volt__tbuf_putc(b, (char)(h1 * 16 + h2)); i += 3; continue; }
        size_t j = i + 1;                                      /* soft line break "=[ \t]*\r?\n" */
        while (j < n && (s[j] == ' ' || s[j] == '\t')) j++;
        if (j < n && s[j] == '\r') j++;
        if (j >= n || s[j] == '\n') { i = j < n ? j + 1 : n; continue; }
        volt__tbuf_putc(b, '=');                               /* not an escape: keep it */
        i++;
    }
}

static void decode_base64(volt__tbuf *b, const char *s, size_t n) {
    volt__tbuf_reserve(b, n / 4 * 3 + 3);
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int v = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26
              : c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : c == '/' ? 63 : c == '=' ? -2 : -1;
        if (v == -1) continue;                                 /* line breaks, junk */
        if (v == -2) { acc = 0; bits = 0; continue; }          /* padding ends a quantum */
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            volt__tbuf_putc(b, (char)((acc >> bits) & 0xFF));
        }
    }
}

/* ---- walking the MIME tree ---------------------------------------------------------------------- */

typedef struct mail_acc {
    volt__tbuf plain, html;    /* text of the text/plain leaves; of the text/html ones */
} mail_acc;

/* Charsets read as Windows-1252 when the bytes are not UTF-8 (a superset of Latin-1 and
 * of ASCII, and what unlabelled 8-bit mail nearly always is). */
static bool latin_charset(const char *cs) {
    static const char *const names[] = { "", "us-ascii", "ascii", "iso-8859-1", "iso8859-1", "latin1",
        "iso-8859-15", "windows-1252", "cp1252", "default", "default_charset", "unknown-8bit", "x-unknown" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) if (strcmp(cs, names[i]) == 0) return true;
    return false;
}

/* Decoded bytes -> UTF-8 text appended to dst (invalid UTF-8 is dropped later). */
static void put_text(volt__tbuf *dst, const char *s, size_t n, const char *charset) {
    if (latin_charset(charset) && !volt__utf8_valid(s, n)) volt__put_cp1252(dst, s, n);
    else volt__tbuf_put(dst, s, n);
    volt__tbuf_putc(dst, '\n');
}

static bool looks_html(const char *s, size_t n) {
    static const char *const marks[] = { "<html", "<body", "<table", "<font", "<p>", "<br>", "<div" };
    size_t lim = n < 4096 ? n : 4096;
    for (size_t i = 0; i < lim; i++) {
        if (s[i] != '<') continue;
        for (size_t k = 0; k < sizeof marks / sizeof marks[0]; k++) {
            size_t m = strlen(marks[k]), j = 0;
            while (j < m && i + j < n && lc((unsigned char)s[i + j]) == (unsigned char)marks[k][j]) j++;
            if (j == m) return true;
        }
    }
    return false;
}

static void walk_entity(mail_acc *acc, const char *s, size_t n, const char *default_type, int depth);

static void walk_leaf(mail_acc *acc, const mime_hdr *h, const char *type, const char *body, size_t n) {
    bool html = strcmp(type, "text/html") == 0 || strcmp(type, "text/enriched") == 0 ||
                strcmp(type, "text/richtext") == 0;
    if (strncmp(type, "text/", 5) != 0 || strcmp(type, "text/rfc822-headers") == 0) return;
    volt__tbuf dec = { 0 };
    const char *data = body;
    size_t len = n;
    if (strcmp(h->cte, "quoted-printable") == 0) { decode_qp(&dec, body, n); data = dec.p; len = dec.n; }
    else if (strcmp(h->cte, "base64") == 0) { decode_base64(&dec, body, n); data = dec.p; len = dec.n; }
    if (!data) { data = ""; len = 0; }
    if (!html && looks_html(data, len)) html = strcmp(type, "text/plain") == 0;   /* HTML sent as text */
    if (html) {
        volt__tbuf txt = { 0 }, conv = { 0 };
        const char *src = data;
        size_t sl = len;
        if (latin_charset(h->charset) && !volt__utf8_valid(data, len)) {
            volt__put_cp1252(&conv, data, len);
            src = conv.p ? conv.p : "";
            sl = conv.n;
        }
        volt__html_to_text(&txt, src, sl);
        /* HTML sent as text/plain still counts as plain: it is what a reader would see. */
        volt__tbuf *dst = strcmp(type, "text/plain") == 0 ? &acc->plain : &acc->html;
        volt__tbuf_put(dst, txt.p ? txt.p : "", txt.n);
        volt__tbuf_putc(dst, '\n');
        if (txt.oom || conv.oom) dst->oom = true;
        free(txt.p);
        free(conv.p);
    } else {
        put_text(&acc->plain, data, len, h->charset);
    }
    if (dec.oom) acc->plain.oom = true;
    free(dec.p);
}

/* Is s[i..) (at a line start) the delimiter "--boundary" (+ "--" when closing)? */
static int delimiter(const char *s, size_t n, size_t i, const char *bd, size_t bl) {
    if (n - i < bl + 2 || s[i] != '-' || s[i + 1] != '-' || memcmp(s + i + 2, bd, bl) != 0) return 0;
    size_t j = i + 2 + bl;
    int kind = 1;
    if (n - j >= 2 && s[j] == '-' && s[j + 1] == '-') { kind = 2; j += 2; }
    while (j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r')) j++;
    return (j >= n || s[j] == '\n') ? kind : 0;
}

static void walk_multipart(mail_acc *acc, const mime_hdr *h, const char *s, size_t n, int depth) {
    const char *bd = h->boundary;
    size_t bl = strlen(bd);
    const char *part_default = strcmp(h->type, "multipart/digest") == 0 ? "message/rfc822" : "text/plain";
    size_t part_start = 0;
    bool in_part = false;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(s + i, '\n', n - i);
        size_t next = nl ? (size_t)(nl - s) + 1 : n;
        int kind = delimiter(s, n, i, bd, bl);
        if (kind) {
            if (in_part) {
                size_t end = i;
                if (end > part_start && s[end - 1] == '\n') end--;
                if (end > part_start && s[end - 1] == '\r') end--;
                walk_entity(acc, s + part_start, end - part_start, part_default, depth + 1);
            }
            if (kind == 2) return;                              /* epilogue ignored */
            in_part = true;
            part_start = next;
        }
        i = next;
    }
    if (in_part) walk_entity(acc, s + part_start, n - part_start, part_default, depth + 1);
    else {                                                       /* boundary never seen: text */
        mime_hdr t = *h;
        walk_leaf(acc, &t, "text/plain", s, n);
    }
}

static void walk_entity(mail_acc *acc, const char *s, size_t n, const char *default_type, int depth) {
    if (depth > MIME_MAX_DEPTH) return;
    mime_hdr h;
    size_t body = parse_headers(s, n, &h);
    const char *b = s + body;
    size_t bn = n - body;
    const char *type = h.type[0] ? h.type : default_type;
    if (depth > 0 && h.attachment) return;
    if (strncmp(type, "multipart/", 10) == 0) {
        if (h.boundary[0]) walk_multipart(acc, &h, b, bn, depth);
        else walk_leaf(acc, &h, "text/plain", b, bn);
    } else if (strcmp(type, "message/rfc822") == 0) {
        if (strcmp(h.cte, "base64") == 0 || strcmp(h.cte, "quoted-printable") == 0) {
            volt__tbuf dec = { 0 };
            if (h.cte[0] == 'b') decode_base64(&dec, b, bn); else decode_qp(&dec, b, bn);
            if (dec.p) walk_entity(acc, dec.p, dec.n, "text/plain", depth + 1);
            free(dec.p);
        } else {
            walk_entity(acc, b, bn, "text/plain", depth + 1);
        }
    } else {
        walk_leaf(acc, &h, type, b, bn);
    }
}

static bool has_text(const volt__tbuf *b) {
    for (size_t i = 0; i < b->n; i++) if (!ws(b->p[i])) return true;
    return false;
}

volt_status volt_text_mail_body(const char *msg, size_t len, char **out, size_t *out_len) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!out || (!msg && len)) return VOLT_ERR_INVALID_ARG;
    mail_acc acc = { { 0 }, { 0 } };
    walk_entity(&acc, msg ? msg : "", len, "text/plain", 0);
    const volt__tbuf *src = has_text(&acc.plain) ? &acc.plain : &acc.html;
    volt__tbuf res = { 0 };
    volt__tbuf_reserve(&res, src->n);
    if (src->p) volt__put_clean(&res, src->p, src->n);
    bool oom = acc.plain.oom || acc.html.oom || res.oom;
    free(acc.plain.p);
    free(acc.html.p);
    if (oom) { free(res.p); return VOLT_ERR_NOMEM; }
    *out = res.p;
    if (out_len) *out_len = res.n;
    return VOLT_OK;
}

/* ---- the SpamAssassin corpus -------------------------------------------------------------------- */

typedef struct sa_msg {
    char *path;
    int32_t label;
    char *raw, *body;          /* the file; its body text */
    size_t raw_n, body_n;
    int read_errno;            /* != 0: the file could not be read */
    volt_status st;
} sa_msg;

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool str_push(char ***v, size_t *n, size_t *cap, const char *s) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        char **nv = realloc(*v, c * sizeof *nv);
        if (!nv) return false;
        *v = nv;
        *cap = c;
    }
    if (!((*v)[*n] = strdup(s))) return false;
    (*n)++;
    return true;
}

static void str_free(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

static bool has_ci(const char *s, const char *needle) {
    size_t n = strlen(s), m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++) if (ieq(s + i, m, needle)) return true;
    return false;
}

static void read_whole(sa_msg *m) {
    /* regular files only: a FIFO or a device would block or never end (opened without
     * blocking, checked on the open file) */
    int fd = open(m->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { m->read_errno = errno ? errno : EIO; return; }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        m->read_errno = S_ISDIR(sb.st_mode) ? EISDIR : EINVAL;
        close(fd);
        return;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) { m->read_errno = errno ? errno : EIO; close(fd); return; }
    size_t cap = sb.st_size > 0 ? (size_t)sb.st_size + 2 : 16384, n = 0;
    char *b = malloc(cap);
    while (b) {
        if (cap - n < 2) {
            char *nb = realloc(b, cap * 2);
            if (!nb) { free(b); b = NULL; break; }
            b = nb;
            cap *= 2;
        }
        size_t r = fread(b + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    if (!b) m->st = VOLT_ERR_NOMEM;
    else if (ferror(f)) { m->read_errno = errno ? errno : EIO; free(b); b = NULL; }
    fclose(f);
    m->raw = b;
    m->raw_n = n;
}

volt_status volt_corpus_load_spam_assassin(const char *dir, volt_corpus **out, char *err, size_t errlen) {
    if (!out) return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "spam-assassin: NULL out");
    *out = NULL;
    if (!dir) return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "spam-assassin: NULL folder");
    DIR *d = opendir(dir);
    if (!d) return volt__errf(err, errlen, VOLT_ERR_IO, "spam-assassin: cannot open folder '%s': %s (run scripts/fetch_spam.sh)",
                           dir, strerror(errno));
    char **groups = NULL;
    size_t ng = 0, capg = 0;
    volt_status st = VOLT_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        bool spam = strncmp(e->d_name, "spam", 4) == 0 || strncmp(e->d_name, "SPAM", 4) == 0;
        if (!spam && !has_ci(e->d_name, "ham")) continue;
        if (!str_push(&groups, &ng, &capg, e->d_name)) { st = VOLT_ERR_NOMEM; break; }
    }
    closedir(d);
    if (st != VOLT_OK) { str_free(groups, ng); return volt__errf(err, errlen, st, "spam-assassin: out of memory"); }
    if (ng) qsort(groups, ng, sizeof *groups, cmp_cstr);

    sa_msg *msgs = NULL;
    size_t nm = 0, capm = 0;
    size_t ngroups_found = 0;
    for (size_t g = 0; g < ng && st == VOLT_OK; g++) {
        size_t gl = strlen(dir) + strlen(groups[g]) + 2;
        char *gpath = malloc(gl);
        if (!gpath) { st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "spam-assassin: out of memory"); break; }
        snprintf(gpath, gl, "%s/%s", dir, groups[g]);
        struct stat sb;
        if (stat(gpath, &sb) != 0 || !S_ISDIR(sb.st_mode)) { free(gpath); continue; }
        DIR *gd = opendir(gpath);
        if (!gd) {
            st = volt__errf(err, errlen, VOLT_ERR_IO, "spam-assassin: cannot open folder '%s': %s", gpath, strerror(errno));
            free(gpath);
            break;
        }
        ngroups_found++;
        char **files = NULL;
        size_t nf = 0, capf = 0;
        while ((e = readdir(gd))) {
            size_t l = strlen(e->d_name);
            if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
            if (l >= 5 && strcmp(e->d_name + l - 5, ".json") == 0) continue;
            if (!str_push(&files, &nf, &capf, e->d_name)) { st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "spam-assassin: out of memory"); break; }
        }
        closedir(gd);
        if (nf) qsort(files, nf, sizeof *files, cmp_cstr);
        int32_t label = (strncmp(groups[g], "spam", 4) == 0 || strncmp(groups[g], "SPAM", 4) == 0) ? 1 : 0;
        for (size_t k = 0; k < nf && st == VOLT_OK; k++) {
            if (nm == capm) {
                size_t c = capm ? capm * 2 : 1024;
                sa_msg *nmv = realloc(msgs, c * sizeof *nmv);
                if (!nmv) { st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "spam-assassin: out of memory"); break; }
                msgs = nmv;
                capm = c;
            }
            size_t pl = gl + strlen(files[k]) + 1;
            sa_msg *m = &msgs[nm];
            memset(m, 0, sizeof *m);
            if (!(m->path = malloc(pl))) { st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "spam-assassin: out of memory"); break; }
            snprintf(m->path, pl, "%s/%s", gpath, files[k]);
            m->label = label;
            nm++;
        }
        str_free(files, nf);
        free(gpath);
    }
    str_free(groups, ng);
    if (st == VOLT_OK && ngroups_found == 0)
        st = volt__errf(err, errlen, VOLT_ERR_IO, "spam-assassin: no ham/spam group folders in '%s' (run scripts/fetch_spam.sh)", dir);

    /* Read and extract in parallel (the files are independent); add in order. */
    if (st == VOLT_OK) {
        #pragma omp parallel for schedule(dynamic, 16)
        for (int64_t i = 0; i < (int64_t)nm; i++) {
            sa_msg *m = &msgs[i];
            read_whole(m);
            if (m->raw) {
                m->st = volt_text_mail_body(m->raw, m->raw_n, &m->body, &m->body_n);
                free(m->raw);
                m->raw = NULL;
            }
        }
    }
    volt_corpus *c = NULL;
    if (st == VOLT_OK && volt_corpus_create("spam-assassin", &c) != VOLT_OK)
        st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "spam-assassin: out of memory");
    for (size_t i = 0; i < nm && st == VOLT_OK; i++) {
        sa_msg *m = &msgs[i];
        if (m->read_errno) st = volt__errf(err, errlen, VOLT_ERR_IO, "spam-assassin: cannot read '%s': %s", m->path, strerror(m->read_errno));
        else if (m->st != VOLT_OK) st = volt__errf(err, errlen, m->st, "spam-assassin: '%s': out of memory", m->path);
        else if (volt_corpus_add(c, m->body, m->body_n, m->label) != VOLT_OK)
            st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "spam-assassin: out of memory");
    }
    for (size_t i = 0; i < nm; i++) { free(msgs[i].path); free(msgs[i].body); free(msgs[i].raw); }
    free(msgs);
    if (st != VOLT_OK) { volt_corpus_destroy(c); return st; }
    *out = c;
    return VOLT_OK;
}
