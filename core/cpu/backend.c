/* The CPU backend's kernel table: every op's forward/backward (core/cpu/kernels.h). */
#include <string.h>
#include "core/cpu/kernels.h"

static const volt_kernel cpu_kernels[VOLT_OP_COUNT] = {
#define VOLT_CPU_ENTRY_(id, nm) [VOLT_OP_##id] = { nm, volt_cpu_##id##_fwd, volt_cpu_##id##_bwd },
    VOLT_OPS(VOLT_CPU_ENTRY_)
#undef VOLT_CPU_ENTRY_
};

static const volt_backend cpu_backend = { VOLT_BACKEND_VERSION, "cpu", cpu_kernels };

const volt_backend *volt_backend_cpu(void) { return &cpu_backend; }

const volt_backend *volt_backend_find(const char *name) {
    if (!strcmp(name, "cpu")) return &cpu_backend;
    return NULL;
}
