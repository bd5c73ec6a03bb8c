/* Lightning's reduce_fx (VOLT_LOG_REDUCE_SUM / _MAX / _MIN): how an epoch value folds the
 * epoch's step values (one rank here; the ranks' fold: test_mpi_callbacks "collective").
 *   - validation logs 3.5, -1.25, 8, 0.5 at its four batches under one name per reduce: the epoch
 *     values are the (batch-weighted) mean 2.6875, the sum 10.75, the max 8 and the min -1.25,
 *     exactly; a NaN at one batch is the max and the min (torch.max / torch.min), and the mean's;
 *   - training_step logs 1 per batch with STEP | EPOCH | REDUCE_SUM: "n_step" 1, "n_epoch" the
 *     batches; with REDUCE_MAX the step index: "last_epoch" the last index;
 *   - a fit that failed mid-epoch leaves no partial epoch value to the next call on its trainer;
 *   - errors, each naming the metric: two reduces in one call; counts (volt_log_ratio) with a
 *     reduce; one name with another reduce in a later step or in the same step; a reduce on
 *     volt_trainer_log_metric. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"

enum { NB = 4, BS = 3 };
static const double VALS[NB] = { 3.5, -1.25, 8.0, 0.5 };

typedef enum { OK, TWO_REDUCES, RATIO_REDUCE, CHANGES, SAME_STEP } mode;
typedef struct lin {
    volt_tensor *w, *b;   /* first: vtest_lin4's */
    mode mode;
} lin;

/* the call-leak case: training logs g_tv per batch as an epoch mean and fails at batch g_fail_at
 * (>= 0); a callback saves a checkpoint in on_train_batch_end at batch_in_epoch 2 */
static double g_tv = 1;
static int64_t g_fail_at = -1;
static char g_ck[1100];

static volt_status lin_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    if (i == g_fail_at) return volt_step_fail(s, VOLT_ERR_INVALID_ARG, "batch %lld fails", (long long)i);
    VOLT_TRY(volt_log_value(s, "tv", g_tv, VOLT_LOG_EPOCH));
    VOLT_TRY(volt_log_value(s, "n", 1.0, VOLT_LOG_STEP | VOLT_LOG_EPOCH | VOLT_LOG_REDUCE_SUM));
    VOLT_TRY(volt_log_value(s, "last", (double)i, VOLT_LOG_EPOCH | VOLT_LOG_REDUCE_MAX));
    return vtest_lin4_train(self, s, b, i);
}

static volt_status lin_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    lin *m = self;
    (void)b;
    const double v = VALS[i % NB];
    switch (m->mode) {
    case TWO_REDUCES: return volt_log_value(s, "v", v, VOLT_LOG_REDUCE_MAX | VOLT_LOG_REDUCE_MIN);
    case RATIO_REDUCE: return volt_log_ratio(s, "hits", 1, 2, VOLT_LOG_REDUCE_SUM);
    case CHANGES: return volt_log_value(s, "v", v, i < 2 ? VOLT_LOG_REDUCE_MAX : VOLT_LOG_REDUCE_MIN);
    case SAME_STEP:
        VOLT_TRY(volt_log_value(s, "v", v, VOLT_LOG_REDUCE_MAX));
        return volt_log_value(s, "v", v, VOLT_LOG_REDUCE_SUM);
    default: break;
    }
    const double nan_at_1 = i == 1 ? NAN : v;
    VOLT_TRY(volt_log_value(s, "v_mean", v, 0));
    VOLT_TRY(volt_log_value(s, "v_sum", v, VOLT_LOG_REDUCE_SUM));
    VOLT_TRY(volt_log_value(s, "v_max", v, VOLT_LOG_REDUCE_MAX));
    VOLT_TRY(volt_log_value(s, "v_min", v, VOLT_LOG_REDUCE_MIN));
    VOLT_TRY(volt_log_value(s, "nan_max", nan_at_1, VOLT_LOG_REDUCE_MAX));
    VOLT_TRY(volt_log_value(s, "nan_min", nan_at_1, VOLT_LOG_REDUCE_MIN));
    return volt_log_value(s, "nan_mean", nan_at_1, 0);
}

static volt_status lin_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.01f;
    return VOLT_OK;
}

static const volt_module_ops ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = vtest_lin4_setup, .configure_optimizers = lin_opt,
    .training_step = lin_train, .validation_step = lin_val,
};

static volt_status save_at_2(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self;
    (void)b;
    return i == 1 ? volt_trainer_save_checkpoint(t, g_ck) : VOLT_OK;
}
static const volt_callback_ops save_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "SaveAt2",
                                            .on_train_batch_end = save_at_2 };

static double metric(volt_trainer *t, const char *name) {
    double v = -12345;
    return volt_trainer_metric(t, name, &v) ? v : -12345;
}

static volt_trainer *trainer(void) {
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    c.max_epochs = 1;
    c.num_sanity_val_steps = 0;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    return t;
}

int main(void) {
    vtest_check_accelerator();
    volt_dataset *ds = vtest_rows4(NB * BS);
    volt_loader *l = vtest_loader(ds, BS, false);
    /* validate: each reduce's epoch value */
    volt_trainer *t = trainer();
    lin m = { .mode = OK };
    CHECK_OK(volt_trainer_validate(t, &ops, &m, l, NULL));
    CHECK(metric(t, "v_mean") == 2.6875 && metric(t, "v_sum") == 10.75 && metric(t, "v_max") == 8.0 &&
          metric(t, "v_min") == -1.25, "mean %g (want 2.6875), sum %g (10.75), max %g (8), min %g (-1.25)", metric(t, "v_mean"),
          metric(t, "v_sum"), metric(t, "v_max"), metric(t, "v_min"));
    CHECK(isnan(metric(t, "nan_max")) && isnan(metric(t, "nan_min")) && isnan(metric(t, "nan_mean")),
          "a NaN at one batch: max %g, min %g, mean %g (want NaN: torch.max / torch.min)", metric(t, "nan_max"),
          metric(t, "nan_min"), metric(t, "nan_mean"));
    /* fit: a step-and-epoch sum and an epoch max of the batch index */
    CHECK_OK(volt_trainer_fit(t, &ops, &m, l, NULL, NULL));
    CHECK(metric(t, "n_step") == 1.0 && metric(t, "n_epoch") == NB && metric(t, "last") == NB - 1,
          "fit: n_step %g (1), n_epoch %g (%d), last %g (%d)", metric(t, "n_step"), metric(t, "n_epoch"), NB,
          metric(t, "last"), NB - 1);
    volt_trainer_destroy(t);
    /* a fit that failed mid-epoch leaves nothing to the next call on the same trainer: resumed
     * from its checkpoint (batch 2), the epoch mean is of the resumed batches alone, as a fresh
     * trainer's (it was 500.5: the failed call's 1000s kept in the accumulator) */
    snprintf(g_ck, sizeof g_ck, "%s/leak.safetensors", vtest_tmpdir());
    t = trainer();
    CHECK_OK(volt_trainer_add_callback(t, &save_ops, NULL));
    g_tv = 1000;
    g_fail_at = 2;
    CHECK(volt_trainer_fit(t, &ops, &m, l, NULL, NULL) == VOLT_ERR_INVALID_ARG, "the first fit fails at batch 2");
    g_tv = 1;
    g_fail_at = -1;
    CHECK_OK(volt_trainer_fit(t, &ops, &m, l, NULL, g_ck));
    CHECK(metric(t, "tv") == 1.0 && metric(t, "n_epoch") == NB - 2, "resumed on the same trainer: tv %g (want 1), n_epoch %g "
          "(want %d)", metric(t, "tv"), metric(t, "n_epoch"), NB - 2);
    volt_trainer_destroy(t);
    /* errors */
    static const struct { mode mode; const char *want; } bad[] = {
        { TWO_REDUCES, "volt_log('v'): more than one of VOLT_LOG_REDUCE_SUM, _MAX and _MIN" },
        { RATIO_REDUCE, "volt_log_ratio('hits'): VOLT_LOG_REDUCE_* is for values" },
        { CHANGES, "volt_log('v'): logged with another reduce (VOLT_LOG_REDUCE_*) earlier in this epoch" },
        { SAME_STEP, "volt_log('v'): logged twice in this step with another reduce" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        t = trainer();
        lin e = { .mode = bad[k].mode };
        const volt_status st = volt_trainer_validate(t, &ops, &e, l, NULL);
        CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), bad[k].want), "case %zu: %s (want \"%s\")", k,
              volt_trainer_errmsg(t), bad[k].want);
        volt_trainer_destroy(t);
    }
    t = trainer();
    CHECK(volt_trainer_log_metric(t, "x", 1.0, VOLT_LOG_EPOCH | VOLT_LOG_REDUCE_MAX) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_trainer_errmsg(t), "log_metric('x')"), "log_metric with a reduce: %s", volt_trainer_errmsg(t));
    CHECK(!volt_trainer_metric(t, "x", NULL), "the refused value is not a metric");
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
    return vtest_finish();
}
