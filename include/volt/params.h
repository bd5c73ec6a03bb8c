/* volt/params.h — the parameter store.
 *
 * Parameters are declared (name, shape, init) inside a module's setup and grouped into
 * units (a layer, a block). After volt_params_finalize, each unit owns one flat, padded,
 * contiguous f32 buffer for values and one for grads; optimizers keep their states in
 * buffers of the same layout. A parameter is a volt_tensor whose data/grad point into its
 * unit's buffers. A unit's grads hold no memory, and its parameters' `grad` is NULL (PyTorch's
 * None), until something needs them: backward's first write to the unit, an optimizer
 * created over the store, or volt_unit_grad; they read as zeros then. A validate/test/predict-
 * only run never pays for them. Strategies hook into the units (DESIGN §3): unit_use fires when a
 * forward op first reads a unit's parameter in a step, unit_grads_ready when backward has
 * finished the last node touching the unit. */
#ifndef VOLT_PARAMS_H
#define VOLT_PARAMS_H

#include "volt/export.h"

#include "volt/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Each parameter starts on a multiple of this many floats inside its unit buffer. */
#define VOLT_PARAM_ALIGN 16

typedef enum volt_init_kind {
    VOLT_INIT_KIND_ZEROS = 0,
    VOLT_INIT_KIND_CONST,             /* a */
    VOLT_INIT_KIND_NORMAL,            /* mean a, std b */
    VOLT_INIT_KIND_UNIFORM,           /* U(a, b) */
    VOLT_INIT_KIND_XAVIER_UNIFORM,    /* gain a */
    VOLT_INIT_KIND_XAVIER_NORMAL,     /* gain a */
    VOLT_INIT_KIND_KAIMING_UNIFORM,   /* leaky-relu slope a, fan_in mode (PyTorch default) */
    VOLT_INIT_KIND_KAIMING_NORMAL,    /* leaky-relu slope a, fan_in mode */
} volt_init_kind;

typedef struct volt_init { volt_init_kind kind; float a, b; } volt_init;

#define VOLT_INIT_ZEROS ((volt_init){ VOLT_INIT_KIND_ZEROS, 0.f, 0.f })
#define VOLT_INIT_ONES ((volt_init){ VOLT_INIT_KIND_CONST, 1.f, 0.f })
#define VOLT_INIT_CONST(v) ((volt_init){ VOLT_INIT_KIND_CONST, (v), 0.f })
#define VOLT_INIT_NORMAL(mean, std) ((volt_init){ VOLT_INIT_KIND_NORMAL, (mean), (std) })
#define VOLT_INIT_UNIFORM(lo, hi) ((volt_init){ VOLT_INIT_KIND_UNIFORM, (lo), (hi) })
#define VOLT_INIT_XAVIER ((volt_init){ VOLT_INIT_KIND_XAVIER_UNIFORM, 1.f, 0.f })
#define VOLT_INIT_XAVIER_NORMAL ((volt_init){ VOLT_INIT_KIND_XAVIER_NORMAL, 1.f, 0.f })
/* He init for ReLU nets: U(±sqrt(6/fan_in)). */
#define VOLT_INIT_KAIMING ((volt_init){ VOLT_INIT_KIND_KAIMING_UNIFORM, 0.f, 0.f })
#define VOLT_INIT_KAIMING_NORMAL ((volt_init){ VOLT_INIT_KIND_KAIMING_NORMAL, 0.f, 0.f })
/* nn.Linear's default weight init: kaiming_uniform(a=sqrt(5)) = U(±1/sqrt(fan_in)). */
#define VOLT_INIT_TORCH_LINEAR ((volt_init){ VOLT_INIT_KIND_KAIMING_UNIFORM, 2.2360679775f, 0.f })

typedef struct volt_params_config {
    uint32_t version;      /* VOLT_PARAMS_CONFIG_VERSION, set by _init */
    uint64_t seed;         /* init RNG seed; same seed => bitwise-identical init */
    /* ---- version 2 ---- */
    const char *accelerator;   /* where the buffers live: "cpu", "cuda", "cpu-strict" or
                                  "auto"/NULL ($VOLT_ACCELERATOR, else cuda if present, else cpu) */
    int device;                /* the device's ordinal (default 0) */
} volt_params_config;
#define VOLT_PARAMS_CONFIG_VERSION 2u

VOLT_API void volt_params_config_init(volt_params_config *cfg);
VOLT_API volt_status volt_params_create(const volt_params_config *cfg, volt_params **out);   /* out NULL: INVALID_ARG */
VOLT_API void volt_params_destroy(volt_params *ps);                 /* NULL-safe */
VOLT_API const char *volt_params_errmsg(const volt_params *ps);
/* Record an error message on the store (modules use it in setup/init_weights); returns st. */
VOLT_API volt_status volt_params_fail(volt_params *ps, volt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- declaring (before finalize) ------------------------------------------------ */
/* Start a new unit; later declarations go into it. Params declared before any call go
 * into an implicit unit named "default". Names must be unique. */
VOLT_API volt_status volt_params_unit(volt_params *ps, const char *name);
/* Declare an f32 parameter. *out is a stable pointer, owned by the store; its data is
 * valid after volt_params_finalize. Errors: duplicate name, bad shape, after finalize, and
 * a bad init (INVALID_ARG): an unknown kind, a non-finite argument, NORMAL with std < 0,
 * UNIFORM with lo > hi, XAVIER with gain < 0. */
VOLT_API volt_status volt_param_new(volt_params *ps, const char *name, volt_shape shape,
                           volt_init init, volt_tensor **out);
/* After p's init, zero its row `row` (first dim): nn.Embedding's padding_idx row.
 * Before finalize (else VOLT_ERR_STATE); row in [0, shape[0]) (else INVALID_ARG). */
VOLT_API volt_status volt_param_set_init_zero_row(volt_params *ps, volt_tensor *p, int64_t row);
/* Pad every unit's flat buffers (values, grads, optimizer states) up to a multiple of
 * multiple * VOLT_PARAM_ALIGN floats, so a unit splits into `multiple` equal, aligned
 * slices (ZeRO/FSDP use the world size). Parameter offsets do not change; the padding
 * adds < multiple * VOLT_PARAM_ALIGN floats per unit and stays zero. Before finalize
 * (else VOLT_ERR_STATE); multiple >= 1 (default 1). */
VOLT_API volt_status volt_params_set_unit_padding(volt_params *ps, int64_t multiple);
/* Allocate every unit's buffers and initialise parameters in declaration order
 * (INVALID_ARG for NULL). */
VOLT_API volt_status volt_params_finalize(volt_params *ps);
VOLT_API bool volt_params_finalized(const volt_params *ps);

/* Exclude a parameter from gradient computation (frozen); call any time. */
VOLT_API void volt_param_set_requires_grad(volt_tensor *p, bool requires_grad);

/* ---- lookup --------------------------------------------------------------------- */
VOLT_API int volt_params_count(const volt_params *ps);
VOLT_API volt_tensor *volt_params_at(const volt_params *ps, int i);           /* declaration order */
VOLT_API volt_tensor *volt_params_find(const volt_params *ps, const char *name); /* NULL if absent */
VOLT_API int64_t volt_params_numel(const volt_params *ps);                    /* unpadded total */

VOLT_API int volt_params_unit_count(const volt_params *ps);
VOLT_API volt_unit *volt_params_unit_at(const volt_params *ps, int i);
VOLT_API const char *volt_unit_name(const volt_unit *u);
VOLT_API int volt_unit_index(const volt_unit *u);
VOLT_API int volt_unit_param_count(const volt_unit *u);
VOLT_API volt_tensor *volt_unit_param(const volt_unit *u, int i);
/* Offset (in elements) of parameter p inside its unit's flat buffers. */
VOLT_API int64_t volt_param_offset(const volt_tensor *p);
/* Padded length in floats of the unit's flat buffers (values, grads, optimizer states). */
VOLT_API int64_t volt_unit_numel(const volt_unit *u);
/* Device pointers (see the top of this file). */
VOLT_API float *volt_unit_data(const volt_unit *u);     /* NULL when parameters are stored in 16 bits */
VOLT_API float *volt_unit_grad(const volt_unit *u);    /* makes the grads (zeros) when none yet;
                                                           NULL when the device is out of memory */

/* ---- storage dtype (bf16-true / 16-true precision) --------------------------------- */
/* Store every parameter's values as dt (f32, bf16 or f16) from now on: after finalize (and
 * after pretrained weights are loaded: they are written as f32). Values are rounded to
 * nearest even; each parameter's dtype and data change (data points into the unit's 2-byte
 * buffer, at the same element offset); grads stay f32 and keep their buffers. All or
 * nothing: on NOMEM nothing changed. Converting back to f32 is exact. volt_unit_data is
 * NULL while the store is 16-bit: volt_unit_values gives the buffer in the store's dtype. */
VOLT_API volt_status volt_params_convert(volt_params *ps, volt_dtype dt);
VOLT_API volt_dtype volt_params_dtype(const volt_params *ps);                 /* f32 unless converted */
VOLT_API void *volt_unit_values(const volt_unit *u);                          /* volt_params_dtype elements (device) */
/* Bytes of the unit value buffers (padded, storage dtype) and of the f32 grad buffers. */
VOLT_API int64_t volt_params_value_bytes(const volt_params *ps);
VOLT_API int64_t volt_params_grad_bytes(const volt_params *ps);

/* ---- gradients (device work through the backend's parameter math) ------------------ */
/* Every grad to 0, written now. */
VOLT_API void volt_params_zero_grad(volt_params *ps);
/* Every grad to 0 without a pass over the buffers (PyTorch's zero_grad(set_to_none=True),
 * what the trainer does after each optimizer step): the next backward's first write to a
 * parameter's grad stores instead of adding to zeros, and whatever reads grads before that
 * gets zeros: volt_unit_grad, clipping, the norms, the optimizer, a strategy's reduction,
 * and the end of a backward for the parameters it did not reach. Only a read of a tensor's
 * `grad` field itself, between this call and a backward or one of those calls, would see
 * the old values. */
VOLT_API void volt_params_clear_grad(volt_params *ps);
/* Scale all grads so their global L2 norm is at most max_norm; *total_norm (may be NULL)
 * gets the norm before clipping. Sums in double in a fixed order. The norm is a device
 * double; it is copied to the host only when total_norm is not NULL. */
VOLT_API volt_status volt_params_clip_grad_norm(volt_params *ps, float max_norm, float *total_norm);
VOLT_API volt_status volt_params_clip_grad_value(volt_params *ps, float clip_value);
/* Multiply every grad (each unit's grad range) by coef (clipping with a norm computed elsewhere). */
VOLT_API void volt_params_scale_grads(volt_params *ps, float coef);
/* Sum of squared grads over every unit's grad range (double, fixed order), computed on the
 * device and read with one copy (NaN if the store's one-double scratch cannot be
 * allocated). Strategies that shard grads add the ranks' partial sums. */
VOLT_API double volt_params_grad_sqnorm(const volt_params *ps);

#ifdef __cplusplus
}
#endif
#endif
