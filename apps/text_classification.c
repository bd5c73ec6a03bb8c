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
#include "text_app.h"


static const volt_cli_key tc_keys[] = {
    { "data.source", VOLT_CLI_STRING, "spam", "imdb:DIR (aclImdb/ or a folder holding it), csv:PATH ('text','label' columns), "
      "tsv:PATH (text<TAB>label), spam[:DIR] (SpamAssassin from scripts/fetch_spam.sh; ~/.cache/volt/spam-assassin)", "data", NULL, 0, 0 },
    { "data.split", VOLT_CLI_STRING, NULL, "train,val,test: counts (IMDB default 35000,5000,10000) or fractions (default 0.8,0.1,0.1)",
      "split", NULL, 0, 0 },
    { "data.vocab", VOLT_CLI_STRING, NULL, "WordPiece vocab.txt (null: <pretrained>/vocab.txt, else ~/.cache/volt/bert-base-uncased/vocab.txt)",
      "vocab", NULL, 0, 0 },
    { "data.lowercase", VOLT_CLI_BOOL, NULL, "lowercase before WordPiece (null: tokenizer_config.json's do_lower_case, else true)",
      NULL, NULL, 0, 0 },
    { "data.strip_accents", VOLT_CLI_BOOL, NULL, "strip accents (NFD, drop the marks) before WordPiece (null: "
      "tokenizer_config.json's strip_accents, else as data.lowercase, as Hugging Face's BertTokenizer)", NULL, NULL, 0, 0 },
    { "data.max_length", VOLT_CLI_INT, "512", "tokens per text, [CLS] and [SEP] included", "max-length", NULL, 2, 1 << 20 },
    { "data.cache_dir", VOLT_CLI_STRING, NULL, "token cache (null: ~/.cache/volt/tokens)", "cache-dir", NULL, 0, 0 },
    { "data.no_cache", VOLT_CLI_BOOL, "false", "tokenize without reading or writing the cache", "no-cache", NULL, 0, 0 },
    { "data.batch_size", VOLT_CLI_INT, "12", "batch size per rank (the global batch is N times it on N ranks)", "batch-size", NULL, 1, 1 << 20 },
    { "data.drop_last", VOLT_CLI_BOOL, "false", "drop the last incomplete train batch", "drop-last", NULL, 0, 0 },
    { "model.preset", VOLT_CLI_STRING, "distilbert-base", "the shape when there is no --pretrained config.json", "model-preset",
      "distilbert-base|small|tiny", 0, 0 },
    { "model.pretrained", VOLT_CLI_STRING, NULL, "a Hugging Face DistilBERT folder: config.json (the shape), model.safetensors, "
      "vocab.txt, tokenizer_config.json", "pretrained", NULL, 0, 0 },
    { "model.num_classes", VOLT_CLI_INT, NULL, "classes (null: the corpus's labels, 0..K-1 each with an example; predict: the "
      "checkpoint's classifier)", NULL, NULL, 1, TEXT_MAX_CLASSES },
    { "model.attention_dropout", VOLT_CLI_FLOAT, NULL, "on the attention probabilities (null: the model's, 0.1; 0 = fused kernel)",
      "attention-dropout", NULL, 0, 0.999 },
    { "optimizer.name", VOLT_CLI_STRING, "adam", "torch.optim.Adam or AdamW", "optimizer", "adam|adamw", 0, 0 },
    { "optimizer.lr", VOLT_CLI_FLOAT, "5e-05", "learning rate", "lr", NULL, 1e-12, 1e3 },
    { "optimizer.weight_decay", VOLT_CLI_FLOAT, "0", "weight decay", "weight-decay", NULL, 0, 1e3 },
    { "optimizer.no_decay", VOLT_CLI_STRING, NULL, "parameters without weight decay, a parameter group: comma-separated fnmatch "
      "globs on the names (HF's recipe, biases and LayerNorm weights: '*.bias,*LayerNorm.weight,*layer_norm.weight'; "
      "null: decay every parameter)", "no-decay", NULL, 0, 0 },
    { "optimizer.lr_schedule", VOLT_CLI_STRING, "constant", "linear: decay to 0 at the last training step (HF's schedule); "
      "plateau: ReduceLROnPlateau on val_loss after each epoch's validation", "lr-schedule", "constant|linear|plateau", 0, 0 },
    { "optimizer.plateau_patience", VOLT_CLI_INT, "10", "plateau: epochs without a better val_loss before the lr drops "
      "(torch's patience)", "plateau-patience", NULL, 0, 1e15 },
    { "optimizer.plateau_factor", VOLT_CLI_FLOAT, "0.1", "plateau: the lr's factor when it drops (torch's factor, in [0, 1))",
      "plateau-factor", NULL, 0, 0.999999 },
    { "optimizer.warmup_steps", VOLT_CLI_INT, "0", "linear warmup from 0 over N steps", "warmup-steps", NULL, 0, 1e15 },
    { "optimizer.lr_find", VOLT_CLI_BOOL, "false", "fit: first Lightning's learning-rate range test (LearningRateFinder: 100 "
      "steps from 1e-8 to 1, weights restored after), then train with its suggestion; a resumed fit reuses the first's", "lr-find",
      NULL, 0, 0 },
    { "predict.input", VOLT_CLI_STRING, "-", "predict: texts, one per line (\"-\" = stdin)", NULL, NULL, 0, 0 },
    { "predict.output", VOLT_CLI_STRING, "-", "predict: where the predictions go (\"-\" = stdout)", NULL, NULL, 0, 0 },
    { "predict.format", VOLT_CLI_STRING, "csv", "predict: csv (index,label,probability) or jsonl", NULL, "csv|jsonl", 0, 0 },
    { "export_hf", VOLT_CLI_STRING, NULL, "after test, a Hugging Face DistilBERT folder of the weights test ran with "
      "(model.safetensors, config.json, vocab.txt, tokenizer_config.json; made if absent, its files replaced): what "
      "--pretrained and transformers' from_pretrained read", "export-hf", NULL, 0, 0 },
};

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

/* Returns 0 to go on, -1 to exit 0, else the exit status (2: usage error, message printed). */
static int parse_args(int argc, char **argv, volt_cli_key *buf, volt_cli **cp, opts *o) {
    static const char *const defaults[] = { "trainer.default_root_dir", "./runs/text", "trainer.max_epochs", "3", NULL };
    int r = app_cli_parse(APP, "Fine-tune DistilBERT for text classification (the Lightning DistilBERT/IMDB recipe).\n"
                          "fit trains, then tests the best checkpoint by val_acc; validate / test run a checkpoint\n"
                          "(--ckpt_path); predict classifies texts (--predict.input) with one.",
                          tc_keys, (int)(sizeof tc_keys / sizeof tc_keys[0]), buf, defaults, NULL, argc, argv, cp);
    if (r) return r;
    const volt_cli *c = *cp;
    *o = (opts){ .data = volt_cli_str(c, "data.source"), .preset = volt_cli_str(c, "model.preset"),
                 .pretrained = volt_cli_str(c, "model.pretrained"), .cache_dir = volt_cli_str(c, "data.cache_dir"),
                 .no_cache = volt_cli_bool(c, "data.no_cache"), .max_length = (int)volt_cli_int(c, "data.max_length"),
                 .batch_size = volt_cli_int(c, "data.batch_size"), .epochs = volt_cli_int(c, "trainer.max_epochs"),
                 .lr = (float)volt_cli_float(c, "optimizer.lr"), .weight_decay = (float)volt_cli_float(c, "optimizer.weight_decay"),
                 .no_decay = volt_cli_str(c, "optimizer.no_decay"),
                 .attention_dropout = !volt_cli_is_null(c, "model.attention_dropout") ? (float)volt_cli_float(c, "model.attention_dropout") : -1.f,
                 .optimizer = !strcmp(volt_cli_str(c, "optimizer.name"), "adamw") ? VOLT_OPTIM_ADAMW : VOLT_OPTIM_ADAM,
                 .schedule = volt_cli_str(c, "optimizer.lr_schedule"), .warmup_steps = volt_cli_int(c, "optimizer.warmup_steps"),
                 .plateau_patience = volt_cli_int(c, "optimizer.plateau_patience"),
                 .plateau_factor = volt_cli_float(c, "optimizer.plateau_factor"),
                 .drop_last = volt_cli_bool(c, "data.drop_last"), .lowercase = true,
                 .num_classes = !volt_cli_is_null(c, "model.num_classes") ? volt_cli_int(c, "model.num_classes") : -1,
                 .sub = volt_cli_subcommand(c), .ckpt = volt_cli_str(c, "ckpt_path"),
                 .pred_in = volt_cli_str(c, "predict.input"), .pred_out = volt_cli_str(c, "predict.output"),
                 .pred_format = volt_cli_str(c, "predict.format"), .export_hf = volt_cli_str(c, "export_hf") };
    app_trainer_opts_from_cli(c, &o->tr);
    /* the keys read as strings or numbers above are never null: volt_cli refuses null for every
     * key with a value default; the nullable ones (default null) are checked where they are read */
    if (o->no_decay && !*o->no_decay) return app_usage(APP, "bad value '' for --no-decay (optimizer.no_decay): want patterns, or null");
    if (o->no_decay && !(o->weight_decay > 0.f))
        return app_usage(APP, "--no-decay (optimizer.no_decay) needs --weight-decay > 0: without weight decay it changes nothing");
    if (o->epochs < 1 && volt_cli_int(c, "trainer.max_steps") < 1) return app_usage(APP, "bad value for --trainer.max_epochs: want an integer >= 1 (or set trainer.max_steps)");
    const char *split = volt_cli_str(c, "data.split");
    if (split) {
        o->split_given = true;
        if (!parse_split(split, o))
            return app_usage(APP, "bad value '%s' for --split (data.split): want three counts like 35000,5000,10000 or fractions "
                             "like 0.8,0.1,0.1 summing to <= 1, train > 0", split);
    }
    if (o->export_hf) {   /* as --export_full: refused where no test runs; a folder, in a folder that exists */
        const char *ex = o->export_hf;
        if (!*ex || (!strcmp(o->sub, "fit") && !volt_cli_bool(c, "test_after_fit")) || !strcmp(o->sub, "validate") ||
            !strcmp(o->sub, "predict") || volt_cli_float(c, "trainer.limit_test_batches") == 0)
            return app_usage(APP, "--export-hf '%s': %s", ex, !*ex ? "an empty path" : "it is written after a test, and this run "
                             "runs none (test after fit, or test --ckpt_path FILE)");
        char why[PATH_N + 64];
        if (!app_out_dir_ok(ex, why, sizeof why)) return app_usage(APP, "--export-hf '%s': %s", ex, why);
    }
    if (strcmp(o->sub, "fit") && !o->ckpt)
        return app_usage(APP, "%s needs --ckpt_path (a checkpoint file, or \"last\" of the run's checkpoint folder)", o->sub);
    const char *vocab = volt_cli_str(c, "data.vocab");
    if (vocab) {
        if (!*vocab || snprintf(o->vocab, PATH_N, "%s", vocab) >= PATH_N) return app_usage(APP, "bad value for --vocab");
        o->vocab_given = true;
    }
    if (!parse_data(o->data, o)) return 2;
    if (!o->pretrained) {   /* the preset's positions, before any data is read (a --pretrained folder's: at model set-up) */
        volt_distilbert_config pc;
        volt_distilbert_config_init(&pc);
        if (volt_distilbert_preset(&pc, o->preset) >= 0 && o->max_length > pc.max_position)
            return app_usage(APP, "--max-length %d exceeds the %s model's %lld positions", o->max_length, o->preset,
                             (long long)pc.max_position);
    }
    if (!o->vocab_given) {
        char pv[PATH_N];
        if (o->pretrained && snprintf(pv, sizeof pv, "%s/vocab.txt", o->pretrained) < (int)sizeof pv && is_file(pv))
            snprintf(o->vocab, PATH_N, "%s", pv);
        else if (!home_path(o->vocab, PATH_N, ".cache/volt/bert-base-uncased/vocab.txt")) {
            fprintf(stderr, APP ": $HOME is not set; pass --vocab PATH\n");
            return 2;
        } else if (o->pretrained && is_dir(o->pretrained) && app_env_rank() == 0) {
            /* said, since a vocab that is not the model's gives wrong ids without any error */
            fprintf(stderr, APP ": --pretrained '%s' has no vocab.txt: tokenizing with '%s' (--vocab picks another)\n",
                    o->pretrained, o->vocab);
        }
    }
    return 0;
}

static int model_config(const opts *o, const app *a, int n_classes, volt_distilbert_config *mc) {
    volt_distilbert_config_init(mc);
    volt_status st = volt_distilbert_preset(mc, o->preset);
    if (st < 0) return fail("choosing the model preset", st, o->preset);
    int vocab_n = volt_tokenizer_vocab_size(a->tok);
    const char *shape = o->preset;
    if (o->pretrained) {
        char p[PATH_N + 32], err[PATH_N + 256] = "";
        snprintf(p, sizeof p, "%s/model.safetensors", o->pretrained);
        if (!is_file(p)) {
            fprintf(stderr, APP ": --pretrained: '%s' %s (want a local Hugging Face "
                            "DistilBERT folder with model.safetensors, config.json and vocab.txt)\n", p, not_file_why(p));
            return 1;
        }
        /* the shape from the folder's config.json when it has one (any DistilBERT), else the preset */
        snprintf(p, sizeof p, "%s/config.json", o->pretrained);
        if (is_file(p)) {
            st = volt_distilbert_config_from_hf(mc, o->pretrained, NULL, err, sizeof err);
            if (st < 0) return fail("reading --pretrained config.json", st, err);
            shape = "config.json";
        }
        /* The embedding comes from the file: the tokenizer must not produce ids past it. */
        if (vocab_n > mc->vocab_size) {
            fprintf(stderr, APP ": vocab '%s' has %d tokens, the %s model's embedding has %lld rows\n", o->vocab,
                    vocab_n, shape, (long long)mc->vocab_size);
            return 1;
        }
        mc->pretrained_dir = o->pretrained;
        mc->quiet = app_env_rank() > 0;   /* every rank loads the file; rank 0 tells what it found */
    } else {
        mc->vocab_size = vocab_n;      /* from scratch: one embedding row per vocab entry */
    }
    if (o->max_length > mc->max_position) {
        fprintf(stderr, APP ": --max-length %d exceeds the %s model's %lld positions\n", o->max_length, shape,
                (long long)mc->max_position);
        return 1;
    }
    mc->n_classes = n_classes;
    mc->pad_token_id = volt_tokenizer_pad_id(a->tok);
    mc->optimizer = o->optimizer;
    mc->lr = o->lr;
    mc->weight_decay = o->weight_decay;
    mc->no_decay = o->no_decay;
    if (o->attention_dropout >= 0.f) mc->attention_dropout = o->attention_dropout;
    mc->warmup_steps = o->warmup_steps;
    if (!strcmp(o->schedule, "linear")) mc->total_steps = -1;   /* over the fit's optimizer steps (the trainer's estimate) */
    if (!strcmp(o->schedule, "plateau")) {
        if (o->warmup_steps > 0) {
            fprintf(stderr, APP ": --lr-schedule plateau has no warmup: --warmup-steps must be 0\n");
            return 1;
        }
        mc->plateau = true;
        mc->plateau_patience = o->plateau_patience;
        mc->plateau_factor = o->plateau_factor;
    }
    return 0;
}

/* --export-hf: the weights test ran with, as a Hugging Face folder (every rank calls it: the
 * export gathers shards; rank 0 writes). A folder rank 0 could not make fails the export,
 * which names the file on every rank. */
static int text_export_hf(const opts *o, app *a) {
    const char *dir = o->export_hf;
    char p[PATH_N + 32], err[768] = "";
    if (a->zero && !is_dir(dir) && mkdir(dir, 0755) != 0 && errno != EEXIST)
        fprintf(stderr, APP ": --export-hf: cannot make '%s': %s\n", dir, strerror(errno));
    if (snprintf(p, sizeof p, "%s/model.safetensors", dir) >= (int)sizeof p) {
        fprintf(stderr, APP ": --export-hf '%s': path too long\n", dir);
        return 1;
    }
    volt_status st = volt_trainer_export_full(a->t, p);   /* collective */
    if (st < 0) return app_fail(APP, "--export-hf", st, volt_trainer_errmsg(a->t));
    if (!a->zero) return 0;
    st = volt_distilbert_config_to_hf_ex(volt_distilbert_get_config(a->model), dir, o->vocab, o->lowercase, o->strip_accents_hf,
                                         err, sizeof err);
    if (st < 0) return app_fail(APP, "--export-hf", st, err);
    printf("exported a Hugging Face folder to %s (model.safetensors, config.json, vocab.txt, tokenizer_config.json)\n", dir);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    opts o;
    volt_cli_key keybuf[APP_MAX_KEYS];
    volt_cli *cli = NULL;
    int pr = parse_args(argc, argv, keybuf, &cli, &o);
    if (pr) { volt_cli_destroy(cli); return pr < 0 ? 0 : pr; }

    app a = { .zero = app_env_rank() == 0 };   /* the trainer's own view once it exists */
    int rc = 1;
    int64_t n_split[3] = { 0, 0, 0 };
    const bool predict = !strcmp(o.sub, "predict");
    FILE *pf = NULL;
    char ptmp[PATH_N + 16] = "";   /* predict.output is written here and renamed over it once whole */
    /* the tokenizer's casing and accents: data.lowercase / data.strip_accents, else the pretrained
     * folder's tokenizer_config.json (do_lower_case, strip_accents), else true / as lowercase:
     * BertTokenizer's strip_accents None strips exactly when it lowercases (a cased vocab keeps
     * "Café") */
    const bool lc_null = volt_cli_is_null(cli, "data.lowercase"), sa_null = volt_cli_is_null(cli, "data.strip_accents");
    o.strip_accents_hf = -1;
    if (o.pretrained && is_dir(o.pretrained) && (lc_null || sa_null)) {   /* not a folder: model_config says so */
        char err[PATH_N + 256] = "";
        bool lower = true;
        volt_status cst = volt_distilbert_tokenizer_from_hf(o.pretrained, &lower, &o.strip_accents_hf, err, sizeof err);
        if (cst < 0) {
            fail("reading --pretrained", cst, err);
            goto out;
        }
        if (lc_null) o.lowercase = lower;
    }
    if (!lc_null) o.lowercase = volt_cli_bool(cli, "data.lowercase");
    if (!sa_null) o.strip_accents_hf = volt_cli_bool(cli, "data.strip_accents") ? 1 : 0;
    o.strip_accents = o.strip_accents_hf < 0 ? o.lowercase : o.strip_accents_hf == 1;
    /* A fixed checkpoint folder per (data kind, preset), not per run version, so --resume
     * finds "last". */
    char ckdir[PATH_N + 64], ckfile[PATH_N + 96];
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints/%s-%s", o.tr.root, text_kind_name(o.kind), o.preset);
    /* validate / test / predict in a new process: "last" is the newest of that folder's last,
     * last-vN and on_exception files, as the trainer's; named here, since predict reads its
     * class count before there is a trainer */
    if (o.ckpt && strcmp(o.sub, "fit") != 0 && !strcmp(o.ckpt, "last")) {
        if (!(o.ckpt = volt_checkpoint_find_last(ckdir, true, ckfile, sizeof ckfile))) {
            fprintf(stderr, APP ": %s: no checkpoint for --ckpt_path last: '%s' holds no last*.safetensors nor "
                    "on_exception.safetensors (give the file's path)\n", o.sub, ckdir);
            goto out;
        }
    }
    int n_classes = 0;
    if (predict) {
        if (text_read_texts(&o, &a) || text_load_tokenizer(&o, &a)) goto out;
        int64_t nc = o.num_classes;
        if (nc < 1 && text_ckpt_classes(o.ckpt, &nc)) goto out;
        n_classes = (int)nc;
        n_split[2] = volt_corpus_len(a.all);      /* in input order: row i is line i */
    } else {
        if (text_load_corpus(&o, &a) || text_split_corpus(&o, &a, n_split) || text_load_tokenizer(&o, &a)) goto out;
        n_classes = o.num_classes > 0 ? (int)o.num_classes : volt_corpus_num_classes(a.all);
        if (a.zero) {
            printf(APP ": %s '%s': %lld texts, %d classes; split %lld/%lld/%lld (seed %llu); read in %.1f s\n",
                   text_kind_name(o.kind), o.data_path, (long long)volt_corpus_len(a.all), n_classes, (long long)n_split[0],
                   (long long)n_split[1], (long long)n_split[2], (unsigned long long)o.tr.seed, a.read_s);
            fflush(stdout);
        }
    }
    volt_distilbert_config mc;
    if (model_config(&o, &a, n_classes, &mc)) goto out;
    a.mc = mc;
    volt_status st = volt_distilbert_create(&mc, &a.model);
    if (st < 0) { fail("creating the model", st, "check --model-preset, --lr and the other model flags"); goto out; }
    if (predict) {
        char err[1024] = "";
        bool hit = false;
        if ((st = volt_text_dataset(a.all, a.tok, o.max_length, NULL, &a.ds[2], &hit, err, sizeof err)) < 0) {
            fail("tokenizing the texts", st, err);
            goto out;
        }
        volt_loader_config lc;
        volt_loader_config_init(&lc);
        lc.batch_size = o.batch_size;
        lc.num_workers = o.tr.workers;
        if ((st = volt_loader_create(&lc, a.ds[2], &a.ld[2])) < 0) { fail("creating the data loader", st, NULL); goto out; }
    } else if (text_make_datasets(&o, &a) || text_make_loaders(&o, &a)) goto out;

    /* ---- trainer ---- */
    volt_trainer_config tc;
    volt_trainer_config_init(&tc);
    volt_cli_trainer_config(cli, &tc);          /* every trainer.* key; the merged config as run_config_json */
    /* only fit resumes; validate / test / predict load weights into whatever data they are given */
    char fingerprint[3 * PATH_N + 512];
    if (!strcmp(o.sub, "fit")) {
        if (text_fingerprint(&o, &a, n_split, n_classes, &mc, fingerprint, sizeof fingerprint) ||
            text_resume_legacy(&o, app_fit_ckpt(cli), ckdir, tc.resume_anyway, n_split, n_classes, &mc, a.zero,
                               fingerprint, sizeof fingerprint))
            goto out;
        tc.run_fingerprint = fingerprint;
    }
    if (predict) tc.enable_logger = false;      /* nothing is logged; no run folder */
    st = volt_trainer_create(&tc, &a.t);
    if (st < 0) { fail("creating the trainer", st, a.t ? volt_trainer_errmsg(a.t) : NULL); goto out; }
    if ((st = app_add_checkpoint(a.t, cli, ckdir, "{epoch}-{step}-{val_acc:.4f}")) < 0) {
        fail("adding EarlyStopping / ModelCheckpoint", st, volt_trainer_errmsg(a.t));
        goto out;
    }
    if (!predict && (st = app_add_weight_averaging(a.t, cli)) < 0) {
        fail("adding WeightAveraging", st, volt_trainer_errmsg(a.t));
        goto out;
    }
    if (!predict && (st = app_add_backbone_finetuning(a.t, cli)) < 0) {
        fail("adding BackboneFinetuning", st, volt_trainer_errmsg(a.t));
        goto out;
    }
    if (!predict && (st = app_add_accumulation_scheduler(a.t, cli)) < 0) {
        fail("adding GradientAccumulationScheduler", st, volt_trainer_errmsg(a.t));
        goto out;
    }
    if (!predict && (st = app_add_lr_monitor(a.t, cli)) < 0) {
        fail("adding LearningRateMonitor", st, volt_trainer_errmsg(a.t));
        goto out;
    }
    if (!predict && (st = app_add_device_stats(a.t, cli)) < 0) {
        fail("adding DeviceStatsMonitor", st, volt_trainer_errmsg(a.t));
        goto out;
    }
    if (!predict && (st = app_add_spike_detection(a.t, cli)) < 0) {
        fail("adding SpikeDetection", st, volt_trainer_errmsg(a.t));
        goto out;
    }
    if (!predict && (st = app_add_timer(a.t, cli)) < 0) {
        fail("adding Timer", st, volt_trainer_errmsg(a.t));
        goto out;
    }
    if (o.tr.memory_report && (st = app_add_memory_report(a.t)) < 0) {
        fail("adding the memory report", st, volt_trainer_errmsg(a.t));
        goto out;
    }
    if (!predict && app_throughput_on(cli)) {   /* items: non-padding tokens; FLOPs: DistilBERT's per batch */
        if (text_count_tokens(&a)) goto out;
        if ((st = app_add_throughput(a.t, cli, text_batch_tokens, text_batch_flops, &a)) < 0) {
            fail("adding ThroughputMonitor", st, volt_trainer_errmsg(a.t));
            goto out;
        }
    }
    a.zero = volt_trainer_is_global_zero(a.t);
    const int world = volt_trainer_world_size(a.t);

    if (predict) {
        /* rank 0 writes predict.output; under several ranks each predicts its shard and the rows
         * come to rank 0 (text_pred_gather). Whether rank 0 could open it is every rank's to know
         * before the first collective of predict. */
        if (a.zero) pf = pred_open(o.pred_out, ptmp, sizeof ptmp);
        if (world > 1) {
            bool opened = false;
            if ((st = volt_trainer_broadcast_bool(a.t, pf != NULL, &opened)) < 0) { rc = app_fail_run(APP, "predict", st, a.t); goto out; }
            if (!opened) goto out;   /* rank 0 said why */
        } else if (!pf) goto out;
        pred_out po = { .f = pf, .jsonl = !strcmp(o.pred_format, "jsonl"), .collect = world > 1 };
        if (po.collect && text_pred_reserve(a.t, &po, n_split[2], o.batch_size)) { free(po.rows); goto out; }
        if (pf && !po.jsonl) fputs("index,label,probability\n", pf);
        st = volt_trainer_predict(a.t, &volt_distilbert_ops, a.model, a.ld[2], o.ckpt, text_pred_write, &po);
        free(po.buf);
        if (st < 0) { free(po.rows); rc = app_fail_run(APP, "predict", st, a.t); goto out; }
        int gr = po.collect ? text_pred_gather(a.t, &po) : 0;
        const int64_t n_pred = po.collect ? po.n_rows : po.next;
        free(po.rows);
        if (gr) goto out;
        if (pf && pf != stdout && pred_commit(pf, o.pred_out, ptmp)) { pf = NULL; goto out; }
        if (pf && pf != stdout)
            fprintf(stderr, APP ": %lld predictions written to %s%s\n", (long long)n_pred, o.pred_out,
                    world > 1 ? " (every rank's, gathered on rank 0)" : "");
        pf = NULL;
        rc = 0;
        goto out;
    }
    if (a.zero) {
        printf("model: %s%s%s, %lld classes, max_length %d; %s lr %g, batch %lld", o.pretrained ? "pretrained" : o.preset,
               o.pretrained ? " from " : " from scratch", o.pretrained ? o.pretrained : "", (long long)n_classes,
               o.max_length, o.optimizer == VOLT_OPTIM_ADAMW ? "AdamW" : "Adam", o.lr, (long long)o.batch_size);
        if (world > 1) printf(" per rank x %d ranks = %lld (%s)", world, (long long)o.batch_size * world, volt_trainer_get_config(a.t)->strategy);
        printf(", epochs %lld\n", (long long)volt_trainer_get_config(a.t)->max_epochs);
        fflush(stdout);
    }

    const char *sub = o.sub, *test_ckpt = o.ckpt;
    if (!strcmp(sub, "fit")) {
        double t0 = app_now_s();
        int64_t bs_was;
        if ((rc = app_scale_batch_size(a.t, cli, a.ld[0], &bs_was, APP))) goto out;
        rc = 1;
        if (volt_cli_bool(cli, "optimizer.lr_find")) {   /* LearningRateFinder: model.lr = the suggestion, inside fit */
            volt_lr_finder_config lf;
            volt_lr_finder_config_init(&lf);
            lf.set_lr = volt_distilbert_set_lr;   /* a resumed fit sets the checkpoint's without a search */
            if ((st = volt_add_lr_finder(a.t, &lf)) < 0) { rc = app_fail_run(APP, "lr_find", st, a.t); goto out; }
        }
        if ((rc = app_add_tuner_report(a.t, cli, bs_was, o.lr, APP))) goto out;
        rc = 1;
        st = volt_trainer_fit(a.t, &volt_distilbert_ops, a.model, a.ld[0], n_split[1] > 0 ? a.ld[1] : NULL, app_fit_ckpt(cli));
        double fit_s = app_now_s() - t0;
        if (st < 0) { rc = app_fail_run(APP, "fit", st, a.t); goto out; }
        if (app_after_fit(a.t, &o.tr, APP)) goto out;
        app_print_fit_end(a.t, volt_cli_str(cli, "checkpoint.monitor"), fit_s);
        /* trainer.test(ckpt_path="best"): --export-full then writes the weights whose test
         * accuracy is printed (the final weights when there is no best checkpoint). */
        test_ckpt = volt_trainer_best_model_path(a.t) ? "best" : NULL;
        sub = volt_cli_bool(cli, "test_after_fit") ? "test" : NULL;
    } else if (!strcmp(sub, "validate")) {
        if (n_split[1] < 1) { fprintf(stderr, APP ": validate: the split has no val texts\n"); goto out; }
        st = volt_trainer_validate(a.t, &volt_distilbert_ops, a.model, a.ld[1], test_ckpt);
        if (st < 0) { rc = app_fail_run(APP, "validate", st, a.t); goto out; }
        sub = NULL;
    }
    if (sub && !strcmp(sub, "test") && !app_skip_test(a.t, cli)) {
        st = volt_trainer_test(a.t, &volt_distilbert_ops, a.model, a.ld[2], test_ckpt);
        if (st < 0) { rc = app_fail_run(APP, "test", st, a.t); goto out; }
        double acc = 0.0;
        if (!volt_trainer_metric(a.t, "test_acc", &acc)) {
            fprintf(stderr, APP ": test ran but logged no test_acc\n");
            goto out;
        }
        app_print_test_end(a.t, acc);
        if (app_after_test(a.t, &o.tr, APP)) goto out;
        if (o.export_hf && text_export_hf(&o, &a)) goto out;
    }
    app_print_logs(a.t);
    rc = 0;
out:
    if (pf && pf != stdout) fclose(pf);
    if (pf && *ptmp) unlink(ptmp);   /* a failed predict leaves predict.output as it was */
    fflush(stdout);
    app_free(&a);
    volt_cli_destroy(cli);
    return rc;
}
