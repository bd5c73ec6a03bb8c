/* Trainer: Lightning hook order, exact resume (bitwise; with optimizer parameter groups too,
 * and another grouping refused), corrupt checkpoints leave the model untouched,
 * configuration errors. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stddef.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#include "core/internal.h"   /* volt__params_inits */

#include "trainer_net.h"

/* volt_trainer_config_check's cases (test_flags) */
static void cfg_bad_max_time(volt_trainer_config *c) { c->max_time = "1:2:3"; }
static void cfg_nondeterministic(volt_trainer_config *c) { c->deterministic = false; }
static void cfg_bad_val_check(volt_trainer_config *c) { c->val_check_interval = 3; c->accumulate_grad_batches = 2; }
static void cfg_bad_precision(volt_trainer_config *c) { c->precision = "8-mixed"; }
static void cfg_bad_strategy(volt_trainer_config *c) { c->strategy = "fsdpp"; }
static void cfg_single_two_devices(volt_trainer_config *c) { c->strategy = "single"; c->devices = 2; }
static void cfg_no_such_accelerator(volt_trainer_config *c) { c->accelerator = "tpu"; }
static void cfg_logger_escapes(volt_trainer_config *c) { c->logger_name = "../../logs"; }
static void cfg_logger_absolute(volt_trainer_config *c) { c->logger_name = "/tmp/logs"; }

/* ---- a recording callback --------------------------------------------------------------- */
typedef struct { char *log; size_t cap; } cbrec;
#define CREC(hook) static volt_status c_##hook(void *self, volt_trainer *t) { cbrec *c = self; rec(c->log, c->cap, #hook); return VOLT_OK; }
CREC(on_fit_start) CREC(on_fit_end) CREC(on_sanity_check_start) CREC(on_sanity_check_end) CREC(on_train_start)
CREC(on_train_end) CREC(on_train_epoch_start) CREC(on_train_epoch_end) CREC(on_validation_start)
CREC(on_validation_end) CREC(on_validation_epoch_start) CREC(on_validation_epoch_end) CREC(on_after_backward)
CREC(on_before_optimizer_step)
static volt_status c_on_train_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) { cbrec *c = self; rec(c->log, c->cap, "on_train_batch_start"); return VOLT_OK; }
static volt_status c_on_train_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) { cbrec *c = self; rec(c->log, c->cap, "on_train_batch_end"); return VOLT_OK; }
static volt_status c_on_validation_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) { cbrec *c = self; rec(c->log, c->cap, "on_validation_batch_end"); return VOLT_OK; }
static volt_status c_on_before_backward(void *self, volt_trainer *t, const volt_tensor *l) { cbrec *c = self; rec(c->log, c->cap, "on_before_backward"); return VOLT_OK; }
/* version 6: after the step, the grads still there (their norm > 0) */
static volt_status c_on_before_zero_grad(void *self, volt_trainer *t) {
    cbrec *c = self;
    rec(c->log, c->cap, volt_params_grad_sqnorm(volt_trainer_params(t)) > 0 ? "on_before_zero_grad" : "on_before_zero_grad(no grads)");
    return VOLT_OK;
}
/* version 3 */
CREC(on_test_start) CREC(on_test_end) CREC(on_test_epoch_start) CREC(on_test_epoch_end) CREC(on_predict_start)
CREC(on_predict_end) CREC(on_predict_epoch_start) CREC(on_predict_epoch_end)
#define CREC_B(hook) static volt_status c_##hook(void *self, volt_trainer *t, const volt_batch *b, int64_t i) { \
    cbrec *c = self; char w[64]; snprintf(w, sizeof w, #hook "(%lld)", (long long)i); rec(c->log, c->cap, w); return VOLT_OK; }
CREC_B(on_validation_batch_start) CREC_B(on_test_batch_start) CREC_B(on_test_batch_end) CREC_B(on_predict_batch_start)
/* the prediction is the step's, readable here: its row count is the batch's */
static volt_status c_on_predict_batch_end(void *self, volt_trainer *t, const volt_tensor *pred, const volt_batch *b,
                                          int64_t i) {
    cbrec *c = self;
    char w[64];
    snprintf(w, sizeof w, "on_predict_batch_end(%lld,%lld/%lld)", (long long)i, (long long)pred->shape.d[0],
             (long long)b->size);
    rec(c->log, c->cap, w);
    return VOLT_OK;
}

static const volt_callback_ops rec_cb_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "Recorder",
    .on_fit_start = c_on_fit_start, .on_fit_end = c_on_fit_end, .on_sanity_check_start = c_on_sanity_check_start,
    .on_sanity_check_end = c_on_sanity_check_end, .on_train_start = c_on_train_start, .on_train_end = c_on_train_end,
    .on_train_epoch_start = c_on_train_epoch_start, .on_train_epoch_end = c_on_train_epoch_end,
    .on_train_batch_start = c_on_train_batch_start, .on_train_batch_end = c_on_train_batch_end,
    .on_validation_start = c_on_validation_start, .on_validation_end = c_on_validation_end,
    .on_validation_epoch_start = c_on_validation_epoch_start, .on_validation_epoch_end = c_on_validation_epoch_end,
    .on_validation_batch_end = c_on_validation_batch_end, .on_before_backward = c_on_before_backward,
    .on_after_backward = c_on_after_backward, .on_before_optimizer_step = c_on_before_optimizer_step,
    .destroy = free,
    .on_validation_batch_start = c_on_validation_batch_start, .on_test_start = c_on_test_start,
    .on_test_end = c_on_test_end, .on_test_epoch_start = c_on_test_epoch_start, .on_test_epoch_end = c_on_test_epoch_end,
    .on_test_batch_start = c_on_test_batch_start, .on_test_batch_end = c_on_test_batch_end,
    .on_predict_start = c_on_predict_start, .on_predict_epoch_start = c_on_predict_epoch_start,
    .on_predict_batch_start = c_on_predict_batch_start, .on_predict_batch_end = c_on_predict_batch_end,
    .on_predict_epoch_end = c_on_predict_epoch_end, .on_predict_end = c_on_predict_end,
    .on_before_zero_grad = c_on_before_zero_grad,
};
/* the same table declared as version 2: the trainer calls none of version 3's hooks */
static volt_callback_ops rec_cb_ops_v2;

static volt_status net_predict(void *self, volt_step *s, const volt_batch *b, int64_t i, volt_tensor **out) {
    net *m = self;
    rec(m->log, m->cap, "predict_step");
    *out = net_fwd(m, s, b);
    return VOLT_OK;
}
static volt_status pred_sink(void *ctx, const volt_batch *b, const volt_tensor *pred) {
    rec(ctx, 8192, "out");
    return VOLT_OK;
}

/* the module's version-2 hooks, recorded as "<hook>(mod)" */
#define MREC2(hook) static volt_status m2_##hook(void *self, volt_trainer *t) { net *m = self; rec(m->log, m->cap, #hook "(mod)"); return VOLT_OK; }
MREC2(on_train_start) MREC2(on_train_end) MREC2(on_validation_start) MREC2(on_validation_end) MREC2(on_test_start)
MREC2(on_test_end) MREC2(on_predict_start) MREC2(on_predict_end) MREC2(on_predict_epoch_start) MREC2(on_predict_epoch_end)
MREC2(on_after_backward) MREC2(on_before_zero_grad)
#define MREC2_B(hook) static volt_status m2_##hook(void *self, volt_trainer *t, const volt_batch *b, int64_t i) { \
    net *m = self; rec(m->log, m->cap, #hook "(mod)"); return VOLT_OK; }
MREC2_B(on_validation_batch_start) MREC2_B(on_validation_batch_end) MREC2_B(on_test_batch_start)
MREC2_B(on_test_batch_end) MREC2_B(on_predict_batch_start)
static volt_status m2_on_predict_batch_end(void *self, volt_trainer *t, const volt_tensor *pred, const volt_batch *b, int64_t i) {
    net *m = self;
    rec(m->log, m->cap, pred && pred->shape.d[0] == b->size ? "on_predict_batch_end(mod)" : "on_predict_batch_end(mod,bad)");
    return VOLT_OK;
}
static volt_status m2_on_before_backward(void *self, volt_trainer *t, const volt_tensor *loss) {
    net *m = self;
    rec(m->log, m->cap, loss && volt_tensor_numel(loss) == 1 ? "on_before_backward(mod)" : "on_before_backward(mod,bad)");
    return VOLT_OK;
}
static volt_status m_failing_zero_grad(void *self, volt_trainer *t) {
    (void)self;
    return volt_trainer_fail(t, VOLT_ERR_IO, "the grads went elsewhere");
}
static volt_module_ops net2_ops(void) {
    volt_module_ops o = net_ops;
    o.predict_step = net_predict;
    o.on_train_start = m2_on_train_start; o.on_train_end = m2_on_train_end;
    o.on_validation_start = m2_on_validation_start; o.on_validation_end = m2_on_validation_end;
    o.on_validation_batch_start = m2_on_validation_batch_start; o.on_validation_batch_end = m2_on_validation_batch_end;
    o.on_test_start = m2_on_test_start; o.on_test_end = m2_on_test_end;
    o.on_test_batch_start = m2_on_test_batch_start; o.on_test_batch_end = m2_on_test_batch_end;
    o.on_predict_start = m2_on_predict_start; o.on_predict_end = m2_on_predict_end;
    o.on_predict_epoch_start = m2_on_predict_epoch_start; o.on_predict_epoch_end = m2_on_predict_epoch_end;
    o.on_predict_batch_start = m2_on_predict_batch_start; o.on_predict_batch_end = m2_on_predict_batch_end;
    o.on_before_backward = m2_on_before_backward; o.on_after_backward = m2_on_after_backward;
    o.on_before_zero_grad = m2_on_before_zero_grad;   /* version 5 */
    return o;
}

/* A trainer of config c with a Recorder (table ops) writing into log. */
static volt_trainer *rec_trainer(const volt_trainer_config *c, const volt_callback_ops *ops, char *log, size_t cap) {
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(c, &t));
    cbrec *cr = malloc(sizeof *cr);
    cr->log = log;
    cr->cap = cap;
    CHECK_OK(volt_trainer_add_callback(t, ops, cr));
    return t;
}

/* ---- hook order ------------------------------------------------------------------------------ */
static void test_hook_order(volt_dataset *ds) {
    char log[8192] = "";
    net m = { .in = IN, .hidden = 8, .out = NC, .log = log, .cap = sizeof log };
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_epochs = 1;
    c.limit_train_batches = 2;
    c.limit_val_batches = 1;
    c.num_sanity_val_steps = 1;
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = false;
    volt_trainer *t;
    CHECK_OK(volt_trainer_create(&c, &t));
    cbrec *cr = malloc(sizeof *cr);
    cr->log = log;
    cr->cap = sizeof log;
    CHECK_OK(volt_trainer_add_callback(t, &rec_cb_ops, cr));
    volt_loader *tl = make_loader(ds, 8, false, 0), *vl = make_loader(ds, 8, false, 0);
    const volt_module_ops m2 = net2_ops();   /* every module hook (version 2) */
    CHECK_OK(volt_trainer_fit(t, &m2, &m, tl, vl, NULL));
    const char *val =
        "on_validation_start on_validation_start(mod) on_validation_epoch_start on_validation_epoch_start(mod) "
        "on_validation_batch_start(0) on_validation_batch_start(mod) validation_step on_validation_batch_end "
        "on_validation_batch_end(mod) on_validation_epoch_end on_validation_epoch_end(mod) on_validation_end "
        "on_validation_end(mod) ";
    const char *batch =
        "on_train_batch_start on_train_batch_start(mod) training_step on_before_backward on_before_backward(mod) "
        "on_after_backward on_after_backward(mod) on_before_optimizer_step on_before_optimizer_step(mod) "
        "on_before_zero_grad on_before_zero_grad(mod) on_train_batch_end on_train_batch_end(mod) ";
    char want[8192];
    snprintf(want, sizeof want,
             "on_fit_start on_fit_start(mod) on_sanity_check_start %son_sanity_check_end on_train_start "
             "on_train_start(mod) on_train_epoch_start on_train_epoch_start(mod) %s%s%son_train_epoch_end "
             "on_train_epoch_end(mod) on_train_end on_train_end(mod) on_fit_end on_fit_end(mod) ",
             val, batch, batch, val);
    CHECK(!strcmp(log, want), "hook order\n got:  %s\n want: %s", log, want);
    double v;
    CHECK(volt_trainer_metric(t, "val_acc", &v) && volt_trainer_metric(t, "train_loss_epoch", &v) &&
          volt_trainer_metric(t, "train_loss_step", &v), "metrics logged");
    CHECK(volt_trainer_global_step(t) == 2, "global_step %lld", (long long)volt_trainer_global_step(t));
    volt_trainer_destroy(t);   /* it holds m's weights: another trainer sets m up afresh only once it is gone */
    /* test and predict (version 3's hooks): 2 batches of 8 each */
    c.limit_test_batches = c.limit_predict_batches = 2;
    volt_trainer *t2 = rec_trainer(&c, &rec_cb_ops, log, sizeof log);
    volt_module_ops pops = net_ops;   /* version 2's module hooks left NULL here ... */
    pops.predict_step = net_predict;
    log[0] = 0;
    CHECK_OK(volt_trainer_test(t2, &pops, &m, vl, NULL));
    const char *want_test = "on_test_start on_test_epoch_start on_test_batch_start(0) validation_step on_test_batch_end(0) "
                            "on_test_batch_start(1) validation_step on_test_batch_end(1) on_test_epoch_end on_test_end ";
    CHECK(!strcmp(log, want_test), "test hook order\n got:  %s\n want: %s", log, want_test);
    log[0] = 0;
    CHECK_OK(volt_trainer_predict(t2, &pops, &m, vl, NULL, pred_sink, log));
    const char *want_pred = "on_predict_start on_predict_epoch_start on_predict_batch_start(0) predict_step out "
                            "on_predict_batch_end(0,8/8) on_predict_batch_start(1) predict_step out "
                            "on_predict_batch_end(1,8/8) on_predict_epoch_end on_predict_end ";
    CHECK(!strcmp(log, want_pred), "predict hook order\n got:  %s\n want: %s", log, want_pred);
    /* ... and set: each after the callbacks' hook of the same name */
    log[0] = 0;
    CHECK_OK(volt_trainer_test(t2, &m2, &m, vl, NULL));
    const char *want_test2 = "on_test_start on_test_start(mod) on_test_epoch_start on_test_batch_start(0) "
                             "on_test_batch_start(mod) validation_step on_test_batch_end(0) on_test_batch_end(mod) "
                             "on_test_batch_start(1) on_test_batch_start(mod) validation_step on_test_batch_end(1) "
                             "on_test_batch_end(mod) on_test_epoch_end on_test_end on_test_end(mod) ";
    CHECK(!strcmp(log, want_test2), "test hook order, module hooks\n got:  %s\n want: %s", log, want_test2);
    log[0] = 0;
    CHECK_OK(volt_trainer_predict(t2, &m2, &m, vl, NULL, pred_sink, log));
    const char *want_pred2 = "on_predict_start on_predict_start(mod) on_predict_epoch_start on_predict_epoch_start(mod) "
                             "on_predict_batch_start(0) on_predict_batch_start(mod) predict_step out "
                             "on_predict_batch_end(0,8/8) on_predict_batch_end(mod) on_predict_batch_start(1) "
                             "on_predict_batch_start(mod) predict_step out on_predict_batch_end(1,8/8) "
                             "on_predict_batch_end(mod) on_predict_epoch_end on_predict_epoch_end(mod) on_predict_end "
                             "on_predict_end(mod) ";
    CHECK(!strcmp(log, want_pred2), "predict hook order, module hooks\n got:  %s\n want: %s", log, want_pred2);
    /* the same table declared as version 1: none of them */
    volt_module_ops m1 = m2;
    m1.version = 1u;
    log[0] = 0;
    CHECK_OK(volt_trainer_predict(t2, &m1, &m, vl, NULL, pred_sink, log));
    CHECK(!strstr(log, "(mod)"), "a version-1 module table got version-2 hooks: %s", log);
    volt_trainer_destroy(t2);
    /* a version-2 table: its (here set) version-3 entries are not there for the trainer */
    rec_cb_ops_v2 = rec_cb_ops;
    rec_cb_ops_v2.version = 2u;
    t2 = rec_trainer(&c, &rec_cb_ops_v2, log, sizeof log);
    log[0] = 0;
    CHECK_OK(volt_trainer_test(t2, &pops, &m, vl, NULL));
    CHECK_OK(volt_trainer_predict(t2, &pops, &m, vl, NULL, pred_sink, log));
    const char *want_v2 = "on_test_start validation_step on_test_batch_end(0) validation_step on_test_batch_end(1) "
                          "on_test_epoch_end on_test_end predict_step out predict_step out ";
    CHECK(!strcmp(log, want_v2), "a version-2 table\n got:  %s\n want: %s", log, want_v2);
    volt_trainer_destroy(t2);
    /* on_before_zero_grad: a version-5 callback table and a version-4 module table carry the
     * pointer and do not get it; a failing one fails fit naming it, its step counted (the
     * weights moved: global_step 1, so a checkpoint saved then resumes after it) */
    static volt_callback_ops rec_cb_ops_v5;
    rec_cb_ops_v5 = rec_cb_ops;
    rec_cb_ops_v5.version = 5u;
    volt_module_ops m4 = m2;
    m4.version = 4u;
    t2 = rec_trainer(&c, &rec_cb_ops_v5, log, sizeof log);
    log[0] = 0;
    CHECK_OK(volt_trainer_fit(t2, &m4, &m, tl, vl, NULL));
    CHECK(strstr(log, "on_before_optimizer_step(mod)") && !strstr(log, "on_before_zero_grad"),
          "older tables got on_before_zero_grad: %s", log);
    volt_trainer_destroy(t2);
    volt_module_ops mf = m2;
    mf.on_before_zero_grad = m_failing_zero_grad;
    CHECK_OK(volt_trainer_create(&c, &t2));
    volt_status st = volt_trainer_fit(t2, &mf, &m, tl, vl, NULL);
    CHECK(st == VOLT_ERR_IO && strstr(volt_trainer_errmsg(t2), "on_before_zero_grad") &&
          strstr(volt_trainer_errmsg(t2), "the grads went elsewhere") && volt_trainer_global_step(t2) == 1,
          "a failing on_before_zero_grad: %s (%s), global_step %lld", volt_status_str(st), volt_trainer_errmsg(t2),
          (long long)volt_trainer_global_step(t2));
    volt_trainer_destroy(t2);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

/* ---- exact resume ------------------------------------------------------------------------------ */
typedef struct { int64_t stop_at; const char *path; } stopper;
static volt_status stop_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    stopper *s = self;
    if (volt_trainer_current_epoch(t) == 1 && i == s->stop_at) {
        volt_status st = volt_trainer_save_checkpoint(t, s->path);
        if (st < 0) return st;
        return VOLT_STOP;
    }
    return VOLT_OK;
}
static const volt_callback_ops stopper_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Stopper",
                                               .on_train_batch_end = stop_batch_end, .destroy = free };

/* Element 0 of an f32 parameter, read / written through copies (it lives on the device). */
static float first_elem(const volt_tensor *p) {
    float *h = malloc(volt_tensor_bytes(p)), v;
    volt_tensor_to_host(p, h);
    v = h[0];
    free(h);
    return v;
}
static void set_first_elem(volt_tensor *p, float v) {
    float *h = malloc(volt_tensor_bytes(p));
    volt_tensor_to_host(p, h);
    h[0] = v;
    volt_tensor_copy_from_host(p, h);
    free(h);
}


static void test_exact_resume(volt_dataset *ds, int workers) {
    char root[512], path[600];
    snprintf(root, sizeof root, "%s/resume", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(path, sizeof path, "%s/mid.safetensors", root);
    /* A: 3 epochs straight */
    net ma = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *ta = make_trainer(3, root);
    volt_loader *tl = make_loader(ds, 4, true, workers), *vl = make_loader(ds, 16, false, 0);
    CHECK_OK(volt_trainer_fit(ta, &net_ops, &ma, tl, vl, NULL));
    int64_t na, nb;
    float *wa = snapshot(ta, &na);
    /* B: stop in epoch 1 after batch 37 (an accumulation boundary), then resume in a fresh trainer */
    net mb = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *tb = make_trainer(3, root);
    stopper *sp = malloc(sizeof *sp);
    sp->stop_at = 37;
    sp->path = path;
    CHECK_OK(volt_trainer_add_callback(tb, &stopper_ops, sp));
    CHECK_OK(volt_trainer_fit(tb, &net_ops, &mb, tl, vl, NULL));
    /* a stop inside an epoch ends it (its end hooks run and it counts, as Lightning's) */
    CHECK(volt_trainer_current_epoch(tb) == 2 && volt_trainer_batch_in_epoch(tb) == 0,
          "stopped at epoch %lld batch %lld (want the stopped epoch 1 counted: 2, 0)", (long long)volt_trainer_current_epoch(tb),
          (long long)volt_trainer_batch_in_epoch(tb));
    volt_trainer_destroy(tb);
    net mc = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *tc = make_trainer(3, root);
    volt_status st = volt_trainer_fit(tc, &net_ops, &mc, tl, vl, path);
    CHECK(st == VOLT_OK, "resume: %s", volt_trainer_errmsg(tc));
    float *wc = snapshot(tc, &nb);
    /* 203 samples / batch 4 = 51 batches an epoch; the resumed run does only what was left */
    CHECK(ma.steps_run == 3 * 51 && mc.steps_run == 3 * 51 - (51 + 38), "training steps: straight %lld, resumed %lld",
          (long long)ma.steps_run, (long long)mc.steps_run);
    CHECK(na == nb && memcmp(wa, wc, sizeof(float) * (size_t)na) == 0, "resumed weights differ from the uninterrupted run (workers=%d)", workers);
    CHECK(volt_trainer_global_step(ta) == volt_trainer_global_step(tc), "global steps %lld vs %lld",
          (long long)volt_trainer_global_step(ta), (long long)volt_trainer_global_step(tc));
    double a, c;
    CHECK(volt_trainer_metric(ta, "val_loss", &a) && volt_trainer_metric(tc, "val_loss", &c) && a == c, "final val_loss equal");
    free(wa); free(wc);
    volt_trainer_destroy(ta);
    volt_trainer_destroy(tc);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

/* ---- parameter groups: fit, checkpoint, exact resume; another grouping is refused ----------- */
static int groups_case;   /* 0: none; 1: biases (no decay, lr x3) + fc2.weight (lr x0.5); 2: biases only;
                             3: as 1 with the biases named one by one */
static volt_status groups_opt(void *self, volt_optim_setup *o) {
    VOLT_TRY(net_opt(self, o));
    volt_optimizer_config *c = &o->optimizer;
    c->n_groups = groups_case == 0 ? 0 : groups_case == 2 ? 1 : 2;
    c->groups[0] = (volt_optim_group){ .params = groups_case == 3 ? "fc1.bias,fc2.bias" : "*.bias", .lr = 1.5e-2f, .weight_decay = 0.f };
    c->groups[1] = (volt_optim_group){ .params = "fc2.weight", .lr = 2.5e-3f, .weight_decay = NAN };
    return VOLT_OK;
}

static volt_status groups_typo_opt(void *self, volt_optim_setup *o) {
    VOLT_TRY(groups_opt(self, o));
    o->optimizer.groups[0].params = "fc3.*";
    return VOLT_OK;
}

static void test_groups_resume(volt_dataset *ds) {
    char root[512], path[600], path0[600];
    snprintf(root, sizeof root, "%s/groups", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(path, sizeof path, "%s/mid.safetensors", root);
    snprintf(path0, sizeof path0, "%s/plain.safetensors", root);
    volt_module_ops ops = net_ops;
    ops.configure_optimizers = groups_opt;
    volt_loader *tl = make_loader(ds, 4, true, 0), *vl = make_loader(ds, 16, false, 0);
    /* A: 3 epochs straight with groups; P: the same without groups (must differ) */
    groups_case = 1;
    net ma = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *ta = make_trainer(3, root);
    volt_lr_monitor_config lmc;
    volt_lr_monitor_config_init(&lmc);
    lmc.log_momentum = lmc.log_weight_decay = true;
    CHECK_OK(volt_add_lr_monitor_ex(ta, &lmc));
    CHECK_OK(volt_add_csv_logger(ta));   /* LearningRateMonitor needs a logger (Lightning's rule) */
    CHECK_OK(volt_trainer_fit(ta, &ops, &ma, tl, vl, NULL));
    volt_optimizer *oa = volt_trainer_optimizer(ta);
    /* LearningRateMonitor: Lightning's names for unnamed groups, pg1 the default group */
    double pg[3] = { 0, 0, 0 }, one = 0;
    CHECK(volt_trainer_metric(ta, "lr-AdamW/pg1", &pg[0]) && volt_trainer_metric(ta, "lr-AdamW/pg2", &pg[1]) &&
          volt_trainer_metric(ta, "lr-AdamW/pg3", &pg[2]) && !volt_trainer_metric(ta, "lr-AdamW/pg4", &one) &&
          !volt_trainer_metric(ta, "lr-AdamW", &one), "LearningRateMonitor: lr-AdamW/pg1..pg3, no lr-AdamW");
    CHECK(pg[0] > 0 && fabs(pg[1] / pg[0] - 3.0) < 1e-6 && fabs(pg[2] / pg[0] - 0.5) < 1e-6,
          "LearningRateMonitor: group lrs %g %g %g, want ratios 1 : 3 : 0.5 (scheduled)", pg[0], pg[1], pg[2]);
    /* log_momentum / log_weight_decay: AdamW's beta1 for every group, each group's own decay */
    for (int g = 0; g < 3; g++) {
        char n[64];
        double mom = -1, wd = -1;
        snprintf(n, sizeof n, "lr-AdamW/pg%d-momentum", g + 1);
        const bool hm = volt_trainer_metric(ta, n, &mom);
        snprintf(n, sizeof n, "lr-AdamW/pg%d-weight_decay", g + 1);
        const bool hw = volt_trainer_metric(ta, n, &wd);
        CHECK(hm && hw && fabs(mom - volt_optimizer_get_config(oa)->beta1) < 1e-7 &&
                  fabs(wd - volt_optimizer_group_weight_decay(oa, g)) < 1e-9,
              "LearningRateMonitor group %d: momentum %g (want beta1 %g), weight_decay %g (want %g)", g + 1, mom,
              (double)volt_optimizer_get_config(oa)->beta1, wd, (double)volt_optimizer_group_weight_decay(oa, g));
    }
    CHECK(volt_optimizer_group_weight_decay(oa, 1) == 0.f && volt_optimizer_group_weight_decay(oa, 0) > 0.f,
          "the groups' decays differ (pg2 none), so the check above tells them apart");
    CHECK(volt_optimizer_group_count(oa) == 3 && volt_optimizer_group_param_count(oa, 0) == 1 &&
          volt_optimizer_group_param_count(oa, 1) == 2 && volt_optimizer_group_param_count(oa, 2) == 1,
          "fit with groups: configure_optimizers' groups reached the optimizer");
    int64_t na, nb, np;
    float *wa = snapshot(ta, &na);
    groups_case = 0;
    net mp = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *tp = make_trainer(1, root);
    CHECK_OK(volt_trainer_fit(tp, &ops, &mp, tl, vl, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(tp, path0));   /* a checkpoint without groups */
    volt_trainer_destroy(tp);
    mp = (net){ .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    tp = make_trainer(3, root);
    CHECK_OK(volt_add_lr_monitor(tp));
    CHECK_OK(volt_add_csv_logger(tp));
    CHECK_OK(volt_trainer_fit(tp, &ops, &mp, tl, vl, NULL));
    CHECK(volt_trainer_metric(tp, "lr-AdamW", &one) && !volt_trainer_metric(tp, "lr-AdamW/pg1", &one) &&
              !volt_trainer_metric(tp, "lr-AdamW-momentum", &one) && !volt_trainer_metric(tp, "lr-AdamW-weight_decay", &one),
          "LearningRateMonitor: one group logs lr-AdamW (and, flags off, no momentum or weight_decay)");
    float *wp = snapshot(tp, &np);
    CHECK(np == na && memcmp(wa, wp, sizeof(float) * (size_t)na) != 0, "groups changed nothing in the fit");
    volt_trainer_destroy(tp);
    /* B: stop in epoch 1 with a checkpoint; C: resume it in a fresh trainer */
    groups_case = 1;
    net mb = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *tb = make_trainer(3, root);
    stopper *sp = malloc(sizeof *sp);
    sp->stop_at = 37;
    sp->path = path;
    CHECK_OK(volt_trainer_add_callback(tb, &stopper_ops, sp));
    CHECK_OK(volt_trainer_fit(tb, &ops, &mb, tl, vl, NULL));
    volt_trainer_destroy(tb);
    volt_st_file *f = NULL;
    CHECK_OK(volt_st_open(path, &f, NULL, 0));
    const char *rec = f ? volt_st_meta(f, "volt.optimizer.groups") : NULL;
    CHECK(rec && strstr(rec, "\"params\":\"*.bias\"") && strstr(rec, "\"n_params\":2") && strstr(rec, "\"params\":null"),
          "the checkpoint records the groups: %s", rec ? rec : "(none)");
    volt_st_close(f);
    net mc = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
    volt_trainer *tc = make_trainer(3, root);
    volt_status st = volt_trainer_fit(tc, &ops, &mc, tl, vl, path);
    CHECK(st == VOLT_OK, "resume with groups: %s", volt_trainer_errmsg(tc));
    float *wc = st == VOLT_OK ? snapshot(tc, &nb) : NULL;
    CHECK(wc && na == nb && memcmp(wa, wc, sizeof(float) * (size_t)na) == 0, "groups: resumed weights differ from the uninterrupted run");
    volt_trainer_destroy(tc);
    /* another grouping: refused, saying why */
    static const struct { int gcase; int ck; const char *msg; } bad[] = {
        { 2, 1, "saved with 3 optimizer parameter groups, this run has 2" },
        { 0, 1, "saved with 3 optimizer parameter groups, this run has 1" },
        { 3, 1, "optimizer parameter group 1 is '*.bias' there, 'fc1.bias,fc2.bias' in this run" },
        { 1, 0, "saved with 1 optimizer parameter group, this run has 3" },
    };
    for (int k = 0; k < (int)(sizeof bad / sizeof bad[0]); k++) {
        groups_case = bad[k].gcase;
        net md = { .in = IN, .hidden = 16, .out = NC, .dropout = 0.25f };
        volt_trainer *td = make_trainer(3, root);
        st = volt_trainer_fit(td, &ops, &md, tl, vl, bad[k].ck ? path : path0);
        CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(td), bad[k].msg) && md.steps_run == 0,
              "resume with another grouping (%d): %s (%s)", k, volt_trainer_errmsg(td), volt_status_str(st));
        volt_trainer_destroy(td);
    }
    /* a pattern matching nothing fails the fit, named */
    groups_case = 1;
    volt_module_ops typo = ops;
    typo.configure_optimizers = groups_typo_opt;
    net me = { .in = IN, .hidden = 16, .out = NC };
    volt_trainer *te = make_trainer(1, root);
    st = volt_trainer_fit(te, &typo, &me, tl, vl, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(te), "configure_optimizers: optimizer: groups[0] pattern 'fc3.*' matches no parameter"),
          "typo'd group pattern: %s", volt_trainer_errmsg(te));
    volt_trainer_destroy(te);
    free(wa); free(wc); free(wp);
    volt_trainer_destroy(ta);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

/* ---- corrupt checkpoints ------------------------------------------------------------------------ */
static void write_file(const char *p, const void *d, size_t n) {
    FILE *f = fopen(p, "wb");
    fwrite(d, 1, n, f);
    fclose(f);
}

/* A checkpoint changed after the load checked it: the parameters and states are read one
 * tensor at a time while they are applied (trainer/checkpoint_source.c), each checked against
 * its crc again. A callback's load_state_dict runs between the check and the apply: this one
 * flips a byte of fc1.weight's stored bytes in place. The fit must fail naming the change, and
 * the half-replaced model must be gone (the next run sets it up afresh). */
static char g_flip_path[600];
static int g_flips;
static char *flip_state(void *self) { (void)self; return strdup("{}"); }
static volt_status flip_load(void *self, volt_trainer *t, const char *json) {
    (void)self; (void)t; (void)json;
    FILE *f = fopen(g_flip_path, "r+b");
    if (!f) return VOLT_OK;
    unsigned char l8[8];
    char hdr[8192];
    uint64_t hl = 0;
    if (fread(l8, 1, 8, f) == 8) for (int i = 0; i < 8; i++) hl |= (uint64_t)l8[i] << (8 * i);
    long long a = -1, b = -1;
    if (hl && hl < sizeof hdr && fread(hdr, 1, (size_t)hl, f) == hl) {
        hdr[hl] = 0;
        const char *at = strstr(hdr, "\"fc1.weight\"");
        const char *off = at ? strstr(at, "\"data_offsets\":[") : NULL;
        if (off && sscanf(off, "\"data_offsets\":[%lld,%lld]", &a, &b) == 2 && b > a) {
            const long pos = (long)(8 + hl + (uint64_t)a + (uint64_t)(b - a) / 2);
            unsigned char c = 0;
            if (fseek(f, pos, SEEK_SET) == 0 && fread(&c, 1, 1, f) == 1 && fseek(f, pos, SEEK_SET) == 0) {
                c ^= 0x5a;
                g_flips += fwrite(&c, 1, 1, f) == 1;
            }
        }
    }
    fclose(f);
    return VOLT_OK;
}
static const volt_callback_ops flip_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Flipper",
                                            .state_dict = flip_state, .load_state_dict = flip_load };

static void test_changed_during_load(volt_dataset *ds) {
    char root[512];
    snprintf(root, sizeof root, "%s/changed", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(g_flip_path, sizeof g_flip_path, "%s/ck.safetensors", root);
    volt_loader *tl = make_loader(ds, 8, false, 0);
    net m = { .in = IN, .hidden = 8, .out = NC, .dropout = 0.f };
    volt_trainer *t = make_trainer(1, root);
    CHECK_OK(volt_trainer_add_callback(t, &flip_ops, NULL));
    g_flips = 0;
    CHECK_OK(volt_trainer_fit(t, &net_ops, &m, tl, NULL, NULL));
    CHECK(g_flips == 0, "nothing flipped while saving");
    CHECK_OK(volt_trainer_save_checkpoint(t, g_flip_path));
    volt_trainer_destroy(t);

    net m2 = { .in = IN, .hidden = 8, .out = NC, .dropout = 0.f };
    volt_trainer *t2 = make_trainer(2, root);
    CHECK_OK(volt_trainer_add_callback(t2, &flip_ops, NULL));
    volt_status st = volt_trainer_fit(t2, &net_ops, &m2, tl, NULL, g_flip_path);
    CHECK(g_flips == 1, "the callback changed the file between the check and the apply (%d)", g_flips);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(volt_trainer_errmsg(t2), "'fc1.weight' changed after it was checked") &&
          strstr(volt_trainer_errmsg(t2), "dropped"), "a file changed during the load: %s (%s)", volt_trainer_errmsg(t2),
          volt_status_str(st));
    CHECK(volt_trainer_params(t2) == NULL, "the half-replaced model is dropped");
    CHECK(m2.steps_run == 0, "nothing trained on it");
    volt_trainer_destroy(t2);
    volt_loader_destroy(tl);
}

static void test_corrupt(volt_dataset *ds) {
    char root[512], good[600], bad[600];
    snprintf(root, sizeof root, "%s/corrupt", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(good, sizeof good, "%s/good.safetensors", root);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", root);
    net m = { .in = IN, .hidden = 8, .out = NC, .dropout = 0.f };
    volt_trainer *t = make_trainer(1, root);
    volt_loader *tl = make_loader(ds, 8, false, 0);
    CHECK_OK(volt_trainer_fit(t, &net_ops, &m, tl, NULL, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(t, good));
    FILE *f = fopen(good, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n, "read");
    fclose(f);
    uint64_t hl = 0;   /* the header's length: the first tensor's bytes follow it */
    for (int i = 0; i < 8; i++) hl |= (uint64_t)(unsigned char)buf[i] << (8 * i);
    const long first = 8 + (long)hl + 1;
    /* perturb the live weights so "untouched" is observable */
    set_first_elem(m.w1, 123.f);
    int64_t n0;
    float *before = snapshot(t, &n0);

    struct { const char *what; const char *expect; } cases[] = {
        { "truncated", "truncated" }, { "flipped", "crc mismatch" }, { "text", "not a safetensors" },
    };
    for (int k = 0; k < 3; k++) {
        if (k == 0) write_file(bad, buf, (size_t)n - 37);
        if (k == 1) { buf[first] ^= 0x10; write_file(bad, buf, (size_t)n); buf[first] ^= 0x10; }   /* a weight */
        if (k == 2) write_file(bad, "epoch,step\n1,2\n", 15);
        volt_status st = volt_trainer_validate(t, &net_ops, &m, tl, bad);
        CHECK(st < 0 && strstr(volt_trainer_errmsg(t), cases[k].expect) && strstr(volt_trainer_errmsg(t), "bad.safetensors"),
              "%s: %s (%s)", cases[k].what, volt_trainer_errmsg(t), volt_status_str(st));
        int64_t n1;
        float *after = snapshot(t, &n1);
        CHECK(!memcmp(before, after, sizeof(float) * (size_t)n0), "%s: model changed", cases[k].what);
        free(after);
    }
    /* another architecture */
    net other = { .in = IN, .hidden = 12, .out = NC, .dropout = 0.f };
    volt_trainer *t2 = make_trainer(1, root);
    volt_status st = volt_trainer_validate(t2, &net_ops, &other, tl, good);
    CHECK(st == VOLT_ERR_SHAPE && strstr(volt_trainer_errmsg(t2), "fc1.weight") && strstr(volt_trainer_errmsg(t2), "good.safetensors"),
          "shape mismatch: %s", volt_trainer_errmsg(t2));
    /* the good one loads */
    CHECK_OK(volt_trainer_validate(t, &net_ops, &m, tl, good));
    CHECK(first_elem(m.w1) != 123.f, "good checkpoint restored the weights");
    /* a flipped byte in the last tensor, an optimizer state: a resuming fit reads it and
     * refuses the file; validate reads the weights alone and never sees it */
    buf[n - 5] ^= 0x10;
    write_file(bad, buf, (size_t)n);
    buf[n - 5] ^= 0x10;
    volt_trainer *t3 = make_trainer(2, root);
    net m3 = m;
    st = volt_trainer_fit(t3, &net_ops, &m3, tl, NULL, bad);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(volt_trainer_errmsg(t3), "crc mismatch") && strstr(volt_trainer_errmsg(t3), "'optimizer."),
          "fit from a damaged optimizer state: %s", volt_trainer_errmsg(t3));
    set_first_elem(m.w1, 123.f);
    CHECK_OK(volt_trainer_validate(t, &net_ops, &m, tl, bad));
    int64_t n2;
    float *good_w = snapshot(t, &n2);
    CHECK_OK(volt_trainer_validate(t, &net_ops, &m, tl, good));
    float *again = snapshot(t, &n2);
    CHECK(!memcmp(good_w, again, sizeof(float) * (size_t)n2), "validate of the file with a damaged state loaded its weights");
    free(good_w); free(again);
    volt_trainer_destroy(t3);
    free(buf); free(before);
    volt_trainer_destroy(t);
    volt_trainer_destroy(t2);
    volt_loader_destroy(tl);
}

/* ---- a load overwrites every value: the inits are skipped ------------------------------------ */
static int iw_calls;
static volt_status net_init_weights(void *self, volt_params *ps) {
    (void)self; (void)ps;
    iw_calls++;
    return VOLT_OK;
}

static void test_load_skips_init(volt_dataset *ds) {
    char root[512], good[600], missing[600];
    snprintf(root, sizeof root, "%s/skipinit", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(good, sizeof good, "%s/good.safetensors", root);
    snprintf(missing, sizeof missing, "%s/none.safetensors", root);
    volt_module_ops ops = net_ops;
    ops.init_weights = net_init_weights;
    const net proto = { .in = IN, .hidden = 8, .out = NC, .dropout = 0.f };
    volt_loader *tl = make_loader(ds, 8, false, 0);
    net m = proto;
    volt_trainer *t = make_trainer(1, root);
    CHECK_OK(volt_trainer_fit(t, &ops, &m, tl, NULL, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(t, good));
    int64_t n;
    float *trained = snapshot(t, &n);
    /* the reference: a fresh model's inits, no checkpoint */
    net m0 = proto;
    volt_trainer *t0 = make_trainer(1, root);
    uint64_t i0 = volt__params_inits();
    iw_calls = 0;
    CHECK_OK(volt_trainer_validate(t0, &ops, &m0, tl, NULL));
    CHECK(volt__params_inits() == i0 + 1 && iw_calls == 1, "a model without a checkpoint draws its inits once");
    float *inits = snapshot(t0, &n);
    CHECK(memcmp(inits, trained, sizeof(float) * (size_t)n) != 0, "fit changed the weights");

    /* validate from a checkpoint: nothing drawn, init_weights not called, the file's values */
    net m1 = proto;
    volt_trainer *t1 = make_trainer(1, root);
    i0 = volt__params_inits();
    iw_calls = 0;
    CHECK_OK(volt_trainer_validate(t1, &ops, &m1, tl, good));
    CHECK(volt__params_inits() == i0 && iw_calls == 0, "a load draws no inits (%llu) and skips init_weights (%d)",
          (unsigned long long)(volt__params_inits() - i0), iw_calls);
    float *w = snapshot(t1, &n);
    CHECK(!memcmp(w, trained, sizeof(float) * (size_t)n), "the checkpoint's values");
    free(w);
    /* validate/test/predict hold no grads (PyTorch's grad None until backward); a fit does */
    volt_memory_report mr;
    CHECK_OK(volt_trainer_memory_report(t1, &mr));
    CHECK(mr.held_grad_bytes == 0 && mr.grad_bytes > 0, "a validate-only trainer holds no grads (%lld of %lld bytes)",
          (long long)mr.held_grad_bytes, (long long)mr.grad_bytes);
    CHECK_OK(volt_trainer_memory_report(t, &mr));
    CHECK(mr.held_grad_bytes == mr.grad_bytes, "a fit holds them all (%lld of %lld bytes)", (long long)mr.held_grad_bytes,
          (long long)mr.grad_bytes);

    /* a failed load leaves no model: the next call without a checkpoint sets it up with its inits */
    net m2 = proto;
    volt_trainer *t2 = make_trainer(1, root);
    CHECK(volt_trainer_validate(t2, &ops, &m2, tl, missing) == VOLT_ERR_IO && strstr(volt_trainer_errmsg(t2), "none.safetensors"),
          "missing file: %s", volt_trainer_errmsg(t2));
    CHECK(volt_trainer_params(t2) == NULL, "a model whose load failed is dropped");
    i0 = volt__params_inits();
    iw_calls = 0;
    CHECK_OK(volt_trainer_validate(t2, &ops, &m2, tl, NULL));
    CHECK(volt__params_inits() == i0 + 1 && iw_calls == 1, "inits drawn after the failed load");
    w = snapshot(t2, &n);
    CHECK(!memcmp(w, inits, sizeof(float) * (size_t)n), "after a failed load: the inits, not zeros");
    free(w);

    /* set up for a load that never came (fit refused the module before it): the same */
    volt_module_ops no_train = ops;
    no_train.training_step = NULL;
    net m3 = proto;
    volt_trainer *t3 = make_trainer(1, root);
    CHECK(volt_trainer_fit(t3, &no_train, &m3, tl, NULL, good) == VOLT_ERR_INVALID_ARG, "fit without training_step");
    CHECK_OK(volt_trainer_validate(t3, &no_train, &m3, tl, NULL));
    w = snapshot(t3, &n);
    CHECK(!memcmp(w, inits, sizeof(float) * (size_t)n), "after a load that never came: the inits, not zeros");
    free(w);
    /* fit from "last" with none saved starts from the inits, and says so (Lightning warns) */
    net m4 = proto;
    volt_trainer *t4 = make_trainer(1, root);
    i0 = volt__params_inits();
    char errpath[600], err[4096];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", root);
    int saved = vtest_stderr_to(errpath);
    CHECK(volt_trainer_fit(t4, &ops, &m4, tl, NULL, "last") == VOLT_OK && volt__params_inits() == i0 + 1, "fit from no last");
    vtest_stderr_back(saved, errpath, err, sizeof err);
    CHECK(strstr(err, "volt: fit: ckpt_path=\"last\" is set, but there is no last checkpoint available: no checkpoint is "
                      "loaded"), "fit from no last is noted: %s", err);

    free(trained); free(inits);
    volt_trainer_destroy(t0); volt_trainer_destroy(t1); volt_trainer_destroy(t2); volt_trainer_destroy(t3);
    volt_trainer_destroy(t4); volt_trainer_destroy(t);
    volt_loader_destroy(tl);
}


/* One module struct, two trainers: its layers point into the store of the trainer that set it up.
 * Another trainer may take it over only with a checkpoint to load (the holder lets it go); without
 * one it is refused: its fresh inits would replace the trained weights (and the holder would run
 * on the other's store, then freed memory). */
typedef struct { volt_trainer *other; void *module; volt_loader *loader; const char *path; volt_status got; char msg[512]; } nested_call;
static volt_status nested_validate(void *self, volt_trainer *t) {   /* another trainer, from inside this one's call */
    nested_call *n = self;
    (void)t;
    if (!n->other) return VOLT_OK;   /* done with */
    n->got = volt_trainer_validate(n->other, &net_ops, n->module, n->loader, n->path);
    snprintf(n->msg, sizeof n->msg, "%s", volt_trainer_errmsg(n->other));
    return VOLT_OK;
}
static volt_status net_setup_other(void *self, volt_params *ps) { return net_setup(self, ps); }   /* another setup */
static const volt_callback_ops nested_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Nested",
                                              .on_validation_start = nested_validate };

static void test_module_two_trainers(volt_dataset *ds) {
    char root[512], good[600], missing[600];
    snprintf(root, sizeof root, "%s/twotrainers", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(good, sizeof good, "%s/good.safetensors", root);
    snprintf(missing, sizeof missing, "%s/none.safetensors", root);
    volt_loader *tl = make_loader(ds, 8, false, 0);
    net m = { .in = IN, .hidden = 8, .out = NC, .dropout = 0.f };
    volt_trainer *t1 = make_trainer(1, root), *t2 = make_trainer(1, root);
    /* a trainer that only ran the inits (a baseline validate) lets another take the module without a
     * checkpoint: nothing trained is lost */
    CHECK_OK(volt_trainer_validate(t2, &net_ops, &m, tl, NULL));
    CHECK_OK(volt_trainer_fit(t1, &net_ops, &m, tl, NULL, NULL));
    CHECK(volt_trainer_params(t2) == NULL, "the baseline trainer let the module go");
    CHECK_OK(volt_trainer_save_checkpoint(t1, good));
    const long long steps1 = (long long)volt_trainer_global_step(t1);
    int64_t n;
    float *trained = snapshot(t1, &n), *w;
    CHECK(volt_trainer_validate(t2, &net_ops, &m, tl, NULL) == VOLT_ERR_STATE &&
          strstr(volt_trainer_errmsg(t2), "another trainer set this module up and holds its weights") &&
          strstr(volt_trainer_errmsg(t2), "ckpt_path"), "a second trainer without a checkpoint: %s", volt_trainer_errmsg(t2));
    CHECK(volt_trainer_fit(t2, &net_ops, &m, tl, NULL, NULL) == VOLT_ERR_STATE, "nor a fit");
    CHECK_OK(volt_trainer_validate(t1, &net_ops, &m, tl, NULL));
    w = snapshot(t1, &n);
    CHECK(!memcmp(w, trained, sizeof(float) * (size_t)n), "the holder keeps its trained weights");
    free(w);
    /* with a checkpoint the second takes the module over (and says it loaded it); the first lets it go */
    char errpath[600], err[4096], want[1024];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", root);
    int saved = vtest_stderr_to(errpath);
    CHECK_OK(volt_trainer_validate(t2, &net_ops, &m, tl, good));
    vtest_stderr_back(saved, errpath, err, sizeof err);
    snprintf(want, sizeof want, "volt: validate: loaded the model weights of the checkpoint at %s\n", good);
    CHECK(strstr(err, want), "the load is noted: %s", err);
    CHECK(volt_trainer_params(t1) == NULL, "the first trainer let the module go");
    w = snapshot(t2, &n);
    CHECK(!memcmp(w, trained, sizeof(float) * (size_t)n), "the second has the checkpoint's weights");
    free(w);
    CHECK(volt_trainer_validate(t1, &net_ops, &m, tl, NULL) == VOLT_ERR_STATE, "now the first is refused: %s",
          volt_trainer_errmsg(t1));
    /* its weights went with the module: without a checkpoint it stays refused, also once the
     * other is gone (it would silently start from fresh inits), and a load takes it back */
    volt_trainer_destroy(t2);
    CHECK(volt_trainer_validate(t1, &net_ops, &m, tl, NULL) == VOLT_ERR_STATE &&
          strstr(volt_trainer_errmsg(t1), "another trainer took this module over"), "the first after the taker is gone: %s",
          volt_trainer_errmsg(t1));
    CHECK_OK(volt_trainer_validate(t1, &net_ops, &m, tl, good));
    CHECK_OK(volt_trainer_validate(t1, &net_ops, &m, tl, NULL));   /* its own weights again */
    w = snapshot(t1, &n);
    CHECK(!memcmp(w, trained, sizeof(float) * (size_t)n), "the first holds the checkpoint's weights");
    free(w);
    /* a take-over whose load fails: the holder let the module go, so it is refused, not re-initialised */
    volt_trainer *t5 = make_trainer(1, root);
    CHECK(volt_trainer_validate(t5, &net_ops, &m, tl, missing) == VOLT_ERR_IO, "a failed take-over: %s", volt_trainer_errmsg(t5));
    CHECK(volt_trainer_validate(t1, &net_ops, &m, tl, NULL) == VOLT_ERR_STATE, "after a failed take-over: %s",
          volt_trainer_errmsg(t1));
    CHECK_OK(volt_trainer_validate(t1, &net_ops, &m, tl, good));
    volt_trainer_destroy(t5);
    /* another trainer called from inside the holder's call may not take the module from under it */
    nested_call nc = { .other = make_trainer(1, root), .module = &m, .loader = tl, .path = good, .got = VOLT_OK };
    CHECK_OK(volt_trainer_add_callback(t1, &nested_ops, &nc));
    CHECK_OK(volt_trainer_validate(t1, &net_ops, &m, tl, NULL));
    CHECK(nc.got == VOLT_ERR_STATE && strstr(nc.msg, "another trainer is running a call with this module"),
          "a take-over from inside the holder's call: %s", nc.msg);
    w = snapshot(t1, &n);
    CHECK(!memcmp(w, trained, sizeof(float) * (size_t)n), "the holder's weights after the refused nested take-over");
    free(w);
    volt_trainer_destroy(nc.other);
    nc.other = NULL;
    /* one trainer, another module in its place: the first module's trained weights are gone, and
     * its next set-up needs a checkpoint (before: fresh inits, silently); another table for the
     * same trained module is refused before anything is dropped */
    volt_module_ops copy = net_ops, other = net_ops;   /* a copy: the same setup, the same store */
    copy.name = "net_copy";
    CHECK_OK(volt_trainer_validate(t1, &copy, &m, tl, NULL));
    free(trained);
    trained = snapshot(t1, &n);
    other.name = "net_other";
    other.setup = net_setup_other;
    CHECK(volt_trainer_validate(t1, &other, &m, tl, NULL) == VOLT_ERR_STATE &&
          strstr(volt_trainer_errmsg(t1), "set up by another module table's setup"), "another table: %s", volt_trainer_errmsg(t1));
    CHECK_OK(volt_trainer_validate(t1, &net_ops, &m, tl, NULL));
    w = snapshot(t1, &n);
    CHECK(!memcmp(w, trained, sizeof(float) * (size_t)n), "a table with the same setup keeps the weights");
    free(w);
    CHECK_OK(volt_trainer_fit(t1, &net_ops, &m, tl, NULL, NULL));   /* trained weights (not just loaded ones) */
    CHECK_OK(volt_trainer_save_checkpoint(t1, good));
    free(trained);
    trained = snapshot(t1, &n);
    net b = { .in = IN, .hidden = 8, .out = NC, .dropout = 0.f };
    CHECK_OK(volt_trainer_validate(t1, &net_ops, &b, tl, NULL));   /* b: fresh, allowed */
    CHECK(volt_trainer_validate(t1, &net_ops, &m, tl, NULL) == VOLT_ERR_STATE &&
          strstr(volt_trainer_errmsg(t1), "its trained weights were dropped when its trainer set up another module"),
          "the module switched away from: %s", volt_trainer_errmsg(t1));
    CHECK_OK(volt_trainer_validate(t1, &net_ops, &m, tl, good));
    CHECK_OK(volt_trainer_validate(t1, &net_ops, &m, tl, NULL));
    w = snapshot(t1, &n);
    CHECK(!memcmp(w, trained, sizeof(float) * (size_t)n), "loaded back: the trained weights");
    free(w);
    free(trained);
    volt_trainer_destroy(t1);
    /* an empty val loader: fit warns that no validation runs (Lightning does too) */
    volt_dataset *none = NULL;
    volt_loader *vl = NULL;
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    CHECK_OK(volt_dataset_subset(ds, 0, 0, &none));
    CHECK_OK(volt_loader_create(&lc, none, &vl));
    net m3 = { .in = IN, .hidden = 8, .out = NC, .dropout = 0.f };
    volt_trainer *t4 = make_trainer(1, root);
    saved = vtest_stderr_to(errpath);
    CHECK_OK(volt_trainer_fit(t4, &net_ops, &m3, tl, vl, NULL));
    vtest_stderr_back(saved, errpath, err, sizeof err);
    CHECK(strstr(err, "volt: warning: fit was given a val loader with no samples: no validation runs"), "empty val: %s", err);
    volt_trainer_destroy(t4);
    volt_loader_destroy(vl);
    volt_dataset_destroy(none);
    /* a fit from the checkpoint (saved after 1 epoch) says what it restored, and when that
     * already meets max_epochs, that it trains nothing */
    for (int epochs = 2; epochs >= 1; epochs--) {
        net m2 = { .in = IN, .hidden = 8, .out = NC, .dropout = 0.f };
        volt_trainer *t3 = make_trainer(epochs, root);
        saved = vtest_stderr_to(errpath);
        CHECK_OK(volt_trainer_fit(t3, &net_ops, &m2, tl, NULL, good));
        vtest_stderr_back(saved, errpath, err, sizeof err);
        snprintf(want, sizeof want, "volt: fit: restored the training state of the checkpoint at %s (resuming at epoch 1, step %lld)%s",
                 good, steps1, epochs == 1 ? ": it already meets max_epochs / max_steps, so this fit trains nothing\n" : "\n");
        CHECK(strstr(err, want) && volt_trainer_global_step(t3) == steps1 * epochs, "max_epochs %d: step %lld: %s",
              epochs, (long long)volt_trainer_global_step(t3), err);
        volt_trainer_destroy(t3);
    }
    volt_loader_destroy(tl);
}

/* ---- max_time, min_epochs / min_steps, overfit_batches (Lightning's flags) ------------------------ */
typedef struct {
    int64_t batches; int64_t first_x[64]; int64_t val_steps[8], sanity; int stop_at_epoch_end, stop_every_batch;
    int64_t stop_at_batch;   /* > 0: one stop asked for at that train batch (counted from 1) */
    int64_t epoch_ends, epoch_end_batch[8];   /* on_train_epoch_end calls, and batch_in_epoch at each */
} flags_probe;
static flags_probe fp;

static volt_status slow_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    usleep(20000);   /* 20 ms a step: max_time stops well before the loader ends */
    return net_train(self, s, b, i);
}
static volt_status fp_val(void *self, volt_step *s, const volt_batch *b, int64_t i) { return net_val(self, s, b, i); }
static volt_status fp_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)i;
    float x[IN * 64];   /* the largest batch here: 64 */
    if (fp.batches < 64 && volt_tensor_to_host(volt_batch_x(b), x) == VOLT_OK) fp.first_x[fp.batches] = (int64_t)(x[0] * 1e6f);
    fp.batches++;
    if (fp.stop_every_batch || fp.batches == fp.stop_at_batch) volt_trainer_request_stop(t);
    return VOLT_OK;
}
static volt_status fp_val_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)b; (void)i;
    int64_t e = volt_trainer_current_epoch(t);
    if (e >= 0 && e < 8 && !volt_trainer_sanity_checking(t)) fp.val_steps[e]++;
    fp.sanity += volt_trainer_sanity_checking(t);
    return VOLT_OK;
}
static volt_status fp_epoch_end(void *self, volt_trainer *t) {
    (void)self;
    if (fp.epoch_ends < 8) fp.epoch_end_batch[fp.epoch_ends] = volt_trainer_batch_in_epoch(t);
    fp.epoch_ends++;
    if (fp.stop_at_epoch_end == 1 || (fp.stop_at_epoch_end == 2 && volt_trainer_current_epoch(t) == 0)) volt_trainer_request_stop(t);
    return VOLT_OK;
}
/* An epoch-interval StepLR (gamma 0.5 each epoch), and the lr on_train_batch_end sees at each
 * epoch's last batch (of 4). */
static volt_status epoch_step_opt(void *self, volt_optim_setup *o) {
    VOLT_TRY(net_opt(self, o));
    o->use_scheduler = true;
    o->scheduler.kind = VOLT_SCHED_STEP;
    o->scheduler.step_size = 1;
    o->scheduler.gamma = 0.5f;
    o->scheduler.interval = VOLT_SCHED_EVERY_EPOCH;
    return VOLT_OK;
}
static double last_batch_lr[4];
static volt_status lr_at_last_batch(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)b;
    const int64_t e = volt_trainer_current_epoch(t);
    if (i == 3 && e >= 0 && e < 4) last_batch_lr[e] = volt_optimizer_group_lr(volt_trainer_optimizer(t), 0);
    return VOLT_OK;
}
static const volt_callback_ops lr_probe_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "LrProbe",
                                                .on_train_batch_end = lr_at_last_batch };

static const volt_callback_ops fp_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "FlagsProbe",
                                          .on_train_batch_start = fp_batch_start, .on_validation_batch_end = fp_val_batch_end,
                                          .on_train_epoch_end = fp_epoch_end };

/* A trainer made from c with the FlagsProbe callback. */
static volt_trainer *probe_trainer(const volt_trainer_config *c) {
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(c, &t);
    CHECK(st == VOLT_OK, "create: %s", t ? volt_trainer_errmsg(t) : "");
    if (st == VOLT_OK) CHECK_OK(volt_trainer_add_callback(t, &fp_ops, NULL));
    return t;
}

static volt_trainer *flags_trainer(const char *root, int64_t epochs, const char *max_time, int64_t min_epochs, int64_t min_steps,
                                   int64_t overfit) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = epochs;
    c.max_time = max_time;
    c.min_epochs = min_epochs;
    c.min_steps = min_steps;
    c.overfit_batches = overfit;
    return probe_trainer(&c);
}

static void test_stop_flags(volt_dataset *ds) {
    char root[512], ck[700];
    snprintf(root, sizeof root, "%s/flags", vtest_tmpdir());
    vtest_fresh_dir(root);
    volt_module_ops slow = net_ops;
    slow.training_step = slow_train;
    slow.validation_step = fp_val;
    const net proto = { .in = IN, .hidden = 8, .out = NC, .dropout = 0.f };
    volt_loader *tl = make_loader(ds, 2, true, 0), *vl = make_loader(ds, 8, false, 0);   /* 102 train batches */

    /* max_time 0.2 s at 20 ms a step: stops early; the last checkpoint records the time */
    memset(&fp, 0, sizeof fp);
    net m = proto;
    volt_trainer *t = flags_trainer(root, 1, "00:00:00:0.2", -1, -1, 0);
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = root;
    cc.save_top_k = 0;
    cc.save_last = true;
    cc.every_n_train_steps = 1;
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    CHECK_OK(volt_trainer_fit(t, &slow, &m, tl, NULL, NULL));
    const int64_t steps_a = volt_trainer_global_step(t);
    CHECK(steps_a >= 1 && steps_a < 60, "max_time 0.2 s stopped fit after %lld of 102 steps", (long long)steps_a);
    snprintf(ck, sizeof ck, "%s/last.safetensors", root);
    volt_st_file *f = NULL;
    char err[512];
    CHECK_OK(volt_st_open(ck, &f, err, sizeof err));
    const char *ft = f ? volt_st_meta(f, "volt.fit_time_s") : NULL;
    CHECK(ft && atof(ft) > 0.1, "the checkpoint records the training time (%s)", ft ? ft : "none");
    volt_st_close(f);
    volt_trainer_destroy(t);
    /* resumed with the same max_time: little time is left */
    net m2 = proto;
    t = flags_trainer(root, 1, "00:00:00:0.2", -1, -1, 0);
    CHECK_OK(volt_trainer_fit(t, &slow, &m2, tl, NULL, ck));
    CHECK(volt_trainer_global_step(t) - steps_a <= 2, "a resumed fit goes on from the checkpoint's time: %lld more steps",
          (long long)(volt_trainer_global_step(t) - steps_a));
    volt_trainer_destroy(t);
    /* a malformed max_time */
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_time = "1:30";
    t = NULL;
    CHECK(volt_trainer_create(&c, &t) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "DD:HH:MM:SS") &&
          strstr(volt_trainer_errmsg(t), "1:30"), "bad max_time: %s", t ? volt_trainer_errmsg(t) : "");
    volt_trainer_destroy(t);
    /* deterministic=false would allow nothing: refused, not ignored */
    volt_trainer_config_init(&c);
    c.deterministic = false;
    t = NULL;
    CHECK(volt_trainer_create(&c, &t) == VOLT_ERR_UNSUPPORTED && strstr(volt_trainer_errmsg(t), "deterministic=false"),
          "deterministic=false: %s", t ? volt_trainer_errmsg(t) : "");
    volt_trainer_destroy(t);
    /* volt_trainer_config_check: create's verdict on the settings, with its message, making nothing */
    struct { const char *what; void (*set)(volt_trainer_config *); volt_status want; const char *msg; } cks[] = {
        { "defaults", NULL, VOLT_OK, NULL },
        { "max_time", cfg_bad_max_time, VOLT_ERR_INVALID_ARG, "DD:HH:MM:SS" },
        { "deterministic", cfg_nondeterministic, VOLT_ERR_UNSUPPORTED, "deterministic=false" },
        { "val_check_interval", cfg_bad_val_check, VOLT_ERR_INVALID_ARG, "multiple of accumulate_grad_batches" },
        { "precision", cfg_bad_precision, VOLT_ERR_UNSUPPORTED, "8-mixed" },
        { "strategy", cfg_bad_strategy, VOLT_ERR_UNSUPPORTED, "unknown strategy 'fsdpp'" },
        { "devices", cfg_single_two_devices, VOLT_ERR_INVALID_ARG, "runs on one device" },
        { "accelerator", cfg_no_such_accelerator, VOLT_ERR_UNSUPPORTED, "accelerator 'tpu' is not available" },
        { "logger_name ..", cfg_logger_escapes, VOLT_ERR_INVALID_ARG, "logger_name \"../../logs\" would put the logs outside" },
        { "logger_name /", cfg_logger_absolute, VOLT_ERR_INVALID_ARG, "logger_name \"/tmp/logs\" would put the logs outside" },
    };
    for (size_t i = 0; i < sizeof cks / sizeof cks[0]; i++) {
        volt_trainer_config_init(&c);
        if (cks[i].set) cks[i].set(&c);
        char e[640] = "x";
        volt_status got = volt_trainer_config_check(&c, e, sizeof e);
        t = NULL;
        volt_status made = volt_trainer_create(&c, &t);
        CHECK(got == cks[i].want && made == got && (cks[i].msg ? strstr(e, cks[i].msg) && !strcmp(e, volt_trainer_errmsg(t)) : !e[0]),
              "config_check %s: %s '%s'; create: %s '%s'", cks[i].what, volt_status_str(got), e, volt_status_str(made),
              t ? volt_trainer_errmsg(t) : "");
        volt_trainer_destroy(t);
    }
    CHECK(volt_trainer_config_check(NULL, NULL, 0) == VOLT_ERR_INVALID_ARG, "config_check(NULL)");
#ifdef VOLT_HAVE_MPI
    {   /* a NULL strategy is the default, "auto" (ddp at devices 2), not single (refused at devices 2) */
        volt_trainer_config_init(&c);
        c.strategy = NULL;
        c.devices = 2;
        char e[640] = "";
        CHECK(volt_trainer_config_check(&c, e, sizeof e) == VOLT_OK, "strategy NULL, devices 2: %s", e);
    }
#endif

    /* min_epochs: a stop asked for at every epoch's end waits for epoch 3 */
    volt_loader *tl2 = make_loader(ds, 64, true, 0);   /* 4 batches an epoch */
    memset(&fp, 0, sizeof fp);
    fp.stop_at_epoch_end = 1;
    net m3 = proto;
    t = flags_trainer(root, 6, NULL, 3, -1, 0);
    CHECK_OK(volt_trainer_fit(t, &net_ops, &m3, tl2, NULL, NULL));
    CHECK(volt_trainer_current_epoch(t) == 3 && volt_trainer_global_step(t) == 12, "min_epochs 3: stopped after epoch %lld, step %lld",
          (long long)volt_trainer_current_epoch(t), (long long)volt_trainer_global_step(t));
    volt_trainer_destroy(t);
    memset(&fp, 0, sizeof fp);
    fp.stop_at_epoch_end = 1;
    net m4 = proto;
    t = flags_trainer(root, 6, NULL, -1, -1, 0);
    CHECK_OK(volt_trainer_fit(t, &net_ops, &m4, tl2, NULL, NULL));
    CHECK(volt_trainer_global_step(t) == 4, "without min_epochs the stop ends fit after epoch 0 (step %lld)", (long long)volt_trainer_global_step(t));
    volt_trainer_destroy(t);
    /* min_steps: a stop asked for at every batch waits for step 7 */
    memset(&fp, 0, sizeof fp);
    fp.stop_every_batch = 1;
    net m5 = proto;
    t = flags_trainer(root, 6, NULL, -1, 7, 0);
    CHECK_OK(volt_trainer_fit(t, &net_ops, &m5, tl2, NULL, NULL));
    CHECK(volt_trainer_global_step(t) == 7, "min_steps 7: stopped at step %lld", (long long)volt_trainer_global_step(t));
    volt_trainer_destroy(t);
    /* ... asked for once, at epoch 0's end: the request stays, and fit stops once min_epochs is
     * met (Lightning's _can_stop_early), not at max_epochs */
    memset(&fp, 0, sizeof fp);
    fp.stop_at_epoch_end = 2;
    net m5b = proto;
    t = flags_trainer(root, 6, NULL, 3, -1, 0);
    CHECK_OK(volt_trainer_fit(t, &net_ops, &m5b, tl2, NULL, NULL));
    CHECK(volt_trainer_current_epoch(t) == 3 && volt_trainer_global_step(t) == 12, "min_epochs 3, one stop at epoch 0: "
          "stopped after epoch %lld, step %lld (want 3, 12)", (long long)volt_trainer_current_epoch(t),
          (long long)volt_trainer_global_step(t));
    volt_trainer_destroy(t);
    /* a stop inside an epoch (asked at batch 2): that batch's epoch validates, runs its end hooks
     * and counts (Lightning's); max_steps inside an epoch: the end hooks, no validation */
    for (int k = 0; k < 2; k++) {
        memset(&fp, 0, sizeof fp);
        fp.stop_at_batch = k == 0 ? 2 : 0;
        net m5c = proto;
        volt_trainer_config c2;
        vtest_quiet_config(&c2, root);
        c2.max_epochs = 3;
        c2.max_steps = k == 0 ? -1 : 3;
        c2.num_sanity_val_steps = 0;
        t = probe_trainer(&c2);
        CHECK_OK(volt_trainer_fit(t, &net_ops, &m5c, tl2, vl, NULL));
        const int64_t want_steps = k == 0 ? 2 : 3;
        CHECK(volt_trainer_global_step(t) == want_steps && volt_trainer_current_epoch(t) == 1 && fp.epoch_ends == 1 &&
              fp.epoch_end_batch[0] == want_steps && (k == 0 ? fp.val_steps[0] > 0 : fp.val_steps[0] == 0),
              "%s inside epoch 0: step %lld, epoch %lld, %lld epoch ends (at batch %lld), %lld val batches (want %lld, 1, 1 "
              "at %lld, %s)", k == 0 ? "a stop" : "max_steps", (long long)volt_trainer_global_step(t),
              (long long)volt_trainer_current_epoch(t), (long long)fp.epoch_ends, (long long)fp.epoch_end_batch[0],
              (long long)fp.val_steps[0], (long long)want_steps, (long long)want_steps, k == 0 ? "some" : "none");
        volt_trainer_destroy(t);
    }
    /* the per-epoch scheduler steps after the epoch's last batch, before its on_train_batch_end
     * (Lightning's); a max_steps cut inside an epoch does not step it */
    for (int k = 0; k < 2; k++) {
        memset(&fp, 0, sizeof fp);
        memset(last_batch_lr, 0, sizeof last_batch_lr);
        net m5d = proto;
        volt_module_ops so = net_ops;
        so.configure_optimizers = epoch_step_opt;
        volt_trainer_config c3;
        vtest_quiet_config(&c3, root);
        c3.max_epochs = 2;
        c3.max_steps = k == 0 ? -1 : 3;
        t = probe_trainer(&c3);
        CHECK_OK(volt_trainer_add_callback(t, &lr_probe_ops, NULL));
        CHECK_OK(volt_trainer_fit(t, &so, &m5d, tl2, NULL, NULL));
        const double base = volt_optimizer_get_config(volt_trainer_optimizer(t))->lr;
        const double end_lr = volt_optimizer_group_lr(volt_trainer_optimizer(t), 0);
        if (k == 0)
            CHECK(fabs(last_batch_lr[0] - base * 0.5) < 1e-6 * base && fabs(last_batch_lr[1] - base * 0.25) < 1e-6 * base,
                  "epoch StepLR: lr at the last batches' on_train_batch_end %g, %g (want %g, %g)", last_batch_lr[0],
                  last_batch_lr[1], base * 0.5, base * 0.25);
        else
            CHECK(fabs(end_lr - base) < 1e-6 * base, "max_steps 3 inside epoch 0: lr %g after fit (want the unstepped %g)",
                  end_lr, base);
        volt_trainer_destroy(t);
    }

    /* overfit_batches 2 on a shuffling loader: the same 2 batches every epoch, 2 val batches */
    memset(&fp, 0, sizeof fp);
    net m6 = proto;
    t = flags_trainer(root, 3, NULL, -1, -1, 2);
    CHECK_OK(volt_trainer_fit(t, &net_ops, &m6, tl2, vl, NULL));
    CHECK(fp.batches == 6 && volt_trainer_global_step(t) == 6, "overfit_batches 2: %lld batches in 3 epochs", (long long)fp.batches);
    CHECK(fp.first_x[0] == fp.first_x[2] && fp.first_x[1] == fp.first_x[3] && fp.first_x[0] == fp.first_x[4] &&
          fp.first_x[0] != fp.first_x[1], "overfit_batches: the same two batches in every epoch");
    CHECK(fp.val_steps[0] == 2 && fp.val_steps[2] == 2, "overfit_batches: 2 val batches an epoch (%lld)", (long long)fp.val_steps[0]);
    CHECK(volt_loader_shuffles(tl2), "the train loader shuffles again after fit");
    volt_trainer_destroy(t);
    /* ... and they are the loader's first two, unshuffled */
    volt_loader *plain = make_loader(ds, 64, false, 0);
    const volt_batch *b0;
    float x0[IN * 64];
    CHECK_OK(volt_loader_start(plain, 0, 0));
    CHECK_OK(volt_loader_next(plain, &b0));
    CHECK_OK(volt_tensor_to_host(volt_batch_x(b0), x0));
    CHECK((int64_t)(x0[0] * 1e6f) == fp.first_x[0], "overfit_batches: batch 0 is the dataset's first");
    volt_loader_destroy(plain);
    volt_loader_destroy(tl2);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}


/* Lightning's float limits: limit_*_fraction and val_check_fraction take int(f x n) batches;
 * a fraction that leaves none, a fraction with a count, or one out of (0, 1] is refused. */
static volt_trainer *frac_trainer(const char *root, double tr, double va, double te, double vc, int64_t limit_val) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = 2;
    c.num_sanity_val_steps = 0;
    c.limit_train_fraction = tr;
    c.limit_val_fraction = va;
    c.limit_test_fraction = te;
    c.val_check_fraction = vc;
    c.limit_val_batches = limit_val;
    return probe_trainer(&c);
}

static int64_t frac_tests;
static volt_status frac_test_step(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    frac_tests++;
    return net_val(self, s, b, i);
}

static void test_fractions(volt_dataset *ds) {
    char root[512];
    snprintf(root, sizeof root, "%s/fractions", vtest_tmpdir());
    vtest_fresh_dir(root);
    volt_module_ops ops = net_ops;
    ops.validation_step = fp_val;
    ops.test_step = frac_test_step;
    const net proto = { .in = IN, .hidden = 8, .out = NC, .dropout = 0.f };
    volt_loader *tl = make_loader(ds, 64, true, 0), *vl = make_loader(ds, 8, false, 0);
    const int64_t nt = volt_loader_num_batches(tl), nv = volt_loader_num_batches(vl);
    CHECK(nt == 4 && nv > 8, "the loaders: %lld train, %lld val batches", (long long)nt, (long long)nv);

    /* half the train batches, a quarter of the val batches, half the test batches */
    memset(&fp, 0, sizeof fp);
    net m = proto;
    volt_trainer *t = frac_trainer(root, 0.5, 0.25, 0.5, 0, -1);
    CHECK_OK(volt_trainer_fit(t, &ops, &m, tl, vl, NULL));
    CHECK(fp.batches == 4 && volt_trainer_global_step(t) == 4, "limit_train_fraction 0.5: %lld batches in 2 epochs",
          (long long)fp.batches);
    CHECK(fp.val_steps[0] == (int64_t)(0.25 * (double)nv) && fp.val_steps[1] == fp.val_steps[0],
          "limit_val_fraction 0.25: %lld val batches an epoch, want %lld", (long long)fp.val_steps[0], (long long)(0.25 * (double)nv));
    frac_tests = 0;
    CHECK_OK(volt_trainer_test(t, &ops, &m, vl, NULL));
    CHECK(frac_tests == nv / 2, "limit_test_fraction 0.5: %lld test batches of %lld", (long long)frac_tests, (long long)nv);
    volt_trainer_destroy(t);

    /* val_check_fraction 0.5 of 4 batches: validation after batch 2 and at the epoch's end */
    memset(&fp, 0, sizeof fp);
    net m2 = proto;
    t = frac_trainer(root, 0, 0, 0, 0.5, 1);
    CHECK_OK(volt_trainer_fit(t, &ops, &m2, tl, vl, NULL));
    CHECK(fp.val_steps[0] == 2 && fp.val_steps[1] == 2, "val_check_fraction 0.5: %lld validations in epoch 0, want 2",
          (long long)fp.val_steps[0]);
    volt_trainer_destroy(t);

    /* overfit_fraction 0.5: the same first half of the (shuffling) train loader every epoch, half the val batches */
    {
        volt_trainer_config c;
        vtest_quiet_config(&c, root);
        c.max_epochs = 2;
        c.num_sanity_val_steps = 0;
        c.overfit_fraction = 0.5;
        t = probe_trainer(&c);
        memset(&fp, 0, sizeof fp);
        net mo = proto;
        CHECK_OK(volt_trainer_fit(t, &ops, &mo, tl, vl, NULL));
        CHECK(fp.batches == 4 && fp.first_x[0] == fp.first_x[2] && fp.first_x[1] == fp.first_x[3] && fp.first_x[0] != fp.first_x[1],
              "overfit_fraction 0.5: %lld batches, the same two each epoch", (long long)fp.batches);
        CHECK(fp.val_steps[0] == nv / 2, "overfit_fraction 0.5: %lld val batches, want %lld", (long long)fp.val_steps[0],
              (long long)(nv / 2));
        CHECK(volt_loader_shuffles(tl), "the train loader shuffles again after fit");
        volt_trainer_destroy(t);
    }

    /* the sanity check runs num_sanity_val_steps of the batches validation runs (-1: all) */
    static const struct { int64_t sanity, limit; double frac; int64_t want; } sc[] = {
        { 2, 1, 0, 1 }, { -1, -1, 0.25, -2 /* 0.25 of nv */ }, { 2, 0, 0, 0 }, { -1, -1, 0, -1 /* nv */ }, { 3, -1, 0, 3 },
    };
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
        volt_trainer_config c;
        vtest_quiet_config(&c, root);
        c.max_epochs = 1;
        c.num_sanity_val_steps = sc[i].sanity;
        c.limit_val_batches = sc[i].limit;
        c.limit_val_fraction = sc[i].frac;
        t = probe_trainer(&c);
        memset(&fp, 0, sizeof fp);
        net ms = proto;
        CHECK_OK(volt_trainer_fit(t, &ops, &ms, tl, vl, NULL));
        const int64_t want = sc[i].want == -1 ? nv : sc[i].want == -2 ? (int64_t)(0.25 * (double)nv) : sc[i].want;
        CHECK(fp.sanity == want, "sanity %lld, limit_val %lld / %g: %lld sanity batches, want %lld", (long long)sc[i].sanity,
              (long long)sc[i].limit, sc[i].frac, (long long)fp.sanity, (long long)want);
        volt_trainer_destroy(t);
    }

    /* 0.1 of 4 batches is none: fit says so, naming the least fraction that works */
    net m3 = proto;
    t = frac_trainer(root, 0.1, 0, 0, 0, -1);
    volt_status st = volt_trainer_fit(t, &ops, &m3, tl, NULL, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "limit_train_batches=0.1") &&
          strstr(volt_trainer_errmsg(t), "at least 0.25"), "0.1 of 4 batches: %s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);

    /* refused at create: a count with a fraction, a fraction past 1 */
    static const struct { double tr, vc; int64_t lv, vci; const char *want; } bad[] = {
        { 0, 0, 3, 0, "limit_val_batches is a count (3) and a fraction" },
        { 1.5, 0, -1, 0, "limit_train_fraction must be in (0, 1]" },
        { 0, 0.5, -1, 2, "val_check_interval is a count (2) and a fraction" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        volt_trainer_config c;
        vtest_quiet_config(&c, root);
        c.limit_train_fraction = bad[i].tr;
        c.val_check_fraction = bad[i].vc;
        c.limit_val_batches = bad[i].lv;
        c.limit_val_fraction = bad[i].lv >= 0 ? 0.5 : 0;
        c.val_check_interval = bad[i].vci;
        t = NULL;
        st = volt_trainer_create(&c, &t);
        CHECK(st == VOLT_ERR_INVALID_ARG && t && strstr(volt_trainer_errmsg(t), bad[i].want), "bad %zu: %s", i,
              t ? volt_trainer_errmsg(t) : volt_status_str(st));
        volt_trainer_destroy(t);
    }
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

/* estimated_stepping_batches (Lightning's): what configure_optimizers reads and the trainer
 * reports: the epochs' batches over accumulate_grad_batches, after the limits, capped by
 * max_steps; and the steps fit then takes. */
static int64_t est_seen;
static volt_status est_opt(void *self, volt_optim_setup *o) {
    est_seen = o->estimated_stepping_batches;
    return net_opt(self, o);
}

static void test_estimated_steps(volt_dataset *ds) {
    char root[512];
    snprintf(root, sizeof root, "%s/estimate", vtest_tmpdir());
    vtest_fresh_dir(root);
    volt_module_ops ops = net_ops;
    ops.configure_optimizers = est_opt;
    const net proto = { .in = IN, .hidden = 8, .out = NC, .dropout = 0.f };
    volt_loader *tl = make_loader(ds, 48, true, 0);   /* 5 batches an epoch, the last one short */
    CHECK(volt_loader_num_batches(tl) == 5, "%lld batches", (long long)volt_loader_num_batches(tl));
    static const struct { int64_t epochs, steps, acc, limit; double frac; int64_t want; } cases[] = {
        { 3, -1, 2, -1, 0, 9 },     /* ceil(5 / 2) = 3 steps an epoch */
        { 3, 7, 1, -1, 0, 7 },      /* max_steps caps 15 */
        { 2, -1, 1, 4, 0, 8 },      /* limit_train_batches 4 */
        { 2, -1, 1, -1, 0.5, 4 },   /* half of 5: 2 batches */
        { -1, 6, 1, -1, 0, 6 },     /* no max_epochs: max_steps */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        volt_trainer_config c;
        vtest_quiet_config(&c, root);
        c.max_epochs = cases[i].epochs;
        c.max_steps = cases[i].steps;
        c.accumulate_grad_batches = cases[i].acc;
        c.limit_train_batches = cases[i].limit;
        c.limit_train_fraction = cases[i].frac;
        volt_trainer *t = NULL;
        CHECK_OK(volt_trainer_create(&c, &t));
        CHECK(volt_trainer_estimated_stepping_batches(t) == -1, "case %zu: -1 before fit", i);
        net m = proto;
        est_seen = -7;
        CHECK_OK(volt_trainer_fit(t, &ops, &m, tl, NULL, NULL));
        CHECK(est_seen == cases[i].want && volt_trainer_estimated_stepping_batches(t) == cases[i].want &&
              volt_trainer_global_step(t) == cases[i].want, "case %zu: estimated %lld (trainer %lld), fit took %lld steps, want %lld",
              i, (long long)est_seen, (long long)volt_trainer_estimated_stepping_batches(t), (long long)volt_trainer_global_step(t),
              (long long)cases[i].want);
        volt_trainer_destroy(t);
    }
    volt_loader_destroy(tl);
}

/* detect_anomaly: a NaN weight fails fit at the first op that reads it, naming it */
static void test_detect_anomaly(volt_dataset *ds) {
    char root[512];
    snprintf(root, sizeof root, "%s/anomaly", vtest_tmpdir());
    vtest_fresh_dir(root);
    volt_loader *tl = make_loader(ds, 16, false, 0);
    for (int on = 0; on < 2; on++) {
        net m = { .in = IN, .hidden = 8, .out = NC, .dropout = 0.f };
        volt_trainer_config c;
        vtest_quiet_config(&c, root);
        c.detect_anomaly = on;
        volt_trainer *t = NULL;
        CHECK_OK(volt_trainer_create(&c, &t));
        CHECK_OK(volt_trainer_fit(t, &net_ops, &m, tl, NULL, NULL));   /* sets the model up */
        set_first_elem(m.w1, NAN);
        volt_status st = volt_trainer_fit(t, &net_ops, &m, tl, NULL, NULL);
        if (on) CHECK(st == VOLT_ERR_NUMERIC && strstr(volt_trainer_errmsg(t), "detect_anomaly") &&
                      strstr(volt_trainer_errmsg(t), "fc1.weight") && strstr(volt_trainer_errmsg(t), "forward"),
                      "detect_anomaly: %s", volt_trainer_errmsg(t));
        else CHECK(st == VOLT_OK, "off, a NaN weight trains on: %s", volt_trainer_errmsg(t));
        volt_trainer_destroy(t);
    }
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.detect_anomaly = true;
    c.compile = true;
    volt_trainer *t = NULL;
    CHECK(volt_trainer_create(&c, &t) == VOLT_ERR_UNSUPPORTED && strstr(volt_trainer_errmsg(t), "detect_anomaly") &&
          strstr(volt_trainer_errmsg(t), "compile"), "detect_anomaly with compile: %s", t ? volt_trainer_errmsg(t) : "");
    volt_trainer_destroy(t);
    volt_loader_destroy(tl);
}


/* lr_find: the range test runs, suggests a learning rate inside the range, and leaves the
 * weights, the loop state and the root folder as they were; fit then builds its optimizer
 * from configure_optimizers again. */
/* x -> x through one linear layer, MSE, plain SGD: a quadratic, so past lr ~ 2 / the largest
 * curvature the loss grows geometrically, as a range test should see */
typedef struct { volt_tensor *w, *b; } regr;
static volt_status regr_setup(void *self, volt_params *ps) {
    regr *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc"));
    VOLT_TRY(volt_param_new(ps, "fc.weight", VOLT_SHAPE(IN, IN), VOLT_INIT_TORCH_LINEAR, &m->w));
    return volt_param_new(ps, "fc.bias", VOLT_SHAPE(IN), VOLT_INIT_ZEROS, &m->b);
}
static volt_status regr_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    regr *m = self;
    volt_tensor *x = volt_batch_x(b);
    return volt_step_set_loss(s, volt_mse(s, volt_linear(s, x, m->w, m->b), x));
}
static volt_status regr_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    regr *m = self;
    volt_tensor *x = volt_batch_x(b);
    return volt_log(s, "val_loss", volt_mse(s, volt_linear(s, x, m->w, m->b), x), 0);
}
static volt_status sgd_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.01f;
    return VOLT_OK;
}
static const volt_module_ops regr_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "regr", .setup = regr_setup,
                                          .configure_optimizers = sgd_opt, .training_step = regr_train,
                                          .validation_step = regr_val };

static void test_lr_find(volt_dataset *ds) {
    char root[512];
    snprintf(root, sizeof root, "%s/lr_find", vtest_tmpdir());
    vtest_fresh_dir(root);
    volt_loader *tl = make_loader(ds, 8, true, 0), *vl = make_loader(ds, 32, false, 0);   /* 26 batches */
    regr m = { 0 };
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    CHECK_OK(volt_trainer_validate(t, &regr_ops, &m, vl, NULL));   /* sets the model up */
    int64_t n;
    float *before = snapshot(t, &n);
    volt_lr_find_config lc;
    volt_lr_find_config_init(&lc);
    lc.min_lr = 1e-5;
    lc.max_lr = 1e3;   /* far past divergence: the test stops early */
    lc.num_training = 60;
    volt_lr_find_result r;
    CHECK_OK(volt_trainer_lr_find(t, &regr_ops, &m, tl, &lc, &r));
    CHECK(r.n >= 14 && r.n < 60, "stopped early past divergence after %lld steps", (long long)r.n);
    CHECK(fabs(r.lrs[0] - 1e-5) < 1e-12 && fabs(r.lrs[2] / r.lrs[1] - r.lrs[1] / r.lrs[0]) < 1e-9 &&
          fabs(log(r.lrs[1] / r.lrs[0]) - log(1e8) / 59) < 1e-9, "exponential steps from min_lr");
    CHECK(isfinite(r.suggestion) && r.suggestion > 1e-5 && r.suggestion < 1e3, "suggestion %g inside the range", r.suggestion);
    double lo = INFINITY;
    for (int64_t i = 0; i < r.n; i++) lo = r.losses[i] < lo ? r.losses[i] : lo;
    CHECK(r.losses[0] > lo && (r.losses[r.n - 1] > 4 * lo || !isfinite(r.losses[r.n - 1])), "the loss fell, then diverged: %g, min %g, last %g",
          r.losses[0], lo, r.losses[r.n - 1]);
    float *after = snapshot(t, &n);
    CHECK(!memcmp(before, after, sizeof(float) * (size_t)n), "lr_find restores the weights");
    CHECK(volt_trainer_global_step(t) == 0, "and the loop state (step %lld)", (long long)volt_trainer_global_step(t));
    int hidden = 0;
    DIR *d = opendir(root);
    for (struct dirent *e; d && (e = readdir(d));) hidden += !strncmp(e->d_name, ".lr_find", 8);
    if (d) closedir(d);
    CHECK(hidden == 0, "the hidden checkpoint is removed (%d left)", hidden);
    volt_lr_find_result_free(&r);
    CHECK_OK(volt_trainer_fit(t, &regr_ops, &m, tl, vl, NULL));   /* a fresh optimizer from configure_optimizers */
    CHECK(volt_trainer_global_step(t) == 26, "fit after lr_find: %lld steps", (long long)volt_trainer_global_step(t));
    /* bad ranges */
    lc.max_lr = lc.min_lr;
    CHECK(volt_trainer_lr_find(t, &regr_ops, &m, tl, &lc, &r) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "max_lr"),
          "min_lr == max_lr: %s", volt_trainer_errmsg(t));
    /* a min_lr that is 0 as a float (the sweep sets float rates: it trained at lr 0) */
    lc.min_lr = 1e-60;
    lc.max_lr = 1e-50;
    CHECK(volt_trainer_lr_find(t, &regr_ops, &m, tl, &lc, &r) == VOLT_ERR_INVALID_ARG &&
              strstr(volt_trainer_errmsg(t), "as a float, at least"), "min_lr 1e-60: %s", volt_trainer_errmsg(t));
    free(before); free(after);
    volt_trainer_destroy(t);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

/* lr_find with accumulate_grad_batches 2 over batches of 8 takes the steps lr_find without
 * accumulation takes over batches of 16 (the same samples in the same order; the loss is a mean
 * over equal halves): the same learning rates, the same losses, the same point of stopping. An
 * lr_find that ran one step per batch, or recorded one batch's loss, would differ. */
static void lr_find_run_with(volt_dataset *ds, const char *root, int64_t bs, int64_t acc, volt_lr_find_result *r) {
    vtest_fresh_dir(root);
    volt_loader *tl = make_loader(ds, bs, true, 0), *vl = make_loader(ds, 32, false, 0);
    regr m = { 0 };
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.accumulate_grad_batches = acc;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    CHECK_OK(volt_trainer_validate(t, &regr_ops, &m, vl, NULL));
    int64_t n;
    float *before = snapshot(t, &n);
    volt_lr_find_config lc;
    volt_lr_find_config_init(&lc);
    lc.min_lr = 1e-5;
    lc.max_lr = 1e3;
    lc.num_training = 60;
    CHECK_OK(volt_trainer_lr_find(t, &regr_ops, &m, tl, &lc, r));
    float *after = snapshot(t, &n);
    CHECK(!memcmp(before, after, sizeof(float) * (size_t)n), "lr_find (accumulate_grad_batches %lld) restores the weights", (long long)acc);
    CHECK_OK(volt_trainer_fit(t, &regr_ops, &m, tl, vl, NULL));
    CHECK(volt_trainer_global_step(t) == 192 / bs / acc, "fit after lr_find: %lld steps", (long long)volt_trainer_global_step(t));
    free(before); free(after);
    volt_trainer_destroy(t);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

static void test_lr_find_accumulate(void) {
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *cols[2] = { X, Y };
    volt_dataset *ds = NULL;   /* the first 192 samples: whole windows in both runs */
    CHECK_OK(volt_dataset_from_arrays(2, f, cols, 192, &ds));
    char root[512];
    snprintf(root, sizeof root, "%s/lr_find_acc", vtest_tmpdir());
    volt_lr_find_result a, b;
    lr_find_run_with(ds, root, 8, 2, &a);
    lr_find_run_with(ds, root, 16, 1, &b);
    CHECK(a.n == b.n && a.n >= 14 && a.n < 60, "the same number of points: %lld and %lld", (long long)a.n, (long long)b.n);
    double worst = 0;
    for (int64_t i = 0; i < a.n && i < b.n; i++) {
        if (a.lrs[i] != b.lrs[i]) worst = INFINITY;
        if (!isfinite(a.losses[i]) || !isfinite(b.losses[i])) break;
        const double d = fabs(a.losses[i] - b.losses[i]) / fmax(fabs(b.losses[i]), 1e-12);
        worst = d > worst ? d : worst;
    }
    CHECK(worst < 1e-3, "k = 2 over batches of 8 follows k = 1 over batches of 16: worst relative loss difference %g", worst);
    CHECK(isfinite(a.suggestion) && a.suggestion == b.suggestion, "the same suggestion: %g and %g", a.suggestion, b.suggestion);
    volt_lr_find_result_free(&a);
    volt_lr_find_result_free(&b);
    volt_dataset_destroy(ds);
}

static void test_config_errors(void) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.strategy = "dpp";
    volt_trainer *t = NULL;
    CHECK(volt_trainer_create(&c, &t) == VOLT_ERR_UNSUPPORTED && strstr(volt_trainer_errmsg(t), "dpp") &&
          strstr(volt_trainer_errmsg(t), "valid"), "bad strategy: %s", t ? volt_trainer_errmsg(t) : "");
    volt_trainer_destroy(t);
    volt_trainer_config_init(&c);
    c.precision = "bf17";
    CHECK(volt_trainer_create(&c, &t) == VOLT_ERR_UNSUPPORTED && strstr(volt_trainer_errmsg(t), "bf17"), "bad precision");
    volt_trainer_destroy(t);
    volt_trainer_config_init(&c);
    c.accumulate_grad_batches = 0;
    CHECK(volt_trainer_create(&c, &t) == VOLT_ERR_INVALID_ARG, "accumulate 0 rejected");
    volt_trainer_destroy(t);
    /* settings create took and ignored or misread: each refused, naming the field */
    static const struct { const char *field; int k; } bad[] = {
        { "gradient_clip_val", 0 }, { "gradient_clip_val", 1 }, { "devices", 2 }, { "max_epochs", 3 },
        { "limit_train_batches", 4 }, { "max_epochs and max_steps", 5 }, { "num_nodes", 6 },
        { "log_every_n_steps must be >= 1, got 0", 7 }, { "log_every_n_steps must be >= 1, got -3", 8 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        volt_trainer_config_init(&c);
        switch (bad[i].k) {
        case 0: c.gradient_clip_val = NAN; break;
        case 1: c.gradient_clip_val = INFINITY; break;
        case 2: c.devices = 0; break;
        case 3: c.max_epochs = -5; break;
        case 4: c.limit_train_batches = -7; break;
        case 5: c.max_steps = -3; break;
        case 7: c.log_every_n_steps = 0; break;   /* was taken as 1 without a word */
        case 8: c.log_every_n_steps = -3; break;
        default: c.num_nodes = 0; break;
        }
        char err[512] = "";
        const volt_status cs = volt_trainer_config_check(&c, err, sizeof err);
        t = NULL;
        const volt_status st = volt_trainer_create(&c, &t);
        CHECK(st == VOLT_ERR_INVALID_ARG && cs == st && strstr(err, bad[i].field) && t && strstr(volt_trainer_errmsg(t), bad[i].field),
              "case %d (%s): create %s, check %s: %s", bad[i].k, bad[i].field, volt_status_str(st), volt_status_str(cs), err);
        volt_trainer_destroy(t);
    }
    /* NULL trainer or out pointer: an error, not a crash */
    volt_trainer_config_init(&c);
    CHECK(volt_trainer_create(&c, NULL) == VOLT_ERR_INVALID_ARG, "create with out NULL");
    /* a NULL config or one of an unknown version: said on the shell *out holds (a bare
     * "version mismatch" before), and by config_check in err */
    t = NULL;
    volt_status cst = volt_trainer_create(NULL, &t);
    CHECK(cst == VOLT_ERR_INVALID_ARG && t && strstr(volt_trainer_errmsg(t), "trainer: config is NULL"), "create(NULL): %s '%s'",
          volt_status_str(cst), volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    char cerr[256] = "";
    CHECK(volt_trainer_config_check(NULL, cerr, sizeof cerr) == VOLT_ERR_INVALID_ARG && strstr(cerr, "config is NULL"),
          "config_check(NULL): '%s'", cerr);
    c.version = 99;
    t = NULL;
    cst = volt_trainer_create(&c, &t);
    CHECK(cst == VOLT_ERR_VERSION && t && strstr(volt_trainer_errmsg(t), "config version 99 unknown"), "create(version 99): %s '%s'",
          volt_status_str(cst), volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_trainer_config_init(&c);
    CHECK(volt_trainer_fit(NULL, NULL, NULL, NULL, NULL, NULL) == VOLT_ERR_INVALID_ARG &&
          volt_trainer_validate(NULL, NULL, NULL, NULL, NULL) == VOLT_ERR_INVALID_ARG &&
          volt_trainer_test(NULL, NULL, NULL, NULL, NULL) == VOLT_ERR_INVALID_ARG &&
          volt_trainer_predict(NULL, NULL, NULL, NULL, NULL, NULL, NULL) == VOLT_ERR_INVALID_ARG, "fit/validate/test/predict(NULL)");
    CHECK(volt_trainer_add_callback(NULL, NULL, NULL) == VOLT_ERR_INVALID_ARG, "add_callback(NULL)");
    double v = 0;
    CHECK(volt_trainer_global_step(NULL) == 0 && volt_trainer_current_epoch(NULL) == 0 && !volt_trainer_metric(NULL, "x", &v) &&
          volt_trainer_world_size(NULL) == 1 && volt_trainer_rank(NULL) == 0 && !volt_trainer_log_dir(NULL) &&
          volt_trainer_num_callbacks(NULL) == 0 && volt_trainer_metric_count(NULL) == 0, "getters on NULL");
}

/* One epoch of at most `batches` training batches; no checkpoint, logger or progress bar. */
static volt_trainer *short_trainer(int64_t batches) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_epochs = 1;
    c.limit_train_batches = batches;
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = false;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    return t;
}

/* configure_optimizers returns a bad optimizer / scheduler config: fit says which field and why. */
static int bad_optim_case;
static volt_status bad_opt(void *self, volt_optim_setup *o) {
    VOLT_TRY(net_opt(self, o));
    switch (bad_optim_case) {
    case 0: o->scheduler.total_steps = 3; break;               /* <= warmup_steps 5 */
    case 1: o->scheduler.kind = VOLT_SCHED_STEP; o->scheduler.step_size = 0; break;
    case 2: o->scheduler.version = 0; break;
    case 3: o->scheduler.version = VOLT_SCHEDULER_CONFIG_VERSION + 1; break;
    case 4: o->optimizer.beta1 = 1.5f; break;
    case 5: o->optimizer.version = 0; break;
    default: o->optimizer.version = VOLT_OPTIMIZER_CONFIG_VERSION + 1; break;
    }
    return VOLT_OK;
}

static void test_optim_config_errors(volt_dataset *ds) {
    static const struct { volt_status st; const char *expect, *expect2; } cases[] = {
        { VOLT_ERR_INVALID_ARG, "scheduler 'linear': total_steps (3) must be > warmup_steps (5)", "module 'net'" },
        { VOLT_ERR_INVALID_ARG, "scheduler 'step': step_size must be > 0, got 0", "configure_optimizers" },
        { VOLT_ERR_VERSION, "volt_scheduler_config: version 0", "volt_scheduler_config_init" },
        { VOLT_ERR_VERSION, "volt_scheduler_config: version 3", "1..2" },
        { VOLT_ERR_INVALID_ARG, "optimizer: invalid beta1 1.5", "[0, 1)" },
        { VOLT_ERR_VERSION, "volt_optimizer_config: version 0", "volt_optimizer_config_init" },
        { VOLT_ERR_VERSION, "volt_optimizer_config: version 3", "1..2" },
    };
    volt_module_ops ops = net_ops;
    ops.configure_optimizers = bad_opt;
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        bad_optim_case = k;
        net m = { .in = IN, .hidden = 8, .out = NC };
        volt_trainer *t = short_trainer(1);
        volt_loader *tl = make_loader(ds, 8, false, 0);
        volt_status st = volt_trainer_fit(t, &ops, &m, tl, NULL, NULL);
        const char *e = volt_trainer_errmsg(t);
        CHECK(st == cases[k].st && strstr(e, cases[k].expect) && strstr(e, cases[k].expect2),
              "optim config case %d: %s (%s)", k, e, volt_status_str(st));
        volt_trainer_destroy(t);
        volt_loader_destroy(tl);
    }
}

/* reload_dataloaders_every_n_epochs (Lightning's): fit_dm asks the datamodule for its loaders
 * again every N epochs of the fit, counted from the epoch it starts (or resumes) at; each epoch
 * runs the batches of the loader it got. A fit given loaders, a negative N and N with
 * overfit_batches are refused, named; a datamodule that returns no loader fails the fit. */
typedef struct { volt_loader *pool[3], *vpool[3]; int train_calls, val_calls; bool none_at_reload; } rdm;
static volt_loader *rdm_train(void *self) {
    rdm *d = self;
    if (d->none_at_reload && d->train_calls > 0) return NULL;
    return d->pool[d->train_calls++ % 3];
}
static volt_loader *rdm_val(void *self) { rdm *d = self; return d->vpool[d->val_calls++ % 3]; }
static const volt_datamodule_ops rdm_ops = { .version = VOLT_DATAMODULE_OPS_VERSION, .name = "reloading",
                                             .train_loader = rdm_train, .val_loader = rdm_val };
static int64_t g_rl_batches[8], g_rl_val[8];
static volt_status rl_epoch_start(void *self, volt_trainer *t) {
    (void)self;
    const int64_t e = volt_trainer_current_epoch(t);
    if (e >= 0 && e < 8) g_rl_batches[e] = volt_trainer_num_train_batches(t);
    return VOLT_OK;
}
static volt_status rl_val_batch(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {   /* the epoch's count */
    (void)self; (void)b;
    const int64_t e = volt_trainer_current_epoch(t);
    if (e >= 0 && e < 8 && i + 1 > g_rl_val[e]) g_rl_val[e] = i + 1;
    return VOLT_OK;
}
static const volt_callback_ops rl_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "EpochBatches",
                                          .on_train_epoch_start = rl_epoch_start, .on_validation_batch_end = rl_val_batch };
static volt_trainer *rl_trainer(const char *root, int64_t epochs, int64_t every, int64_t overfit, volt_status want) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_epochs = epochs;
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = c.enable_model_summary = false;
    c.default_root_dir = root;
    c.num_sanity_val_steps = 0;
    c.reload_dataloaders_every_n_epochs = every;
    c.overfit_batches = overfit;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == want, "trainer_create (reload %lld, overfit %lld): %s (%s)", (long long)every, (long long)overfit,
          volt_status_str(st), t ? volt_trainer_errmsg(t) : "");
    if (st >= 0) CHECK_OK(volt_trainer_add_callback(t, &rl_ops, NULL));
    return t;
}
static void test_reload_dataloaders(volt_dataset *ds) {
    char root[512], ck[600];
    snprintf(root, sizeof root, "%s/reload_dl", vtest_tmpdir());
    snprintf(ck, sizeof ck, "%s/at3.safetensors", root);
    vtest_fresh_dir(root);
    rdm d = { .pool = { make_loader(ds, 8, true, 0), make_loader(ds, 16, true, 0), make_loader(ds, 32, true, 0) },
              .vpool = { make_loader(ds, 8, false, 0), make_loader(ds, 16, false, 0), make_loader(ds, 32, false, 0) } };
    const int64_t nb[3] = { volt_loader_num_batches(d.pool[0]), volt_loader_num_batches(d.pool[1]),
                            volt_loader_num_batches(d.pool[2]) };
    net m = { .in = IN, .hidden = 8, .out = NC };
    volt_trainer *t = rl_trainer(root, 5, 2, 0, VOLT_OK);
    memset(g_rl_batches, 0, sizeof g_rl_batches);
    memset(g_rl_val, 0, sizeof g_rl_val);
    CHECK_OK(volt_trainer_fit_dm(t, &net_ops, &m, &rdm_ops, &d, NULL));
    CHECK(d.train_calls == 3 && d.val_calls == 3, "5 epochs, every 2: train_loader asked %d times, val_loader %d (want 3, 3)",
          d.train_calls, d.val_calls);
    CHECK(g_rl_batches[0] == nb[0] && g_rl_batches[1] == nb[0] && g_rl_batches[2] == nb[1] && g_rl_batches[3] == nb[1] &&
          g_rl_batches[4] == nb[2], "batches per epoch %lld %lld %lld %lld %lld (the loaders have %lld, %lld, %lld)",
          (long long)g_rl_batches[0], (long long)g_rl_batches[1], (long long)g_rl_batches[2], (long long)g_rl_batches[3],
          (long long)g_rl_batches[4], (long long)nb[0], (long long)nb[1], (long long)nb[2]);
    CHECK(g_rl_val[0] == nb[0] && g_rl_val[1] == nb[0] && g_rl_val[2] == nb[1] && g_rl_val[3] == nb[1] && g_rl_val[4] == nb[2],
          "validation batches per epoch %lld %lld %lld %lld %lld", (long long)g_rl_val[0], (long long)g_rl_val[1],
          (long long)g_rl_val[2], (long long)g_rl_val[3], (long long)g_rl_val[4]);
    volt_trainer_destroy(t);
    /* with a BatchSizeFinder in fit (power, 2 trials: 2, 4 -> 4), every reloaded loader gets 4 */
    t = rl_trainer(root, 3, 1, 0, VOLT_OK);
    volt_batch_size_finder_config bc;
    volt_batch_size_finder_config_init(&bc);
    bc.find.max_trials = 2;
    bc.find.steps_per_trial = 1;
    CHECK_OK(volt_add_batch_size_finder(t, &bc));
    d.train_calls = d.val_calls = 0;
    memset(g_rl_batches, 0, sizeof g_rl_batches);
    memset(g_rl_val, 0, sizeof g_rl_val);
    CHECK_OK(volt_trainer_fit_dm(t, &net_ops, &m, &rdm_ops, &d, NULL));
    const int64_t n4 = (volt_dataset_len(ds) + 3) / 4;
    CHECK(g_rl_batches[0] == n4 && g_rl_batches[1] == n4 && g_rl_batches[2] == n4 && g_rl_val[2] == n4 &&
          volt_loader_batch_size(d.pool[2]) == 4 && volt_loader_batch_size(d.vpool[2]) == 4,
          "BatchSizeFinder's 4 on the reloaded loaders: batches %lld %lld %lld (want %lld), val %lld",
          (long long)g_rl_batches[0], (long long)g_rl_batches[1], (long long)g_rl_batches[2], (long long)n4,
          (long long)g_rl_val[2]);
    volt_trainer_destroy(t);
    for (int i = 0; i < 3; i++) {   /* back to their sizes for what follows */
        CHECK_OK(volt_loader_set_batch_size(d.pool[i], (int64_t)8 << i));
        CHECK_OK(volt_loader_set_batch_size(d.vpool[i], (int64_t)8 << i));
    }
    /* a fit of 3 epochs, then resumed to 5: the count starts at the resumed epoch (3), so no reload */
    t = rl_trainer(root, 3, 2, 0, VOLT_OK);
    d.train_calls = d.val_calls = 0;
    CHECK_OK(volt_trainer_fit_dm(t, &net_ops, &m, &rdm_ops, &d, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(t, ck));
    volt_trainer_destroy(t);
    t = rl_trainer(root, 5, 2, 0, VOLT_OK);
    d.train_calls = d.val_calls = 0;
    memset(g_rl_batches, 0, sizeof g_rl_batches);
    CHECK_OK(volt_trainer_fit_dm(t, &net_ops, &m, &rdm_ops, &d, ck));
    CHECK(d.train_calls == 1 && g_rl_batches[3] == nb[0] && g_rl_batches[4] == nb[0] && volt_trainer_current_epoch(t) == 5,
          "resumed at epoch 3: asked %d times, batches %lld %lld", d.train_calls, (long long)g_rl_batches[3],
          (long long)g_rl_batches[4]);
    /* loaders given to fit: refused */
    volt_status st = volt_trainer_fit(t, &net_ops, &m, d.pool[0], NULL, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "needs the loaders from a datamodule"),
          "plain fit with reload: %s (%s)", volt_status_str(st), volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    /* no loader at the reload: named */
    t = rl_trainer(root, 3, 1, 0, VOLT_OK);
    d.train_calls = 0;
    d.none_at_reload = true;
    st = volt_trainer_fit_dm(t, &net_ops, &m, &rdm_ops, &d, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "train_loader returned no loader when fit reloaded it at "
          "epoch 1") && volt_trainer_current_epoch(t) == 1, "no loader at the reload: %s (%s)", volt_status_str(st),
          volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    /* bad settings */
    t = rl_trainer(root, 3, -1, 0, VOLT_ERR_INVALID_ARG);
    volt_trainer_destroy(t);
    t = rl_trainer(root, 3, 2, 4, VOLT_ERR_INVALID_ARG);
    volt_trainer_destroy(t);
    for (int i = 0; i < 3; i++) {
        volt_loader_destroy(d.pool[i]);
        volt_loader_destroy(d.vpool[i]);
    }
}

/* ---- datamodule ------------------------------------------------------------------------------ */
typedef struct {
    volt_dataset *ds; volt_loader *tl, *vl; char log[512]; int fail_prepare, fail_setup;
    int token, loaded, bad_state, reject;   /* version 2: what state_dict saves, what load_state_dict got */
} dmod;
static const char *const dm_stage_names[] = { "fit", "validate", "test", "predict" };
static volt_status dm_prepare(void *self) {
    dmod *d = self;
    strcat(d->log, "prepare ");
    return d->fail_prepare ? VOLT_ERR_IO : VOLT_OK;
}
static volt_status dm_setup(void *self, volt_stage st) {
    dmod *d = self;
    snprintf(d->log + strlen(d->log), sizeof d->log - strlen(d->log), "setup:%s ", dm_stage_names[st]);
    if (d->fail_setup) return VOLT_ERR_INVALID_ARG;
    if (!d->tl) d->tl = make_loader(d->ds, 8, true, 0);
    if (!d->vl) d->vl = make_loader(d->ds, 16, false, 0);
    return VOLT_OK;
}
static volt_loader *dm_train(void *self) { return ((dmod *)self)->tl; }
static volt_loader *dm_val(void *self) { return ((dmod *)self)->vl; }
static void dm_teardown(void *self, volt_stage st) {
    dmod *d = self;
    snprintf(d->log + strlen(d->log), sizeof d->log - strlen(d->log), "teardown:%s ", dm_stage_names[st]);
}
static volt_status dm_count_pred(void *ctx, const volt_batch *b, const volt_tensor *pred) {
    *(int64_t *)ctx += b->size;
    return VOLT_OK;
}
static char *dm_state(void *self) {
    dmod *d = self;
    if (d->bad_state) return strdup("[1, 2]");
    char b[64];
    snprintf(b, sizeof b, "{\"token\": %d}", d->token);
    return strdup(b);
}
static volt_status dm_load(void *self, const char *json) {
    dmod *d = self;
    if (d->reject) return VOLT_ERR_CORRUPT;
    return sscanf(json, "{\"token\":%d}", &d->loaded) == 1 ? VOLT_OK : VOLT_ERR_CORRUPT;
}
static const volt_datamodule_ops dm_ops = { .version = VOLT_DATAMODULE_OPS_VERSION, .name = "synthetic",
    .prepare_data = dm_prepare, .setup = dm_setup, .train_loader = dm_train, .val_loader = dm_val,
    .test_loader = dm_val, .predict_loader = dm_val, .teardown = dm_teardown, .state_dict = dm_state,
    .load_state_dict = dm_load };

/* saves a checkpoint at fit's end, inside the *_dm call */
static char g_dm_ckpt[600];
static volt_status dm_save_at_end(void *self, volt_trainer *t) {
    (void)self;
    return volt_trainer_save_checkpoint(t, g_dm_ckpt);
}

/* the datamodule's state (table version 2) in a checkpoint written during fit_dm: given back by
 * validate_dm and a resumed fit_dm; another datamodule's is not given; a state that is not a
 * JSON object fails the save, a rejected one the load, naming the datamodule; a version-1
 * table saves none (its table has no such fields) */
static void test_datamodule_state(volt_dataset *ds) {
    char root[512];
    snprintf(root, sizeof root, "%s/dm_state", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(g_dm_ckpt, sizeof g_dm_ckpt, "%s/end.safetensors", root);
    net m = { .in = IN, .hidden = 8, .out = NC };
    volt_trainer *t = make_trainer(1, root);
    const volt_callback_ops saver = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Saver", .on_fit_end = dm_save_at_end };
    CHECK_OK(volt_trainer_add_callback(t, &saver, NULL));
    dmod d = { .ds = ds, .token = 41 };
    CHECK_OK(volt_trainer_fit_dm(t, &net_ops, &m, &dm_ops, &d, NULL));
    volt_st_file *f = NULL;
    char err[512];
    CHECK_OK(volt_st_open(g_dm_ckpt, &f, err, sizeof err));
    const char *js = f ? volt_st_meta(f, "volt.datamodule") : NULL;
    CHECK(js && !strcmp(js, "{\"name\":\"synthetic\",\"state\":{\"token\":41}}"), "the datamodule's state in the file: %s",
          js ? js : "(none)");
    volt_st_close(f);
    /* validate from it: the state comes back */
    dmod e = { .ds = ds, .tl = d.tl, .vl = d.vl, .loaded = -1 };
    CHECK_OK(volt_trainer_validate_dm(t, &net_ops, &m, &dm_ops, &e, g_dm_ckpt));
    CHECK(e.loaded == 41, "validate_dm from the checkpoint: load_state_dict got %d, want 41", e.loaded);
    /* a resumed fit too (2 epochs from the one saved) */
    volt_trainer *t2 = make_trainer(2, root);
    e.loaded = -1;
    CHECK_OK(volt_trainer_fit_dm(t2, &net_ops, &m, &dm_ops, &e, g_dm_ckpt));
    CHECK(e.loaded == 41 && volt_trainer_current_epoch(t2) == 2, "resumed fit_dm: load_state_dict got %d, epoch %lld", e.loaded,
          (long long)volt_trainer_current_epoch(t2));
    volt_trainer_destroy(t2);
    /* another datamodule's name: not given */
    volt_datamodule_ops other = dm_ops;
    other.name = "other";
    e.loaded = -1;
    CHECK_OK(volt_trainer_validate_dm(t, &net_ops, &m, &other, &e, g_dm_ckpt));
    CHECK(e.loaded == -1, "another datamodule got the state (%d)", e.loaded);
    /* rejected: the call fails naming it */
    e.reject = 1;
    volt_status st = volt_trainer_validate_dm(t, &net_ops, &m, &dm_ops, &e, g_dm_ckpt);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(volt_trainer_errmsg(t), "datamodule 'synthetic' rejected its state"),
          "a rejected state: %s (%s)", volt_status_str(st), volt_trainer_errmsg(t));
    e.reject = 0;
    /* not a JSON object: the save fails, naming it */
    d.bad_state = 1;
    st = volt_trainer_fit_dm(t, &net_ops, &m, &dm_ops, &d, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "datamodule 'synthetic': state_dict returned JSON, not a "
          "JSON object"), "a state that is no object: %s (%s)", volt_status_str(st), volt_trainer_errmsg(t));
    d.bad_state = 0;
    /* a version-1 table, as large as version 1's (under ASan a read of the newer fields is caught): no state */
    const size_t v1_size = offsetof(volt_datamodule_ops, state_dict);
    unsigned char *v1 = malloc(v1_size);
    CHECK(v1 != NULL, "out of memory");
    memcpy(v1, &dm_ops, v1_size);
    const uint32_t one = 1;
    memcpy(v1 + offsetof(volt_datamodule_ops, version), &one, sizeof one);
    CHECK_OK(volt_trainer_fit_dm(t, &net_ops, &m, (const volt_datamodule_ops *)(void *)v1, &d, NULL));
    free(v1);
    CHECK_OK(volt_st_open(g_dm_ckpt, &f, err, sizeof err));
    CHECK(f && !volt_st_meta(f, "volt.datamodule"), "a version-1 datamodule's state was saved");
    volt_st_close(f);
    /* outside a *_dm call: none */
    CHECK_OK(volt_trainer_save_checkpoint(t, g_dm_ckpt));
    CHECK_OK(volt_st_open(g_dm_ckpt, &f, err, sizeof err));
    CHECK(f && !volt_st_meta(f, "volt.datamodule"), "a save after the call holds the datamodule's state");
    volt_st_close(f);
    volt_trainer_destroy(t);
    volt_loader_destroy(d.tl);
    volt_loader_destroy(d.vl);
}

static void test_datamodule(volt_dataset *ds) {
    dmod d = { .ds = ds };
    net m = { .in = IN, .hidden = 8, .out = NC };
    char root[512];
    snprintf(root, sizeof root, "%s/dm", vtest_tmpdir());
    volt_trainer *t = make_trainer(2, root);
    volt_module_ops pops = net_ops;   /* one table for every stage: another table would not get fit's weights */
    pops.predict_step = net_predict;
    CHECK_OK(volt_trainer_fit_dm(t, &pops, &m, &dm_ops, &d, NULL));
    CHECK(volt_trainer_global_step(t) == 2 * 13, "datamodule fit: %lld steps", (long long)volt_trainer_global_step(t));
    CHECK_OK(volt_trainer_test_dm(t, &pops, &m, &dm_ops, &d, NULL));
    double acc;
    CHECK(volt_trainer_metric(t, "val_acc", &acc), "test through the datamodule logged");
    CHECK(!strcmp(d.log, "prepare setup:fit teardown:fit prepare setup:test teardown:test "), "datamodule calls: %s",
          d.log);
    /* validate and predict through the datamodule: their stage, the val / predict loaders */
    d.log[0] = 0;
    CHECK_OK(volt_trainer_validate_dm(t, &pops, &m, &dm_ops, &d, NULL));
    CHECK(volt_trainer_metric(t, "val_acc", &acc) && acc >= 0 && acc <= 1, "validate through the datamodule logged");
    int64_t n_pred = 0;
    CHECK_OK(volt_trainer_predict_dm(t, &pops, &m, &dm_ops, &d, NULL, dm_count_pred, &n_pred));
    CHECK(n_pred == volt_dataset_len(ds), "predict through the datamodule: %lld of %lld samples", (long long)n_pred,
          (long long)volt_dataset_len(ds));
    CHECK(!strcmp(d.log, "prepare setup:validate teardown:validate prepare setup:predict teardown:predict "),
          "datamodule calls (validate, predict): %s", d.log);
    /* prepare_data or setup failing: a clear error naming the datamodule, no setup after a failed
     * prepare_data, no loop (global_step unchanged), and no teardown of what was not set up */
    const int64_t steps = volt_trainer_global_step(t);
    d.log[0] = 0;
    d.fail_prepare = 1;
    CHECK(volt_trainer_fit_dm(t, &net_ops, &m, &dm_ops, &d, NULL) == VOLT_ERR_IO &&
          strstr(volt_trainer_errmsg(t), "datamodule 'synthetic': prepare_data failed"), "prepare_data failing: %s",
          volt_trainer_errmsg(t));
    CHECK(!strcmp(d.log, "prepare "), "nothing after a failed prepare_data: %s", d.log);
    d.fail_prepare = 0;
    d.fail_setup = 1;
    d.log[0] = 0;
    CHECK(volt_trainer_test_dm(t, &net_ops, &m, &dm_ops, &d, NULL) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_trainer_errmsg(t), "datamodule 'synthetic': setup failed"), "setup failing: %s",
          volt_trainer_errmsg(t));
    CHECK(!strcmp(d.log, "prepare setup:test "), "no loop and no teardown after a failed setup: %s", d.log);
    CHECK(volt_trainer_global_step(t) == steps, "no training after a failed datamodule");
    dmod bad = { .ds = ds };
    volt_datamodule_ops v0 = dm_ops;
    v0.version = 99;
    CHECK(volt_trainer_fit_dm(t, &net_ops, &m, &v0, &bad, NULL) == VOLT_ERR_VERSION, "datamodule version checked");
    CHECK(volt_trainer_fit_dm(t, &net_ops, &m, NULL, &bad, NULL) == VOLT_ERR_VERSION &&
          strstr(volt_trainer_errmsg(t), "datamodule: unknown table version 0"), "a NULL datamodule: %s",
          volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(d.tl);
    volt_loader_destroy(d.vl);
}

/* ---- a dataset that fails mid-loop: every loop returns the loader's error, the trainer is reusable -- */
typedef struct { int64_t fail_at; } flaky;
static int64_t flaky_len(void *self) { (void)self; return NS; }
static volt_status flaky_get(void *self, int64_t i, void *const *dst) {
    const flaky *f = self;
    if (i == f->fail_at) return VOLT_ERR_IO;   /* a file gone, a read error */
    memcpy(dst[0], X + i * IN, sizeof(float) * IN);
    memcpy(dst[1], Y + i, sizeof(int64_t));
    return VOLT_OK;
}
static const volt_dataset_ops flaky_ops = { .version = VOLT_DATASET_OPS_VERSION, .name = "flaky", .len = flaky_len,
                                            .get = flaky_get, .destroy = free };

static volt_status pred_count(void *ctx, const volt_batch *b, const volt_tensor *pred) {
    *(int64_t *)ctx += b->size;
    return VOLT_OK;
}

static void test_loader_errors(volt_dataset *good) {
    char root[512];
    snprintf(root, sizeof root, "%s/flaky", vtest_tmpdir());
    for (int workers = 0; workers <= 2; workers += 2) {
        flaky *fl = malloc(sizeof *fl);
        fl->fail_at = 77;   /* batch 4 of 16-sample batches, unshuffled */
        volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_I64, VOLT_SCALAR } };
        volt_dataset *ds = NULL;
        CHECK_OK(volt_dataset_create(&flaky_ops, fl, 2, f, &ds));
        volt_loader *bad = make_loader(ds, 16, false, workers), *fine = make_loader(good, 16, false, workers);
        net m = { .in = IN, .hidden = 8, .out = NC };
        volt_module_ops ops = net_ops;
        ops.predict_step = net_predict;
        volt_trainer *t = make_trainer(2, root);
        const char *want = "data loader: dataset 'flaky': get(sample 77) failed";
        volt_status st = volt_trainer_fit(t, &ops, &m, bad, NULL, NULL);
        CHECK(st == VOLT_ERR_IO && strstr(volt_trainer_errmsg(t), want) && m.steps_run == 4,
              "fit, %d workers: %s (%s) after %lld training steps", workers, volt_trainer_errmsg(t), volt_status_str(st),
              (long long)m.steps_run);
        /* each evaluation loop: the same error, named */
        st = volt_trainer_validate(t, &ops, &m, bad, NULL);
        CHECK(st == VOLT_ERR_IO && strstr(volt_trainer_errmsg(t), want), "validate, %d workers: %s", workers,
              volt_trainer_errmsg(t));
        st = volt_trainer_test(t, &ops, &m, bad, NULL);
        CHECK(st == VOLT_ERR_IO && strstr(volt_trainer_errmsg(t), want), "test, %d workers: %s", workers,
              volt_trainer_errmsg(t));
        int64_t n = 0;
        st = volt_trainer_predict(t, &ops, &m, bad, NULL, pred_count, &n);
        CHECK(st == VOLT_ERR_IO && strstr(volt_trainer_errmsg(t), want) && n == 64, "predict, %d workers: %s (%lld rows out)",
              workers, volt_trainer_errmsg(t), (long long)n);
        /* fit's validation loader failing */
        st = volt_trainer_fit(t, &ops, &m, fine, bad, NULL);
        CHECK(st == VOLT_ERR_IO && strstr(volt_trainer_errmsg(t), want), "fit's validation, %d workers: %s", workers,
              volt_trainer_errmsg(t));
        /* the trainer and the loaders are not wedged: a fine run afterwards */
        fl->fail_at = -1;
        m.steps_run = 0;
        st = volt_trainer_fit(t, &ops, &m, fine, bad, NULL);
        CHECK(st == VOLT_OK, "a fit after the failures, %d workers: %s", workers, volt_trainer_errmsg(t));
        n = 0;
        CHECK_OK(volt_trainer_predict(t, &ops, &m, bad, NULL, pred_count, &n));
        CHECK(n == NS, "predict after the failures: %lld of %d rows", (long long)n, NS);
        volt_trainer_destroy(t);
        volt_loader_destroy(bad);
        volt_loader_destroy(fine);
        volt_dataset_destroy(ds);
    }
}

/* ---- volt_log_ratio: Σnum/Σden over the epoch, num/den per step ------------------------------- */
static volt_status ratio_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    net *m = self;
    VOLT_TRY(volt_log_ratio(s, "ratio", i, 2 * i + 3, VOLT_LOG_STEP | VOLT_LOG_EPOCH));
    if (m->log) {   /* misuse, recorded in m->log: num > den, an empty name */
        volt_status a = volt_log_ratio(s, "bad", 5, 4, 0), b2 = volt_log_ratio(s, "", 1, 2, 0);
        snprintf(m->log, m->cap, "%d %d", a == VOLT_ERR_INVALID_ARG, b2 == VOLT_ERR_INVALID_ARG);
    }
    return net_val(self, s, b, i);
}

/* Names that would merge two values into one metric, or break a CSV column: the step fails
 * naming the clash (the last one logged used to win without a word). */
static int g_clash;
static volt_status clash_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    VOLT_TRY(net_train(self, s, b, i));
    switch (g_clash) {
    case 0: VOLT_TRY(volt_log_value(s, "dup", 1, VOLT_LOG_STEP)); return volt_log_value(s, "dup", 2, VOLT_LOG_EPOCH);
    case 1: VOLT_TRY(volt_log_value(s, "x", 1, VOLT_LOG_STEP | VOLT_LOG_EPOCH)); return volt_log_value(s, "x_step", 5, VOLT_LOG_STEP);
    case 2: return volt_log_value(s, "train_loss", 123, VOLT_LOG_EPOCH);   /* net_train's is step and epoch */
    case 3: return volt_log_value(s, "nl\nname", 1, 0);
    case 4: return volt_log_value(s, "caf\xe9_latin1", 1, 0);   /* Latin-1, not UTF-8: a TensorBoard tag must be */
    case 5:   /* more names than the table holds: the step fails, none is dropped without a word */
        for (int k = 0; k < 300; k++) {
            char nm[16];
            snprintf(nm, sizeof nm, "m%03d", k);
            VOLT_TRY(volt_log_value(s, nm, k, VOLT_LOG_STEP));
        }
        return VOLT_OK;
    default: VOLT_TRY(volt_log_value(s, "same", 1, VOLT_LOG_STEP)); return volt_log_value(s, "same", 2, VOLT_LOG_STEP);
    }
}
/* volt_trainer_log_metric (a callback's) takes the names volt_log takes */
static volt_status cb_log_bad(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)b; (void)i;
    return volt_trainer_log_metric(t, "lr\nmain", 0.01, VOLT_LOG_STEP);
}
static const volt_callback_ops cb_log_bad_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "LogBad",
                                                  .on_train_batch_start = cb_log_bad };
static void test_log_clash(volt_dataset *ds) {
    static const char *const want[] = { "logged twice in this step with other flags (step, then epoch)",
                                        "clashes with 'x' logged with step and epoch", "volt_log('train_loss'): logged twice",
                                        "bad metric name 'nl\nname': a control character",
                                        "bad metric name 'caf\xe9_latin1': not UTF-8",
                                        "more than 256 metric names in one call", NULL };
    volt_module_ops ops = net_ops;
    ops.training_step = clash_train;
    for (g_clash = 0; g_clash < 7; g_clash++) {
        volt_trainer *t = short_trainer(2);
        volt_loader *l = make_loader(ds, 16, false, 0);
        net m = { .in = IN, .hidden = 8, .out = NC };
        const volt_status st = volt_trainer_fit(t, &ops, &m, l, NULL, NULL);
        if (want[g_clash])
            CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), want[g_clash]), "clash %d: %s: %s", g_clash,
                  volt_status_str(st), volt_trainer_errmsg(t));
        else
            CHECK(st == VOLT_OK, "the same name twice with the same flags: %s", volt_trainer_errmsg(t));
        volt_loader_destroy(l);
        volt_trainer_destroy(t);
    }
    volt_trainer *t = short_trainer(2);
    volt_loader *l = make_loader(ds, 16, false, 0);
    net m = { .in = IN, .hidden = 8, .out = NC };
    CHECK_OK(volt_trainer_add_callback(t, &cb_log_bad_ops, NULL));
    const volt_status st = volt_trainer_fit(t, &net_ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "log_metric: bad metric name 'lr\nmain': a control character"),
          "volt_trainer_log_metric with a newline: %s: %s", volt_status_str(st), volt_trainer_errmsg(t));
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
}

/* Errors that name who failed: no module table; a predict output callback (the caller's, not the
 * module's step). */
static volt_status pred_step(void *self, volt_step *s, const volt_batch *b, int64_t i, volt_tensor **out) {
    (void)i;
    *out = net_fwd(self, s, b);
    return *out ? VOLT_OK : volt_step_status(s);
}
static volt_status failing_out(void *ctx, const volt_batch *b, const volt_tensor *pred) {
    (void)ctx; (void)b; (void)pred;
    return VOLT_ERR_IO;
}
static void test_blame(volt_dataset *ds) {
    volt_trainer *t = short_trainer(1);
    volt_loader *l = make_loader(ds, 16, false, 0);
    CHECK(volt_trainer_fit(t, NULL, NULL, l, NULL, NULL) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "no module table"),
          "fit with ops NULL: %s", volt_trainer_errmsg(t));
    volt_module_ops ops = net_ops;
    ops.predict_step = pred_step;
    net m = { .in = IN, .hidden = 8, .out = NC };
    const volt_status st = volt_trainer_predict(t, &ops, &m, l, NULL, failing_out, NULL);
    CHECK(st == VOLT_ERR_IO && strstr(volt_trainer_errmsg(t), "predict: the output callback failed at batch 0") &&
          !strstr(volt_trainer_errmsg(t), "predict_step"), "failing output callback: %s: %s", volt_status_str(st),
          volt_trainer_errmsg(t));
    /* a call that succeeds after those: volt_trainer_errmsg no longer shows their error */
    CHECK(volt_trainer_fit(t, &ops, &m, l, NULL, NULL) == VOLT_OK && !volt_trainer_errmsg(t)[0],
          "fit after the failures: '%s'", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    /* a val loader and no validation_step: said on stderr (Lightning warns), not skipped silently */
    t = short_trainer(1);
    ops = net_ops;
    ops.validation_step = NULL;
    char path[600];
    snprintf(path, sizeof path, "%s/noval_stderr.txt", vtest_tmpdir());
    fflush(stderr);
    const int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 2);
    net m2 = { .in = IN, .hidden = 8, .out = NC };
    const volt_status fs = volt_trainer_fit(t, &ops, &m2, l, l, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    if (fd >= 0) close(fd);
    size_t n = 0;
    char *txt = (char *)vtest_slurp(path, &n);
    CHECK(fs == VOLT_OK && txt && strstr(txt, "val loader but module 'net' has no validation_step"), "no validation_step: %s; "
          "stderr: %s", volt_status_str(fs), txt ? txt : "(none)");
    free(txt);
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
}

/* A new user's mistakes in a training_step: each fails the fit with a message that names it. */
static int walk_case;
static volt_status walk_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    net *m = self;
    volt_tensor *logits = net_fwd(m, s, b);
    switch (walk_case) {
    case 0: return volt_classification_step(s, logits, volt_batch_y(b), NULL);          /* crashed in strcmp */
    case 1: return volt_classification_step(s, logits, volt_batch_y(b), "trian");       /* logged trian_loss, then "no loss" */
    case 2: return volt_classification_step(s, logits, volt_batch_field(b, "label"), "train");   /* the field is "y" */
    case 3: return volt_step_set_loss(s, logits);                                        /* (N, C), not a scalar */
    default:   /* a field missing in one step is not blamed for a NULL in the next */
        if (i == 0) {
            if (volt_batch_field(b, "mask")) return VOLT_ERR_STATE;
            return volt_step_set_loss(s, volt_cross_entropy(s, logits, volt_batch_y(b)));
        }
        return volt_step_set_loss(s, volt_cross_entropy(s, logits, NULL));
    }
}

static void test_walkthrough(volt_dataset *ds) {
    static const struct { const char *want, *not; volt_status st; } cases[] = {
        { "volt_classification_step: stage NULL is not one of \"train\", \"val\", \"test\", \"predict\"", NULL, VOLT_ERR_INVALID_ARG },
        { "volt_classification_step: stage \"trian\" is not one of", "did not set a loss", VOLT_ERR_INVALID_ARG },
        { "training_step: cross_entropy: input 1 is NULL (earlier in this step: batch has no field 'label' (fields: x, y))", NULL,
          VOLT_ERR_INVALID_ARG },
        { "module 'net': backward: loss must be a scalar, got shape (16, 3)", "backward: backward", VOLT_ERR_SHAPE },
        { "training_step: cross_entropy: input 1 is NULL", "mask", VOLT_ERR_INVALID_ARG },
    };
    volt_loader *l = make_loader(ds, 16, false, 0);
    volt_module_ops ops = net_ops;
    ops.training_step = walk_train;
    for (walk_case = 0; walk_case < (int)(sizeof cases / sizeof cases[0]); walk_case++) {
        volt_trainer *t = short_trainer(2);
        net m = { .in = IN, .hidden = 8, .out = NC };
        const volt_status st = volt_trainer_fit(t, &ops, &m, l, NULL, NULL);
        const char *e = volt_trainer_errmsg(t);
        CHECK(st == cases[walk_case].st && strstr(e, cases[walk_case].want) && (!cases[walk_case].not || !strstr(e, cases[walk_case].not)),
              "case %d: %s '%s', want %s '%s'", walk_case, volt_status_str(st), e, volt_status_str(cases[walk_case].st),
              cases[walk_case].want);
        volt_trainer_destroy(t);
    }
    volt_loader_destroy(l);
}

/* The module pointer is the table's self: volt never reads through it, so a table that keeps no
 * state runs with NULL (its steps find the parameters in the store). */
static volt_status sl_setup(void *self, volt_params *ps) {
    CHECK(self == NULL, "setup got %p, want the NULL given", self);
    volt_tensor *w, *b;   /* not kept: the steps look them up */
    VOLT_TRY(volt_params_unit(ps, "fc"));
    VOLT_TRY(volt_param_new(ps, "fc.weight", VOLT_SHAPE(NC, IN), VOLT_INIT_TORCH_LINEAR, &w));
    return volt_param_new(ps, "fc.bias", VOLT_SHAPE(NC), VOLT_INIT_ZEROS, &b);
}
static volt_tensor *sl_fwd(volt_step *s, const volt_batch *b) {
    volt_params *ps = volt_step_params(s);
    return volt_linear(s, volt_batch_x(b), volt_params_find(ps, "fc.weight"), volt_params_find(ps, "fc.bias"));
}
static volt_status sl_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    return volt_classification_step(s, sl_fwd(s, b), volt_batch_y(b), "train");
}
static volt_status sl_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    return volt_classification_step(s, sl_fwd(s, b), volt_batch_y(b), "val");
}
static volt_status sl_test(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    return volt_classification_step(s, sl_fwd(s, b), volt_batch_y(b), "test");
}
static volt_status sl_predict(void *self, volt_step *s, const volt_batch *b, int64_t i, volt_tensor **out) {
    *out = sl_fwd(s, b);
    return *out ? VOLT_OK : volt_step_status(s);
}
static volt_status sl_opt(void *self, volt_optim_setup *o) { return VOLT_OK; }

static void test_null_module(volt_dataset *ds) {
    static const volt_module_ops sl_ops = {
        .version = VOLT_MODULE_OPS_VERSION, .name = "stateless", .setup = sl_setup, .configure_optimizers = sl_opt,
        .training_step = sl_train, .validation_step = sl_val, .test_step = sl_test, .predict_step = sl_predict,
    };
    volt_loader *l = make_loader(ds, 32, false, 0);
    volt_trainer *t = short_trainer(2);
    CHECK_OK(volt_trainer_fit(t, &sl_ops, NULL, l, l, NULL));
    CHECK_OK(volt_trainer_validate(t, &sl_ops, NULL, l, NULL));
    CHECK_OK(volt_trainer_test(t, &sl_ops, NULL, l, NULL));
    double acc = -1;
    CHECK(volt_trainer_metric(t, "test_acc", &acc) && acc >= 0 && acc <= 1, "test_acc %g", acc);
    CHECK_OK(volt_trainer_predict(t, &sl_ops, NULL, l, NULL, pred_sink, NULL));
    CHECK(!volt_trainer_metric(t, "test_acc", NULL), "predict starts without test's metrics");
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

static void test_log_ratio(volt_dataset *ds) {
    char root[512], log[64] = "";
    snprintf(root, sizeof root, "%s/ratio", vtest_tmpdir());
    volt_loader *vl = make_loader(ds, 32, false, 0);   /* 7 batches: 6 of 32, one of 11 */
    net m = { .in = IN, .hidden = 8, .out = NC };
    volt_module_ops ops = net_ops;
    ops.validation_step = ratio_val;
    volt_trainer *t = make_trainer(1, root);
    CHECK_OK(volt_trainer_validate(t, &ops, &m, vl, NULL));
    double v = -1, st = -1;
    /* batches 0..6: Σnum = 21, Σden = 63: 1/3 (the mean of the ratios would be 0.2683...) */
    CHECK(volt_trainer_metric(t, "ratio_epoch", &v) && v == 21.0 / 63.0, "ratio_epoch %.17g, want 1/3", v);
    CHECK(volt_trainer_metric(t, "ratio_step", &st) && st == 6.0 / 15.0, "ratio_step %.17g, want the last batch's 6/15", st);
    m.log = log;
    m.cap = sizeof log;
    volt_status s2 = volt_trainer_validate(t, &ops, &m, vl, NULL);
    CHECK(s2 == VOLT_ERR_INVALID_ARG && !strncmp(log, "1 1", 3) &&
          strstr(volt_trainer_errmsg(t), "volt_log_ratio('bad'): want 0 <= num <= den, got 5/4"),
          "volt_log_ratio refuses num > den and an empty name (%s), and the step fails: %s", log, volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(vl);
}

/* ---- accelerator / devices, transfer_batch_to_device ------------------------------------------ */
/* A module whose training_step records the batch it got and (probe mode) reads it on the host. */
static const volt_batch *seen_step_batch, *seen_hook_batch;
static bool probe_host_read;
static volt_status probe_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    seen_step_batch = b;
    if (probe_host_read) {   /* a host dereference of device memory: cpu-strict faults here */
        volatile float v = volt_tensor_f32(volt_batch_x(b))[0];
        (void)v;
    }
    return net_train(self, s, b, i);
}
static volt_status probe_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    seen_hook_batch = b;
    return m_on_train_batch_start(self, t, b, i);
}
static const volt_module_ops probe_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "probe", .setup = net_setup, .configure_optimizers = net_opt,
    .training_step = probe_train, .validation_step = net_val, .on_train_batch_start = probe_batch_start,
};

static volt_trainer *accel_trainer(const char *accelerator, const char *root) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_epochs = 1;
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = c.enable_model_summary = false;
    c.default_root_dir = root;
    c.seed = 5;
    c.accelerator = accelerator;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    return t;
}

/* One epoch (+ validation) on the given accelerator; the metrics and weights that came out. */
static void accel_run(volt_dataset *ds, const char *accelerator, double *loss, double *acc, float **w, int64_t *n) {
    char root[512];
    snprintf(root, sizeof root, "%s/accel", vtest_tmpdir());
    volt_loader *tl = make_loader(ds, 16, true, 1), *vl = make_loader(ds, 32, false, 0);
    volt_trainer *t = accel_trainer(accelerator, root);
    CHECK(t && !strcmp(volt_trainer_accelerator(t), accelerator) && volt_trainer_device_index(t) == 0, "runs on %s: %s",
          accelerator, t ? volt_trainer_accelerator(t) : "?");
    net m = { .in = IN, .hidden = 8, .out = NC, .dropout = 0.1f };
    seen_step_batch = seen_hook_batch = NULL;
    CHECK_OK(volt_trainer_fit(t, &probe_ops, &m, tl, vl, NULL));
    CHECK(seen_step_batch && seen_step_batch == seen_hook_batch, "%s: the batch hooks and the step see one (transferred) batch",
          accelerator);
    if (!strcmp(accelerator, "cpu-strict"))   /* a device copy, not the loader's host slot */
        CHECK(seen_step_batch && volt_batch_x(seen_step_batch)->device != NULL, "cpu-strict: batch fields are device tensors");
    CHECK(volt_trainer_metric(t, "train_loss_epoch", loss) && volt_trainer_metric(t, "val_acc", acc), "%s: metrics logged",
          accelerator);
    *w = snapshot(t, n);
    volt_trainer_destroy(t);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

static void test_accelerator(volt_dataset *ds) {
    /* the resolved device is the one named by $VOLT_ACCELERATOR (the _strict ctest variants) */
    volt_trainer *t = accel_trainer("auto", vtest_tmpdir());
    const char *env = getenv("VOLT_ACCELERATOR");
    printf("test_trainer: accelerator auto -> %s (device %d)\n", volt_trainer_accelerator(t), volt_trainer_device_index(t));
    if (env && *env) CHECK(!strcmp(volt_trainer_accelerator(t), env), "auto = $VOLT_ACCELERATOR=%s, got %s", env, volt_trainer_accelerator(t));
    volt_trainer_destroy(t);
    /* unknown accelerators and absent GPUs: errors naming what there is */
    const char *bad[] = { "tpu", "cuda", "gpu" };
    for (int k = 0; k < 3; k++) {
        volt_trainer_config c;
        volt_trainer_config_init(&c);
        c.accelerator = bad[k];
        t = NULL;
        volt_status st = volt_trainer_create(&c, &t);
        CHECK(st == VOLT_ERR_UNSUPPORTED && strstr(volt_trainer_errmsg(t), bad[k]) && strstr(volt_trainer_errmsg(t), "cpu-strict"),
              "accelerator %s: %s (%s)", bad[k], t ? volt_trainer_errmsg(t) : "", volt_status_str(st));
        volt_trainer_destroy(t);
    }
    /* the same run on cpu and on cpu-strict (batches copied to device memory, logged values
     * read back through the staging copy) gives the same bits */
    double l0, l1, a0, a1;
    float *w0, *w1;
    int64_t n0, n1;
    accel_run(ds, "cpu", &l0, &a0, &w0, &n0);
    accel_run(ds, "cpu-strict", &l1, &a1, &w1, &n1);
    CHECK(l0 == l1 && a0 == a1 && a0 > 0, "cpu vs cpu-strict metrics: loss %.9g %.9g, acc %.9g %.9g", l0, l1, a0, a1);
    CHECK(n0 == n1 && !memcmp(w0, w1, sizeof(float) * (size_t)n0), "cpu vs cpu-strict weights identical");
    free(w0);
    free(w1);
}

/* A host read of a transferred batch on cpu-strict faults (in a child process): the batch
 * really is device memory. Run first, before any OpenMP pool exists. */
static void test_batch_is_device_memory(volt_dataset *ds) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        probe_host_read = true;
        volt_loader *tl = make_loader(ds, 16, false, 0);
        volt_trainer *t = accel_trainer("cpu-strict", vtest_tmpdir());
        net m = { .in = IN, .hidden = 8, .out = NC };
        volt_trainer_fit(t, &probe_ops, &m, tl, NULL, NULL);
        _exit(0);   /* reached only if the host read went through */
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait");
    CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0), "host read of a cpu-strict batch was caught (status %d)", status);
}

int main(void) {
    volt_dataset *ds = make_data();
    test_batch_is_device_memory(ds);
    test_accelerator(ds);
    test_config_errors();
    test_load_skips_init(ds);
    test_module_two_trainers(ds);
    test_stop_flags(ds);
    test_fractions(ds);
    test_estimated_steps(ds);
    test_detect_anomaly(ds);
    test_lr_find(ds);
    test_lr_find_accumulate();
    test_optim_config_errors(ds);
    test_hook_order(ds);
    test_exact_resume(ds, 0);
    test_exact_resume(ds, 2);
    test_groups_resume(ds);
    test_corrupt(ds);
    test_changed_during_load(ds);
    test_datamodule(ds);
    test_datamodule_state(ds);
    test_reload_dataloaders(ds);
    test_loader_errors(ds);
    test_log_ratio(ds);
    test_log_clash(ds);
    test_blame(ds);
    test_walkthrough(ds);
    test_null_module(ds);
    volt_dataset_destroy(ds);
    return vtest_finish();
}
