/* A finder's trial renews the training step (what a size grew comes back); a renew that finds no
 * memory leaves the trainer without one, and the search ends with the size found so far. Inside
 * fit (BatchSizeFinder) the fit then goes on: it makes a step before its first batch (fit used to
 * call the missing one: a NULL dereference in volt_step_begin).
 *
 * volt_step_create is wrapped (tests/tuner_renew.cmake links with --wrap): armed, its next call
 * fails with VOLT_ERR_NOMEM, as a fragmented device would. The module's step runs out of memory
 * above batch size 8 and arms it, so the renew after the first failed trial fails. */
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"

volt_status __real_volt_step_create(const volt_step_config *cfg, volt_step **out);
static bool g_fail_next, g_failed;
volt_status __wrap_volt_step_create(const volt_step_config *cfg, volt_step **out);
volt_status __wrap_volt_step_create(const volt_step_config *cfg, volt_step **out) {
    if (g_fail_next) {
        g_fail_next = false;
        g_failed = true;
        if (out) *out = NULL;
        return VOLT_ERR_NOMEM;
    }
    return __real_volt_step_create(cfg, out);
}

static int64_t g_max_trained;   /* the largest batch a step trained on (fit's, after the search) */
static volt_status m_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    if (b->size > 8) {
        if (!g_failed) g_fail_next = true;   /* the renew after this trial fails once */
        return VOLT_ERR_NOMEM;
    }
    if (b->size > g_max_trained) g_max_trained = b->size;
    return vtest_lin4_train(self, s, b, i);
}
static volt_status m_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.01f;
    return VOLT_OK;
}
static const volt_module_ops ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = vtest_lin4_setup,
                                     .configure_optimizers = m_opt, .training_step = m_train };

int main(void) {
    vtest_check_accelerator();
    volt_dataset *ds = vtest_rows4(64);
    volt_loader *l = vtest_loader(ds, 2, false);
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    CHECK_OK(volt_add_batch_size_finder(t, NULL));
    vtest_lin4 m = { 0 };
    const volt_status st = volt_trainer_fit(t, &ops, &m, l, NULL, NULL);
    CHECK(g_failed, "the renew never failed: the test did not test it");
    CHECK(st == VOLT_OK && volt_trainer_global_step(t) > 0 && g_max_trained == 8 && volt_loader_batch_size(l) == 8,
          "fit after a renew that found no memory: %s (%s), %lld steps, batch size %lld, trained at %lld",
          volt_status_str(st), volt_trainer_errmsg(t), (long long)volt_trainer_global_step(t),
          (long long)volt_loader_batch_size(l), (long long)g_max_trained);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
    return vtest_finish();
}
