/* volt-text-classification: the corpus, its split, the tokenizer, the datasets and loaders. */
#include "text_app.h"

static int text_load_corpus_files(const opts *o, app *a);
static int text_check_labels(const opts *o, const app *a);

int text_load_corpus(const opts *o, app *a) {   /* timed: the "read in" of the corpus line */
    const double t0 = app_now_s();
    const int rc = text_load_corpus_files(o, a);
    a->read_s = app_now_s() - t0;
    return rc;
}

static int text_load_corpus_files(const opts *o, app *a) {
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
            fprintf(stderr, APP ": %s file '%s' %s\n", text_kind_name(o->kind), o->data_path, not_file_why(o->data_path));
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
    return text_check_labels(o, a);
}

/* The first text with label lab, quoted and cut short (a message names it: the loaders keep
 * no line numbers), into buf. */
static void text_with_label(const volt_corpus *c, int32_t lab, char *buf, size_t n) {
    int64_t i = 0;
    const int64_t len = volt_corpus_len(c);
    while (i < len && volt_corpus_label(c, i) != lab) i++;
    size_t tl = 0;
    const char *t = i < len ? volt_corpus_text(c, i, &tl) : "";
    const size_t cap = 60;
    size_t k = tl < cap ? tl : cap;
    while (k > 0 && k < tl && ((unsigned char)t[k] & 0xC0) == 0x80) k--;   /* not inside a UTF-8 character */
    size_t w = 0;
    buf[w++] = '"';
    for (size_t j = 0; j < k && w + 5 < n; j++) buf[w++] = (unsigned char)t[j] < 0x20 || t[j] == 0x7F ? ' ' : t[j];
    if (k < tl && w + 5 < n) { memcpy(buf + w, "...", 3); w += 3; }
    buf[w++] = '"';
    buf[w] = 0;
}

/* The class count is 1 + the largest label, so one stray label sets the classifier's size:
 * a label past model.num_classes (given) or past the bound, or labels that leave classes
 * without any text (not 0..K-1; allowed when model.num_classes is given), are refused here,
 * before a head of millions of rows is built (and checkpointed). */
static int text_check_labels(const opts *o, const app *a) {
    const volt_corpus *c = a->all;
    const int64_t k = volt_corpus_num_classes(c), n = volt_corpus_len(c);
    const int32_t top = (int32_t)(k - 1);
    char txt[80];
    if (o->num_classes > 0 ? k > o->num_classes : k > TEXT_MAX_CLASSES) {
        text_with_label(c, top, txt, sizeof txt);
        if (o->num_classes > 0)
            fprintf(stderr, APP ": corpus '%s': label %lld (first on the text %s) is out of range for --model.num_classes "
                    "%lld (labels 0..%lld)\n", volt_corpus_name(c), (long long)top, txt, (long long)o->num_classes,
                    (long long)o->num_classes - 1);
        else
            fprintf(stderr, APP ": corpus '%s': label %lld (first on the text %s) makes %lld classes, more than the %d "
                    "a model may have: relabel the classes 0..K-1\n", volt_corpus_name(c), (long long)top, txt,
                    (long long)k, TEXT_MAX_CLASSES);
        return 1;
    }
    if (o->num_classes > 0) return 0;   /* classes without texts asked for */
    unsigned char *seen = calloc((size_t)k, 1);
    if (!seen) return fail("checking the labels", VOLT_ERR_NOMEM, NULL);
    for (int64_t i = 0; i < n; i++) {
        const int32_t l = volt_corpus_label(c, i);
        if (l >= 0 && l < k) seen[l] = 1;
    }
    int64_t missing = 0, first = -1;
    for (int64_t l = 0; l < k; l++)
        if (!seen[l]) { missing++; if (first < 0) first = l; }
    free(seen);
    if (!missing) return 0;
    text_with_label(c, top, txt, sizeof txt);
    fprintf(stderr, APP ": corpus '%s': the largest label is %lld (first on the text %s), so %lld classes, but %lld of "
            "them %s no text (label %lld is the first): relabel the classes 0..K-1, or set --model.num_classes %lld "
            "to train with the empty ones\n", volt_corpus_name(c), (long long)top, txt, (long long)k, (long long)missing,
            missing == 1 ? "has" : "have", (long long)first, (long long)k);
    return 1;
}

int text_split_corpus(const opts *o, app *a, int64_t n_out[3]) {
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

int text_load_tokenizer(const opts *o, app *a) {
    if (!is_file(o->vocab)) {
        fprintf(stderr, APP ": vocab '%s' %s.\n", o->vocab, not_file_why(o->vocab));
        if (!o->vocab_given)
            fprintf(stderr, "  Fetch the bert-base-uncased vocab first with:  scripts/fetch_vocab.sh\n"
                            "  (or pass --vocab PATH, or --pretrained DIR holding vocab.txt)\n");
        return 1;
    }
    char err[512] = "";
    volt_tokenizer_config tc;
    volt_tokenizer_config_init(&tc);
    tc.lowercase = o->lowercase;
    tc.strip_accents = o->strip_accents;
    tc.errbuf = err;
    tc.errbuf_size = sizeof err;
    volt_status st = volt_tokenizer_load(&tc, o->vocab, &a->tok);
    if (st < 0) {
        fprintf(stderr, APP ": bad vocab '%s' (%s): %s\n", o->vocab, volt_status_str(st), err);
        return 1;
    }
    return 0;
}

int text_make_datasets(const opts *o, app *a) {
    char cache[PATH_N], err[1024] = "";
    const char *cache_dir = NULL;
    if (!o->no_cache) {
        if (o->cache_dir) cache_dir = o->cache_dir;
        else if (volt_text_default_cache_dir(cache, sizeof cache) == VOLT_OK) cache_dir = cache;
    }
    struct stat sb;
    if (cache_dir && stat(cache_dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {   /* said once; the summary then says "no cache" */
        if (a->zero) fprintf(stderr, APP ": --cache-dir '%s' is not a folder: not caching\n", cache_dir);
        cache_dir = NULL;
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

int text_make_loaders(const opts *o, app *a) {
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = o->batch_size;
    lc.num_workers = o->tr.workers;
    lc.seed = o->tr.seed;
    for (int i = 0; i < 3; i++) {
        volt_loader_config c = lc;
        c.shuffle = i == 0;
        c.drop_last = i == 0 && o->drop_last;
        volt_status st = volt_loader_create(&c, a->ds[i], &a->ld[i]);
        if (st < 0) return fail("creating the data loaders", st, NULL);
    }
    return 0;
}

int text_count_tokens(app *a) {
    for (int s = 0; s < 3; s++) {
        const volt_dataset *ds = a->ds[s];
        if (!ds) continue;
        int mf = -1;
        for (int f = 0; f < ds->n_fields; f++)
            if (!strcmp(ds->fields[f].name, "attention_mask")) mf = f;
        const int64_t n = volt_dataset_len(ds);
        if (mf < 0 || ds->fields[mf].dtype != VOLT_I32) { fprintf(stderr, APP ": --throughput: no i32 attention_mask\n"); return 1; }
        void *buf[VOLT_MAX_FIELDS] = { 0 };
        bool ok = (a->ntok[s] = malloc(sizeof *a->ntok[s] * (size_t)(n ? n : 1))) != NULL;
        for (int f = 0; f < ds->n_fields && ok; f++) {
            int64_t numel = 1;
            for (int d = 0; d < ds->fields[f].shape.ndim; d++) numel *= ds->fields[f].shape.d[d];
            ok = (buf[f] = malloc((size_t)numel * volt_dtype_size(ds->fields[f].dtype))) != NULL;
        }
        const int64_t L = ds->fields[mf].shape.ndim ? ds->fields[mf].shape.d[0] : 1;
        for (int64_t i = 0; i < n && ok; i++) {
            ok = ds->ops->get(ds->self, i, buf) == VOLT_OK;
            const int32_t *m = buf[mf];
            int32_t c = 0;
            for (int64_t k = 0; k < L; k++) c += m[k] != 0;
            a->ntok[s][i] = c;
        }
        for (int f = 0; f < VOLT_MAX_FIELDS; f++) free(buf[f]);
        if (!ok) { fprintf(stderr, APP ": --throughput: counting the tokens of the %s split failed\n", s ? s == 1 ? "val" : "test" : "train"); return 1; }
    }
    return 0;
}

/* fit's batches are train's, validation's val's (inside fit too), test's test's */
static int split_of(volt_trainer *t) {
    switch (volt_trainer_stage(t)) {
    case VOLT_STAGE_FIT: return 0;
    case VOLT_STAGE_VALIDATE: return 1;
    default: return 2;
    }
}

int64_t text_batch_tokens(void *ctx, volt_trainer *t, const volt_batch *b) {
    const app *a = ctx;
    const int32_t *n = a->ntok[split_of(t)];
    const int64_t len = a->ds[split_of(t)] ? volt_dataset_len(a->ds[split_of(t)]) : 0;
    int64_t sum = 0;
    for (int64_t r = 0; r < b->size; r++) {
        const int64_t id = b->sample_ids ? b->sample_ids[r] : -1;
        sum += n && id >= 0 && id < len ? n[id] : 0;
    }
    return sum;
}

double text_batch_flops(void *ctx, volt_trainer *t, const volt_batch *b) {
    const app *a = ctx;
    const volt_tensor *ids = volt_batch_field(b, "input_ids");
    const int64_t T = ids && ids->shape.ndim >= 2 ? ids->shape.d[1] : 0;
    return volt_distilbert_flops(&a->mc, b->size, T, volt_trainer_stage(t) == VOLT_STAGE_FIT);
}

/* The model's config, checked before any tokenizing so a bad flag fails fast. */

const char *text_kind_name(data_kind k) {
    switch (k) {
    case DATA_IMDB: return "imdb";
    case DATA_CSV: return "csv";
    case DATA_TSV: return "tsv";
    case DATA_SPAM: return "spam";
    }
    return "?";
}
