/* A Hugging Face folder's tokenizer_config.json, as BertTokenizer reads it: do_lower_case and
 * strip_accents (null or absent: strip exactly when lowercasing, so a cased vocab keeps
 * "Café"), read by volt_distilbert_tokenizer_from_hf and written back by
 * volt_distilbert_config_to_hf_ex; and the token cache's key (volt_text_tokenizer_hash) tells a
 * tokenizer that strips accents from one that does not. */
#include <signal.h>
#include <sys/stat.h>
#include "vtest.h"
#include "volt/distilbert_hf.h"
#include "volt/text.h"
#include "volt/tokenizer.h"

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "write %s", path);
    if (f) { fputs(text, f); fclose(f); }
}

static void on_alarm(int sig) {
    (void)sig;
    static const char m[] = "test_distilbert_hf_tokenizer: a FIFO tokenizer_config.json hangs the read\n";
    if (write(2, m, sizeof m - 1) < 0) _exit(1);
    _exit(1);
}

/* volt_tokenizer_load with lowercase / strip_accents over vocab; the ids of text */
static volt_tokenizer *load(const char *vocab, bool lower, bool strip) {
    volt_tokenizer_config tc;
    volt_tokenizer_config_init(&tc);
    tc.lowercase = lower;
    tc.strip_accents = strip;
    volt_tokenizer *t = NULL;
    CHECK_OK(volt_tokenizer_load(&tc, vocab, &t));
    return t;
}

static int first_id(const volt_tokenizer *t, const char *text) {
    int32_t ids[8];
    int n = 0;
    CHECK_OK(volt_tokenizer_tokenize(t, text, strlen(text), ids, 8, &n));
    return n == 1 ? ids[0] : -100 - n;
}

int main(void) {
    char root[1100], p[1300], err[512];
    snprintf(root, sizeof root, "%s/hf_tok", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", root);

    /* reading: absent file, absent key, null, true, false; a bad type names the key */
    static const struct { const char *json; bool lower; int strip; } cases[] = {
        { NULL, true, -1 },
        { "{\"do_lower_case\": false}", false, -1 },
        { "{\"do_lower_case\": false, \"strip_accents\": null}", false, -1 },
        { "{\"do_lower_case\": false, \"strip_accents\": true}", false, 1 },
        { "{\"strip_accents\": false}", true, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        remove(p);
        if (cases[i].json) write_text(p, cases[i].json);
        bool lower = !cases[i].lower;
        int strip = 7;
        CHECK_OK(volt_distilbert_tokenizer_from_hf(root, &lower, &strip, err, sizeof err));
        CHECK(lower == cases[i].lower && strip == cases[i].strip, "%s: do_lower_case %d strip_accents %d, want %d %d",
              cases[i].json ? cases[i].json : "(no file)", lower, strip, cases[i].lower, cases[i].strip);
    }
    bool lower = true;
    int strip = 0;
    write_text(p, "{\"do_lower_case\": true, \"strip_accents\": \"yes\"}");
    volt_status st = volt_distilbert_tokenizer_from_hf(root, &lower, &strip, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "tokenizer_config.json") && strstr(err, "\"strip_accents\" must be true, false or null"),
          "strip_accents \"yes\": %s: %s", volt_status_str(st), err);
    write_text(p, "[1]");
    st = volt_distilbert_tokenizer_from_hf(root, &lower, &strip, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "not a JSON object"), "a JSON array: %s: %s", volt_status_str(st), err);
    CHECK(volt_distilbert_tokenizer_from_hf(root, NULL, &strip, err, sizeof err) == VOLT_ERR_INVALID_ARG, "NULL do_lower_case");
    remove(p);
    mkfifo(p, 0644);   /* refused, not waited on */
    signal(SIGALRM, on_alarm);
    alarm(20);
    st = volt_distilbert_tokenizer_from_hf(root, &lower, &strip, err, sizeof err);
    alarm(0);
    CHECK(st == VOLT_ERR_IO && strstr(err, "not a regular file"), "a FIFO: %s: %s", volt_status_str(st), err);
    remove(p);

    /* writing: config_to_hf_ex writes strip_accents as given (-1: null), read back the same;
     * config_to_hf writes null */
    volt_distilbert_config a;
    volt_distilbert_config_init(&a);
    CHECK_OK(volt_distilbert_preset(&a, "tiny"));
    a.n_classes = 2;
    char vocab[1300];
    snprintf(vocab, sizeof vocab, "%s/vocab_src.txt", root);
    write_text(vocab, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nCafe\nCaf\xc3\xa9\ncafe\ncaf\xc3\xa9\n");
    static const struct { bool lower; int strip; const char *want; } out[] = {
        { false, -1, "\"strip_accents\":\tnull" }, { false, 1, "\"strip_accents\":\ttrue" }, { true, 0, "\"strip_accents\":\tfalse" },
    };
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
        CHECK_OK(volt_distilbert_config_to_hf_ex(&a, root, vocab, out[i].lower, out[i].strip, err, sizeof err));
        size_t n = 0;
        unsigned char *t = vtest_slurp(p, &n);
        CHECK(t && strstr((char *)t, out[i].want), "written: %s, want %s", t ? (char *)t : "(none)", out[i].want);
        free(t);
        lower = !out[i].lower;
        strip = 7;
        CHECK_OK(volt_distilbert_tokenizer_from_hf(root, &lower, &strip, err, sizeof err));
        CHECK(lower == out[i].lower && strip == out[i].strip, "read back: %d %d, want %d %d", lower, strip, out[i].lower, out[i].strip);
    }
    CHECK(volt_distilbert_config_to_hf_ex(&a, root, vocab, true, 2, err, sizeof err) == VOLT_ERR_INVALID_ARG, "strip_accents 2: %s", err);
    CHECK_OK(volt_distilbert_config_to_hf(&a, root, vocab, false, err, sizeof err));
    CHECK_OK(volt_distilbert_tokenizer_from_hf(root, &lower, &strip, err, sizeof err));
    CHECK(!lower && strip == -1, "config_to_hf: do_lower_case %d, strip_accents %d (want null)", lower, strip);

    /* the tokenizer as the settings make it: a cased vocab keeps "Café" without stripping; the
     * token cache's key differs between the two, with and without lowercasing */
    volt_tokenizer *keep = load(vocab, false, false), *strip_t = load(vocab, false, true);
    volt_tokenizer *lk = load(vocab, true, false), *ls = load(vocab, true, true);
    CHECK(first_id(keep, "Caf\xc3\xa9") == volt_tokenizer_token_id(keep, "Caf\xc3\xa9"), "cased, no strip: Café is its own token");
    CHECK(first_id(strip_t, "Caf\xc3\xa9") == volt_tokenizer_token_id(strip_t, "Cafe"), "cased, strip: Café -> Cafe");
    CHECK(first_id(lk, "Caf\xc3\xa9") == volt_tokenizer_token_id(lk, "caf\xc3\xa9"), "lowercase, no strip: Café -> café");
    CHECK(first_id(ls, "Caf\xc3\xa9") == volt_tokenizer_token_id(ls, "cafe"), "lowercase, strip: Café -> cafe");
    uint64_t h[4];
    CHECK_OK(volt_text_tokenizer_hash(keep, &h[0]));
    CHECK_OK(volt_text_tokenizer_hash(strip_t, &h[1]));
    CHECK_OK(volt_text_tokenizer_hash(lk, &h[2]));
    CHECK_OK(volt_text_tokenizer_hash(ls, &h[3]));
    CHECK(h[0] != h[1] && h[2] != h[3], "the token cache key tells strip_accents apart: %016llx %016llx, %016llx %016llx",
          (unsigned long long)h[0], (unsigned long long)h[1], (unsigned long long)h[2], (unsigned long long)h[3]);
    volt_tokenizer_destroy(keep);
    volt_tokenizer_destroy(strip_t);
    volt_tokenizer_destroy(lk);
    volt_tokenizer_destroy(ls);
    return vtest_finish();
}
