/* The states ModelCheckpoint and EarlyStopping take back from a checkpoint:
 *  - a resumed run whose ModelCheckpoint has another monitor, mode or trigger (every_n_epochs)
 *    than the one that saved (Lightning keys the state by them) keeps only best_model_path: the
 *    previous run's top-k files stay (they were evicted, scored against the other metric or
 *    mode), and a warning says why;
 *  - an EarlyStopping with another monitor or mode starts fresh (it stopped at once, comparing
 *    the new metric with the old one's best), and a resume with the same ones stops where the
 *    uninterrupted run does;
 *  - a sound EarlyStopping state's patience is taken (Lightning's load_state_dict restores it);
 *  - damaged states, written by stand-in callbacks of the same names, are refused as
 *    VOLT_ERR_CORRUPT naming the field: ModelCheckpoint's last_global_step_saved 1e300 (a cast
 *    out of range), 2.5, -1 or "7", a top-k score "garbage"; EarlyStopping's best_score "garbage"
 *    (read as 0), patience -5 (taken), 1e300 (a cast out of range) or "y" (read as 0), wait_count
 *    2.5, stopped_epoch -1, a missing wait_count, mode "sideways".
 * The module logs val_score, val_other and val_mc from tables indexed by the epoch. */
#include <math.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"

enum { NS = 32, BS = 8 };   /* 4 batches = 4 optimizer steps per epoch */
static volt_dataset *DS;

static const double SCORE[] = { 0.5, 0.7, 0.6, 0.8, 0.8, 0.8, 0.8, 0.8 };
static const double OTHER[] = { 9, 9, 9, 5, 4, 3, 2, 1 };
static const double MCS[] = { 0.5, 0.7, 0.6, 0.65, 0.55, 0.55, 0.55, 0.55 };

typedef struct { volt_tensor *w, *b; int64_t epoch; } tab;   /* starts as vtest_lin4 */
static volt_status tab_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    tab *m = self;
    const int64_t e = m->epoch < 8 ? m->epoch : 7;
    volt_linear(s, volt_batch_x(b), m->w, m->b);
    VOLT_TRY(volt_log_value(s, "val_score", SCORE[e], VOLT_LOG_EPOCH));
    VOLT_TRY(volt_log_value(s, "val_mc", MCS[e], VOLT_LOG_EPOCH));
    return volt_log_value(s, "val_other", OTHER[e], VOLT_LOG_EPOCH);
}
static volt_status tab_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.01f;
    return VOLT_OK;
}
static volt_status tab_val_start(void *self, volt_trainer *t) {
    ((tab *)self)->epoch = volt_trainer_current_epoch(t);
    return VOLT_OK;
}
static const volt_module_ops tab_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "tab", .setup = vtest_lin4_setup,
                                         .configure_optimizers = tab_opt, .training_step = vtest_lin4_train,
                                         .validation_step = tab_val, .on_validation_epoch_start = tab_val_start };

static volt_trainer *mk_trainer(const char *root, int64_t max_epochs) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = max_epochs;
    c.enable_checkpointing = true;   /* the ModelCheckpoint a test adds replaces the default one */
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    return t;
}

/* fit with validation; stderr captured into said (cap bytes) when said is non-NULL */
static volt_status fit(volt_trainer *t, const char *ckpt, const char *root, char *said, size_t cap) {
    volt_loader *tr = vtest_loader(DS, BS, false), *va = vtest_loader(DS, BS, false);
    char err[1200];
    snprintf(err, sizeof err, "%s/stderr.txt", root);
    const int saved = said ? vtest_stderr_to(err) : -1;
    tab m = { 0 };
    volt_status st = volt_trainer_fit(t, &tab_ops, &m, tr, va, ckpt);
    if (said) vtest_stderr_back(saved, err, said, cap);
    volt_loader_destroy(tr);
    volt_loader_destroy(va);
    return st;
}

static bool exists(const char *p) { return access(p, F_OK) == 0; }

/* top 2 by monitor, "{epoch}-{<monitor>:.2f}", with last */
static volt_checkpoint_config mc_config(const char *dir, const char *monitor, volt_mode mode) {
    static char tmpl[64];
    snprintf(tmpl, sizeof tmpl, "{epoch}-{%s:.2f}", monitor);
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = dir;
    cc.filename = tmpl;
    cc.monitor = monitor;
    cc.mode = mode;
    cc.save_top_k = 2;
    cc.save_last = true;
    return cc;
}

/* ---- ModelCheckpoint: another monitor / mode / trigger ----------------------------------------------- */

/* Run 1 (3 epochs, val_mc max, top 2) leaves epoch=1 (0.70) and epoch=2 (0.60); run 2 resumes
 * from last with the change, over val_mc 0.65 0.55 and val_other 5 4. Each case removed a run-1
 * file before (scored against the restored top-k). */
static void test_mc_config_change(void) {
    static const struct { const char *name, *monitor; volt_mode mode; int64_t every; const char *said, *new_best; } cases[] = {
        /* val_other 5 and 4 (max) beat 0.6 and 0.7: both files went */
        { "monitor", "val_other", VOLT_MAX, 1, "monitor 'val_mc' (mode 'max'), this callback's 'val_other' (mode 'max')",
          "epoch=3-val_other=5.00.safetensors" },
        /* 0.65 (min) beats 0.7: the 0.70 file went */
        { "mode", "val_mc", VOLT_MIN, 1, "monitor 'val_mc' (mode 'max'), this callback's 'val_mc' (mode 'min')",
          "epoch=4-val_mc=0.55.safetensors" },
        /* every other epoch: 0.65 at epoch 3 beats 0.6: the 0.60 file went */
        { "every", "val_mc", VOLT_MAX, 2, "every_n_epochs 1, this callback's 2", "epoch=3-val_mc=0.65.safetensors" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char root[600], dir[700], e1[800], e2[800], nb[900], said[8192];
        snprintf(root, sizeof root, "%s/mc_change_%s", vtest_tmpdir(), cases[i].name);
        vtest_fresh_dir(root);
        snprintf(dir, sizeof dir, "%s/ck", root);
        snprintf(e1, sizeof e1, "%s/epoch=1-val_mc=0.70.safetensors", dir);
        snprintf(e2, sizeof e2, "%s/epoch=2-val_mc=0.60.safetensors", dir);
        snprintf(nb, sizeof nb, "%s/%s", dir, cases[i].new_best);
        volt_trainer *t = mk_trainer(root, 3);
        volt_checkpoint_config cc = mc_config(dir, "val_mc", VOLT_MAX);
        CHECK_OK(volt_add_model_checkpoint(t, &cc));
        CHECK_OK(fit(t, NULL, root, NULL, 0));
        CHECK(exists(e1) && exists(e2), "%s: run 1 kept epochs 1 and 2", cases[i].name);
        volt_trainer_destroy(t);

        t = mk_trainer(root, 5);
        cc = mc_config(dir, cases[i].monitor, cases[i].mode);
        cc.every_n_epochs = cases[i].every;
        CHECK_OK(volt_add_model_checkpoint(t, &cc));
        volt_status st = fit(t, "last", root, said, sizeof said);
        CHECK(st == VOLT_OK, "%s: resumed fit: %s (%s)", cases[i].name, volt_status_str(st), volt_trainer_errmsg(t));
        CHECK(exists(e1) && exists(e2), "%s: the previous run's top-k files are still there (0.70: %s, 0.60: %s)",
              cases[i].name, exists(e1) ? "yes" : "removed", exists(e2) ? "yes" : "removed");
        const char *bp = volt_trainer_best_model_path(t);
        CHECK(bp && !strcmp(bp, nb), "%s: best %s, want %s", cases[i].name, bp ? bp : "(none)", nb);
        CHECK(strstr(said, "ModelCheckpoint: the checkpoint's state was saved with") && strstr(said, cases[i].said) &&
              strstr(said, "only best_model_path is"), "%s: the warning: %s", cases[i].name, said);
        volt_trainer_destroy(t);
    }
    /* the same settings (the control): the state is taken, no warning; 0.65 takes the 0.60
     * file's place and 0.7 stays the best */
    char root[600], dir[700], e2[800], said[8192];
    snprintf(root, sizeof root, "%s/mc_change_none", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(dir, sizeof dir, "%s/ck", root);
    snprintf(e2, sizeof e2, "%s/epoch=2-val_mc=0.60.safetensors", dir);
    for (int part = 0; part < 2; part++) {
        volt_trainer *t = mk_trainer(root, part ? 5 : 3);
        volt_checkpoint_config cc = mc_config(dir, "val_mc", VOLT_MAX);
        CHECK_OK(volt_add_model_checkpoint(t, &cc));
        CHECK_OK(fit(t, part ? "last" : NULL, root, said, sizeof said));
        if (part) {
            CHECK(!strstr(said, "ModelCheckpoint: the checkpoint's state"), "same settings: no warning: %s", said);
            CHECK(volt_trainer_best_model_score(t) == 0.7 && !exists(e2), "same settings: best %g, the 0.60 file %s",
                  volt_trainer_best_model_score(t), exists(e2) ? "kept" : "removed");
        }
        volt_trainer_destroy(t);
    }
}

/* ---- EarlyStopping: another monitor / mode ----------------------------------------------------------- */

/* Run 1 (3 epochs, val_score max, patience 2) leaves best 0.7 and a wait of 1. Resumed: */
static int64_t es_resumed_steps(const char *name, const char *monitor, volt_mode mode, char *said, size_t cap) {
    char root[600], dir[700];
    snprintf(root, sizeof root, "%s/es_change_%s", vtest_tmpdir(), name);
    vtest_fresh_dir(root);
    snprintf(dir, sizeof dir, "%s/ck", root);
    int64_t gs = -1;
    for (int part = 0; part < 2; part++) {
        volt_trainer *t = mk_trainer(root, part ? 8 : 3);
        volt_early_stopping_config ec;
        volt_early_stopping_config_init(&ec);
        ec.monitor = part ? monitor : "val_score";
        ec.mode = part ? mode : VOLT_MAX;
        ec.patience = 2;
        CHECK_OK(volt_add_early_stopping(t, &ec));
        volt_checkpoint_config cc;
        volt_checkpoint_config_init(&cc);
        cc.dirpath = dir;
        cc.save_top_k = 0;
        cc.save_last = true;
        CHECK_OK(volt_add_model_checkpoint(t, &cc));
        volt_status st = fit(t, part ? "last" : NULL, root, part ? said : NULL, cap);
        CHECK(st == VOLT_OK, "%s part %d: %s (%s)", name, part, volt_status_str(st), volt_trainer_errmsg(t));
        gs = volt_trainer_global_step(t);
        volt_trainer_destroy(t);
    }
    return gs;
}

static void test_es_config_change(void) {
    char said[8192];
    int64_t gs;
    /* val_other 5 4 3 2 1 (min) improves every epoch: to max_epochs (it stopped at epoch 3,
     * 5 being no better than val_score's 0.7) */
    gs = es_resumed_steps("monitor", "val_other", VOLT_MIN, said, sizeof said);
    CHECK(gs == 32, "another monitor: ran to step %lld (want 32: 8 epochs, no stop)", (long long)gs);
    CHECK(strstr(said, "EarlyStopping: the checkpoint's state is for monitor 'val_score' (mode 'max'), this callback "
                       "monitors 'val_other' (mode 'min')"), "another monitor: the warning: %s", said);
    /* val_score 0.8 0.8 0.8 (min, fresh): improves at epoch 3, waits at 4 and 5, stops there
     * (it stopped at epoch 3: 0.8 is no better than max's 0.7 under min) */
    gs = es_resumed_steps("mode", "val_score", VOLT_MIN, said, sizeof said);
    CHECK(gs == 24, "another mode: stopped at step %lld (want 24: after epoch 5)", (long long)gs);
    CHECK(strstr(said, "monitors 'val_score' (mode 'min')"), "another mode: the warning: %s", said);
    /* the same: as the uninterrupted run (0.5 0.7 0.6 0.8 0.8 0.8: stops after epoch 5) */
    gs = es_resumed_steps("same", "val_score", VOLT_MAX, said, sizeof said);
    CHECK(gs == 24 && !strstr(said, "EarlyStopping: the checkpoint's state"), "the same monitor: step %lld (want 24), %s",
          (long long)gs, said);
}

/* ---- damaged states ----------------------------------------------------------------------------------- */

static const char *FAKE_STATE;
static char *fake_state(void *self) { (void)self; return strdup(FAKE_STATE); }
static const volt_callback_ops fake_mc_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "ModelCheckpoint",
                                               .state_dict = fake_state };
static const volt_callback_ops fake_es_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "EarlyStopping",
                                               .state_dict = fake_state };
static const char *SAVE_PATH;
static volt_status save_at(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)b;
    if (volt_trainer_current_epoch(t) == 0 && i == 3 && SAVE_PATH) return volt_trainer_save_checkpoint(t, SAVE_PATH);
    return VOLT_OK;
}
static const volt_callback_ops save_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "SaveAt", .on_train_batch_end = save_at };

/* A checkpoint at path (epoch 0's last batch, step 4) whose callback state under fake's name is state. */
static void write_fake(const char *root, const char *path, const volt_callback_ops *fake, const char *state) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    volt_trainer *a = NULL;
    CHECK_OK(volt_trainer_create(&c, &a));
    FAKE_STATE = state;
    CHECK_OK(volt_trainer_add_callback(a, fake, NULL));
    CHECK_OK(volt_trainer_add_callback(a, &save_ops, NULL));
    volt_loader *l = vtest_loader(DS, BS, false);
    tab m = { 0 };
    SAVE_PATH = path;
    CHECK_OK(volt_trainer_fit(a, &tab_ops, &m, l, NULL, NULL));
    SAVE_PATH = NULL;
    volt_trainer_destroy(a);
    volt_loader_destroy(l);
}

#define MC_STATE(step, topk) "{\"monitor\":\"val_score\",\"mode\":\"max\",\"dirpath\":null,\"save_top_k\":2," \
    "\"last_global_step_saved\":" step ",\"best_model_path\":null,\"best_model_score\":null,\"last_model_path\":null," \
    "\"best_k_models\":[" topk "]}"

static void test_mc_damaged_state(void) {
    char root[600], path[700], dir[700];
    snprintf(root, sizeof root, "%s/mc_damaged", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(path, sizeof path, "%s/fake.safetensors", root);
    snprintf(dir, sizeof dir, "%s/ck", root);
    static const struct { const char *state, *why; } cases[] = {
        { MC_STATE("1e300", ""), "last_global_step_saved is 1e+300, not a whole number" },
        { MC_STATE("2.5", ""), "last_global_step_saved is 2.5, not a whole number" },
        { MC_STATE("-1", ""), "last_global_step_saved is -1, not a whole number" },
        { MC_STATE("\"7\"", ""), "last_global_step_saved is \"7\", not a whole number" },
        { MC_STATE("4", "{\"path\":\"x.safetensors\",\"score\":\"garbage\"}"), "best_k_models is" },
        { MC_STATE("4", ""), NULL },   /* sound: resumes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_fake(root, path, &fake_mc_ops, cases[i].state);
        volt_trainer *t = mk_trainer(root, 2);
        volt_checkpoint_config cc = mc_config(dir, "val_score", VOLT_MAX);
        CHECK_OK(volt_add_model_checkpoint(t, &cc));
        const volt_status st = fit(t, path, root, NULL, 0);
        if (cases[i].why)
            CHECK(st == VOLT_ERR_CORRUPT && strstr(volt_trainer_errmsg(t), "ModelCheckpoint: the checkpoint's ") &&
                  strstr(volt_trainer_errmsg(t), cases[i].why),
                  "state %s: %s (%s)", cases[i].state, volt_status_str(st), volt_trainer_errmsg(t));
        else
            CHECK(st == VOLT_OK, "sound state %s: %s (%s)", cases[i].state, volt_status_str(st), volt_trainer_errmsg(t));
        volt_trainer_destroy(t);
    }
}

#define ES_STATE(fields) "{\"monitor\":\"val_score\",\"mode\":\"max\"," fields ",\"last_check_step\":-1}"

static void test_es_damaged_state(void) {
    char root[600], path[700];
    snprintf(root, sizeof root, "%s/es_damaged", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(path, sizeof path, "%s/fake.safetensors", root);
    static const struct { const char *state, *why; } cases[] = {
        { ES_STATE("\"wait_count\":0,\"stopped_epoch\":0,\"best_score\":\"garbage\",\"patience\":3"), "best_score is \"garbage\"" },
        { ES_STATE("\"wait_count\":0,\"stopped_epoch\":0,\"best_score\":0.5,\"patience\":-5"), "patience is -5" },
        { ES_STATE("\"wait_count\":0,\"stopped_epoch\":0,\"best_score\":0.5,\"patience\":1e300"), "patience is 1e+300" },
        { ES_STATE("\"wait_count\":0,\"stopped_epoch\":0,\"best_score\":0.5,\"patience\":\"y\""), "patience is \"y\"" },
        { ES_STATE("\"wait_count\":2.5,\"stopped_epoch\":0,\"best_score\":0.5,\"patience\":3"), "wait_count is 2.5" },
        { ES_STATE("\"wait_count\":0,\"stopped_epoch\":-1,\"best_score\":0.5,\"patience\":3"), "stopped_epoch is -1" },
        { ES_STATE("\"stopped_epoch\":0,\"best_score\":0.5,\"patience\":3"), "wait_count is missing" },
        { "{\"monitor\":\"val_score\",\"mode\":\"sideways\",\"wait_count\":0,\"stopped_epoch\":0,\"best_score\":0.5,"
          "\"patience\":3}", "mode is \"sideways\"" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_fake(root, path, &fake_es_ops, cases[i].state);
        volt_trainer *t = mk_trainer(root, 8);
        volt_early_stopping_config ec;
        volt_early_stopping_config_init(&ec);
        ec.monitor = "val_score";
        ec.mode = VOLT_MAX;
        CHECK_OK(volt_add_early_stopping(t, &ec));
        const volt_status st = fit(t, path, root, NULL, 0);
        CHECK(st == VOLT_ERR_CORRUPT && strstr(volt_trainer_errmsg(t), "EarlyStopping: the checkpoint's ") &&
              strstr(volt_trainer_errmsg(t), cases[i].why), "state %s: %s (%s)", cases[i].state, volt_status_str(st),
              volt_trainer_errmsg(t));
        volt_trainer_destroy(t);
    }
    /* sound, best 0.9 and patience 5 where this run configures 1: the scores 0.5 0.7 0.6 0.8 0.8
     * never beat 0.9, so the restored patience stops it after epoch 4 (step 20); the configured
     * one would after epoch 0 (step 4) */
    write_fake(root, path, &fake_es_ops, ES_STATE("\"wait_count\":0,\"stopped_epoch\":0,\"best_score\":0.9,\"patience\":5"));
    volt_trainer *t = mk_trainer(root, 8);
    volt_early_stopping_config ec;
    volt_early_stopping_config_init(&ec);
    ec.monitor = "val_score";
    ec.mode = VOLT_MAX;
    ec.patience = 1;
    CHECK_OK(volt_add_early_stopping(t, &ec));
    const volt_status st = fit(t, path, root, NULL, 0);
    CHECK(st == VOLT_OK && volt_trainer_global_step(t) == 20, "restored patience 5: %s, stopped at step %lld (want 20)",
          volt_status_str(st), (long long)volt_trainer_global_step(t));
    volt_trainer_destroy(t);
}

int main(void) {
    if (!(DS = vtest_rows4(NS))) return vtest_finish();
    vtest_check_accelerator();
    test_mc_config_change();
    test_es_config_change();
    test_mc_damaged_state();
    test_es_damaged_state();
    volt_dataset_destroy(DS);
    return vtest_finish();
}
