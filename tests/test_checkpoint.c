/* Checkpoints through device copies (docs/CHECKPOINTS.md "Through copies"): save, load,
 * exact resume, export_full and damaged files, with parameters, grads and optimizer states
 * in device memory. Under VOLT_ACCELERATOR=cpu-strict (tests/strict_ckpt.cmake) that memory
 * faults on any host dereference, so these runs prove the checkpoint code only touches it by
 * copies; the test checks that the parameters really live on the accelerator it names.
 *
 *   test_checkpoint                          local checks (any accelerator)
 *   mpirun -np 2 test_checkpoint shard_save PATH    fsdp: save sharded at step 3, export_full, stop
 *   test_checkpoint shard_load PATH          single: load the shards (resharding), compare with
 *                                            the export and the shards' optimizer slices
 *
 * On "cpu" (no VOLT_ACCELERATOR) it also wraps the backend in a counting one: a save copies
 * each unit's values and each optimizer state to the host exactly once (one D2H copy per
 * unit, not per tensor), and every save, load and export allocates one staging area,
 * whatever the number of parameters. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#include "volt/precision.h"
#include "volt/safetensors.h"
#include "core/device.h"
#include "trainer/checkpoint_internal.h"
#include "core/safetensors_internal.h"   /* volt__st_read_peak, the check hook, a tensor's file offset */
#ifdef VOLT_HAVE_MPI
#include "trainer/trainer_internal.h"
#include "strategies/parallel/parallel.h"
#endif

enum { IN = 7, NC = 3, NS = 64, BS = 8 };

/* ---- a counting backend: the cpu table with copies counted ------------------------------ */
static volt_backend g_count;
static _Atomic long g_d2h, g_h2d;
static void count_copy(volt_device *d, void *dst, const void *src, size_t n, volt_copy_kind k) {
    if (k == VOLT_COPY_D2H) atomic_fetch_add(&g_d2h, 1);
    if (k == VOLT_COPY_H2D || k == VOLT_COPY_H2D_SNAPSHOT) atomic_fetch_add(&g_h2d, 1);
    volt__backend_find("cpu")->copy(d, dst, src, n, k);
}

/* ---- the model: `layers` linear layers of width W, one unit each --------------------------- */
typedef struct net {
    int layers, width;
    volt_tensor *w[16], *b[16];
} net;

static volt_status net_setup(void *self, volt_params *ps) {
    net *m = self;
    char name[64];
    for (int l = 0; l < m->layers; l++) {
        const int64_t in = l ? m->width : IN, out = l == m->layers - 1 ? NC : m->width;
        snprintf(name, sizeof name, "l%d", l);
        VOLT_TRY(volt_params_unit(ps, name));
        snprintf(name, sizeof name, "l%d.weight", l);
        VOLT_TRY(volt_param_new(ps, name, VOLT_SHAPE(out, in), VOLT_INIT_TORCH_LINEAR, &m->w[l]));
        snprintf(name, sizeof name, "l%d.bias", l);
        VOLT_TRY(volt_param_new(ps, name, VOLT_SHAPE(out), VOLT_INIT_UNIFORM(-0.1f, 0.1f), &m->b[l]));
    }
    return VOLT_OK;
}

static volt_status net_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    net *m = self;
    volt_tensor *h = volt_batch_x(b);
    for (int l = 0; l < m->layers; l++) {
        h = volt_linear(s, h, m->w[l], m->b[l]);
        if (l < m->layers - 1) h = volt_relu(s, h);
    }
    return volt_step_set_loss(s, volt_cross_entropy(s, h, volt_batch_y(b)));
}

static volt_status net_opt(void *self, volt_optim_setup *o) {
    o->optimizer.kind = VOLT_OPTIM_ADAMW;
    o->optimizer.lr = 1e-2f;
    return VOLT_OK;
}

static const volt_module_ops net_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "ckpt_net", .setup = net_setup,
    .configure_optimizers = net_opt, .training_step = net_train,
};

static float g_X[NS * IN];
static int64_t g_Y[NS];

static volt_dataset *make_data(void) {
    for (int i = 0; i < NS; i++) {
        g_Y[i] = (i * 5 + i / 3) % NC;
        for (int k = 0; k < IN; k++) g_X[i * IN + k] = sinf(0.41f * (float)(i * IN + k)) + (k % NC == g_Y[i] ? 0.7f : 0.f);
    }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *d[2] = { g_X, g_Y };
    volt_dataset *ds = NULL;
    CHECK_OK(volt_dataset_from_arrays(2, f, d, NS, &ds));
    return ds;
}

static volt_trainer *make_trainer(const char *precision, const char *optim_dtype, const char *strategy, int64_t max_steps) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_epochs = 3;
    c.max_steps = max_steps;
    c.enable_progress_bar = false;
    c.num_sanity_val_steps = 0;
    c.enable_checkpointing = false;   /* only the saves the test makes */
    c.enable_logger = false;
    c.enable_model_summary = false;
    c.default_root_dir = vtest_tmpdir();
    c.seed = 11;
    c.precision = precision;
    c.optimizer_dtype = optim_dtype;
    if (strategy) c.strategy = strategy;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_OK, "trainer_create: %s", t ? volt_trainer_errmsg(t) : volt_status_str(st));
    return t;
}

/* Save at batch `at` (when set) and stop there. */
typedef struct saver { const char *path; int64_t at; bool export_too; } saver;
static volt_status save_stop(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    saver *s = self;
    if (i != s->at) return VOLT_OK;
    VOLT_TRY(volt_trainer_save_checkpoint(t, s->path));
    if (s->export_too) {
        char e[4200];
        snprintf(e, sizeof e, "%s.export", s->path);
        VOLT_TRY(volt_trainer_export_full(t, e));
    }
    return VOLT_STOP;
}
static const volt_callback_ops saver_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Saver",
                                             .on_train_batch_end = save_stop };

/* Every parameter as f32, concatenated, read by device copies (caller frees). */
static float *weights(volt_trainer *t, int64_t *n) {
    volt_params *ps = volt_trainer_params(t);
    *n = volt_params_numel(ps);
    float *w = calloc((size_t)(*n ? *n : 1), sizeof(float)), *d = w;
    for (int i = 0; w && i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        void *h = malloc(volt_tensor_bytes(p) + 1);
        CHECK_OK(volt_tensor_to_host(p, h));
        volt_convert(d, VOLT_F32, h, p->dtype, volt_tensor_numel(p));
        free(h);
        d += volt_tensor_numel(p);
    }
    return w;
}

/* The accelerator asked for (VOLT_ACCELERATOR) is where the parameters live. */
static void check_device(volt_trainer *t) {
    const char *want = getenv("VOLT_ACCELERATOR");
    volt_params *ps = volt_trainer_params(t);
    const volt_tensor *p = ps ? volt_params_at(ps, 0) : NULL;
    const char *have = p && p->device ? p->device->be->name : "?";
    CHECK(!want || !*want || !strcmp(want, have), "parameters on '%s', VOLT_ACCELERATOR is '%s'", have, want);
    static bool said;
    if (!said) { printf("parameters live on the '%s' device\n", have); said = true; }
}

/* ---- exact resume: stop at a checkpoint mid-epoch, resume in a fresh trainer ---------------- */
static void test_resume(volt_dataset *ds, const char *precision, const char *optim_dtype) {
    char path[1024];
    snprintf(path, sizeof path, "%s/resume_%s_%s.safetensors", vtest_tmpdir(), precision, optim_dtype ? optim_dtype : "auto");
    const int64_t steps = 14;
    net ma = { .layers = 3, .width = 10 }, mb = ma, mc = ma;
    volt_trainer *ta = make_trainer(precision, optim_dtype, NULL, steps);
    volt_loader *l = vtest_loader(ds, BS, true);
    CHECK_OK(volt_trainer_fit(ta, &net_ops, &ma, l, NULL, NULL));
    check_device(ta);
    int64_t na, nc;
    float *wa = weights(ta, &na);
    volt_trainer *tb = make_trainer(precision, optim_dtype, NULL, steps);
    saver sv = { path, 3, false };   /* epoch 0, batch 3 of 8: mid-epoch */
    CHECK_OK(volt_trainer_add_callback(tb, &saver_ops, &sv));
    CHECK_OK(volt_trainer_fit(tb, &net_ops, &mb, l, NULL, NULL));
    volt_trainer *tc = make_trainer(precision, optim_dtype, NULL, steps);
    volt_status st = volt_trainer_fit(tc, &net_ops, &mc, l, NULL, "");   /* names no file: an error, not a fresh fit */
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(tc), "ckpt_path is empty") && volt_trainer_global_step(tc) == 0,
          "fit with ckpt_path \"\": %s", volt_trainer_errmsg(tc));
    st = volt_trainer_fit(tc, &net_ops, &mc, l, NULL, path);
    CHECK(st == VOLT_OK, "%s resume: %s", precision, volt_trainer_errmsg(tc));
    float *wc = weights(tc, &nc);
    CHECK(na == nc && !memcmp(wa, wc, sizeof(float) * (size_t)na), "%s/%s: resumed weights differ from the straight run",
          precision, optim_dtype ? optim_dtype : "auto");
    /* the file holds the weights at the save as f32 and every optimizer state */
    volt_st_file *f = NULL;
    char err[512];
    CHECK_OK(volt_st_open(path, &f, err, sizeof err));
    int states = 0;
    for (int i = 0; f && i < volt_st_count(f); i++) states += !strncmp(volt_st_name(f, i), "optimizer.", 10);
    CHECK(states == 2 * volt_params_count(volt_trainer_params(tb)), "%d optimizer state tensors (AdamW: 2 per parameter)", states);
    int64_t nb;
    float *wb = weights(tb, &nb);   /* tb stopped right after the save */
    int same = 0;
    for (int i = 0, at = 0; f && i < volt_params_count(volt_trainer_params(tb)); i++) {
        volt_tensor *p = volt_params_at(volt_trainer_params(tb), i);
        volt_st_info info;
        same += volt_st_find(f, p->name, &info) == VOLT_OK && info.dtype == VOLT_F32 &&
                !memcmp(info.data, wb + at, info.nbytes);
        at += (int)volt_tensor_numel(p);
    }
    CHECK(same == volt_params_count(volt_trainer_params(tb)), "%s: %d parameters in the file equal the model's", precision, same);
    printf("resume %-10s states %-5s: bitwise equal to the straight run (%lld values)\n", precision,
           optim_dtype ? optim_dtype : "auto", (long long)na);
    volt_st_close(f);
    free(wa);
    free(wb);
    free(wc);
    volt_trainer_destroy(ta);
    volt_trainer_destroy(tb);
    volt_trainer_destroy(tc);
    volt_loader_destroy(l);
}

/* ---- export_full: the weights alone, bitwise ------------------------------------------------- */
static void test_export(volt_dataset *ds, const char *precision) {
    char path[1024];
    snprintf(path, sizeof path, "%s/export_%s.safetensors", vtest_tmpdir(), precision);
    net m = { .layers = 4, .width = 9 };
    volt_trainer *t = make_trainer(precision, NULL, NULL, 5);
    volt_loader *l = vtest_loader(ds, BS, true);
    CHECK_OK(volt_trainer_fit(t, &net_ops, &m, l, NULL, NULL));
    CHECK_OK(volt_trainer_export_full(t, path));
    int64_t n;
    float *w = weights(t, &n);
    volt_st_file *f = NULL;
    char err[512];
    CHECK(volt_st_open(path, &f, err, sizeof err) == VOLT_OK && volt_st_verify_all(f, err, sizeof err) == VOLT_OK, "export: %s", err);
    /* "pt": Hugging Face's from_pretrained refuses any other format; crcs still checked above */
    CHECK(f && volt_st_meta(f, "format") && !strcmp(volt_st_meta(f, "format"), "pt"), "export format: %s",
          f && volt_st_meta(f, "format") ? volt_st_meta(f, "format") : "none");
    volt_params *ps = volt_trainer_params(t);
    int same = 0;
    for (int i = 0, at = 0; f && i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        volt_st_info info;
        same += volt_st_find(f, p->name, &info) == VOLT_OK && info.dtype == VOLT_F32 && !memcmp(info.data, w + at, info.nbytes);
        at += (int)volt_tensor_numel(p);
    }
    CHECK(f && same == volt_params_count(ps) && volt_st_count(f) == same, "export %s: %d of %d parameters bitwise equal",
          precision, same, volt_params_count(ps));
    volt_st_close(f);
    free(w);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

/* ---- damaged files: a clear error, the model untouched --------------------------------------- */
static void test_damaged(volt_dataset *ds) {
    char path[1024], bad[1100];
    snprintf(path, sizeof path, "%s/damaged.safetensors", vtest_tmpdir());
    net m = { .layers = 2, .width = 8 };
    volt_trainer *t = make_trainer("32-true", NULL, NULL, 4);
    volt_loader *l = vtest_loader(ds, BS, true);
    CHECK_OK(volt_trainer_fit(t, &net_ops, &m, l, NULL, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(t, path));
    /* a parameter's shape from the header alone (volt_checkpoint_param_shape) */
    volt_params *ps = volt_trainer_params(t);
    for (int i = 0; i < volt_params_count(ps); i++) {
        volt_shape sh = { 0 };
        char e[1400] = "";
        CHECK(volt_checkpoint_param_shape(path, volt_params_at(ps, i)->name, &sh, e, sizeof e) == VOLT_OK &&
              volt_shape_eq(sh, volt_params_at(ps, i)->shape), "param shape of %s: %s", volt_params_at(ps, i)->name, e);
    }
    FILE *fp = fopen(path, "rb");
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    rewind(fp);
    unsigned char *bytes = malloc((size_t)size);
    CHECK(fread(bytes, 1, (size_t)size, fp) == (size_t)size, "read %s", path);
    fclose(fp);
    for (int round = 0; round < 2; round++) {
        snprintf(bad, sizeof bad, "%s.%s", path, round ? "flipped" : "truncated");
        FILE *o = fopen(bad, "wb");
        if (round) bytes[size - 9] ^= 0x10;   /* a byte of the last tensor's data */
        fwrite(bytes, 1, round ? (size_t)size : (size_t)size / 2, o);
        fclose(o);
        net m2 = { .layers = 2, .width = 8 };
        volt_trainer *t2 = make_trainer("32-true", NULL, NULL, 8);
        volt_shape sh;
        char e[1400] = "";
        volt_status sst = volt_checkpoint_param_shape(bad, volt_params_at(ps, 0)->name, &sh, e, sizeof e);
        CHECK(round ? sst == VOLT_OK : sst == VOLT_ERR_CORRUPT && strstr(e, bad), "param shape of a %s file: %s: %s",
              round ? "flipped" : "truncated", volt_status_str(sst), e);   /* the header alone: data flips are the load's */
        volt_status st = volt_trainer_fit(t2, &net_ops, &m2, l, NULL, bad);
        const char *msg = volt_trainer_errmsg(t2);
        CHECK(st == VOLT_ERR_CORRUPT && strstr(msg, bad) && strstr(msg, round ? "crc mismatch" : "truncated"),
              "%s checkpoint: %s: %s", round ? "flipped" : "truncated", volt_status_str(st), msg);
        printf("%s checkpoint: %s\n", round ? "flipped" : "truncated", msg);
        volt_trainer_destroy(t2);
    }
    free(bytes);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

/* ---- one staging area per call, one D2H copy per unit (counting backend, "cpu") ------------- */
static void test_copies(volt_dataset *ds) {
    const int layers[2] = { 2, 7 };
    uint64_t stagings[2][3];
    for (int r = 0; r < 2; r++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/count_%d.safetensors", vtest_tmpdir(), layers[r]);
        net m = { .layers = layers[r], .width = 6 };
        volt_trainer *t = make_trainer("bf16-true", "bf16", NULL, 3);   /* 16-bit values and states: converted on the host */
        volt_loader *l = vtest_loader(ds, BS, true);
        CHECK_OK(volt_trainer_fit(t, &net_ops, &m, l, NULL, NULL));
        CHECK(!strcmp(volt_params_at(volt_trainer_params(t), 0)->device->be->name, "cpu-count"), "the counting device is in use");
        uint64_t s0 = volt__ckpt_stagings();
        long d0 = atomic_load(&g_d2h);
        CHECK_OK(volt_trainer_save_checkpoint(t, path));
        const long d2h = atomic_load(&g_d2h) - d0;
        CHECK(d2h == 3L * layers[r], "save with %d units: %ld D2H copies (want one per unit for the values and one per "
              "unit for each of the 2 states: %d)", layers[r], d2h, 3 * layers[r]);
        stagings[r][0] = volt__ckpt_stagings() - s0;
        s0 = volt__ckpt_stagings();
        d0 = atomic_load(&g_d2h);
        char exp[1100];
        snprintf(exp, sizeof exp, "%s.export", path);
        CHECK_OK(volt_trainer_export_full(t, exp));
        CHECK(atomic_load(&g_d2h) - d0 == layers[r], "export with %d units: %ld D2H copies", layers[r], atomic_load(&g_d2h) - d0);
        stagings[r][1] = volt__ckpt_stagings() - s0;
        net m2 = { .layers = layers[r], .width = 6 };
        volt_trainer *t2 = make_trainer("bf16-true", "bf16", NULL, 3);
        s0 = volt__ckpt_stagings();
        CHECK_OK(volt_trainer_fit(t2, &net_ops, &m2, l, NULL, path));   /* loads, nothing left to train */
        stagings[r][2] = volt__ckpt_stagings() - s0;
        int64_t n1, n2;
        float *w1 = weights(t, &n1), *w2 = weights(t2, &n2);
        CHECK(n1 == n2 && !memcmp(w1, w2, sizeof(float) * (size_t)n1), "bf16-true: loaded weights equal the exported ones");
        free(w1);
        free(w2);
        volt_trainer_destroy(t);
        volt_trainer_destroy(t2);
        volt_loader_destroy(l);
    }
    for (int k = 0; k < 3; k++)
        CHECK(stagings[0][k] == 1 && stagings[1][k] == 1, "%s: staging areas allocated with 2 units: %llu, with 7: %llu (want 1)",
              k == 0 ? "save" : k == 1 ? "export" : "load", (unsigned long long)stagings[0][k], (unsigned long long)stagings[1][k]);
    printf("save/export/load: one staging area each, one D2H copy per unit and buffer (2 and 7 units)\n");
}

/* ---- sharded save (fsdp, 2 ranks) and loading it on one rank ---------------------------------- */
static void shard_save(const char *path) {
    volt_dataset *ds = make_data();
    net m = { .layers = 3, .width = 10 };
    volt_trainer *t = make_trainer("32-true", NULL, "fsdp", 20);
    const int world = t ? volt_trainer_world_size(t) : 1;
    if (world < 2) VTEST_SKIP("shard_save needs 2 ranks (mpirun -np 2)");
    volt_loader *l = vtest_loader(ds, BS / world, true);
    if (volt_trainer_rank(t) == 0) volt_checkpoint_remove(path);
    saver sv = { path, 5, true };
    CHECK_OK(volt_trainer_add_callback(t, &saver_ops, &sv));
    volt_status st = volt_trainer_fit(t, &net_ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_OK, "fsdp fit with save: %s", volt_trainer_errmsg(t));
    check_device(t);
#ifdef VOLT_HAVE_MPI
    /* the comm that served the save ("comm nccl on device cuda" on the simulated GPUs:
     * tests/gpu_sim_nccl.cmake greps it) */
    const volt_comm *c = t ? volt__dist_comm(t->strategy) : NULL;
    CHECK(c && c->dev, "fsdp runs over a comm with a device");
    if (c && c->dev && volt_trainer_rank(t) == 0) printf("comm %s on device %s\n", c->ops->name, c->dev->be->name);
#endif
    if (volt_trainer_rank(t) == 0) {
        volt_st_file *f = NULL;
        char err[512];
        CHECK(volt_st_open(path, &f, err, sizeof err) == VOLT_OK && volt_st_meta(f, "volt.shards"), "a sharded index at %s: %s", path, err);
        volt_st_close(f);
        printf("fsdp on %d ranks: sharded checkpoint and export at step %lld\n", world, (long long)volt_trainer_global_step(t));
    }
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

/* ---- damaged shards: a clear error naming the shard and tensor, the model untouched; a shard
 * changed between the check and the reads fails the load and drops the half-replaced model --- */
/* Copy src to dst, all of it, or cut `cut` bytes short. */
static bool copy_file(const char *src, const char *dst, long cut) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    bool ok = in && out;
    if (ok) {
        fseek(in, 0, SEEK_END);
        long left = ftell(in) - cut;
        rewind(in);
        char buf[1 << 14];
        for (size_t k; ok && left > 0 && (k = fread(buf, 1, sizeof buf < (size_t)left ? sizeof buf : (size_t)left, in)) > 0;
             left -= (long)k)
            ok = fwrite(buf, 1, k, out) == k;
    }
    if (in) fclose(in);
    if (out) ok &= fclose(out) == 0;
    CHECK(ok, "copy %s -> %s", src, dst);
    return ok;
}

/* The file offset of the middle byte of tensor `name`'s data. */
static long mid_byte(const char *file, const char *name) {
    volt_st_file *f = NULL;
    volt_st_info info;
    char err[512];
    long at = -1;
    if (volt_st_open(file, &f, err, sizeof err) == VOLT_OK && volt_st_find(f, name, &info) == VOLT_OK)
        at = (long)(f->base + (uint64_t)((const unsigned char *)info.data - f->data) + info.nbytes / 2);
    volt_st_close(f);
    CHECK(at > 0, "tensor '%s' in %s", name, file);
    return at;
}

static void flip_byte(const char *file, long at) {
    FILE *fp = fopen(file, "r+b");
    unsigned char c = 0;
    bool ok = fp && fseek(fp, at, SEEK_SET) == 0 && fread(&c, 1, 1, fp) == 1 && fseek(fp, at, SEEK_SET) == 0;
    c ^= 0x5a;
    ok = ok && fwrite(&c, 1, 1, fp) == 1;
    if (fp) ok &= fclose(fp) == 0;
    CHECK(ok, "flip a byte of %s", file);
}

/* The check hook: when the last shard has been checked, a byte of the first shard changes. */
static char g_hook_when[2100], g_hook_file[2100];
static long g_hook_at;
static int g_hook_flips;
static void flip_after_check(const char *path, void *ctx) {
    (void)ctx;
    if (strcmp(path, g_hook_when)) return;
    flip_byte(g_hook_file, g_hook_at);
    g_hook_flips++;
}

static void shard_damage(volt_trainer *t, volt_loader *l, const char *path, const char *dname, net *m) {
    char root[1024], idx[1100], sdir[1700], shard[2][2100], orig[2][2100];
    snprintf(root, sizeof root, "%s.damage", path);   /* per fixture: the strict variant shares the tmp folder */
    vtest_fresh_dir(root);
    snprintf(idx, sizeof idx, "%s/ck.safetensors", root);
    snprintf(sdir, sizeof sdir, "%s/%s", root, dname);
    mkdir(sdir, 0755);
    const char *slash = strrchr(path, '/');
    for (int r = 0; r < 2; r++) {
        snprintf(orig[r], sizeof orig[r], "%.*s/%s/rank%05d-of-00002.safetensors", (int)(slash - path), path, dname, r);
        snprintf(shard[r], sizeof shard[r], "%s/rank%05d-of-00002.safetensors", sdir, r);
    }
    if (!copy_file(path, idx, 0) || !copy_file(orig[0], shard[0], 0) || !copy_file(orig[1], shard[1], 0)) return;
    char pname[300];
    snprintf(pname, sizeof pname, "params.%s", volt_unit_name(volt_params_unit_at(volt_trainer_params(t), 0)));
    const long at = mid_byte(shard[0], pname);
    int64_t n0, n1;
    float *before = weights(t, &n0);
    for (int k = 0; k < 2; k++) {   /* truncated shard 1; a flipped byte in shard 0's first unit */
        if (k == 0) copy_file(orig[1], shard[1], 16);
        else { copy_file(orig[1], shard[1], 0); flip_byte(shard[0], at); }
        volt_status st = volt_trainer_fit(t, &net_ops, m, l, NULL, idx);
        const char *msg = volt_trainer_errmsg(t);
        CHECK(st == VOLT_ERR_CORRUPT && strstr(msg, k ? shard[0] : shard[1]) && strstr(msg, k ? "crc mismatch" : "truncated") &&
              (!k || strstr(msg, pname)), "%s shard: %s (%s)", k ? "flipped" : "truncated", msg, volt_status_str(st));
        float *after = weights(t, &n1);
        CHECK(after && n0 == n1 && !memcmp(before, after, sizeof(float) * (size_t)n0), "%s shard: the model is untouched",
              k ? "flipped" : "truncated");
        free(after);
        printf("%s shard: %s\n", k ? "flipped" : "truncated", msg);
    }
    copy_file(orig[0], shard[0], 0);
    /* changed after the check: shard 0 after shard 1 was checked (every shard is checked before
     * anything is applied, shard 0's units are applied first) */
    snprintf(g_hook_when, sizeof g_hook_when, "%s", shard[1]);
    snprintf(g_hook_file, sizeof g_hook_file, "%s", shard[0]);
    g_hook_at = at;
    g_hook_flips = 0;
    net m2 = *m;
    volt_trainer *t2 = make_trainer("32-true", NULL, NULL, 6);
    volt__st_set_check_hook(flip_after_check, NULL);
    volt_status st = volt_trainer_fit(t2, &net_ops, &m2, l, NULL, idx);
    volt__st_set_check_hook(NULL, NULL);
    const char *msg = volt_trainer_errmsg(t2);
    CHECK(g_hook_flips == 1, "the hook changed shard 0 once (%d)", g_hook_flips);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(msg, shard[0]) && strstr(msg, pname) && strstr(msg, "changed after it was checked") &&
          strstr(msg, "dropped"), "a shard changed during the load: %s (%s)", msg, volt_status_str(st));
    CHECK(volt_trainer_params(t2) == NULL, "the half-replaced model is dropped");
    printf("shard changed during the load: %s\n", msg);
    volt_trainer_destroy(t2);
    free(before);
}

static void shard_load(const char *path) {
    volt_dataset *ds = make_data();
    char single[1100], exp[1100], err[512];
    snprintf(single, sizeof single, "%s.single", path);
    snprintf(exp, sizeof exp, "%s.export", path);
    net m = { .layers = 3, .width = 10 };
    volt_trainer *t = make_trainer("32-true", NULL, NULL, 6);   /* saved after batch 5 = step 6: loads, trains nothing */
    volt_loader *l = vtest_loader(ds, BS, true);
    volt__st_read_peak(true);
    volt_status st = volt_trainer_fit(t, &net_ops, &m, l, NULL, path);
    const size_t peak = volt__st_read_peak(false);   /* the largest buffer the load read a file into */
    CHECK(st == VOLT_OK, "single from the shards: %s", volt_trainer_errmsg(t));
    check_device(t);
    CHECK(volt_trainer_global_step(t) == 6, "loaded at step %lld", (long long)volt_trainer_global_step(t));
    /* the weights are the gathered ones fsdp exported at the save */
    int64_t n;
    float *w = weights(t, &n);
    volt_st_file *e = NULL, *s = NULL, *idx = NULL;
    CHECK_OK(volt_st_open(exp, &e, err, sizeof err));
    volt_params *ps = volt_trainer_params(t);
    int same = 0;
    for (int i = 0, at = 0; e && i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        volt_st_info info;
        same += volt_st_find(e, p->name, &info) == VOLT_OK && !memcmp(info.data, w + at, info.nbytes);
        at += (int)volt_tensor_numel(p);
    }
    CHECK(same == volt_params_count(ps), "resharded weights: %d of %d equal the fsdp export", same, volt_params_count(ps));
    /* the optimizer states: saved again unsharded, each equals the ranks' slices joined */
    CHECK_OK(volt_trainer_save_checkpoint(t, single));
    CHECK_OK(volt_st_open(single, &s, err, sizeof err));
    CHECK_OK(volt_st_open(path, &idx, err, sizeof err));
    const char *js = idx ? volt_st_meta(idx, "volt.shards") : NULL, *dir = js ? strstr(js, "\"dir\":\"") : NULL;
    char dname[512] = "", shard[2][2048];
    if (dir) sscanf(dir + 7, "%511[^\"]", dname);
    const char *slash = strrchr(path, '/');
    volt_st_file *sh[2] = { NULL, NULL };
    for (int r = 0; r < 2; r++) {
        snprintf(shard[r], sizeof shard[r], "%.*s/%s/rank%05d-of-00002.safetensors", (int)(slash - path), path, dname, r);
        CHECK_OK(volt_st_open(shard[r], &sh[r], err, sizeof err));
    }
    int ok = 0, total = 0;
    const char *states[2] = { "exp_avg", "exp_avg_sq" };
    for (int u = 0; sh[0] && sh[1] && s && u < volt_params_unit_count(ps); u++) {
        volt_unit *un = volt_params_unit_at(ps, u);
        for (int k = 0; k < 2; k++) {
            char name[256];
            snprintf(name, sizeof name, "optimizer.%s.%s", states[k], volt_unit_name(un));
            volt_st_info a, b;
            CHECK_OK(volt_st_find(sh[0], name, &a));
            CHECK_OK(volt_st_find(sh[1], name, &b));
            float *joined = malloc(a.nbytes + b.nbytes + 4);
            memcpy(joined, a.data, a.nbytes);
            memcpy((char *)joined + a.nbytes, b.data, b.nbytes);
            for (int i = 0; i < volt_unit_param_count(un); i++) {
                volt_tensor *p = volt_unit_param(un, i);
                volt_st_info info;
                snprintf(name, sizeof name, "optimizer.%s.%s", states[k], p->name);
                total++;
                ok += volt_st_find(s, name, &info) == VOLT_OK && !memcmp(info.data, joined + volt_param_offset(p), info.nbytes);
            }
            free(joined);
        }
    }
    CHECK(total > 0 && ok == total, "resharded optimizer states: %d of %d equal the ranks' slices", ok, total);
    printf("shards of 2 ranks on 1: weights and %d optimizer states exact\n", ok);
    /* the shards were read one tensor at a time: no buffer larger than the largest tensor
     * (they were read whole before: the data of a shard file) */
    size_t largest = 0, data = 0;
    for (int r = 0; r < 2; r++)
        for (int i = 0; sh[r] && i < volt_st_count(sh[r]); i++) {
            volt_st_info info;
            volt_st_find(sh[r], volt_st_name(sh[r], i), &info);
            if (info.nbytes > largest) largest = info.nbytes;
            data += info.nbytes;
        }
    CHECK(peak > 0 && peak <= largest, "sharded load: the largest read was %zu bytes, the largest shard tensor %zu (the shards' "
          "data: %zu)", peak, largest, data);
    printf("sharded load: largest read %zu bytes, largest shard tensor %zu, shard data %zu\n", peak, largest, data);
    if (dname[0]) shard_damage(t, l, path, dname, &m);
    for (int r = 0; r < 2; r++) volt_st_close(sh[r]);
    volt_st_close(idx);
    volt_st_close(s);
    volt_st_close(e);
    free(w);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "local";
    if (!strcmp(mode, "shard_save") && argc > 2) {
#ifndef VOLT_HAVE_MPI
        VTEST_SKIP("built without MPI");
#endif
        shard_save(argv[2]);
        return vtest_finish();
    }
    if (!strcmp(mode, "shard_load") && argc > 2) {
        shard_load(argv[2]);
        return vtest_finish();
    }
    const char *acc = getenv("VOLT_ACCELERATOR");
    const bool counting = !acc || !*acc;
    if (counting) {   /* wrap "cpu": its memory, its kernels, copies counted */
        g_count = *volt__backend_find("cpu");
        g_count.name = "cpu-count";
        g_count.description = "cpu with counted copies (test_checkpoint)";
        g_count.copy = count_copy;
        char err[256];
        CHECK_OK(volt__backend_register(&g_count, err, sizeof err));
        setenv("VOLT_ACCELERATOR", "cpu-count", 1);
    }
    volt_dataset *ds = make_data();
    test_resume(ds, "32-true", NULL);
    test_resume(ds, "bf16-true", "bf16");
    test_resume(ds, "16-mixed", NULL);
    test_export(ds, "32-true");
    test_export(ds, "bf16-true");
    test_damaged(ds);
    if (counting) test_copies(ds);
    volt_dataset_destroy(ds);
    return vtest_finish();
}
