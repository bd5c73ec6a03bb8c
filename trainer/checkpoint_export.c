/* export_full: every parameter, whole and f32, in one safetensors file written by rank 0 as
 * it streams (a sharded unit gathered one at a time). See volt/trainer.h. */
#include <stdio.h>
#include <stdlib.h>
#include "trainer/checkpoint_internal.h"
#include "volt/safetensors.h"
#include "volt/precision.h"

/* ---- export ------------------------------------------------------------------------------------ */
volt_status volt_trainer_export_full(volt_trainer *t, const char *path) {
    if (!t->ps || !volt_params_finalized(t->ps)) return volt__terr(t, VOLT_ERR_STATE, "export_full: no model yet");
    if (!path || !*path) return volt__terr(t, VOLT_ERR_INVALID_ARG, "export_full: empty path");
    volt_strategy *sg = t->strategy;
    const bool gather = t->world > 1 && volt__strategy_gathers_units(sg);
    volt_status st = VOLT_OK;
    char err[768] = "";
    volt_st_stream *ws = NULL;
    if (t->rank == 0) {   /* header first (names, shapes), then the data unit by unit */
        st = volt_st_stream_create(path, &ws, err, sizeof err);
        for (int i = 0; i < volt_params_count(t->ps) && st >= 0; i++) {
            volt_tensor *p = volt_params_at(t->ps, i);
            st = volt_st_stream_declare(ws, p->name, VOLT_F32, p->shape);
        }
        if (st >= 0) st = volt_st_stream_meta(ws, "volt.module", t->mops && t->mops->name ? t->mops->name : "");
        if (st >= 0) st = volt_st_stream_begin(ws);
        if (st < 0 && ws) snprintf(err, sizeof err, "%s", volt_st_stream_errmsg(ws));
    }
    float *scratch = NULL;
    int64_t cap = 0;
    for (int u = 0; u < volt_params_unit_count(t->ps); u++) {
        volt_unit *un = volt_params_unit_at(t->ps, u);
        const int64_t numel = volt_unit_numel(un);
        int64_t lo, hi;
        owned_range(t, u, &lo, &hi);
        const bool sharded = gather && (lo != 0 || hi != numel);
        const float *vals = volt_unit_data(un);
        if (!vals || sharded) {   /* one unit gathered from the shards, or 16-bit storage (exact in f32) */
            if (numel > cap) {
                float *nb = realloc(scratch, sizeof(float) * (size_t)numel);
                if (!nb) { free(scratch); volt_st_stream_destroy(ws); return volt__terr(t, VOLT_ERR_NOMEM, "export_full: out of memory"); }
                scratch = nb;
                cap = numel;
            }
            if (!sharded) volt_convert(scratch, VOLT_F32, volt_unit_values(un), volt_params_dtype(t->ps), numel);
            else {
                volt_status gs = volt__strategy_gather_unit(sg, u, scratch);   /* collective: every rank */
                if (gs < 0) {
                    free(scratch);
                    volt_st_stream_destroy(ws);
                    return volt__terr(t, gs, "export_full '%s': strategy '%s': %s", path, volt__strategy_name(sg), volt__strategy_errmsg(sg));
                }
            }
            vals = scratch;
        }
        for (int i = 0; ws && st >= 0 && i < volt_unit_param_count(un); i++) {
            volt_tensor *p = volt_unit_param(un, i);
            st = volt_st_stream_write(ws, p->name, vals + volt_param_offset(p));
            if (st < 0) snprintf(err, sizeof err, "%s", volt_st_stream_errmsg(ws));
        }
    }
    free(scratch);
    if (ws && st >= 0) {
        st = volt_st_stream_finish(ws, err, sizeof err);
        ws = NULL;
    }
    volt_st_stream_destroy(ws);
    const bool ok = all_ok(t, st >= 0);
    if (st < 0) return volt__terr(t, st, "export_full '%s': %s", path, err);
    if (!ok) return volt__terr(t, VOLT_ERR_IO, "export_full '%s': rank 0 could not write the file (its log has the reason)", path);
    return VOLT_OK;
}
