/* HTML to text, and the UTF-8 helpers the mail reader shares (text_mail.c).
 *
 * Not an HTML parser: a single left-to-right pass good enough for mail bodies. Tags are
 * '<' + letter, '/', '!' or '?' up to the matching '>' (quotes in attributes respected,
 * falling back to the first '>' when the quotes do not balance); a '<' that starts no tag
 * stays text. Block tags become a space, inline ones nothing, because spam splits words
 * with inline tags ("V<b></b>iagra") and text runs on across block ones ("a</p><p>b"). */
#include <stdlib.h>
#include <string.h>
#include "volt/text.h"
#include "data/text_internal.h"

/* ---- growing buffer ------------------------------------------------------------------------ */

bool volt__tbuf_reserve(volt__tbuf *b, size_t more) {
    if (b->oom) return false;
    if (more > SIZE_MAX / 2 - b->n) { b->oom = true; return false; }
    if (b->n + more + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + more + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return false; }
        b->p = p;
        b->cap = cap;
        b->p[b->n] = '\0';
    }
    return true;
}

void volt__tbuf_put(volt__tbuf *b, const char *s, size_t n) {
    if (!n || !volt__tbuf_reserve(b, n)) return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void volt__tbuf_put_cp(volt__tbuf *b, uint32_t cp) {
    char u[4];
    size_t k;
    if (cp < 0x80) { u[0] = (char)cp; k = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3F)); k = 2; }
    else if (cp < 0x10000) {
        if (cp >= 0xD800 && cp < 0xE000) return;
        u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (char)(0x80 | (cp & 0x3F)); k = 3;
    } else if (cp < 0x110000) {
        u[0] = (char)(0xF0 | cp >> 18); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); k = 4;
    } else return;
    volt__tbuf_put(b, u, k);
}

/* ---- UTF-8 ------------------------------------------------------------------------------------ */

/* Length of the well-formed UTF-8 sequence at s (Unicode table 3-7), 0 if ill-formed. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    if (c < 0xC2 || c > 0xF4) return 0;
    size_t k = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (n < k) return 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c == 0xE0) lo = 0xA0;
    else if (c == 0xED) hi = 0x9F;
    else if (c == 0xF0) lo = 0x90;
    else if (c == 0xF4) hi = 0x8F;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < k; i++) if ((s[i] & 0xC0) != 0x80) return 0;
    return k;
}

size_t volt__utf8_invalid_at(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (u[i] < 0x80) { i++; continue; }
        size_t k = utf8_seq(u + i, n - i);
        if (!k) return i;
        i += k;
    }
    return n;
}

bool volt__utf8_valid(const char *s, size_t n) { return volt__utf8_invalid_at(s, n) == n; }

/* Windows-1252 0x80..0x9F (0 = unassigned); 0xA0..0xFF are Latin-1 = U+00A0..U+00FF. */
static const uint16_t cp1252_hi[32] = {
    0x20AC, 0, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0, 0x017D, 0,
    0, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0, 0x017E, 0x0178,
};

uint32_t volt__cp1252(unsigned char c) {
    if (c < 0x80 || c >= 0xA0) return c;
    return cp1252_hi[c - 0x80];
}

void volt__put_cp1252(volt__tbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) volt__tbuf_putc(b, (char)c);
        else { uint32_t cp = volt__cp1252(c); if (cp) volt__tbuf_put_cp(b, cp); }
    }
}

/* Copy s to b: invalid UTF-8 dropped, ASCII whitespace runs and U+00A0 become one space,
 * the ends trimmed. */
void volt__put_clean(volt__tbuf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    bool space = true;                         /* at start: drop leading whitespace */
    size_t start = b->n;
    if (!volt__tbuf_reserve(b, n)) return;     /* the output is never longer */
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        if (c == 0) { i++; continue; }         /* the output is a C string: no NUL inside */
        bool ws = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
        size_t k = 1;
        if (!ws && c >= 0x80) {
            k = utf8_seq(u + i, n - i);
            if (!k) { i++; continue; }
            ws = k == 2 && c == 0xC2 && u[i + 1] == 0xA0;
        }
        if (ws) { if (!space) volt__tbuf_putc(b, ' '); space = true; }
        else { volt__tbuf_put(b, s + i, k); space = false; }
        i += k;
    }
    if (b->n > start && b->p[b->n - 1] == ' ') b->p[--b->n] = '\0';
}

/* ---- entities ------------------------------------------------------------------------------------ */

/* HTML 4 names of U+00A0..U+00FF, in order. */
static const char *const latin1_names[96] = {
    "nbsp", "iexcl", "cent", "pound", "curren", "yen", "brvbar", "sect", "uml", "copy", "ordf", "laquo",
    "not", "shy", "reg", "macr", "deg", "plusmn", "sup2", "sup3", "acute", "micro", "para", "middot",
    "cedil", "sup1", "ordm", "raquo", "frac14", "frac12", "frac34", "iquest", "Agrave", "Aacute", "Acirc",
    "Atilde", "Auml", "Aring", "AElig", "Ccedil", "Egrave", "Eacute", "Ecirc", "Euml", "Igrave", "Iacute",
    "Icirc", "Iuml", "ETH", "Ntilde", "Ograve", "Oacute", "Ocirc", "Otilde", "Ouml", "times", "Oslash",
    "Ugrave", "Uacute", "Ucirc", "Uuml", "Yacute", "THORN", "szlig", "agrave", "aacute", "acirc", "atilde",
    "auml", "aring", "aelig", "ccedil", "egrave", "eacute", "ecirc", "euml", "igrave", "iacute", "icirc",
    "iuml", "eth", "ntilde", "ograve", "oacute", "ocirc", "otilde", "ouml", "divide", "oslash", "ugrave",
    "uacute", "ucirc", "uuml", "yacute", "thorn", "yuml",
};

static const struct { const char *name; uint32_t cp; } other_entities[] = {
    { "amp", '&' }, { "lt", '<' }, { "gt", '>' }, { "quot", '"' }, { "apos", '\'' },
    { "trade", 0x2122 }, { "hellip", 0x2026 }, { "mdash", 0x2014 }, { "ndash", 0x2013 },
    { "lsquo", 0x2018 }, { "rsquo", 0x2019 }, { "sbquo", 0x201A }, { "ldquo", 0x201C },
    { "rdquo", 0x201D }, { "bdquo", 0x201E }, { "bull", 0x2022 }, { "euro", 0x20AC },
    { "dagger", 0x2020 }, { "Dagger", 0x2021 }, { "permil", 0x2030 }, { "lsaquo", 0x2039 },
    { "rsaquo", 0x203A }, { "OElig", 0x0152 }, { "oelig", 0x0153 }, { "Scaron", 0x0160 },
    { "scaron", 0x0161 }, { "Yuml", 0x0178 }, { "fnof", 0x0192 }, { "circ", 0x02C6 },
    { "tilde", 0x02DC }, { "ensp", 0x2002 }, { "emsp", 0x2003 }, { "thinsp", 0x2009 },
    { "zwnj", 0x200C }, { "zwj", 0x200D }, { "lrm", 0x200E }, { "rlm", 0x200F },
};

/* Legacy entities that HTML accepts without the ';'. */
static const char *const no_semicolon_ok[] = { "amp", "lt", "gt", "quot", "nbsp", "copy", "reg" };

static bool is_alnum(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static uint32_t entity_lookup(const char *name, size_t n) {
    for (size_t i = 0; i < 96; i++)
        if (strlen(latin1_names[i]) == n && memcmp(latin1_names[i], name, n) == 0) return 0xA0 + (uint32_t)i;
    for (size_t i = 0; i < sizeof other_entities / sizeof other_entities[0]; i++)
        if (strlen(other_entities[i].name) == n && memcmp(other_entities[i].name, name, n) == 0)
            return other_entities[i].cp;
    return 0;
}

/* Decode the entity at s[0] == '&'; returns bytes consumed (0: not an entity, emit '&'). */
static size_t decode_entity(const char *s, size_t n, volt__tbuf *b) {
    if (n >= 3 && s[1] == '#') {
        size_t i = 2;
        bool hex = s[2] == 'x' || s[2] == 'X';
        if (hex) i++;
        uint64_t v = 0;
        size_t d0 = i;
        while (i < n && i - d0 < 10) {
            unsigned char c = (unsigned char)s[i];
            int d = c >= '0' && c <= '9' ? c - '0'
                  : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0) break;
            v = v * (hex ? 16 : 10) + (uint64_t)d;
            i++;
        }
        if (i == d0) return 0;
        if (i < n && s[i] == ';') i++;
        if (v >= 0x80 && v < 0xA0) v = volt__cp1252((unsigned char)v);     /* as browsers do */
        if (v == 0xA0) volt__tbuf_putc(b, ' ');
        else if (v && v < 0x110000) volt__tbuf_put_cp(b, (uint32_t)v);
        return i;
    }
    size_t i = 1;
    while (i < n && i < 12 && is_alnum((unsigned char)s[i])) i++;
    size_t len = i - 1;
    if (!len) return 0;
    if (i < n && s[i] == ';') {
        uint32_t cp = entity_lookup(s + 1, len);
        if (!cp) return 0;
        if (cp == 0xA0) volt__tbuf_putc(b, ' ');
        else if (cp != 0xAD) volt__tbuf_put_cp(b, cp);            /* &shy; is invisible */
        return i + 1;
    }
    for (size_t k = 0; k < sizeof no_semicolon_ok / sizeof no_semicolon_ok[0]; k++) {
        size_t m = strlen(no_semicolon_ok[k]);
        if (m == len && memcmp(s + 1, no_semicolon_ok[k], m) == 0) {
            uint32_t cp = entity_lookup(s + 1, m);
            if (cp == 0xA0) volt__tbuf_putc(b, ' ');
            else volt__tbuf_put_cp(b, cp);
            return 1 + m;
        }
    }
    return 0;
}

/* ---- tags ------------------------------------------------------------------------------------------ */

static const char *const block_tags[] = {
    "address", "article", "aside", "blockquote", "body", "br", "caption", "center", "dd", "div", "dl",
    "dt", "fieldset", "footer", "form", "frame", "h1", "h2", "h3", "h4", "h5", "h6", "head", "header",
    "hr", "html", "iframe", "img", "input", "li", "map", "meta", "ol", "option", "p", "pre", "section",
    "select", "table", "tbody", "td", "textarea", "tfoot", "th", "thead", "title", "tr", "ul",
};

static bool is_block(const char *name) {
    for (size_t i = 0; i < sizeof block_tags / sizeof block_tags[0]; i++)
        if (strcmp(block_tags[i], name) == 0) return true;
    return false;
}

static unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* Case-insensitive search for the ASCII needle (lowercase) in s[from..n); n if absent. */
static size_t find_ci(const char *s, size_t n, size_t from, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = from; i + m <= n; i++) {
        size_t k = 0;
        while (k < m && lower((unsigned char)s[i + k]) == (unsigned char)needle[k]) k++;
        if (k == m) return i;
    }
    return n;
}

/* The '>' closing the tag that starts at s[i] == '<'; n if none. Quotes in attributes are
 * respected within a window; past it, or when they do not balance, the first '>' after i
 * ends the tag. *next_gt caches that first '>' (i only grows), which keeps a page of
 * unclosed '<' or quotes linear instead of quadratic. */
static size_t tag_end(const char *s, size_t n, size_t i, size_t *next_gt) {
    if (*next_gt <= i || *next_gt == SIZE_MAX) {
        const char *gt = memchr(s + i + 1, '>', n - i - 1);
        *next_gt = gt ? (size_t)(gt - s) : n;
    }
    if (*next_gt >= n) return n;                       /* no '>' anywhere after i */
    char q = 0;
    size_t lim = n - i > 512 ? i + 512 : n;
    for (size_t j = i + 1; j < lim; j++) {
        char c = s[j];
        if (q) { if (c == q) q = 0; }
        else if ((c == '"' || c == '\'') && (s[j - 1] == '=' || s[j - 1] == ' ')) q = c;
        else if (c == '>') return j;
    }
    return *next_gt;
}

void volt__html_to_text(volt__tbuf *b, const char *s, size_t n) {
    size_t next_gt = SIZE_MAX;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '&') {
            size_t k = decode_entity(s + i, n - i, b);
            if (k) { i += k; continue; }
            volt__tbuf_putc(b, '&');
            i++;
            continue;
        }
        if (c != '<' || i + 1 >= n) { volt__tbuf_putc(b, (char)c); i++; continue; }
        unsigned char d = (unsigned char)s[i + 1];
        if (n - i >= 4 && memcmp(s + i, "<!--", 4) == 0) {
            size_t e = find_ci(s, n, i + 4, "-->");
            i = e >= n ? n : e + 3;
            continue;
        }
        if (!(d == '/' || d == '!' || d == '?' || (lower(d) >= 'a' && lower(d) <= 'z'))) {
            volt__tbuf_putc(b, '<');
            i++;
            continue;
        }
        size_t e = tag_end(s, n, i, &next_gt);
        if (e >= n) { volt__tbuf_putc(b, '<'); i++; continue; }   /* no '>' at all: text */
        char name[16];
        size_t k = 0, j = i + 1 + (d == '/');
        while (j < e && is_alnum((unsigned char)s[j]) && k < sizeof name - 1) name[k++] = (char)lower((unsigned char)s[j++]);
        name[k] = '\0';
        i = e + 1;
        if (d != '/' && (strcmp(name, "script") == 0 || strcmp(name, "style") == 0)) {
            const char *close = name[1] == 'c' ? "</script" : "</style";
            size_t cl = find_ci(s, n, i, close);
            if (cl >= n) { i = n; break; }
            size_t ce = tag_end(s, n, cl, &next_gt);
            i = ce >= n ? n : ce + 1;
            volt__tbuf_putc(b, ' ');
            continue;
        }
        if (is_block(name)) volt__tbuf_putc(b, ' ');
    }
}

volt_status volt_text_html_strip(const char *html, size_t len, char **out, size_t *out_len) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!out || (!html && len)) return VOLT_ERR_INVALID_ARG;
    volt__tbuf raw = { 0 }, clean = { 0 };
    volt__html_to_text(&raw, html, len);
    volt__tbuf_reserve(&clean, raw.n);
    if (!raw.oom) volt__put_clean(&clean, raw.p ? raw.p : "", raw.n);
    free(raw.p);
    if (raw.oom || clean.oom) { free(clean.p); return VOLT_ERR_NOMEM; }
    *out = clean.p;
    if (out_len) *out_len = clean.n;
    return VOLT_OK;
}
