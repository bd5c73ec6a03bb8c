/* volt/precision.h — the trainer's precision plugins (cfg.precision): names and what each
 * mode does (docs/PRECISION.md). The dtype conversions it used to hold are in volt/dtype.h
 * (included here, so code that used them through this header still compiles); volt_cast and
 * the step's compute dtype are in volt/ops.h; the grad scaler and parameter memory accessors
 * in volt/trainer.h. */
#ifndef VOLT_PRECISION_H
#define VOLT_PRECISION_H

#include "volt/export.h"

#include "volt/core.h"
#include "volt/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- precision plugins, as the trainer uses them ------------------------------------- */
/* Precision names as in Lightning: "32-true", "16-mixed", "bf16-mixed", "bf16-true",
 * "16-true"; aliases "32" (32-true), "16" (16-mixed), "bf16" (bf16-mixed). */
typedef struct volt_precision_info {
    const char *name;            /* canonical name ("bf16-mixed" for "bf16") */
    volt_dtype compute_dtype;    /* GEMM operands */
    volt_dtype param_dtype;      /* parameter storage */
    bool master_weights;         /* optimizer updates f32 params; 16-bit copies made per op */
    bool grad_scaling;           /* dynamic loss scaling (16-mixed) */
} volt_precision_info;

/* Describe a precision by name; VOLT_ERR_UNSUPPORTED for an unknown name. */
VOLT_API volt_status volt_precision_lookup(const char *name, volt_precision_info *out);
/* "32-true, 16-mixed, bf16-mixed, bf16-true, 16-true (aliases 32, 16, bf16)" */
VOLT_API const char *volt_precision_names(void);

#ifdef __cplusplus
}
#endif
#endif
