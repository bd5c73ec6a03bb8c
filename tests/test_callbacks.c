/* Built-in callbacks: the pure logic (checkpoint name templates, Python-style number
 * formatting, top-k bookkeeping, the EarlyStopping decision, progress-bar text, metrics.csv)
 * directly, then end to end through the trainer with a tiny linear module whose validation
 * score comes from a table indexed by epoch: which checkpoint files exist after each epoch
 * for top-k 1/2/-1/0 with save_last, resume giving the same bookkeeping as an uninterrupted
 * run, EarlyStopping stopping at the right epoch (also across a resume), the CSV rows (and
 * appending on resume), the LR monitor and the progress bar's lines. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#include "volt/safetensors.h"
#include "callbacks/util.h"
#include "callbacks/model_checkpoint.h"
#include "callbacks/early_stopping.h"
#include "callbacks/progress_bar.h"
#include "callbacks/csv_logger.h"
#include "trainer/config_fields.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb; (void)flag; (void)f;
    return remove(p);
}
static void rm_rf(const char *p) { nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static const char *fresh_dir(const char *name) {
    static char buf[8][1024];
    static int k;
    char *p = buf[k++ & 7];
    snprintf(p, sizeof buf[0], "%s/%s", vtest_tmpdir(), name);
    rm_rf(p);
    mkdir(p, 0755);
    return p;
}

static bool exists(const char *p) { return access(p, F_OK) == 0; }

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The *.safetensors files of dir, sorted, comma-separated ("" when none / no dir). */
static void list_ckpts(const char *dir, char *out, size_t n) {
    char *names[64];
    int k = 0;
    out[0] = 0;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)) && k < 64) {
        size_t len = strlen(de->d_name);
        if (len > 12 && strcmp(de->d_name + len - 12, ".safetensors") == 0) names[k++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)k, sizeof *names, cmp_str);
    for (int i = 0; i < k; i++) {
        snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? "," : "", names[i]);
        free(names[i]);
    }
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

static void spit(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    if (f) { fputs(s, f); fclose(f); }
}

/* ---- unit: numbers ---------------------------------------------------------------------------- */

static void test_repr(void) {
    static const struct { double v; const char *want; } cases[] = {
        { 0.1, "0.1" }, { 2.0, "2.0" }, { -1.5, "-1.5" }, { 1e-05, "1e-05" }, { 0.0001, "0.0001" },
        { 1e16, "1e+16" }, { 1e15, "1000000000000000.0" }, { 123.456, "123.456" }, { 0.0, "0.0" },
        { (double)0.1f, "0.10000000149011612" }, { 1.2345678901234567e+20, "1.2345678901234567e+20" },
        { 5e-324, "5e-324" }, { 0.8812, "0.8812" }, { 1.5e-07, "1.5e-07" }, { 1.2345678901234568e+20, "1.2345678901234568e+20" },
    };
    char b[64];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        volt__cb_repr(cases[i].v, b, sizeof b);
        CHECK(strcmp(b, cases[i].want) == 0, "repr(%.17g) = '%s', want '%s'", cases[i].v, b, cases[i].want);
    }
    volt__cb_repr(NAN, b, sizeof b); CHECK(strcmp(b, "nan") == 0, "%s", b);
    volt__cb_repr(-INFINITY, b, sizeof b); CHECK(strcmp(b, "-inf") == 0, "%s", b);
}

static void test_format_number(void) {
    static const struct { double v; bool is_int; const char *spec, *want; } cases[] = {
        { 0.88123, false, ".4f", "0.8812" }, { 2, true, "", "2" }, { 2, true, "03d", "002" },
        { 0.5, false, ".2e", "5.00e-01" }, { 0.5, false, ".1%", "50.0%" }, { 2.0, false, ".3", "2.0" },
        { 0.88123, false, ".3", "0.881" }, { 3, true, ".2f", "3.00" }, { 0.25, false, "", "0.25" },
        { 0.5, false, "+.1f", "+0.5" }, { 7, true, "5d", "    7" }, { 0.5, false, "08.3f", "0000.500" },
        { 12.6, false, "d", "13" }, { 0, true, ".4f", "0.0000" },
    };
    char b[64];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        volt_status st = volt__cb_format_number(cases[i].v, cases[i].is_int, cases[i].spec, b, sizeof b);
        CHECK(st == VOLT_OK && strcmp(b, cases[i].want) == 0, "format(%g, '%s') = '%s', want '%s'",
              cases[i].v, cases[i].spec, st == VOLT_OK ? b : "(error)", cases[i].want);
    }
    CHECK(volt__cb_format_number(1, false, "<5", b, sizeof b) == VOLT_ERR_INVALID_ARG, "fill/align unsupported");
    CHECK(volt__cb_format_number(1, false, ".4x", b, sizeof b) == VOLT_ERR_INVALID_ARG, "unknown type");
    CHECK(volt__cb_format_number(1, false, ".", b, sizeof b) == VOLT_ERR_INVALID_ARG, "dot without precision");
}

/* ---- unit: checkpoint names ------------------------------------------------------------------- */

static bool fake_lookup(void *ctx, const char *name, double *v, bool *is_int) {
    (void)ctx;
    if (!strcmp(name, "epoch")) { *v = 2; *is_int = true; return true; }
    if (!strcmp(name, "step")) { *v = 300; *is_int = true; return true; }
    if (!strcmp(name, "val_acc")) { *v = 0.88123456; *is_int = false; return true; }
    if (!strcmp(name, "val/loss")) { *v = 0.25; *is_int = false; return true; }
    return false;
}

static void test_format_name(void) {
    static const struct { const char *tmpl; int ver; const char *want; } cases[] = {
        { "{epoch}-{step}", 0, "epoch=2-step=300" },
        { "{epoch}-{val_acc:.4f}", 0, "epoch=2-val_acc=0.8812" },
        { "{epoch}-{step}-{val_acc:.4f}", 0, "epoch=2-step=300-val_acc=0.8812" },
        { "{epoch}-{step}", 1, "epoch=2-step=300-v1" },
        { "{epoch}-{step}", 12, "epoch=2-step=300-v12" },
        { "best", 0, "best" },
        { "{epoch:03d}", 0, "epoch=002" },
        { "{missing:.2f}-{gone}", 0, "missing=0.00-gone=0" },   /* Lightning formats unknown keys as 0 */
        { "{val_acc}", 0, "val_acc=0.88123456" },
        { "epoch={epoch}", 0, "epoch=epoch=2" },                 /* auto_insert_metric_name, as Lightning */
        { "{{x}}-{epoch}", 0, "{x}-epoch=2" },
        { "{val/loss:.2f}", 0, "val_loss=0.25" },   /* an inserted name's '/' as '_': no folder (Lightning makes one) */
    };
    char out[256], err[256];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        volt_status st = volt__cb_format_name(cases[i].tmpl, fake_lookup, NULL, cases[i].ver, true, out, sizeof out, err, sizeof err);
        CHECK(st == VOLT_OK && strcmp(out, cases[i].want) == 0, "'%s' v%d -> '%s', want '%s' (%s)", cases[i].tmpl,
              cases[i].ver, st == VOLT_OK ? out : "(error)", cases[i].want, st == VOLT_OK ? "" : err);
    }
    static const char *const bad[] = { "{epoch", "a}b", "{}", "{epoch:<5}", "{epoch:.2q}", "{a{b}" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        volt_status st = volt__cb_format_name(bad[i], fake_lookup, NULL, 0, true, out, sizeof out, err, sizeof err);
        CHECK(st == VOLT_ERR_INVALID_ARG && strstr(err, bad[i]), "bad template '%s': %s / '%s'", bad[i], volt_status_str(st), err);
    }
    char small[8];
    CHECK(volt__cb_format_name("{epoch}-{step}", fake_lookup, NULL, 0, true, small, sizeof small, err, sizeof err) == VOLT_ERR_INVALID_ARG,
          "too long for the buffer");
    /* auto_insert_metric_name false: the values alone */
    static const struct { const char *tmpl; int ver; const char *want; } bare[] = {
        { "{epoch}-{step}", 0, "2-300" }, { "ep{epoch:02d}-{val_acc:.2f}", 1, "ep02-0.88-v1" }, { "{{x}}-{epoch}", 0, "{x}-2" },
    };
    for (size_t i = 0; i < sizeof bare / sizeof *bare; i++) {
        volt_status st = volt__cb_format_name(bare[i].tmpl, fake_lookup, NULL, bare[i].ver, false, out, sizeof out, err, sizeof err);
        CHECK(st == VOLT_OK && !strcmp(out, bare[i].want), "'%s' without names -> '%s', want '%s'", bare[i].tmpl,
              st == VOLT_OK ? out : err, bare[i].want);
    }
}

/* ---- unit: top-k ------------------------------------------------------------------------------- */

/* ModelCheckpoint's top-k step (the same calls model_checkpoint.c makes): returns the kept
 * set, in save order, as "e0,e3". */
static void topk_run(int k, volt_mode mode, const double *scores, int n, char out[][64]) {
    volt_cb_topk tk = { 0 };
    for (int e = 0; e < n; e++) {
        if (volt__cb_topk_should_save(&tk, k, mode, scores[e])) {
            if (k > 0 && tk.n >= k) free(volt__cb_topk_take(&tk, volt__cb_topk_worst(&tk, mode)));
            char p[16];
            snprintf(p, sizeof p, "e%d", e);
            volt__cb_topk_push(&tk, p, volt__cb_topk_sanitize(scores[e], mode));
        }
        out[e][0] = 0;
        for (int i = 0; i < tk.n; i++) snprintf(out[e] + strlen(out[e]), 64 - strlen(out[e]), "%s%s", i ? "," : "", tk.e[i].path);
    }
    volt__cb_topk_clear(&tk);
}

static void test_topk(void) {
    const double s[] = { 0.5, 0.7, 0.6, 0.9, 0.8 };
    char got[8][64];
    struct { int k; volt_mode mode; const char *want[5]; } cases[] = {
        { 1, VOLT_MAX, { "e0", "e1", "e1", "e3", "e3" } },
        { 2, VOLT_MAX, { "e0", "e0,e1", "e1,e2", "e1,e3", "e3,e4" } },
        { -1, VOLT_MAX, { "e0", "e0,e1", "e0,e1,e2", "e0,e1,e2,e3", "e0,e1,e2,e3,e4" } },
        { 0, VOLT_MAX, { "", "", "", "", "" } },
        { 1, VOLT_MIN, { "e0", "e0", "e0", "e0", "e0" } },
        { 2, VOLT_MIN, { "e0", "e0,e1", "e0,e2", "e0,e2", "e0,e2" } },
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        topk_run(cases[c].k, cases[c].mode, s, 5, got);
        for (int e = 0; e < 5; e++)
            CHECK(strcmp(got[e], cases[c].want[e]) == 0, "k=%d mode=%d after e%d: '%s', want '%s'",
                  cases[c].k, cases[c].mode, e, got[e], cases[c].want[e]);
    }
    /* ties keep the earlier: an equal score does not enter a full top-k, and among equally
     * bad entries the later one leaves first */
    const double t1[] = { 0.5, 0.5, 0.4 };
    topk_run(1, VOLT_MAX, t1, 3, got);
    CHECK(!strcmp(got[2], "e0"), "tie k=1: %s", got[2]);
    const double t2[] = { 0.5, 0.5, 0.9 };
    topk_run(2, VOLT_MAX, t2, 3, got);
    CHECK(!strcmp(got[2], "e0,e2"), "tie eviction: %s", got[2]);
    /* NaN counts as the worst possible score but still fills a free slot */
    const double t3[] = { NAN, 0.3, 0.2 };
    topk_run(2, VOLT_MIN, t3, 3, got);
    CHECK(!strcmp(got[0], "e0") && !strcmp(got[2], "e1,e2"), "nan: %s / %s", got[0], got[2]);
    volt_cb_topk tk = { 0 };
    volt__cb_topk_push(&tk, "a", 0.3);
    volt__cb_topk_push(&tk, "b", 0.1);
    volt__cb_topk_push(&tk, "c", 0.1);
    CHECK(volt__cb_topk_best(&tk, VOLT_MIN) == 1 && volt__cb_topk_worst(&tk, VOLT_MAX) == 2, "best/worst tie order");
    CHECK(volt__cb_topk_find(&tk, "c") == 2 && volt__cb_topk_find(&tk, "z") == -1, "find");
    volt__cb_topk_clear(&tk);
}

/* ---- unit: EarlyStopping decision ---------------------------------------------------------------- */

/* Index of the check that stops, -1 if none; *wait = the wait count at the end. */
static int es_run(const volt_early_stopping_config *cfg, const double *v, int n, int64_t *wait, char *reason) {
    volt_cb_es_state st;
    volt__cb_es_init(&st, cfg->mode);
    for (int i = 0; i < n; i++)
        if (volt__cb_es_update(cfg, &st, v[i], reason, 512)) { *wait = st.wait; return i; }
    *wait = st.wait;
    return -1;
}

static void test_es_decision(void) {
    volt_early_stopping_config c;
    volt_early_stopping_config_init(&c);
    CHECK(c.patience == 3 && c.check_finite && c.mode == VOLT_MIN && c.min_delta == 0, "defaults");
    c.monitor = "val_loss";
    c.patience = 2;
    char reason[512];
    int64_t wait;
    const double a[] = { 1.0, 0.9, 0.95, 0.92, 0.85 };
    CHECK(es_run(&c, a, 5, &wait, reason) == 3 && wait == 2, "patience 2 stops at check 3 (wait %lld)", (long long)wait);
    CHECK(strstr(reason, "did not improve in the last 2 records") && strstr(reason, "0.900"), "reason: %s", reason);
    const double b[] = { 1.0, 0.9, 0.95, 0.85, 0.9, 0.86 };   /* an improvement resets the wait */
    CHECK(es_run(&c, b, 6, &wait, reason) == 5, "reset by improvement");
    c.min_delta = 0.05f;                                       /* 0.96 is not 0.05 better than 1.0 */
    const double d[] = { 1.0, 0.96, 0.97 };
    CHECK(es_run(&c, d, 3, &wait, reason) == 2, "min_delta");
    c.min_delta = 0;
    c.mode = VOLT_MAX;
    const double e[] = { 0.5, 0.7, 0.7 };                      /* equal is no improvement */
    CHECK(es_run(&c, e, 3, &wait, reason) == -1 && wait == 1, "max mode, tie");
    c.mode = VOLT_MIN;
    c.has_stopping_threshold = true;
    c.stopping_threshold = 0.5f;
    const double f[] = { 1.0, 0.4 };
    CHECK(es_run(&c, f, 2, &wait, reason) == 1 && strstr(reason, "Stopping threshold"), "stopping threshold: %s", reason);
    c.has_stopping_threshold = false;
    c.has_divergence_threshold = true;
    c.divergence_threshold = 2.0f;
    const double g[] = { 1.0, 3.0 };
    CHECK(es_run(&c, g, 2, &wait, reason) == 1 && strstr(reason, "Divergence"), "divergence: %s", reason);
    c.has_divergence_threshold = false;
    const double h[] = { 1.0, NAN };
    CHECK(es_run(&c, h, 2, &wait, reason) == 1 && strstr(reason, "not finite"), "check_finite: %s", reason);
    c.check_finite = false;
    CHECK(es_run(&c, h, 2, &wait, reason) == -1 && wait == 1, "NaN without check_finite just waits");
}

/* ---- unit: progress text, versions, csv ------------------------------------------------------------ */

static void test_progress_text(void) {
    char b[256];
    volt__cb_fmt_duration(12, b, sizeof b); CHECK(!strcmp(b, "00:12"), "%s", b);
    volt__cb_fmt_duration(161.9, b, sizeof b); CHECK(!strcmp(b, "02:41"), "%s", b);
    volt__cb_fmt_duration(3723, b, sizeof b); CHECK(!strcmp(b, "1:02:03"), "%s", b);
    volt__cb_fmt_duration(-1, b, sizeof b); CHECK(!strcmp(b, "?"), "%s", b);
    volt__cb_progress_line(b, sizeof b, "Epoch 1/3", 37, 469, 0, 37 / 28.3, "loss=0.512, val_acc=0.871");
    CHECK(!strcmp(b, "Epoch 1/3: 37/469 [00:01<00:15, 28.3it/s, loss=0.512, val_acc=0.871]"), "%s", b);
    volt__cb_progress_line(b, sizeof b, "Validation", 0, 50, 0, 0, NULL);
    CHECK(!strcmp(b, "Validation: 0/50 [00:00<?, ?it/s]"), "%s", b);
    volt__cb_progress_line(b, sizeof b, "Testing", 3, -1, 0, 10.56, "");
    CHECK(!strcmp(b, "Testing: 3 [00:10, 3.52s/it]"), "%s", b);
    volt__cb_progress_line(b, sizeof b, "Epoch 2", 300, 400, 200, 2.0, NULL);   /* resumed at batch 200 */
    CHECK(!strcmp(b, "Epoch 2: 300/400 [00:02<00:02, 50.0it/s]"), "%s", b);
    char tiny[12];
    volt__cb_progress_line(tiny, sizeof tiny, "Epoch 1/3", 1, 2, 0, 1, NULL);
    CHECK(strlen(tiny) == sizeof tiny - 1, "truncates safely");
}

static void test_versions(void) {
    const char *root = fresh_dir("versions");
    CHECK(volt__cb_next_version(root) == 0, "empty root");
    char p[1200];
    snprintf(p, sizeof p, "%s/nope", root);
    CHECK(volt__cb_next_version(p) == 0, "missing root");
    const char *names[] = { "version_0", "version_3", "version_x", "version_", "other" };
    for (int i = 0; i < 5; i++) { snprintf(p, sizeof p, "%s/%s", root, names[i]); mkdir(p, 0755); }
    snprintf(p, sizeof p, "%s/version_9", root);
    spit(p, "a file, not a version folder");
    CHECK(volt__cb_next_version(root) == 4, "next after version_3: %d", volt__cb_next_version(root));
    char err[256];
    snprintf(p, sizeof p, "%s/a/b/c", root);
    CHECK_OK(volt__mkdirs(p, err, sizeof err));
    CHECK_OK(volt__mkdirs(p, err, sizeof err));
    snprintf(p, sizeof p, "%s/version_9/x", root);
    CHECK(volt__mkdirs(p, err, sizeof err) == VOLT_ERR_IO && strstr(err, "version_9"), "mkdirs through a file: %s", err);
}

static void test_csv_unit(void) {
    const char *dir = fresh_dir("csv_unit");
    char path[1200], err[512];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    volt_cb_csv c;
    CHECK_OK(volt__cb_csv_open(&c, path, err, sizeof err));
    const char *n1[] = { "train_loss" };
    double v1[] = { 0.5 };
    CHECK_OK(volt__cb_csv_write_row(&c, 0, 0, 1, n1, v1, err, sizeof err));
    const char *n2[] = { "val,acc", "a_first", "step" };          /* a new column sorts first; "step" is ours */
    double v2[] = { 0.25, 1.0, 99 };
    CHECK_OK(volt__cb_csv_write_row(&c, 0, 3, 3, n2, v2, err, sizeof err));
    CHECK_OK(volt__cb_csv_write_row(&c, 1, 7, 1, n1, (double[]){ 0.125 }, err, sizeof err));
    volt__cb_csv_close(&c);
    char *s = slurp(path);
    const char *want = "epoch,step,a_first,train_loss,\"val,acc\"\n0,0,,0.5,\n0,3,1.0,,0.25\n1,7,,0.125,\n";
    CHECK(s && !strcmp(s, want), "csv:\n%s\nwant:\n%s", s ? s : "(none)", want);
    free(s);
    /* reopen (a resumed run): the header is read back, rows append, a new column rewrites */
    CHECK_OK(volt__cb_csv_open(&c, path, err, sizeof err));
    CHECK(c.ncols == 5 && c.on_disk, "reopened header: %d cols", c.ncols);
    CHECK_OK(volt__cb_csv_write_row(&c, 2, 11, 1, n1, (double[]){ 0.0625 }, err, sizeof err));
    const char *n3[] = { "z" };
    CHECK_OK(volt__cb_csv_write_row(&c, 2, 11, 1, n3, (double[]){ NAN }, err, sizeof err));
    volt__cb_csv_close(&c);
    s = slurp(path);
    want = "epoch,step,a_first,train_loss,\"val,acc\",z\n0,0,,0.5,,\n0,3,1.0,,0.25,\n1,7,,0.125,,\n2,11,,0.0625,,\n2,11,,,,nan\n";
    CHECK(s && !strcmp(s, want), "csv after resume:\n%s\nwant:\n%s", s ? s : "(none)", want);
    free(s);
    char **cells;
    int n = volt__cb_csv_split("a,\"b,\"\"c\"\"\",,d", &cells);
    CHECK(n == 4 && !strcmp(cells[1], "b,\"c\"") && !strcmp(cells[2], "") && !strcmp(cells[3], "d"), "split: %d", n);
    for (int i = 0; i < n; i++) free(cells[i]);
    free(cells);
    CHECK(volt__cb_csv_split("\"open", &cells) == -1, "unterminated quote");
    spit(path, "\"bad\n");
    CHECK(volt__cb_csv_open(&c, path, err, sizeof err) == VOLT_ERR_CORRUPT, "corrupt header");
}

/* ---- end to end: a linear module with a scripted validation score ------------------------------------ */

#define N_SAMPLES 32
#define BATCH 8       /* 4 batches = 4 optimizer steps per epoch */

typedef struct lin {
    volt_tensor *w, *b;
    const double *table;             /* val_score per epoch (the last entry repeats) */
    int ntable;
    int64_t val_epoch;
    const char *snap_dir;            /* listed at each on_train_epoch_end (module hook: after callbacks) */
    char snaps[16][1024];
    int epoch_starts, epoch_ends;
    int64_t first_epoch_started;
    int64_t steps;                   /* training_step calls (failing_train) */
} lin;

static volt_status lin_setup(void *self, volt_params *ps) {
    lin *m = self;
    VOLT_TRY(volt_param_new(ps, "fc.weight", VOLT_SHAPE(1, 4), VOLT_INIT_TORCH_LINEAR, &m->w));
    return volt_param_new(ps, "fc.bias", VOLT_SHAPE(1), VOLT_INIT_ZEROS, &m->b);
}

static volt_status lin_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    lin *m = self;
    volt_tensor *loss = volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b));
    volt_log(s, "train_loss", loss, VOLT_LOG_STEP | VOLT_LOG_EPOCH | VOLT_LOG_PROG_BAR);
    return volt_step_set_loss(s, loss);
}

static volt_status lin_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    lin *m = self;
    int64_t e = m->val_epoch < m->ntable ? m->val_epoch : m->ntable - 1;
    volt_linear(s, volt_batch_x(b), m->w, m->b);
    return volt_log_value(s, "val_score", m->table[e], VOLT_LOG_EPOCH | VOLT_LOG_PROG_BAR);
}

static volt_status lin_opt(void *self, volt_optim_setup *o) {
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.01f;
    return VOLT_OK;
}

static volt_status lin_val_epoch_start(void *self, volt_trainer *t) {
    ((lin *)self)->val_epoch = volt_trainer_current_epoch(t);
    return VOLT_OK;
}

static volt_status lin_train_epoch_start(void *self, volt_trainer *t) {
    lin *m = self;
    if (!m->epoch_starts++) m->first_epoch_started = volt_trainer_current_epoch(t);
    return VOLT_OK;
}

static volt_status lin_train_epoch_end(void *self, volt_trainer *t) {
    lin *m = self;
    int64_t e = volt_trainer_current_epoch(t);
    m->epoch_ends++;
    if (m->snap_dir && e >= 0 && e < 16) list_ckpts(m->snap_dir, m->snaps[e], sizeof m->snaps[e]);
    return VOLT_OK;
}

static const volt_module_ops lin_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = lin_setup, .configure_optimizers = lin_opt,
    .training_step = lin_train, .validation_step = lin_val, .test_step = lin_val,
    .on_validation_epoch_start = lin_val_epoch_start, .on_train_epoch_start = lin_train_epoch_start,
    .on_train_epoch_end = lin_train_epoch_end,
};

static volt_dataset *g_ds;

static volt_loader *mk_loader(void) {
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = BATCH;
    volt_loader *l = NULL;
    if (volt_loader_create(&lc, g_ds, &l) != VOLT_OK) { fprintf(stderr, "loader\n"); exit(1); }
    return l;
}

static void make_data(void) {
    if (!(g_ds = vtest_rows4(N_SAMPLES))) { fprintf(stderr, "dataset\n"); exit(1); }
}

typedef struct run_opts {
    int64_t max_epochs;
    bool progress_bar, logger;
    int64_t fast_dev_run;
    const char *run_config_json;
    const char *profiler;
    int64_t accumulate_grad_batches;   /* 0: the default */
} run_opts;

static volt_trainer *mk_trainer(const char *root, const run_opts *o) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.default_root_dir = root;
    c.max_epochs = o->max_epochs;
    c.enable_progress_bar = o->progress_bar;
    c.enable_logger = o->logger;
    c.enable_checkpointing = true;    /* an explicit ModelCheckpoint replaces the default one */
    c.log_every_n_steps = 2;
    c.fast_dev_run = o->fast_dev_run;
    c.run_config_json = o->run_config_json;
    c.profiler = o->profiler;
    if (o->accumulate_grad_batches > 0) c.accumulate_grad_batches = o->accumulate_grad_batches;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    if (st != VOLT_OK) { fprintf(stderr, "trainer_create: %s\n", t ? volt_trainer_errmsg(t) : volt_status_str(st)); exit(1); }
    return t;
}

static volt_status fit(volt_trainer *t, lin *m, bool with_val, const char *ckpt) {
    volt_loader *tr = mk_loader(), *va = with_val ? mk_loader() : NULL;
    volt_status st = volt_trainer_fit(t, &lin_ops, m, tr, va, ckpt);
    if (st != VOLT_OK) fprintf(stderr, "  (fit: %s: %s)\n", volt_status_str(st), volt_trainer_errmsg(t));
    volt_loader_destroy(tr);
    volt_loader_destroy(va);
    return st;
}

/* The named callback's state JSON stored in a checkpoint (caller frees), NULL if absent. */
static char *ckpt_cb_state(const char *path, const char *cb) {
    volt_st_file *f;
    char err[512];
    if (volt_st_open(path, &f, err, sizeof err) != VOLT_OK) return NULL;
    const char *j = volt_st_meta(f, "volt.callbacks");
    char *out = NULL;
    cJSON *o = j ? cJSON_Parse(j) : NULL;
    cJSON *it = cJSON_GetObjectItemCaseSensitive(o, cb);
    if (it) out = cJSON_PrintUnformatted(it);
    cJSON_Delete(o);
    volt_st_close(f);
    return out;
}

static int64_t ckpt_global_step(const char *path) {
    volt_st_file *f;
    char err[512];
    if (volt_st_open(path, &f, err, sizeof err) != VOLT_OK) return -1;
    int64_t gs = -1;
    if (volt_st_verify_all(f, err, sizeof err) == VOLT_OK) {
        const char *s = volt_st_meta(f, "volt.global_step");
        if (s) gs = atoll(s);
    }
    volt_st_close(f);
    return gs;
}

static const double k_scores[] = { 0.5, 0.7, 0.6, 0.9, 0.8 };

#define E0 "epoch=0-val_score=0.50.safetensors"
#define E1 "epoch=1-val_score=0.70.safetensors"
#define E2 "epoch=2-val_score=0.60.safetensors"
#define E3 "epoch=3-val_score=0.90.safetensors"
#define E4 "epoch=4-val_score=0.80.safetensors"
#define LAST "last.safetensors"


/* The tests' ModelCheckpoint: the best k by val_score (max) in dir, named {epoch}-{val_score:.2f}. */
static volt_checkpoint_config score_ckpt(const char *dir, int k, bool save_last) {
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = dir;
    cc.filename = "{epoch}-{val_score:.2f}";
    cc.monitor = "val_score";
    cc.mode = VOLT_MAX;
    cc.save_top_k = k;
    cc.save_last = save_last;
    return cc;
}

static void add_ckpt_ex(volt_trainer *t, const char *dir, int k, bool save_last, bool async_save, bool weights_only) {
    volt_checkpoint_config cc = score_ckpt(dir, k, save_last);
    cc.async_save = async_save;
    cc.save_weights_only = weights_only;
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
}

static void add_ckpt(volt_trainer *t, const char *dir, int k, bool save_last, bool async_save) {
    add_ckpt_ex(t, dir, k, save_last, async_save, false);
}

static void add_topk_ckpt(volt_trainer *t, const char *dir, int k, bool save_last) { add_ckpt(t, dir, k, save_last, false); }

static void test_e2e_topk(void) {
    static const struct { int k; bool last; const char *want[5]; const char *best; } cases[] = {
        { 1, true, { E0 "," LAST, E1 "," LAST, E1 "," LAST, E3 "," LAST, E3 "," LAST }, E3 },
        { 2, true, { E0 "," LAST, E0 "," E1 "," LAST, E1 "," E2 "," LAST, E1 "," E3 "," LAST, E3 "," E4 "," LAST }, E3 },
        { -1, true, { E0 "," LAST, E0 "," E1 "," LAST, E0 "," E1 "," E2 "," LAST, E0 "," E1 "," E2 "," E3 "," LAST,
                      E0 "," E1 "," E2 "," E3 "," E4 "," LAST }, E3 },
        { 0, true, { LAST, LAST, LAST, LAST, LAST }, NULL },
        { 2, false, { E0, E0 "," E1, E1 "," E2, E1 "," E3, E3 "," E4 }, E3 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char name[64], dir[1200];
        snprintf(name, sizeof name, "topk_%zu", c);
        const char *root = fresh_dir(name);
        snprintf(dir, sizeof dir, "%s/ckpt", root);
        volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 5, .logger = false });
        add_topk_ckpt(t, dir, cases[c].k, cases[c].last);
        lin m = { .table = k_scores, .ntable = 5, .snap_dir = dir };
        CHECK_OK(fit(t, &m, true, NULL));
        for (int e = 0; e < 5; e++)
            CHECK(!strcmp(m.snaps[e], cases[c].want[e]), "top_k=%d save_last=%d after epoch %d: [%s], want [%s]",
                  cases[c].k, cases[c].last, e, m.snaps[e], cases[c].want[e]);
        const char *bp = volt_trainer_best_model_path(t);
        char want_best[1400] = "";
        if (cases[c].best) snprintf(want_best, sizeof want_best, "%s/%s", dir, cases[c].best);
        CHECK(cases[c].best ? (bp && !strcmp(bp, want_best)) : !bp, "top_k=%d best path %s", cases[c].k, bp ? bp : "(null)");
        double bs = volt_trainer_best_model_score(t);
        CHECK(cases[c].best ? bs == 0.9 : isnan(bs), "top_k=%d best score %g", cases[c].k, bs);
        if (cases[c].last) {
            char lp[1300];
            snprintf(lp, sizeof lp, "%s/" LAST, dir);
            CHECK(ckpt_global_step(lp) == 20, "last.safetensors is a full checkpoint at step 20: %lld", (long long)ckpt_global_step(lp));
        }
        if (cases[c].best) {           /* "best" resolves and loads */
            volt_loader *l = mk_loader();
            CHECK_OK(volt_trainer_test(t, &lin_ops, &m, l, "best"));
            volt_loader_destroy(l);
        }
        volt_trainer_destroy(t);
    }
}

/* Interrupted after 3 epochs and resumed from "last" in a new trainer: the same files, best
 * path/score and ModelCheckpoint state as an uninterrupted 5-epoch run. */
static void test_e2e_topk_resume(void) {
    const char *ra = fresh_dir("resume_a"), *rb = fresh_dir("resume_b");
    char da[1200], db[1200];
    snprintf(da, sizeof da, "%s/ckpt", ra);
    snprintf(db, sizeof db, "%s/ckpt", rb);

    volt_trainer *t = mk_trainer(ra, &(run_opts){ .max_epochs = 5 });
    add_topk_ckpt(t, da, 2, true);
    lin m = { .table = k_scores, .ntable = 5, .snap_dir = da };
    CHECK_OK(fit(t, &m, true, NULL));
    double best_a = volt_trainer_best_model_score(t);
    volt_trainer_destroy(t);

    t = mk_trainer(rb, &(run_opts){ .max_epochs = 3 });
    add_topk_ckpt(t, db, 2, true);
    lin m1 = { .table = k_scores, .ntable = 5, .snap_dir = db };
    CHECK_OK(fit(t, &m1, true, NULL));
    volt_trainer_destroy(t);
    t = mk_trainer(rb, &(run_opts){ .max_epochs = 5 });
    add_topk_ckpt(t, db, 2, true);
    lin m2 = { .table = k_scores, .ntable = 5, .snap_dir = db };
    CHECK_OK(fit(t, &m2, true, "last"));
    CHECK(m2.first_epoch_started == 3, "resumed at epoch 3 (first epoch started %lld)", (long long)m2.first_epoch_started);
    CHECK(!strcmp(m2.snaps[4], m.snaps[4]), "files: resumed [%s] vs uninterrupted [%s]", m2.snaps[4], m.snaps[4]);
    CHECK(volt_trainer_best_model_score(t) == best_a, "best score %g vs %g", volt_trainer_best_model_score(t), best_a);
    const char *bp = volt_trainer_best_model_path(t);
    CHECK(bp && strstr(bp, db) == bp && !strcmp(bp + strlen(db), "/" E3), "best path %s", bp ? bp : "(null)");
    volt_trainer_destroy(t);

    /* the state stored in the final last.safetensors is the same, up to the folder */
    char la[1300], lb[1300];
    snprintf(la, sizeof la, "%s/" LAST, da);
    snprintf(lb, sizeof lb, "%s/" LAST, db);
    char *sa = ckpt_cb_state(la, "ModelCheckpoint"), *sb = ckpt_cb_state(lb, "ModelCheckpoint");
    CHECK(sa && sb, "ModelCheckpoint state in both last checkpoints");
    if (sa && sb) {
        /* replace every "<ra>" with "<rb>" in sa */
        char fixed[8192] = "";
        for (const char *p = sa; *p;) {
            if (!strncmp(p, ra, strlen(ra))) { strncat(fixed, rb, sizeof fixed - strlen(fixed) - 1); p += strlen(ra); }
            else { size_t k = strlen(fixed); if (k + 1 < sizeof fixed) { fixed[k] = *p; fixed[k + 1] = 0; } p++; }
        }
        CHECK(!strcmp(fixed, sb), "state:\n  uninterrupted %s\n  resumed       %s", fixed, sb);
    }
    free(sa);
    free(sb);
}

static void test_e2e_ckpt_modes(void) {
    /* no validation loader: saves at train epoch end; default template {epoch}-{step};
     * default dirpath <root>/checkpoints without a logger */
    const char *root = fresh_dir("ckpt_noval");
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 2 });
    lin m = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m, false, NULL));
    char dir[1200], got[2048];
    snprintf(dir, sizeof dir, "%s/checkpoints", root);
    list_ckpts(dir, got, sizeof got);
    CHECK(!strcmp(got, "epoch=1-step=8.safetensors"), "no-val default checkpoint: [%s]", got);
    volt_trainer_destroy(t);

    /* monitor NULL keeps the k most recent; every_n_train_steps saves at those steps */
    root = fresh_dir("ckpt_recent");
    snprintf(dir, sizeof dir, "%s/ck", root);
    t = mk_trainer(root, &(run_opts){ .max_epochs = 4 });
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = dir;
    cc.filename = "{epoch}";
    cc.save_top_k = 2;
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    lin m2 = { .table = k_scores, .ntable = 5, .snap_dir = dir };
    CHECK_OK(fit(t, &m2, true, NULL));
    CHECK(!strcmp(m2.snaps[1], "epoch=0.safetensors,epoch=1.safetensors") &&
          !strcmp(m2.snaps[3], "epoch=2.safetensors,epoch=3.safetensors"), "recency: [%s] [%s]", m2.snaps[1], m2.snaps[3]);
    const char *bp = volt_trainer_best_model_path(t);
    CHECK(bp && strstr(bp, "epoch=3.safetensors"), "no monitor: best = latest (%s)", bp ? bp : "(null)");
    volt_trainer_destroy(t);

    root = fresh_dir("ckpt_steps");
    snprintf(dir, sizeof dir, "%s/ck", root);
    t = mk_trainer(root, &(run_opts){ .max_epochs = 2 });
    volt_checkpoint_config_init(&cc);
    cc.dirpath = dir;
    cc.filename = "{step}";
    cc.save_top_k = -1;
    cc.every_n_train_steps = 3;
    cc.save_last = true;
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    lin m3 = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m3, true, NULL));
    list_ckpts(dir, got, sizeof got);
    CHECK(!strcmp(got, "last.safetensors,step=3.safetensors,step=6.safetensors"), "every 3 steps: [%s]", got);
    char lp[1300];
    snprintf(lp, sizeof lp, "%s/last.safetensors", dir);
    CHECK(ckpt_global_step(lp) == 8, "last updated at the epoch end too: %lld", (long long)ckpt_global_step(lp));
    volt_trainer_destroy(t);

    /* a name collision gets -v1; the foreign file stays */
    root = fresh_dir("ckpt_collide");
    snprintf(dir, sizeof dir, "%s/ck", root);
    mkdir(dir, 0755);
    snprintf(lp, sizeof lp, "%s/" E0, dir);
    spit(lp, "not ours");
    t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
    add_topk_ckpt(t, dir, -1, false);
    lin m4 = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m4, true, NULL));
    list_ckpts(dir, got, sizeof got);
    CHECK(!strcmp(got, "epoch=0-val_score=0.50-v1.safetensors," E0), "collision: [%s]", got);
    volt_trainer_destroy(t);

    /* a monitor that is never logged: NOT_FOUND naming what is available */
    root = fresh_dir("ckpt_missing");
    t = mk_trainer(root, &(run_opts){ .max_epochs = 2 });
    volt_checkpoint_config_init(&cc);
    cc.monitor = "val_acc";
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    lin m5 = { .table = k_scores, .ntable = 5 };
    volt_loader *tr = mk_loader(), *va = mk_loader();
    volt_status st = volt_trainer_fit(t, &lin_ops, &m5, tr, va, NULL);
    const char *em = volt_trainer_errmsg(t);
    CHECK(st == VOLT_ERR_NOT_FOUND && strstr(em, "val_acc") && strstr(em, "'val_score'") && strstr(em, "'train_loss_step'"),
          "missing monitor: %s: %s", volt_status_str(st), em);
    volt_loader_destroy(tr);
    volt_loader_destroy(va);
    volt_trainer_destroy(t);

    /* bad configurations are refused at add time */
    t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
    volt_checkpoint_config_init(&cc);
    cc.save_top_k = -2;
    CHECK(volt_add_model_checkpoint(t, &cc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "save_top_k"), "top_k -2");
    volt_checkpoint_config_init(&cc);
    cc.filename = "{epoch";
    CHECK(volt_add_model_checkpoint(t, &cc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "unclosed"), "bad template");
    volt_early_stopping_config ec;
    volt_early_stopping_config_init(&ec);
    CHECK(volt_add_early_stopping(t, &ec) == VOLT_ERR_INVALID_ARG, "EarlyStopping without monitor");
    /* the one version rule, 1 <= version <= current, with a message naming the struct */
    for (int bad = 0; bad < 2; bad++) {
        volt_checkpoint_config_init(&cc);
        CHECK(cc.version == VOLT_CHECKPOINT_CONFIG_VERSION, "checkpoint config init sets version");
        cc.version = bad ? VOLT_CHECKPOINT_CONFIG_VERSION + 1 : 0;
        CHECK(volt_add_model_checkpoint(t, &cc) == VOLT_ERR_VERSION && strstr(volt_trainer_errmsg(t), "volt_checkpoint_config: version"),
              "checkpoint config version %u: %s", cc.version, volt_trainer_errmsg(t));
        volt_early_stopping_config_init(&ec);
        CHECK(ec.version == VOLT_EARLY_STOPPING_CONFIG_VERSION, "early stopping config init sets version");
        ec.monitor = "val_score";
        ec.version = bad ? VOLT_EARLY_STOPPING_CONFIG_VERSION + 1 : 0;
        CHECK(volt_add_early_stopping(t, &ec) == VOLT_ERR_VERSION && strstr(volt_trainer_errmsg(t), "volt_early_stopping_config: version"),
              "early stopping config version %u: %s", ec.version, volt_trainer_errmsg(t));
        volt_ckpt_resolver r = { .version = bad ? VOLT_CKPT_RESOLVER_VERSION + 1 : 0 };
        volt_trainer_set_ckpt_resolver(t, &r);
        CHECK(!volt_trainer_ckpt_resolver(t) && strstr(volt_trainer_errmsg(t), "volt_ckpt_resolver: version"),
              "resolver version %u refused: %s", r.version, volt_trainer_errmsg(t));
    }
    volt_trainer_destroy(t);

    /* fast_dev_run writes nothing */
    root = fresh_dir("ckpt_fast");
    t = mk_trainer(root, &(run_opts){ .max_epochs = 3, .fast_dev_run = 2 });
    snprintf(dir, sizeof dir, "%s/ck", root);
    add_topk_ckpt(t, dir, -1, true);
    CHECK_OK(volt_add_csv_logger(t));
    lin m6 = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m6, true, NULL));
    char ll[1200];
    snprintf(ll, sizeof ll, "%s/lightning_logs", root);
    CHECK(!exists(dir) && !exists(ll), "fast_dev_run: no checkpoint dir, no logs");
    volt_trainer_destroy(t);
}

static const double es_scores[] = { 0.5, 0.7, 0.6, 0.65, 0.9, 1.0 };

static void add_es(volt_trainer *t) {
    volt_early_stopping_config ec;
    volt_early_stopping_config_init(&ec);
    ec.monitor = "val_score";
    ec.mode = VOLT_MAX;
    ec.patience = 2;
    CHECK_OK(volt_add_early_stopping(t, &ec));
}

/* verbose (ModelCheckpoint config version 5, EarlyStopping 2): Lightning's lines on stderr; off
 * by default (the same run says none of them), and a version-4 / version-1 config (a caller
 * built before the field) reads no verbose at all. Scores 0.5 0.7 0.6 0.65 0.9: top 1. */
static void test_e2e_verbose(void) {
    for (int v = 0; v < 3; v++) {   /* 0: off, 1: on, 2: on but older config versions */
        char name[64], dir[1200], err[1300];
        snprintf(name, sizeof name, "verbose_%d", v);
        const char *root = fresh_dir(name);
        snprintf(dir, sizeof dir, "%s/ckpt", root);
        snprintf(err, sizeof err, "%s/stderr.txt", root);
        volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 5, .logger = false });
        volt_early_stopping_config ec;
        volt_early_stopping_config_init(&ec);
        ec.monitor = "val_score";
        ec.mode = VOLT_MAX;
        ec.patience = 10;
        ec.verbose = v > 0;
        if (v == 2) ec.version = 1;
        CHECK_OK(volt_add_early_stopping(t, &ec));
        volt_checkpoint_config cc;
        volt_checkpoint_config_init(&cc);
        cc.dirpath = dir;
        cc.filename = "{epoch}-{val_score:.2f}";
        cc.monitor = "val_score";
        cc.mode = VOLT_MAX;
        cc.verbose = v > 0;
        if (v == 2) cc.version = 4;
        CHECK_OK(volt_add_model_checkpoint(t, &cc));
        lin m = { .table = k_scores, .ntable = 5 };
        const int saved = vtest_stderr_to(err);
        volt_status st = fit(t, &m, true, NULL);
        char said[8192];
        vtest_stderr_back(saved, err, said, sizeof said);
        CHECK_OK(st);
        const bool on = v == 1;
        char want[1600];
        snprintf(want, sizeof want, "Epoch 1, global step 8: 'val_score' reached 0.70000 (best 0.70000), saving model to "
                 "'%s/epoch=1-val_score=0.70.safetensors' as top 1", dir);
        CHECK(on == (strstr(said, want) != NULL), "verbose %d: ModelCheckpoint's save line: %s", v, said);
        CHECK(on == (strstr(said, "Epoch 2, global step 12: 'val_score' was not in top 1") != NULL), "verbose %d: not in top", v);
        CHECK(on == (strstr(said, "EarlyStopping: Metric val_score improved by 0.200 >= min_delta = 0. New best score: 0.900") != NULL) &&
              on == (strstr(said, "EarlyStopping: Metric val_score improved. New best score: 0.500") != NULL),
              "verbose %d: EarlyStopping's improvements: %s", v, said);
        volt_trainer_destroy(t);
    }
}

/* check_on_train_epoch_end (config version 3): a monitor already past a stopping_threshold
 * (train_loss_step under 1e9, or val_score over -1e9) stops fit at the first check, so
 * global_step tells where it ran (4 batches an epoch, 3 epochs). -1 is resolved at fit start as
 * Lightning's setup() does: val_check_interval == 1.0 (volt: 0, or val_check_fraction 1) and
 * check_val_every_n_epoch == 1 check once at each epoch's end (step 4, with validation or
 * without); otherwise at validation ends only: a validation every 2 batches or every 0.5 of an
 * epoch stops at step 2, every other epoch at 8 (epoch 1's), and with val_check_interval 2 but
 * no validation it never checks (12 steps; volt's rule before checked at train epoch end when no
 * validation had run: step 4). A val metric with check_val_every_n_epoch 2 is checked at epoch
 * 1's validation (that rule failed at epoch 0's train end: "val_score which is not available").
 * 1: at train epoch ends only (4); 0 without validation: never (12). Out of range: refused. */
typedef struct es_where { int check; bool with_val, val_metric; int64_t interval, every; double fraction; } es_where;
static int64_t es_stop_step(es_where w) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.default_root_dir = fresh_dir("es_check");
    c.max_epochs = 3;
    c.val_check_interval = w.interval;
    c.val_check_fraction = w.fraction;
    c.check_val_every_n_epoch = w.every ? w.every : 1;
    c.num_sanity_val_steps = 0;
    c.enable_progress_bar = c.enable_logger = c.enable_checkpointing = c.enable_model_summary = false;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_early_stopping_config ec;
    volt_early_stopping_config_init(&ec);
    ec.monitor = w.val_metric ? "val_score" : "train_loss_step";
    ec.mode = w.val_metric ? VOLT_MAX : VOLT_MIN;
    ec.has_stopping_threshold = true;
    ec.stopping_threshold = w.val_metric ? -1e9f : 1e9f;
    ec.check_on_train_epoch_end = w.check;
    CHECK_OK(volt_add_early_stopping(t, &ec));
    lin m = { .table = es_scores, .ntable = 6 };
    CHECK_OK(fit(t, &m, w.with_val, NULL));
    const int64_t gs = volt_trainer_global_step(t);
    volt_trainer_destroy(t);
    return gs;
}
static void test_es_check_on_train_epoch_end(void) {
    static const struct { es_where w; int64_t want; const char *what; } cases[] = {
        { { .check = -1, .with_val = true, .interval = 2 }, 2, "auto, validation every 2 batches" },
        { { .check = -1, .with_val = true, .fraction = 0.5 }, 2, "auto, validation every 0.5 epoch" },
        { { .check = -1, .with_val = true }, 4, "auto, validation at epoch end" },
        { { .check = -1, .with_val = true, .fraction = 1.0 }, 4, "auto, val_check_fraction 1" },
        { { .check = -1, .with_val = false }, 4, "auto, no validation" },
        { { .check = -1, .with_val = false, .interval = 2 }, 12, "auto, val_check_interval 2, no validation" },
        { { .check = -1, .with_val = true, .every = 2 }, 8, "auto, validation every other epoch" },
        { { .check = -1, .with_val = true, .every = 2, .val_metric = true }, 8, "auto, val_score, every other epoch" },
        { { .check = 1, .with_val = true, .interval = 2 }, 4, "true, validation every 2 batches" },
        { { .check = 0, .with_val = false, .interval = 2 }, 12, "false, no validation" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t gs = es_stop_step(cases[i].w);
        CHECK(gs == cases[i].want, "%s: stopped at step %lld (want %lld)", cases[i].what, (long long)gs, (long long)cases[i].want);
    }
    volt_trainer *t = mk_trainer(fresh_dir("es_check_bad"), &(run_opts){ .max_epochs = 1 });
    volt_early_stopping_config ec;
    volt_early_stopping_config_init(&ec);
    ec.monitor = "val_score";
    ec.check_on_train_epoch_end = 2;
    CHECK(volt_add_early_stopping(t, &ec) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "check_on_train_epoch_end"),
          "check_on_train_epoch_end 2: %s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
}

static void test_e2e_early_stopping(void) {
    /* improves at 0 and 1, waits at 2 and 3: stops after epoch 3 */
    const char *root = fresh_dir("es_plain");
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 10 });
    add_es(t);
    lin m = { .table = es_scores, .ntable = 6 };
    CHECK_OK(fit(t, &m, true, NULL));
    CHECK(m.epoch_ends == 4 && m.epoch_starts == 4, "stopped after epoch 3: %d epochs", m.epoch_ends);
    CHECK(volt_trainer_should_stop(t), "stop requested");
    volt_trainer_destroy(t);

    /* interrupted after epoch 2 (wait = 1), resumed: stops after epoch 3 as well */
    root = fresh_dir("es_resume");
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/ck", root);
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = dir;
    cc.save_top_k = 0;
    cc.save_last = true;
    t = mk_trainer(root, &(run_opts){ .max_epochs = 3 });
    add_es(t);                                    /* before the checkpoint: its state is saved updated */
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    lin m1 = { .table = es_scores, .ntable = 6 };
    CHECK_OK(fit(t, &m1, true, NULL));
    CHECK(m1.epoch_ends == 3, "first part ran 3 epochs");
    volt_trainer_destroy(t);
    char lp[1300];
    snprintf(lp, sizeof lp, "%s/last.safetensors", dir);
    char *s = ckpt_cb_state(lp, "EarlyStopping");
    CHECK(s && strstr(s, "\"wait_count\":1") && strstr(s, "\"best_score\":0.7"), "state after epoch 2: %s", s ? s : "(none)");
    free(s);
    t = mk_trainer(root, &(run_opts){ .max_epochs = 10 });
    add_es(t);
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    lin m2 = { .table = es_scores, .ntable = 6 };
    CHECK_OK(fit(t, &m2, true, "last"));
    CHECK(m2.epoch_starts == 1 && m2.first_epoch_started == 3, "resumed run started only epoch 3 (%d starts, first %lld)",
          m2.epoch_starts, (long long)m2.first_epoch_started);
    volt_trainer_destroy(t);
    s = ckpt_cb_state(lp, "EarlyStopping");
    CHECK(s && strstr(s, "\"wait_count\":2") && strstr(s, "\"stopped_epoch\":3"), "state at the stop: %s", s ? s : "(none)");
    free(s);

    /* a monitor that is never logged */
    root = fresh_dir("es_missing");
    t = mk_trainer(root, &(run_opts){ .max_epochs = 3 });
    volt_early_stopping_config ec;
    volt_early_stopping_config_init(&ec);
    ec.monitor = "val_loss";
    CHECK_OK(volt_add_early_stopping(t, &ec));
    lin m3 = { .table = es_scores, .ntable = 6 };
    volt_loader *tr = mk_loader(), *va = mk_loader();
    volt_status st = volt_trainer_fit(t, &lin_ops, &m3, tr, va, NULL);
    CHECK(st == VOLT_ERR_NOT_FOUND && strstr(volt_trainer_errmsg(t), "'val_score'"), "missing: %s", volt_trainer_errmsg(t));
    volt_loader_destroy(tr);
    volt_loader_destroy(va);
    volt_trainer_destroy(t);
}

/* Rows of a metrics.csv as "epoch,step:col=val;col=val" lines (empty cells left out). */
static int csv_rows(const char *path, char rows[][256], int max, char *header, size_t hn) {
    char *s = slurp(path);
    if (!s) return -1;
    int n = -1;
    char **hcols = NULL;
    int nh = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        char **cells;
        int k = volt__cb_csv_split(line, &cells);
        if (n < 0) { snprintf(header, hn, "%s", line); hcols = cells; nh = k; n = 0; continue; }
        if (n < max) {
            snprintf(rows[n], 256, "%s,%s:", cells[0], cells[1]);
            for (int i = 2; i < k && i < nh; i++)
                if (cells[i][0]) snprintf(rows[n] + strlen(rows[n]), 256 - strlen(rows[n]), "%s%s=%s",
                                          rows[n][strlen(rows[n]) - 1] == ':' ? "" : ";", hcols[i],
                                          strncmp(hcols[i], "val", 3) ? "x" : cells[i]);
        }
        n++;
        for (int i = 0; i < k; i++) free(cells[i]);
        free(cells);
    }
    for (int i = 0; i < nh; i++) free(hcols[i]);
    free(hcols);
    free(s);
    return n;
}

static const char *const k_csv_epoch0[] = {
    "0,1:lr-SGD=x;train_loss_step=x", "0,3:lr-SGD=x;train_loss_step=x", "0,3:val_score=0.5", "0,3:train_loss_epoch=x",
};
static const char *const k_csv_epoch1[] = {
    "1,5:lr-SGD=x;train_loss_step=x", "1,7:lr-SGD=x;train_loss_step=x", "1,7:val_score=0.7", "1,7:train_loss_epoch=x",
};

static void test_e2e_csv_lr(void) {
    const char *root = fresh_dir("csv");
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 2, .logger = true,
                                                    .run_config_json = "{\"model\":\"lin\",\"lr\":0.01,\"seed\":9007199254740991,"
                                                                       "\"seeds\":[9007199254740991],\"big\":1e999,\"lr\":0.02}" });
    CHECK_OK(volt_add_lr_monitor(t));
    lin m = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m, true, NULL));
    double lr = 0;
    CHECK(volt_trainer_metric(t, "lr-SGD", &lr) && fabs(lr - 0.01) < 1e-9, "lr-SGD = %g", lr);
    char vdir[1200], path[1300], header[512], rows[32][256];
    snprintf(vdir, sizeof vdir, "%s/lightning_logs/version_0", root);
    CHECK(volt_trainer_log_dir(t) && !strcmp(volt_trainer_log_dir(t), vdir), "log dir %s", volt_trainer_log_dir(t));
    snprintf(path, sizeof path, "%s/metrics.csv", vdir);
    int n = csv_rows(path, rows, 32, header, sizeof header);
    CHECK(!strcmp(header, "epoch,step,lr-SGD,train_loss_epoch,train_loss_step,val_score"), "header %s", header);
    CHECK(n == 8, "%d rows", n);
    for (int i = 0; i < 4 && i < n; i++) CHECK(!strcmp(rows[i], k_csv_epoch0[i]), "row %d: %s, want %s", i, rows[i], k_csv_epoch0[i]);
    for (int i = 0; i < 4 && i + 4 < n; i++) CHECK(!strcmp(rows[i + 4], k_csv_epoch1[i]), "row %d: %s, want %s", i + 4, rows[i + 4], k_csv_epoch1[i]);
    snprintf(path, sizeof path, "%s/config.json", vdir);
    char *s = slurp(path);
    CHECK(s && strstr(s, "\"max_epochs\":\t2") && strstr(s, "\"log_every_n_steps\":\t2"), "config.json: %s", s ? s : "(none)");
    cJSON *cj = s ? cJSON_Parse(s) : NULL;       /* every trainer setting (trainer/config_fields.h) */
    for (int i = 0; i < volt__n_trainer_config_fields; i++)
        if (volt__trainer_config_fields[i].flags & VOLT__CFG_HPARAM)
            CHECK(cJSON_GetObjectItemCaseSensitive(cj, volt__trainer_config_fields[i].name), "config.json has no %s",
                  volt__trainer_config_fields[i].name);
    CHECK(cj && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cj, "compile")) &&
              cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cj, "matmul_precision")) &&
              cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cj, "strategy_comm")) &&
              cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cj, "strategy_reduce_dtype")),
          "config.json: %s", s ? s : "(none)");
    cJSON_Delete(cj);
    free(s);
    snprintf(path, sizeof path, "%s/hparams.json", vdir);
    s = slurp(path);
    /* the numbers as the run had them (cJSON's "%.15g" gave 9007199254740990: a rerun from it
     * differed), in arrays too; a key given twice is written twice (the exact printer looped on
     * it), an infinity as null (valid JSON) */
    CHECK(s && strstr(s, "\"model\":\t\"lin\"") && strstr(s, "\"seed\":\t9007199254740991") && strstr(s, "\"lr\":\t0.01") &&
              strstr(s, "\"lr\":\t0.02") && strstr(s, "[9007199254740991]") && strstr(s, "\"big\":\tnull"),
          "hparams.json: %s", s ? s : "(none)");
    free(s);
    snprintf(path, sizeof path, "%s/checkpoints/epoch=1-step=8.safetensors", vdir);
    CHECK(exists(path), "default ModelCheckpoint saves under the log dir");
    /* a test run in the same trainer appends a row to the same file */
    volt_loader *l = mk_loader();
    CHECK_OK(volt_trainer_test(t, &lin_ops, &m, l, NULL));
    volt_loader_destroy(l);
    snprintf(path, sizeof path, "%s/metrics.csv", vdir);
    n = csv_rows(path, rows, 32, header, sizeof header);
    CHECK(n == 9 && !strcmp(rows[8], "2,8:val_score=0.7"), "test row: %d rows, last %s", n, n > 0 ? rows[n - 1] : "");
    volt_trainer_destroy(t);

    /* a fresh run in the same root gets version_1 */
    t = mk_trainer(root, &(run_opts){ .max_epochs = 1, .logger = true });
    lin m2 = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m2, true, NULL));
    snprintf(vdir, sizeof vdir, "%s/lightning_logs/version_1", root);
    CHECK(volt_trainer_log_dir(t) && !strcmp(volt_trainer_log_dir(t), vdir), "second run: %s", volt_trainer_log_dir(t));
    volt_trainer_destroy(t);
}

/* Interrupted after epoch 0 and resumed from "last" (found in the newest version folder):
 * the resumed run is a run of its own (docs/RELIABILITY.md): a new version folder with the
 * rows of epoch 1 an uninterrupted run writes; the first run's folder is left as it was. */
static void test_e2e_csv_resume(void) {
    const char *root = fresh_dir("csv_resume");
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.save_last = true;
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 1, .logger = true });
    CHECK_OK(volt_add_lr_monitor(t));
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    lin m = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m, true, NULL));
    volt_trainer_destroy(t);
    t = mk_trainer(root, &(run_opts){ .max_epochs = 2, .logger = true });
    CHECK_OK(volt_add_lr_monitor(t));
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    lin m2 = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m2, true, "last"));
    char v0[1200], v1[1200], path[1300], header[512], rows[32][256];
    snprintf(v0, sizeof v0, "%s/lightning_logs/version_0", root);
    snprintf(v1, sizeof v1, "%s/lightning_logs/version_1", root);
    CHECK(volt_trainer_log_dir(t) && !strcmp(volt_trainer_log_dir(t), v1), "resumed log dir %s", volt_trainer_log_dir(t));
    snprintf(path, sizeof path, "%s/metrics.csv", v0);
    int n = csv_rows(path, rows, 32, header, sizeof header);
    CHECK(n == 4, "%d rows in the first run's metrics.csv (want its 4)", n);
    for (int i = 0; i < 4 && i < n; i++) CHECK(!strcmp(rows[i], k_csv_epoch0[i]), "row %d: %s", i, rows[i]);
    snprintf(path, sizeof path, "%s/metrics.csv", v1);
    n = csv_rows(path, rows, 32, header, sizeof header);
    CHECK(n == 4, "%d rows in the resumed run's metrics.csv (want 4)", n);
    for (int i = 0; i < n; i++) fprintf(stderr, "    row %d: %s\n", i, rows[i]);
    for (int i = 0; i < 4 && i < n; i++) CHECK(!strcmp(rows[i], k_csv_epoch1[i]), "row %d: %s", i, rows[i]);
    snprintf(path, sizeof path, "%s/checkpoints/last.safetensors", v1);
    CHECK(ckpt_global_step(path) == 8, "the resumed run's last, step 8: %lld", (long long)ckpt_global_step(path));
    snprintf(path, sizeof path, "%s/checkpoints/last.safetensors", v0);
    CHECK(ckpt_global_step(path) == 4, "the first run's last is kept, step 4: %lld", (long long)ckpt_global_step(path));
    volt_trainer_destroy(t);
}

static volt_status lin_predict(void *self, volt_step *s, const volt_batch *b, int64_t i, volt_tensor **out) {
    lin *m = self;
    *out = volt_linear(s, volt_batch_x(b), m->w, m->b);
    return VOLT_OK;
}
static volt_status pred_ignore(void *ctx, const volt_batch *b, const volt_tensor *pred) { return VOLT_OK; }

static void test_e2e_progress_bar(void) {
    const char *root = fresh_dir("pbar");
    char path[1200];
    snprintf(path, sizeof path, "%s/stderr.txt", root);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 2, .progress_bar = true });
    lin m = { .table = k_scores, .ntable = 5 };
    volt_status st = fit(t, &m, true, NULL);
    volt_loader *l = mk_loader();
    volt_status st2 = volt_trainer_test(t, &lin_ops, &m, l, NULL);
    volt_module_ops pops = lin_ops;
    pops.predict_step = lin_predict;
    volt_status st3 = volt_trainer_predict(t, &pops, &m, l, NULL, pred_ignore, NULL);
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CHECK_OK(st);
    CHECK_OK(st2);
    CHECK_OK(st3);
    char *s = slurp(path);
    CHECK(s != NULL, "captured stderr");
    if (!s) return;
    static const char *const want[] = {
        "Epoch 0/1: 1/4 [", "Epoch 0/1: 2/4 [", "Epoch 0/1: 3/4 [", "Validation: 4/4 [", "Epoch 0/1: 4/4 [",
        "Epoch 1/1: 1/4 [", "Epoch 1/1: 4/4 [", "Testing: 1/4 [", "Testing: 4/4 [", "Predicting: 1/4 [",
        "Predicting: 4/4 [",
    };
    const char *p = s;
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const char *q = strstr(p, want[i]);
        CHECK(q != NULL, "progress output lacks (in order) '%s':\n%s", want[i], s);
        if (q) p = q;
    }
    const char *e1 = strstr(s, "Epoch 0/1: 4/4 [");
    const char *eol = e1 ? strchr(e1, '\n') : NULL;
    CHECK(e1 && eol && strstr(e1, "val_score=0.5") && strstr(e1, "val_score=0.5") < eol && strstr(e1, "train_loss_step="),
          "epoch line shows the prog-bar metrics: %.*s", e1 && eol ? (int)(eol - e1) : 0, e1 ? e1 : "");
    const char *te = strstr(s, "Testing: 4/4 [");
    CHECK(te && strstr(te, "val_score=0.7"), "test line shows its metrics");
    const char *te_eol = te ? strchr(te, '\n') : NULL;
    CHECK(te && te_eol && !memmem(te, (size_t)(te_eol - te), "train_loss", 10),
          "the test line shows no stale training metrics: %.*s", te && te_eol ? (int)(te_eol - te) : 0, te ? te : "");
    CHECK(!strchr(s, '\r') && !strstr(s, "Sanity"), "not a TTY: plain lines, no sanity-check line");
    free(s);
}

/* The default callbacks come from the callbacks layer (callbacks/defaults.c): the logger
 * first, the checkpointing callback last, no default where one of that name was added. */
static const char *cbname(const volt_trainer *t, int i) {
    const char *n = volt_trainer_callback_name(t, i);
    return n ? n : "(none)";
}

static void test_e2e_default_callbacks(void) {
    static const char *const want[] = { "CSVLogger", "EarlyStopping", "TensorBoardLogger", "MetricPlots",
                                        "ProgressBar", "ModelSummary", "ModelCheckpoint" };
    const char *root = fresh_dir("defaults");
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 1, .logger = true, .progress_bar = true });
    int fd = open("/dev/null", O_WRONLY), saved = dup(2);   /* the bar writes to stderr */
    add_es(t);
    CHECK(volt_trainer_num_callbacks(t) == 1, "one callback before fit: %d", volt_trainer_num_callbacks(t));
    lin m = { .table = es_scores, .ntable = 6 };
    dup2(fd, 2);
    volt_status st = fit(t, &m, true, NULL);
    dup2(saved, 2);
    close(fd); close(saved);
    CHECK_OK(st);
    int n = volt_trainer_num_callbacks(t);
    CHECK(n == (int)(sizeof want / sizeof *want), "%d callbacks after fit", n);
    for (int i = 0; i < n && i < (int)(sizeof want / sizeof *want); i++)
        CHECK(!strcmp(cbname(t, i), want[i]),
              "callback %d is %s, want %s", i, cbname(t, i), want[i]);
    CHECK(volt_trainer_callback_name(t, n) == NULL && volt_trainer_callback_name(t, -1) == NULL, "out of range: NULL");
    CHECK(volt_trainer_move_callback(t, 0, n) == VOLT_ERR_INVALID_ARG, "move out of range is refused");
    CHECK_OK(volt_trainer_move_callback(t, 0, 2));
    CHECK(!strcmp(cbname(t, 0), "EarlyStopping") && !strcmp(cbname(t, 2), "CSVLogger") &&
          !strcmp(cbname(t, 1), "TensorBoardLogger"), "move 0 -> 2 keeps the others' order");
    CHECK_OK(volt_trainer_move_callback(t, 2, 0));
    CHECK(!strcmp(cbname(t, 0), "CSVLogger") && !strcmp(cbname(t, 1), "EarlyStopping"),
          "move 2 -> 0 restores it");
    volt_trainer_destroy(t);

    /* a user ModelCheckpoint added first replaces the default one and still runs last */
    root = fresh_dir("defaults_user_mc");
    t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
    char dir[512];
    snprintf(dir, sizeof dir, "%s/ckpts", root);
    add_topk_ckpt(t, dir, 1, false);
    add_es(t);
    lin m2 = { .table = es_scores, .ntable = 6 };
    CHECK_OK(fit(t, &m2, true, NULL));
    n = volt_trainer_num_callbacks(t);
    int n_mc = 0;
    for (int i = 0; i < n; i++) n_mc += !strcmp(cbname(t, i), "ModelCheckpoint");
    CHECK(n_mc == 1, "one ModelCheckpoint, not a default besides the user's: %d", n_mc);
    CHECK(n >= 2 && !strcmp(cbname(t, n - 1), "ModelCheckpoint") &&
          !strcmp(cbname(t, n - 2), "ModelSummary"), "ModelCheckpoint runs last");
    volt_trainer_destroy(t);
}

/* ---- asynchronous saving ---------------------------------------------------------------------- */

static bool same_bytes(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    unsigned char *x = vtest_slurp(a, &na), *y = vtest_slurp(b, &nb);
    bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}


/* async_save leaves the files a synchronous run leaves, byte for byte (the same run in the
 * same folder: the checkpoints name their folder), last still a hard link to the best when
 * both are saved at one step; "best" loads. */
static void test_e2e_async_save(void) {
    static const struct { int k; bool last; } cases[] = { { 1, true }, { 2, true }, { 0, true }, { 2, false } };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char list[2][2048], dir[1200], keep[1300], path[1400], kept[1400];
        const char *root = fresh_dir("async");
        snprintf(dir, sizeof dir, "%s/ckpt", root);
        snprintf(keep, sizeof keep, "%s_sync_%zu", root, c);
        rm_rf(keep);
        mkdir(keep, 0755);
        nlink_t links[2] = { 0, 0 };
        for (int async = 0; async < 2; async++) {
            rm_rf(dir);
            volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 5, .logger = false });
            add_ckpt(t, dir, cases[c].k, cases[c].last, async);
            lin m = { .table = k_scores, .ntable = 5 };
            CHECK_OK(fit(t, &m, true, NULL));
            list_ckpts(dir, list[async], sizeof list[async]);
            struct stat sb;
            snprintf(path, sizeof path, "%s/" LAST, dir);
            if (stat(path, &sb) == 0) links[async] = sb.st_nlink;
            if (cases[c].k) {
                volt_loader *l = mk_loader();
                CHECK_OK(volt_trainer_test(t, &lin_ops, &m, l, "best"));
                volt_loader_destroy(l);
            }
            volt_trainer_destroy(t);
            /* sync: keep its files; async: compare with them */
            char *save = strdup(list[async]);
            for (char *tok = strtok(save, ","); tok; tok = strtok(NULL, ",")) {
                snprintf(path, sizeof path, "%s/%s", dir, tok);
                snprintf(kept, sizeof kept, "%s/%s", keep, tok);
                if (!async) {
                    size_t n = 0;
                    unsigned char *b = vtest_slurp(path, &n);
                    FILE *f = b ? fopen(kept, "wb") : NULL;
                    if (f) { fwrite(b, 1, n, f); fclose(f); }
                    free(b);
                } else {
                    CHECK(same_bytes(path, kept), "top_k=%d last=%d: async '%s' differs from the synchronous run's",
                          cases[c].k, cases[c].last, tok);
                }
            }
            free(save);
        }
        CHECK(!strcmp(list[0], list[1]), "top_k=%d last=%d: async left [%s], sync [%s]", cases[c].k, cases[c].last,
              list[1], list[0]);
        CHECK(links[0] == links[1], "top_k=%d: last.safetensors links %d async, %d sync", cases[c].k, (int)links[1],
              (int)links[0]);
        /* top-2 takes epoch 4's file, which last then links to */
        CHECK(cases[c].k != 2 || !cases[c].last || links[1] == 2, "top_k=%d: last is a hard link to epoch 4's file", cases[c].k);
    }
}

/* The snapshot holds the values of its moment: parameters changed before the write do not
 * reach the file, which equals a synchronous save taken with the snapshot. */
static void test_snapshot_moment(void) {
    const char *root = fresh_dir("snapshot");
    char a[1200], b[1200], c2[1200];
    snprintf(a, sizeof a, "%s/snap.safetensors", root);
    snprintf(b, sizeof b, "%s/sync.safetensors", root);
    snprintf(c2, sizeof c2, "%s/after.safetensors", root);
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 1, .logger = false });
    lin m = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m, true, NULL));
    volt_ckpt_snapshot *s = NULL;
    CHECK_OK(volt_trainer_snapshot_checkpoint(t, a, &s));
    CHECK_OK(volt_trainer_save_checkpoint(t, b));
    CHECK(volt_ckpt_snapshot_bytes(s) >= 5 * sizeof(float), "snapshot holds %zu bytes", volt_ckpt_snapshot_bytes(s));
    const float moved[4] = { 9, 9, 9, 9 };
    CHECK_OK(volt_tensor_copy_from_host(m.w, moved));
    char err[512];
    CHECK_OK(volt_ckpt_snapshot_write(s, a, err, sizeof err));
    CHECK(same_bytes(a, b), "the snapshot's file differs from a synchronous save at its moment");
    CHECK_OK(volt_trainer_save_checkpoint(t, c2));
    CHECK(!same_bytes(a, c2), "a save after the change equals the snapshot: the test changed nothing");
    /* the buffer is reused: a second snapshot now has the new values */
    CHECK_OK(volt_trainer_snapshot_checkpoint(t, a, &s));
    CHECK_OK(volt_ckpt_snapshot_write(s, a, err, sizeof err));
    CHECK(same_bytes(a, c2), "the second snapshot's file differs from a synchronous save at its moment");
    CHECK(volt_ckpt_snapshot_write(s, "", err, sizeof err) == VOLT_ERR_INVALID_ARG, "empty path");
    volt_ckpt_snapshot_destroy(s);
    volt_trainer_destroy(t);
}

/* A save that fails fails the fit (a background write: at the next save point), naming the
 * file, and removes nothing: the previous best and last stay, and the bookkeeping names them
 * again (the top-1 entry epoch 1 evicted is back), so "best" and "last" load after it. */
static void test_e2e_async_error(void) {
    for (int async = 0; async < 2; async++) {
        const char *root = fresh_dir(async ? "async_err" : "sync_err");
        char dir[1200], blocker[1400], path[1400];
        snprintf(dir, sizeof dir, "%s/ckpt", root);
        mkdir(dir, 0755);
        snprintf(blocker, sizeof blocker, "%s/" E1 ".tmp", dir);   /* epoch 1's write cannot create its .tmp */
        mkdir(blocker, 0755);
        volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 5, .logger = false });
        add_ckpt(t, dir, 1, true, async);
        lin m = { .table = k_scores, .ntable = 5 };
        volt_status st = fit(t, &m, true, NULL);
        const char *msg = volt_trainer_errmsg(t);
        CHECK(st == VOLT_ERR_IO && (!async || strstr(msg, "background save failed")) && strstr(msg, E1),
              "async=%d fit: %s: %s", async, volt_status_str(st), msg);
        snprintf(path, sizeof path, "%s/" E0, dir);
        CHECK(exists(path) && ckpt_global_step(path) == 4, "async=%d: epoch 0's best is still there, whole", async);
        const char *bp = volt_trainer_best_model_path(t);
        CHECK(bp && !strcmp(bp, path), "async=%d: best after the failed save is %s, want epoch 0's", async, bp ? bp : "(null)");
        CHECK(volt_trainer_best_model_score(t) == 0.5, "async=%d: best score %g, want 0.5", async,
              volt_trainer_best_model_score(t));
        snprintf(path, sizeof path, "%s/" LAST, dir);
        CHECK(exists(path) && ckpt_global_step(path) == 4, "async=%d: last is epoch 0's", async);
        snprintf(path, sizeof path, "%s/" E1, dir);
        CHECK(!exists(path), "async=%d: no epoch-1 file", async);
        CHECK(m.epoch_ends <= 3, "async=%d: the fit stopped by epoch 2's save point (%d epochs ended)", async, m.epoch_ends);
        volt_loader *l = mk_loader();
        st = volt_trainer_test(t, &lin_ops, &m, l, "best");
        CHECK(st == VOLT_OK, "async=%d: test from \"best\" after the failed save: %s", async, volt_trainer_errmsg(t));
        volt_loader_destroy(l);
        /* the fit resumes from "last" (epoch 0's) once the folder is writable */
        rmdir(blocker);
        lin m2 = { .table = k_scores, .ntable = 5 };
        CHECK_OK(fit(t, &m2, true, "last"));
        snprintf(path, sizeof path, "%s/" E3, dir);
        CHECK(exists(path) && !strcmp(volt_trainer_best_model_path(t), path), "async=%d: the resumed fit's best is epoch 3's",
              async);
        snprintf(path, sizeof path, "%s/" E0, dir);
        CHECK(!exists(path), "async=%d: the resumed fit's top-1 removed epoch 0's file", async);
        volt_trainer_destroy(t);
    }
}

/* auto_insert_metric_name = false: the file names carry the values alone; a config of
 * version 2 (before the field) still inserts the names. */
static void test_bare_names(void) {
    for (int v2 = 0; v2 < 2; v2++) {
        const char *root = fresh_dir(v2 ? "bare_names_v2" : "bare_names");
        char dir[1200], path[1400];
        snprintf(dir, sizeof dir, "%s/ckpt", root);
        volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 2, .logger = false });
        volt_checkpoint_config cc;
        volt_checkpoint_config_init(&cc);
        cc.dirpath = dir;
        cc.filename = "ep{epoch:02d}-{val_score:.2f}";
        cc.monitor = "val_score";
        cc.mode = VOLT_MAX;
        cc.auto_insert_metric_name = false;
        if (v2) cc.version = 2;
        CHECK_OK(volt_add_model_checkpoint(t, &cc));
        lin m = { .table = k_scores, .ntable = 5 };
        CHECK_OK(fit(t, &m, true, NULL));
        snprintf(path, sizeof path, v2 ? "%s/epepoch=01-val_score=0.70.safetensors" : "%s/ep01-0.70.safetensors", dir);
        CHECK(exists(path) && !strcmp(volt_trainer_best_model_path(t), path), "v2=%d: best is %s, want %s", v2,
              volt_trainer_best_model_path(t), path);
        volt_trainer_destroy(t);
    }
}

/* Empty paths read as Lightning reads them: default_root_dir "" and ModelCheckpoint's dirpath ""
 * are the current folder (never "/lightning_logs", "/checkpoints"), filename "" the default
 * name (never a hidden ".safetensors"). Run from inside a fresh folder. */
static void test_empty_paths(void) {
    const char *root = fresh_dir("empty_paths");
    char cwd[1024], path[1400];
    if (!getcwd(cwd, sizeof cwd) || chdir(root) != 0) { CHECK(0, "chdir %s", root); return; }
    volt_trainer *t = mk_trainer("", &(run_opts){ .max_epochs = 2, .logger = true });
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = "";
    cc.filename = "";
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    lin m = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m, true, NULL));
    const char *ld = volt_trainer_log_dir(t), *best = volt_trainer_best_model_path(t);
    CHECK(ld && ld[0] != '/' && exists("lightning_logs/version_0/metrics.csv"), "default_root_dir \"\": log dir '%s'",
          ld ? ld : "(none)");
    const char *base = best ? strrchr(best, '/') : NULL;
    base = base ? base + 1 : best;
    char here[1400], there[1400];
    snprintf(path, sizeof path, "%s", best ? best : "");
    char *slash = strrchr(path, '/');
    if (slash) *slash = 0; else snprintf(path, sizeof path, ".");
    CHECK(best && !strncmp(base, "epoch=1-step=", 13) && exists(best) && realpath(path, there) && realpath(".", here) &&
          !strcmp(here, there) && !exists(".safetensors"),
          "dirpath \"\", filename \"\": best '%s', want ./epoch=1-step=N.safetensors", best ? best : "(none)");
    volt_trainer_destroy(t);
    CHECK(chdir(cwd) == 0, "chdir back");
}

/* A callback whose state_dict is not a JSON object fails the save naming it (it was dropped, and
 * the callback resumed from scratch without a word). */
static const char *g_bad_state;
static char *bad_state_dict(void *self) { (void)self; return strdup(g_bad_state); }
static const volt_callback_ops bad_state_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "BadState",
                                                 .state_dict = bad_state_dict };
static void test_bad_state_dict(void) {
    static const char *const bad[] = { "not json {", "[1,2,3]" };
    for (int k = 0; k < 2; k++) {
        const char *root = fresh_dir(k ? "bad_state_array" : "bad_state_text");
        volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
        g_bad_state = bad[k];
        CHECK_OK(volt_trainer_add_callback(t, &bad_state_ops, NULL));
        lin m = { .table = k_scores, .ntable = 5 };
        volt_loader *tr = mk_loader();
        const volt_status st = volt_trainer_fit(t, &lin_ops, &m, tr, NULL, NULL);
        CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "callback 'BadState': state_dict returned") &&
              strstr(volt_trainer_errmsg(t), "not a JSON object"), "state_dict '%s': %s: %s", bad[k], volt_status_str(st),
              volt_trainer_errmsg(t));
        volt_loader_destroy(tr);
        volt_trainer_destroy(t);
    }
}

/* enable_version_counter: a file in the way (a previous run's) gets "-v1" beside it; without
 * the counter it is overwritten. */
static void test_version_counter(void) {
    for (int counter = 0; counter < 2; counter++) {
        const char *root = fresh_dir(counter ? "vcounter_on" : "vcounter_off");
        char dir[1200], stale[1400], v1[1400];
        snprintf(dir, sizeof dir, "%s/ckpt", root);
        mkdir(dir, 0755);
        snprintf(stale, sizeof stale, "%s/model.safetensors", dir);
        snprintf(v1, sizeof v1, "%s/model-v1.safetensors", dir);
        FILE *f = fopen(stale, "w");
        if (f) { fputs("a previous run's file", f); fclose(f); }
        volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 1, .logger = false });
        volt_checkpoint_config cc;
        volt_checkpoint_config_init(&cc);
        cc.dirpath = dir;
        cc.filename = "model";
        cc.enable_version_counter = counter;
        CHECK_OK(volt_add_model_checkpoint(t, &cc));
        lin m = { .table = k_scores, .ntable = 5 };
        CHECK_OK(fit(t, &m, true, NULL));
        const char *want = counter ? v1 : stale;
        CHECK(!strcmp(volt_trainer_best_model_path(t), want) && ckpt_global_step(want) == 4 && exists(v1) == counter,
              "counter=%d: best %s, want %s (a checkpoint at step 4); model-v1 %s", counter, volt_trainer_best_model_path(t), want,
              exists(v1) ? "exists" : "absent");
        if (counter) CHECK(ckpt_global_step(stale) < 0, "counter=1: the file in the way is untouched");
        volt_trainer_destroy(t);
    }
}

/* enable_version_counter false with a name that repeats ("{val_score:.1f}": 0.74 and 0.71 both
 * name "val_score=0.7"): the second save overwrites the file and its top-k entry takes the new
 * score, as Lightning's top-k is keyed by path; "best" is 0.71, the file epoch 1's (step 8), and
 * the bookkeeping holds one entry per file. It held two entries of one path, "best" claiming 0.74
 * for epoch 1's weights. When the overwrite fails, the entry is back with its score (0.74, the
 * file epoch 0's, untouched). */
static const double k_repeat[] = { 0.74, 0.71, 0.2 };
static const char *g_block_tmp;   /* made a folder at epoch 0's train end: the next save of that name fails */
static volt_status block_tmp(void *self, volt_trainer *t) {
    if (g_block_tmp && volt_trainer_current_epoch(t) == 0) mkdir(g_block_tmp, 0755);
    return VOLT_OK;
}
static const volt_callback_ops block_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "BlockTmp", .on_train_epoch_end = block_tmp };
static void test_version_counter_repeat(void) {
    for (int fail = 0; fail < 2; fail++) {
        const char *root = fresh_dir(fail ? "vcounter_repeat_fail" : "vcounter_repeat");
        char dir[1200], same[1400], low[1400], tmp[1500];
        snprintf(dir, sizeof dir, "%s/ckpt", root);
        snprintf(same, sizeof same, "%s/val_score=0.7.safetensors", dir);
        snprintf(low, sizeof low, "%s/val_score=0.2.safetensors", dir);
        snprintf(tmp, sizeof tmp, "%s.tmp", same);
        volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 3, .logger = false });
        volt_checkpoint_config cc = score_ckpt(dir, 2, false);
        cc.filename = "{val_score:.1f}";
        cc.enable_version_counter = false;
        CHECK_OK(volt_add_model_checkpoint(t, &cc));
        g_block_tmp = fail ? tmp : NULL;
        if (fail) CHECK_OK(volt_trainer_add_callback(t, &block_ops, NULL));
        lin m = { .table = k_repeat, .ntable = 3 };
        volt_loader *tr = mk_loader(), *va = mk_loader();
        volt_status st = volt_trainer_fit(t, &lin_ops, &m, tr, va, NULL);
        volt_loader_destroy(tr);
        volt_loader_destroy(va);
        g_block_tmp = NULL;
        const char *bp = volt_trainer_best_model_path(t);
        const double bs = volt_trainer_best_model_score(t);
        if (!fail) {
            CHECK(st == VOLT_OK, "fit: %s", volt_trainer_errmsg(t));
            CHECK(bp && !strcmp(bp, same) && bs == 0.71 && ckpt_global_step(same) == 8,
                  "best %s score %g, its file of step %lld (want %s, 0.71, step 8)", bp ? bp : "(none)", bs,
                  (long long)ckpt_global_step(same), same);
            char *s = ckpt_cb_state(low, "ModelCheckpoint");
            int n = 0;
            for (const char *p = s; p && (p = strstr(p, "\"path\"")); p++) n++;
            CHECK(n == 2 && s && strstr(s, "\"score\":0.71") && !strstr(s, "0.74"),
                  "the top-k in the last file: %d entries (want 2), %s", n, s ? s : "(none)");
            free(s);
        } else {
            CHECK(st < 0 && strstr(volt_trainer_errmsg(t), tmp), "a failed overwrite fails the fit: %s", volt_trainer_errmsg(t));
            CHECK(bp && !strcmp(bp, same) && bs == 0.74 && ckpt_global_step(same) == 4,
                  "after the failed overwrite: best %s score %g, its file of step %lld (want 0.74, step 4)", bp ? bp : "(none)",
                  bs, (long long)ckpt_global_step(same));
        }
        volt_trainer_destroy(t);
    }
}

/* A filename with a subfolder ("sub/{epoch}-{val_score:.2f}", which the docs allow): top-k removes
 * what falls out of it there too, also after a resume (the restored entries are the callback's);
 * each was kept forever, and a resume dropped them from the bookkeeping. A subfolder that is a
 * link out of dirpath is not the callback's: nothing there is removed. Scores 0.5 0.7 0.6 0.9 0.8,
 * top 1. */
static void test_ckpt_subfolder(void) {
    for (int part = 0; part < 3; part++) {   /* 0: one run; 1: 3 epochs, then resumed to 5; 2: sub/ a link out */
        static const char *const names[3] = { "ckpt_sub", "ckpt_sub_resume", "ckpt_sub_link" };
        const char *root = fresh_dir(names[part]);
        char dir[1200], sub[1300], out[1300], got[2048];
        snprintf(dir, sizeof dir, "%s/ckpt", root);
        snprintf(sub, sizeof sub, "%s/sub", dir);
        snprintf(out, sizeof out, "%s/outside", root);
        if (part == 2) {
            mkdir(dir, 0755);
            mkdir(out, 0755);
            CHECK(symlink(out, sub) == 0, "link %s -> %s", sub, out);
        }
        for (int run = part == 1 ? 0 : 1; run < 2; run++) {
            volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = run ? 5 : 3 });
            volt_checkpoint_config cc = score_ckpt(dir, 1, true);
            cc.filename = "sub/{epoch}-{val_score:.2f}";
            CHECK_OK(volt_add_model_checkpoint(t, &cc));
            lin m = { .table = k_scores, .ntable = 5 };
            CHECK_OK(fit(t, &m, true, run && part == 1 ? "last" : NULL));
            if (run) {
                char want[1400];
                snprintf(want, sizeof want, "%s/" E3, sub);
                const char *bp = volt_trainer_best_model_path(t);
                CHECK(bp && !strcmp(bp, want), "%s: best %s", names[part], bp ? bp : "(none)");
            }
            volt_trainer_destroy(t);
        }
        list_ckpts(part == 2 ? out : sub, got, sizeof got);
        const char *want = part == 2 ? E0 "," E1 "," E3 : E3;
        CHECK(!strcmp(got, want), "%s: files [%s], want [%s]", names[part], got, want);
    }
}

/* save_weights_only (synchronous and background): the files hold the weights and the loop
 * state, no optimizer state (smaller than a full save); "best" loads for test; a fit refuses
 * to resume from them, saying why. */
static void test_weights_only(void) {
    for (int async = 0; async < 2; async++) {
        const char *root = fresh_dir(async ? "weights_only_async" : "weights_only");
        char dir[1200], path[1400], full[1400];
        snprintf(dir, sizeof dir, "%s/ckpt", root);
        volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 3, .logger = false });
        add_ckpt_ex(t, dir, 1, true, async, true);
        lin m = { .table = k_scores, .ntable = 5 };
        CHECK_OK(fit(t, &m, true, NULL));
        snprintf(path, sizeof path, "%s/" LAST, dir);
        volt_st_file *f = NULL;
        char err[512];
        CHECK_OK(volt_st_open(path, &f, err, sizeof err));
        int opt_tensors = 0;
        for (int i = 0; f && i < volt_st_count(f); i++) opt_tensors += !strncmp(volt_st_name(f, i), "optimizer.", 10);
        CHECK(f && opt_tensors == 0 && volt_st_meta(f, "volt.weights_only") && !volt_st_meta(f, "volt.optimizer.step") &&
              volt_st_meta(f, "volt.global_step") && volt_st_meta(f, "volt.callbacks"),
              "async=%d: last holds %d optimizer tensors; weights_only meta %s", async, opt_tensors,
              f && volt_st_meta(f, "volt.weights_only") ? "set" : "missing");
        volt_st_close(f);
        snprintf(full, sizeof full, "%s/full.safetensors", root);
        CHECK_OK(volt_trainer_save_checkpoint_ex(t, full, 0));
        struct stat a, b;
        CHECK(stat(path, &a) == 0 && stat(full, &b) == 0 && a.st_size < b.st_size, "async=%d: weights-only %lld bytes, full %lld",
              async, (long long)a.st_size, (long long)b.st_size);
        CHECK(volt_trainer_save_checkpoint_ex(t, full, 4) == VOLT_ERR_INVALID_ARG, "an unknown flag is refused");
        volt_loader *l = mk_loader();
        CHECK_OK(volt_trainer_test(t, &lin_ops, &m, l, "best"));
        volt_loader_destroy(l);
        volt_trainer_destroy(t);
        /* a fit cannot resume from it */
        t = mk_trainer(root, &(run_opts){ .max_epochs = 4, .logger = false });
        lin m2 = { .table = k_scores, .ntable = 5 };
        volt_status st = fit(t, &m2, true, path);
        CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "holds the weights only"), "async=%d: resume: %s", async,
              volt_trainer_errmsg(t));
        volt_trainer_destroy(t);
    }
}

/* "best" / "last" with nothing to resolve: NOT_FOUND saying why (no ModelCheckpoint; one
 * that has saved nothing). */
static void test_resolve_missing(void) {
    const char *root = fresh_dir("resolve_missing");
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/ckpt", root);
    lin m = { .table = k_scores, .ntable = 5 };
    volt_loader *l = mk_loader();
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 1, .logger = false });
    add_ckpt(t, dir, 1, true, false);
    volt_status st = volt_trainer_test(t, &lin_ops, &m, l, "best");
    const char *e = volt_trainer_errmsg(t);
    CHECK(st == VOLT_ERR_NOT_FOUND && strstr(e, "ckpt_path=\"best\"") && strstr(e, "has no best checkpoint"), "best: %s", e);
    st = volt_trainer_test(t, &lin_ops, &m, l, "last");
    e = volt_trainer_errmsg(t);
    CHECK(st == VOLT_ERR_NOT_FOUND && strstr(e, "ckpt_path=\"last\"") && strstr(e, "found no last"), "last: %s", e);
    volt_trainer_destroy(t);
    volt_trainer_config c;
    vtest_quiet_config(&c, root);   /* no ModelCheckpoint */
    CHECK_OK(volt_trainer_create(&c, &t));
    st = volt_trainer_test(t, &lin_ops, &m, l, "best");
    e = volt_trainer_errmsg(t);
    CHECK(st == VOLT_ERR_NOT_FOUND && strstr(e, "no ModelCheckpoint is configured"), "no callback: %s", e);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

/* ---- train_time_interval and the collectives for callbacks ---------------------------------- */
/* The global steps of dir's "step=N.safetensors" files, ascending; how many. */
static int saved_steps(const char *dir, int64_t *steps, int max) {
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d)) && n < max;) {
        long long v;
        char tail[32];
        if (sscanf(de->d_name, "step=%lld%31s", &v, tail) == 2 && !strcmp(tail, ".safetensors")) steps[n++] = v;
    }
    if (d) closedir(d);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (steps[j] < steps[i]) { int64_t x = steps[i]; steps[i] = steps[j]; steps[j] = x; }
    return n;
}

static void steps_str(const int64_t *s, int n, char *out, size_t cap) {
    out[0] = 0;
    for (int i = 0; i < n; i++) snprintf(out + strlen(out), cap - strlen(out), "%s%lld", i ? "," : "", (long long)s[i]);
}

/* A clock the test moves: adv[global step] at each train batch start (the last entry repeats),
 * and a jump while the sanity check runs (time before train start does not count). */
typedef struct fake_clock {
    double now;
    const double *adv;
    int nadv;
    double sanity_jump;
} fake_clock;
static double fake_now(void *ctx) { return ((fake_clock *)ctx)->now; }
static volt_status fake_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    fake_clock *c = self;
    int64_t gs = volt_trainer_global_step(t);
    c->now += c->adv[gs < c->nadv ? gs : c->nadv - 1];
    return VOLT_OK;
}
static volt_status fake_sanity(void *self, volt_trainer *t) {
    ((fake_clock *)self)->now += ((fake_clock *)self)->sanity_jump;
    return VOLT_OK;
}
static const volt_callback_ops fake_clock_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "FakeClock",
                                                  .on_train_batch_start = fake_batch_start,
                                                  .on_sanity_check_start = fake_sanity };

static void tti_config(volt_checkpoint_config *cc, const char *dir, double interval) {
    volt_checkpoint_config_init(cc);
    cc->dirpath = dir;
    cc->filename = "{step}";
    cc->save_top_k = -1;
    cc->train_time_interval = interval;
}

/* The time trigger on a clock the test moves, so the steps are exact: 2.5 s, the clock moving
 * 1, 1, 1, .5 x5, 3, 1, 1, 1 s per batch (4 batches an epoch, validation after each): saves
 * at steps 3, 8 (exactly 2.5 s: Lightning saves when not less), 9, 12; counted from train
 * start (the 50 s of the sanity check do not count); the validations write only last, no
 * top-k. Resumed (4th epoch, 2 then .25 s per batch): the clock counts from the resumed
 * train start (Lightning does not checkpoint it), so step 15 and not at once. */
static void test_time_interval(void) {
    static const double adv[] = { 1, 1, 1, .5, .5, .5, .5, .5, 3, 1, 1, 1, 2, .25 };
    fake_clock fc = { .now = 100, .adv = adv, .nadv = (int)(sizeof adv / sizeof *adv), .sanity_jump = 50 };
    const char *root = fresh_dir("time_interval");
    char dir[1200], lp[1300], got[256];
    int64_t steps[32];
    snprintf(dir, sizeof dir, "%s/ck", root);
    snprintf(lp, sizeof lp, "%s/" LAST, dir);
    for (int resume = 0; resume < 2; resume++) {
        volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = resume ? 4 : 3 });
        CHECK_OK(volt_trainer_add_callback(t, &fake_clock_ops, &fc));
        volt_checkpoint_config cc;
        tti_config(&cc, dir, 2.5);
        cc.save_last = true;
        CHECK_OK(volt__add_model_checkpoint_clock(t, &cc, fake_now, &fc));
        lin m = { .table = k_scores, .ntable = 5 };
        CHECK_OK(fit(t, &m, true, resume ? lp : NULL));
        steps_str(steps, saved_steps(dir, steps, 32), got, sizeof got);
        const char *want = resume ? "3,8,9,12,15" : "3,8,9,12";
        CHECK(!strcmp(got, want), "resume=%d: time-triggered saves at steps [%s], want [%s]", resume, got, want);
        CHECK(ckpt_global_step(lp) == (resume ? 16 : 12), "resume=%d: last at step %lld (the validations update it)", resume,
              (long long)ckpt_global_step(lp));
        volt_trainer_destroy(t);
    }
    /* accumulate_grad_batches 2 (2 steps an epoch), the clock 1 s a batch: 3 s have passed
     * after batch 3, but it ends no optimizer step: the save waits for step 2 (batch 4) */
    static const double one[] = { 1 };
    fc = (fake_clock){ .now = 0, .adv = one, .nadv = 1 };
    root = fresh_dir("time_interval_accumulate");
    snprintf(dir, sizeof dir, "%s/ck", root);
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 2, .accumulate_grad_batches = 2 });
    CHECK_OK(volt_trainer_add_callback(t, &fake_clock_ops, &fc));
    volt_checkpoint_config cc;
    tti_config(&cc, dir, 2.5);
    CHECK_OK(volt__add_model_checkpoint_clock(t, &cc, fake_now, &fc));
    lin m = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m, false, NULL));
    steps_str(steps, saved_steps(dir, steps, 32), got, sizeof got);
    CHECK(!strcmp(got, "2,4"), "accumulating: saves at steps [%s], want [2,4] (only where an optimizer step ended)", got);
    volt_trainer_destroy(t);
}

/* The same on the real clock (CLOCK_MONOTONIC), with margins no load can break: 30 ms of
 * sleep per batch, 0.1 s interval, 12 batches. What must hold whatever the timing: a save
 * (>= 0.36 s passed); between the reference (train start or the previous save) and each save
 * at least the interval passed; and no step went unsaved once the interval had passed. Each
 * is checked with the bounds the batch start times give (batch k starts before step k's
 * check, batch k+1 after it). */
typedef struct sleeper { double train_start, start[16]; } sleeper;
static volt_status sleeper_train_start(void *self, volt_trainer *t) {
    ((sleeper *)self)->train_start = vtest_now();   /* added before ModelCheckpoint: runs first */
    return VOLT_OK;
}
static volt_status sleeper_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    int64_t gs = volt_trainer_global_step(t);
    if (gs < 16) ((sleeper *)self)->start[gs] = vtest_now();
    usleep(30000);
    return VOLT_OK;
}
static const volt_callback_ops sleeper_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Sleeper",
                                               .on_train_start = sleeper_train_start,
                                               .on_train_batch_start = sleeper_batch_start };

static void test_time_interval_clock(void) {
    const double iv = 0.1;
    const char *root = fresh_dir("time_interval_clock");
    char dir[1200], got[256];
    snprintf(dir, sizeof dir, "%s/ck", root);
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 3 });
    sleeper sl = { 0 };
    CHECK_OK(volt_trainer_add_callback(t, &sleeper_ops, &sl));
    volt_checkpoint_config cc;
    tti_config(&cc, dir, iv);
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    lin m = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m, false, NULL));
    double start[14];   /* start[k]: batch k (1-based step) began; start[13]: fit ended */
    for (int k = 1; k <= 12; k++) start[k] = sl.start[k - 1];
    start[13] = vtest_now();
    int64_t s[32];
    int n = saved_steps(dir, s, 32);
    steps_str(s, n, got, sizeof got);
    CHECK(n >= 1 && n <= 12, "real clock: saves at steps [%s]", got);
    int64_t p = 0;      /* the reference's step (0: train start) */
    for (int64_t k = 1, i = 0; k <= 12; k++) {
        const bool saved = i < n && s[i] == k;
        /* the check at step k ran after start[k] and before start[k + 1]; the reference was
         * set after start[p] (train_start for p = 0) and before start[p + 1] */
        const double ref_lo = p ? start[p] : sl.train_start, ref_hi = start[p + 1];
        if (saved) {
            CHECK(start[k + 1] - ref_lo >= iv, "step %lld saved %.3f s or less after the reference (step %lld), before the interval",
                  (long long)k, start[k + 1] - ref_lo, (long long)p);
            p = k;
            i++;
        } else {
            CHECK(start[k] - ref_hi < iv, "step %lld not saved though %.3f s or more had passed since the reference (step %lld)",
                  (long long)k, start[k] - ref_hi, (long long)p);
        }
    }
    volt_trainer_destroy(t);
}

/* train_time_interval's checks at add time: a finite number of seconds >= 0, and not with
 * another trigger; every_n_epochs = 1 (the default) and 0 go with it. A version-3 config
 * (before the field) saves as before, whatever the field holds. */
static void test_time_interval_config(void) {
    const char *root = fresh_dir("time_interval_config");
    char dir[1200], got[256];
    snprintf(dir, sizeof dir, "%s/ck", root);
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
    volt_checkpoint_config cc;
    const double bad[] = { -1, -1e-9, NAN, INFINITY, -INFINITY };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tti_config(&cc, dir, bad[i]);
        volt_status st = volt_add_model_checkpoint(t, &cc);
        CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "train_time_interval must be a finite number"),
              "train_time_interval=%g: %s: %s", bad[i], volt_status_str(st), volt_trainer_errmsg(t));
    }
    tti_config(&cc, dir, 60);
    cc.every_n_train_steps = 3;
    CHECK(volt_add_model_checkpoint(t, &cc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "mutually exclusive") &&
          strstr(volt_trainer_errmsg(t), "every_n_train_steps=3"), "with every_n_train_steps: %s", volt_trainer_errmsg(t));
    tti_config(&cc, dir, 60);
    cc.every_n_epochs = 2;
    CHECK(volt_add_model_checkpoint(t, &cc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "mutually exclusive") &&
          strstr(volt_trainer_errmsg(t), "every_n_epochs=2"), "with every_n_epochs=2: %s", volt_trainer_errmsg(t));
    tti_config(&cc, dir, 0);   /* the step trigger with every_n_epochs > 1: the epochs would do nothing */
    cc.every_n_train_steps = 5;
    cc.every_n_epochs = 3;
    CHECK(volt_add_model_checkpoint(t, &cc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "mutually exclusive") &&
          strstr(volt_trainer_errmsg(t), "every_n_train_steps=5, every_n_epochs=3"), "steps with every_n_epochs=3: %s",
          volt_trainer_errmsg(t));
    /* monitor "" was taken and failed after the first epoch, finding no metric "" */
    tti_config(&cc, dir, 0);
    cc.monitor = "";
    CHECK(volt_add_model_checkpoint(t, &cc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "ModelCheckpoint: monitor is \"\""),
          "monitor \"\": %s", volt_trainer_errmsg(t));
    /* a filename that leaves dirpath (it wrote beside the run's folder); a subfolder stays */
    static const char *const out[] = { "../escaped-{epoch}", "a/../../b", "..", "/tmp/abs-{epoch}" };
    for (int i = 0; i < 4; i++) {
        tti_config(&cc, dir, 0);
        cc.filename = out[i];
        CHECK(volt_add_model_checkpoint(t, &cc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "outside dirpath"),
              "filename '%s': %s", out[i], volt_trainer_errmsg(t));
    }
    CHECK(volt_trainer_num_callbacks(t) == 0, "nothing refused was added");
    tti_config(&cc, dir, 0);
    cc.filename = "sub/..name-{epoch}";
    CHECK_OK(volt_add_model_checkpoint(t, &cc));   /* a subfolder and a name that starts with ".." stay under it */
    volt_trainer_destroy(t);
    t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
    tti_config(&cc, dir, 0);   /* NULL: no monitor, the latest kept */
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    CHECK(volt_trainer_num_callbacks(t) == 1, "monitor NULL accepted");
    volt_trainer_destroy(t);
    for (int e = 0; e < 2; e++) {   /* every_n_epochs 0 and 1: accepted */
        t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
        tti_config(&cc, dir, 60);
        cc.every_n_epochs = e;
        CHECK_OK(volt_add_model_checkpoint(t, &cc));
        volt_trainer_destroy(t);
    }
    t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
    tti_config(&cc, dir, -1);   /* version 3 has no such field: ignored */
    cc.version = 3;
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    lin m = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m, true, NULL));
    int64_t s[8];
    steps_str(s, saved_steps(dir, s, 8), got, sizeof got);
    CHECK(!strcmp(got, "4"), "a version-3 config saves after validation as before: [%s]", got);
    volt_trainer_destroy(t);
}

/* ---- folders checked at fit start -------------------------------------------------------------
 * A checkpoint folder that cannot be written fails fit before its first batch, naming the folder,
 * not at the first save an epoch later. The folder is made unwritable for root too: its parent is
 * a regular file. */

/* Entries of dir whose names start with '.' (the check's test file is hidden), comma-separated. */
static void hidden_entries(const char *dir, char *out, size_t n) {
    out[0] = 0;
    DIR *d = opendir(dir);
    if (!d) return;
    const struct dirent *e;
    size_t k = 0;
    while ((e = readdir(d)) != NULL && k < n)
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, ".."))
            k += (size_t)snprintf(out + k, n - k, "%s%s", k ? "," : "", e->d_name);
    closedir(d);
}

static volt_trainer *wd_trainer(const char *root, bool checkpointing, int64_t fast_dev_run) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = 2;
    c.enable_checkpointing = checkpointing;
    c.fast_dev_run = fast_dev_run;
    volt_trainer *t = NULL;
    if (volt_trainer_create(&c, &t) != VOLT_OK) { fprintf(stderr, "trainer_create\n"); exit(1); }
    return t;
}

/* fit failed at its start: st, the message naming who and the folder, no epoch begun. */
static void wd_expect_refused(const char *label, volt_trainer *t, const lin *m, volt_status st, const char *who,
                              const char *dir) {
    char want[1600];
    snprintf(want, sizeof want, "%s: cannot write to dirpath '%s': ", who, dir);
    const char *msg = volt_trainer_errmsg(t);
    CHECK(st == VOLT_ERR_IO && strstr(msg, want) == msg && strstr(msg, "(checked at fit start)"),
          "%s: fit gave %s: '%s', want VOLT_ERR_IO '%s... (checked at fit start)'", label, volt_status_str(st), msg, want);
    CHECK(m->epoch_starts == 0 && volt_trainer_global_step(t) == 0, "%s: %d epochs began, global step %lld, want none", label,
          m->epoch_starts, (long long)volt_trainer_global_step(t));
}

static void test_unwritable_dirs(void) {
    const char *root = fresh_dir("unwritable");
    char file[1200], bad[1300], badroot[1300], baddef[1400], good[1300], hid[512];
    snprintf(file, sizeof file, "%s/file", root);
    FILE *f = fopen(file, "w");
    if (f) { fputs("a file where a folder is expected", f); fclose(f); }
    snprintf(bad, sizeof bad, "%s/ckpts", file);
    snprintf(badroot, sizeof badroot, "%s/root", file);
    snprintf(baddef, sizeof baddef, "%s/checkpoints", badroot);   /* the default dirpath without a logger */
    snprintf(good, sizeof good, "%s/good/ckpts", root);

    /* a ModelCheckpoint's dirpath under a file: refused before the first batch */
    volt_trainer *t = wd_trainer(root, true, 0);
    add_ckpt(t, bad, 1, true, false);
    lin m = { .table = k_scores, .ntable = 5 };
    wd_expect_refused("user dirpath", t, &m, fit(t, &m, true, NULL), "ModelCheckpoint", bad);
    /* validate and test save nothing: they check nothing */
    volt_loader *l = mk_loader();
    CHECK(volt_trainer_validate(t, &lin_ops, &m, l, NULL) == VOLT_OK, "validate with an unwritable dirpath: %s",
          volt_trainer_errmsg(t));
    CHECK(volt_trainer_test(t, &lin_ops, &m, l, NULL) == VOLT_OK, "test with an unwritable dirpath: %s", volt_trainer_errmsg(t));
    volt_loader_destroy(l);
    volt_trainer_destroy(t);

    /* the default ModelCheckpoint (enable_checkpointing) under a root below a file: refused; with
     * enable_checkpointing off the same root trains (no logger: nothing else writes there) */
    t = wd_trainer(badroot, true, 0);
    lin m2 = { .table = k_scores, .ntable = 5 };
    wd_expect_refused("default dirpath", t, &m2, fit(t, &m2, true, NULL), "ModelCheckpoint", baddef);
    volt_trainer_destroy(t);
    t = wd_trainer(badroot, false, 0);
    lin m3 = { .table = k_scores, .ntable = 5 };
    CHECK(fit(t, &m3, true, NULL) == VOLT_OK && m3.epoch_ends == 2, "enable_checkpointing off: fit %s, %d epochs",
          volt_trainer_errmsg(t), m3.epoch_ends);
    volt_trainer_destroy(t);
    /* fast_dev_run writes no checkpoint: no check either */
    t = wd_trainer(root, true, 2);
    add_ckpt(t, bad, 1, true, false);
    lin m4 = { .table = k_scores, .ntable = 5 };
    CHECK(fit(t, &m4, true, NULL) == VOLT_OK && m4.epoch_starts == 1, "fast_dev_run with an unwritable dirpath: %s",
          volt_trainer_errmsg(t));
    volt_trainer_destroy(t);

    /* OnExceptionCheckpoint's folder is checked too (the ModelCheckpoint's is fine) */
    t = wd_trainer(root, true, 0);
    add_ckpt(t, good, 1, true, false);
    CHECK_OK(volt_add_on_exception_checkpoint(t, bad, NULL));
    lin m5 = { .table = k_scores, .ntable = 5 };
    wd_expect_refused("on_exception dirpath", t, &m5, fit(t, &m5, true, NULL), "OnExceptionCheckpoint", bad);
    volt_trainer_destroy(t);

    /* a fine folder: made at fit start, the test file gone; the fit saves as before */
    t = wd_trainer(root, true, 0);
    add_ckpt(t, good, 1, true, false);
    CHECK_OK(volt_add_on_exception_checkpoint(t, good, NULL));
    lin m6 = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m6, true, NULL));
    hidden_entries(good, hid, sizeof hid);
    char path[1500];
    snprintf(path, sizeof path, "%s/" LAST, good);
    CHECK(!hid[0] && exists(path), "fine dirpath: hidden files left '%s', last.safetensors %s", hid, exists(path) ? "there" : "missing");
    /* named only from on_fit_start */
    CHECK(volt_trainer_check_writable(t, "X", "dirpath", good, 0) == VOLT_ERR_STATE &&
          strstr(volt_trainer_errmsg(t), "only from on_fit_start"), "check_writable outside on_fit_start: %s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);

    /* permission bits (not for root, whom they do not stop) */
    if (geteuid() != 0) {
        char ro[1300];
        snprintf(ro, sizeof ro, "%s/readonly", root);
        mkdir(ro, 0555);
        chmod(ro, 0555);
        t = wd_trainer(root, true, 0);
        add_ckpt(t, ro, 1, true, false);
        lin m7 = { .table = k_scores, .ntable = 5 };
        volt_status st = fit(t, &m7, true, NULL);
        wd_expect_refused("read-only dirpath", t, &m7, st, "ModelCheckpoint", ro);
        CHECK(strstr(volt_trainer_errmsg(t), "Permission denied"), "read-only dirpath: '%s' names no 'Permission denied'",
              volt_trainer_errmsg(t));
        volt_trainer_destroy(t);
        chmod(ro, 0755);
    }
}

/* The collectives at world size 1: the input, both ways; a NULL out is refused, named. */
/* A fit that fails (not an interruption) never reaches on_fit_end: the callbacks that track "in fit"
 * must still see a later standalone validate as standalone. ModelCheckpoint saves nothing in it and
 * EarlyStopping's state does not move (before: both took the validate for fit's validation). */
static int g_fail_at;   /* training_step fails at this global step */
static volt_status failing_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    lin *m = self;
    if (++m->steps == g_fail_at) return volt_step_fail(s, VOLT_ERR_NUMERIC, "a loss went NaN (on purpose)");
    return lin_train(self, s, b, i);
}

static void test_validate_after_failed_fit(void) {
    const char *root = fresh_dir("failed_fit");
    char dir[1200], s1[1300], s2[1300], before[4096] = "", after[4096] = "";
    snprintf(dir, sizeof dir, "%s/ckpt", root);
    snprintf(s1, sizeof s1, "%s/state_before.safetensors", root);
    snprintf(s2, sizeof s2, "%s/state_after.safetensors", root);
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 5, .logger = false });
    add_ckpt_ex(t, dir, -1, false, false, false);
    volt_early_stopping_config ec;
    volt_early_stopping_config_init(&ec);
    ec.monitor = "val_score";
    ec.mode = VOLT_MAX;
    ec.patience = 1;
    CHECK_OK(volt_add_early_stopping(t, &ec));
    volt_module_ops ops = lin_ops;
    ops.training_step = failing_train;
    const double scores[] = { 0.5, 0.7, 0.6, 0.9, 0.8 };
    lin m = { .table = scores, .ntable = 5 };
    g_fail_at = 6;   /* epoch 1: after epoch 0's validation and save */
    volt_loader *tr = mk_loader(), *va = mk_loader();
    volt_status st = volt_trainer_fit(t, &ops, &m, tr, va, NULL);
    CHECK(st == VOLT_ERR_NUMERIC, "the fit fails: %s (%s)", volt_status_str(st), volt_trainer_errmsg(t));
    list_ckpts(dir, before, sizeof before);
    CHECK_OK(volt_trainer_save_checkpoint(t, s1));
    /* validate: the module logs epoch 1's score (0.7, better than 0.5): a top-k save if it counted as fit */
    CHECK_OK(volt_trainer_validate(t, &ops, &m, va, NULL));
    list_ckpts(dir, after, sizeof after);
    CHECK(!strcmp(before, after), "a standalone validate after a failed fit saved checkpoints: [%s] -> [%s]", before, after);
    CHECK_OK(volt_trainer_save_checkpoint(t, s2));
    char *e1 = ckpt_cb_state(s1, "EarlyStopping"), *e2 = ckpt_cb_state(s2, "EarlyStopping");
    CHECK(e1 && e2 && !strcmp(e1, e2), "EarlyStopping's state moved in a standalone validate: %s -> %s", e1 ? e1 : "-",
          e2 ? e2 : "-");
    free(e1);
    free(e2);
    volt_loader_destroy(tr);
    volt_loader_destroy(va);
    volt_trainer_destroy(t);
}

/* ---- volt_trainer_state_fn (Lightning's trainer.state.fn) as a user callback sees it ----------- */
/* Every hook a callback table has records "<hook>:<fn><stage>[s]" (fn: N none, F fit, V validate,
 * T test, P predict, U lr_find; stage: f v t p; s: sanity checking); the test adds "ret:" after
 * each call returns. */
static char g_fnlog[8192];
static void fn_note(volt_trainer *t, const char *hook) {
    static const char fns[] = "NFVTPU", stages[] = "fvtp";
    const volt_trainer_fn fn = volt_trainer_state_fn(t);
    const volt_stage sg = volt_trainer_stage(t);
    size_t k = strlen(g_fnlog);
    snprintf(g_fnlog + k, sizeof g_fnlog - k, "%s%s:%c%c%s", k ? " " : "", hook,
             (unsigned)fn < sizeof fns - 1 ? fns[fn] : '?', (unsigned)sg < sizeof stages - 1 ? stages[sg] : '?',
             volt_trainer_sanity_checking(t) ? "s" : "");
}
#define FN_HOOK(name) static volt_status fn_##name(void *self, volt_trainer *t) { fn_note(t, #name); return VOLT_OK; }
#define FN_BHOOK(name) \
    static volt_status fn_##name(void *self, volt_trainer *t, const volt_batch *b, int64_t i) { fn_note(t, #name); return VOLT_OK; }
FN_HOOK(fit_start) FN_HOOK(fit_end) FN_HOOK(sanity_start) FN_HOOK(sanity_end) FN_HOOK(train_start) FN_HOOK(train_end)
FN_HOOK(epoch_start) FN_HOOK(epoch_end) FN_BHOOK(batch_start) FN_BHOOK(batch_end)
FN_HOOK(val_start) FN_HOOK(val_end) FN_HOOK(val_epoch_start) FN_HOOK(val_epoch_end) FN_BHOOK(val_batch_start) FN_BHOOK(val_batch_end)
FN_HOOK(test_start) FN_HOOK(test_end) FN_HOOK(test_epoch_start) FN_HOOK(test_epoch_end) FN_BHOOK(test_batch_start) FN_BHOOK(test_batch_end)
FN_HOOK(after_backward) FN_HOOK(before_opt)
FN_HOOK(pred_start) FN_HOOK(pred_end) FN_HOOK(pred_epoch_start) FN_HOOK(pred_epoch_end) FN_BHOOK(pred_batch_start)
static volt_status fn_before_backward(void *self, volt_trainer *t, const volt_tensor *loss) { fn_note(t, "before_backward"); return VOLT_OK; }
static volt_status fn_pred_batch_end(void *self, volt_trainer *t, const volt_tensor *p, const volt_batch *b, int64_t i) {
    fn_note(t, "pred_batch_end");
    return VOLT_OK;
}
static void fn_exception(void *self, volt_trainer *t, volt_status st) { fn_note(t, "exception"); }
/* setup / teardown (callback version 4, module version 3) record their stage argument: "setup_f" */
static void fn_stage_note(volt_trainer *t, const char *hook, volt_stage sg) {
    char h[32];
    snprintf(h, sizeof h, "%s_%c", hook, (unsigned)sg < 4 ? "fvtp"[sg] : '?');
    fn_note(t, h);
}
static bool g_setup_saw_optimizer;   /* a setup ran where the trainer already had an optimizer */
static volt_status fn_setup(void *self, volt_trainer *t, volt_stage sg) {
    fn_stage_note(t, "setup", sg);
    g_setup_saw_optimizer |= volt_trainer_optimizer(t) != NULL;
    return volt_trainer_params(t) ? VOLT_OK : volt_trainer_fail(t, VOLT_ERR_STATE, "setup before the parameters exist");
}
static volt_status fn_teardown(void *self, volt_trainer *t, volt_stage sg) { fn_stage_note(t, "teardown", sg); return VOLT_OK; }
static volt_status fn_msetup(void *self, volt_trainer *t, volt_stage sg) { fn_stage_note(t, "msetup", sg); return VOLT_OK; }
static volt_status fn_mteardown(void *self, volt_trainer *t, volt_stage sg) { fn_stage_note(t, "mteardown", sg); return VOLT_OK; }
static const volt_callback_ops fn_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "FnRecorder",
    .on_fit_start = fn_fit_start, .on_fit_end = fn_fit_end, .on_sanity_check_start = fn_sanity_start,
    .on_sanity_check_end = fn_sanity_end, .on_train_start = fn_train_start, .on_train_end = fn_train_end,
    .on_train_epoch_start = fn_epoch_start, .on_train_epoch_end = fn_epoch_end, .on_train_batch_start = fn_batch_start,
    .on_train_batch_end = fn_batch_end, .on_validation_start = fn_val_start, .on_validation_end = fn_val_end,
    .on_validation_epoch_start = fn_val_epoch_start, .on_validation_epoch_end = fn_val_epoch_end,
    .on_validation_batch_end = fn_val_batch_end, .on_test_start = fn_test_start, .on_test_end = fn_test_end,
    .on_test_epoch_end = fn_test_epoch_end, .on_test_batch_end = fn_test_batch_end,
    .on_before_backward = fn_before_backward, .on_after_backward = fn_after_backward,
    .on_before_optimizer_step = fn_before_opt, .on_exception = fn_exception,
    .on_validation_batch_start = fn_val_batch_start, .on_test_epoch_start = fn_test_epoch_start,
    .on_test_batch_start = fn_test_batch_start, .on_predict_start = fn_pred_start,
    .on_predict_epoch_start = fn_pred_epoch_start, .on_predict_batch_start = fn_pred_batch_start,
    .on_predict_batch_end = fn_pred_batch_end, .on_predict_epoch_end = fn_pred_epoch_end, .on_predict_end = fn_pred_end,
    .setup = fn_setup, .teardown = fn_teardown,
};

static int g_val_fail_at, g_val_calls;
static volt_status val_failing(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    if (++g_val_calls == g_val_fail_at) return volt_step_fail(s, VOLT_ERR_NUMERIC, "validation fails (on purpose)");
    return lin_val(self, s, b, i);
}

static void fn_check(const char *what, const char *want) {
    CHECK(!strcmp(g_fnlog, want), "%s: state fn / stage seen by the hooks:\n    got  %s\n    want %s", what, g_fnlog, want);
    g_fnlog[0] = 0;
}

static void test_state_fn(void) {
    const char *root = fresh_dir("state_fn");
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.default_root_dir = root;
    c.max_epochs = 1;
    c.limit_train_batches = 2;
    c.limit_val_batches = 1;
    c.num_sanity_val_steps = 1;
    c.enable_progress_bar = c.enable_logger = c.enable_checkpointing = c.enable_model_summary = false;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    if (!t) return;
    CHECK_OK(volt_trainer_add_callback(t, &fn_ops, NULL));
    CHECK(volt_trainer_state_fn(t) == VOLT_FN_NONE, "a new trainer runs no call: %d", (int)volt_trainer_state_fn(t));
    volt_module_ops ops = lin_ops;
    ops.validation_step = val_failing;
    ops.predict_step = lin_predict;
    ops.setup_stage = fn_msetup;
    ops.teardown = fn_mteardown;
    lin m = { .table = k_scores, .ntable = 5 };
    volt_loader *tr = mk_loader(), *va = mk_loader();
    g_fnlog[0] = 0;
    g_val_fail_at = 0;
    g_setup_saw_optimizer = false;
    volt_status st = volt_trainer_fit(t, &ops, &m, tr, va, NULL);
    CHECK_OK(st);
    CHECK(!g_setup_saw_optimizer, "setup(\"fit\") ran after the optimizer was made");
    fn_note(t, "ret");
    /* a step: batch_start, before_backward, after_backward, before_opt, batch_end. setup and
     * teardown: the callbacks' then the module's, first and last */
#define FN_STEP "batch_start:Ff before_backward:Ff after_backward:Ff before_opt:Ff batch_end:Ff"
    fn_check("fit", "setup_f:Ff msetup_f:Ff fit_start:Ff sanity_start:Ffs val_start:Fvs val_epoch_start:Fvs val_batch_start:Fvs val_batch_end:Fvs "
             "val_epoch_end:Fvs val_end:Fvs sanity_end:Ffs train_start:Ff epoch_start:Ff " FN_STEP " " FN_STEP " "
             "val_start:Fv val_epoch_start:Fv val_batch_start:Fv val_batch_end:Fv val_epoch_end:Fv val_end:Fv "
             "epoch_end:Ff train_end:Ff fit_end:Ff teardown_f:Ff mteardown_f:Ff ret:Nf");
    CHECK_OK(volt_trainer_validate(t, &ops, &m, va, NULL));
    fn_note(t, "ret");
    fn_check("validate", "setup_v:Vv msetup_v:Vv val_start:Vv val_epoch_start:Vv val_batch_start:Vv val_batch_end:Vv "
             "val_epoch_end:Vv val_end:Vv teardown_v:Vv mteardown_v:Vv ret:Nv");
    CHECK_OK(volt_trainer_test(t, &ops, &m, va, NULL));
    fn_note(t, "ret");
    fn_check("test", "setup_t:Tt msetup_t:Tt test_start:Tt test_epoch_start:Tt test_batch_start:Tt test_batch_end:Tt test_batch_start:Tt "
             "test_batch_end:Tt test_batch_start:Tt test_batch_end:Tt test_batch_start:Tt test_batch_end:Tt test_epoch_end:Tt "
             "test_end:Tt teardown_t:Tt mteardown_t:Tt ret:Nt");
    CHECK_OK(volt_trainer_predict(t, &ops, &m, va, NULL, pred_ignore, NULL));
    fn_note(t, "ret");
    fn_check("predict", "setup_p:Pp msetup_p:Pp pred_start:Pp pred_epoch_start:Pp pred_batch_start:Pp pred_batch_end:Pp pred_batch_start:Pp "
             "pred_batch_end:Pp pred_batch_start:Pp pred_batch_end:Pp pred_batch_start:Pp pred_batch_end:Pp "
             "pred_epoch_end:Pp pred_end:Pp teardown_p:Pp mteardown_p:Pp ret:Np");
    /* lr_find: the step hooks it runs are no fit's; setup and teardown are stage fit's (Lightning's Tuner runs a fit) */
    volt_lr_find_config lc;
    volt_lr_find_config_init(&lc);
    lc.num_training = 2;
    volt_lr_find_result r;
    CHECK_OK(volt_trainer_lr_find(t, &ops, &m, tr, &lc, &r));
    volt_lr_find_result_free(&r);
    fn_note(t, "ret");
    fn_check("lr_find", "setup_f:Uf msetup_f:Uf before_backward:Uf after_backward:Uf before_opt:Uf before_backward:Uf "
             "after_backward:Uf before_opt:Uf teardown_f:Uf mteardown_f:Uf ret:Nf");
    /* a fit that fails inside its epoch-end validation (the sanity check's batch is call 1):
     * on_exception still sees fit; then nothing runs */
    g_val_calls = 0;
    g_val_fail_at = 2;
    st = volt_trainer_fit(t, &ops, &m, tr, va, NULL);
    CHECK(st == VOLT_ERR_NUMERIC, "the fit fails in its validation: %s (%s)", volt_status_str(st), volt_trainer_errmsg(t));
    fn_note(t, "ret");
    fn_check("failed fit", "setup_f:Ff msetup_f:Ff fit_start:Ff sanity_start:Ffs val_start:Fvs val_epoch_start:Fvs "
             "val_batch_start:Fvs val_batch_end:Fvs val_epoch_end:Fvs val_end:Fvs sanity_end:Ffs train_start:Ff epoch_start:Ff " FN_STEP " " FN_STEP " "
             "val_start:Fv val_epoch_start:Fv val_batch_start:Fv exception:Ff ret:Nf");
#undef FN_STEP
    /* and a validate after it is validate's, not fit's */
    g_val_fail_at = 0;
    CHECK_OK(volt_trainer_validate(t, &ops, &m, va, NULL));
    fn_note(t, "ret");
    fn_check("validate after the failed fit", "setup_v:Vv msetup_v:Vv val_start:Vv val_epoch_start:Vv val_batch_start:Vv "
             "val_batch_end:Vv val_epoch_end:Vv val_end:Vv teardown_v:Vv mteardown_v:Vv ret:Nv");
    volt_loader_destroy(tr);
    volt_loader_destroy(va);
    volt_trainer_destroy(t);
}

/* setup / teardown: a table older than version 4 does not get them; a failing setup fails the
 * call before anything else ran (on_exception sees it); a failing teardown fails the call */
static int g_old_setups;
static volt_status old_setup(void *self, volt_trainer *t, volt_stage sg) { g_old_setups++; return VOLT_OK; }
static volt_status bad_setup(void *self, volt_trainer *t, volt_stage sg) {
    fn_stage_note(t, "setup", sg);
    return sg == VOLT_STAGE_TEST ? volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "no test today") : VOLT_OK;
}
static volt_status bad_teardown(void *self, volt_trainer *t, volt_stage sg) {
    fn_stage_note(t, "teardown", sg);
    return sg == VOLT_STAGE_VALIDATE ? VOLT_ERR_IO : VOLT_OK;
}
static void test_stage_hooks(void) {
    volt_trainer *t = mk_trainer(fresh_dir("stage_hooks"), &(run_opts){ .max_epochs = 1, .logger = false });
    if (!t) return;
    volt_callback_ops old = { .version = 3u, .name = "Old", .on_exception = fn_exception };
    volt_callback_ops cb = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Gate", .setup = bad_setup,
                             .teardown = bad_teardown, .on_fit_start = fn_fit_start, .on_exception = fn_exception,
                             .on_test_start = fn_test_start };
    /* a version-3 table's bytes end before setup: this one carries them, and they must be ignored */
    old.setup = old_setup;
    old.teardown = old_setup;
    CHECK_OK(volt_trainer_add_callback(t, &old, NULL));
    CHECK_OK(volt_trainer_add_callback(t, &cb, NULL));
    lin m = { .table = k_scores, .ntable = 5 };
    volt_loader *tr = mk_loader(), *va = mk_loader();
    g_fnlog[0] = 0;
    g_old_setups = 0;
    CHECK_OK(volt_trainer_fit(t, &lin_ops, &m, tr, va, NULL));
    fn_check("fit", "setup_f:Ff fit_start:Ff teardown_f:Ff");
    volt_status st = volt_trainer_test(t, &lin_ops, &m, va, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "Gate") && strstr(volt_trainer_errmsg(t), "setup") &&
          strstr(volt_trainer_errmsg(t), "no test today"), "a failing setup fails test, named: %s (%s)", volt_status_str(st),
          volt_trainer_errmsg(t));
    fn_check("test with a failing setup", "setup_t:Tt exception:Tt exception:Tt");
    st = volt_trainer_validate(t, &lin_ops, &m, va, NULL);
    CHECK(st == VOLT_ERR_IO && strstr(volt_trainer_errmsg(t), "Gate") && strstr(volt_trainer_errmsg(t), "teardown"),
          "a failing teardown fails validate, named: %s (%s)", volt_status_str(st), volt_trainer_errmsg(t));
    fn_check("validate with a failing teardown", "setup_v:Vv teardown_v:Vv exception:Vv exception:Vv");
    CHECK(g_old_setups == 0, "a version-3 callback table got setup/teardown %d times", g_old_setups);
    volt_loader_destroy(tr);
    volt_loader_destroy(va);
    volt_trainer_destroy(t);
}

static void test_collectives_single(void) {
    volt_trainer *t = mk_trainer(fresh_dir("collectives"), &(run_opts){ .max_epochs = 1 });
    for (int v = 0; v < 2; v++)
        for (int all = 0; all < 2; all++) {
            bool out = !v;
            CHECK(volt_trainer_reduce_boolean_decision(t, v, all, &out) == VOLT_OK && out == (bool)v, "reduce(%d, all=%d)", v, all);
            out = !v;
            CHECK(volt_trainer_broadcast_bool(t, v, &out) == VOLT_OK && out == (bool)v, "broadcast(%d)", v);
        }
    CHECK(volt_trainer_reduce_boolean_decision(t, true, true, NULL) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_trainer_errmsg(t), "volt_trainer_reduce_boolean_decision"), "NULL out: %s", volt_trainer_errmsg(t));
    CHECK(volt_trainer_broadcast_bool(t, true, NULL) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_trainer_errmsg(t), "volt_trainer_broadcast_bool"), "NULL out: %s", volt_trainer_errmsg(t));
    bool out;
    CHECK(volt_trainer_broadcast_bool(NULL, true, &out) == VOLT_ERR_INVALID_ARG, "NULL trainer");
    /* one process: all_gather copies, all_reduce leaves the values */
    int32_t mine[2] = { 5, -6 }, got[2] = { 0, 0 };
    CHECK(volt_trainer_all_gather(t, mine, sizeof mine, got) == VOLT_OK && got[0] == 5 && got[1] == -6, "all_gather: %d %d",
          got[0], got[1]);
    double v[3] = { 1.5, -2, NAN };
    for (int op = 0; op < 4; op++)
        CHECK(volt_trainer_all_reduce(t, v, 3, (volt_reduce_op)op) == VOLT_OK && v[0] == 1.5 && v[1] == -2 && isnan(v[2]),
              "all_reduce op %d on one process: %g %g %g", op, v[0], v[1], v[2]);
    CHECK(volt_trainer_all_reduce(t, v, 3, (volt_reduce_op)9) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_trainer_errmsg(t), "unknown reduce op"), "op 9: %s", volt_trainer_errmsg(t));
    CHECK(volt_trainer_all_gather(t, mine, sizeof mine, NULL) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_trainer_errmsg(t), "NULL receive buffer"), "NULL recv: %s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
}

/* profiler = "simple": the actions of a 2-epoch fit (4 batches each, 4 validation batches
 * each time plus the sanity check's 2) counted as they ran, their times within the stage's,
 * the table on stdout; then a test stage starts afresh. Off: nothing recorded. A value other
 * than "simple" is refused at create. */
static void test_e2e_profiler(void) {
    const char *root = fresh_dir("profiler");
    char out[1200];
    snprintf(out, sizeof out, "%s/stdout.txt", root);
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 2, .logger = true, .profiler = "simple" });
    lin m = { .table = k_scores, .ntable = 5 };
    fflush(stdout);
    int saved = dup(1);
    FILE *f = fopen(out, "w");
    if (f) dup2(fileno(f), 1);
    const double t0 = vtest_now();
    volt_status st = fit(t, &m, true, NULL);
    const double wall = vtest_now() - t0;
    fflush(stdout);
    if (f) { dup2(saved, 1); fclose(f); }
    close(saved);
    CHECK_OK(st);
    static const struct { const char *name; int64_t calls; } want[] = {
        { "run_training_batch", 8 }, { "run_training_epoch", 2 }, { "train_dataloader_next", 8 },
        { "validation_step", 2 + 2 * 4 }, { "setup", 1 }, { "[Callback]ModelCheckpoint.on_validation_end", 3 },
        { "[Callback]CSVLogger.on_train_batch_end", 8 }, { "[LightningModule]lin.on_train_epoch_end", 2 },
        { "[Callback]ModelCheckpoint.on_fit_end", 1 },
    };
    double batches = 0, epochs = 0;
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        int64_t calls = -1;
        double total = -1;
        CHECK(volt_trainer_profiler_action(t, want[i].name, &calls, &total) && calls == want[i].calls && total >= 0 &&
              total <= wall, "%s: %lld calls, %g s (want %lld calls within %g s)", want[i].name, (long long)calls, total,
              (long long)want[i].calls, wall);
        if (!strcmp(want[i].name, "run_training_batch")) batches = total;
        if (!strcmp(want[i].name, "run_training_epoch")) epochs = total;
    }
    CHECK(batches > 0 && batches <= epochs, "the batches (%g s) within the epochs (%g s)", batches, epochs);
    CHECK(!volt_trainer_profiler_action(t, "test_step", NULL, NULL), "no test step in fit");
    char *txt = slurp(out);
    CHECK(txt && strstr(txt, "FIT Profiler Report") && strstr(txt, "|  run_training_batch ") &&
          strstr(txt, "|  [Callback]ModelCheckpoint.on_validation_end "), "the table on stdout:\n%s", txt ? txt : "(none)");
    free(txt);
    volt_loader *l = mk_loader();
    fflush(stdout);
    CHECK_OK(volt_trainer_test(t, &lin_ops, &m, l, "best"));
    volt_loader_destroy(l);
    int64_t calls = 0;
    CHECK(volt_trainer_profiler_action(t, "test_step", &calls, NULL) && calls == 4, "test: %lld test steps", (long long)calls);
    CHECK(volt_trainer_profiler_action(t, "load_checkpoint", &calls, NULL) && calls == 1, "test: the best loaded once");
    CHECK(!volt_trainer_profiler_action(t, "run_training_batch", NULL, NULL), "test starts afresh");
    volt_trainer_destroy(t);

    t = mk_trainer(fresh_dir("profiler_off"), &(run_opts){ .max_epochs = 1, .logger = false });
    CHECK_OK(fit(t, &m, true, NULL));
    CHECK(!volt_trainer_profiler_action(t, "run_training_batch", NULL, NULL), "off: nothing recorded");
    volt_trainer_destroy(t);
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.profiler = "advanced";
    volt_trainer *bad = NULL;
    CHECK(volt_trainer_create(&c, &bad) == VOLT_ERR_INVALID_ARG && bad && strstr(volt_trainer_errmsg(bad), "profiler"),
          "profiler=\"advanced\": %s", bad ? volt_trainer_errmsg(bad) : "(no trainer)");
    volt_trainer_destroy(bad);
}

/* Callback checkpoint hooks (table version 5): a callback's tensors and metadata in the
 * checkpoint under "callback.<its key>.", two of the same name apart ("Stash", "Stash#1");
 * on_load_checkpoint on a resumed fit gives each its own back (not on validate, as Lightning
 * restores callbacks for fit only); a failing hook fails the save naming the callback; a
 * version-4 table's pointers are not read. */
typedef struct stash { float v[3], got[3]; int saves, loads, fail; char note[32]; } stash;
static volt_status stash_save(void *self, volt_trainer *t, volt_ckpt *ck) {
    (void)t;
    stash *s = self;
    s->saves++;
    if (s->fail) return volt_trainer_fail(t, VOLT_ERR_IO, "stash: the disk is full");
    VOLT_TRY(volt_ckpt_put_tensor(ck, "ema", VOLT_F32, VOLT_SHAPE(3), s->v));
    return volt_ckpt_put_meta(ck, "note", s->v[0] > 0 ? "plus" : "minus");
}
static volt_status stash_load(void *self, volt_trainer *t, volt_ckpt *ck) {
    (void)t;
    stash *s = self;
    s->loads++;
    const char *n = volt_ckpt_get_meta(ck, "note");
    snprintf(s->note, sizeof s->note, "%s", n ? n : "");
    return volt_ckpt_get_tensor(ck, "ema", VOLT_F32, VOLT_SHAPE(3), s->got);
}
static const volt_callback_ops stash_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Stash",
                                             .on_save_checkpoint = stash_save, .on_load_checkpoint = stash_load };

static void test_ckpt_hooks(void) {
    const char *root = fresh_dir("ckpt_hooks");
    char ck[1200];
    snprintf(ck, sizeof ck, "%s/saved.safetensors", root);
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
    stash a = { .v = { 1, 2, 3 } }, b = { .v = { -4, -5, -6 } };
    CHECK_OK(volt_trainer_add_callback(t, &stash_ops, &a));
    CHECK_OK(volt_trainer_add_callback(t, &stash_ops, &b));
    lin m = { .table = k_scores, .ntable = 5 };
    CHECK_OK(fit(t, &m, false, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(t, ck));
    CHECK(a.saves >= 1 && b.saves == a.saves, "saves: %d, %d", a.saves, b.saves);
    volt_st_file *f = NULL;
    char err[512];
    CHECK_OK(volt_st_open(ck, &f, err, sizeof err));
    volt_st_info in;
    CHECK(f && volt_st_find(f, "callback.Stash.ema", &in) == VOLT_OK && volt_st_find(f, "callback.Stash#1.ema", &in) == VOLT_OK &&
          volt_st_find(f, "module.ema", &in) != VOLT_OK && volt_st_meta(f, "callback.Stash#1.note") &&
          !strcmp(volt_st_meta(f, "callback.Stash#1.note"), "minus"), "the callbacks' entries in the file");
    volt_st_close(f);
    volt_trainer_destroy(t);
    /* validate from it: no callback restore */
    stash c = { 0 }, d = { 0 };
    t = mk_trainer(root, &(run_opts){ .max_epochs = 2 });
    CHECK_OK(volt_trainer_add_callback(t, &stash_ops, &c));
    CHECK_OK(volt_trainer_add_callback(t, &stash_ops, &d));
    volt_loader *l = mk_loader();
    CHECK_OK(volt_trainer_validate(t, &lin_ops, &m, l, ck));
    CHECK(c.loads == 0 && d.loads == 0, "validate restored callbacks (%d, %d loads)", c.loads, d.loads);
    /* a resumed fit: each its own */
    CHECK_OK(fit(t, &m, false, ck));
    CHECK(c.loads == 1 && d.loads == 1 && !memcmp(c.got, a.v, sizeof a.v) && !memcmp(d.got, b.v, sizeof b.v) &&
          !strcmp(c.note, "plus") && !strcmp(d.note, "minus"), "resumed: loads %d %d, got %g %g %g / %g %g %g, notes %s %s",
          c.loads, d.loads, c.got[0], c.got[1], c.got[2], d.got[0], d.got[1], d.got[2], c.note, d.note);
    /* a failing save: named */
    d.fail = 1;
    volt_status st = volt_trainer_save_checkpoint(t, ck);
    CHECK(st == VOLT_ERR_IO && strstr(volt_trainer_errmsg(t), "callback 'Stash#1': on_save_checkpoint failed: stash: the disk is "
          "full"), "a failing on_save_checkpoint: %s (%s)", volt_status_str(st), volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    /* a name that could meet another's entries: refused (and destroyed) when it has the hooks */
    volt_callback_ops dotted = stash_ops;
    stash x = { 0 };
    dotted.name = "Stash.b";
    t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
    CHECK(volt_trainer_add_callback(t, &dotted, &x) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "without '.' or '#'"),
          "a dotted name with checkpoint hooks: %s", volt_trainer_errmsg(t));
    dotted.name = "Stash#1";
    CHECK(volt_trainer_add_callback(t, &dotted, &x) == VOLT_ERR_INVALID_ARG, "a name with '#' and checkpoint hooks accepted");
    volt_trainer_destroy(t);
    /* a version-4 table: its pointers are not read */
    volt_callback_ops v4 = stash_ops;
    v4.version = 4;
    stash e = { .v = { 7, 7, 7 } };
    t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
    CHECK_OK(volt_trainer_add_callback(t, &v4, &e));
    CHECK_OK(fit(t, &m, false, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(t, ck));
    CHECK(e.saves == 0, "a version-4 table's on_save_checkpoint ran %d times", e.saves);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

/* Timer (callbacks/timer.c) on the real clock, with bounds no load breaks: 30 ms of sleep per
 * batch (Sleeper), a 0.1 s limit. At step interval fit stops at a step k <= 4 (after k steps at
 * least 0.03 k s passed, so the check at step 4 sees the limit spent) and k >= 1; at epoch
 * interval at the end of epoch 0 (4 steps). The stage times: train >= the sleeps, test > 0 after
 * a test, predict 0 before any. Its checkpoint state carries the train time: a resumed fit with
 * the same limit stops before any step. No duration: never stops. Bad configs named. */
static void test_timer(void) {
    const char *root = fresh_dir("timer");
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 100 });
    sleeper sl = { 0 };
    CHECK_OK(volt_trainer_add_callback(t, &sleeper_ops, &sl));
    volt_timer_config tc;
    volt_timer_config_init(&tc);
    tc.duration = "00:00:00:0.1";
    volt_timer *tm = NULL;
    CHECK_OK(volt_add_timer(t, &tc, &tm));
    CHECK(tm && volt_timer_time_elapsed(tm, VOLT_STAGE_FIT) == 0 && volt_timer_time_remaining(tm, VOLT_STAGE_FIT) == 0.1,
          "before fit: elapsed %g, remaining %g", volt_timer_time_elapsed(tm, VOLT_STAGE_FIT),
          volt_timer_time_remaining(tm, VOLT_STAGE_FIT));
    lin m = { .table = k_scores, .ntable = 5 };
    char errp[1200], err[2048];
    snprintf(errp, sizeof errp, "%s/stderr.txt", root);
    int saved = vtest_stderr_to(errp);
    volt_status st = fit(t, &m, false, NULL);
    vtest_stderr_back(saved, errp, err, sizeof err);
    CHECK_OK(st);
    const int64_t gs = volt_trainer_global_step(t);
    const double el = volt_timer_time_elapsed(tm, VOLT_STAGE_FIT);
    CHECK(gs >= 1 && gs <= 4 && el >= 0.03 * (double)gs && el >= 0.1 && volt_timer_time_remaining(tm, VOLT_STAGE_FIT) <= 0,
          "step interval: stopped at step %lld after %.3f s (want 1..4, >= 0.1 s)", (long long)gs, el);
    CHECK(strstr(err, "Time limit reached. Elapsed time is 0:00:00. Signaling Trainer to stop.") != NULL, "the line: %s", err);
    /* the stage times */
    volt_loader *l = mk_loader();
    CHECK_OK(volt_trainer_test(t, &lin_ops, &m, l, NULL));
    const double te = volt_timer_time_elapsed(tm, VOLT_STAGE_TEST);
    CHECK(te > 0 && te < 60 && volt_timer_time_elapsed(tm, VOLT_STAGE_PREDICT) == 0 &&
          volt_timer_time_elapsed(tm, VOLT_STAGE_FIT) == el, "test %g s, predict %g s, train %g s (was %g)", te,
          volt_timer_time_elapsed(tm, VOLT_STAGE_PREDICT), volt_timer_time_elapsed(tm, VOLT_STAGE_FIT), el);
    /* its state, and a resumed fit whose time is spent: no step */
    char ck[1200];
    snprintf(ck, sizeof ck, "%s/saved.safetensors", root);
    CHECK_OK(volt_trainer_save_checkpoint(t, ck));
    char *js = ckpt_cb_state(ck, "Timer");
    double saved_train = -1;
    CHECK(js && sscanf(js, "{\"time_elapsed\":{\"train\":%lf", &saved_train) == 1 && fabs(saved_train - el) < 1e-5,
          "the Timer's state: %s (train %g)", js ? js : "(none)", el);
    free(js);
    volt_trainer_destroy(t);
    t = mk_trainer(root, &(run_opts){ .max_epochs = 100 });
    CHECK_OK(volt_add_timer(t, &tc, &tm));
    CHECK_OK(fit(t, &m, false, ck));
    CHECK(volt_trainer_global_step(t) == gs && volt_timer_time_elapsed(tm, VOLT_STAGE_FIT) >= el,
          "resumed with the time spent: step %lld (saved at %lld), train time %g", (long long)volt_trainer_global_step(t),
          (long long)gs, volt_timer_time_elapsed(tm, VOLT_STAGE_FIT));
    volt_trainer_destroy(t);
    /* epoch interval: the end of epoch 0 */
    t = mk_trainer(fresh_dir("timer_epoch"), &(run_opts){ .max_epochs = 100 });
    CHECK_OK(volt_trainer_add_callback(t, &sleeper_ops, &sl));
    tc.interval = VOLT_TIMER_EPOCH;
    tc.verbose = false;
    CHECK_OK(volt_add_timer(t, &tc, NULL));
    CHECK_OK(fit(t, &m, false, NULL));
    CHECK(volt_trainer_global_step(t) == 4 && volt_trainer_current_epoch(t) == 1, "epoch interval: stopped at step %lld, "
          "epoch %lld (want 4, 1)", (long long)volt_trainer_global_step(t), (long long)volt_trainer_current_epoch(t));
    volt_trainer_destroy(t);
    /* with a LearningRateFinder, whose sweep saves and loads the trainer's state back: a second
     * fresh fit counts its own training time only (never the first's, from the sweep's reload),
     * so it is within the wall time of that fit */
    t = mk_trainer(fresh_dir("timer_lrf"), &(run_opts){ .max_epochs = 1 });
    CHECK_OK(volt_trainer_add_callback(t, &sleeper_ops, &sl));
    CHECK_OK(volt_add_timer(t, NULL, &tm));
    volt_lr_finder_config lf;
    volt_lr_finder_config_init(&lf);
    lf.find.num_training = 10;
    CHECK_OK(volt_add_lr_finder(t, &lf));
    CHECK_OK(fit(t, &m, false, NULL));
    const double first = volt_timer_time_elapsed(tm, VOLT_STAGE_FIT);
    const double w0 = vtest_now();
    CHECK_OK(fit(t, &m, false, NULL));
    const double wall = vtest_now() - w0, second = volt_timer_time_elapsed(tm, VOLT_STAGE_FIT);
    CHECK(first >= 0.12 && second >= 0.12 && second <= wall, "two fits with a LearningRateFinder: train times %.3f, %.3f s "
          "(the second's fit took %.3f s of wall time)", first, second, wall);
    volt_trainer_destroy(t);
    /* no duration: the times alone */
    t = mk_trainer(fresh_dir("timer_none"), &(run_opts){ .max_epochs = 2 });
    CHECK_OK(volt_add_timer(t, NULL, &tm));
    CHECK_OK(fit(t, &m, false, NULL));
    CHECK(volt_trainer_global_step(t) == 8 && volt_timer_time_elapsed(tm, VOLT_STAGE_FIT) > 0 &&
          isinf(volt_timer_time_remaining(tm, VOLT_STAGE_FIT)), "no duration: step %lld", (long long)volt_trainer_global_step(t));
    /* bad configs */
    volt_timer_config bad;
    const char *const durations[] = { "1:2", "00:00:00:00", "00:00:-1:00", "00:00:00:1x", "0:inf:0:0", "0:0:1e309:0" };
    for (int i = 0; i < 6; i++) {
        volt_timer_config_init(&bad);
        bad.duration = durations[i];
        CHECK(volt_add_timer(t, &bad, NULL) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "DD:HH:MM:SS"),
              "duration '%s': %s", durations[i], volt_trainer_errmsg(t));
    }
    volt_timer_config_init(&bad);
    bad.interval = (volt_timer_interval)7;
    CHECK(volt_add_timer(t, &bad, NULL) == VOLT_ERR_INVALID_ARG, "interval 7 accepted");
    bad.interval = VOLT_TIMER_STEP;
    bad.version = 0;
    CHECK(volt_add_timer(t, &bad, NULL) == VOLT_ERR_VERSION, "version 0 accepted");
    CHECK(volt_add_timer(t, NULL, NULL) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "one already"),
          "a second Timer: %s", volt_trainer_errmsg(t));
    CHECK(isnan(volt_timer_time_elapsed(NULL, VOLT_STAGE_FIT)), "a NULL timer's time");
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
}

/* LightningModule.configure_callbacks (module table version 4): the module's callbacks replace
 * the trainer's of the same table (Rec and the default ModelCheckpoint), which stay idle and are
 * destroyed with the trainer; the module's ModelCheckpoint takes "best" (test from it) and runs
 * last; each call's replace the module's earlier ones (destroyed then); a failing hook fails the
 * call, named, and its callbacks go; the state key is the same on a resume; a version-3 table
 * that carries the pointer is not read. */
typedef struct rec { int fit_starts, test_starts, destroyed; } rec;
static volt_status rec_fit_start(void *self, volt_trainer *t) { (void)t; ((rec *)self)->fit_starts++; return VOLT_OK; }
static volt_status rec_test_start(void *self, volt_trainer *t) { (void)t; ((rec *)self)->test_starts++; return VOLT_OK; }
static void rec_destroy(void *self) { ((rec *)self)->destroyed++; }
static const volt_callback_ops rec_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Rec", .on_fit_start = rec_fit_start,
                                           .on_test_start = rec_test_start, .destroy = rec_destroy };
static rec g_recs[8];
static int g_n_recs, g_cfgcb_calls;
static bool g_cfgcb_fail;
static const char *g_cfgcb_dir;
static rec *g_cfgcb_persist;
static float g_cfgcb_decay;   /* > 0: the module adds a Timer and an EMA WeightAveraging of this decay too */
static volt_status cfgcb(void *self, volt_trainer *t) {
    (void)self;
    g_cfgcb_calls++;
    if (g_cfgcb_decay > 0) {
        volt_timer_config tc;
        volt_timer_config_init(&tc);
        tc.duration = "00:01:00:00";
        VOLT_TRY(volt_add_timer(t, &tc, NULL));
        volt_weight_averaging_config wc;
        volt_weight_averaging_config_init(&wc);
        wc.mode = VOLT_OPTIM_AVERAGE_EMA;
        wc.decay = g_cfgcb_decay;
        VOLT_TRY(volt_add_weight_averaging(t, &wc));
    }
    if (g_cfgcb_fail) {
        if (g_n_recs < 8) VOLT_TRY(volt_trainer_add_callback(t, &rec_ops, &g_recs[g_n_recs++]));
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "no callbacks today");
    }
    /* the ModelCheckpoint first: the trainer puts it last */
    const volt_checkpoint_config cc = score_ckpt(g_cfgcb_dir, 1, true);
    VOLT_TRY(volt_add_model_checkpoint(t, &cc));
    if (g_cfgcb_persist) {   /* one object added at every call (Lightning: the same instance returned), and a finder */
        VOLT_TRY(volt_trainer_add_callback(t, &rec_ops, g_cfgcb_persist));
        volt_lr_finder_config lc;
        volt_lr_finder_config_init(&lc);
        lc.find.num_training = 3;
        VOLT_TRY(volt_add_lr_finder(t, &lc));
        return volt_add_on_exception_checkpoint(t, g_cfgcb_dir, NULL);
    }
    if (g_n_recs < 8) VOLT_TRY(volt_trainer_add_callback(t, &rec_ops, &g_recs[g_n_recs++]));
    return VOLT_OK;
}

static void test_configure_callbacks(void) {
    const char *root = fresh_dir("cfgcb");
    char mod[900], dflt[900], want[1000];
    snprintf(mod, sizeof mod, "%s/mod", root);
    snprintf(dflt, sizeof dflt, "%s/checkpoints", root);
    g_cfgcb_dir = mod;
    memset(g_recs, 0, sizeof g_recs);
    g_n_recs = g_cfgcb_calls = 0;
    g_cfgcb_fail = false;
    volt_module_ops ops = lin_ops;
    ops.configure_callbacks = cfgcb;
    volt_trainer *t = mk_trainer(root, &(run_opts){ .max_epochs = 5 });
    rec a = { 0 };
    CHECK_OK(volt_trainer_add_callback(t, &rec_ops, &a));
    lin m = { .table = k_scores, .ntable = 5 };
    volt_loader *tr = mk_loader(), *va = mk_loader();
    CHECK_OK(volt_trainer_fit(t, &ops, &m, tr, va, NULL));
    const int n = volt_trainer_num_callbacks(t);
    int n_mc = 0, n_rec = 0;
    for (int i = 0; i < n; i++) {
        n_mc += !strcmp(volt_trainer_callback_name(t, i), "ModelCheckpoint");
        n_rec += !strcmp(volt_trainer_callback_name(t, i), "Rec");
    }
    CHECK(n_mc == 1 && n_rec == 1 && !strcmp(volt_trainer_callback_name(t, n - 1), "ModelCheckpoint"),
          "after fit: %d ModelCheckpoints, %d Recs, the last is %s", n_mc, n_rec, volt_trainer_callback_name(t, n - 1));
    CHECK(g_cfgcb_calls == 1 && a.fit_starts == 0 && g_recs[0].fit_starts == 1 && !a.destroyed,
          "fit: the trainer's Rec ran %d times, the module's %d (hook called %d times)", a.fit_starts, g_recs[0].fit_starts,
          g_cfgcb_calls);
    char got[1024];
    list_ckpts(mod, got, sizeof got);
    CHECK(!strcmp(got, E3 "," LAST), "the module's ModelCheckpoint wrote: %s", got);
    list_ckpts(dflt, got, sizeof got);
    CHECK(!got[0], "the replaced default ModelCheckpoint wrote: %s", got);
    snprintf(want, sizeof want, "%s/" E3, mod);
    const char *best = volt_trainer_best_model_path(t);
    CHECK(best && !strcmp(best, want), "best_model_path: %s", best ? best : "(none)");
    /* test from "best": resolved by fit's ModelCheckpoint, then the call's own replace fit's */
    CHECK_OK(volt_trainer_test(t, &ops, &m, va, "best"));
    CHECK(g_cfgcb_calls == 2 && g_recs[0].destroyed == 1 && g_recs[1].test_starts == 1 && a.test_starts == 0 &&
          volt_trainer_num_callbacks(t) == n, "test: module Rec #0 destroyed %d times, #1 ran %d times, %d callbacks (%d before)",
          g_recs[0].destroyed, g_recs[1].test_starts, volt_trainer_num_callbacks(t), n);
    CHECK(!volt_trainer_best_model_path(t), "the test call's fresh ModelCheckpoint has no best yet");
    /* a failing configure_callbacks: named, what it added destroyed, the earlier ones kept */
    g_cfgcb_fail = true;
    volt_status st = volt_trainer_validate(t, &ops, &m, va, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "lin.configure_callbacks: no callbacks today"),
          "a failing configure_callbacks: %s (%s)", volt_status_str(st), volt_trainer_errmsg(t));
    CHECK(g_recs[2].destroyed == 1 && !g_recs[1].destroyed && volt_trainer_num_callbacks(t) == n,
          "after the failure: its Rec destroyed %d times, the earlier %d, %d callbacks", g_recs[2].destroyed,
          g_recs[1].destroyed, volt_trainer_num_callbacks(t));
    g_cfgcb_fail = false;
    volt_trainer_destroy(t);
    CHECK(a.destroyed == 1 && g_recs[1].destroyed == 1, "at destroy: the idle Rec destroyed %d times, the module's %d",
          a.destroyed, g_recs[1].destroyed);
    /* a resumed fit: the module's ModelCheckpoint gets its state back under the same key */
    t = mk_trainer(root, &(run_opts){ .max_epochs = 5 });
    snprintf(got, sizeof got, "%s/" LAST, mod);
    CHECK_OK(volt_trainer_fit(t, &ops, &m, tr, va, got));
    best = volt_trainer_best_model_path(t);
    CHECK(best && !strcmp(best, want), "resumed: best_model_path %s", best ? best : "(none)");
    volt_trainer_destroy(t);
    /* callbacks one per trainer (Timer, WeightAveraging) from the module in every call: each
     * call's replace the trainer's and the earlier call's; the average cannot change after a fit */
    t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
    volt_timer_config tc;
    volt_timer_config_init(&tc);
    CHECK_OK(volt_add_timer(t, &tc, NULL));
    g_cfgcb_decay = 0.5f;
    CHECK_OK(volt_trainer_fit(t, &ops, &m, tr, va, NULL));
    CHECK_OK(volt_trainer_validate(t, &ops, &m, va, NULL));
    int n_timer = 0, n_wa = 0;
    for (int i = 0; i < volt_trainer_num_callbacks(t); i++) {
        n_timer += !strcmp(volt_trainer_callback_name(t, i), "Timer");
        n_wa += !strcmp(volt_trainer_callback_name(t, i), "WeightAveraging");
    }
    CHECK(n_timer == 1 && n_wa == 1, "one Timer (%d) and one WeightAveraging (%d) after two calls", n_timer, n_wa);
    g_cfgcb_decay = 0.25f;
    st = volt_trainer_validate(t, &ops, &m, va, NULL);
    CHECK(st == VOLT_ERR_STATE && strstr(volt_trainer_errmsg(t), "cannot change the average"),
          "another decay after a fit: %s (%s)", volt_status_str(st), volt_trainer_errmsg(t));
    g_cfgcb_decay = 0;
    volt_trainer_destroy(t);
    /* the same object at every call: neither destroyed nor idle while the module adds it again,
     * its hooks run at each call; a LearningRateFinder and an OnExceptionCheckpoint at each of 20
     * calls (one per trainer, a path "last" weighs: no more of either than one) */
    rec same = { 0 };
    g_cfgcb_persist = &same;
    t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
    CHECK_OK(volt_trainer_fit(t, &ops, &m, tr, va, NULL));
    CHECK(volt_lr_finder_result(t) && volt_lr_finder_result(t)->n == 3, "the module's LearningRateFinder ran in fit");
    for (int i = 0; i < 20; i++) CHECK_OK(volt_trainer_test(t, &ops, &m, va, NULL));
    CHECK(same.fit_starts == 1 && same.test_starts == 20 && same.destroyed == 0,
          "one object over 21 calls: %d fit starts, %d test starts, destroyed %d times", same.fit_starts, same.test_starts,
          same.destroyed);
    volt_trainer_destroy(t);
    CHECK(same.destroyed == 1, "the object added at every call destroyed %d times with the trainer", same.destroyed);
    g_cfgcb_persist = NULL;
    /* version 3: the pointer is not read */
    ops.version = 3u;
    t = mk_trainer(root, &(run_opts){ .max_epochs = 1 });
    const int calls = g_cfgcb_calls;
    CHECK_OK(volt_trainer_fit(t, &ops, &m, tr, va, NULL));
    CHECK(g_cfgcb_calls == calls, "a version-3 module table's configure_callbacks ran");
    volt_trainer_destroy(t);
    volt_loader_destroy(tr);
    volt_loader_destroy(va);
}

int main(void) {
    vtest_check_accelerator();
    test_repr();
    test_format_number();
    test_format_name();
    test_topk();
    test_es_decision();
    test_progress_text();
    test_versions();
    test_csv_unit();
    make_data();
    test_e2e_topk();
    test_e2e_topk_resume();
    test_e2e_ckpt_modes();
    test_e2e_early_stopping();
    test_es_check_on_train_epoch_end();
    test_e2e_verbose();
    test_e2e_csv_lr();
    test_e2e_csv_resume();
    test_e2e_progress_bar();
    test_e2e_default_callbacks();
    test_e2e_async_save();
    test_snapshot_moment();
    test_e2e_async_error();
    test_resolve_missing();
    test_weights_only();
    test_bare_names();
    test_empty_paths();
    test_bad_state_dict();
    test_version_counter();
    test_version_counter_repeat();
    test_ckpt_subfolder();
    test_collectives_single();
    test_validate_after_failed_fit();
    test_state_fn();
    test_stage_hooks();
    test_unwritable_dirs();
    test_time_interval_config();
    test_time_interval();
    test_time_interval_clock();
    test_timer();
    test_ckpt_hooks();
    test_configure_callbacks();
    test_e2e_profiler();
    volt_dataset_destroy(g_ds);
    return vtest_finish();
}
