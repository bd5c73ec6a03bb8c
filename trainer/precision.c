/* The trainer's side of the precision plugin (precision/precision.h): where in the loop
 * each of its steps runs, the all-rank inf/NaN decision, the scaler's checkpoint state and
 * the public accessors of volt/precision.h (checkpoint values: trainer/checkpoint_stage.c).
 *
 * The boundary steps (unscale, the all-rank inf/NaN vote, scaler update) belong to the
 * strategy, which owns the plugin (strategies/boundary.c). A boundary whose grads hold
 * inf/NaN (16-mixed) skips the optimizer step: the optimizer's step count, global_step and
 * the per-step LR scheduler do not advance (global_step counts optimizer steps taken:
 * DESIGN §4, §6); the hooks before the step still run, the grads are zeroed and the scale
 * backs off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer/trainer_internal.h"
#include "volt/ops.h"

static const char *dtype_word(volt_dtype dt) {
    return dt == VOLT_BF16 ? "bf16" : dt == VOLT_F16 ? "f16" : "f32";
}

volt_status volt__prec_create(volt_trainer *t) {
    volt_trainer_config *c = &t->cfg;
    volt_precision_config pc = {
        .name = c->precision, .init_scale = c->grad_scaler_init_scale,
        .growth_factor = c->grad_scaler_growth_factor, .backoff_factor = c->grad_scaler_backoff_factor,
        .growth_interval = c->grad_scaler_growth_interval, .optimizer_dtype = c->optimizer_dtype,
    };
    char err[512] = "";
    volt_status st = volt__precision_create(&pc, &t->prec, err, sizeof err);
    if (st < 0) return volt__terr(t, st, "trainer: %s", err);
    /* the config keeps no borrowed string: the resolved choice, as a literal */
    c->optimizer_dtype = t->prec->optim_dtype_explicit ? dtype_word(t->prec->optim_dtype) : "auto";
    return VOLT_OK;
}

volt_status volt__prec_setup_params(volt_trainer *t) {
    const volt_precision_ops *o = t->prec->ops;
    if (!o->configure_params) return VOLT_OK;
    char err[512] = "";
    volt_status st = o->configure_params(t->prec, t->ps, err, sizeof err);
    return st < 0 ? volt__terr(t, st, "%s", err) : VOLT_OK;
}

void volt__prec_setup_step(volt_trainer *t, volt_step *s) {
    volt_step_set_compute_dtype(s, t->prec->ops->info.compute_dtype);
}

void volt__prec_setup_optim(volt_trainer *t, volt_optimizer_config *oc) {
    /* an explicit cfg.optimizer_dtype wins; else configure_optimizers' choice, else "auto" */
    if (t->prec->optim_dtype_explicit || oc->state_dtype == VOLT_F32) oc->state_dtype = t->prec->optim_dtype;
}

volt_tensor *volt__prec_scale_loss(volt_trainer *t, volt_step *s, volt_tensor *loss) {
    const volt_precision_ops *o = t->prec->ops;
    return o->scale_loss ? o->scale_loss(t->prec, s, loss) : loss;
}

/* ---- checkpoints ---------------------------------------------------------------------------- */
static volt_status put_meta(void *ctx, const char *k, const char *v) { return volt_st_writer_meta(ctx, k, v); }
static const char *get_meta(void *ctx, const char *k) { return volt_st_meta(ctx, k); }

volt_status volt__prec_ckpt_save(volt_trainer *t, volt_st_writer *w) {
    VOLT_TRY(volt_st_writer_meta(w, "volt.precision", t->prec->ops->info.name));
    return t->prec->ops->state_save ? t->prec->ops->state_save(t->prec, put_meta, w) : VOLT_OK;
}

volt_status volt__prec_ckpt_load(volt_trainer *t, volt_st_file *f, const char *path, bool apply) {
    if (!t->prec->ops->state_load) return VOLT_OK;
    char err[256] = "";
    volt_status st = t->prec->ops->state_load(t->prec, get_meta, f, apply, err, sizeof err);
    return st < 0 ? volt__terr(t, st, "checkpoint '%s': %s", path, err) : VOLT_OK;
}

/* ---- public accessors (volt/precision.h) ------------------------------------------------------ */
float volt_trainer_grad_scale(const volt_trainer *t) {
    return t && t->prec && t->prec->ops->info.grad_scaling ? t->prec->scaler.scale : 1.f;
}

int64_t volt_trainer_grad_scaler_growth_tracker(const volt_trainer *t) {
    return t && t->prec && t->prec->ops->info.grad_scaling ? t->prec->scaler.growth_tracker : 0;
}

int64_t volt_trainer_skipped_steps(const volt_trainer *t) { return t && t->prec ? t->prec->skipped_steps : 0; }

volt_status volt_trainer_param_memory(const volt_trainer *t, volt_param_memory *out) {
    if (!t || !out) return VOLT_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    out->param_dtype = t->prec ? t->prec->ops->info.param_dtype : VOLT_F32;
    out->optim_dtype = t->opt ? volt_optimizer_state_dtype(t->opt) : (t->prec ? t->prec->optim_dtype : VOLT_F32);
    if (!t->ps || !volt_params_finalized(t->ps)) return VOLT_OK;
    out->numel = volt_params_numel(t->ps);
    out->param_dtype = volt_params_dtype(t->ps);
    out->param_bytes = volt_params_value_bytes(t->ps);
    out->grad_bytes = volt_params_grad_bytes(t->ps);
    out->master_bytes = 0;   /* mixed: the f32 parameters are the masters; 16-bit operands are per step */
    out->optim_bytes = volt_optimizer_state_bytes(t->opt);
    return VOLT_OK;
}
