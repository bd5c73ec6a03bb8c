/* Precision plugins (private to precision/ and trainer/): what cfg.precision changes.
 *
 * One const table per mode ("32-true", "16-mixed", "bf16-mixed", "bf16-true", "16-true"):
 * the dtypes the core uses (GEMM operands via the step's compute dtype; parameter storage
 * via volt_params_convert) and the loss-scaling steps the trainer calls at fixed points:
 *
 *   backward:   loss' = scale_loss(loss)                  (after the accumulation factor)
 *   boundary:   reduce grads (strategy) -> unscale_grads -> found_inf OR-ed over ranks
 *               -> clip -> on_before_optimizer_step -> optimizer step unless found_inf
 *               -> update(found_inf)
 *
 * Version first, append-only, NULL = nothing to do (SQLite VFS style). */
#ifndef VOLT_PRECISION_PLUGIN_H
#define VOLT_PRECISION_PLUGIN_H

#include "volt/core.h"
#include "volt/params.h"
#include "volt/precision.h"
#include "core/device.h"

/* torch.amp.GradScaler's dynamic loss scale. Its state (scale, found_inf, growth tracker)
 * lives in device memory (`state`, core/device.h volt_scaler_state, allocated on the loss's
 * device at the first scale_loss) and changes only through the backend's parameter math;
 * scale_loss multiplies by the device's scale (a captured step's replays read each step's).
 * `scale` and `growth_tracker` here are the host's copy, refreshed by one D2H copy at the
 * end of each boundary (update), or after a captured step's launch (read_back), for
 * logging and checkpoints. */
typedef struct volt_grad_scaler {
    float scale;               /* current loss scale (host copy) */
    float growth_factor;       /* > 1 */
    float backoff_factor;      /* in (0, 1) */
    int64_t growth_interval;   /* good steps before the scale grows */
    int64_t growth_tracker;    /* good steps since the last change (host copy) */
    struct volt_device *dev;   /* where `state` lives (NULL until first used) */
    volt_scaler_state *state;  /* device memory */
} volt_grad_scaler;

typedef struct volt_precision volt_precision;

/* Key/value access to checkpoint metadata (the trainer passes its writer/reader). */
typedef volt_status (*volt_meta_put_fn)(void *ctx, const char *key, const char *value);
typedef const char *(*volt_meta_get_fn)(void *ctx, const char *key);

typedef struct volt_precision_ops {
    uint32_t version;                  /* VOLT_PRECISION_OPS_VERSION */
    volt_precision_info info;          /* name, compute and storage dtypes, master weights, scaling */
    /* After the parameters are initialised (pretrained weights included): storage dtype. */
    volt_status (*configure_params)(volt_precision *p, volt_params *ps, char *err, size_t errlen);
    /* The loss backward starts from; NULL result = step error. */
    volt_tensor *(*scale_loss)(volt_precision *p, volt_step *s, volt_tensor *loss);
    /* Divide this process's grads by the scale; *found_inf = a scaled grad was inf/NaN (on
     * the device; the host reads the flag with one D2H copy here, once per boundary; with
     * found_inf NULL the flag stays on the device: a captured step). */
    void (*unscale_grads)(volt_precision *p, volt_params *ps, bool *found_inf);
    /* After the boundary (step taken or skipped; found_inf is the all-rank result). */
    void (*update)(volt_precision *p, bool found_inf);
    /* Checkpoint metadata. load validates everything first and changes nothing on error
     * (apply=false: validate only); keys absent = a checkpoint of another precision: keep. */
    volt_status (*state_save)(volt_precision *p, volt_meta_put_fn put, void *ctx);
    volt_status (*state_load)(volt_precision *p, volt_meta_get_fn get, void *ctx, bool apply,
                              char *err, size_t errlen);
    /* Version 2: a captured step (compile) decides the skip on the device, with no host read.
     * unscale_grads(p, ps, NULL) leaves found_inf on the device; skip_flag is its address: the
     * boundary sums it over ranks there (any rank's inf skips everywhere), then the optimizer's
     * updates read it (volt_update_args.skip); update_on_device is update with that flag and no
     * host copy; after the graph's launch, read_back refreshes the host copy with one D2H copy
     * and says whether the step was skipped. */
    float *(*skip_flag)(volt_precision *p);
    void (*update_on_device)(volt_precision *p);
    void (*read_back)(volt_precision *p, bool *skipped);
} volt_precision_ops;
#define VOLT_PRECISION_OPS_VERSION 2u

struct volt_precision {
    const volt_precision_ops *ops;
    volt_grad_scaler scaler;           /* used by 16-mixed */
    volt_dtype optim_dtype;            /* optimizer state dtype */
    bool optim_dtype_explicit;         /* the user asked (cfg.optimizer_dtype) */
    int64_t skipped_steps;             /* boundaries whose optimizer step was skipped */
};

typedef struct volt_precision_config {
    const char *name;                  /* a precision name or alias */
    float init_scale, growth_factor, backoff_factor;
    int64_t growth_interval;
    const char *optimizer_dtype;       /* NULL or "auto": the parameter dtype; "f32"/"32",
                                          "bf16", "f16"/"16" */
} volt_precision_config;

/* Errors: UNSUPPORTED (unknown name), INVALID_ARG (bad scaler settings or optimizer dtype),
 * NOMEM; the message goes to err. */
volt_status volt__precision_create(const volt_precision_config *cfg, volt_precision **out,
                                  char *err, size_t errlen);
void volt__precision_destroy(volt_precision *p);                       /* NULL-safe */

/* Shared by the plugins (precision/scaler.c). */
/* The device state on device d (allocated and filled from the host copy on first use;
 * VOLT_ERR_NOMEM when it cannot be). */
volt_status volt__scaler_attach(volt_grad_scaler *g, volt_device *d);
void volt__scaler_unscale(volt_grad_scaler *g, volt_params *ps, bool *found_inf);
/* found_inf: the all-rank flag; written to the device state, then pm->scaler_update, then
 * the host copy is refreshed (one D2H copy). */
void volt__scaler_update(volt_grad_scaler *g, bool found_inf);
/* A captured step's halves: the update from the device's own flag (no copy either way), and
 * after the launch the host copy refreshed, *skipped = the step's found_inf. */
void volt__scaler_update_on_device(volt_grad_scaler *g);
void volt__scaler_read_back(volt_grad_scaler *g, bool *skipped);
/* Set scale and tracker (checkpoint restore): host copy and device state. */
void volt__scaler_set(volt_grad_scaler *g, float scale, int64_t growth_tracker);
void volt__scaler_release(volt_grad_scaler *g);
#endif
