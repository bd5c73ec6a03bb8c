/* Text corpora (IMDB folder, CSV, TSV, SpamAssassin), the seeded split, mail/HTML body
 * extraction, tokenized datasets and their cache (hit, identical bytes, corrupt files). */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include "volt/text.h"
#include "vtest.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static char g_root[1024];

static const char *tpath(const char *rel) {
    static char buf[4][1200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_root, rel);
    return buf[k];
}

static void write_bytes(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

static void write_str(const char *path, const char *s) { write_bytes(path, s, strlen(s)); }

static void rm_rf(const char *path) {
    DIR *d = opendir(path);
    if (!d) { unlink(path); return; }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char sub[2048];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        rm_rf(sub);
    }
    closedir(d);
    rmdir(path);
}

static bool text_is(const volt_corpus *c, int64_t i, const char *want) {
    size_t len;
    const char *t = volt_corpus_text(c, i, &len);
    return t && len == strlen(want) && memcmp(t, want, len) == 0;
}

static char *body_of(const char *msg) {
    char *out = NULL;
    size_t n = 0;
    volt_status st = volt_text_mail_body(msg, strlen(msg), &out, &n);
    CHECK(st == VOLT_OK && out && strlen(out) == n, "mail_body: %s", volt_status_str(st));
    return out;
}

#define CHECK_BODY(msg, want) do { char *b__ = body_of(msg); \
    CHECK(b__ && strcmp(b__, want) == 0, "body '%s', expected '%s'", b__ ? b__ : "(null)", want); free(b__); } while (0)

/* ---- IMDB ---------------------------------------------------------------------------------- */

static void test_imdb(void) {
    rm_rf(tpath("aclImdb"));
    const char *dirs[] = { "aclImdb", "aclImdb/train", "aclImdb/test", "aclImdb/train/pos", "aclImdb/train/neg",
                           "aclImdb/test/pos", "aclImdb/test/neg", "aclImdb/train/unsup" };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) mkdir(tpath(dirs[i]), 0755);
    write_str(tpath("aclImdb/train/pos/2_8.txt"), "Loved it.");
    write_str(tpath("aclImdb/train/pos/10_9.txt"), "A great movie<br /><br />really.");
    write_str(tpath("aclImdb/train/neg/1_1.txt"), "Awful.");
    write_str(tpath("aclImdb/train/neg/notes.md"), "not a review");
    write_str(tpath("aclImdb/train/unsup/0_0.txt"), "unlabelled");
    write_str(tpath("aclImdb/test/pos/5_10.txt"), "Wonderful");
    write_str(tpath("aclImdb/test/neg/4_3.txt"), "");
    write_str(tpath("aclImdb/test/neg/3_2.txt"), "Boring\nand long");
    char err[512] = "";
    volt_corpus *c = NULL;
    volt_status st = volt_corpus_load_imdb(tpath("aclImdb"), &c, err, sizeof err);
    CHECK(st == VOLT_OK, "load_imdb: %s %s", volt_status_str(st), err);
    if (st != VOLT_OK) return;
    CHECK(volt_corpus_len(c) == 6, "imdb len %lld", (long long)volt_corpus_len(c));
    /* train/pos, train/neg, test/pos, test/neg; names in byte order */
    const char *want[6] = { "A great movie<br /><br />really.", "Loved it.", "Awful.", "Wonderful", "Boring\nand long", "" };
    const int32_t labels[6] = { 1, 1, 0, 1, 0, 0 };
    for (int i = 0; i < 6; i++) {
        CHECK(text_is(c, i, want[i]), "imdb text %d = '%s'", i, volt_corpus_text(c, i, NULL));
        CHECK(volt_corpus_label(c, i) == labels[i], "imdb label %d", i);
    }
    CHECK(volt_corpus_num_classes(c) == 2 && volt_corpus_label_count(c, 1) == 3, "imdb classes");
    CHECK(volt_corpus_text(c, 6, NULL) == NULL && volt_corpus_label(c, -1) == -1, "out of range");
    CHECK(strcmp(volt_corpus_name(c), "aclImdb") == 0, "name %s", volt_corpus_name(c));
    volt_corpus_destroy(c);

    rename(tpath("aclImdb/test/neg"), tpath("aclImdb/test/neg_gone"));
    c = (volt_corpus *)1;
    st = volt_corpus_load_imdb(tpath("aclImdb"), &c, err, sizeof err);
    CHECK(st == VOLT_ERR_IO && c == NULL && strstr(err, "test/neg"), "missing subfolder: %s '%s'", volt_status_str(st), err);
    st = volt_corpus_load_imdb(tpath("no_such_imdb"), &c, err, sizeof err);
    CHECK(st == VOLT_ERR_IO && strstr(err, "no_such_imdb"), "missing folder: '%s'", err);

    /* Many files, read on several threads: still in name order, and an error names the first
     * bad file in that order (two directories named like reviews, the later one first in
     * most threads' reach) */
    rename(tpath("aclImdb/test/neg_gone"), tpath("aclImdb/test/neg"));
    char name[64], body[32];
    for (int i = 0; i < 700; i++) {
        snprintf(name, sizeof name, "aclImdb/train/neg/%d_2.txt", 1000 + i);
        snprintf(body, sizeof body, "review %d", 1000 + i);
        write_str(tpath(name), body);
    }
    st = volt_corpus_load_imdb(tpath("aclImdb"), &c, err, sizeof err);
    CHECK(st == VOLT_OK && volt_corpus_len(c) == 706, "700 more: %s %s", volt_status_str(st), err);
    if (st == VOLT_OK) {
        bool in_order = true;
        for (int i = 0; i < 700 && in_order; i++) {   /* after train/pos's two: 1000_2 .. 1699_2, then 1_1 */
            snprintf(body, sizeof body, "review %d", 1000 + i);
            in_order = text_is(c, 2 + i, body) && volt_corpus_label(c, 2 + i) == 0;
        }
        CHECK(in_order && text_is(c, 702, "Awful."), "700 files in name order");
        volt_corpus_destroy(c);
    }
    remove(tpath("aclImdb/train/neg/1650_2.txt"));
    mkdir(tpath("aclImdb/train/neg/1650_2.txt"), 0755);
    remove(tpath("aclImdb/train/neg/1090_2.txt"));
    mkdir(tpath("aclImdb/train/neg/1090_2.txt"), 0755);
    c = (volt_corpus *)1;
    st = volt_corpus_load_imdb(tpath("aclImdb"), &c, err, sizeof err);
    CHECK(st == VOLT_ERR_IO && c == NULL && strstr(err, "1090_2.txt") && strstr(err, "directory") && !strstr(err, "1650"),
          "first bad file in name order: %s '%s'", volt_status_str(st), err);
    remove(tpath("aclImdb/train/neg/1650_2.txt"));
    remove(tpath("aclImdb/train/neg/1090_2.txt"));

    /* A review that is not UTF-8 (a Latin-1 "Caf\xe9") is refused naming the file and byte,
     * not passed on for the tokenizer to drop its bytes without a word */
    write_str(tpath("aclImdb/test/pos/7_8.txt"), "Caf\xe9 society, \xc3\xa9 fine");
    c = (volt_corpus *)1;
    st = volt_corpus_load_imdb(tpath("aclImdb"), &c, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && c == NULL && strstr(err, "test/pos/7_8.txt") && strstr(err, "byte 3 (0xe9)") &&
          strstr(err, "UTF-8"), "imdb review not UTF-8: %s '%s'", volt_status_str(st), err);
    write_str(tpath("aclImdb/test/pos/7_8.txt"), "Caf\xc3\xa9 society");
    st = volt_corpus_load_imdb(tpath("aclImdb"), &c, err, sizeof err);
    CHECK(st == VOLT_OK, "imdb review in UTF-8: %s '%s'", volt_status_str(st), err);
    volt_corpus_destroy(c);
}

/* ---- CSV / TSV ------------------------------------------------------------------------------ */

static void test_csv(void) {
    const char *csv =
        "\xEF\xBB\xBFtext,label\r\n"
        "plain text,0\r\n"
        "\"with, a comma\",1\n"
        "\n"
        "\"two\nlines\",2\n"
        "\"she said \"\"hi\"\"\",0\n"
        "\"\",1\n"
        "\"crlf\r\ninside\", 3 \n"
        "last,1";
    write_str(tpath("a.csv"), csv);
    char err[512] = "";
    volt_corpus *c = NULL;
    volt_status st = volt_corpus_load_csv(tpath("a.csv"), &c, err, sizeof err);
    CHECK(st == VOLT_OK, "load_csv: %s %s", volt_status_str(st), err);
    if (st == VOLT_OK) {
        const char *want[] = { "plain text", "with, a comma", "two\nlines", "she said \"hi\"", "", "crlf\r\ninside", "last" };
        const int32_t labels[] = { 0, 1, 2, 0, 1, 3, 1 };
        CHECK(volt_corpus_len(c) == 7, "csv len %lld", (long long)volt_corpus_len(c));
        for (int i = 0; i < 7 && i < volt_corpus_len(c); i++) {
            CHECK(text_is(c, i, want[i]), "csv text %d = '%s'", i, volt_corpus_text(c, i, NULL));
            CHECK(volt_corpus_label(c, i) == labels[i], "csv label %d = %d", i, volt_corpus_label(c, i));
        }
        CHECK(volt_corpus_num_classes(c) == 4, "csv classes %d", volt_corpus_num_classes(c));
        volt_corpus_destroy(c);
    }
    /* columns in another order, plus an extra column */
    write_str(tpath("b.csv"), "id,label,text\n1,1,\"x,y\"\n2,0,z\n");
    st = volt_corpus_load_csv(tpath("b.csv"), &c, err, sizeof err);
    CHECK(st == VOLT_OK && volt_corpus_len(c) == 2 && text_is(c, 0, "x,y") && volt_corpus_label(c, 0) == 1 &&
          text_is(c, 1, "z") && volt_corpus_label(c, 1) == 0, "reordered columns: %s", err);
    volt_corpus_destroy(c);

    static const struct { const char *data; const char *needle; } bad[] = {
        { "text,label\nok,1\ntoo,many,fields\n", "line 3" },
        { "text,label\nok,1\n\"a\nb\",1\nnolabel\n", "line 5" },
        { "text,label\nok,1\n\"never closed,1\nmore,0\n", "line 3: unterminated" },
        { "text,label\nbad \"quote\",1\n", "line 2: quote inside" },
        { "text,label\n\"x\"y,1\n", "line 2: unexpected character" },
        { "text,label\nx,abc\n", "line 2: label 'abc'" },
        { "text,label\nx,-1\n", "line 2: label '-1'" },
        { "text,label\nx,99999999999\n", "line 2: label" },
        { "text,klass\nx,1\n", "line 1: the header" },
        { "", "empty file" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_str(tpath("bad.csv"), bad[i].data);
        err[0] = '\0';
        c = (volt_corpus *)1;
        st = volt_corpus_load_csv(tpath("bad.csv"), &c, err, sizeof err);
        CHECK(st == VOLT_ERR_CORRUPT && c == NULL && strstr(err, "bad.csv") && strstr(err, bad[i].needle),
              "bad csv %zu: %s '%s' (want '%s')", i, volt_status_str(st), err, bad[i].needle);
    }
    st = volt_corpus_load_csv(tpath("missing.csv"), &c, err, sizeof err);
    CHECK(st == VOLT_ERR_IO && strstr(err, "missing.csv"), "missing csv: '%s'", err);

    write_str(tpath("a.tsv"), "text\tlabel\nhello world\t1\r\n\nwith\ttab\t0\n\"quotes\" stay\t2");
    st = volt_corpus_load_tsv(tpath("a.tsv"), &c, err, sizeof err);
    CHECK(st == VOLT_OK, "load_tsv: %s", err);
    if (st == VOLT_OK) {
        CHECK(volt_corpus_len(c) == 3 && text_is(c, 0, "hello world") && volt_corpus_label(c, 0) == 1 &&
              text_is(c, 1, "with\ttab") && volt_corpus_label(c, 1) == 0 && text_is(c, 2, "\"quotes\" stay") &&
              volt_corpus_label(c, 2) == 2, "tsv contents");
        volt_corpus_destroy(c);
    }
    /* CR-only line ends: one line to the reader, whose label came from the last tab (merged rows) */
    write_str(tpath("bad.tsv"), "a\t1\rb\t0\r");
    st = volt_corpus_load_tsv(tpath("bad.tsv"), &c, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "bad.tsv") && strstr(err, "line 1: a carriage return inside the line"),
          "tsv CR line ends: '%s'", err);
    write_str(tpath("bad.tsv"), "a\t1\nb\t0\nno tab here\n");
    st = volt_corpus_load_tsv(tpath("bad.tsv"), &c, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "bad.tsv") && strstr(err, "line 3"), "bad tsv: '%s'", err);
    write_str(tpath("bad.tsv"), "a\t1\nb\tx\n");
    st = volt_corpus_load_tsv(tpath("bad.tsv"), &c, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "line 2: label 'x'"), "bad tsv label: '%s'", err);
    write_str(tpath("bad.tsv"), "a\t1\nna\xefve\t0\n");
    st = volt_corpus_load_tsv(tpath("bad.tsv"), &c, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "bad.tsv") && strstr(err, "line 2: byte 6 (0xef) is not UTF-8"),
          "tsv not UTF-8: '%s'", err);
    write_str(tpath("bad.csv"), "text,label\n\"ok\",1\n\"multi\nline caf\xe9\",0\n");
    st = volt_corpus_load_csv(tpath("bad.csv"), &c, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "bad.csv") && strstr(err, "line 4: byte") && strstr(err, "(0xe9)"),
          "csv not UTF-8: '%s'", err);
}

/* ---- split ------------------------------------------------------------------------------------ */

static void test_split(void) {
    volt_corpus *c;
    CHECK_OK(volt_corpus_create("toy", &c));
    char t[32];
    for (int i = 0; i < 100; i++) {
        snprintf(t, sizeof t, "t%d", i);
        CHECK_OK(volt_corpus_add(c, t, strlen(t), i % 3));
    }
    CHECK(volt_corpus_add(c, "x", 1, -1) == VOLT_ERR_INVALID_ARG, "negative label refused");
    volt_corpus *p[2][3];
    CHECK_OK(volt_corpus_split(c, 70, 10, 20, 42, &p[0][0], &p[0][1], &p[0][2]));
    CHECK_OK(volt_corpus_split(c, 70, 10, 20, 42, &p[1][0], &p[1][1], &p[1][2]));
    CHECK(volt_corpus_len(p[0][0]) == 70 && volt_corpus_len(p[0][1]) == 10 && volt_corpus_len(p[0][2]) == 20, "split sizes");
    CHECK(strcmp(volt_corpus_name(p[0][1]), "toy/val") == 0, "split name %s", volt_corpus_name(p[0][1]));
    int seen[100] = { 0 }, same = 1, identity = 1, label_ok = 1;
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < volt_corpus_len(p[0][k]); i++) {
            const char *a = volt_corpus_text(p[0][k], i, NULL), *b = volt_corpus_text(p[1][k], i, NULL);
            int v = atoi(a + 1);
            seen[v]++;
            same &= strcmp(a, b) == 0;
            label_ok &= volt_corpus_label(p[0][k], i) == v % 3;
            if (k == 0) identity &= v == i;
        }
    int complete = 1;
    for (int i = 0; i < 100; i++) complete &= seen[i] == 1;
    CHECK(complete, "split parts are disjoint and cover the corpus");
    CHECK(same, "same seed, same split");
    CHECK(!identity, "the split is shuffled");
    CHECK(label_ok, "labels travel with their texts");
    volt_corpus *o;
    CHECK_OK(volt_corpus_split(c, 70, 10, 20, 43, &o, NULL, NULL));
    int differ = 0;
    for (int64_t i = 0; i < 70; i++) differ |= strcmp(volt_corpus_text(o, i, NULL), volt_corpus_text(p[0][0], i, NULL)) != 0;
    CHECK(differ, "another seed, another split");
    volt_corpus_destroy(o);
    for (int r = 0; r < 2; r++) for (int k = 0; k < 3; k++) volt_corpus_destroy(p[r][k]);
    /* a tiny part keeps the parent's class count */
    CHECK_OK(volt_corpus_split(c, 1, 0, 0, 1, &o, NULL, NULL));
    CHECK(volt_corpus_num_classes(o) == 3, "split num_classes %d", volt_corpus_num_classes(o));
    volt_corpus_destroy(o);
    volt_corpus *a, *b, *d;
    CHECK_OK(volt_corpus_split_frac(c, 0.7, 0.1, 42, &a, &b, &d));
    CHECK(volt_corpus_len(a) == 70 && volt_corpus_len(b) == 10 && volt_corpus_len(d) == 20, "frac sizes");
    CHECK_OK(volt_corpus_split(c, 70, 10, 20, 42, &o, NULL, NULL));
    int eq = 1;
    for (int64_t i = 0; i < 70; i++) eq &= strcmp(volt_corpus_text(a, i, NULL), volt_corpus_text(o, i, NULL)) == 0;
    CHECK(eq, "split_frac(0.7, 0.1) == split(70, 10, 20)");
    volt_corpus_destroy(o);
    volt_corpus_destroy(a); volt_corpus_destroy(b); volt_corpus_destroy(d);
    a = (volt_corpus *)1;
    CHECK(volt_corpus_split(c, 90, 10, 1, 0, &a, NULL, NULL) == VOLT_ERR_INVALID_ARG && a == NULL, "too many");
    CHECK(volt_corpus_split_frac(c, 0.8, 0.3, 0, &a, NULL, NULL) == VOLT_ERR_INVALID_ARG, "fractions > 1");
    volt_corpus_destroy(c);
}

/* ---- mail and HTML -------------------------------------------------------------------------- */

static bool utf8_ok(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = u[i] < 0x80 ? 1 : (u[i] & 0xE0) == 0xC0 ? 2 : (u[i] & 0xF0) == 0xE0 ? 3 : (u[i] & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n || (k == 2 && u[i] < 0xC2)) return false;
        for (size_t j = 1; j < k; j++) if ((u[i + j] & 0xC0) != 0x80) return false;
        i += k;
    }
    return true;
}

/* Every prefix and a few thousand byte-mutated copies of a MIME message: never an error,
 * never a crash (run under ASan/UBSan), always valid UTF-8 without runs of whitespace. */
static void test_mail_fuzz(void) {
    const char *msg =
        "From x  Mon\nSubject: f\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\n"
        "Content-Type: text/html; charset=windows-1252\nContent-Transfer-Encoding: quoted-printable\n\n"
        "<p>caf=E9 &amp; &#x263A; <b>x</b><!-- c --><script>y</script>=\n</p>\n--B\n"
        "Content-Type: text/plain\nContent-Transfer-Encoding: base64\n\naGVsbG8gd29ybGQ=\n--B\n"
        "Content-Type: message/rfc822\n\nSubject: in\nContent-Type: multipart/alternative; boundary=C\n\n"
        "--C\n\ninner\n--C--\n--B--\n";
    size_t n = strlen(msg);
    char buf[1024];
    int bad = 0;
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    for (size_t iter = 0; iter < n + 3000; iter++) {
        size_t len = iter <= n ? iter : n;
        memcpy(buf, msg, len);
        if (iter > n)
            for (int k = 0; k < 1 + (int)(iter % 6); k++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                buf[(rng >> 33) % len] = (char)(rng >> 13);
            }
        char *out = NULL;
        size_t on = 0;
        volt_status st = volt_text_mail_body(buf, len, &out, &on);
        if (st != VOLT_OK || !out || strlen(out) > on || !utf8_ok(out, on) || strstr(out, "  ") ||
            (on && (out[0] == ' ' || out[on - 1] == ' ')))
            bad++;
        free(out);
        st = volt_text_html_strip(buf, len, &out, &on);
        if (st != VOLT_OK || !out || !utf8_ok(out, on)) bad++;
        free(out);
    }
    CHECK(bad == 0, "%d fuzzed mail bodies misbehaved", bad);
    /* adversarial HTML (unclosed tags, unbalanced quotes) stays linear: 2 MB in well under
     * a second, where a quadratic scan would take hours */
    size_t big = (size_t)2 << 20;
    char *h = malloc(big);
    for (size_t i = 0; i < big; i++) h[i] = "<a x=\"<b"[i % 8];
    char *out = NULL;
    CHECK_OK(volt_text_html_strip(h, big, &out, NULL));
    free(out);
    for (size_t i = 0; i < big; i++) h[i] = "<!<<-<a"[i % 7];
    CHECK_OK(volt_text_html_strip(h, big, &out, NULL));
    free(out);
    free(h);
    /* CSV prefixes: loads or fails CORRUPT, nothing else */
    const char *csv = "text,label\n\"a,\"\"b\"\"\nc\",1\nplain,0\n\"x\",2\n";
    int csv_bad = 0;
    for (size_t len = 0; len <= strlen(csv); len++) {
        write_bytes(tpath("fuzz.csv"), csv, len);
        volt_corpus *c = NULL;
        char err[256];
        volt_status st = volt_corpus_load_csv(tpath("fuzz.csv"), &c, err, sizeof err);
        if (!(st == VOLT_OK || st == VOLT_ERR_CORRUPT) || (st == VOLT_OK) != (c != NULL)) csv_bad++;
        volt_corpus_destroy(c);
    }
    CHECK(csv_bad == 0, "%d csv prefixes misbehaved", csv_bad);
}

static void test_mail(void) {
    CHECK_BODY("From a@b  Mon Aug 26 21:27:07 2002\n"
               "Return-Path: <a@b>\n"
               "Received: from x (x [1.2.3.4])\n\tby y with SMTP\n"
               "Subject: Cheap stuff\n"
               "\n"
               "Hello   there,\n\n  friend.\n",
               "Hello there, friend.");
    CHECK_BODY("Subject: qp\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: Quoted-Printable\r\n\r\n"
               "caf=C3=A9 soft=\r\nbreak =3D x=\nyz =ZZ\r\n",
               "caf\xC3\xA9 softbreak = xyz =ZZ");
    CHECK_BODY("Subject: b64\nContent-Type: text/plain\nContent-Transfer-Encoding: base64\n\n"
               "SGVsbG8gYmFzZTY0\nIHdvcmxk\n",
               "Hello base64 world");
    CHECK_BODY("Subject: latin\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: 8bit\n\n"
               "caf\xE9 \x93quoted\x94\n",
               "caf\xC3\xA9 \xE2\x80\x9Cquoted\xE2\x80\x9D");
    /* multipart/alternative: the plain part wins; the boundary sits on a folded line */
    CHECK_BODY("Subject: alt\nMIME-Version: 1.0\nContent-Type: multipart/alternative;\n\tboundary=\"==b1==\"\n\n"
               "This is a multi-part message in MIME format.\n"
               "--==b1==\nContent-Type: text/plain; charset=us-ascii\n\nplain version\n"
               "--==b1==\nContent-Type: text/html\nContent-Transfer-Encoding: quoted-printable\n\n<p>html =\nversion</p>\n"
               "--==b1==--\nepilogue\n",
               "plain version");
    {   /* a boundary of 150 characters (longer than RFC 2046's 70): cut, it never matched and the
         * parts' headers and delimiters became text */
        char bnd[151], msg[1024];
        memset(bnd, 'B', 150);
        bnd[150] = 0;
        snprintf(msg, sizeof msg, "Subject: long\nContent-Type: multipart/alternative; boundary=\"%s\"\n\npreamble\n--%s\n"
                 "Content-Type: text/plain\n\nhello body\n--%s--\n", bnd, bnd, bnd);
        CHECK_BODY(msg, "hello body");
    }
    /* multipart/mixed with only HTML text + a binary attachment: the HTML, stripped */
    CHECK_BODY("Subject: mixed\nContent-Type: multipart/mixed; boundary=XYZ\n\n"
               "--XYZ\nContent-Type: text/html; charset=\"iso-8859-1\"\nContent-Transfer-Encoding: quoted-printable\n\n"
               "<html><head><title>T</title><style>p {color:red}</style></head><body>\n"
               "<p>Buy&nbsp;<b>NO</b>W &amp; save=A0&#36;5 &lt;today&gt; &eacute;&#x41;<br>\n"
               "<!-- hidden <p>comment</p> -->V<font color=3D\"x>y\">ia</font>gra</p>\n"
               "<script type=3D\"text/javascript\">var x = \"<p>no</p>\";</script>bye</body></html>\n"
               "--XYZ\nContent-Type: application/octet-stream; name=\"a.exe\"\nContent-Transfer-Encoding: base64\n\nTVqQAAMAAAAEAAAA\n"
               "--XYZ\nContent-Type: text/plain\nContent-Disposition: attachment; filename=\"notes.txt\"\n\nattached notes\n"
               "--XYZ--\n",
               "T Buy NOW & save $5 <today> \xC3\xA9" "A Viagra bye");
    /* signed: the signature is skipped; forwarded message/rfc822: its headers dropped too */
    CHECK_BODY("Subject: fwd\nContent-Type: multipart/signed; boundary=\"s\"; protocol=\"application/pgp-signature\"\n\n"
               "--s\nContent-Type: multipart/mixed; boundary=\"m\"\n\n"
               "--m\nContent-Type: text/plain\n\nsee below\n"
               "--m\nContent-Type: message/rfc822\n\n"
               "Received: from inner\nSubject: inner subject\nContent-Type: text/plain\n\ninner body\n"
               "--m--\n"
               "--s\nContent-Type: application/pgp-signature\n\n-----BEGIN PGP SIGNATURE-----\nxyz\n--s--\n",
               "see below inner body");
    /* HTML sent as text/plain is stripped too; a missing closing boundary is tolerated */
    CHECK_BODY("Subject: x\nContent-Type: multipart/alternative; boundary=q\n\n--q\n\n<html><body>Hi <b>you</b></body></html>\n--q\n",
               "Hi you");
    /* multipart without a boundary parameter: read as text */
    CHECK_BODY("Content-Type: multipart/mixed\n\njust text\n", "just text");
    /* headers only / empty / no headers at all */
    CHECK_BODY("Subject: nothing\nReceived: from a\n", "");
    CHECK_BODY("", "");
    CHECK_BODY("no headers here, just a line\nand another", "no headers here, just a line and another");
    /* invalid UTF-8 in a non-Latin charset is dropped, not passed on */
    CHECK_BODY("Content-Type: text/plain; charset=big5\n\nab\xA4\x40" "cd\xFF", "ab@cd");

    char *o = NULL;
    size_t n = 0;
    const char *html = "  <div>One</div><div>Two</div> a<b>b</b>c &copy 2002 &bogus; &#0; 1 < 2 <3 x <p  ";
    CHECK_OK(volt_text_html_strip(html, strlen(html), &o, &n));
    CHECK(o && strcmp(o, "One Two abc \xC2\xA9 2002 &bogus; 1 < 2 <3 x <p") == 0, "html_strip '%s'", o ? o : "");
    free(o);
    CHECK(volt_text_html_strip(NULL, 3, &o, &n) == VOLT_ERR_INVALID_ARG, "NULL html");
    CHECK_OK(volt_text_html_strip(NULL, 0, &o, &n));
    CHECK(o && n == 0 && o[0] == '\0', "empty html");
    free(o);
}

/* ---- tokenized dataset + cache -------------------------------------------------------------- */

static volt_tokenizer *tiny_tokenizer(bool lowercase) {
    const char *vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\ngood\nmovie\n##s\n,\n!\nthe\na\n##a\nbad\n";
    write_str(tpath("vocab.txt"), vocab);
    volt_tokenizer_config cfg;
    volt_tokenizer_config_init(&cfg);
    cfg.lowercase = lowercase;
    volt_tokenizer *tok = NULL;
    CHECK_OK(volt_tokenizer_load(&cfg, tpath("vocab.txt"), &tok));
    return tok;
}

/* Every sample of ds, fields back to back, into one malloc'ed buffer. */
static unsigned char *dump(volt_dataset *ds, size_t *bytes) {
    int64_t n = volt_dataset_len(ds);
    int L = (int)ds->fields[0].shape.d[0];
    size_t row = (size_t)L * 8 + 8;
    unsigned char *buf = calloc((size_t)n + 1, row);
    for (int64_t i = 0; i < n; i++) {
        unsigned char *r = buf + (size_t)i * row;
        void *dst[3] = { r, r + (size_t)L * 4, r + (size_t)L * 8 };
        CHECK_OK(ds->ops->get(ds->self, i, dst));
    }
    *bytes = (size_t)n * row;
    return buf;
}

static int count_vtok(const char *dir) {
    DIR *d = opendir(dir);
    int k = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) k += strstr(e->d_name, ".vtok") != NULL;
    if (d) closedir(d);
    return k;
}

static void first_vtok(const char *dir, char *out, size_t n) {
    DIR *d = opendir(dir);
    struct dirent *e;
    out[0] = '\0';
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".vtok")) {
            if ((size_t)snprintf(out, n, "%s/%s", dir, e->d_name) >= n) out[0] = '\0';
            break;
        }
    if (d) closedir(d);
}

static void test_dataset(void) {
    volt_tokenizer *tok = tiny_tokenizer(true);
    if (!tok) return;
    volt_corpus *c;
    CHECK_OK(volt_corpus_create("tiny", &c));
    const char *texts[] = { "Hello, world!", "good movies", "the bad the bad the bad the bad", "", "zebra" };
    for (int i = 0; i < 5; i++) CHECK_OK(volt_corpus_add(c, texts[i], strlen(texts[i]), i % 2));
    enum { L = 8 };
    volt_dataset *ds = NULL;
    bool hit = true;
    char err[512] = "";
    volt_status st = volt_text_dataset(c, tok, L, NULL, &ds, &hit, err, sizeof err);
    CHECK(st == VOLT_OK && ds && !hit, "text_dataset: %s %s", volt_status_str(st), err);
    if (!ds) return;
    CHECK(volt_dataset_len(ds) == 5 && ds->n_fields == 3, "dataset shape");
    CHECK(!strcmp(ds->fields[0].name, "input_ids") && ds->fields[0].dtype == VOLT_I32 && ds->fields[0].shape.ndim == 1 &&
          ds->fields[0].shape.d[0] == L && !strcmp(ds->fields[1].name, "attention_mask") && ds->fields[1].dtype == VOLT_I32 &&
          !strcmp(ds->fields[2].name, "y") && ds->fields[2].dtype == VOLT_I64 && ds->fields[2].shape.ndim == 0, "fields");
    CHECK(!strcmp(ds->ops->name, "text:tiny"), "name %s", ds->ops->name);
    static const int32_t want_ids[5][L] = {
        { 2, 5, 10, 6, 11, 3, 0, 0 },            /* [CLS] hello , world ! [SEP] */
        { 2, 7, 8, 9, 3, 0, 0, 0 },              /* [CLS] good movie ##s [SEP] */
        { 2, 12, 15, 12, 15, 12, 15, 3 },        /* truncated: [SEP] stays last */
        { 2, 3, 0, 0, 0, 0, 0, 0 },
        { 2, 1, 3, 0, 0, 0, 0, 0 },              /* [UNK] */
    };
    static const int want_len[5] = { 6, 5, 8, 2, 3 };
    for (int i = 0; i < 5; i++) {
        int32_t ids[L], mask[L];
        int64_t y = -1;
        void *dst[3] = { ids, mask, &y };
        CHECK_OK(ds->ops->get(ds->self, i, dst));
        int ok = y == i % 2;
        for (int j = 0; j < L; j++) ok &= ids[j] == want_ids[i][j] && mask[j] == (j < want_len[i]);
        CHECK(ok, "sample %d: ids %d %d %d %d %d %d %d %d mask %d%d%d%d%d%d%d%d y %lld", i, ids[0], ids[1], ids[2], ids[3],
              ids[4], ids[5], ids[6], ids[7], mask[0], mask[1], mask[2], mask[3], mask[4], mask[5], mask[6], mask[7], (long long)y);
    }
    /* through the loader too */
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = 5;
    volt_loader *l = NULL;
    CHECK_OK(volt_loader_create(&lc, ds, &l));
    if (l) {
        const volt_batch *b;
        CHECK_OK(volt_loader_start(l, 0, 0));
        CHECK_OK(volt_loader_next(l, &b));
        volt_tensor *x = volt_batch_field(b, "input_ids"), *y = volt_batch_y(b);
        CHECK(x && x->shape.ndim == 2 && x->shape.d[0] == 5 && x->shape.d[1] == L && ((int32_t *)x->data)[L + 3] == 9 &&
              y && ((int64_t *)y->data)[1] == 1, "loader batch");
        volt_loader_destroy(l);
    }
    size_t ref_bytes;
    unsigned char *ref = dump(ds, &ref_bytes);
    volt_dataset_destroy(ds);
    CHECK(volt_text_dataset(c, tok, 1, NULL, &ds, NULL, err, sizeof err) == VOLT_ERR_INVALID_ARG && ds == NULL &&
          strstr(err, "max_length"), "max_length 1: '%s'", err);

    /* ---- cache ---- */
    char cdir[1200];
    snprintf(cdir, sizeof cdir, "%s", tpath("cache/tokens"));
    rm_rf(tpath("cache"));
    st = volt_text_dataset(c, tok, L, cdir, &ds, &hit, err, sizeof err);
    CHECK(st == VOLT_OK && !hit && count_vtok(cdir) == 1, "first cached call: %s hit=%d files=%d", err, hit, count_vtok(cdir));
    size_t nb;
    unsigned char *got = ds ? dump(ds, &nb) : NULL;
    CHECK(got && nb == ref_bytes && memcmp(got, ref, nb) == 0, "cached-build == uncached");
    free(got);
    volt_dataset_destroy(ds);
    st = volt_text_dataset(c, tok, L, cdir, &ds, &hit, err, sizeof err);
    CHECK(st == VOLT_OK && hit, "second call hits the cache: %s", err);
    got = ds ? dump(ds, &nb) : NULL;
    CHECK(got && nb == ref_bytes && memcmp(got, ref, nb) == 0, "cache hit gives identical bytes");
    free(got);
    volt_dataset_destroy(ds);

    char file[1400];
    first_vtok(cdir, file, sizeof file);
    FILE *f = fopen(file, "rb");
    unsigned char good[4096];
    size_t fsz = f ? fread(good, 1, sizeof good, f) : 0;
    if (f) fclose(f);
    CHECK(fsz == 80 + 5 * (L * 4 + 4 + 8), "cache file size %zu", fsz);
    /* corruptions: payload byte, header byte, truncation, garbage */
    for (int kind = 0; kind < 4; kind++) {
        unsigned char bad[4096];
        memcpy(bad, good, fsz);
        size_t bsz = fsz;
        if (kind == 0) bad[100] ^= 0x40;
        else if (kind == 1) bad[30] ^= 0x01;
        else if (kind == 2) bsz = fsz - 7;
        else { memset(bad, 'x', 64); bsz = 64; }
        write_bytes(file, (const char *)bad, bsz);
        st = volt_text_dataset(c, tok, L, cdir, &ds, &hit, err, sizeof err);
        CHECK(st == VOLT_OK && !hit, "corrupt cache %d is rebuilt, not trusted", kind);
        got = ds ? dump(ds, &nb) : NULL;
        CHECK(got && nb == ref_bytes && memcmp(got, ref, nb) == 0, "rebuilt data %d", kind);
        free(got);
        volt_dataset_destroy(ds);
        f = fopen(file, "rb");
        unsigned char again[4096];
        size_t asz = f ? fread(again, 1, sizeof again, f) : 0;
        if (f) fclose(f);
        CHECK(asz == fsz && memcmp(again, good, fsz) == 0, "rebuilt file %d is the good one", kind);
        st = volt_text_dataset(c, tok, L, cdir, &ds, &hit, err, sizeof err);
        CHECK(st == VOLT_OK && hit, "hit after rebuild %d", kind);
        volt_dataset_destroy(ds);
    }
    CHECK(count_vtok(cdir) == 1, "no temporary files left (%d)", count_vtok(cdir));
    /* other key: max_length, corpus contents, tokenizer options */
    st = volt_text_dataset(c, tok, L + 1, cdir, &ds, &hit, err, sizeof err);
    CHECK(st == VOLT_OK && !hit && count_vtok(cdir) == 2, "max_length is in the key");
    volt_dataset_destroy(ds);
    CHECK_OK(volt_corpus_add(c, "more", 4, 1));
    st = volt_text_dataset(c, tok, L, cdir, &ds, &hit, err, sizeof err);
    CHECK(st == VOLT_OK && !hit && volt_dataset_len(ds) == 6, "corpus contents are in the key");
    volt_dataset_destroy(ds);
    volt_tokenizer *cased = tiny_tokenizer(false);
    st = volt_text_dataset(c, cased, L, cdir, &ds, &hit, err, sizeof err);
    CHECK(st == VOLT_OK && !hit, "tokenizer options are in the key");
    int32_t ids[L + 1], mask[L + 1];
    int64_t y;
    void *dst[3] = { ids, mask, &y };
    if (ds) CHECK(ds->ops->get(ds->self, 0, dst) == VOLT_OK && ids[1] == 1, "cased: Hello is [UNK] (%d)", ids[1]);
    volt_dataset_destroy(ds);
    st = volt_text_dataset(c, cased, L, cdir, &ds, &hit, err, sizeof err);
    CHECK(st == VOLT_OK && hit, "cased second call hits");
    volt_dataset_destroy(ds);
    volt_tokenizer_destroy(cased);
    /* an unwritable cache folder (a file in the way) is not an error */
    write_str(tpath("cache/blocked"), "x");
    st = volt_text_dataset(c, tok, L, tpath("cache/blocked/sub"), &ds, &hit, err, sizeof err);
    CHECK(st == VOLT_OK && !hit && ds, "unwritable cache dir: %s", err);
    volt_dataset_destroy(ds);
    /* an empty corpus is a valid, empty dataset, cached like any other */
    volt_corpus *empty;
    CHECK_OK(volt_corpus_create("empty", &empty));
    for (int k = 0; k < 2; k++) {
        st = volt_text_dataset(empty, tok, L, cdir, &ds, &hit, err, sizeof err);
        CHECK(st == VOLT_OK && ds && volt_dataset_len(ds) == 0 && hit == (k == 1), "empty corpus %d: %s", k, err);
        volt_dataset_destroy(ds);
    }
    volt_corpus_destroy(empty);
    char dd[512];
    CHECK(volt_text_default_cache_dir(dd, sizeof dd) != VOLT_OK || strstr(dd, "volt/tokens"), "default dir %s", dd);
    CHECK(volt_text_default_cache_dir(dd, 4) != VOLT_OK, "tiny buffer");
    free(ref);
    volt_corpus_destroy(c);
    volt_tokenizer_destroy(tok);
}

/* ---- the real SpamAssassin corpus (when scripts/fetch_spam.sh has run) ------------------------- */

/* The first line of header `name` in the raw message, whitespace-collapsed, in out. */
static bool own_header(const char *msg, const char *name, char *out, size_t cap) {
    size_t nl = strlen(name);
    const char *end = strstr(msg, "\n\n");
    for (const char *p = msg; p && (!end || p < end); p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, name, nl) != 0) continue;
        const char *v = p + nl;
        size_t k = 0;
        bool sp = false;
        while (*v == ' ' || *v == '\t') v++;
        for (; *v && *v != '\n' && *v != '\r' && k + 1 < cap; v++) {
            if (*v == ' ' || *v == '\t') { sp = true; continue; }
            if (sp && k) out[k++] = ' ';
            sp = false;
            out[k++] = *v;
        }
        out[k] = '\0';
        return k >= 12;
    }
    return false;
}

/* Does the raw body (after the header block) quote header `name` with a value starting like
 * `value`? Then finding it in the extracted body is no leak (replies quote subjects). */
static bool raw_body_quotes(const char *raw, const char *name, const char *value) {
    const char *b = strstr(raw, "\n\n"), *b2 = strstr(raw, "\r\n\r\n");
    if (!b || (b2 && b2 < b)) b = b2;
    if (!b) return false;
    size_t nl = strlen(name), vl = strlen(value) < 16 ? strlen(value) : 16;
    for (const char *p = strstr(b, name); p; p = strstr(p + 1, name)) {
        const char *v = p + nl;
        while (*v == ' ' || *v == '\t') v++;
        if (strncmp(v, value, vl) == 0) return true;
    }
    return false;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_spam_assassin(void) {
    char dir[1024];
    const char *env = getenv("VOLT_SPAM_DIR");
    if (env) snprintf(dir, sizeof dir, "%s", env);
    else snprintf(dir, sizeof dir, "%s/.cache/volt/spam-assassin", getenv("HOME") ? getenv("HOME") : ".");
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        char why[1200];
        snprintf(why, sizeof why, "SpamAssassin corpus %s absent (scripts/fetch_spam.sh or set VOLT_SPAM_DIR); "
                 "its checks did not run", dir);
        vtest_missing(why);
        return;
    }
    char err[512] = "";
    volt_corpus *c = NULL;
    volt_status st = volt_corpus_load_spam_assassin(dir, &c, err, sizeof err);
    CHECK(st == VOLT_OK, "load_spam_assassin: %s", err);
    if (!c) return;
    int64_t n = volt_corpus_len(c), ham = volt_corpus_label_count(c, 0), spam = volt_corpus_label_count(c, 1);
    printf("spam-assassin: %lld messages, %lld ham, %lld spam\n", (long long)n, (long long)ham, (long long)spam);
    CHECK(n == 6046 && ham == 4150 && spam == 1896 && volt_corpus_num_classes(c) == 2, "spam-assassin counts");
    /* No body holds its own message's headers: walk the files in the loader's order. */
    const char *groups[] = { "easy-ham-1", "easy-ham-2", "hard-ham-1", "spam-1", "spam-2" };
    int64_t i = 0, leaks = 0, checked = 0, empty = 0, uncollapsed = 0;
    for (size_t g = 0; g < 5; g++) {
        char gp[1200];
        snprintf(gp, sizeof gp, "%s/%s", dir, groups[g]);
        DIR *d = opendir(gp);
        if (!d) continue;
        char **names = malloc(4096 * sizeof *names);
        size_t nn = 0;
        struct dirent *e;
        while ((e = readdir(d)) && nn < 4096)
            if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && !strstr(e->d_name, ".json")) names[nn++] = strdup(e->d_name);
        closedir(d);
        qsort(names, nn, sizeof *names, cmp_name);
        for (size_t k = 0; k < nn; k++, i++) {
            char fp[1600];
            snprintf(fp, sizeof fp, "%s/%s", gp, names[k]);
            FILE *f = fopen(fp, "rb");
            static char raw[1 << 20];
            size_t rn = f ? fread(raw, 1, sizeof raw - 1, f) : 0;
            if (f) fclose(f);
            raw[rn] = '\0';
            size_t bl;
            const char *body = volt_corpus_text(c, i, &bl);
            if (!body) continue;
            if (bl == 0) empty++;
            CHECK(volt_corpus_label(c, i) == (g >= 3), "label of %s", names[k]);
            char h[256], needle[300];
            static const char *const hdrs[] = { "Received:", "Subject:", "Return-Path:", "Message-Id:", "Message-ID:" };
            for (size_t q = 0; q < sizeof hdrs / sizeof hdrs[0]; q++) {
                if (!own_header(raw, hdrs[q], h, sizeof h)) continue;
                snprintf(needle, sizeof needle, "%s %s", hdrs[q], h);
                checked++;
                if (strstr(body, needle) && !raw_body_quotes(raw, hdrs[q], h)) {
                    leaks++;
                    if (leaks < 5) fprintf(stderr, "header leak in %s: %s\n", names[k], needle);
                }
            }
            const unsigned char *u = (const unsigned char *)body;
            for (size_t p = 0; p < bl; p++) if (u[p] == '\n' || u[p] == '\t') { uncollapsed++; break; }
            free(names[k]);
        }
        free(names);
    }
    CHECK(i == n, "walked %lld of %lld", (long long)i, (long long)n);
    CHECK(checked > 10000 && leaks == 0, "%lld of %lld own header lines found in bodies", (long long)leaks, (long long)checked);
    CHECK(uncollapsed == 0, "%lld bodies with uncollapsed whitespace", (long long)uncollapsed);
    CHECK(empty < 30, "%lld empty bodies", (long long)empty);
    printf("spam-assassin: %lld own-header checks, %lld empty bodies\n", (long long)checked, (long long)empty);
    volt_corpus *tr, *va, *te;
    CHECK_OK(volt_corpus_split_frac(c, 0.8, 0.1, 7, &tr, &va, &te));
    CHECK(volt_corpus_len(tr) + volt_corpus_len(va) + volt_corpus_len(te) == n, "spam split");
    volt_corpus_destroy(tr); volt_corpus_destroy(va); volt_corpus_destroy(te);
    volt_corpus_destroy(c);
}

int main(void) {
    snprintf(g_root, sizeof g_root, "%s", vtest_tmpdir());
    test_imdb();
    test_csv();
    test_split();
    test_mail();
    test_mail_fuzz();
    test_dataset();
    test_spam_assassin();
    return vtest_finish();
}
