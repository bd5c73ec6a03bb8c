/* The CPU backend's kernel table: every op's forward/backward (core/cpu/kernels.h). */
#include <string.h>
#include "core/cpu/kernels.h"

static const volt_kernel cpu_kernels[VOLT_OP_COUNT] = {
#define VOLT_CPU_ENTRY_(id, nm) [VOLT_OP_##id] = { nm, volt__cpu_##id##_fwd, volt__cpu_##id##_bwd },
    VOLT_OPS(VOLT_CPU_ENTRY_)
#undef VOLT_CPU_ENTRY_
};

/* Backward kernels that create their inputs' grads themselves (core/internal.h): they
 * store into a fresh grad (or alias the upstream one) instead of adding to zeros. */
static const uint8_t cpu_first_write[VOLT_OP_COUNT] = {
    [VOLT_OP_MATMUL] = 1, [VOLT_OP_LINEAR] = 1, [VOLT_OP_ADD] = 1, [VOLT_OP_SCALE] = 1,
    [VOLT_OP_GELU] = 1, [VOLT_OP_SOFTMAX] = 1, [VOLT_OP_LAYERNORM] = 1, [VOLT_OP_DROPOUT] = 1,
    [VOLT_OP_RESHAPE] = 1, [VOLT_OP_PERMUTE] = 1,
};

static const volt_backend cpu_backend = { VOLT_BACKEND_VERSION, "cpu", cpu_kernels, cpu_first_write };

const volt_backend *volt__backend_cpu(void) { return &cpu_backend; }

const volt_backend *volt__backend_find(const char *name) {
    if (!strcmp(name, "cpu")) return &cpu_backend;
    return NULL;
}
