/* The built-in classifiers' shared steps (models/classifier.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "models/classifier.h"

static bool field_name_ok(const char *s) { return !s || (*s && strlen(s) < 64); }

bool volt__clf_settings_ok(float dropout, volt_optim_kind optimizer, float lr, float weight_decay, const char *x_field,
                           const char *y_field) {
    return dropout >= 0.f && dropout < 1.f && lr >= 0.f && isfinite(lr) && weight_decay >= 0.f && isfinite(weight_decay) &&
           (int)optimizer >= 0 && optimizer < VOLT_OPTIM_KIND_COUNT && field_name_ok(x_field) && field_name_ok(y_field);
}

void volt__clf_init(volt__clf *c, const char *name, volt_tensor *(*forward)(void *, volt_step *, volt_tensor *),
                    volt_optim_kind optimizer, float lr, float weight_decay, const char **x_field, const char **y_field) {
    c->name = name;
    c->forward = forward;
    c->optimizer = optimizer;
    c->lr = lr;
    c->weight_decay = weight_decay;
    snprintf(c->x_field, sizeof c->x_field, "%s", *x_field ? *x_field : "x");
    snprintf(c->y_field, sizeof c->y_field, "%s", *y_field ? *y_field : "y");
    *x_field = c->x_field;
    *y_field = c->y_field;
}

/* Forward on the batch, then the shared classifier step (volt_classification_step). */
static volt_status eval_step(volt__clf *c, volt_step *s, const volt_batch *b, const char *stage) {
    volt_tensor *x = volt_batch_field(b, c->x_field), *y = volt_batch_field(b, c->y_field);
    if (!x || !y)
        return volt_step_fail(s, VOLT_ERR_NOT_FOUND, "%s: batch has no field '%s'", c->name, x ? c->y_field : c->x_field);
    return volt_classification_step(s, c->forward(c, s, x), y, stage);
}

volt_status volt__clf_training_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx) {
    (void)batch_idx;
    return eval_step(self, s, b, "train");
}

volt_status volt__clf_validation_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx) {
    (void)batch_idx;
    return eval_step(self, s, b, "val");
}

volt_status volt__clf_test_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx) {
    (void)batch_idx;
    return eval_step(self, s, b, "test");
}

volt_status volt__clf_predict_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx, volt_tensor **out) {
    (void)batch_idx;
    volt__clf *c = self;
    volt_tensor *x = volt_batch_field(b, c->x_field);
    if (!x) return volt_step_fail(s, VOLT_ERR_NOT_FOUND, "%s: batch has no field '%s'", c->name, c->x_field);
    *out = c->forward(c, s, x);
    return *out ? VOLT_OK : volt_step_status(s);
}

volt_status volt__clf_configure_optimizers(void *self, volt_optim_setup *out) {
    const volt__clf *c = self;
    out->optimizer.kind = c->optimizer;
    out->optimizer.lr = c->lr;
    out->optimizer.weight_decay = c->weight_decay;
    return VOLT_OK;
}
