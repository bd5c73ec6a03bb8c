/* Reliability and security checks (docs/RELIABILITY.md), one process, no MPI:
 *   - a checkpoint never makes volt touch files outside its run: crafted ModelCheckpoint
 *     paths ("..", another folder, shard folders) are never deleted, even with a valid
 *     metadata checksum; a resumed run writes under its own default_root_dir;
 *   - the metadata (loop and callback state) is covered by a checksum;
 *   - the run fingerprint: another one is an error unless resume_anyway;
 *   - one unexpected tensor: the error names it (a use-after-free once);
 *   - shard index: ranges must tile each unit, shape products must not overflow;
 *   - readers: IDX headers (0 items x huge dims, more data declared than the file holds),
 *     a TSV label of 2^31 - 1, a directory given as a CSV file or a vocab. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <cjson/cJSON.h>
#include "vtest.h"
#include "rel_model.h"
#include "volt/safetensors.h"
#include "volt/text.h"
#include "volt/tokenizer.h"
#include "volt/distilbert.h"
#include "volt/distilbert_hf.h"
#include "core/device.h"

static char g_tmp[1024];

static void path_join(char *out, size_t n, const char *a, const char *b) { snprintf(out, n, "%s/%s", a, b); }

static bool exists(const char *p) { struct stat sb; return lstat(p, &sb) == 0; }

static void rm_rf(const char *p) {
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    if (system(cmd) != 0) fprintf(stderr, "rm -rf %s failed\n", p);
}

static void write_text(const char *p, const char *s) {
    FILE *f = fopen(p, "wb");
    if (!f) { CHECK(0, "cannot write %s", p); return; }
    fputs(s, f);
    fclose(f);
}

static volt_trainer *trainer(const char *root, int64_t max_steps, const char *fp, bool anyway) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_epochs = 2;
    c.max_steps = max_steps;
    c.enable_progress_bar = false;
    c.num_sanity_val_steps = 0;
    c.default_root_dir = root;
    c.seed = 3;
    c.run_fingerprint = fp;
    c.resume_anyway = anyway;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_OK, "trainer_create: %s", t ? volt_trainer_errmsg(t) : volt_status_str(st));
    return t;
}

/* One fit; ckpt_dir: ModelCheckpoint dirpath (NULL: the run's default), saving every 2 steps
 * plus last. Returns the status; *tout keeps the trainer when given. */
static volt_status fit(const char *root, const char *ckpt_dir, int64_t max_steps, const char *resume, const char *fp,
                       bool anyway, volt_trainer **tout, bool extra) {
    volt_dataset *ds = rel_data();
    volt_loader *l = rel_loader(ds, 8, true), *vl = rel_loader(ds, 16, false);
    volt_trainer *t = trainer(root, max_steps, fp, anyway);
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = ckpt_dir;
    cc.save_last = true;
    cc.every_n_train_steps = 2;
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    rel_mlp m = { .extra = extra };
    volt_status st = volt_trainer_fit(t, &rel_ops, &m, l, vl, resume);
    if (st < 0 && getenv("VOLT_TEST_DEBUG")) fprintf(stderr, "fit: %s\n", volt_trainer_errmsg(t));
    if (tout) *tout = t;
    else volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_loader_destroy(vl);
    volt_dataset_destroy(ds);
    return st;
}

/* ---- rewriting a checkpoint's metadata, as an attacker (or a damaged disk) would ---------- */
typedef struct kv { const char *k, *v; } kv;
static int kv_cmp(const void *a, const void *b) { return strcmp(((const kv *)a)->k, ((const kv *)b)->k); }

/* docs/RELIABILITY.md: crc32 over "key\0value\0" of every key but format, crc32:* and the
 * checksum itself, in key order. Computed here independently of the library. */
static void seal(kv *m, int n, char *hex) {
    kv *c = malloc(sizeof *c * (size_t)(n + 1));
    int k = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(m[i].k, "format") && strncmp(m[i].k, "crc32:", 6) && strcmp(m[i].k, "volt.meta_crc32")) c[k++] = m[i];
    qsort(c, (size_t)k, sizeof *c, kv_cmp);
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < k; i++) {
        crc = crc32(crc, (const Bytef *)c[i].k, (uInt)strlen(c[i].k) + 1);
        crc = crc32(crc, (const Bytef *)c[i].v, (uInt)strlen(c[i].v) + 1);
    }
    free(c);
    sprintf(hex, "%08lx", (unsigned long)crc);
}

/* Copy src to dst with metadata key `key` set to `val`; reseal: recompute the checksum. */
static void rewrite(const char *src, const char *dst, const char *key, const char *val, bool reseal) {
    char err[512];
    volt_st_file *f = NULL;
    CHECK(volt_st_open(src, &f, err, sizeof err) == VOLT_OK, "%s", err);
    if (!f) return;
    volt_st_writer *w = NULL;
    CHECK_OK(volt_st_writer_create(&w));
    for (int i = 0; i < volt_st_count(f); i++) {
        volt_st_info in;
        CHECK_OK(volt_st_find(f, volt_st_name(f, i), &in));
        CHECK_OK(volt_st_writer_add(w, volt_st_name(f, i), in.dtype, in.shape, in.data));
    }
    int n = volt_st_meta_count(f);
    kv *m = calloc((size_t)n + 1, sizeof *m);
    int k = 0;
    bool set = false;
    for (int i = 0; i < n; i++) {
        volt_st_meta_at(f, i, &m[k].k, &m[k].v);
        if (!strcmp(m[k].k, key)) { m[k].v = val; set = true; }
        k++;
    }
    if (!set) { m[k].k = key; m[k].v = val; k++; }
    char hex[16];
    seal(m, k, hex);
    for (int i = 0; i < k; i++) {
        if (!strcmp(m[i].k, "format") || !strncmp(m[i].k, "crc32:", 6)) continue;
        if (!strcmp(m[i].k, "volt.meta_crc32") && reseal) continue;
        CHECK_OK(volt_st_writer_meta(w, m[i].k, m[i].v));
    }
    if (reseal) CHECK_OK(volt_st_writer_meta(w, "volt.meta_crc32", hex));
    CHECK(volt_st_writer_write(w, dst, err, sizeof err) == VOLT_OK, "%s", err);
    free(m);
    volt_st_writer_destroy(w);
    volt_st_close(f);
}

static char *meta_of(const char *path, const char *key) {
    char err[512];
    volt_st_file *f = NULL;
    if (volt_st_open(path, &f, err, sizeof err) != VOLT_OK) return NULL;
    const char *v = volt_st_meta(f, key);
    char *r = v ? strdup(v) : NULL;
    volt_st_close(f);
    return r;
}

/* ---- 1. crafted ModelCheckpoint paths ------------------------------------------------------------ */
static void test_crafted_paths(void) {
    char root[1100], ck[1200], last[1300], victim[1300], vdir[1400], vshard[1500], crafted[1300], outside[1100];
    path_join(root, sizeof root, g_tmp, "crafted");
    path_join(outside, sizeof outside, g_tmp, "outside");
    rm_rf(root);
    rm_rf(outside);
    mkdir(root, 0755);
    mkdir(outside, 0755);
    path_join(ck, sizeof ck, root, "ck");
    CHECK_OK(fit(root, ck, 4, NULL, NULL, false, NULL, false));
    path_join(last, sizeof last, ck, "last.safetensors");
    CHECK(exists(last), "run 1 saved %s", last);
    /* victims outside the run: a file, and a "shard folder" beside it */
    path_join(victim, sizeof victim, outside, "victim.safetensors");
    write_text(victim, "precious");
    snprintf(vdir, sizeof vdir, "%s.shards-0123", victim);
    mkdir(vdir, 0755);
    path_join(vshard, sizeof vshard, vdir, "rank00000-of-00001.safetensors");
    write_text(vshard, "precious too");
    /* the state points at them through ".." (passes a string-prefix test of dirpath) */
    char *cbs = meta_of(last, "volt.callbacks");
    CHECK(cbs != NULL, "checkpoint has callback state");
    if (!cbs) return;
    cJSON *o = cJSON_Parse(cbs), *mc = cJSON_GetObjectItem(o, "ModelCheckpoint");
    char evil[1400];
    snprintf(evil, sizeof evil, "%s/../../outside/victim.safetensors", ck);
    cJSON_ReplaceItemInObject(mc, "last_model_path", cJSON_CreateString(evil));
    cJSON_ReplaceItemInObject(mc, "best_model_path", cJSON_CreateString(evil));
    cJSON *arr = cJSON_CreateArray(), *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "path", evil);
    cJSON_AddNumberToObject(e, "score", 0);
    cJSON_AddItemToArray(arr, e);
    cJSON_ReplaceItemInObject(mc, "best_k_models", arr);
    char *js = cJSON_PrintUnformatted(o);
    path_join(crafted, sizeof crafted, g_tmp, "crafted.safetensors");
    /* resealed: the checksum is not what protects the files, the path checks are */
    rewrite(last, crafted, "volt.callbacks", js, true);
    char root2[1200];
    path_join(root2, sizeof root2, g_tmp, "crafted2");
    rm_rf(root2);
    volt_status st = fit(root2, ck, 12, crafted, NULL, false, NULL, false);
    CHECK(st == VOLT_OK, "resume from the crafted checkpoint trains on (the bad paths are dropped): %s", volt_status_str(st));
    CHECK(exists(victim), "the file outside the run is still there");
    CHECK(exists(vshard) && exists(vdir), "the folder outside the run is still there");
    /* the same with a default dirpath: nothing outside is touched either */
    char root3[1200];
    path_join(root3, sizeof root3, g_tmp, "crafted3");
    rm_rf(root3);
    CHECK_OK(fit(root3, NULL, 12, crafted, NULL, false, NULL, false));
    CHECK(exists(victim) && exists(vshard), "default dirpath: outside files kept");
    /* edited without resealing: the checksum catches it */
    char bad[1300];
    path_join(bad, sizeof bad, g_tmp, "unsealed.safetensors");
    rewrite(last, bad, "volt.callbacks", js, false);
    volt_trainer *t = NULL;
    st = fit(root3, NULL, 12, bad, NULL, false, &t, false);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(volt_trainer_errmsg(t), "metadata checksum mismatch"),
          "an edited callback state is caught: %s: %s", volt_status_str(st), volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    free(js);
    cJSON_Delete(o);
    free(cbs);
}

/* ---- metadata checksum: the loop state ------------------------------------------------------------ */
static void test_meta_checksum(void) {
    char root[1100], ck[1200], last[1300], bad[1300];
    path_join(root, sizeof root, g_tmp, "metacrc");
    rm_rf(root);
    path_join(ck, sizeof ck, root, "ck");
    CHECK_OK(fit(root, ck, 4, NULL, NULL, false, NULL, false));
    path_join(last, sizeof last, ck, "last.safetensors");
    path_join(bad, sizeof bad, g_tmp, "metacrc_bad.safetensors");
    rewrite(last, bad, "volt.global_step", "1", false);
    volt_trainer *t = NULL;
    volt_status st = fit(root, ck, 8, bad, NULL, false, &t, false);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(volt_trainer_errmsg(t), "metadata checksum mismatch") &&
          strstr(volt_trainer_errmsg(t), "metacrc_bad.safetensors"),
          "a changed global_step is caught: %s: %s", volt_status_str(st), volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    /* the checksum itself removed: a format-2 checkpoint must have it */
    rewrite(last, bad, "volt.meta_crc32", "", false);
    st = fit(root, ck, 8, bad, NULL, false, &t, false);
    CHECK(st == VOLT_ERR_CORRUPT, "an emptied checksum is caught: %s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
}

/* ---- 8. runs stay in their own folder ------------------------------------------------------------- */
typedef struct { char names[64][640]; long long mtime[64]; int n; } listing;

static void list_tree(const char *dir, const char *rel, listing *L) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[2048], r[600];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        snprintf(r, sizeof r, "%s/%s", rel, e->d_name);
        struct stat sb;
        if (stat(p, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) list_tree(p, r, L);
        else if (L->n < 64) {
            snprintf(L->names[L->n], sizeof L->names[0], "%s", r);
            L->mtime[L->n++] = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
        }
    }
    if (d) closedir(d);
}

static void test_run_isolation(void) {
    char a[1100], b[1100], last[1400];
    path_join(a, sizeof a, g_tmp, "runA");
    path_join(b, sizeof b, g_tmp, "runB");
    rm_rf(a);
    rm_rf(b);
    volt_trainer *t = NULL;
    CHECK_OK(fit(a, NULL, 4, NULL, NULL, false, &t, false));
    snprintf(last, sizeof last, "%s/checkpoints/last.safetensors", volt_trainer_log_dir(t) ? volt_trainer_log_dir(t) : "?");
    volt_trainer_destroy(t);
    CHECK(exists(last), "run A saved %s", last);
    listing before = { 0 }, after = { 0 };
    list_tree(a, "", &before);
    CHECK(before.n >= 3, "run A wrote its files (%d)", before.n);
    CHECK_OK(fit(b, NULL, 12, last, NULL, false, &t, false));
    const char *ld = volt_trainer_log_dir(t);
    char want[1200];
    snprintf(want, sizeof want, "%s/lightning_logs/version_0", b);
    CHECK(ld && !strcmp(ld, want), "the resumed run logs under its own root: %s (want %s)", ld ? ld : "(none)", want);
    char blast[1300];
    snprintf(blast, sizeof blast, "%s/checkpoints/last.safetensors", want);
    CHECK(exists(blast), "the resumed run saves under its own root");
    volt_trainer_destroy(t);
    list_tree(a, "", &after);
    CHECK(after.n == before.n, "run A's folder keeps its %d files (now %d)", before.n, after.n);
    for (int i = 0; i < before.n && i < after.n; i++)
        CHECK(!strcmp(before.names[i], after.names[i]) && before.mtime[i] == after.mtime[i],
              "run A's file %s untouched", before.names[i]);
    /* resuming in the same root: a new version, the old one untouched */
    CHECK_OK(fit(a, NULL, 12, "last", NULL, false, &t, false));
    snprintf(want, sizeof want, "%s/lightning_logs/version_1", a);
    CHECK(volt_trainer_log_dir(t) && !strcmp(volt_trainer_log_dir(t), want), "resume in the same root: %s",
          volt_trainer_log_dir(t) ? volt_trainer_log_dir(t) : "(none)");
    volt_trainer_destroy(t);
    CHECK(exists(last), "run A's last checkpoint is still there");
}

/* ---- run fingerprint ---------------------------------------------------------------------------- */
static void test_fingerprint(void) {
    char root[1100], ck[1200], last[1300];
    path_join(root, sizeof root, g_tmp, "fp");
    rm_rf(root);
    path_join(ck, sizeof ck, root, "ck");
    const char *fa = "{\"data\":\"imdb\",\"max_length\":128,\"model\":\"small\"}";
    const char *fb = "{\"data\":\"spam\",\"max_length\":128,\"model\":\"small\"}";
    CHECK_OK(fit(root, ck, 4, NULL, fa, false, NULL, false));
    path_join(last, sizeof last, ck, "last.safetensors");
    char *rec = meta_of(last, "volt.run_fingerprint");
    CHECK(rec && !strcmp(rec, fa), "the fingerprint is recorded: %s", rec ? rec : "(none)");
    free(rec);
    volt_trainer *t = NULL;
    char r2[1200];
    path_join(r2, sizeof r2, g_tmp, "fp2");
    volt_status st = fit(r2, NULL, 8, last, fb, false, &t, false);
    const char *msg = volt_trainer_errmsg(t);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(msg, "data: \"imdb\" -> \"spam\"") && strstr(msg, "resume_anyway") &&
          !strstr(msg, "max_length"), "another fingerprint: a clear error naming what differs: %s", msg);
    volt_trainer_destroy(t);
    CHECK_OK(fit(r2, NULL, 8, last, fb, true, NULL, false));   /* resume_anyway: a warning */
    CHECK_OK(fit(r2, NULL, 8, last, fa, false, NULL, false));  /* the same: fine */
    st = fit(r2, NULL, 8, last, "plain-b", false, &t, false);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "plain-b"), "non-JSON fingerprints: both shown: %s",
          volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
}

/* ---- 2. one unexpected tensor ---------------------------------------------------------------------- */
static void test_unexpected_tensor(void) {
    char root[1100], ck[1200], last[1300];
    path_join(root, sizeof root, g_tmp, "unexpected");
    rm_rf(root);
    path_join(ck, sizeof ck, root, "ck");
    CHECK_OK(fit(root, ck, 2, NULL, NULL, false, NULL, true));   /* the model with extra.weight */
    path_join(last, sizeof last, ck, "last.safetensors");
    volt_dataset *ds = rel_data();
    volt_loader *vl = rel_loader(ds, 16, false);
    volt_trainer *t = trainer(root, 2, NULL, false);
    rel_mlp m = { 0 };
    volt_status st = volt_trainer_validate(t, &rel_ops, &m, vl, last);
    CHECK(st == VOLT_ERR_SHAPE && strstr(volt_trainer_errmsg(t), "unexpected tensor 'extra.weight'"),
          "the error names the tensor: %s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(vl);
    volt_dataset_destroy(ds);
}

/* ---- 4. shard index: tiling and overflow --------------------------------------------------------- */
static volt_status load_index(const char *json, char *msg, size_t n) {
    char p[1200];
    path_join(p, sizeof p, g_tmp, "index.safetensors");
    volt_st_writer *w = NULL;
    char err[512];
    volt_st_writer_create(&w);
    volt_st_writer_meta(w, "volt.shards", json);
    CHECK(volt_st_writer_write(w, p, err, sizeof err) == VOLT_OK, "%s", err);
    volt_st_writer_destroy(w);
    volt_dataset *ds = rel_data();
    volt_loader *vl = rel_loader(ds, 16, false);
    volt_trainer *t = trainer(g_tmp, 2, NULL, false);
    rel_mlp m = { 0 };
    volt_status st = volt_trainer_validate(t, &rel_ops, &m, vl, p);
    snprintf(msg, n, "%s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(vl);
    volt_dataset_destroy(ds);
    return st;
}

static void test_shard_index(void) {
    char msg[1024], js[2048];
    static const char *const cases[][2] = {
        { "[[0,100],[110,160]]", "do not cover" },   /* a gap: [100,110) never written */
        { "[[0,100],[90,160]]", "do not cover" },    /* overlap */
        { "[[0,100],[0,100]]", "do not cover" },     /* the same slice twice, the rest missing */
        { "[[0,160],[0,0]]", NULL },                 /* tiles: fails later (no shard files) */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(js, sizeof js, "{\"version\":1,\"id\":\"x\",\"dir\":\"nowhere\",\"world\":2,\"units\":[{\"name\":\"fc1\","
                 "\"numel\":160,\"ranges\":%s}],\"params\":[],\"states\":[]}", cases[i][0]);
        volt_status st = load_index(js, msg, sizeof msg);
        if (cases[i][1]) CHECK(st == VOLT_ERR_CORRUPT && strstr(msg, cases[i][1]), "ranges %s: %s", cases[i][0], msg);
        else CHECK(st < 0 && !strstr(msg, "do not cover") && strstr(msg, "shard 0 of 2"), "ranges %s tile: %s", cases[i][0], msg);
    }
    /* a shape whose product overflows int64 to the declared numel (0) */
    snprintf(js, sizeof js, "{\"version\":1,\"id\":\"x\",\"dir\":\"nowhere\",\"world\":1,\"units\":[{\"name\":\"fc1\","
             "\"numel\":0,\"ranges\":[[0,0]]}],\"params\":[{\"name\":\"fc1.weight\",\"unit\":0,\"offset\":0,\"numel\":0,"
             "\"shape\":[4294967296,4294967296]}],\"states\":[]}");
    volt_status st = load_index(js, msg, sizeof msg);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(msg, "bad shape"), "overflowing shape: %s", msg);
}

/* ---- 4. IDX headers --------------------------------------------------------------------------------- */
static void write_bytes(const char *p, const unsigned char *b, size_t n) {
    FILE *f = fopen(p, "wb");
    if (f) { fwrite(b, 1, n, f); fclose(f); }
}

static void be(unsigned char *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

static void test_idx_headers(void) {
    char img[1200], lab[1200], err[512];
    path_join(img, sizeof img, g_tmp, "img.idx");
    path_join(lab, sizeof lab, g_tmp, "lab.idx");
    unsigned char h[35] = { 0 }, l[8] = { 0 };
    be(l, 0x801);
    /* 0 images of 2^32-1 x 2^32-1 pixels: H * W overflows */
    be(h, 0x803); be(h + 4, 0); be(h + 8, 0xffffffffu); be(h + 12, 0xffffffffu);
    write_bytes(img, h, 16);
    be(l + 4, 0);
    write_bytes(lab, l, 8);
    volt_dataset *ds = NULL;
    volt_status st = volt_idx_dataset(img, lab, 0.f, 1.f, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "implausible"), "0 x huge: %s: %s", volt_status_str(st), err);
    volt_dataset_destroy(ds);
    /* a 35-byte file declaring 64 GiB - 64 MiB: a truncation error, no allocation of that size */
    be(h + 4, 65535); be(h + 8, 1024); be(h + 12, 1024);
    write_bytes(img, h, sizeof h);
    be(l + 4, 65535);
    write_bytes(lab, l, 8);
    ds = NULL;
    st = volt_idx_dataset(img, lab, 0.f, 1.f, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "truncated") && strstr(err, "file has 35"), "35 bytes: %s: %s",
          volt_status_str(st), err);
    volt_dataset_destroy(ds);
    /* the same as gzip (its size says nothing about the data's): truncated too */
    gzFile g = gzopen(img, "wb");
    gzwrite(g, h, sizeof h);
    gzclose(g);
    ds = NULL;
    st = volt_idx_dataset(img, lab, 0.f, 1.f, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "truncated"), "gzip 35 bytes: %s: %s", volt_status_str(st), err);
    volt_dataset_destroy(ds);
}

/* ---- 4, 5. text readers ------------------------------------------------------------------------------ */
static void test_text_inputs(void) {
    char p[1200], err[512];
    path_join(p, sizeof p, g_tmp, "labels.tsv");
    write_text(p, "good\t1\nhuge\t2147483647\n");
    volt_corpus *c = NULL;
    volt_status st = volt_corpus_load_tsv(p, &c, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "2147483647") && strstr(err, "line 2"), "label 2^31-1: %s: %s",
          volt_status_str(st), err);
    volt_corpus_destroy(c);
    write_text(p, "good\t1\nbig\t2147483646\n");
    c = NULL;
    CHECK_OK(volt_corpus_load_tsv(p, &c, err, sizeof err));
    CHECK(c && volt_corpus_num_classes(c) == 2147483647, "the largest label: %d classes", c ? volt_corpus_num_classes(c) : -1);
    volt_corpus_destroy(c);
    c = NULL;
    st = volt_corpus_load_csv(g_tmp, &c, err, sizeof err);
    CHECK(st == VOLT_ERR_IO && strstr(err, "is a directory"), "csv: a directory: %s", err);
    /* NUL bytes in a message or HTML: the output is a C string of the stated length (found
     * by fuzz_mail; tests/fuzz/regressions/mail/) */
    static const char mail[] = "Subject: x\n\nhello\0world <b>\0</b>";
    static const char html[] = "<p>a\0b</p>\0c";
    char *out = NULL;
    size_t n = 0;
    CHECK_OK(volt_text_mail_body(mail, sizeof mail - 1, &out, &n));
    CHECK(out && strlen(out) == n && !strcmp(out, "helloworld <b></b>"), "mail with NUL: %zu bytes, '%s'", n, out ? out : "");
    free(out);
    out = NULL;
    CHECK_OK(volt_text_html_strip(html, sizeof html - 1, &out, &n));
    CHECK(out && strlen(out) == n && !strcmp(out, "ab c"), "html with NUL: %zu bytes, '%s'", n, out ? out : "");
    free(out);
    char eb[512] = "";
    volt_tokenizer_config tc;
    volt_tokenizer_config_init(&tc);
    tc.errbuf = eb;
    tc.errbuf_size = sizeof eb;
    volt_tokenizer *tok = NULL;
    st = volt_tokenizer_load(&tc, g_tmp, &tok);
    CHECK(st == VOLT_ERR_IO && strstr(eb, "is a directory"), "vocab: a directory: %s", eb);
    volt_tokenizer_destroy(tok);
}

/* A FIFO where a review or a message is expected: an error, not a reader blocked for ever
 * (an alarm turns a hang into a failure). Found by fuzz_imdb's FIFO records. */
static void on_alarm(int sig) {
    (void)sig;
    static const char m[] = "FAIL: a reader blocked on a FIFO\n";
    if (write(2, m, sizeof m - 1)) {}
    _exit(1);
}

static void test_fifo_inputs(void) {
    char root[1100], p[1300], err[512];
    path_join(root, sizeof root, g_tmp, "fifo_imdb");
    rm_rf(root);
    static const char *const dirs[] = { "", "/train", "/test", "/train/pos", "/train/neg", "/test/pos", "/test/neg" };
    for (int i = 0; i < 7; i++) { snprintf(p, sizeof p, "%s%s", root, dirs[i]); mkdir(p, 0755); }
    snprintf(p, sizeof p, "%s/train/pos/0_9.txt", root);
    write_text(p, "a fine film");
    snprintf(p, sizeof p, "%s/train/neg/1_2.txt", root);
    mkfifo(p, 0644);
    signal(SIGALRM, on_alarm);
    alarm(20);
    volt_corpus *c = NULL;
    volt_status st = volt_corpus_load_imdb(root, &c, err, sizeof err);
    CHECK(st == VOLT_ERR_IO && strstr(err, "1_2.txt") && strstr(err, "not a regular file"), "imdb with a FIFO: %s", err);
    volt_corpus_destroy(c);
    path_join(root, sizeof root, g_tmp, "fifo_spam");
    rm_rf(root);
    mkdir(root, 0755);
    snprintf(p, sizeof p, "%s/spam-1", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/spam-1/00001.abc", root);
    write_text(p, "Subject: hi\n\nbuy now\n");
    snprintf(p, sizeof p, "%s/spam-1/00002.def", root);
    mkfifo(p, 0644);
    c = NULL;
    st = volt_corpus_load_spam_assassin(root, &c, err, sizeof err);
    CHECK(st < 0 && strstr(err, "00002.def"), "spam folder with a FIFO: %s: %s", volt_status_str(st), err);
    volt_corpus_destroy(c);
    /* a FIFO in place of a weights file, an IDX file, a vocab, a Hugging Face config: refused
     * at the open (it used to wait there for a writer) */
    path_join(root, sizeof root, g_tmp, "fifo_files");
    rm_rf(root);
    mkdir(root, 0755);
    snprintf(p, sizeof p, "%s/w.safetensors", root);
    mkfifo(p, 0644);
    volt_st_file *f = NULL;
    st = volt_st_open(p, &f, err, sizeof err);
    CHECK(st == VOLT_ERR_IO && strstr(err, "not a regular file") && !f, "safetensors FIFO: %s", err);
    volt_st_close(f);
    snprintf(p, sizeof p, "%s/images-idx3-ubyte", root);
    mkfifo(p, 0644);
    volt_dataset *ds = NULL;
    st = volt_idx_dataset(p, p, 0.f, 1.f, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_IO && strstr(err, "not a regular file") && !ds, "IDX FIFO: %s", err);
    volt_dataset_destroy(ds);
    snprintf(p, sizeof p, "%s/vocab.txt", root);
    mkfifo(p, 0644);
    volt_tokenizer_config tc;
    volt_tokenizer_config_init(&tc);
    tc.errbuf = err;
    tc.errbuf_size = sizeof err;
    volt_tokenizer *tok = NULL;
    st = volt_tokenizer_load(&tc, p, &tok);
    CHECK(st == VOLT_ERR_IO && strstr(err, "not a regular file") && !tok, "vocab FIFO: %s", err);
    volt_tokenizer_destroy(tok);
    snprintf(p, sizeof p, "%s/config.json", root);
    mkfifo(p, 0644);
    volt_distilbert_config dc;
    volt_distilbert_config_init(&dc);
    st = volt_distilbert_config_from_hf(&dc, root, NULL, err, sizeof err);
    CHECK(st < 0 && strstr(err, "config.json") && strstr(err, "not a regular file"), "config.json FIFO: %s: %s",
          volt_status_str(st), err);
    remove(p);
    write_text(p, "{\"model_type\": \"distilbert\"}");
    snprintf(p, sizeof p, "%s/tokenizer_config.json", root);
    mkfifo(p, 0644);
    bool lower = false;
    st = volt_distilbert_config_from_hf(&dc, root, &lower, err, sizeof err);
    CHECK(st < 0 && strstr(err, "tokenizer_config.json") && strstr(err, "not a regular file"),
          "tokenizer_config.json FIFO: %s: %s", volt_status_str(st), err);
    alarm(0);
}

/* A Hugging Face config.json whose values pass as doubles but not as the model's: a dropout that
 * rounds to 1.0f, a pad_token_id outside the vocabulary — refused naming the key, not handed to
 * volt_distilbert_create for a bare INVALID_ARG. */
static void test_hf_config_values(void) {
    char root[1100], p[1300], err[512];
    path_join(root, sizeof root, g_tmp, "hf_values");
    rm_rf(root);
    mkdir(root, 0755);
    snprintf(p, sizeof p, "%s/config.json", root);
    volt_distilbert_config dc;
    volt_distilbert_config_init(&dc);
    write_text(p, "{\"model_type\": \"distilbert\", \"dropout\": 0.99999999}");
    volt_status st = volt_distilbert_config_from_hf(&dc, root, NULL, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "\"dropout\""), "dropout 0.99999999: %s: %s", volt_status_str(st), err);
    volt_distilbert_config_init(&dc);
    write_text(p, "{\"vocab_size\": 50, \"pad_token_id\": 50}");
    st = volt_distilbert_config_from_hf(&dc, root, NULL, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, "pad_token_id 50") && strstr(err, "vocab_size 50"), "pad outside the vocab: %s: %s",
          volt_status_str(st), err);
    volt_distilbert_config_init(&dc);
    write_text(p, "{\"vocab_size\": 50, \"pad_token_id\": 49, \"dropout\": 0.9999}");
    CHECK_OK(volt_distilbert_config_from_hf(&dc, root, NULL, err, sizeof err));
    void *m = NULL;
    CHECK(dc.vocab_size == 50 && dc.pad_token_id == 49 && volt_distilbert_create(&dc, &m) == VOLT_OK, "a config at the edges loads: %s", err);
    volt_distilbert_destroy(m);
    /* volt_distilbert_config_to_hf writes what from_hf reads back: the architecture, the
     * tokenizer's casing, the vocab byte for byte; files there are replaced */
    volt_distilbert_config a;
    volt_distilbert_config_init(&a);
    CHECK_OK(volt_distilbert_preset(&a, "tiny"));
    a.n_classes = 3;
    a.dropout = 0.15f;
    a.attention_dropout = 0.f;
    a.pad_token_id = 5;
    a.initializer_range = 0.03f;
    char vocab[1300], out[1100];
    snprintf(vocab, sizeof vocab, "%s/src_vocab.txt", root);
    write_text(vocab, "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\n");
    path_join(out, sizeof out, g_tmp, "hf_export");
    rm_rf(out);
    CHECK(volt_distilbert_config_to_hf(&a, out, vocab, false, err, sizeof err) == VOLT_ERR_IO && strstr(err, "hf_export"),
          "a folder that does not exist: %s", err);
    mkdir(out, 0755);
    snprintf(p, sizeof p, "%s/config.json", out);
    write_text(p, "{\"stale\": true}");
    CHECK_OK(volt_distilbert_config_to_hf(&a, out, vocab, false, err, sizeof err));
    volt_distilbert_config b;
    volt_distilbert_config_init(&b);
    bool lower = true;
    CHECK_OK(volt_distilbert_config_from_hf(&b, out, &lower, err, sizeof err));
    CHECK(b.vocab_size == a.vocab_size && b.max_position == a.max_position && b.dim == a.dim && b.n_layers == a.n_layers &&
          b.n_heads == a.n_heads && b.hidden_dim == a.hidden_dim && b.dropout == a.dropout &&
          b.attention_dropout == a.attention_dropout && b.seq_classif_dropout == a.seq_classif_dropout &&
          b.pad_token_id == 5 && b.initializer_range == a.initializer_range && !lower,
          "round trip: vocab %lld dim %lld layers %d heads %d hidden %lld dropout %g pad %lld init %g lower %d", (long long)b.vocab_size,
          (long long)b.dim, b.n_layers, b.n_heads, (long long)b.hidden_dim, (double)b.dropout, (long long)b.pad_token_id,
          (double)b.initializer_range, lower);
    size_t n1 = 0, n2 = 0, nc = 0;
    unsigned char *v1 = vtest_slurp(vocab, &n1), *cj = vtest_slurp(p, &nc);
    snprintf(p, sizeof p, "%s/vocab.txt", out);
    unsigned char *v2 = vtest_slurp(p, &n2);
    CHECK(v1 && v2 && n1 == n2 && !memcmp(v1, v2, n1), "vocab.txt copied");
    CHECK(cj && !strstr((char *)cj, "stale") && strstr((char *)cj, "\"DistilBertForSequenceClassification\"") &&
          strstr((char *)cj, "\"LABEL_2\"") && !strstr((char *)cj, "LABEL_3") && strstr((char *)cj, "\"dropout\":\t0.15,"),
          "config.json: %s", cj ? (char *)cj : "(none)");
    free(v1); free(v2); free(cj);
    a.dim = 30;   /* not a multiple of n_heads: nothing written for a model volt would refuse */
    CHECK(volt_distilbert_config_to_hf(&a, out, NULL, true, err, sizeof err) == VOLT_ERR_INVALID_ARG, "a bad config: %s", err);
    a.dim = 32;   /* a model volt makes, but a config.json would not be read back with */
    a.initializer_range = 0.f;
    CHECK(volt_distilbert_config_to_hf(&a, out, NULL, true, err, sizeof err) == VOLT_ERR_INVALID_ARG &&
          strstr(err, "initializer_range in (0, 10)"), "initializer_range 0: %s", err);
}

/* The strict variant (tests/strict_ckpt.cmake) must really run there: the parameters live on
 * the accelerator VOLT_ACCELERATOR names. */
static void test_device_used(void) {
    char root[1200];
    path_join(root, sizeof root, g_tmp, "device");
    volt_trainer *t = NULL;
    CHECK_OK(fit(root, NULL, 2, NULL, NULL, false, &t, false));
    const volt_tensor *p = t ? volt_params_at(volt_trainer_params(t), 0) : NULL;
    const char *want = getenv("VOLT_ACCELERATOR"), *have = p && p->device ? p->device->be->name : "?";
    CHECK(!want || !*want || !strcmp(want, have), "parameters on '%s', VOLT_ACCELERATOR is '%s'", have, want);
    printf("parameters live on the '%s' device\n", have);
    volt_trainer_destroy(t);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "%s", vtest_tmpdir());
    char *rp = realpath(g_tmp, NULL);
    if (rp) { snprintf(g_tmp, sizeof g_tmp, "%s", rp); free(rp); }
    test_device_used();
    test_unexpected_tensor();
    test_meta_checksum();
    test_crafted_paths();
    test_run_isolation();
    test_fingerprint();
    test_shard_index();
    test_idx_headers();
    test_text_inputs();
    test_fifo_inputs();
    test_hf_config_values();
    return vtest_finish();
}
