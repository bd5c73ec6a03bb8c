/* Callback states a checkpoint hands back, and what a fit leaves for the next call on the same
 * trainer:
 *  - GradientAccumulationScheduler's factor is the fit's: after it the trainer's factor is again
 *    what it was, so a second fit resumes inside an epoch of another factor (it failed: "set
 *    inside an accumulation window"), a module's configure_callbacks adds the scheduler again on
 *    validate and on a second fit (refused: "set that or the schedule, not both"), and the step
 *    estimate counts with the trainer's factor;
 *  - a SpikeDetection state with an odd number of batches to skip (a spike adds two) is refused
 *    as damaged (it was taken, and the next spike wrote past the list's end);
 *  - a WeightAveraging state of another mode name or of numbers no run reaches is refused (it
 *    was taken: "bogus" read as EMA, latest_update_step 1e15 froze the average);
 *  - a load a later callback refuses leaves WeightAveraging as it was (its average count lives in
 *    the optimizer, which outlives the fit: it became the refused checkpoint's 1000; the state is
 *    now taken at on_fit_start).
 * The hostile states are written by stand-in callbacks of the same names. */
#include <math.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"

enum { NS = 100, IN = 4, BS = 8 };
static float X[NS * IN], Y[NS * IN];
static volt_dataset *DS;

typedef struct { volt_tensor *w, *b; int use_gas; } regr;
static volt_status regr_setup(void *self, volt_params *ps) {
    regr *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc"));
    VOLT_TRY(volt_param_new(ps, "fc.weight", VOLT_SHAPE(IN, IN), VOLT_INIT_TORCH_LINEAR, &m->w));
    return volt_param_new(ps, "fc.bias", VOLT_SHAPE(IN), VOLT_INIT_UNIFORM(-0.3f, 0.3f), &m->b);
}
static volt_status regr_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    regr *m = self;
    return volt_step_set_loss(s, volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b)));
}
static volt_status regr_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    regr *m = self;
    return volt_log(s, "val_loss", volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b)), 0);
}
static volt_status sgd_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.05f;
    return VOLT_OK;
}
static const int64_t E[2] = { 0, 1 }, F[2] = { 2, 3 };
static volt_status regr_cc(void *self, volt_trainer *t) {
    regr *m = self;
    return m->use_gas ? volt_add_gradient_accumulation_scheduler(t, E, F, 2) : VOLT_OK;
}
static const volt_module_ops regr_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "regr", .setup = regr_setup,
                                          .configure_optimizers = sgd_opt, .training_step = regr_train,
                                          .validation_step = regr_val, .configure_callbacks = regr_cc };

static const char *SAVE_PATH;
static volt_status save_at(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)b;
    if (volt_trainer_current_epoch(t) == 0 && i == 3 && SAVE_PATH) return volt_trainer_save_checkpoint(t, SAVE_PATH);
    return VOLT_OK;
}
static const volt_callback_ops save_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "SaveAt", .on_train_batch_end = save_at };

static volt_loader *mk_loader(void) { return vtest_loader(DS, BS, false); }

/* GradientAccumulationScheduler: a second fit on the trainer resumes inside an epoch of another
 * factor (the factor the first fit left made it fail), as a fresh trainer does */
static void test_gas_second_fit_resume(void) {
    char root[512], path[600];
    snprintf(root, sizeof root, "%s/states_gas", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(path, sizeof path, "%s/mid.safetensors", root);
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = 2;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    CHECK_OK(volt_add_gradient_accumulation_scheduler(t, E, F, 2));
    CHECK_OK(volt_trainer_add_callback(t, &save_ops, NULL));
    volt_loader *l = mk_loader();
    regr m = { 0 };
    SAVE_PATH = path;
    CHECK_OK(volt_trainer_fit(t, &regr_ops, &m, l, NULL, NULL));   /* saves at epoch 0 batch 3 (4 batches: 2 windows of 2) */
    SAVE_PATH = NULL;
    CHECK(volt_trainer_get_config(t)->accumulate_grad_batches == 1, "after the fit the trainer's factor is %lld, not its own 1",
          (long long)volt_trainer_get_config(t)->accumulate_grad_batches);
    /* the same checkpoint resumes fine on a fresh trainer */
    volt_trainer *u = NULL;
    CHECK_OK(volt_trainer_create(&c, &u));
    CHECK_OK(volt_add_gradient_accumulation_scheduler(u, E, F, 2));
    regr mu = { 0 };
    volt_status su = volt_trainer_fit(u, &regr_ops, &mu, l, NULL, path);
    CHECK(su == VOLT_OK, "fresh trainer resume: %s (%s)", volt_status_str(su), volt_trainer_errmsg(u));
    /* ... but not on the trainer that ran the first fit */
    volt_status st = volt_trainer_fit(t, &regr_ops, &m, l, NULL, path);
    CHECK(st == VOLT_OK, "second fit's resume on the same trainer: %s (%s)", volt_status_str(st), volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_trainer_destroy(u);
    volt_loader_destroy(l);
}

/* A module's configure_callbacks adding the scheduler at every call: validate and a second fit
 * take it (they were refused: the trainer's factor was still the first fit's) */
static void test_gas_configure_callbacks(void) {
    char root[512];
    snprintf(root, sizeof root, "%s/states_gas_cc", vtest_tmpdir());
    vtest_fresh_dir(root);
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = 2;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_loader *l = mk_loader();
    regr m = { .use_gas = 1 };
    volt_status st = volt_trainer_fit(t, &regr_ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_OK, "fit 1: %s", volt_trainer_errmsg(t));
    st = volt_trainer_validate(t, &regr_ops, &m, l, NULL);
    CHECK(st == VOLT_OK, "validate after fit (configure_callbacks re-adds the scheduler): %s (%s)", volt_status_str(st),
          volt_trainer_errmsg(t));
    st = volt_trainer_fit(t, &regr_ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_OK, "fit 2: %s (%s)", volt_status_str(st), volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}


/* SpikeDetection: a checkpoint state with an odd number of batches to skip (a hostile or edited
 * file) is refused (it was taken; the next spike then wrote past the list's end) */
static int BLOW_AT = -1;
static volt_status blow_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    regr *m = self;
    volt_tensor *loss = volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b));
    if (i == BLOW_AT) loss = volt_scale(s, loss, 1000.0f);
    return volt_step_set_loss(s, loss);
}
static const volt_module_ops blow_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "regr", .setup = regr_setup,
                                          .configure_optimizers = sgd_opt, .training_step = blow_train };
static const char *FAKE_STATE;
static char *fake_state(void *self) { (void)self; return strdup(FAKE_STATE); }
static const volt_callback_ops fake_spike_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "SpikeDetection",
                                                  .state_dict = fake_state };
static const volt_callback_ops fake_wa_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "WeightAveraging",
                                               .state_dict = fake_state };

/* A checkpoint at path (epoch 0, batch 3) whose callback states are `state` under fake's name,
 * and extra's own (NULL: none); avg: the optimizer holds an average of that mode (a
 * WeightAveraging state needs one to be saved beside) */
static void write_fake(const char *root, const char *path, const volt_callback_ops *fake, const char *state,
                       volt_optim_average avg, const volt_callback_ops *extra) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = 1;
    volt_trainer *a = NULL;
    CHECK_OK(volt_trainer_create(&c, &a));
    if (avg != VOLT_OPTIM_AVERAGE_NONE) CHECK_OK(volt_trainer_request_weight_averaging(a, avg, 0.5f));
    FAKE_STATE = state;
    CHECK_OK(volt_trainer_add_callback(a, fake, NULL));
    if (extra) CHECK_OK(volt_trainer_add_callback(a, extra, NULL));
    CHECK_OK(volt_trainer_add_callback(a, &save_ops, NULL));
    volt_loader *l = mk_loader();
    regr m = { 0 };
    SAVE_PATH = path;
    CHECK_OK(volt_trainer_fit(a, &regr_ops, &m, l, NULL, NULL));
    SAVE_PATH = NULL;
    volt_trainer_destroy(a);
    volt_loader_destroy(l);
}

static void test_spike_odd_state(void) {
    char root[512], path[600], skip[600];
    snprintf(root, sizeof root, "%s/states_spike", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(path, sizeof path, "%s/mid.safetensors", root);
    snprintf(skip, sizeof skip, "%s/skip.json", root);
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = 1;
    volt_spike_detection_config sc;
    volt_spike_detection_config_init(&sc);
    sc.exclude_batches_path = skip;
    volt_loader *l = mk_loader();
    BLOW_AT = 6;
    /* [7]: refused; [6, 7]: loads, and the next spike adds its pair to it */
    static const char *const states[2] = { "{\"last_val\":0.01,\"bad_batches\":[7],\"running\":[0.01,0.01,0.01]}",
                                           "{\"last_val\":0.01,\"bad_batches\":[6,7],\"running\":[0.01,0.01,0.01]}" };
    for (int k = 0; k < 2; k++) {
        write_fake(root, path, &fake_spike_ops, states[k], VOLT_OPTIM_AVERAGE_NONE, NULL);
        volt_trainer *b = NULL;
        CHECK_OK(volt_trainer_create(&c, &b));
        CHECK_OK(volt_add_spike_detection(b, &sc));
        regr mb = { 0 };
        const volt_status st = volt_trainer_fit(b, &blow_ops, &mb, l, NULL, path);
        if (k == 0)
            CHECK(st == VOLT_ERR_CORRUPT && strstr(volt_trainer_errmsg(b), "SpikeDetection: the checkpoint's state is damaged"),
                  "a state of 1 batch to skip: %s (%s)", volt_status_str(st), volt_trainer_errmsg(b));
        else {
            size_t n = 0;
            unsigned char *js = vtest_slurp(skip, &n);
            CHECK(st == VOLT_ERR_NUMERIC && js && !strcmp((const char *)js, "[\n    6,\n    7,\n    3,\n    4\n]"),
                  "a state of 2 batches, then a spike at the first batch after the resume (4: the restored window of "
                  "0.01): %s (%s), skip list %s", volt_status_str(st), volt_trainer_errmsg(b), js ? (const char *)js : "(none)");
            free(js);
        }
        volt_trainer_destroy(b);
    }
    BLOW_AT = -1;
    volt_loader_destroy(l);
}

/* WeightAveraging: a state of another mode name, or of numbers no run reaches, is refused (it was
 * taken: "bogus" read as EMA, latest_update_step 1e15 froze the average) */
static void test_wa_hostile_state(void) {
    char root[512], path[600];
    snprintf(root, sizeof root, "%s/states_wa", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(path, sizeof path, "%s/mid.safetensors", root);
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = 1;
    volt_weight_averaging_config wc;
    volt_weight_averaging_config_init(&wc);
    wc.decay = 0.5f;
    volt_loader *l = mk_loader();
    static const struct { const char *state, *why; } bad[] = {
        { "{\"mode\":\"bogus\",\"latest_update_step\":1e15,\"latest_update_epoch\":-7,\"n_averaged\":-3}",
          "mode is 'bogus', not 'ema' or 'swa'" },
        { "{\"mode\":\"ema\",\"latest_update_step\":1e300,\"latest_update_epoch\":0,\"n_averaged\":1}", "not a whole number in" },
        { "{\"mode\":\"ema\",\"latest_update_step\":3,\"latest_update_epoch\":-7,\"n_averaged\":1}", "not a whole number in" },
        { "{\"mode\":\"ema\",\"latest_update_step\":3,\"latest_update_epoch\":0,\"n_averaged\":-3}", "not a whole number in" },
        { "{\"mode\":\"ema\",\"latest_update_step\":2.5,\"latest_update_epoch\":0,\"n_averaged\":1}", "not a whole number in" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_fake(root, path, &fake_wa_ops, bad[i].state, VOLT_OPTIM_AVERAGE_EMA, NULL);
        volt_trainer *b = NULL;
        CHECK_OK(volt_trainer_create(&c, &b));
        CHECK_OK(volt_add_weight_averaging(b, &wc));
        regr mb = { 0 };
        const volt_status st = volt_trainer_fit(b, &regr_ops, &mb, l, NULL, path);
        CHECK(st == VOLT_ERR_CORRUPT && strstr(volt_trainer_errmsg(b), bad[i].why), "state %s: %s (%s)", bad[i].state,
              volt_status_str(st), volt_trainer_errmsg(b));
        volt_trainer_destroy(b);
    }
    volt_loader_destroy(l);
}

/* A load a later callback (the Timer's state) refuses leaves WeightAveraging's average count, which
 * lives in the optimizer and outlives the fit, as it was (it became the refused file's 1000) */
static char *fake_state2(void *self) { (void)self; return strdup("{\"time_elapsed\":{\"train\":-1}}"); }
static const volt_callback_ops fake_timer2_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Timer",
                                                   .state_dict = fake_state2 };
static void test_wa_rejected_load(void) {
    char root[512], path[600];
    snprintf(root, sizeof root, "%s/states_wa2", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(path, sizeof path, "%s/mid.safetensors", root);
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = 1;
    write_fake(root, path, &fake_wa_ops, "{\"mode\":\"swa\",\"latest_update_step\":4,\"latest_update_epoch\":-1,"
               "\"n_averaged\":1000}", VOLT_OPTIM_AVERAGE_SWA, &fake_timer2_ops);
    volt_loader *l = mk_loader();
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_weight_averaging_config wc;
    volt_weight_averaging_config_init(&wc);
    wc.mode = VOLT_OPTIM_AVERAGE_SWA;
    CHECK_OK(volt_add_weight_averaging(t, &wc));
    CHECK_OK(volt_add_timer(t, NULL, NULL));
    regr mt = { 0 };
    CHECK_OK(volt_trainer_fit(t, &regr_ops, &mt, l, NULL, NULL));
    const int64_t before = volt_optimizer_average_count(volt_trainer_optimizer(t));
    volt_status st = volt_trainer_fit(t, &regr_ops, &mt, l, NULL, path);
    const int64_t after = volt_optimizer_average_count(volt_trainer_optimizer(t));
    CHECK(st == VOLT_ERR_CORRUPT && strstr(volt_trainer_errmsg(t), "Timer"), "the Timer's state: %s (%s)", volt_status_str(st),
          volt_trainer_errmsg(t));
    CHECK(st < 0 && after == before, "a rejected load changed n_averaged %lld -> %lld", (long long)before, (long long)after);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

int main(void) {
    for (int i = 0; i < NS; i++)
        for (int k = 0; k < IN; k++) {
            X[i * IN + k] = sinf((float)(3 * i + k));
            Y[i * IN + k] = 0.5f * X[i * IN + (k + 1) % IN] - 0.25f * X[i * IN + k] + 0.1f;
        }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_F32, VOLT_SHAPE(IN) } };
    const void *d[2] = { X, Y };
    CHECK_OK(volt_dataset_from_arrays(2, f, d, NS, &DS));
    vtest_check_accelerator();
    test_gas_second_fit_resume();
    test_gas_configure_callbacks();
    test_spike_odd_state();
    test_wa_hostile_state();
    test_wa_rejected_load();
    volt_dataset_destroy(DS);
    return vtest_finish();
}
