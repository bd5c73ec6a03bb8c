/* Interrupting a run (SIGINT / SIGTERM, cfg.handle_signals; docs/TRAINER.md): fit stops at
 * the next optimizer step boundary and returns VOLT_ERR_INTERRUPTED after on_exception;
 * OnExceptionCheckpoint's file resumes bitwise; validation / test / predict stop at a batch
 * end; a signal after the last look still stops the call; a second signal ends the process;
 * handle_signals = false and the program's own handlers keep their behaviour; lr_find stops
 * and restores; a call that fails while a signal is pending consumes it. */
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trainer_net.h"

/* ---- a callback raising a signal at a chosen hook call ---------------------------------- */
enum { AT_TRAIN, AT_VAL, AT_TEST, AT_TRAIN_END };
typedef struct {
    int where, sig, times;        /* raise sig `times` times ... */
    int64_t epoch, idx;           /* ... at this epoch's batch idx (train), or the idx-th non-sanity val / test batch */
    int64_t val_seen, test_seen, val_after, test_after;   /* batch ends seen; and after the raise */
    bool raised;
    int n_exc;                    /* on_exception calls */
    volt_status exc_st;
    bool train_end, val_end;      /* on_train_end / on_validation_epoch_end after the raise */
} raiser;

static void fire(raiser *r) {
    for (int i = 0; i < r->times; i++) raise(r->sig);
    r->raised = true;
}
static volt_status r_train_end_batch(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    raiser *r = self;
    if (r->where == AT_TRAIN && !r->raised && volt_trainer_current_epoch(t) == r->epoch && i == r->idx) fire(r);
    return VOLT_OK;
}
static volt_status r_val_batch(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    raiser *r = self;
    if (volt_trainer_sanity_checking(t)) return VOLT_OK;
    if (r->raised) r->val_after++;
    if (r->where == AT_VAL && !r->raised && r->val_seen == r->idx) fire(r);
    r->val_seen++;
    return VOLT_OK;
}
static volt_status r_test_batch(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    raiser *r = self;
    if (r->raised) r->test_after++;
    if (r->where == AT_TEST && !r->raised && r->test_seen == r->idx) fire(r);
    r->test_seen++;
    return VOLT_OK;
}
static volt_status r_train_end(void *self, volt_trainer *t) {
    raiser *r = self;
    if (r->raised) r->train_end = true;
    if (r->where == AT_TRAIN_END) fire(r);
    return VOLT_OK;
}
static volt_status r_val_epoch_end(void *self, volt_trainer *t) {
    raiser *r = self;
    if (r->raised && !volt_trainer_sanity_checking(t)) r->val_end = true;
    return VOLT_OK;
}
static void r_exception(void *self, volt_trainer *t, volt_status st) {
    raiser *r = self;
    r->n_exc++;
    r->exc_st = st;
}
static void r_destroy(void *self) { (void)self; }   /* the test owns it */

static const volt_callback_ops raiser_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "Raiser",
    .on_train_batch_end = r_train_end_batch, .on_validation_batch_end = r_val_batch, .on_test_batch_end = r_test_batch,
    .on_train_end = r_train_end, .on_validation_epoch_end = r_val_epoch_end,
    .on_exception = r_exception, .destroy = r_destroy,
};

static bool file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool default_disposition(int sig) {
    struct sigaction sa;
    return sigaction(sig, NULL, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL;
}

/* ---- fit: stop at the boundary, save, resume bitwise ---------------------------------------- */
static void test_fit_resume(volt_dataset *ds) {
    char root[512], path[600];
    snprintf(root, sizeof root, "%s/fit", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(path, sizeof path, "%s/ckpts/on_exception.safetensors", root);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ckpts", root);
    volt_loader *tl = make_loader(ds, 4, true, 0), *vl = make_loader(ds, 16, false, 0);
    /* A: 3 epochs straight */
    net ma = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *ta = make_trainer(3, root);
    CHECK_OK(volt_trainer_fit(ta, &net_ops, &ma, tl, vl, NULL));
    CHECK(volt_trainer_interrupted(ta) == 0, "an uninterrupted fit says interrupted");
    int64_t na, nc;
    float *wa = snapshot(ta, &na);
    /* B: SIGINT during batch 36 of epoch 1: accumulate_grad_batches = 2, so the fit goes on to
     * batch 37 (the optimizer step) and stops there */
    net mb = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *tb = make_trainer(3, root);
    raiser r = { .where = AT_TRAIN, .sig = SIGINT, .times = 1, .epoch = 1, .idx = 36 };
    CHECK_OK(volt_trainer_add_callback(tb, &raiser_ops, &r));
    CHECK_OK(volt_add_on_exception_checkpoint(tb, dir, NULL));
    volt_status st = volt_trainer_fit(tb, &net_ops, &mb, tl, vl, NULL);
    CHECK(st == VOLT_ERR_INTERRUPTED, "fit returned %s: %s", volt_status_str(st), volt_trainer_errmsg(tb));
    CHECK(volt_trainer_interrupted(tb) == SIGINT, "interrupted = %d", volt_trainer_interrupted(tb));
    CHECK(strstr(volt_trainer_errmsg(tb), "SIGINT") && strstr(volt_trainer_errmsg(tb), "epoch 1"), "message: %s",
          volt_trainer_errmsg(tb));
    CHECK(volt_trainer_current_epoch(tb) == 1 && volt_trainer_batch_in_epoch(tb) == 38, "stopped at epoch %lld batch %lld",
          (long long)volt_trainer_current_epoch(tb), (long long)volt_trainer_batch_in_epoch(tb));
    CHECK(r.n_exc == 1 && r.exc_st == VOLT_ERR_INTERRUPTED, "on_exception: %d calls, %s", r.n_exc, volt_status_str(r.exc_st));
    CHECK(!r.train_end, "on_train_end ran after the interruption");
    CHECK(file_exists(path), "OnExceptionCheckpoint wrote no %s", path);
    CHECK(default_disposition(SIGINT) && default_disposition(SIGTERM), "the signals' dispositions were not restored");
    volt_trainer_destroy(tb);
    /* C: resume from it */
    net mc = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *tc = make_trainer(3, root);
    st = volt_trainer_fit(tc, &net_ops, &mc, tl, vl, path);
    CHECK(st == VOLT_OK, "resume: %s", volt_trainer_errmsg(tc));
    CHECK(volt_trainer_interrupted(tc) == 0, "the next fit still says interrupted");
    float *wc = snapshot(tc, &nc);
    CHECK(mc.steps_run == 3 * 51 - (51 + 38), "resumed run trained %lld steps", (long long)mc.steps_run);
    CHECK(na == nc && memcmp(wa, wc, sizeof(float) * (size_t)na) == 0, "resumed weights differ from the uninterrupted run");
    free(wa);
    free(wc);
    volt_trainer_destroy(ta);
    volt_trainer_destroy(tc);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

/* ---- ckpt_path="last" weighs OnExceptionCheckpoint's file with ModelCheckpoint's last, as
 * Lightning's does: after a Ctrl-C mid-epoch, "last" resumes from where the run stopped (the
 * newer file), not from the epoch's start, and ends bitwise where the uninterrupted run does. */
static void mc_last(volt_trainer *t, const char *dir) {
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = dir;
    cc.save_last = true;
    cc.save_top_k = 0;
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    CHECK_OK(volt_add_on_exception_checkpoint(t, dir, NULL));
}

static void test_last_after_interrupt(volt_dataset *ds) {
    char root[512], dir[600], last[700], exc[700];
    snprintf(root, sizeof root, "%s/last_exc", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(dir, sizeof dir, "%s/ckpts", root);
    snprintf(last, sizeof last, "%s/last.safetensors", dir);
    snprintf(exc, sizeof exc, "%s/on_exception.safetensors", dir);
    volt_loader *tl = make_loader(ds, 4, true, 0), *vl = make_loader(ds, 16, false, 0);
    net ma = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *ta = make_trainer_ckpt(3, root, true);
    CHECK_OK(volt_trainer_fit(ta, &net_ops, &ma, tl, vl, NULL));
    int64_t na = 0, nc = 0;
    float *wa = snapshot(ta, &na);
    volt_trainer_destroy(ta);
    vtest_fresh_dir(root);
    /* B: the epoch-0 last.safetensors, then SIGINT at batch 36 of epoch 1: on_exception.safetensors */
    net mb = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *tb = make_trainer_ckpt(3, root, true);
    raiser r = { .where = AT_TRAIN, .sig = SIGINT, .times = 1, .epoch = 1, .idx = 36 };
    CHECK_OK(volt_trainer_add_callback(tb, &raiser_ops, &r));
    mc_last(tb, dir);
    volt_status st = volt_trainer_fit(tb, &net_ops, &mb, tl, vl, NULL);
    CHECK(st == VOLT_ERR_INTERRUPTED && file_exists(last) && file_exists(exc), "fit: %s; last %d, on_exception %d",
          volt_status_str(st), file_exists(last), file_exists(exc));
    volt_trainer_destroy(tb);
    /* C: "last" is the newer on_exception file: 3 * 51 - (51 + 38) steps to go, the weights of A */
    net mc = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *tc = make_trainer_ckpt(3, root, true);
    mc_last(tc, dir);
    st = volt_trainer_fit(tc, &net_ops, &mc, tl, vl, "last");
    CHECK(st == VOLT_OK, "resume from \"last\": %s", volt_trainer_errmsg(tc));
    float *wc = snapshot(tc, &nc);
    CHECK(mc.steps_run == 3 * 51 - (51 + 38), "\"last\" resumed a run that then trained %lld steps (from %s)",
          (long long)mc.steps_run, mc.steps_run == 2 * 51 ? "last.safetensors, the epoch's start" : "?");
    CHECK(na == nc && memcmp(wa, wc, sizeof(float) * (size_t)na) == 0, "resumed weights differ from the uninterrupted run");
    free(wa);
    free(wc);
    volt_trainer_destroy(tc);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

/* ---- validation (one process): stops at the batch end, no epoch end; the resumed run
 * validates again and ends where the uninterrupted one does. With weight averaging (EMA) the
 * signal lands while the average is swapped in for validation: the file must still hold the
 * average as its weights and the current weights as the state. ------------------------------ */
static volt_trainer *val_trainer(const char *root, bool ema) {
    volt_trainer *t = make_trainer(2, root);
    if (ema) {
        volt_weight_averaging_config wc;
        volt_weight_averaging_config_init(&wc);
        wc.decay = 0.9f;
        CHECK_OK(volt_add_weight_averaging(t, &wc));
    }
    return t;
}

static void test_validation(volt_dataset *ds, bool ema) {
    char root[512], dir[600], path[700];
    snprintf(root, sizeof root, "%s/val%s", vtest_tmpdir(), ema ? "_ema" : "");
    vtest_fresh_dir(root);
    snprintf(dir, sizeof dir, "%s/ckpts", root);
    snprintf(path, sizeof path, "%s/last_words.safetensors", dir);
    volt_loader *tl = make_loader(ds, 4, true, 0), *vl = make_loader(ds, 16, false, 0);
    net ma = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *ta = val_trainer(root, ema);
    CHECK_OK(volt_trainer_fit(ta, &net_ops, &ma, tl, vl, NULL));
    int64_t na, nc;
    float *wa = snapshot(ta, &na);
    double la = 0, lc = 0;
    CHECK(volt_trainer_metric(ta, "val_loss", &la), "val_loss");
    /* SIGTERM at the 3rd batch of the first epoch-end validation (13 batches of 16) */
    net mb = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *tb = val_trainer(root, ema);
    raiser r = { .where = AT_VAL, .sig = SIGTERM, .times = 1, .idx = 2 };
    CHECK_OK(volt_trainer_add_callback(tb, &raiser_ops, &r));
    CHECK_OK(volt_add_on_exception_checkpoint(tb, dir, "last_words"));
    volt_status st = volt_trainer_fit(tb, &net_ops, &mb, tl, vl, NULL);
    CHECK(st == VOLT_ERR_INTERRUPTED && volt_trainer_interrupted(tb) == SIGTERM, "fit returned %s (%d): %s",
          volt_status_str(st), volt_trainer_interrupted(tb), volt_trainer_errmsg(tb));
    CHECK(strstr(volt_trainer_errmsg(tb), "validation stopped after batch 2"), "message: %s", volt_trainer_errmsg(tb));
    CHECK(r.val_after == 0 && !r.val_end, "validation went on after the signal: %lld batches, epoch end %d",
          (long long)r.val_after, r.val_end);
    double v;
    CHECK(!volt_trainer_metric(tb, "val_loss", &v), "a partial validation logged val_loss");
    CHECK(file_exists(path), "no %s", path);
    volt_trainer_destroy(tb);
    net mc = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *tc = val_trainer(root, ema);
    st = volt_trainer_fit(tc, &net_ops, &mc, tl, vl, path);
    CHECK(st == VOLT_OK, "resume: %s", volt_trainer_errmsg(tc));
    float *wc = snapshot(tc, &nc);
    CHECK(na == nc && memcmp(wa, wc, sizeof(float) * (size_t)na) == 0, "resumed weights differ from the uninterrupted run (ema %d)", ema);
    CHECK(volt_trainer_metric(tc, "val_loss", &lc) && la == lc, "final val_loss %g vs %g", lc, la);
    free(wa);
    free(wc);
    volt_trainer_destroy(ta);
    volt_trainer_destroy(tc);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

/* ---- test and predict stop at a batch end; a signal after the last look still stops fit ---- */
static volt_status count_pred(void *ctx, const volt_batch *b, const volt_tensor *pred) {
    int *n = ctx;
    if (++*n == 4) raise(SIGINT);
    return VOLT_OK;
}
static volt_tensor *pred_fwd(net *m, volt_step *s, const volt_batch *b) { return net_fwd(m, s, b); }
static volt_status net_predict(void *self, volt_step *s, const volt_batch *b, int64_t i, volt_tensor **out) {
    *out = pred_fwd(self, s, b);
    return VOLT_OK;
}

static void test_eval_and_late(volt_dataset *ds) {
    char root[512];
    snprintf(root, sizeof root, "%s/eval", vtest_tmpdir());
    vtest_fresh_dir(root);
    volt_loader *l = make_loader(ds, 16, false, 0);
    net m = { .in = IN, .hidden = 8, .out = NC };
    volt_trainer *t = make_trainer(1, root);
    raiser r = { .where = AT_TEST, .sig = SIGINT, .times = 1, .idx = 2 };
    CHECK_OK(volt_trainer_add_callback(t, &raiser_ops, &r));
    volt_status st = volt_trainer_test(t, &net_ops, &m, l, NULL);
    CHECK(st == VOLT_ERR_INTERRUPTED && strstr(volt_trainer_errmsg(t), "test stopped after batch 2"), "test: %s: %s",
          volt_status_str(st), volt_trainer_errmsg(t));
    CHECK(r.test_seen == 3 && r.test_after == 0, "test ran %lld batches", (long long)r.test_seen);
    CHECK(r.n_exc == 1 && r.exc_st == VOLT_ERR_INTERRUPTED, "on_exception after test: %d", r.n_exc);
    /* the record was consumed: the next call runs whole */
    r.where = -1;
    CHECK_OK(volt_trainer_test(t, &net_ops, &m, l, NULL));
    CHECK(volt_trainer_interrupted(t) == 0, "interrupted after a clean test");
    volt_module_ops pops = net_ops;
    pops.predict_step = net_predict;
    int n = 0;
    st = volt_trainer_predict(t, &pops, &m, l, NULL, count_pred, &n);
    CHECK(st == VOLT_ERR_INTERRUPTED && n == 4, "predict: %s after %d batches", volt_status_str(st), n);
    volt_trainer_destroy(t);
    /* a signal in on_train_end, after the last boundary: fit ends, then says it was interrupted */
    net m2 = { .in = IN, .hidden = 8, .out = NC };
    volt_trainer *t2 = make_trainer(1, root);
    raiser r2 = { .where = AT_TRAIN_END, .sig = SIGTERM, .times = 1 };
    CHECK_OK(volt_trainer_add_callback(t2, &raiser_ops, &r2));
    st = volt_trainer_fit(t2, &net_ops, &m2, l, NULL, NULL);
    CHECK(st == VOLT_ERR_INTERRUPTED && strstr(volt_trainer_errmsg(t2), "fit had finished") &&
          volt_trainer_global_step(t2) == 7, "late signal: %s: %s (step %lld)", volt_status_str(st), volt_trainer_errmsg(t2),
          (long long)volt_trainer_global_step(t2));
    volt_trainer_destroy(t2);
    volt_loader_destroy(l);
}

/* ---- lr_find stops after its step and restores; a failing call consumes the record ---------- */
static int64_t raise_at = -1, n_train_calls;
static volt_status fail_after;   /* < 0: the raising training_step fails with it */
static volt_status raising_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    volt_status st = net_train(self, s, b, i);
    if (st >= 0 && n_train_calls++ == raise_at) {
        raise(SIGTERM);
        if (fail_after < 0) return fail_after;
    }
    return st;
}

static bool has_hidden_lr_file(const char *root) {
    DIR *d = opendir(root);
    bool found = false;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) found |= !strncmp(e->d_name, ".lr_find-", 9);
    if (d) closedir(d);
    return found;
}

static void test_lr_find_and_failure(volt_dataset *ds) {
    char root[512];
    snprintf(root, sizeof root, "%s/lrf", vtest_tmpdir());
    vtest_fresh_dir(root);
    volt_loader *l = make_loader(ds, 16, false, 0);
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_epochs = 1;
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = false;
    c.default_root_dir = root;
    c.seed = 3;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_module_ops ops = net_ops;
    ops.training_step = raising_train;
    net m = { .in = IN, .hidden = 8, .out = NC };
    volt_lr_find_config lc;
    volt_lr_find_config_init(&lc);
    lc.num_training = 12;
    lc.early_stop_threshold = 0;
    volt_lr_find_result res;
    /* a whole test first: the weights it restores are the ones any lr_find comes back to */
    CHECK_OK(volt_trainer_lr_find(t, &ops, &m, l, &lc, &res));
    CHECK(res.n == 12, "lr_find ran %lld steps", (long long)res.n);
    volt_lr_find_result_free(&res);
    int64_t na, nb;
    float *wa = snapshot(t, &na);
    /* SIGTERM in its step 4: it stops after that step, restores, removes its file */
    raise_at = n_train_calls + 4;
    volt_status st = volt_trainer_lr_find(t, &ops, &m, l, &lc, &res);
    CHECK(st == VOLT_ERR_INTERRUPTED && volt_trainer_interrupted(t) == SIGTERM &&
          strstr(volt_trainer_errmsg(t), "lr_find stopped after its step 4"), "lr_find: %s (%d): %s", volt_status_str(st),
          volt_trainer_interrupted(t), volt_trainer_errmsg(t));
    CHECK(res.n == 0 && !res.lrs && !res.losses, "an interrupted lr_find gave %lld points", (long long)res.n);
    CHECK(n_train_calls == raise_at + 1, "lr_find ran %lld steps past the signal", (long long)(n_train_calls - raise_at - 1));
    float *wb = snapshot(t, &nb);
    CHECK(na == nb && memcmp(wa, wb, sizeof(float) * (size_t)na) == 0, "an interrupted lr_find left other weights");
    CHECK(!has_hidden_lr_file(root), "an interrupted lr_find left its hidden checkpoint in %s", root);
    CHECK(default_disposition(SIGTERM), "lr_find did not restore SIGTERM's disposition");
    free(wa);
    free(wb);
    /* fit whose training_step fails just after a SIGTERM: its own error, the signal named, and
     * the record consumed, so the next fit runs whole */
    raise_at = n_train_calls + 2;
    fail_after = VOLT_ERR_INVALID_ARG;
    st = volt_trainer_fit(t, &ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && volt_trainer_interrupted(t) == SIGTERM, "failing fit: %s (%d): %s",
          volt_status_str(st), volt_trainer_interrupted(t), volt_trainer_errmsg(t));
    fail_after = VOLT_OK;
    volt_trainer_destroy(t);
    CHECK_OK(volt_trainer_create(&c, &t));
    net m2 = { .in = IN, .hidden = 8, .out = NC };
    st = volt_trainer_fit(t, &net_ops, &m2, l, NULL, NULL);
    CHECK(st == VOLT_OK && volt_trainer_interrupted(t) == 0 && volt_trainer_global_step(t) == volt_loader_num_batches(l),
          "the fit after a failed one: %s (%d, step %lld): %s", volt_status_str(st), volt_trainer_interrupted(t),
          (long long)volt_trainer_global_step(t), volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

/* ---- OnExceptionCheckpoint saves for fit only, and only a model that exists ---------------- */
static volt_status fail_fit_start(void *self, volt_trainer *t) {   /* as a logger whose folder cannot be made */
    (void)self;
    return volt_trainer_fail(t, VOLT_ERR_IO, "cannot create directory 'x': Read-only file system");
}
static volt_status fail_val_end(void *self, volt_trainer *t) {     /* as a ModelCheckpoint that cannot write */
    (void)self;
    return volt_trainer_sanity_checking(t) ? VOLT_OK : volt_trainer_fail(t, VOLT_ERR_IO, "validation end failed");
}
static const volt_callback_ops fail_start_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "FailStart",
                                                  .on_fit_start = fail_fit_start };
static const volt_callback_ops fail_val_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "FailValEnd",
                                                .on_validation_end = fail_val_end };

static void test_on_exception_scope(volt_dataset *ds) {
    char root[512], dir[600], path[700];
    snprintf(root, sizeof root, "%s/oec", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(dir, sizeof dir, "%s/ckpts", root);
    snprintf(path, sizeof path, "%s/on_exception.safetensors", dir);
    volt_loader *l = make_loader(ds, 16, false, 0);
    net m = { .in = IN, .hidden = 8, .out = NC };
    volt_trainer *t = make_trainer(1, root);
    CHECK_OK(volt_add_on_exception_checkpoint(t, dir, NULL));
    CHECK_OK(volt_trainer_fit(t, &net_ops, &m, l, NULL, NULL));
    /* a test whose set-up fails (no such checkpoint) is the test's failure: nothing saved */
    volt_status st = volt_trainer_test(t, &net_ops, &m, l, "/nonexistent/volt/x.safetensors");
    CHECK(st < 0 && volt_trainer_stage(t) == VOLT_STAGE_TEST, "test from a missing file: %s, stage %d", volt_status_str(st),
          (int)volt_trainer_stage(t));
    CHECK(!file_exists(path), "OnExceptionCheckpoint saved after a failed test");
    /* a fit whose resume fails to load drops its model: nothing to save, no file */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/garbage.safetensors", root);
    FILE *f = fopen(bad, "wb");
    CHECK(f && fwrite("not a checkpoint at all, twenty-four+ bytes", 1, 40, f) == 40, "write %s", bad);
    if (f) fclose(f);
    volt_trainer *t2 = make_trainer(1, root);
    CHECK_OK(volt_add_on_exception_checkpoint(t2, dir, NULL));
    net m2 = { .in = IN, .hidden = 8, .out = NC };
    st = volt_trainer_fit(t2, &net_ops, &m2, l, NULL, bad);
    CHECK(st == VOLT_ERR_CORRUPT && !file_exists(path), "fit from garbage: %s, on_exception file %d: %s", volt_status_str(st),
          file_exists(path), volt_trainer_errmsg(t2));
    volt_trainer_destroy(t2);
    /* a fit that fails in on_fit_start (before its sanity check and training) saves nothing: one error, the hook's */
    volt_trainer *t3 = make_trainer(1, root);
    CHECK_OK(volt_add_on_exception_checkpoint(t3, dir, NULL));
    CHECK_OK(volt_trainer_add_callback(t3, &fail_start_ops, NULL));
    net m3 = { .in = IN, .hidden = 8, .out = NC };
    st = volt_trainer_fit(t3, &net_ops, &m3, l, NULL, NULL);
    CHECK(st == VOLT_ERR_IO && !file_exists(path) && strstr(volt_trainer_errmsg(t3), "Read-only"),
          "fit failing in on_fit_start: %s, on_exception file %d: %s", volt_status_str(st), file_exists(path), volt_trainer_errmsg(t3));
    volt_trainer_destroy(t3);
    /* a fit failing in its validation (after training steps) saves, and its stage stays fit */
    remove(path);
    volt_trainer *t4 = make_trainer(1, root);
    CHECK_OK(volt_add_on_exception_checkpoint(t4, dir, NULL));
    CHECK_OK(volt_trainer_add_callback(t4, &fail_val_ops, NULL));
    net m4 = { .in = IN, .hidden = 8, .out = NC };
    st = volt_trainer_fit(t4, &net_ops, &m4, l, l, NULL);
    CHECK(st == VOLT_ERR_IO && volt_trainer_stage(t4) == VOLT_STAGE_FIT && file_exists(path),
          "fit failing in on_validation_end: %s, stage %d, on_exception file %d: %s", volt_status_str(st),
          (int)volt_trainer_stage(t4), file_exists(path), volt_trainer_errmsg(t4));
    volt_trainer_destroy(t4);
    /* a fit that fails before its first optimizer step (an empty train loader, after the sanity
     * check) leaves the file there as it was: t4's, with its steps, not a copy of the start */
    size_t n0 = 0, n1 = 0;
    unsigned char *before = vtest_slurp(path, &n0);
    volt_trainer_config c5;
    volt_trainer_config_init(&c5);
    c5.max_epochs = 1;
    c5.limit_train_batches = 0;
    c5.enable_checkpointing = c5.enable_logger = c5.enable_progress_bar = false;
    c5.default_root_dir = root;
    volt_trainer *t5 = NULL;
    CHECK_OK(volt_trainer_create(&c5, &t5));
    CHECK_OK(volt_add_on_exception_checkpoint(t5, dir, NULL));
    net m5 = { .in = IN, .hidden = 8, .out = NC };
    st = volt_trainer_fit(t5, &net_ops, &m5, l, l, NULL);
    unsigned char *after = vtest_slurp(path, &n1);
    CHECK(st < 0 && before && after && n0 == n1 && !memcmp(before, after, n0),
          "fit failing before its first step: %s (%s); on_exception file %s", volt_status_str(st), volt_trainer_errmsg(t5),
          !after ? "gone" : n0 == n1 && !memcmp(before, after, n0) ? "kept" : "replaced");
    free(before);
    free(after);
    volt_trainer_destroy(t5);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

/* ---- what stays the process's: a second signal, handle_signals = false, its own handler ---- */
static volatile sig_atomic_t own_calls;
static void own_handler(int sig) { (void)sig; own_calls++; }

/* In a child: fit with a raiser at epoch 0 batch 3; exits 0 when fit returned interrupted,
 * 1 when it returned anything else (the parent checks how it ended). */
static void child_fit(volt_dataset *ds, bool handle, int times) {
    volt_loader *l = make_loader(ds, 16, false, 0);
    net m = { .in = IN, .hidden = 8, .out = NC };
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_epochs = 1;
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = false;
    c.handle_signals = handle;
    volt_trainer *t = NULL;
    if (volt_trainer_create(&c, &t) < 0) _exit(2);
    raiser r = { .where = AT_TRAIN, .sig = SIGINT, .times = times, .epoch = 0, .idx = 3 };
    if (volt_trainer_add_callback(t, &raiser_ops, &r) < 0) _exit(2);
    volt_status st = volt_trainer_fit(t, &net_ops, &m, l, NULL, NULL);
    _exit(st == VOLT_ERR_INTERRUPTED ? 0 : st == VOLT_OK ? 3 : 1);
}

static int run_child(volt_dataset *ds, bool handle, int times) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) child_fit(ds, handle, times);
    int ws = 0;
    if (pid < 0 || waitpid(pid, &ws, 0) != pid) return -1;
    return ws;
}

static void test_process(volt_dataset *ds) {
    int ws = run_child(ds, true, 1);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "one SIGINT: the child should return interrupted (status %#x)", ws);
    ws = run_child(ds, true, 2);
    CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGINT, "two SIGINTs: the child should end by SIGINT (status %#x)", ws);
    ws = run_child(ds, false, 1);
    CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGINT, "handle_signals = false: the child should end by SIGINT (status %#x)", ws);
    /* the program's own handler stays: it sees the signal, fit runs to its end */
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = own_handler;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGINT, &sa, &old) == 0, "sigaction");
    volt_loader *l = make_loader(ds, 16, false, 0);
    net m = { .in = IN, .hidden = 8, .out = NC };
    volt_trainer *t = make_trainer(1, vtest_tmpdir());
    raiser r = { .where = AT_TRAIN, .sig = SIGINT, .times = 1, .epoch = 0, .idx = 3 };
    CHECK_OK(volt_trainer_add_callback(t, &raiser_ops, &r));
    CHECK_OK(volt_trainer_fit(t, &net_ops, &m, l, NULL, NULL));
    CHECK(own_calls == 1 && volt_trainer_interrupted(t) == 0 && volt_trainer_global_step(t) == 7,
          "own handler: %d calls, interrupted %d, step %lld", (int)own_calls, volt_trainer_interrupted(t),
          (long long)volt_trainer_global_step(t));
    struct sigaction now;
    CHECK(sigaction(SIGINT, &old, &now) == 0 && now.sa_handler == own_handler, "the program's handler was replaced");
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

static void test_config(void) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    CHECK(c.handle_signals, "handle_signals defaults to true");
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    CHECK(volt_add_on_exception_checkpoint(t, NULL, NULL) == VOLT_ERR_INVALID_ARG, "no dirpath accepted");
    CHECK(volt_add_on_exception_checkpoint(t, "x", "a/b") == VOLT_ERR_INVALID_ARG &&
          strstr(volt_trainer_errmsg(t), "a/b"), "a filename with a slash: %s", volt_trainer_errmsg(t));
    CHECK(volt_trainer_add_last_candidate(t, NULL) == VOLT_ERR_INVALID_ARG &&
          volt_trainer_add_last_candidate(t, "") == VOLT_ERR_INVALID_ARG, "add_last_candidate: no path accepted");
    int added = 0;
    char cand[64];
    for (int i = 0; i < 100; i++) {   /* the same path again takes no place (a module's OnExceptionCheckpoint, every call) */
        CHECK_OK(volt_trainer_add_last_candidate(t, "/nonexistent/x.safetensors"));
    }
    added = 1;
    while (added < 100) {
        snprintf(cand, sizeof cand, "/nonexistent/x%d.safetensors", added);
        if (volt_trainer_add_last_candidate(t, cand) != VOLT_OK) break;
        added++;
    }
    CHECK(added == 16 && strstr(volt_trainer_errmsg(t), "more than 16"), "add_last_candidate: %d added, then: %s", added,
          volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    CHECK(!strcmp(volt_status_str(VOLT_ERR_INTERRUPTED), "interrupted"), "status string");
}

int main(void) {
    volt_dataset *ds = make_data();
    test_config();
    test_fit_resume(ds);
    test_last_after_interrupt(ds);
    test_validation(ds, false);
    test_validation(ds, true);
    test_eval_and_late(ds);
    test_lr_find_and_failure(ds);
    test_on_exception_scope(ds);
    test_process(ds);
    volt_dataset_destroy(ds);
    return vtest_finish();
}
