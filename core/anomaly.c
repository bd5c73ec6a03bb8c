/* detect_anomaly (Lightning's Trainer flag; torch.autograd's anomaly mode): in a training step
 * every op's forward output and every gradient its backward wrote are read back to the host
 * (one device->host copy each, through a scratch buffer the step keeps) and scanned for NaN.
 * The first NaN fails the step with VOLT_ERR_NUMERIC naming the op, forward or backward, the
 * tape node and the parameters among its inputs. NaN only, as torch: inf is what 16-mixed's
 * grad scaler expects now and then. Slow by design (a copy per op); a captured step cannot
 * copy to the host, so the trainer refuses it with compile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"

/* Index of the first NaN in n elements of dt at host memory p, or -1. */
static int64_t first_nan(const void *p, volt_dtype dt, int64_t n) {
    if (dt == VOLT_F32) {
        const uint32_t *u = p;
        for (int64_t i = 0; i < n; i++)
            if ((u[i] & 0x7fffffffu) > 0x7f800000u) return i;
    } else if (dt == VOLT_BF16 || dt == VOLT_F16) {
        const uint16_t *u = p;
        const uint16_t inf = dt == VOLT_BF16 ? 0x7f80u : 0x7c00u;
        for (int64_t i = 0; i < n; i++)
            if ((u[i] & 0x7fffu) > inf) return i;
    }
    return -1;
}

/* bytes of device memory at src into the step's anomaly scratch (grown, kept). */
static const void *fetch(volt_step *s, const void *src, size_t bytes) {
    if (bytes > s->anomaly_cap) {
        void *p = realloc(s->anomaly_buf, bytes);
        if (!p) return NULL;
        s->anomaly_buf = p;
        s->anomaly_cap = bytes;
    }
    volt__dev_d2h(s->dev, s->anomaly_buf, src, bytes);
    return s->anomaly_buf;
}

/* ", inputs: fc1.weight, fc1.bias" for the parameters among n's inputs */
static void param_names(const volt_node *n, char *out, size_t cap) {
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < n->n_in && k + 1 < cap; i++)
        if (n->in[i] && n->in[i]->name) {
            int w = snprintf(out + k, cap - k, "%s%s", k ? ", " : "; parameters: ", n->in[i]->name);
            if (w < 0) break;
            k += (size_t)w < cap - k ? (size_t)w : cap - k - 1;
        }
}

static volt_status check(volt_step *s, const volt_node *n, int index, const void *data, volt_dtype dt, int64_t numel,
                         const char *what) {
    if (!data || numel <= 0 || (dt != VOLT_F32 && dt != VOLT_BF16 && dt != VOLT_F16)) return VOLT_OK;
    const void *h = fetch(s, data, (size_t)numel * volt_dtype_size(dt));
    if (!h) return volt_step_fail(s, VOLT_ERR_NOMEM, "detect_anomaly: out of host memory to read '%s' back",
                                  s->be->kernels[n->op].name);
    const int64_t at = first_nan(h, dt, numel);
    if (at < 0) return VOLT_OK;
    char names[256];
    param_names(n, names, sizeof names);
    return volt_step_fail(s, VOLT_ERR_NUMERIC, "detect_anomaly: '%s' returned nan values in %s (element %lld of %lld; tape "
                          "node %d%s)", s->be->kernels[n->op].name, what, (long long)at, (long long)numel, index, names);
}

volt_status volt__anomaly_forward(volt_step *s, const volt_node *n, int index) {
    const volt_tensor *o = n->out;
    return check(s, n, index, o->data, o->dtype, volt_tensor_numel(o), "its output (forward)");
}

volt_status volt__anomaly_backward(volt_step *s, const volt_node *n, int index) {
    char what[320];
    for (int k = 0; k < n->n_in; k++) {
        const volt_tensor *in = n->in[k];
        if (!n->grad_mode || n->grad_mode[k] == VOLT_GRAD_NONE || !in || !in->grad) continue;
        snprintf(what, sizeof what, "the gradient of its input %d%s%s%s (backward)", k, in->name ? " (" : "", in->name ? in->name : "",
                 in->name ? ")" : "");
        VOLT_TRY(check(s, n, index, in->grad, VOLT_F32, volt_tensor_numel(in), what));
    }
    return VOLT_OK;
}
