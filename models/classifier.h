/* What the built-in classifiers (models/mlp.c, models/cnn.c) share: a model struct that begins
 * with a volt__clf header, whose steps read the inputs from one batch field, run the model's
 * forward and hand the logits and the labels of another field to volt_classification_step, and
 * whose optimizer is the config's. The module tables name these functions directly. */
#ifndef VOLT_MODELS_CLASSIFIER_H
#define VOLT_MODELS_CLASSIFIER_H
#include "volt/models.h"
#include "volt/ops.h"

typedef struct volt__clf {
    const char *name;                        /* "mlp", "cnn": the steps' errors */
    char x_field[64], y_field[64];
    volt_optim_kind optimizer;
    float lr, weight_decay;
    volt_tensor *(*forward)(void *self, volt_step *s, volt_tensor *x);
} volt__clf;

/* The settings every classifier config has, as volt_*_create accepts them: dropout in [0, 1),
 * lr and weight_decay finite and >= 0, a known optimizer, field names NULL (the default) or 1..63
 * bytes. */
bool volt__clf_settings_ok(float dropout, volt_optim_kind optimizer, float lr, float weight_decay, const char *x_field,
                           const char *y_field);
/* Fills the header (field names copied: NULL is "x" / "y") and points *x_field / *y_field (the
 * model's copy of its config) at the copies. */
void volt__clf_init(volt__clf *c, const char *name, volt_tensor *(*forward)(void *, volt_step *, volt_tensor *),
                    volt_optim_kind optimizer, float lr, float weight_decay, const char **x_field, const char **y_field);

volt_status volt__clf_training_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx);
volt_status volt__clf_validation_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx);
volt_status volt__clf_test_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx);
volt_status volt__clf_predict_step(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx, volt_tensor **out);
volt_status volt__clf_configure_optimizers(void *self, volt_optim_setup *out);
#endif
