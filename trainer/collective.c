/* Collectives for callbacks (Lightning's strategy.reduce_boolean_decision and broadcast): a
 * decision every rank must agree on, such as "save a checkpoint now" taken from a clock that
 * runs differently on each rank. Both are one all-reduce of a double over the strategy
 * (volt__strategy_all_reduce_mean), so they fail as every other metric sync does: a dead or
 * late rank is VOLT_ERR_TIMEOUT after the comm's timeout, with the trainer's message set. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "trainer/trainer_internal.h"

/* The mean over ranks of one value each; the input itself on one process. */
static volt_status mean_over_ranks(volt_trainer *t, const char *who, double *v) {
    if (t->world <= 1 || !t->strategy) return VOLT_OK;
    t->decisions++;
    volt_status st = volt__strategy_all_reduce_mean(t->strategy, v, 1, who);
    if (st < 0)
        return volt__terr(t, st, "%s: sync across ranks failed (strategy '%s'): %s", who,
                          volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
    return VOLT_OK;
}

volt_status volt_trainer_reduce_boolean_decision(volt_trainer *t, bool decision, bool all, bool *out) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (!out) return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_trainer_reduce_boolean_decision: out is NULL");
    double v = decision ? 1.0 : 0.0;
    VOLT_TRY(mean_over_ranks(t, "volt_trainer_reduce_boolean_decision", &v));
    /* The mean is k/W for k ranks saying true; the thresholds sit half a rank away from the
     * nearest other outcome, so a reduction that rounds (1/W added W times) decides the same. */
    const double half = 0.5 / (double)(t->world > 1 ? t->world : 1);
    *out = all ? v > 1.0 - half : v > half;
    return VOLT_OK;
}

volt_status volt_trainer_broadcast_bool(volt_trainer *t, bool value, bool *out) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (!out) return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_trainer_broadcast_bool: out is NULL");
    /* only rank 0 contributes: the mean is 1/W when it said true, 0 otherwise */
    double v = t->rank == 0 && value ? 1.0 : 0.0;
    VOLT_TRY(mean_over_ranks(t, "volt_trainer_broadcast_bool", &v));
    *out = t->world > 1 ? v > 0.5 / (double)t->world : value;
    return VOLT_OK;
}

static int world_of(const volt_trainer *t) { return t->world > 1 && t->strategy ? t->world : 1; }

/* Rank root's bytes into every rank's buf, in pieces of at most 64 KiB: each moves through the
 * comm's own buffer (an MPI broadcast that timed out may still write later: into memory the
 * comm keeps, never the caller's, which may be freed by then; strategies/comm/mpi/comm_mpi.c,
 * bounce_in). who: the public call, for the message. */
static volt_status bcast_pieces(volt_trainer *t, void *buf, size_t bytes, int root, const char *who) {
    enum { PIECE = 64 << 10 };
    for (size_t at = 0; at < bytes; at += PIECE) {
        const size_t n = bytes - at < PIECE ? bytes - at : PIECE;
        volt_status st = volt__strategy_broadcast(t->strategy, (char *)buf + at, n, root, who);
        if (st < 0)
            return volt__terr(t, st, "%s: %zu bytes from rank %d failed (strategy '%s'): %s", who, bytes, root,
                              volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
    }
    return VOLT_OK;
}

volt_status volt_trainer_broadcast(volt_trainer *t, void *buf, size_t bytes, int root) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    const int world = world_of(t);
    if ((!buf && bytes) || root < 0 || root >= world)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_trainer_broadcast: %s (root %d of %d ranks)",
                          !buf && bytes ? "NULL buffer" : "no such root", root, world);
    if (world <= 1 || !bytes) return VOLT_OK;
    t->decisions++;
    return bcast_pieces(t, buf, bytes, root, "volt_trainer_broadcast");
}

/* Each rank's bytes broadcast from it in turn: world broadcasts, each in the pieces above
 * (the same path as volt_trainer_broadcast; no allocation that could fail on one rank). */
volt_status volt_trainer_all_gather(volt_trainer *t, const void *send, size_t bytes, void *recv) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    const int world = world_of(t);
    if (bytes && (!send || !recv))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_trainer_all_gather: NULL %s buffer", !send ? "send" : "receive");
    if (bytes && (size_t)world > SIZE_MAX / bytes)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_trainer_all_gather: %zu bytes x %d ranks overflow", bytes, world);
    if (!bytes) return VOLT_OK;
    char *out = recv;
    const int me = world > 1 ? t->rank : 0;
    memmove(out + (size_t)me * bytes, send, bytes);   /* send may be recv's own slot */
    if (world <= 1) return VOLT_OK;
    t->decisions++;
    for (int r = 0; r < world; r++) VOLT_TRY(bcast_pieces(t, out + (size_t)r * bytes, bytes, r, "volt_trainer_all_gather"));
    return VOLT_OK;
}

/* In blocks of values gathered into a buffer on the stack (nothing allocated), each reduced in
 * rank order: every rank computes the same sums from the same numbers, bit for bit. */
volt_status volt_trainer_all_reduce(volt_trainer *t, double *values, int64_t n, volt_reduce_op op) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (n < 0 || (n && !values) || (unsigned)op > (unsigned)VOLT_REDUCE_MIN)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_trainer_all_reduce: %s", n < 0 ? "a negative count"
                          : n && !values ? "NULL values" : "unknown reduce op");
    const int world = world_of(t);
    if (world <= 1 || !n) return VOLT_OK;   /* one rank: each value is its own sum, mean, max and min */
    enum { SLOTS = 4096 };
    if (world > SLOTS)
        return volt__terr(t, VOLT_ERR_UNSUPPORTED, "volt_trainer_all_reduce: more than %d ranks (%d)", SLOTS, world);
    double buf[SLOTS];
    const int64_t k = SLOTS / world;   /* values per block */
    for (int64_t at = 0; at < n; at += k) {
        const int64_t m = n - at < k ? n - at : k;
        VOLT_TRY(volt_trainer_all_gather(t, values + at, sizeof(double) * (size_t)m, buf));
        for (int64_t i = 0; i < m; i++) {
            double acc = buf[i];
            for (int r = 1; r < world; r++) acc = volt__reduce_fold(op, acc, buf[(size_t)r * (size_t)m + (size_t)i]);
            values[at + i] = op == VOLT_REDUCE_MEAN ? acc / (double)world : acc;
        }
    }
    return VOLT_OK;
}

/* Every rank's value, seen by every rank: a slot per rank in all-reduces of at most 64 ranks
 * each, in a buffer on the stack (nothing that could fail on one rank alone, an allocation,
 * and leave the others waiting in the collective). visit(ctx, r, v) gets rank r's value
 * (exact for integers below 2^52 / world) and returns false to stop after this block; the
 * ranks see the same values, so they stop alike. The strategy's error is returned as is. */
volt_status volt__rank_values(volt_trainer *t, double mine, const char *what, bool (*visit)(void *ctx, int r, double v),
                              void *ctx) {
    const int W = t->world;
    enum { BLOCK = 64 };
    double c[BLOCK];
    bool more = true;
    for (int base = 0; base < W && more; base += BLOCK) {
        const int k = W - base < BLOCK ? W - base : BLOCK;
        memset(c, 0, sizeof c);
        if (t->rank >= base && t->rank < base + k) c[t->rank - base] = mine;
        volt_status st = volt__strategy_all_reduce_mean(t->strategy, c, k, what);   /* slot r: v_r / W */
        if (st < 0) return st;
        for (int r = 0; r < k && more; r++) more = visit(ctx, base + r, c[r] * W);
    }
    return VOLT_OK;
}

volt_status volt__rank_fold(volt_trainer *t, const int *reduce, double *v, double *have, int n) {
    enum { SLOTS = 4096 };
    const int W = t->world;
    if (n < 0 || n > VOLT_MAX_METRICS || 2 * W > SLOTS) return VOLT_ERR_UNSUPPORTED;   /* alike on every rank */
    double mine[2 * VOLT_MAX_METRICS], buf[SLOTS];
    const int k = SLOTS / (2 * W);   /* values per all-gather */
    for (int at = 0; at < n; at += k) {
        const int m = n - at < k ? n - at : k;
        for (int i = 0; i < m; i++) {
            mine[2 * i] = v[at + i];
            mine[2 * i + 1] = have[at + i] > 0;
        }
        VOLT_TRY(volt_trainer_all_gather(t, mine, sizeof(double) * 2 * (size_t)m, buf));
        for (int i = 0; i < m; i++) {
            double acc = 0, any = 0;
            for (int r = 0; r < W; r++) {
                const double *x = buf + (size_t)r * 2 * (size_t)m + 2 * (size_t)i;
                if (!(x[1] > 0)) continue;
                acc = any > 0 ? volt__reduce_fold(reduce[at + i], acc, x[0]) : x[0];
                any = 1;
            }
            v[at + i] = acc;
            have[at + i] = any;
        }
    }
    return VOLT_OK;
}

/* One verdict (trainer_internal.h): one all-reduce of a flag per rank (volt__rank_values), then the
 * lowest failing rank broadcasts its status and message, so every rank fails with the same words,
 * as a sharded load's verdict (checkpoint_source.c). */
static bool first_failed(void *ctx, int r, double v) {
    int *root = ctx;
    if (v > 0.5 && *root < 0) *root = r;
    return *root < 0;
}

volt_status volt__agree_status(volt_trainer *t, volt_status st, const char *what, const char *outcome) {
    if (t->world <= 1 || !t->strategy) return st;
    int root = -1;   /* the collectives' names are fixed: `what` may hold a path spelled per rank */
    volt_status cs = volt__rank_values(t, st < 0 ? 1.0 : 0.0, "verdict flags", first_failed, &root);
    if (cs >= 0 && root < 0) return VOLT_OK;
    struct { int32_t st; char msg[sizeof t->errmsg]; } v;
    memset(&v, 0, sizeof v);
    v.st = st;
    if (cs >= 0) {
        if (t->rank == root) snprintf(v.msg, sizeof v.msg, "%s", t->errmsg);
        cs = volt__strategy_broadcast(t->strategy, &v, sizeof v, root, "verdict message");
    }
    if (cs < 0) {
        if (st < 0) return st;   /* this rank's own error stays the one reported */
        return volt__terr(t, cs, "%s: the ranks could not agree (strategy '%s'): %s", what,
                          volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
    }
    v.msg[sizeof v.msg - 1] = 0;
    const volt_status out = volt__terr(t, v.st < 0 ? v.st : VOLT_ERR_STATE, "%s (rank %d of %d found it; %s)", v.msg, root,
                                       t->world, outcome);
    t->err_agreed = true;   /* every rank holds these words: one of them says them (volt_trainer_error_agreed) */
    return out;
}
