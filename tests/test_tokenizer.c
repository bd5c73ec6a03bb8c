/* test_tokenizer.c — BERT WordPiece tokenizer.
 *
 * Part 1 always runs: a tiny vocab.txt written by the test (load errors, lookups,
 * WordPiece splitting, encode layout, invalid UTF-8, config switches, threads).
 * Part 2 needs the real bert-base-uncased vocab (env VOLT_VOCAB, else
 * ~/.cache/volt/bert-base-uncased/vocab.txt; scripts/fetch_vocab.sh installs it) and
 * checks hand-verified ids (id = line number - 1 in vocab.txt); without it the test
 * exits 77 (skip, naming the file) after part 1 passes, and fails under CI. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/tokenizer.h"
#include "vtest.h"

#define MAXIDS 256

static char g_path[512];

static const char *write_file(const char *name, const char *content) {
    snprintf(g_path, sizeof g_path, "%s/%s", vtest_tmpdir(), name);
    FILE *f = fopen(g_path, "wb");
    if (!f) return NULL;
    fputs(content, f);
    fclose(f);
    return g_path;
}

/* Tokenize from an exact-size heap copy so ASan catches any read past len. */
static int tok_ids(const volt_tokenizer *t, const char *text, size_t len, int32_t *ids, int cap) {
    char *copy = malloc(len ? len : 1);
    if (len) memcpy(copy, text, len);
    int n = -1;
    volt_status st = volt_tokenizer_tokenize(t, len ? copy : NULL, len, ids, cap, &n);
    free(copy);
    return st == VOLT_OK ? n : -1;
}

/* Checks that `text` tokenizes to exactly the n ids in `want`. */
static void expect_ids(const volt_tokenizer *t, const char *label, const char *text, size_t len,
                       const int32_t *want, int n) {
    int32_t got[MAXIDS];
    int m = tok_ids(t, text, len, got, MAXIDS);
    bool same = m == n;
    for (int i = 0; same && i < n; i++) same = got[i] == want[i];
    char buf[1024] = "";
    size_t k = 0;
    for (int i = 0; i < m && i < MAXIDS && k < sizeof buf - 16; i++) {
        const char *s = volt_tokenizer_id_token(t, got[i]);
        k += (size_t)snprintf(buf + k, sizeof buf - k, " %d(%s)", got[i], s ? s : "?");
    }
    CHECK(same, "%s: got %d ids:%s; want %d ids", label, m, buf, n);
}
#define EXPECT(t, label, text, ...) do { \
    static const int32_t want_[] = { __VA_ARGS__ }; \
    expect_ids((t), (label), (text), sizeof(text) - 1, want_, (int)(sizeof want_ / sizeof want_[0])); \
} while (0)

static volt_tokenizer *load_with(const char *path, volt_tokenizer_config *cfg) {
    volt_tokenizer *t = NULL;
    char err[256] = "";
    cfg->errbuf = err;
    cfg->errbuf_size = sizeof err;
    volt_status st = volt_tokenizer_load(cfg, path, &t);
    CHECK(st == VOLT_OK && t, "load '%s': %s: %s", path, volt_status_str(st), err);
    cfg->errbuf = NULL;
    cfg->errbuf_size = 0;
    return t;
}

/* ---- part 1: tiny vocab ------------------------------------------------------------ */
/* ids:  0 [PAD]  1 [UNK]  2 [CLS]  3 [SEP]  4 [MASK]  5 hello  6 world  7 ,  8 !  9 un
 *      10 ##aff 11 ##able 12 cafe 13 中  14 naive 15 ##s  16 a  17 ##a  18 é  19 [  20 ]
 *      21 ab  22 ##cd  23 Hello  24 ##b */
static const char *TINY =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n,\n!\nun\n##aff\n##able\ncafe\n中\n"
    "naive\n##s\na\n##a\né\n[\n]\nab\n##cd\nHello\n##b\n";

static void test_load_errors(void) {
    volt_tokenizer_config cfg;
    volt_tokenizer_config_init(&cfg);
    CHECK(cfg.version == VOLT_TOKENIZER_CONFIG_VERSION && cfg.lowercase && cfg.strip_accents &&
          cfg.tokenize_chinese_chars && cfg.match_special_tokens && cfg.max_input_chars_per_word == 100,
          "config defaults");
    char err[256];
    cfg.errbuf = err;
    cfg.errbuf_size = sizeof err;
    volt_tokenizer *t = (volt_tokenizer *)&cfg;    /* must be reset to NULL on failure */

    char missing[600];
    snprintf(missing, sizeof missing, "%s/no_such_vocab.txt", vtest_tmpdir());
    err[0] = 0;
    CHECK(volt_tokenizer_load(&cfg, missing, &t) == VOLT_ERR_IO, "missing file -> IO");
    CHECK(t == NULL, "out reset on failure");
    CHECK(strstr(err, "no_such_vocab.txt") != NULL, "message names the file: '%s'", err);

    err[0] = 0;
    CHECK(volt_tokenizer_load(&cfg, write_file("empty.txt", ""), &t) == VOLT_ERR_CORRUPT, "empty -> CORRUPT");
    CHECK(strstr(err, "empty") != NULL, "message says empty: '%s'", err);

    err[0] = 0;
    CHECK(volt_tokenizer_load(&cfg, write_file("nosep.txt", "[PAD]\n[UNK]\n[CLS]\nhello\n"), &t) == VOLT_ERR_CORRUPT,
          "missing [SEP] -> CORRUPT");
    CHECK(strstr(err, "[SEP]") != NULL, "message names [SEP]: '%s'", err);

    err[0] = 0;
    CHECK(volt_tokenizer_load(&cfg, write_file("nounk.txt", "[PAD]\n[CLS]\n[SEP]\n"), &t) == VOLT_ERR_CORRUPT,
          "missing [UNK] -> CORRUPT");
    CHECK(strstr(err, "[UNK]") != NULL, "message names [UNK]: '%s'", err);

    const char *tiny = write_file("tiny_vocab.txt", TINY);
    volt_tokenizer_config bad = cfg;
    bad.version = 99;
    CHECK(volt_tokenizer_load(&bad, tiny, &t) == VOLT_ERR_VERSION, "bad config version");
    bad = cfg;
    bad.max_input_chars_per_word = 0;
    CHECK(volt_tokenizer_load(&bad, tiny, &t) == VOLT_ERR_INVALID_ARG, "max chars 0");
    CHECK(volt_tokenizer_load(&cfg, NULL, &t) == VOLT_ERR_INVALID_ARG, "NULL path");
    CHECK(volt_tokenizer_load(&cfg, tiny, NULL) == VOLT_ERR_INVALID_ARG, "NULL out");

    /* NULL config = defaults; destroy is NULL-safe */
    CHECK(volt_tokenizer_load(NULL, tiny, &t) == VOLT_OK && t, "load with NULL config");
    volt_tokenizer_destroy(t);
    volt_tokenizer_destroy(NULL);
}

static void test_tiny_lookup(const volt_tokenizer *t) {
    CHECK(volt_tokenizer_vocab_size(t) == 25, "vocab size %d", volt_tokenizer_vocab_size(t));
    CHECK(volt_tokenizer_pad_id(t) == 0 && volt_tokenizer_unk_id(t) == 1 && volt_tokenizer_cls_id(t) == 2 &&
          volt_tokenizer_sep_id(t) == 3 && volt_tokenizer_mask_id(t) == 4, "special ids");
    CHECK(volt_tokenizer_token_id(t, "##aff") == 10, "token_id ##aff");
    CHECK(volt_tokenizer_token_id(t, "中") == 13, "token_id 中");
    CHECK(volt_tokenizer_token_id(t, "aff") == -1, "token_id absent");
    CHECK(volt_tokenizer_token_id(t, "") == -1, "token_id empty");
    CHECK(volt_tokenizer_id_token(t, 11) && strcmp(volt_tokenizer_id_token(t, 11), "##able") == 0, "id_token 11");
    CHECK(volt_tokenizer_id_token(t, 25) == NULL && volt_tokenizer_id_token(t, -1) == NULL, "id_token range");
    CHECK(volt_tokenizer_vocab_size(NULL) == 0 && volt_tokenizer_token_id(NULL, "a") == -1, "NULL tokenizer");
}

static void test_tiny_tokenize(const volt_tokenizer *t) {
    EXPECT(t, "hello world", "Hello, World!", 5, 7, 6, 8);
    EXPECT(t, "unaffable", "unaffable", 9, 10, 11);
    EXPECT(t, "accents", "CAFÉ Naïve", 12, 14);
    EXPECT(t, "decomposed accent", "cafe\xCC\x81", 12);               /* e + U+0301 */
    EXPECT(t, "unknown word", "hello zzz", 5, 1);
    EXPECT(t, "unsplittable tail", "unaffablex", 1);                   /* whole word -> [UNK] */
    EXPECT(t, "continuations", "aaab", 16, 17, 17, 24);
    EXPECT(t, "cjk split", "hello中world", 5, 13, 6);
    EXPECT(t, "special tokens", "hello[MASK]world [SEP]", 5, 4, 6, 3);
    EXPECT(t, "lowercase special is text", "[mask]", 19, 1, 20);
    EXPECT(t, "whitespace kinds", "\thello\r\n\xC2\xA0world\xE3\x80\x80!", 5, 6, 8);
    EXPECT(t, "control chars dropped", "he\x01llo wor\xE2\x80\x8Bld\x7F", 5, 6);   /* U+200B is Cf */
    EXPECT(t, "dropped chars do not split", "hello\x01world", 1);
    EXPECT(t, "only spaces", "   \n\t ");
    /* max_input_chars_per_word = 100: 100 chars split, 101 chars are [UNK] */
    char w100[101], w101[102];
    memset(w100, 'a', 100); w100[100] = 0;
    memset(w101, 'a', 101); w101[101] = 0;
    int32_t ids[MAXIDS];
    int n = tok_ids(t, w100, 100, ids, MAXIDS);
    CHECK(n == 100 && ids[0] == 16 && ids[99] == 17, "100-char word: n=%d", n);
    n = tok_ids(t, w101, 101, ids, MAXIDS);
    CHECK(n == 1 && ids[0] == 1, "101-char word -> [UNK]: n=%d", n);
}

static void test_tiny_invalid_utf8(const volt_tokenizer *t) {
    /* each malformed sequence reads as U+FFFD, which cleaning drops: no word break */
    EXPECT(t, "lone continuation", "ab\x80" "cd", 21, 22);
    EXPECT(t, "0xFF", "ab\xFF" "cd", 21, 22);
    EXPECT(t, "overlong slash", "ab\xC0\xAF" "cd", 21, 22);
    EXPECT(t, "surrogate", "ab\xED\xA0\x80" "cd", 21, 22);
    EXPECT(t, "above U+10FFFF", "ab\xF4\x90\x80\x80" "cd", 21, 22);
    EXPECT(t, "truncated 3-byte then ascii", "ab\xE2\x82" "cd", 21, 22);
    EXPECT(t, "U+FFFD itself", "ab\xEF\xBF\xBD" "cd", 21, 22);
    EXPECT(t, "NUL inside", "hel\0lo world", 5, 6);
    /* truncated sequences at the very end of the buffer (ASan checks the bounds) */
    static const char *tails[] = { "hello\xC3", "hello\xE2\x82", "hello\xF0\x9F\x98", "hello\xF4" };
    for (int i = 0; i < 4; i++) {
        int32_t ids[4];
        int n = tok_ids(t, tails[i], strlen(tails[i]), ids, 4);
        CHECK(n == 1 && ids[0] == 5, "truncated tail %d: n=%d", i, n);
    }
    /* every byte value, alone and after a lead byte: never fails */
    for (int b = 0; b < 256; b++) {
        char s[3] = { (char)b, (char)0xE2, (char)b };
        int32_t ids[8];
        CHECK(tok_ids(t, s, 1, ids, 8) >= 0 && tok_ids(t, s + 1, 2, ids, 8) >= 0, "byte %02x", b);
    }
}

static void test_tiny_api_edges(const volt_tokenizer *t) {
    int32_t ids[8];
    int n = -1;
    /* cap smaller than the count: first cap written, n = full count, ids[cap] untouched */
    for (int i = 0; i < 8; i++) ids[i] = -7;
    CHECK_OK(volt_tokenizer_tokenize(t, "hello, world!", 13, ids, 2, &n));
    CHECK(n == 4 && ids[0] == 5 && ids[1] == 7 && ids[2] == -7, "cap=2: n=%d ids %d %d %d", n, ids[0], ids[1], ids[2]);
    CHECK_OK(volt_tokenizer_tokenize(t, "hello, world!", 13, NULL, 0, &n));
    CHECK(n == 4, "cap=0 counts: n=%d", n);
    CHECK_OK(volt_tokenizer_tokenize(t, NULL, 0, ids, 8, &n));
    CHECK(n == 0, "empty: n=%d", n);
    CHECK(volt_tokenizer_tokenize(t, "x", 1, NULL, 4, &n) == VOLT_ERR_INVALID_ARG, "NULL ids with cap");
    CHECK(volt_tokenizer_tokenize(t, "x", 1, ids, -1, &n) == VOLT_ERR_INVALID_ARG, "cap < 0");
    CHECK(volt_tokenizer_tokenize(t, NULL, 3, ids, 8, &n) == VOLT_ERR_INVALID_ARG, "NULL text, len 3");
    CHECK(volt_tokenizer_tokenize(NULL, "x", 1, ids, 8, &n) == VOLT_ERR_INVALID_ARG, "NULL tokenizer");
    CHECK(volt_tokenizer_tokenize(t, "x", 1, ids, 8, NULL) == VOLT_ERR_INVALID_ARG, "NULL n_out");

    /* encode: [CLS] x [SEP] [PAD]..., truncation keeps [SEP] last */
    int32_t in[8], mask[8];
    int nt = -1;
    CHECK_OK(volt_tokenizer_encode(t, "hello, world!", 13, 8, in, mask, &nt));
    static const int32_t want8[8] = { 2, 5, 7, 6, 8, 3, 0, 0 };
    static const int32_t mask8[8] = { 1, 1, 1, 1, 1, 1, 0, 0 };
    CHECK(nt == 6 && memcmp(in, want8, sizeof want8) == 0 && memcmp(mask, mask8, sizeof mask8) == 0,
          "encode 8: nt=%d ids %d %d %d %d %d %d %d %d", nt, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]);
    CHECK_OK(volt_tokenizer_encode(t, "hello, world!", 13, 4, in, mask, &nt));
    CHECK(nt == 4 && in[0] == 2 && in[1] == 5 && in[2] == 7 && in[3] == 3 && mask[3] == 1,
          "encode 4 truncates: %d %d %d %d", in[0], in[1], in[2], in[3]);
    CHECK_OK(volt_tokenizer_encode(t, "hello, world!", 13, 2, in, NULL, &nt));
    CHECK(nt == 2 && in[0] == 2 && in[1] == 3, "encode 2: [CLS][SEP]");
    CHECK_OK(volt_tokenizer_encode(t, "", 0, 4, in, mask, NULL));
    CHECK(in[0] == 2 && in[1] == 3 && in[2] == 0 && in[3] == 0 && mask[1] == 1 && mask[2] == 0, "encode empty");
    /* a truncation point inside a word that becomes [UNK]: the rollback must not leak */
    CHECK_OK(volt_tokenizer_encode(t, "hello unaffablex world", 22, 4, in, mask, &nt));
    CHECK(in[1] == 5 && in[2] == 1 && in[3] == 3, "encode rollback: %d %d %d", in[1], in[2], in[3]);
    CHECK(volt_tokenizer_encode(t, "x", 1, 1, in, mask, &nt) == VOLT_ERR_INVALID_ARG, "max_length 1");
    CHECK(volt_tokenizer_encode(t, "x", 1, 4, NULL, mask, &nt) == VOLT_ERR_INVALID_ARG, "NULL input_ids");
}

static void test_tiny_configs(const char *tiny) {
    volt_tokenizer_config cfg;
    volt_tokenizer_config_init(&cfg);
    cfg.lowercase = false;
    cfg.strip_accents = false;
    volt_tokenizer *t = load_with(tiny, &cfg);
    if (t) {
        EXPECT(t, "cased", "Hello hello", 23, 5);
        EXPECT(t, "no strip", "é", 18);
        volt_tokenizer_destroy(t);
    }
    volt_tokenizer_config_init(&cfg);
    cfg.match_special_tokens = false;
    cfg.tokenize_chinese_chars = false;
    t = load_with(tiny, &cfg);
    if (t) {
        EXPECT(t, "special as text", "[MASK]", 19, 1, 20);
        EXPECT(t, "cjk not split", "hello中", 1);
        volt_tokenizer_destroy(t);
    }
    /* a longer word limit takes the heap path for the word buffer */
    volt_tokenizer_config_init(&cfg);
    cfg.max_input_chars_per_word = 1000;
    t = load_with(tiny, &cfg);
    if (t) {
        char w[401];
        memset(w, 'a', 400); w[400] = 0;
        int32_t ids[512];
        int n = tok_ids(t, w, 400, ids, 512);
        CHECK(n == 400 && ids[0] == 16 && ids[399] == 17, "400-char word with limit 1000: n=%d", n);
        volt_tokenizer_destroy(t);
    }
    /* a word of a million characters (a base64 blob in a mail) under a limit of 2^20: the search for
     * each piece starts at the longest token, not at the word's end (O(n^2): 200k characters took
     * 6 s, a million would take minutes; now a fraction of a second) */
    volt_tokenizer_config_init(&cfg);
    cfg.max_input_chars_per_word = 1 << 20;
    t = load_with(tiny, &cfg);
    enum { LONGW = 1000000 };
    char *w = malloc(LONGW);
    int32_t *ids = malloc(sizeof *ids * LONGW);
    if (t && w && ids) {
        memset(w, 'a', LONGW);
        const double t0 = vtest_now();
        int n = tok_ids(t, w, LONGW, ids, LONGW);
        const double el = vtest_now() - t0;
        CHECK(n == LONGW && ids[0] == 16 && ids[LONGW - 1] == 17 && el < 10, "a word of a million characters: n=%d in %.2f s", n, el);
    }
    free(w);
    free(ids);
    volt_tokenizer_destroy(t);
    /* CRLF lines, no final newline, duplicate token (last id wins), no [MASK] */
    const char *crlf = write_file("crlf_vocab.txt", "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nhi\r\nhi");
    volt_tokenizer_config_init(&cfg);
    t = load_with(crlf, &cfg);
    if (t) {
        CHECK(volt_tokenizer_vocab_size(t) == 6, "crlf size %d", volt_tokenizer_vocab_size(t));
        CHECK(volt_tokenizer_token_id(t, "hi") == 5, "duplicate: last wins");
        CHECK(volt_tokenizer_mask_id(t) == -1, "no [MASK] -> -1");
        CHECK(strcmp(volt_tokenizer_id_token(t, 3), "[SEP]") == 0, "CR stripped");
        EXPECT(t, "[MASK] absent is text", "hi [MASK]", 5, 1, 1, 1);
        volt_tokenizer_destroy(t);
    }
    /* a UTF-8 BOM (a vocab.txt saved by a Windows editor) is not part of the first token */
    const char *bom = write_file("bom_vocab.txt", "\xEF\xBB\xBF[PAD]\n[UNK]\n[CLS]\n[SEP]\nhi\n");
    volt_tokenizer_config_init(&cfg);
    t = load_with(bom, &cfg);
    CHECK(t != NULL, "a vocab with a BOM loads");
    if (t) {
        CHECK(volt_tokenizer_vocab_size(t) == 5 && volt_tokenizer_pad_id(t) == 0 &&
              strcmp(volt_tokenizer_id_token(t, 0), "[PAD]") == 0, "BOM stripped: [PAD] is id 0");
        volt_tokenizer_destroy(t);
    }
}

typedef struct thread_arg { const volt_tokenizer *t; int bad; } thread_arg;
static const char *THREAD_TEXTS[] = {
    "Hello, World!", "unaffable café", "naïve 中中 hello", "hello [MASK] world, world!", ("ab\xFF" "cd aaab"),
};
static void *thread_main(void *p) {
    thread_arg *a = p;
    int32_t ref[5][16], in[16], mask[16];
    for (int k = 0; k < 5; k++)
        if (volt_tokenizer_encode(a->t, THREAD_TEXTS[k], strlen(THREAD_TEXTS[k]), 16, ref[k], mask, NULL)) a->bad++;
    for (int it = 0; it < 2000; it++) {
        int k = it % 5;
        if (volt_tokenizer_encode(a->t, THREAD_TEXTS[k], strlen(THREAD_TEXTS[k]), 16, in, mask, NULL) ||
            memcmp(in, ref[k], sizeof in) != 0)
            a->bad++;
    }
    return NULL;
}

static void test_threads(const volt_tokenizer *t) {
    /* the reference encodings, computed here single-threaded */
    int32_t ref[5][16], mask[16];
    for (int k = 0; k < 5; k++)
        CHECK_OK(volt_tokenizer_encode(t, THREAD_TEXTS[k], strlen(THREAD_TEXTS[k]), 16, ref[k], mask, NULL));
    enum { NT = 8 };
    pthread_t th[NT];
    thread_arg args[NT];
    for (int i = 0; i < NT; i++) {
        args[i] = (thread_arg){ t, 0 };
        CHECK(pthread_create(&th[i], NULL, thread_main, &args[i]) == 0, "pthread_create");
    }
    int bad = 0;
    for (int i = 0; i < NT; i++) { pthread_join(th[i], NULL); bad += args[i].bad; }
    CHECK(bad == 0, "%d mismatching concurrent encodes", bad);
    int32_t in[16];
    CHECK_OK(volt_tokenizer_encode(t, THREAD_TEXTS[3], strlen(THREAD_TEXTS[3]), 16, in, mask, NULL));
    CHECK(memcmp(in, ref[3], sizeof in) == 0, "same result after the threads");
}

/* ---- part 2: real bert-base-uncased vocab ----------------------------------------- */
static void test_real(const volt_tokenizer *t) {
    CHECK(volt_tokenizer_vocab_size(t) == 30522, "vocab size %d", volt_tokenizer_vocab_size(t));
    CHECK(volt_tokenizer_pad_id(t) == 0 && volt_tokenizer_unk_id(t) == 100 && volt_tokenizer_cls_id(t) == 101 &&
          volt_tokenizer_sep_id(t) == 102 && volt_tokenizer_mask_id(t) == 103, "special ids");
    CHECK(volt_tokenizer_token_id(t, "[unused0]") == 1, "[unused0] is id 1");
    CHECK(volt_tokenizer_token_id(t, "hello") == 7592, "hello = 7592");
    CHECK(volt_tokenizer_id_token(t, 2088) && strcmp(volt_tokenizer_id_token(t, 2088), "world") == 0, "2088 = world");

    /* Ids below were read off vocab.txt with grep -nxF (id = line - 1); the splits follow
     * greedy longest-match (e.g. "unaf".."unaffable" and "##ffab".. are absent). */
    EXPECT(t, "hello world", "Hello, World!", 7592, 1010, 2088, 999);
    EXPECT(t, "cafe", "Café", 7668);
    EXPECT(t, "unaffable", "unaffable", 14477, 20961, 3468);                 /* una ##ffa ##ble */
    EXPECT(t, "naive", "naïve", 15743);
    EXPECT(t, "resume", "RÉSUMÉ", 13746);
    EXPECT(t, "cjk", "中文的", 1746, 1861, 1916);
    EXPECT(t, "turkish dotted I", "İstanbul", 9960);
    EXPECT(t, "cyrillic", "МОСКВА", 1191, 14150, 29747, 23925, 25529, 10260);  /* м ##о ##с ##к ##в ##а */
    EXPECT(t, "greek", "ΑΘΗΝΑ", 1155, 29725, 24824, 16177, 14608);            /* α ##θ ##η ##ν ##α */
    EXPECT(t, "hangul -> jamo", "한", 1469, 30006, 30021);                     /* ᄒ ##ᅡ ##ᆫ */
    EXPECT(t, "apostrophe", "I'm here", 1045, 1005, 1049, 2182);
    EXPECT(t, "mask", "hello [MASK] world", 7592, 103, 2088);
    EXPECT(t, "lowercase mask is text", "hello [mask]", 7592, 1031, 7308, 1033);
    EXPECT(t, "invalid utf-8", "ab\xFF" "cd", 5925, 2094);                    /* abc ##d */
    EXPECT(t, "truncated utf-8", "caf\xC3", 24689);                          /* caf */
    EXPECT(t, "zero-width space joins", "n\xC2\xA0nbs\xE2\x80\x8Bp", 1050, 1050, 5910, 2361);  /* n n ##bs ##p */
    EXPECT(t, "control char", "a\x01" "b", 11113);                           /* ab */
    EXPECT(t, "empty", "");

    char w[102];
    memset(w, 'x', 101);
    w[101] = 0;
    int32_t ids[MAXIDS];
    int n = tok_ids(t, w, 101, ids, MAXIDS);
    CHECK(n == 1 && ids[0] == 100, "101 x's -> [UNK]: n=%d", n);
    n = tok_ids(t, w, 100, ids, MAXIDS);                                    /* xx ##xx*49 */
    bool ok = n == 50 && ids[0] == 22038;
    for (int i = 1; ok && i < 50; i++) ok = ids[i] == 20348;
    CHECK(ok, "100 x's -> xx ##xx x49: n=%d", n);

    int32_t in[16], mask[16];
    int nt = -1;
    CHECK_OK(volt_tokenizer_encode(t, "Hello, World!", 13, 16, in, mask, &nt));
    static const int32_t want[16] = { 101, 7592, 1010, 2088, 999, 102 };
    static const int32_t wmask[16] = { 1, 1, 1, 1, 1, 1 };
    CHECK(nt == 6 && memcmp(in, want, sizeof want) == 0 && memcmp(mask, wmask, sizeof wmask) == 0,
          "encode Hello, World!: nt=%d %d %d %d %d %d %d %d", nt, in[0], in[1], in[2], in[3], in[4], in[5], in[6]);
    const char *fox = "The quick brown fox jumps over the lazy dog.";
    CHECK_OK(volt_tokenizer_encode(t, fox, strlen(fox), 6, in, mask, &nt));
    static const int32_t want6[6] = { 101, 1996, 4248, 2829, 4419, 102 };
    CHECK(nt == 6 && memcmp(in, want6, sizeof want6) == 0 && mask[5] == 1, "encode truncated to 6");
    CHECK_OK(volt_tokenizer_tokenize(t, fox, strlen(fox), NULL, 0, &n));
    CHECK(n == 10, "fox has 10 wordpieces: %d", n);              /* ... lazy dog . */
    CHECK_OK(volt_tokenizer_encode(t, "", 0, 4, in, mask, &nt));
    CHECK(nt == 2 && in[0] == 101 && in[1] == 102 && in[2] == 0 && in[3] == 0 && mask[2] == 0, "empty -> [CLS][SEP]");
}

int main(void) {
    test_load_errors();
    volt_tokenizer_config cfg;
    volt_tokenizer_config_init(&cfg);
    const char *tiny = write_file("tiny_vocab.txt", TINY);
    char tiny_path[512];
    snprintf(tiny_path, sizeof tiny_path, "%s", tiny);
    volt_tokenizer *t = load_with(tiny_path, &cfg);
    if (t) {
        test_tiny_lookup(t);
        test_tiny_tokenize(t);
        test_tiny_invalid_utf8(t);
        test_tiny_api_edges(t);
        test_threads(t);
        volt_tokenizer_destroy(t);
    }
    test_tiny_configs(tiny_path);

    char path[1024];
    const char *env = getenv("VOLT_VOCAB");
    if (env && *env) snprintf(path, sizeof path, "%s", env);
    else snprintf(path, sizeof path, "%s/.cache/volt/bert-base-uncased/vocab.txt", getenv("HOME") ? getenv("HOME") : ".");
    FILE *f = fopen(path, "rb");
    if (!f) {
        char why[1200];
        snprintf(why, sizeof why, "real-vocab tests need %s (run scripts/fetch_vocab.sh or set VOLT_VOCAB); "
                 "they did not run", path);
        vtest_missing(why);
        return vtest_finish();
    }
    fclose(f);
    volt_tokenizer_config_init(&cfg);
    t = load_with(path, &cfg);
    if (t) {
        test_real(t);
        test_threads(t);
        volt_tokenizer_destroy(t);
    }
    return vtest_finish();
}
