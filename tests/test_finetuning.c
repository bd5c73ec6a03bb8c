/* BackboneFinetuning (callbacks/backbone_finetuning.c) and the optimizer's added parameter
 * groups under it (volt_optimizer_add_param_group, core/optim.c; their checkpoints,
 * trainer/checkpoint.c). docs/CALLBACKS.md, docs/OPTIMIZERS.md.
 *
 * - add_param_group: parameters move into the new last group, counts follow, a pattern that
 *   matches nothing or a ninth group is refused; neither a scheduler nor set_lr moves an added
 *   group's lr, set_group_lr does; Adam's first update of an added group is torch's first
 *   (|step| = lr: its own bias correction), not the optimizer's step-4 one (0.58 lr).
 * - the callback on the MLP of tests/compile_mlp.h (AdamW, linear schedule; fc1.* = the
 *   backbone), 3 steps an epoch, unfreeze at epoch 1: fc1 untouched through epoch 0; at epoch
 *   1's start one more group at 0.1 x group 0's lr; then x1.5 per epoch, never above group 0's
 *   (should_align); the lr constant within an epoch while group 0's moves.
 * - resume: a fit stopped before the unfreeze, just after it (mid-epoch) and at an epoch's end
 *   goes on to the same final weights, bit for bit, as the uninterrupted fit.
 * - errors: a backbone matching no parameter, a second callback, bad numbers, a checkpoint of
 *   another backbone, a forged record of the added group (its checksum made right). */
#define _GNU_SOURCE   /* memmem */
#include <string.h>
#include "volt/volt.h"
#include "volt/trainer.h"
#include "vtest.h"
#include "compile_mlp.h"
#include <zlib.h>
#include "volt/safetensors.h"

enum { BS = 4, NS = 10 };   /* batches 4, 4, 2: 3 optimizer steps an epoch */
static float MX[NS * IN];
static int64_t MY[NS];

static const volt_module_ops mlp_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "mlp", .setup = mlp_setup,
                                         .configure_optimizers = mlp_opt, .training_step = mlp_train_ce };

/* ---- what the fit does, seen from a callback added after BackboneFinetuning ----------------- */
enum { MAX_EPOCHS = 6 };
typedef struct {
    int groups[MAX_EPOCHS];          /* at each epoch start */
    bool fc1_trainable[MAX_EPOCHS];
    float g0_lr[MAX_EPOCHS], bb_lr[MAX_EPOCHS];   /* at the epoch start, after the callback */
    bool bb_lr_moved;                /* the backbone's lr changed inside an epoch */
    bool g0_lr_moved;                /* group 0's did (the schedule runs) */
    float fc1_start[HID * IN];       /* fc1.weight at the fit's start */
    bool fc1_moved_in_epoch0;
    float before[HID * IN];          /* fc1.weight at epoch 1's start, after its first step */
    float after[HID * IN];
    float first_bb_lr;
    bool have_first;
} seen;
static volt_tensor *fc1w(volt_trainer *t) { return volt_params_find(volt_trainer_params(t), "fc1.weight"); }
static void read_fc1(volt_trainer *t, float *dst) { vtest_f32(fc1w(t), dst); }

static volt_status seen_fit_start(void *self, volt_trainer *t) {
    read_fc1(t, ((seen *)self)->fc1_start);
    return VOLT_OK;
}
static volt_status seen_epoch_start(void *self, volt_trainer *t) {
    seen *s = self;
    const int64_t e = volt_trainer_current_epoch(t);
    volt_optimizer *opt = volt_trainer_optimizer(t);
    if (e < MAX_EPOCHS) {
        s->groups[e] = volt_optimizer_group_count(opt);
        s->fc1_trainable[e] = (fc1w(t)->flags & VOLT_TENSOR_REQUIRES_GRAD) != 0;
        s->g0_lr[e] = volt_optimizer_group_lr(opt, 0);
        s->bb_lr[e] = s->groups[e] > 1 ? volt_optimizer_group_lr(opt, s->groups[e] - 1) : NAN;
    }
    if (e == 1) read_fc1(t, s->before);
    return VOLT_OK;
}
static volt_status seen_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b;
    seen *s = self;
    const int64_t e = volt_trainer_current_epoch(t);
    volt_optimizer *opt = volt_trainer_optimizer(t);
    const int ng = volt_optimizer_group_count(opt);
    if (e < MAX_EPOCHS && ng > 1 && volt_optimizer_group_lr(opt, ng - 1) != s->bb_lr[e]) s->bb_lr_moved = true;
    if (e < MAX_EPOCHS && volt_optimizer_group_lr(opt, 0) != s->g0_lr[e]) s->g0_lr_moved = true;
    if (e == 0 && i == 2) {
        float now[HID * IN];
        read_fc1(t, now);
        s->fc1_moved_in_epoch0 = memcmp(now, s->fc1_start, sizeof now) != 0;
    }
    if (e == 1 && i == 0) {
        read_fc1(t, s->after);
        s->first_bb_lr = volt_optimizer_group_lr(opt, ng - 1);
        s->have_first = true;
    }
    return VOLT_OK;
}
static const volt_callback_ops seen_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Seen",
                                            .on_fit_start = seen_fit_start, .on_train_epoch_start = seen_epoch_start,
                                            .on_train_batch_end = seen_batch_end };

static volt_dataset *g_ds;
static char g_dir[512];
static int64_t g_unfreeze = 1;   /* make()'s unfreeze_backbone_at_epoch */

/* A trainer with the callback (backbone bb; NULL: none) and, if s, the recorder. */
static volt_trainer *make(const char *bb, int64_t max_epochs, int64_t max_steps, seen *s, double multiplier) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_epochs = max_epochs;
    c.max_steps = max_steps;
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = c.enable_model_summary = false;
    c.default_root_dir = g_dir;
    c.num_sanity_val_steps = 0;
    c.seed = 5;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_OK, "create: %s", t ? volt_trainer_errmsg(t) : volt_status_str(st));
    if (st < 0) return t;
    if (bb) {
        volt_backbone_finetuning_config bc;
        volt_backbone_finetuning_config_init(&bc);
        bc.backbone = bb;
        bc.unfreeze_backbone_at_epoch = g_unfreeze;
        bc.multiplier = multiplier;
        bc.verbose = true;
        CHECK_OK(volt_add_backbone_finetuning(t, &bc));
    }
    if (s) CHECK_OK(volt_trainer_add_callback(t, &seen_ops, s));
    return t;
}

static volt_loader *loader(void) {
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = BS;
    lc.shuffle = true;
    lc.seed = 3;
    volt_loader *l = NULL;
    CHECK_OK(volt_loader_create(&lc, g_ds, &l));
    return l;
}

/* every parameter's values, concatenated */
static size_t params_of(volt_trainer *t, float *dst, size_t cap) {
    volt_params *ps = volt_trainer_params(t);
    size_t n = 0;
    for (int i = 0; ps && i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        const size_t k = (size_t)volt_tensor_numel(p);
        if (n + k > cap) return 0;
        vtest_f32(p, dst + n);
        n += k;
    }
    return n;
}

/* ---- add_param_group on its own -------------------------------------------------------------- */
static void test_add_group(void) {
    volt_trainer *t = make(NULL, 1, -1, NULL, 1.5f);
    volt_loader *l = loader();
    mlp m = { 0 };
    CHECK_OK(volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL));
    volt_optimizer *opt = volt_trainer_optimizer(t);
    CHECK(volt_optimizer_group_count(opt) == 1 && volt_optimizer_config_group_count(opt) == 1, "one group");
    const volt_optim_group none = { .params = "fc9.*", .lr = NAN, .weight_decay = NAN };
    CHECK(volt_optimizer_add_param_group(opt, &none) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_optimizer_errmsg(opt), "'fc9.*' matches no parameter"), "no match: %s", volt_optimizer_errmsg(opt));
    const volt_optim_group g1 = { .params = "fc1.*", .lr = 1e-4f, .weight_decay = 0.f };
    CHECK_OK(volt_optimizer_add_param_group(opt, &g1));
    CHECK(volt_optimizer_group_count(opt) == 2 && volt_optimizer_config_group_count(opt) == 1, "two groups, one config's");
    CHECK(volt_optimizer_group_param_count(opt, 0) == 2 && volt_optimizer_group_param_count(opt, 1) == 2, "moved: %d + %d",
          volt_optimizer_group_param_count(opt, 0), volt_optimizer_group_param_count(opt, 1));
    CHECK(volt_optimizer_param_group(opt, m.w1) == 1 && volt_optimizer_param_group(opt, m.w2) == 0, "w1 in 1, w2 in 0");
    CHECK(!strcmp(volt_optimizer_group_params(opt, 1), "fc1.*") && !volt_optimizer_group_params(opt, 0), "patterns");
    CHECK(volt_optimizer_group_first_step(opt, 1) == volt_optimizer_step_count(opt) && volt_optimizer_step_count(opt) == 3,
          "added at step %lld", (long long)volt_optimizer_group_first_step(opt, 1));
    CHECK(volt_optimizer_group_lr(opt, 1) == 1e-4f && volt_optimizer_group_weight_decay(opt, 1) == 0.f, "its lr and wd");
    /* a later group takes the parameters it matches from the earlier one */
    const volt_optim_group g2 = { .params = "fc1.bias", .lr = NAN, .weight_decay = NAN };
    CHECK_OK(volt_optimizer_add_param_group(opt, &g2));
    CHECK(volt_optimizer_group_param_count(opt, 1) == 1 && volt_optimizer_group_param_count(opt, 2) == 1 &&
          volt_optimizer_param_group(opt, m.b1) == 2, "fc1.bias moved on");
    CHECK(volt_optimizer_group_lr(opt, 2) == 3e-3f && volt_optimizer_group_weight_decay(opt, 2) == 0.01f, "NAN: the config's");
    /* set_lr (lr_find, LambdaLR) moves the config's groups only */
    volt_optimizer_set_lr(opt, 7e-3f);
    CHECK(volt_optimizer_group_lr(opt, 0) == 7e-3f && volt_optimizer_group_lr(opt, 1) == 1e-4f, "set_lr leaves an added group");
    CHECK_OK(volt_optimizer_set_group_lr(opt, 1, 2e-4f));
    CHECK(volt_optimizer_group_lr(opt, 1) == 2e-4f, "set_group_lr");
    CHECK(volt_optimizer_set_group_lr(opt, 5, 1e-3f) == VOLT_ERR_INVALID_ARG && volt_optimizer_set_group_lr(opt, 1, -1.f) ==
          VOLT_ERR_INVALID_ARG && volt_optimizer_set_group_lr(opt, 1, NAN) == VOLT_ERR_INVALID_ARG, "set_group_lr refuses");
    /* a scheduler moves the config's groups only */
    volt_scheduler_config sc;
    volt_scheduler_config_init(&sc);
    sc.kind = VOLT_SCHED_LINEAR;
    sc.total_steps = 10;
    volt_scheduler *s = NULL;
    CHECK_OK(volt_scheduler_create(&sc, opt, &s));
    volt_scheduler_step(s);
    CHECK(volt_optimizer_group_lr(opt, 0) != 7e-3f && volt_optimizer_group_lr(opt, 1) == 2e-4f &&
          volt_optimizer_group_lr(opt, 2) == 3e-3f, "scheduler: %g %g %g", volt_optimizer_group_lr(opt, 0),
          volt_optimizer_group_lr(opt, 1), volt_optimizer_group_lr(opt, 2));
    volt_scheduler_destroy(s);
    for (int k = 3; k <= 8; k++) CHECK_OK(volt_optimizer_add_param_group(opt, &g1));   /* 8 besides the default */
    CHECK(volt_optimizer_add_param_group(opt, &g1) == VOLT_ERR_INVALID_ARG && strstr(volt_optimizer_errmsg(opt), "at most 8"),
          "a ninth: %s", volt_optimizer_errmsg(opt));
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
}

/* ---- the callback -------------------------------------------------------------------------- */
static void test_callback(void) {
    static seen s;
    memset(&s, 0, sizeof s);
    volt_trainer *t = make("fc1.*", 4, -1, &s, 1.5f);
    volt_loader *l = loader();
    mlp m = { 0 };
    char err[600];
    snprintf(err, sizeof err, "%s/bf_verbose.txt", g_dir);
    const int saved = vtest_stderr_to(err);
    volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL);
    char said[4096];
    vtest_stderr_back(saved, err, said, sizeof said);
    CHECK(st == VOLT_OK, "fit: %s", volt_trainer_errmsg(t));
    CHECK(strstr(said, "BackboneFinetuning: epoch 1: 2 backbone parameters unfrozen; current lr:") &&
          strstr(said, "BackboneFinetuning: epoch 3: current lr:"), "verbose: %s", said);
    CHECK(s.groups[0] == 1 && !s.fc1_trainable[0], "epoch 0: one group, fc1 frozen (%d, %d)", s.groups[0], s.fc1_trainable[0]);
    CHECK(!s.fc1_moved_in_epoch0, "fc1 untouched through epoch 0");
    CHECK(s.g0_lr_moved, "the schedule runs (group 0's lr moves inside epochs)");
    CHECK(!s.bb_lr_moved, "the backbone's lr is constant inside an epoch (no scheduler moves it)");
    double prev = (double)s.g0_lr[1] * 0.1;   /* in double, as Lightning's Python floats */
    CHECK(s.groups[1] == 2 && s.fc1_trainable[1] && s.bb_lr[1] == (float)prev, "epoch 1: %d groups, lr %.9g want %.9g", s.groups[1],
          s.bb_lr[1], (float)prev);
    for (int e = 2; e < 4; e++) {
        double next = 1.5 * prev;
        if (next > s.g0_lr[e]) next = s.g0_lr[e];
        CHECK(s.groups[e] == 2 && s.bb_lr[e] == (float)next, "epoch %d: lr %.9g want %.9g", e, s.bb_lr[e], (float)next);
        prev = next;
    }
    /* AdamW's first update of the added group: p' = p (1 - lr wd) - lr m^/(sqrt(v^) + eps) with its
     * own t = 1, m^ = g and v^ = g^2: |step| = lr (where |g| >> eps); with the optimizer's t = 4
     * it would be 0.58 lr */
    CHECK(s.have_first, "epoch 1's first batch seen");
    int near = 0;
    const double lr = s.first_bb_lr, decay = 1.0 - lr * 0.01;
    for (int i = 0; i < HID * IN; i++) {
        const double step = fabs((double)s.after[i] - (double)s.before[i] * decay);
        near += fabs(step / lr - 1.0) < 1e-3;
    }
    CHECK(near >= HID * IN * 9 / 10, "first backbone step = its lr for %d of %d elements", near, HID * IN);
    /* a second fit on the trainer keeps its optimizer, and so the backbone's group: trained */
    memset(&s, 0, sizeof s);
    CHECK_OK(volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL));
    CHECK(s.groups[0] == 2 && s.fc1_trainable[0], "second fit: the group kept, fc1 trained from epoch 0");
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
    /* should_align: x4 per epoch from 0.1 reaches group 0's lr at epoch 3 and stays there */
    memset(&s, 0, sizeof s);
    t = make("fc1.*", 4, -1, &s, 4.f);
    l = loader();
    CHECK_OK(volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL));
    CHECK(s.bb_lr[2] == (float)(4.0 * (double)s.bb_lr[1]) || s.bb_lr[2] == s.g0_lr[2], "x4 at epoch 2");
    CHECK(s.bb_lr[3] == s.g0_lr[3], "aligned at epoch 3: %.9g vs %.9g", s.bb_lr[3], s.g0_lr[3]);
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
}

/* ---- the tuner sweeps what fit trains: setup("fit") freezes before lr_find's steps, as
 * Lightning's BaseFinetuning.setup before its Tuner's fit ------------------------------------- */
static int g_steps_frozen, g_steps_free;
static volt_status count_before_opt(void *self, volt_trainer *t) {
    if (fc1w(t)->flags & VOLT_TENSOR_REQUIRES_GRAD) g_steps_free++;
    else g_steps_frozen++;
    return VOLT_OK;
}
static const volt_callback_ops count_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Count",
                                             .on_before_optimizer_step = count_before_opt };
static void test_lr_find_frozen(void) {
    for (int with_bf = 0; with_bf < 2; with_bf++) {
        volt_trainer *t = make(with_bf ? "fc1.*" : NULL, 2, -1, NULL, 1.5);
        if (!t) return;
        CHECK_OK(volt_trainer_add_callback(t, &count_ops, NULL));
        volt_loader *l = loader();
        mlp m = { 0 };
        volt_lr_find_config lc;
        volt_lr_find_config_init(&lc);
        lc.num_training = 4;
        volt_lr_find_result r;
        g_steps_frozen = g_steps_free = 0;
        CHECK_OK(volt_trainer_lr_find(t, &mlp_ops, &m, l, &lc, &r));
        volt_lr_find_result_free(&r);
        CHECK(with_bf ? g_steps_frozen == 4 && g_steps_free == 0 : g_steps_free == 4 && g_steps_frozen == 0,
              "lr_find %s BackboneFinetuning: %d steps with the backbone frozen, %d with it trainable", with_bf ? "with" : "without",
              g_steps_frozen, g_steps_free);
        /* and the fit after it: frozen in epoch 0, thawed at epoch 1 */
        g_steps_frozen = g_steps_free = 0;
        CHECK_OK(volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL));
        CHECK(with_bf ? g_steps_frozen == 3 && g_steps_free == 3 : g_steps_free == 6,
              "the fit after lr_find: %d steps frozen, %d trainable", g_steps_frozen, g_steps_free);
        volt_loader_destroy(l);
        volt_trainer_destroy(t);
    }
}

/* ---- a hostile file ----------------------------------------------------------------------------
 * path's metadata checksum ("volt.meta_crc32", trainer/checkpoint_meta.c: crc32 over "key\0value\0"
 * of every key but "format", "crc32:*" and itself, in key order) made right again after an
 * edit, as someone forging a file would: the loader's own checks must catch the edit. */
typedef struct { const char *k, *v; } kv;
static int kv_cmp(const void *a, const void *b) { return strcmp(((const kv *)a)->k, ((const kv *)b)->k); }
static bool reseal(const char *path) {
    volt_st_file *f = NULL;
    char err[256];
    if (volt_st_open(path, &f, err, sizeof err) != VOLT_OK) return false;
    const int n = volt_st_meta_count(f);
    kv *a = calloc((size_t)n + 1, sizeof *a);
    int m = 0;
    for (int i = 0; a && i < n; i++) {
        if (volt_st_meta_at(f, i, &a[m].k, &a[m].v) != VOLT_OK) continue;
        if (strcmp(a[m].k, "format") && strncmp(a[m].k, "crc32:", 6) && strcmp(a[m].k, "volt.meta_crc32")) m++;
    }
    qsort(a, (size_t)m, sizeof *a, kv_cmp);
    uLong c = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < m; i++) {
        c = crc32(c, (const Bytef *)a[i].k, (uInt)strlen(a[i].k) + 1);
        c = crc32(c, (const Bytef *)a[i].v, (uInt)strlen(a[i].v) + 1);
    }
    char old[64], now[64];
    snprintf(old, sizeof old, "\"volt.meta_crc32\":\"%s\"", volt_st_meta(f, "volt.meta_crc32"));
    snprintf(now, sizeof now, "\"volt.meta_crc32\":\"%08x\"", (unsigned)c);
    free(a);
    volt_st_close(f);
    size_t len = 0;
    unsigned char *d = vtest_slurp(path, &len);
    unsigned char *at = d ? memmem(d, len, old, strlen(old)) : NULL;
    bool ok = at && strlen(old) == strlen(now);
    if (ok) {
        memcpy(at, now, strlen(now));
        FILE *o = fopen(path, "wb");
        ok = o && fwrite(d, 1, len, o) == len;
        if (o) fclose(o);
    }
    free(d);
    return ok;
}

/* ---- resume ----------------------------------------------------------------------------------- */
enum { NP = HID * IN + HID + NC * HID + NC };
static void test_resume(void) {
    static float want[NP], got[NP];
    char dir[600];
    snprintf(dir, sizeof dir, "%s/bf_ckpts", g_dir);
    vtest_fresh_dir(dir);
    /* the uninterrupted fit, a checkpoint after every optimizer step */
    volt_trainer *t = make("fc1.*", 4, -1, NULL, 1.5f);
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = dir;
    cc.filename = "{step}";
    cc.save_top_k = -1;
    cc.every_n_train_steps = 1;
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    volt_loader *l = loader();
    mlp m = { 0 };
    CHECK_OK(volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL));
    CHECK(params_of(t, want, NP) == NP, "the parameters");
    volt_trainer_destroy(t);
    /* resumed at step 2 (epoch 0, frozen), 4 (epoch 1, mid-epoch after the unfreeze), 6 (epoch
     * 1's end: the next epoch's start multiplies the lr) and 7 (epoch 2, after that) */
    const int64_t stops[4] = { 2, 4, 6, 7 };
    for (int k = 0; k < 4; k++) {
        char path[700];
        snprintf(path, sizeof path, "%s/step=%lld.safetensors", dir, (long long)stops[k]);
        t = make("fc1.*", 4, -1, NULL, 1.5f);
        volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, path);
        CHECK(st == VOLT_OK, "resume from step %lld: %s", (long long)stops[k], volt_trainer_errmsg(t));
        CHECK(volt_optimizer_group_count(volt_trainer_optimizer(t)) == 2, "resumed: the backbone's group");
        CHECK(params_of(t, got, NP) == NP && !memcmp(got, want, sizeof want), "resumed from step %lld: the same weights, bit "
              "for bit", (long long)stops[k]);
        volt_trainer_destroy(t);
        if (k != 1) continue;
        /* the file holds the added group; another backbone refuses it, and a fit without the
         * callback takes the group back all the same */
        t = make("fc2.*", 4, -1, NULL, 1.5f);
        st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, path);
        CHECK(st < 0 && strstr(volt_trainer_errmsg(t), "the checkpoint's backbone is 'fc1.*', this run's 'fc2.*'"),
              "another backbone: %s", volt_trainer_errmsg(t));
        CHECK(volt_optimizer_group_count(volt_trainer_optimizer(t)) <= 1, "the failed resume dropped the group again (or the "
              "optimizer)");
        volt_trainer_destroy(t);
        /* a forged record of the added group (same-length byte patches of the header's metadata,
         * the checksum made right again): a pattern matching nothing, an lr that is no number,
         * a first step after the optimizer's */
        static const struct { const char *from, *to, *msg; } bad[3] = {
            { "\\\"params\\\":\\\"fc1.*", "\\\"params\\\":\\\"fc9.*", "('fc9.*', added during its fit) cannot be added back" },
            { "\\\"lr_now\\\":0.0003", "\\\"lr_now\\\":null  ", "added group 1 is damaged" },
            { "\\\"first_step\\\":3", "\\\"first_step\\\":9", "first_step <= the optimizer's step 4" },
        };
        for (int b = 0; b < 3; b++) {
            size_t n = 0;
            unsigned char *d = vtest_slurp(path, &n);
            unsigned char *at = d ? memmem(d, n, bad[b].from, strlen(bad[b].from)) : NULL;
            CHECK(at != NULL, "the record holds %s", bad[b].from);
            if (!at) { free(d); continue; }
            memcpy(at, bad[b].to, strlen(bad[b].to));
            char bp[700];
            snprintf(bp, sizeof bp, "%s/bad%d.safetensors", dir, b);
            FILE *f = fopen(bp, "wb");
            CHECK(f && fwrite(d, 1, n, f) == n, "write %s", bp);
            if (f) fclose(f);
            free(d);
            CHECK(reseal(bp), "reseal %s", bp);
            t = make(NULL, 4, -1, NULL, 1.5f);
            st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, bp);
            CHECK(st < 0 && strstr(volt_trainer_errmsg(t), bad[b].msg), "damaged record %d: %s", b, volt_trainer_errmsg(t));
            volt_trainer_destroy(t);
        }
        t = make(NULL, 4, -1, NULL, 1.5f);
        char errf[700], said[4096];
        snprintf(errf, sizeof errf, "%s/nocb.txt", dir);
        int saved = vtest_stderr_to(errf);
        st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, path);
        vtest_stderr_back(saved, errf, said, sizeof said);
        CHECK(strstr(said, "holds the state of callbacks this fit does not have: BackboneFinetuning, ModelCheckpoint"),
              "no callback: the warning names it: %s", said);
        CHECK(st == VOLT_OK && volt_optimizer_group_count(volt_trainer_optimizer(t)) == 2 &&
              volt_optimizer_group_first_step(volt_trainer_optimizer(t), 1) == 3, "no callback: the group is back (%s)",
              volt_trainer_errmsg(t));
        volt_trainer_destroy(t);
    }
    /* resumed after the unfreeze (step 7) by a run that would unfreeze at epoch 4: the
     * checkpoint's unfreeze (epoch 1) stands, said so, and the lr grows at epoch 3 as before */
    g_unfreeze = 4;
    {
        char path[700], errf[700], said[4096];
        snprintf(path, sizeof path, "%s/step=7.safetensors", dir);
        snprintf(errf, sizeof errf, "%s/late.txt", dir);
        t = make("fc1.*", 4, -1, NULL, 1.5f);
        const int saved = vtest_stderr_to(errf);
        volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, path);
        vtest_stderr_back(saved, errf, said, sizeof said);
        CHECK(st == VOLT_OK && strstr(said, "the checkpoint's backbone was unfrozen at epoch 1; this run's unfreeze_backbone_at_epoch "
              "4 changes nothing now"), "another unfreeze epoch on resume: %s", said);
        CHECK(params_of(t, got, NP) == NP && !memcmp(got, want, sizeof want), "another unfreeze epoch on resume: the same weights");
        volt_trainer_destroy(t);
    }
    g_unfreeze = 1;
    /* a trainer whose optimizer already holds the group (its first fit unfroze) resumes
     * another fit from a checkpoint of before (step 2) and after (step 7) the unfreeze: the
     * file's grouping, lr and step count, not the trainer's own, and the same weights */
    t = make("fc1.*", 4, -1, NULL, 1.5f);
    CHECK_OK(volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL));
    for (int k = 0; k < 2; k++) {
        char path[700];
        snprintf(path, sizeof path, "%s/step=%d.safetensors", dir, k ? 7 : 2);
        volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, path);
        CHECK(st == VOLT_OK, "second fit from step %d: %s", k ? 7 : 2, volt_trainer_errmsg(t));
        CHECK(params_of(t, got, NP) == NP && !memcmp(got, want, sizeof want), "second fit from step %d: the same weights, bit "
              "for bit", k ? 7 : 2);
    }
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

/* ---- errors ----------------------------------------------------------------------------------- */
static void test_errors(void) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_backbone_finetuning_config bc;
    volt_backbone_finetuning_config_init(&bc);
    CHECK(volt_add_backbone_finetuning(t, &bc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "backbone"), "no backbone");
    bc.backbone = "fc1.*, ";
    CHECK(volt_add_backbone_finetuning(t, &bc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "empty pattern (element 2)"),
          "empty element: %s", volt_trainer_errmsg(t));
    bc.backbone = "fc1.*";
    bc.multiplier = 0;
    CHECK(volt_add_backbone_finetuning(t, &bc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "multiplier"), "multiplier");
    bc.multiplier = 1.5f;
    bc.unfreeze_backbone_at_epoch = -1;
    CHECK(volt_add_backbone_finetuning(t, &bc) == VOLT_ERR_INVALID_ARG, "negative epoch");
    bc.unfreeze_backbone_at_epoch = 1;
    bc.backbone_initial_lr = -1;
    CHECK(volt_add_backbone_finetuning(t, &bc) == VOLT_ERR_INVALID_ARG, "negative initial lr");
    bc.backbone_initial_lr = NAN;
    bc.version = 99;
    CHECK(volt_add_backbone_finetuning(t, &bc) == VOLT_ERR_VERSION, "version");
    volt_trainer_destroy(t);
    /* a typo in the backbone fails the fit at its start, naming the pattern */
    t = make("fc1.*, encoder.*", 2, -1, NULL, 1.5f);
    volt_backbone_finetuning_config_init(&bc);
    bc.backbone = "fc1.*";
    CHECK(volt_add_backbone_finetuning(t, &bc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "has one already"), "second");
    volt_loader *l = loader();
    mlp m = { 0 };
    volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "backbone pattern 'encoder.*' matches no parameter"),
          "typo: %s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    /* a backbone that is the whole model: nothing would train before the unfreeze */
    t = make("fc*", 2, -1, NULL, 1.5f);
    st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "backbone 'fc*' holds every trainable parameter"),
          "whole model: %s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    /* an unfreeze epoch at or past max_epochs: trains, warning that the backbone stays frozen */
    g_unfreeze = 2;
    t = make("fc1.*", 2, -1, NULL, 1.5f);
    char errf[700], said[4096];
    snprintf(errf, sizeof errf, "%s/never.txt", g_dir);
    const int saved = vtest_stderr_to(errf);
    st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL);
    vtest_stderr_back(saved, errf, said, sizeof said);
    CHECK(st == VOLT_OK && strstr(said, "unfreeze_backbone_at_epoch 2 is not before max_epochs 2: the backbone stays frozen"),
          "never unfrozen: %s", said);
    volt_trainer_destroy(t);
    g_unfreeze = 1;
    volt_loader_destroy(l);
}

int main(void) {
    for (int i = 0; i < NS; i++) {
        MY[i] = i % NC;
        for (int k = 0; k < IN; k++) MX[i * IN + k] = sinf((float)(i * IN + k) * 0.37f);
    }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *d[2] = { MX, MY };
    CHECK_OK(volt_dataset_from_arrays(2, f, d, NS, &g_ds));
    snprintf(g_dir, sizeof g_dir, "%s", vtest_tmpdir());
    test_add_group();
    test_callback();
    test_lr_find_frozen();
    test_resume();
    test_errors();
    volt_dataset_destroy(g_ds);
    return vtest_finish();
}
