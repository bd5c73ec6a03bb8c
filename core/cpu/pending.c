/* Kernels not written yet: each reports "not implemented". An op's author deletes its
 * line here when adding the real kernels. */
#include "core/cpu/kernels.h"

#define PENDING(id) \
    volt_status volt_cpu_##id##_fwd(volt_step *s, volt_node *n) { return volt_step_fail(s, VOLT_ERR_UNSUPPORTED, "%s: not implemented on cpu", #id); } \
    volt_status volt_cpu_##id##_bwd(volt_step *s, volt_node *n) { return volt_step_fail(s, VOLT_ERR_UNSUPPORTED, "%s: backward not implemented on cpu", #id); }

