/* on_train_batch_start returning VOLT_SKIP_EPOCH (Lightning's -1): the batch and the rest of the
 * epoch's training are skipped, and the epoch ends as any does — its epoch-interval scheduler
 * step, its validation, on_train_epoch_end — then the next epoch trains whole. A skip inside an
 * accumulation window drops the grads of the window's earlier batches (the weights are those of a
 * fit that never ran them, and a warning says so); a
 * checkpoint written in the skipped epoch's end resumes at the next epoch, to the uninterrupted
 * fit's weights; a callback's VOLT_SKIP_EPOCH is refused (only the module's is read, as
 * Lightning reads only the module's -1). (test_mpi_callbacks one_rank: one rank's skip is every rank's.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"

typedef struct mod {
    volt_tensor *w, *b;            /* first: vtest_lin4's */
    int64_t skip_epoch, skip_batch;   /* skip from this batch of this epoch (-1: never) */
    bool by_callback;              /* the callback asks, not the module */
    int64_t steps[3], ends[3];     /* training_step / on_train_batch_end calls per epoch */
    int64_t epoch;                 /* the current one, as on_train_batch_start saw it */
    int epoch_ends;
    char val[128];                 /* "epoch:batch_in_epoch " at each validation's start */
    const char *save_at_epoch_end; /* a checkpoint written in on_train_epoch_end of the skipped epoch */
    float lr_end;                  /* the optimizer's lr when fit ended */
} mod;

static volt_status m_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    mod *m = self;
    m->steps[m->epoch]++;
    return vtest_lin4_train(self, s, b, i);
}
static volt_status m_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_log(s, "val_loss", vtest_lin4_loss(self, s, b), 0);
}
static volt_status m_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.05f;
    o->use_scheduler = true;   /* StepLR per epoch: halves the lr at each epoch's end */
    o->scheduler.kind = VOLT_SCHED_STEP;
    o->scheduler.step_size = 1;
    o->scheduler.gamma = 0.5f;
    o->scheduler.interval = VOLT_SCHED_EVERY_EPOCH;
    return VOLT_OK;
}
static bool wants_skip(const mod *m, volt_trainer *t, int64_t i) {
    return volt_trainer_current_epoch(t) == m->skip_epoch && i >= m->skip_batch;
}
static volt_status m_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b;
    mod *m = self;
    m->epoch = volt_trainer_current_epoch(t);
    return !m->by_callback && wants_skip(m, t, i) ? VOLT_SKIP_EPOCH : VOLT_OK;
}
static volt_status m_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b;
    (void)i;
    ((mod *)self)->ends[volt_trainer_current_epoch(t)]++;
    return VOLT_OK;
}
static volt_status m_val_start(void *self, volt_trainer *t) {
    mod *m = self;
    if (volt_trainer_sanity_checking(t)) return VOLT_OK;
    size_t n = strlen(m->val);
    snprintf(m->val + n, sizeof m->val - n, "%lld:%lld ", (long long)volt_trainer_current_epoch(t),
             (long long)volt_trainer_batch_in_epoch(t));
    return VOLT_OK;
}
static volt_status m_epoch_end(void *self, volt_trainer *t) {
    mod *m = self;
    m->epoch_ends++;
    if (m->save_at_epoch_end && volt_trainer_current_epoch(t) == m->skip_epoch)
        return volt_trainer_save_checkpoint(t, m->save_at_epoch_end);
    return VOLT_OK;
}
static volt_status m_fit_end(void *self, volt_trainer *t) {
    ((mod *)self)->lr_end = volt_optimizer_lr(volt_trainer_optimizer(t));
    return VOLT_OK;
}
static const volt_module_ops ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "skipper", .setup = vtest_lin4_setup, .configure_optimizers = m_opt,
    .training_step = m_train, .validation_step = m_val, .on_train_batch_start = m_batch_start,
    .on_train_batch_end = m_batch_end, .on_validation_start = m_val_start, .on_train_epoch_end = m_epoch_end,
    .on_fit_end = m_fit_end,
};

/* the callback that asks instead of the module (mod.by_callback) */
static mod *g_cb_mod;
static volt_status cb_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self;
    (void)b;
    return g_cb_mod->by_callback && wants_skip(g_cb_mod, t, i) ? VOLT_SKIP_EPOCH : VOLT_OK;
}
static const volt_callback_ops skip_cb = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Skipper",
                                           .on_train_batch_start = cb_batch_start };

static char g_stderr[4096];

/* fit over 24 rows in batches of 4 (6 batches an epoch), validation at each epoch's end; the
 * weights when it ended in w[5] */
static char g_err[1024];
static void fit(mod *m, int64_t epochs, int64_t acc, const char *ckpt_in, float w[5], volt_status want) {
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    c.max_epochs = epochs;
    c.accumulate_grad_batches = acc;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_dataset *tr = vtest_rows4(24), *va = vtest_rows4(8);
    volt_loader *lt = vtest_loader(tr, 4, false), *lv = vtest_loader(va, 4, false);
    g_cb_mod = m;
    CHECK_OK(volt_trainer_add_callback(t, &skip_cb, NULL));
    char path[1100];
    snprintf(path, sizeof path, "%s/skip_epoch_stderr.txt", vtest_tmpdir());
    const int saved = vtest_stderr_to(path);
    const volt_status st = volt_trainer_fit(t, &ops, m, lt, lv, ckpt_in);
    vtest_stderr_back(saved, path, g_stderr, sizeof g_stderr);
    snprintf(g_err, sizeof g_err, "%s", volt_trainer_errmsg(t));
    CHECK(st == want, "fit: %s (want %s): %s", volt_status_str(st), volt_status_str(want), g_err);
    CHECK_OK(volt_tensor_to_host(m->w, w));
    CHECK_OK(volt_tensor_to_host(m->b, w + 4));
    volt_trainer_destroy(t);
    volt_loader_destroy(lt);
    volt_loader_destroy(lv);
    volt_dataset_destroy(tr);
    volt_dataset_destroy(va);
}

static bool same(const float a[5], const float b[5]) { return !memcmp(a, b, 5 * sizeof(float)); }

int main(void) {
    vtest_check_accelerator();
    float wa[5], wb[5], wc[5], wr[5], wn[5];

    /* skipped at batch 2 of epoch 0: two batches train there, six in epoch 1; the epoch's end
     * validates (at batch 6 of 6, as a whole epoch's), steps the StepLR and runs its hooks */
    mod a = { .skip_epoch = 0, .skip_batch = 2 };
    fit(&a, 2, 1, NULL, wa, VOLT_OK);
    CHECK(a.steps[0] == 2 && a.steps[1] == 6, "trained batches per epoch: %lld, %lld (want 2, 6)", (long long)a.steps[0],
          (long long)a.steps[1]);
    CHECK(a.ends[0] == 2 && a.ends[1] == 6, "on_train_batch_end per epoch: %lld, %lld (want 2, 6)", (long long)a.ends[0],
          (long long)a.ends[1]);
    CHECK(!strcmp(a.val, "0:6 1:6 "), "validations: '%s' (want '0:6 1:6 ')", a.val);
    CHECK(a.epoch_ends == 2, "on_train_epoch_end ran %d times (want 2)", a.epoch_ends);
    CHECK_CLOSE(a.lr_end, 0.05 * 0.25, 1e-6, 0);   /* both epochs' scheduler steps */
    CHECK(!strstr(g_stderr, "dropped"), "no window was cut short, yet: %s", g_stderr);

    /* a callback's VOLT_SKIP_EPOCH is refused, naming it (only the module's is read, as Lightning) */
    mod ac = { .skip_epoch = 0, .skip_batch = 2, .by_callback = true };
    fit(&ac, 2, 1, NULL, wc, VOLT_ERR_INVALID_ARG);
    CHECK(strstr(g_err, "Skipper.on_train_batch_start returned VOLT_SKIP_EPOCH: only the module's"),
          "a callback's skip: '%s'", g_err);
    CHECK(ac.steps[0] == 2 && ac.steps[1] == 0, "a callback's skip: trained %lld, %lld (want 2, 0)", (long long)ac.steps[0],
          (long long)ac.steps[1]);

    /* no skip: other weights (the skip changed what trained) */
    mod n = { .skip_epoch = -1 };
    fit(&n, 2, 1, NULL, wn, VOLT_OK);
    CHECK(!same(wa, wn), "a skip left the weights of a whole fit");
    CHECK(n.steps[0] == 6, "no skip: %lld batches in epoch 0", (long long)n.steps[0]);

    /* accumulate 2: a skip at batch 3 cuts the window of batches 2-3 short, and batch 2's grads
     * are dropped: the weights are those of a fit that skipped at batch 2 (which never ran it) */
    mod b3 = { .skip_epoch = 0, .skip_batch = 3 }, b2 = { .skip_epoch = 0, .skip_batch = 2 };
    fit(&b3, 2, 2, NULL, wa, VOLT_OK);
    CHECK(strstr(g_stderr, "skipped the rest of epoch 0 at batch 3") && strstr(g_stderr, "batches 2 to 2 are dropped"),
          "the warning of the cut window: '%s'", g_stderr);
    fit(&b2, 2, 2, NULL, wb, VOLT_OK);
    CHECK(b3.steps[0] == 3 && b2.steps[0] == 2, "accumulate 2: trained %lld and %lld batches", (long long)b3.steps[0],
          (long long)b2.steps[0]);
    CHECK(same(wa, wb), "batch 2's grads of the cut window reached a step: %g %g %g %g %g vs %g %g %g %g %g", wa[0], wa[1],
          wa[2], wa[3], wa[4], wb[0], wb[1], wb[2], wb[3], wb[4]);

    /* a checkpoint written in the skipped epoch's on_train_epoch_end resumes at epoch 1 (not at
     * the skipped batches) and ends on the uninterrupted fit's weights */
    char ck[1100];
    snprintf(ck, sizeof ck, "%s/skip_epoch.ckpt", vtest_tmpdir());
    mod s1 = { .skip_epoch = 0, .skip_batch = 2, .save_at_epoch_end = ck };
    fit(&s1, 1, 1, NULL, wr, VOLT_OK);
    mod s2 = { .skip_epoch = 0, .skip_batch = 2 };
    fit(&s2, 2, 1, ck, wr, VOLT_OK);
    mod full = { .skip_epoch = 0, .skip_batch = 2 };
    fit(&full, 2, 1, NULL, wa, VOLT_OK);
    CHECK(s2.steps[0] == 0 && s2.steps[1] == 6, "resumed: trained %lld batches of epoch 0, %lld of epoch 1 (want 0, 6)",
          (long long)s2.steps[0], (long long)s2.steps[1]);
    CHECK(s2.epoch_ends == 1, "resumed: on_train_epoch_end ran %d times (want 1: epoch 1's)", s2.epoch_ends);
    CHECK(same(wa, wr), "the resumed fit ended on other weights than the uninterrupted one");
    CHECK_CLOSE(s2.lr_end, 0.05 * 0.25, 1e-6, 0);

    /* a skip at an epoch's first batch: nothing trains in it, the epoch still ends */
    mod z = { .skip_epoch = 1, .skip_batch = 0 };
    fit(&z, 2, 1, NULL, wa, VOLT_OK);
    CHECK(z.steps[0] == 6 && z.steps[1] == 0 && z.epoch_ends == 2 && !strcmp(z.val, "0:6 1:6 "),
          "skip at batch 0: trained %lld, %lld, %d epoch ends, validations '%s'", (long long)z.steps[0],
          (long long)z.steps[1], z.epoch_ends, z.val);
    return vtest_finish();
}
