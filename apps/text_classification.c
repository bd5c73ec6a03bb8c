/* volt-text-classification: fine-tune (or train from scratch) DistilBERT for text
 * classification, the Lightning recipe:
 *
 *   IMDB 35k train / 5k val / 10k test (a seeded split of the 50k reviews), WordPiece
 *   ids padded/truncated to 512, batch 12, torch.optim.Adam lr 5e-5, 3 epochs,
 *   ModelCheckpoint(monitor="val_acc", mode="max", save_top_k=1, save_last=True), CSV logs;
 *   fit, print "Time elapsed X.XX min", test with the best checkpoint, print
 *   "Test accuracy 0.XXXX".
 *
 * Every knob is a flag (--help). Data: IMDB (aclImdb/ folder), a `text,label` CSV, a
 * `text<TAB>label` TSV or the SpamAssassin corpus (the default). Under a distributed
 * --strategy (scripts/volt-run -n N) only rank 0 prints; the trainer flags, --memory-report
 * and --export-full are apps/app_common.c, shared with volt-fashion-mnist. Written only
 * against the public headers; docs/TEXT_CLASSIFICATION.md has the usage and measured numbers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "volt/core.h"
#include "volt/data.h"
#include "volt/trainer.h"
#include "volt/optim.h"
#include "volt/tokenizer.h"
#include "volt/text.h"
#include "volt/distilbert.h"
#include "app_common.h"

#define APP "volt-text-classification"
#define PATH_N 4096

typedef enum data_kind { DATA_IMDB, DATA_CSV, DATA_TSV, DATA_SPAM } data_kind;

typedef struct opts {
    const char *data;             /* the --data spec as given */
    data_kind kind;
    char data_path[PATH_N];       /* folder or file the spec names (resolved) */
    char vocab[PATH_N];           /* resolved: --vocab, else <pretrained>/vocab.txt, else ~/.cache */
    bool vocab_given;
    const char *preset, *pretrained, *cache_dir;
    bool no_cache;
    int max_length;
    int64_t batch_size, epochs;   /* batch_size: per rank */
    float lr, weight_decay, attention_dropout;   /* attention_dropout < 0: the model's default */
    volt_optim_kind optimizer;
    const char *schedule;         /* "constant" or "linear" */
    int64_t warmup_steps;
    bool split_given, split_is_frac;
    int64_t split_n[3];
    double split_f[3];
    app_trainer_opts tr;          /* --seed, --root, --strategy, ... (apps/app_common.h) */
} opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: " APP " [options]\n"
            "Fine-tune DistilBERT for text classification and report the test accuracy of the\n"
            "best checkpoint by val_acc. Defaults follow the Lightning DistilBERT/IMDB recipe.\n"
            "\n"
            "data\n"
            "  --data SPEC                imdb:DIR   the aclImdb/ folder (or a folder holding it)\n"
            "                             csv:PATH   RFC 4180 CSV with 'text' and 'label' columns\n"
            "                             tsv:PATH   text<TAB>label lines\n"
            "                             spam[:DIR] SpamAssassin corpus from scripts/fetch_spam.sh\n"
            "                             (default spam, DIR ~/.cache/volt/spam-assassin)\n"
            "  --split A,B,C              train,val,test sizes: counts (35000,5000,10000 for IMDB)\n"
            "                             or fractions (0.8,0.1,0.1, the default for the others)\n"
            "  --vocab PATH               WordPiece vocab.txt (default <pretrained>/vocab.txt if\n"
            "                             --pretrained has one, else ~/.cache/volt/bert-base-uncased/\n"
            "                             vocab.txt from scripts/fetch_vocab.sh)\n"
            "  --max-length N             tokens per text, [CLS] and [SEP] included (default 512)\n"
            "  --cache-dir DIR            token cache (default ~/.cache/volt/tokens)\n"
            "  --no-cache                 tokenize without reading or writing the cache\n"
            "model\n"
            "  --model-preset P           distilbert-base (default), small or tiny\n"
            "  --pretrained DIR           load DIR/model.safetensors (a Hugging Face\n"
            "                             distilbert-base-uncased); default: train from scratch\n"
            "  --attention-dropout F      on the attention probabilities (default 0.1; 0 = the\n"
            "                             fused attention kernel, faster)\n"
            "optimisation\n"
            "  --epochs N                 (default 3)\n"
            "  --batch-size N             per rank (default 12)\n"
            "  --lr F                     learning rate (default 5e-5)\n"
            "  --optimizer adam|adamw     (default adam, torch.optim.Adam)\n"
            "  --weight-decay F           (default 0)\n"
            "  --lr-schedule constant|linear\n"
            "                             linear: decay to 0 at the last training step (HF's\n"
            "                             linear schedule with warmup); default constant\n"
            "  --warmup-steps N           linear warmup from 0 over N steps, then the schedule\n"
            "                             (default 0)\n"
            "  --seed N                   split, init, shuffle and dropout seed (default 42)\n"
            "trainer\n"
            "  --root DIR                 logs and checkpoints (default ./runs/text)\n"
            "  --resume                   continue from the last checkpoint in\n"
            "                             ROOT/checkpoints/<data>-<preset>\n");
    app_trainer_usage(f);
    fputs("  -h, --help                 this text\n", f);
}

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* "a,b,c": three non-negative integers (counts) or three numbers in [0, 1] (fractions). */
static bool parse_split(const char *s, opts *o) {
    char buf[256];
    if (strlen(s) >= sizeof buf) return false;
    strcpy(buf, s);
    char *parts[3], *save = NULL, *tok = strtok_r(buf, ",", &save);
    int n = 0;
    for (; tok && n < 3; tok = strtok_r(NULL, ",", &save)) parts[n++] = tok;
    if (n != 3 || tok) return false;
    bool ints = true;
    for (int i = 0; i < 3; i++) ints = ints && app_parse_i64(parts[i], 0, INT64_MAX / 4, &o->split_n[i]);
    if (ints) {
        o->split_is_frac = false;
        return o->split_n[0] > 0;
    }
    double sum = 0;
    for (int i = 0; i < 3; i++) {
        float f;
        if (!app_parse_f(parts[i], 0.f, 1.f, &f)) return false;
        o->split_f[i] = f;
        sum += f;
    }
    o->split_is_frac = true;
    return o->split_f[0] > 0 && sum <= 1.0 + 1e-6;
}

static bool home_path(char *buf, size_t n, const char *rel) {
    const char *home = getenv("HOME");
    if (!home || !*home) return false;
    return snprintf(buf, n, "%s/%s", home, rel) < (int)n;
}

static bool parse_data(const char *spec, opts *o) {
    const char *colon = strchr(spec, ':');
    size_t kl = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *arg = colon ? colon + 1 : NULL;
    if (kl == 4 && !strncmp(spec, "spam", 4)) {
        o->kind = DATA_SPAM;
        if (arg && *arg) return snprintf(o->data_path, PATH_N, "%s", arg) < PATH_N;
        if (!home_path(o->data_path, PATH_N, ".cache/volt/spam-assassin")) {
            fprintf(stderr, APP ": --data spam: $HOME is not set; give the folder as spam:DIR\n");
            return false;
        }
        return true;
    }
    if (kl == 4 && !strncmp(spec, "imdb", 4)) o->kind = DATA_IMDB;
    else if (kl == 3 && !strncmp(spec, "csv", 3)) o->kind = DATA_CSV;
    else if (kl == 3 && !strncmp(spec, "tsv", 3)) o->kind = DATA_TSV;
    else {
        fprintf(stderr, APP ": --data '%s': expected imdb:DIR, csv:PATH, tsv:PATH or spam[:DIR]\n", spec);
        return false;
    }
    if (!arg || !*arg) {
        fprintf(stderr, APP ": --data '%s': the %.*s source needs a path (%.*s:PATH)\n", spec, (int)kl, spec,
                (int)kl, spec);
        return false;
    }
    return snprintf(o->data_path, PATH_N, "%s", arg) < PATH_N;
}

/* Returns 0 to go on, 1 after --help, 2 on a usage error (message printed). */
static int parse_args(int argc, char **argv, opts *o) {
    *o = (opts){ .data = "spam", .preset = "distilbert-base", .max_length = 512, .batch_size = 12, .epochs = 3,
                 .lr = 5e-5f, .weight_decay = 0.f, .attention_dropout = -1.f, .optimizer = VOLT_OPTIM_ADAM,
                 .schedule = "constant" };
    app_trainer_opts_init(&o->tr, "./runs/text");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 1; }
        if (app_trainer_switch(a, &o->tr)) continue;
        if (!strcmp(a, "--no-cache")) { o->no_cache = true; continue; }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, APP ": unexpected argument '%s' (try --help)\n", a);
            return 2;
        }
        static const char *const known[] = {
            "--data", "--split", "--vocab", "--max-length", "--cache-dir", "--model-preset", "--pretrained",
            "--attention-dropout", "--epochs", "--batch-size", "--lr", "--optimizer", "--weight-decay",
            "--lr-schedule", "--warmup-steps", NULL };
        bool is_known = app_trainer_has_flag(a);
        for (int k = 0; known[k]; k++) is_known = is_known || !strcmp(a, known[k]);
        if (!is_known) {
            fprintf(stderr, APP ": unknown option '%s' (try --help)\n", a);
            return 2;
        }
        if (i + 1 >= argc) { fprintf(stderr, APP ": %s needs a value (try --help)\n", a); return 2; }
        const char *v = argv[++i];
        const char *why = "";
        int r = app_trainer_flag(a, v, &o->tr, &why);
        bool ok = r >= 0;
        if (r != 0) { /* a trainer flag, stored (or a bad value, reported below) */ }
        else if (!strcmp(a, "--data")) { o->data = v; continue; }
        else if (!strcmp(a, "--split")) { ok = parse_split(v, o); o->split_given = true;
            why = " (want three counts like 35000,5000,10000 or fractions like 0.8,0.1,0.1 summing to <= 1, "
                  "train > 0)"; }
        else if (!strcmp(a, "--vocab")) { ok = *v && snprintf(o->vocab, PATH_N, "%s", v) < PATH_N; o->vocab_given = true; }
        else if (!strcmp(a, "--max-length")) { int64_t n = 0; ok = app_parse_i64(v, 2, 1 << 20, &n); o->max_length = (int)n; why = " (want an integer >= 2)"; }
        else if (!strcmp(a, "--cache-dir")) { ok = *v != 0; o->cache_dir = v; }
        else if (!strcmp(a, "--model-preset")) {
            o->preset = v;
            ok = !strcmp(v, "distilbert-base") || !strcmp(v, "small") || !strcmp(v, "tiny");
            why = " (want distilbert-base, small or tiny)";
        }
        else if (!strcmp(a, "--pretrained")) { ok = *v != 0; o->pretrained = v; }
        else if (!strcmp(a, "--attention-dropout")) { ok = app_parse_f(v, 0.f, 0.999f, &o->attention_dropout); why = " (want a number in [0, 1))"; }
        else if (!strcmp(a, "--epochs")) { ok = app_parse_i64(v, 1, INT64_MAX / 4, &o->epochs); why = " (want an integer >= 1)"; }
        else if (!strcmp(a, "--batch-size")) { ok = app_parse_i64(v, 1, 1 << 20, &o->batch_size); why = " (want an integer >= 1)"; }
        else if (!strcmp(a, "--lr")) { ok = app_parse_f(v, 0.f, 1e3f, &o->lr) && o->lr > 0.f; why = " (want a number > 0)"; }
        else if (!strcmp(a, "--optimizer")) {
            if (!strcmp(v, "adam")) o->optimizer = VOLT_OPTIM_ADAM;
            else if (!strcmp(v, "adamw")) o->optimizer = VOLT_OPTIM_ADAMW;
            else ok = false;
            why = " (want adam or adamw)";
        }
        else if (!strcmp(a, "--weight-decay")) { ok = app_parse_f(v, 0.f, 1e3f, &o->weight_decay); why = " (want a number >= 0)"; }
        else if (!strcmp(a, "--lr-schedule")) {
            o->schedule = v;
            ok = !strcmp(v, "constant") || !strcmp(v, "linear");
            why = " (want constant or linear)";
        }
        else if (!strcmp(a, "--warmup-steps")) { ok = app_parse_i64(v, 0, INT64_MAX / 4, &o->warmup_steps); why = " (want an integer >= 0)"; }
        if (!ok) { fprintf(stderr, APP ": bad value '%s' for %s%s\n", v, a, why); return 2; }
    }
    if (!parse_data(o->data, o)) return 2;
    if (!o->vocab_given) {
        char pv[PATH_N];
        if (o->pretrained && snprintf(pv, sizeof pv, "%s/vocab.txt", o->pretrained) < (int)sizeof pv && is_file(pv))
            snprintf(o->vocab, PATH_N, "%s", pv);
        else if (!home_path(o->vocab, PATH_N, ".cache/volt/bert-base-uncased/vocab.txt")) {
            fprintf(stderr, APP ": $HOME is not set; pass --vocab PATH\n");
            return 2;
        }
    }
    return 0;
}

/* A JSON string literal of s into out (quotes and escapes; truncates safely). */
static void json_str(char *out, size_t n, const char *s) {
    size_t k = 0;
    if (n < 3) { if (n) out[0] = 0; return; }
    out[k++] = '"';
    for (; s && *s && k + 8 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { out[k++] = '\\'; out[k++] = (char)c; }
        else if (c < 0x20) k += (size_t)snprintf(out + k, n - k, "\\u%04x", c);
        else out[k++] = (char)c;
    }
    out[k++] = '"';
    out[k] = 0;
}

static const char *kind_name(data_kind k) {
    switch (k) {
    case DATA_IMDB: return "imdb";
    case DATA_CSV: return "csv";
    case DATA_TSV: return "tsv";
    case DATA_SPAM: return "spam";
    }
    return "?";
}

/* Everything main allocates, released in one place (so error paths leak nothing). */
typedef struct app {
    volt_corpus *all, *part[3];
    volt_tokenizer *tok;
    volt_dataset *ds[3];
    volt_loader *ld[3];
    void *model;
    volt_trainer *t;
    bool zero;         /* rank 0, which prints the informational lines (errors: any rank) */
} app;

static void app_free(app *a) {
    volt_trainer_destroy(a->t);
    for (int i = 0; i < 3; i++) {
        volt_loader_destroy(a->ld[i]);
        volt_dataset_destroy(a->ds[i]);
        volt_corpus_destroy(a->part[i]);
    }
    volt_distilbert_destroy(a->model);
    volt_tokenizer_destroy(a->tok);
    volt_corpus_destroy(a->all);
}

static int fail(const char *what, volt_status st, const char *msg) { return app_fail(APP, what, st, msg); }

static int load_corpus(const opts *o, app *a) {
    char err[1024] = "";
    volt_status st;
    char dir[PATH_N + 16];
    switch (o->kind) {
    case DATA_SPAM:
        if (!is_dir(o->data_path)) {
            fprintf(stderr,
                    APP ": SpamAssassin corpus not found at '%s'.\n"
                    "  Fetch it first with:  scripts/fetch_spam.sh%s%s\n"
                    "  (or pick other data with --data imdb:DIR | csv:PATH | tsv:PATH)\n",
                    o->data_path, strchr(o->data, ':') ? " " : "", strchr(o->data, ':') ? o->data_path : "");
            return 1;
        }
        st = volt_corpus_load_spam_assassin(o->data_path, &a->all, err, sizeof err);
        break;
    case DATA_IMDB:
        /* Accept the aclImdb folder itself or a folder that holds it. */
        snprintf(dir, sizeof dir, "%s/train", o->data_path);
        if (is_dir(dir)) snprintf(dir, sizeof dir, "%s", o->data_path);
        else snprintf(dir, sizeof dir, "%s/aclImdb", o->data_path);
        if (!is_dir(dir)) snprintf(dir, sizeof dir, "%s", o->data_path);
        if (!is_dir(dir)) {
            fprintf(stderr, APP ": IMDB folder '%s' not found (want the extracted aclImdb/ of "
                            "aclImdb_v1.tar.gz, holding train/ and test/)\n", dir);
            return 1;
        }
        st = volt_corpus_load_imdb(dir, &a->all, err, sizeof err);
        break;
    case DATA_CSV:
    case DATA_TSV:
        if (!is_file(o->data_path)) {
            fprintf(stderr, APP ": %s file '%s' not found\n", kind_name(o->kind), o->data_path);
            return 1;
        }
        st = o->kind == DATA_CSV ? volt_corpus_load_csv(o->data_path, &a->all, err, sizeof err)
                                 : volt_corpus_load_tsv(o->data_path, &a->all, err, sizeof err);
        break;
    default:
        return 1;
    }
    if (st < 0) return fail("loading the corpus", st, err);
    if (volt_corpus_len(a->all) == 0) {
        fprintf(stderr, APP ": corpus '%s' is empty\n", volt_corpus_name(a->all));
        return 1;
    }
    if (volt_corpus_num_classes(a->all) < 2) {
        fprintf(stderr, APP ": corpus '%s' has only label 0; classification needs at least two labels\n",
                volt_corpus_name(a->all));
        return 1;
    }
    return 0;
}

static int split_corpus(const opts *o, app *a, int64_t n_out[3]) {
    int64_t n = volt_corpus_len(a->all);
    int64_t c[3];
    if (o->split_given && !o->split_is_frac) {
        memcpy(c, o->split_n, sizeof c);
    } else if (!o->split_given && o->kind == DATA_IMDB) {
        c[0] = 35000; c[1] = 5000; c[2] = 10000;        /* the recipe */
    } else {
        double f[3] = { 0.8, 0.1, 0.1 };
        if (o->split_given) memcpy(f, o->split_f, sizeof f);
        c[0] = llround(f[0] * (double)n);
        c[1] = llround(f[1] * (double)n);
        if (c[0] + c[1] > n) c[1] = n - c[0];
        c[2] = llround(f[2] * (double)n);
        if (c[0] + c[1] + c[2] > n) c[2] = n - c[0] - c[1];
    }
    if (c[0] + c[1] + c[2] > n || c[0] < 1) {
        fprintf(stderr, APP ": split %lld/%lld/%lld needs %lld texts, corpus '%s' has %lld (set --split)\n",
                (long long)c[0], (long long)c[1], (long long)c[2], (long long)(c[0] + c[1] + c[2]),
                volt_corpus_name(a->all), (long long)n);
        return 1;
    }
    if (c[2] < 1) {
        fprintf(stderr, APP ": split %lld/%lld/%lld leaves no test texts (set --split)\n", (long long)c[0],
                (long long)c[1], (long long)c[2]);
        return 1;
    }
    volt_status st = volt_corpus_split(a->all, c[0], c[1], c[2], o->tr.seed, &a->part[0], &a->part[1], &a->part[2]);
    if (st < 0) return fail("splitting the corpus", st, NULL);
    memcpy(n_out, c, sizeof c);
    return 0;
}

static int load_tokenizer(const opts *o, app *a) {
    if (!is_file(o->vocab)) {
        fprintf(stderr, APP ": vocab '%s' not found.\n", o->vocab);
        if (!o->vocab_given)
            fprintf(stderr, "  Fetch the bert-base-uncased vocab first with:  scripts/fetch_vocab.sh\n"
                            "  (or pass --vocab PATH, or --pretrained DIR holding vocab.txt)\n");
        return 1;
    }
    char err[512] = "";
    volt_tokenizer_config tc;
    volt_tokenizer_config_init(&tc);
    tc.errbuf = err;
    tc.errbuf_size = sizeof err;
    volt_status st = volt_tokenizer_load(&tc, o->vocab, &a->tok);
    if (st < 0) {
        fprintf(stderr, APP ": bad vocab '%s' (%s): %s\n", o->vocab, volt_status_str(st), err);
        return 1;
    }
    return 0;
}

static int make_datasets(const opts *o, app *a) {
    char cache[PATH_N], err[1024] = "";
    const char *cache_dir = NULL;
    if (!o->no_cache) {
        if (o->cache_dir) cache_dir = o->cache_dir;
        else if (volt_text_default_cache_dir(cache, sizeof cache) == VOLT_OK) cache_dir = cache;
    }
    static const char *const names[3] = { "train", "val", "test" };
    double t0 = app_now_s();
    int hits = 0;
    for (int i = 0; i < 3; i++) {
        bool hit = false;
        volt_status st = volt_text_dataset(a->part[i], a->tok, o->max_length, cache_dir, &a->ds[i], &hit, err, sizeof err);
        if (st < 0) {
            char what[64];
            snprintf(what, sizeof what, "tokenizing the %s split", names[i]);
            return fail(what, st, err);
        }
        hits += hit;
    }
    if (a->zero)
        printf("tokenized to %d tokens in %.1f s (%s)\n", o->max_length, app_now_s() - t0,
           !cache_dir ? "no cache" : hits == 3 ? "cache hit" : hits ? "partly cached" : "cache written");
    return 0;
}

static int make_loaders(const opts *o, app *a) {
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = o->batch_size;
    lc.num_workers = o->tr.workers;
    lc.seed = o->tr.seed;
    for (int i = 0; i < 3; i++) {
        volt_loader_config c = lc;
        c.shuffle = i == 0;
        volt_status st = volt_loader_create(&c, a->ds[i], &a->ld[i]);
        if (st < 0) return fail("creating the data loaders", st, NULL);
    }
    return 0;
}

/* The model's config, checked before any tokenizing so a bad flag fails fast. */
static int model_config(const opts *o, const app *a, int n_classes, int64_t n_train, volt_distilbert_config *mc) {
    volt_distilbert_config_init(mc);
    volt_status st = volt_distilbert_preset(mc, o->preset);
    if (st < 0) return fail("choosing the model preset", st, o->preset);
    int vocab_n = volt_tokenizer_vocab_size(a->tok);
    if (o->pretrained) {
        char p[PATH_N + 32];
        snprintf(p, sizeof p, "%s/model.safetensors", o->pretrained);
        if (!is_file(p)) {
            fprintf(stderr, APP ": --pretrained: '%s' not found (want a local Hugging Face "
                            "distilbert-base-uncased folder with model.safetensors and vocab.txt)\n", p);
            return 1;
        }
        /* The embedding comes from the file: the tokenizer must not produce ids past it. */
        if (vocab_n > mc->vocab_size) {
            fprintf(stderr, APP ": vocab '%s' has %d tokens, the %s model's embedding has %lld rows\n", o->vocab,
                    vocab_n, o->preset, (long long)mc->vocab_size);
            return 1;
        }
        mc->pretrained_dir = o->pretrained;
    } else {
        mc->vocab_size = vocab_n;      /* from scratch: one embedding row per vocab entry */
    }
    if (o->max_length > mc->max_position) {
        fprintf(stderr, APP ": --max-length %d exceeds the %s model's %lld positions\n", o->max_length, o->preset,
                (long long)mc->max_position);
        return 1;
    }
    mc->n_classes = n_classes;
    mc->pad_token_id = volt_tokenizer_pad_id(a->tok);
    mc->optimizer = o->optimizer;
    mc->lr = o->lr;
    mc->weight_decay = o->weight_decay;
    if (o->attention_dropout >= 0.f) mc->attention_dropout = o->attention_dropout;
    mc->warmup_steps = o->warmup_steps;
    if (!strcmp(o->schedule, "linear")) {
        /* each of the N ranks gets ceil(n_train / N) texts (wrap-around padding), in
         * batch_size batches, the last one kept: the optimizer steps of an epoch */
        const int64_t world = app_env_world(), per_rank = (n_train + world - 1) / world;
        int64_t per_epoch = (per_rank + o->batch_size - 1) / o->batch_size;
        if (o->tr.limit_train > 0 && o->tr.limit_train < per_epoch) per_epoch = o->tr.limit_train;
        mc->total_steps = per_epoch * o->epochs;
        if (mc->total_steps < 1) mc->total_steps = 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    opts o;
    int pr = parse_args(argc, argv, &o);
    if (pr) return pr == 1 ? 0 : 1;

    app a = { .zero = app_env_rank() == 0 };   /* the trainer's own view once it exists */
    int rc = 1;
    int64_t n_split[3] = { 0, 0, 0 };
    if (load_corpus(&o, &a) || split_corpus(&o, &a, n_split) || load_tokenizer(&o, &a)) goto out;
    int n_classes = volt_corpus_num_classes(a.all);
    if (a.zero) {
        printf(APP ": %s '%s': %lld texts, %d classes; split %lld/%lld/%lld (seed %llu)\n", kind_name(o.kind),
               o.data_path, (long long)volt_corpus_len(a.all), n_classes, (long long)n_split[0], (long long)n_split[1],
               (long long)n_split[2], (unsigned long long)o.tr.seed);
        fflush(stdout);
    }
    volt_distilbert_config mc;
    if (model_config(&o, &a, n_classes, n_split[0], &mc)) goto out;
    volt_status st = volt_distilbert_create(&mc, &a.model);
    if (st < 0) { fail("creating the model", st, "check --model-preset, --lr and the other model flags"); goto out; }
    if (make_datasets(&o, &a) || make_loaders(&o, &a)) goto out;

    /* ---- trainer ---- */
    char jdata[PATH_N + 16], jvocab[PATH_N + 16], jpre[PATH_N + 16];
    json_str(jdata, sizeof jdata, o.data_path);
    json_str(jvocab, sizeof jvocab, o.vocab);
    json_str(jpre, sizeof jpre, o.pretrained ? o.pretrained : "");
    char run_json[3 * PATH_N + 1024];
    snprintf(run_json, sizeof run_json,
             "{\"app\": \"" APP "\", \"data\": \"%s\", \"data_path\": %s, \"split\": [%lld, %lld, %lld], "
             "\"vocab\": %s, \"max_length\": %d, \"model_preset\": \"%s\", \"pretrained\": %s, "
             "\"n_classes\": %d, \"epochs\": %lld, \"batch_size\": %lld, \"lr\": %g, \"optimizer\": \"%s\", "
             "\"weight_decay\": %g, \"lr_schedule\": \"%s\", \"warmup_steps\": %lld, \"seed\": %llu, "
             "\"workers\": %d, \"precision\": \"%s\", \"strategy\": \"%s\"}",
             kind_name(o.kind), jdata, (long long)n_split[0], (long long)n_split[1], (long long)n_split[2], jvocab,
             o.max_length, o.preset, jpre, n_classes, (long long)o.epochs, (long long)o.batch_size, o.lr,
             o.optimizer == VOLT_OPTIM_ADAMW ? "adamw" : "adam", o.weight_decay, o.schedule,
             (long long)o.warmup_steps, (unsigned long long)o.tr.seed, o.tr.workers, o.tr.precision, o.tr.strategy);
    volt_trainer_config tc;
    volt_trainer_config_init(&tc);
    app_trainer_config(&o.tr, &tc);
    tc.max_epochs = o.epochs;
    tc.enable_logger = true;                       /* CSVLogger: ROOT/lightning_logs/version_N */
    tc.run_config_json = run_json;
    st = volt_trainer_create(&tc, &a.t);
    if (st < 0) { fail("creating the trainer", st, a.t ? volt_trainer_errmsg(a.t) : NULL); goto out; }
    /* A fixed checkpoint folder per (data kind, preset), not per run version, so --resume
     * finds "last". */
    char ckdir[PATH_N + 64];
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints/%s-%s", o.tr.root, kind_name(o.kind), o.preset);
    if ((st = app_add_checkpoint(a.t, ckdir, "{epoch}-{step}-{val_acc:.4f}")) < 0) {
        fail("adding ModelCheckpoint", st, volt_trainer_errmsg(a.t));
        goto out;
    }
    if (o.tr.memory_report && (st = app_add_memory_report(a.t)) < 0) {
        fail("adding the memory report", st, volt_trainer_errmsg(a.t));
        goto out;
    }
    a.zero = volt_trainer_is_global_zero(a.t);
    const int world = volt_trainer_world_size(a.t);

    if (a.zero) {
        printf("model: %s%s%s, %lld classes, max_length %d; %s lr %g, batch %lld", o.preset,
               o.pretrained ? " from " : " from scratch", o.pretrained ? o.pretrained : "", (long long)n_classes,
               o.max_length, o.optimizer == VOLT_OPTIM_ADAMW ? "AdamW" : "Adam", o.lr, (long long)o.batch_size);
        if (world > 1) printf(" per rank x %d ranks = %lld (%s)", world, (long long)o.batch_size * world, o.tr.strategy);
        printf(", epochs %lld\n", (long long)o.epochs);
        fflush(stdout);
    }

    double t0 = app_now_s();
    st = volt_trainer_fit(a.t, &volt_distilbert_ops, a.model, a.ld[0], n_split[1] > 0 ? a.ld[1] : NULL,
                          o.tr.resume ? "last" : NULL);
    double fit_s = app_now_s() - t0;
    if (st < 0) { fail("fit", st, volt_trainer_errmsg(a.t)); goto out; }
    if (a.zero) printf("Time elapsed %.2f min\n", fit_s / 60.0);
    if (app_after_fit(a.t, &o.tr, APP)) goto out;
    const char *best = volt_trainer_best_model_path(a.t);
    if (best && a.zero) printf("best checkpoint: %s (val_acc %.4f)\n", best, volt_trainer_best_model_score(a.t));
    fflush(stdout);
    /* trainer.test(ckpt_path="best"): --export-full then writes the weights whose test
     * accuracy is printed (the final weights when there is no best checkpoint). */
    st = volt_trainer_test(a.t, &volt_distilbert_ops, a.model, a.ld[2], best ? "best" : NULL);
    if (st < 0) { fail("test", st, volt_trainer_errmsg(a.t)); goto out; }
    double acc = 0.0;
    if (!volt_trainer_metric(a.t, "test_acc", &acc)) {
        fprintf(stderr, APP ": test ran but logged no test_acc\n");
        goto out;
    }
    if (a.zero) printf("Test accuracy %.4f\n", acc);
    if (app_after_test(a.t, &o.tr, APP)) goto out;
    if (a.zero && volt_trainer_log_dir(a.t)) printf("logs: %s\n", volt_trainer_log_dir(a.t));
    rc = 0;
out:
    fflush(stdout);
    app_free(&a);
    return rc;
}
