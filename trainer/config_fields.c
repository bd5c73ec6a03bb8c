/* The volt_trainer_config field table (trainer/config_fields.h) and its JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "trainer/config_fields.h"

#define F(f, ty, fl) { #f, VOLT__CFG_##ty, offsetof(volt_trainer_config, f), sizeof(((volt_trainer_config *)0)->f), fl }
#define HK (VOLT__CFG_HPARAM | VOLT__CFG_KEY)

const volt__cfg_field volt__trainer_config_fields[] = {
    F(version, U32, 0),
    F(max_epochs, I64, HK), F(max_steps, I64, HK), F(accumulate_grad_batches, I64, HK),
    F(gradient_clip_val, F32, HK), F(gradient_clip_algorithm, STR, HK), F(val_check_interval, I64, HK),
    F(check_val_every_n_epoch, I64, HK), F(limit_train_batches, I64, HK), F(limit_val_batches, I64, HK),
    F(limit_test_batches, I64, HK), F(limit_predict_batches, I64, HK), F(num_sanity_val_steps, I64, HK),
    F(log_every_n_steps, I64, HK), F(fast_dev_run, I64, HK), F(deterministic, BOOL, HK), F(seed, U64, HK),
    F(default_root_dir, STR, HK), F(enable_progress_bar, BOOL, HK), F(enable_checkpointing, BOOL, HK),
    F(enable_logger, BOOL, HK), F(logger_name, STR, HK), F(precision, STR, HK), F(strategy, STR, HK),
    F(devices, INT, HK), F(num_nodes, INT, HK),
    F(run_config_json, STR, 0),            /* the app's settings: hparams.json, the TensorBoard text */
    F(grad_scaler_init_scale, F32, HK), F(grad_scaler_growth_factor, F32, HK),
    F(grad_scaler_backoff_factor, F32, HK), F(grad_scaler_growth_interval, I64, HK),
    F(optimizer_dtype, STR, HK),
    F(run_fingerprint, STR, VOLT__CFG_HPARAM), F(resume_anyway, BOOL, HK),
    F(enable_model_summary, BOOL, HK), F(enable_tensorboard, BOOL, HK), F(enable_plots, BOOL, HK),
    F(accelerator, STR, HK),
    F(compile, BOOL, HK), F(matmul_precision, STR, HK),
    F(strategy_reduce_dtype, STR, HK), F(strategy_comm, STR, HK),
    F(profiler, STR, HK),
    F(max_time, STR, HK), F(min_epochs, I64, HK), F(min_steps, I64, HK), F(overfit_batches, I64, HK),
    F(detect_anomaly, BOOL, HK),
    /* set by the limit_*_batches / val_check_interval keys when they are given a fraction */
    F(limit_train_fraction, F64, VOLT__CFG_HPARAM), F(limit_val_fraction, F64, VOLT__CFG_HPARAM),
    F(limit_test_fraction, F64, VOLT__CFG_HPARAM), F(limit_predict_fraction, F64, VOLT__CFG_HPARAM),
    F(val_check_fraction, F64, VOLT__CFG_HPARAM), F(overfit_fraction, F64, VOLT__CFG_HPARAM),
    F(handle_signals, BOOL, VOLT__CFG_KEY),   /* how the process reacts, not the run's */
    F(reload_dataloaders_every_n_epochs, I64, VOLT__CFG_HPARAM),   /* datamodules only: no app key */
    F(use_distributed_sampler, BOOL, HK),
};
const int volt__n_trainer_config_fields = (int)(sizeof volt__trainer_config_fields / sizeof volt__trainer_config_fields[0]);

volt__cfg_value volt__cfg_get(const volt__cfg_field *f, const volt_trainer_config *c) {
    const char *p = (const char *)c + f->offset;
    volt__cfg_value v = { .type = f->type };
    switch (f->type) {
    case VOLT__CFG_U32: { uint32_t x; memcpy(&x, p, sizeof x); v.num = x; v.u64 = x; break; }
    case VOLT__CFG_I64: { int64_t x; memcpy(&x, p, sizeof x); v.num = (double)x; break; }
    case VOLT__CFG_INT: { int x; memcpy(&x, p, sizeof x); v.num = x; break; }
    case VOLT__CFG_F32: {            /* the shortest decimal that reads back as x: 0.1f is 0.1 */
        float x;
        char b[32];
        memcpy(&x, p, sizeof x);
        for (int prec = 6; prec <= 9; prec++) {
            snprintf(b, sizeof b, "%.*g", prec, (double)x);
            if (strtof(b, NULL) == x) break;
        }
        v.num = strtod(b, NULL);
        break;
    }
    case VOLT__CFG_F64: memcpy(&v.num, p, sizeof v.num); break;
    case VOLT__CFG_BOOL: { bool x; memcpy(&x, p, sizeof x); v.b = x; break; }
    case VOLT__CFG_U64: { uint64_t x; memcpy(&x, p, sizeof x); v.num = (double)x; v.u64 = x; break; }
    case VOLT__CFG_STR: memcpy(&v.str, p, sizeof v.str); break;
    }
    return v;
}

char *volt__trainer_config_json(const volt_trainer_config *c) {
    cJSON *o = cJSON_CreateObject();
    bool ok = o != NULL;
    for (int i = 0; ok && i < volt__n_trainer_config_fields; i++) {
        const volt__cfg_field *f = &volt__trainer_config_fields[i];
        if (!(f->flags & VOLT__CFG_HPARAM)) continue;
        volt__cfg_value v = volt__cfg_get(f, c);
        cJSON *j;
        char u[32];
        switch (f->type) {
        case VOLT__CFG_BOOL: j = cJSON_CreateBool(v.b); break;
        case VOLT__CFG_STR: j = v.str ? cJSON_CreateString(v.str) : cJSON_CreateNull(); break;
        case VOLT__CFG_U64:
            snprintf(u, sizeof u, "%llu", (unsigned long long)v.u64);
            j = cJSON_CreateString(u);
            break;
        default: j = cJSON_CreateNumber(v.num); break;
        }
        ok = j && cJSON_AddItemToObject(o, f->name, j);
        if (!ok) cJSON_Delete(j);
    }
    char *s = ok ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    return s;
}
