/* When fit validates: check_val_every_n_epoch = 0 (Lightning's None) validates every
 * val_check_interval train batches counted across epochs (an epoch's end only when the count
 * falls there), and a resumed fit goes on counting from its checkpoint; a val_check_interval
 * longer than an epoch is refused unless counted across epochs; the settings that cannot work
 * together are refused at create. A checkpoint written in on_train_batch_end of a batch whose
 * validation is due after it (or whose count fell due inside the accumulation window) resumes
 * with that validation where the uninterrupted fit ran it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"

typedef struct lin {
    volt_tensor *w, *b;   /* first: vtest_lin4's */
    char log[512];
    bool stop_at_val;     /* the first validation asks for a stop (EarlyStopping's) */
    int64_t end_step;     /* global_step when fit ended */
} lin;

static volt_status lin_step(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    volt_tensor *loss = vtest_lin4_loss(self, s, b);
    if (!volt_step_training(s)) return volt_log(s, "val_loss", loss, 0);
    return volt_step_set_loss(s, loss);
}
static volt_status lin_opt(void *self, volt_optim_setup *o) {
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.01f;
    return VOLT_OK;
}
/* "epoch:batch" of each validation (the batches of the epoch run when it starts) */
static int g_sanity;   /* sanity checks run */
static volt_status lin_val_start(void *self, volt_trainer *t) {
    lin *m = self;
    if (volt_trainer_sanity_checking(t)) { g_sanity++; return VOLT_OK; }
    size_t n = strlen(m->log);
    snprintf(m->log + n, sizeof m->log - n, "%lld:%lld ", (long long)volt_trainer_current_epoch(t),
             (long long)volt_trainer_batch_in_epoch(t));
    return VOLT_OK;
}
static volt_status lin_val_end(void *self, volt_trainer *t) {
    lin *m = self;
    if (m->stop_at_val && !volt_trainer_sanity_checking(t)) volt_trainer_request_stop(t);
    return VOLT_OK;
}
static volt_status lin_fit_end(void *self, volt_trainer *t) {
    ((lin *)self)->end_step = volt_trainer_global_step(t);
    return VOLT_OK;
}
static const volt_module_ops lin_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = vtest_lin4_setup, .configure_optimizers = lin_opt,
    .training_step = lin_step, .validation_step = lin_step, .on_validation_start = lin_val_start,
    .on_validation_end = lin_val_end, .on_fit_end = lin_fit_end,
};

static int64_t g_acc = 1, g_fast = 0;   /* accumulate_grad_batches, fast_dev_run of the next fit */
static int64_t g_bs = 4;                 /* the train loader's batch size */
static char g_stderr[4096];              /* what the last fit printed on stderr */

/* Saves a checkpoint to g_save_path at (g_save_epoch, batch_in_epoch g_save_batch): in
 * on_train_batch_end (between the batch and a validation due after it), or with g_save_in_val 1
 * in that validation's on_validation_start (a validation cut short), 2 its on_validation_end. */
static const char *g_save_path;
static int64_t g_save_epoch, g_save_batch;
static int g_save_in_val;
static volt_status save_now(volt_trainer *t) {
    if (volt_trainer_current_epoch(t) != g_save_epoch || volt_trainer_batch_in_epoch(t) != g_save_batch ||
        volt_trainer_sanity_checking(t))
        return VOLT_OK;
    return volt_trainer_save_checkpoint(t, g_save_path);
}
static volt_status save_at(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self;
    (void)b;
    (void)i;
    return g_save_in_val ? VOLT_OK : save_now(t);
}
static volt_status save_val_start(void *self, volt_trainer *t) { return g_save_in_val == 1 ? save_now(t) : VOLT_OK; }
static volt_status save_val_end(void *self, volt_trainer *t) { return g_save_in_val == 2 ? save_now(t) : VOLT_OK; }
/* EarlyStopping's part: a stop asked for in on_validation_end, before the saver's (g_cb_stop) */
static bool g_cb_stop;
static volt_status stop_val_end(void *self, volt_trainer *t) {
    (void)self;
    if (g_cb_stop && !volt_trainer_sanity_checking(t)) volt_trainer_request_stop(t);
    return VOLT_OK;
}
static const volt_callback_ops stop_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "StopAtVal",
                                            .on_validation_end = stop_val_end };
static const volt_callback_ops save_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "SaveAt",
                                            .on_train_batch_end = save_at, .on_validation_start = save_val_start,
                                            .on_validation_end = save_val_end };

static volt_status fit(volt_dataset *tr, volt_dataset *va, int64_t epochs, int64_t every_n, int64_t interval,
                       const char *ckpt_in, const char *ckpt_out, lin *m, char *err, size_t errlen) {
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    c.max_epochs = epochs;
    c.accumulate_grad_batches = g_acc;
    c.fast_dev_run = g_fast;
    c.check_val_every_n_epoch = every_n;
    c.val_check_interval = interval;
    c.num_sanity_val_steps = 1;   /* the sanity check counts no validation in the logs */
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    if (st < 0) {
        snprintf(err, errlen, "%s", t ? volt_trainer_errmsg(t) : volt_status_str(st));
        volt_trainer_destroy(t);
        return st;
    }
    volt_loader *lt = vtest_loader(tr, g_bs, false), *lv = vtest_loader(va, 4, false);
    if (g_cb_stop) CHECK_OK(volt_trainer_add_callback(t, &stop_ops, NULL));
    if (g_save_path) CHECK_OK(volt_trainer_add_callback(t, &save_ops, NULL));
    char path[1100];
    snprintf(path, sizeof path, "%s/val_schedule_stderr.txt", vtest_tmpdir());
    const int saved = vtest_stderr_to(path);
    st = volt_trainer_fit(t, &lin_ops, m, lt, lv, ckpt_in);
    vtest_stderr_back(saved, path, g_stderr, sizeof g_stderr);
    snprintf(err, errlen, "%s", volt_trainer_errmsg(t));
    if (st >= 0 && ckpt_out) CHECK_OK(volt_trainer_save_checkpoint(t, ckpt_out));
    volt_loader_destroy(lt);
    volt_loader_destroy(lv);
    volt_trainer_destroy(t);
    return st;
}

int main(void) {
    vtest_check_accelerator();
    volt_dataset *tr = vtest_rows4(24), *va = vtest_rows4(8);   /* 6 train batches an epoch */
    char err[1024], ck[1100];
    snprintf(ck, sizeof ck, "%s/val_schedule.safetensors", vtest_tmpdir());
    /* every 4 batches over 3 epochs (18): after batches 4, 8, 12 (epoch 1's end), 16 */
    lin a = { .log = "" };
    CHECK_OK(fit(tr, va, 3, 0, 4, NULL, NULL, &a, err, sizeof err));
    CHECK(!strcmp(a.log, "0:4 1:2 1:6 2:4 "), "across epochs: got '%s'", a.log);
    /* the default counts within each epoch: after 4, and not at the end (6) the interval passes
     * over (Lightning's (batch_idx + 1) % val_check_batch); an interval of 3 lands on it */
    lin d = { .log = "" }, d3 = { .log = "" };
    CHECK_OK(fit(tr, va, 2, 1, 4, NULL, NULL, &d, err, sizeof err));
    CHECK(!strcmp(d.log, "0:4 1:4 "), "per epoch: got '%s'", d.log);
    CHECK_OK(fit(tr, va, 2, 1, 3, NULL, NULL, &d3, err, sizeof err));
    CHECK(!strcmp(d3.log, "0:3 0:6 1:3 1:6 "), "per epoch every 3: got '%s'", d3.log);
    /* a resumed fit goes on counting: one epoch (6 batches), then epochs 1 and 2 */
    lin r1 = { .log = "" }, r2 = { .log = "" };
    CHECK_OK(fit(tr, va, 1, 0, 4, NULL, ck, &r1, err, sizeof err));
    CHECK(!strcmp(r1.log, "0:4 "), "first epoch: got '%s'", r1.log);
    g_sanity = 0;
    CHECK_OK(fit(tr, va, 3, 0, 4, ck, NULL, &r2, err, sizeof err));
    CHECK(!strcmp(r2.log, "1:2 1:6 2:4 "), "resumed: got '%s' (want the uninterrupted run's)", r2.log);
    CHECK(g_sanity == 1, "resumed at an epoch's start: the sanity check runs (%d)", g_sanity);
    /* refusals */
    lin x = { .log = "" };
    volt_status st = fit(tr, va, 1, 1, 8, NULL, NULL, &x, err, sizeof err);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(err, "val_check_interval (8) is more than the 6 train batches") &&
          strstr(err, "check_val_every_n_epoch = 0"), "an interval past the epoch: %s", err);
    CHECK_OK(fit(tr, va, 2, 0, 8, NULL, NULL, &x, err, sizeof err));   /* across epochs it is fine: after 8 */
    CHECK(!strcmp(x.log, "1:2 "), "every 8 across epochs: got '%s'", x.log);
    /* accumulation 2 over 5-batch epochs (windows [0 1] [2 3] [4]): the count 8 falls on epoch 1's
     * batch 2, inside a window: validation at its end (batch 4) */
    volt_dataset *tr5 = vtest_rows4(20);
    lin w = { .log = "" };
    g_acc = 2;
    CHECK_OK(fit(tr5, va, 3, 0, 4, NULL, NULL, &w, err, sizeof err));
    g_acc = 1;
    CHECK(!strcmp(w.log, "0:4 1:4 2:2 "), "across epochs with accumulation: got '%s' (want '0:4 1:4 2:2 ')", w.log);
    /* a checkpoint written in on_train_batch_end before the validation due after that batch:
     * the resumed fit runs that validation first. Per epoch (after 4 and at 6): saved at 0:4 */
    char ckb[1100];
    snprintf(ckb, sizeof ckb, "%s/val_due.safetensors", vtest_tmpdir());
    lin s1 = { .log = "" }, s2 = { .log = "" };
    g_save_path = ckb;
    g_save_epoch = 0;
    g_save_batch = 4;
    CHECK_OK(fit(tr, va, 2, 1, 4, NULL, NULL, &s1, err, sizeof err));
    g_save_path = NULL;
    CHECK(!strcmp(s1.log, "0:4 1:4 "), "saving run: got '%s'", s1.log);
    g_sanity = 0;
    CHECK_OK(fit(tr, va, 2, 1, 4, ckb, NULL, &s2, err, sizeof err));
    CHECK(g_sanity == 0, "resumed inside an epoch: no sanity check (Lightning's restarting loop), ran %d", g_sanity);
    CHECK(!strcmp(s2.log, "0:4 1:4 "), "resumed from between batch 0:4 and its validation: got '%s' (want the "
          "uninterrupted '0:4 1:4 ')", s2.log);
    CHECK(!strstr(g_stderr, "warning"), "the same train loader: no warning: %s", g_stderr);
    /* resumed mid-epoch with another batch size: it goes on (Lightning's), saying the rest of the
     * epoch sees other samples */
    lin s3 = { .log = "" };
    g_bs = 2;
    CHECK_OK(fit(tr, va, 2, 1, 4, ckb, NULL, &s3, err, sizeof err));
    g_bs = 4;
    CHECK(strstr(g_stderr, "volt: warning: fit resumes at batch 4 of epoch 0 with a train loader of batch size 2 where the "
                 "checkpoint's run had 4") != NULL, "another batch size mid-epoch: %s", g_stderr);
    /* saved inside that validation: at its start (cut short: it runs again), at its end (not) */
    for (int k = 1; k <= 2; k++) {
        lin v1 = { .log = "" }, v2 = { .log = "" };
        g_save_path = ckb;
        g_save_in_val = k;
        CHECK_OK(fit(tr, va, 2, 1, 4, NULL, NULL, &v1, err, sizeof err));
        g_save_path = NULL;
        g_save_in_val = 0;
        CHECK_OK(fit(tr, va, 2, 1, 4, ckb, NULL, &v2, err, sizeof err));
        const char *want = k == 1 ? "0:4 1:4 " : "1:4 ";
        CHECK(!strcmp(v2.log, want), "saved in 0:4's validation %s: resumed '%s' (want '%s')", k == 1 ? "start" : "end",
              v2.log, want);
    }
    /* a stop that validation asks for (EarlyStopping's) ends the resumed fit at the same step */
    lin e1 = { .log = "", .stop_at_val = true }, e2 = { .log = "", .stop_at_val = true };
    g_save_path = ckb;
    CHECK_OK(fit(tr, va, 2, 1, 4, NULL, NULL, &e1, err, sizeof err));
    g_save_path = NULL;
    CHECK_OK(fit(tr, va, 2, 1, 4, ckb, NULL, &e2, err, sizeof err));
    CHECK(e1.end_step == 4 && e2.end_step == 4 && !strcmp(e2.log, "0:4 "), "a stop at 0:4's validation: uninterrupted "
          "ended at step %lld, resumed at %lld ('%s')", (long long)e1.end_step, (long long)e2.end_step, e2.log);
    /* ... and a checkpoint written in that validation's on_validation_end after the stop was asked
     * for (EarlyStopping before ModelCheckpoint): the resumed fit stops without validating again */
    lin f1 = { .log = "" }, f2 = { .log = "" };
    g_cb_stop = true;
    g_save_path = ckb;
    g_save_in_val = 2;
    CHECK_OK(fit(tr, va, 2, 1, 4, NULL, NULL, &f1, err, sizeof err));
    g_save_path = NULL;
    g_save_in_val = 0;
    g_cb_stop = false;
    CHECK_OK(fit(tr, va, 2, 1, 4, ckb, NULL, &f2, err, sizeof err));
    CHECK(f1.end_step == 4 && f2.end_step == 4 && !strcmp(f2.log, ""), "saved after the stop in on_validation_end: "
          "uninterrupted ended at step %lld, resumed at %lld ('%s')", (long long)f1.end_step, (long long)f2.end_step, f2.log);
    /* across epochs with accumulation 2 (the run above: '0:4 1:4 2:2 '): saved at 1:3, where the
     * count 8 fell inside the window [2 3] (validation at its end, 1:4), and at 1:4 itself */
    static const int64_t at[2] = { 3, 4 };
    for (int k = 0; k < 2; k++) {
        lin p1 = { .log = "" }, p2 = { .log = "" };
        g_acc = 2;
        g_save_path = ckb;
        g_save_epoch = 1;
        g_save_batch = at[k];
        CHECK_OK(fit(tr5, va, 3, 0, 4, NULL, NULL, &p1, err, sizeof err));
        g_save_path = NULL;
        CHECK_OK(fit(tr5, va, 3, 0, 4, ckb, NULL, &p2, err, sizeof err));
        g_acc = 1;
        CHECK(!strcmp(p1.log, "0:4 1:4 2:2 ") && !strcmp(p2.log, "1:4 2:2 "), "saved at 1:%lld: got '%s', resumed '%s' (want "
              "'1:4 2:2 ')", (long long)at[k], p1.log, p2.log);
    }
    volt_dataset_destroy(tr5);
    /* fast_dev_run: validation at the epoch's end whatever the interval says (Lightning's) */
    lin f = { .log = "" };
    g_fast = 1;
    CHECK_OK(fit(tr, va, 3, 1, 4, NULL, NULL, &f, err, sizeof err));
    g_fast = 0;
    CHECK(!strcmp(f.log, "0:1 "), "fast_dev_run: got '%s'", f.log);
    st = fit(tr, va, 1, 0, 0, NULL, NULL, &x, err, sizeof err);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(err, "check_val_every_n_epoch=0"), "None without a count: %s", err);
    st = fit(tr, va, 1, -1, 4, NULL, NULL, &x, err, sizeof err);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(err, "check_val_every_n_epoch must be"), "negative: %s", err);
    volt_dataset_destroy(tr);
    volt_dataset_destroy(va);
    return vtest_finish();
}
