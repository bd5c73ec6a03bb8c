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
    VOLT_TRY(volt__loop_wait_params(t, "export_full"));
    volt_strategy *sg = t->strategy;
    const bool gather = t->world > 1 && volt__strategy_gathers_units(sg);
    volt_status st = VOLT_OK;
    char err[768] = "";
    volt_st_stream *ws = NULL;
    if (t->rank == 0) {   /* header first (names, shapes), then the data unit by unit */
        st = volt_st_stream_create(path, &ws, err, sizeof err);
        for (int u = 0; u < volt_params_unit_count(t->ps) && st >= 0; u++) {
            const volt_unit *un = volt_params_unit_at(t->ps, u);
            for (int i = 0; i < volt_unit_param_count(un) && st >= 0; i++)
                st = volt_st_stream_declare(ws, volt_unit_param(un, i)->name, VOLT_F32, volt_unit_param(un, i)->shape);
        }
        if (st >= 0) st = volt_st_stream_meta(ws, "volt.module", t->mops && t->mops->name ? t->mops->name : "");
        /* weights for other tools (HF's from_pretrained refuses a format other than pt / tf /
         * flax / mlx); the crcs are still written and checked by volt */
        if (st >= 0) st = volt_st_stream_meta(ws, "format", "pt");
        if (st >= 0) st = volt_st_stream_begin(ws);
        if (st < 0 && ws) snprintf(err, sizeof err, "%s", volt_st_stream_errmsg(ws));
    }
    ck_stage stg;   /* one unit at a time: its values to the host (or gathered there), then to the file */
    if (stage_open(t, &stg) < 0) {
        volt_st_stream_destroy(ws);
        return volt__terr(t, VOLT_ERR_NOMEM, "export_full '%s': out of memory (staging)", path);
    }
    for (int u = 0; u < volt_params_unit_count(t->ps); u++) {
        volt_unit *un = volt_params_unit_at(t->ps, u);
        const int64_t numel = volt_unit_numel(un);
        int64_t lo, hi;
        owned_range(t, u, &lo, &hi);
        const float *vals = NULL;
        if (gather && (lo != 0 || hi != numel)) {   /* collective: every rank; the strategy fills the host buffer */
            volt_status gs = volt__strategy_gather_unit(sg, u, stg.f32);
            if (gs < 0) {
                stage_close(&stg);
                volt_st_stream_destroy(ws);
                return volt__terr(t, gs, "export_full '%s': strategy '%s': %s", path, volt__strategy_name(sg), volt__strategy_errmsg(sg));
            }
            vals = stg.f32;
        } else if (ws && st >= 0 && !(vals = stage_values(t, &stg, u, 0, numel))) {   /* one D2H copy */
            st = VOLT_ERR_STATE;
            snprintf(err, sizeof err, "unit '%s' has no values", volt_unit_name(un));
        }
        for (int i = 0; ws && st >= 0 && i < volt_unit_param_count(un); i++) {
            volt_tensor *p = volt_unit_param(un, i);
            st = volt_st_stream_write(ws, p->name, vals + volt_param_offset(p));
            if (st < 0) snprintf(err, sizeof err, "%s", volt_st_stream_errmsg(ws));
        }
    }
    stage_close(&stg);
    if (ws && st >= 0) {
        st = volt_st_stream_finish(ws, err, sizeof err);
        ws = NULL;
    }
    volt_st_stream_destroy(ws);
    const bool ok = all_ok(t, st >= 0, "export_full written");
    if (st < 0) return volt__terr(t, st, "export_full '%s': %s", path, err);
    if (!ok) return volt__terr(t, VOLT_ERR_IO, "export_full '%s': rank 0 could not write the file (its log has the reason)", path);
    return VOLT_OK;
}
