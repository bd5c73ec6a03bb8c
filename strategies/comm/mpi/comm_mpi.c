/* MPI comm backend: non-blocking collectives (MPI-3 MPI_I*) on a private duplicate of
 * MPI_COMM_WORLD (or of the communicator volt_comm_config.mpi_comm names) with
 * MPI_ERRORS_RETURN; waits poll MPI_Test against the comm's timeout so a dead or diverged
 * rank gives VOLT_ERR_TIMEOUT, never a hang. MPI errors become VOLT_ERR_COMM with file:line
 * and MPI's own error string.
 *
 * bf16 / f16 travel as MPI_UINT16_T and reduce with user-defined ops (one per type, made with
 * the comm): each pair of elements is added in f32 and rounded once (round to nearest even,
 * core/convert.h), as NCCL does; AVG divides in f32 and rounds once. No scratch, no
 * allocation per call.
 *
 * Process-wide state is unavoidable here: MPI is initialised once per process. We call
 * MPI_Init_thread (FUNNELED) only when nobody has, and then MPI_Finalize at exit (atexit);
 * an application that initialised MPI itself finalizes it itself. */
#include <limits.h>
#include <pthread.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mpi.h>
#include "strategies/comm/comm.h"
#include "core/err.h"
#include "core/clock.h"
#include "core/convert.h"

static bool g_we_initialised;   /* MPI_Init_thread was ours: finalize at exit */
/* After a collective failed or timed out on some comm of this process (volt__comm_broken:
 * the ranks are out of step) MPI_Finalize (collective) can wait for ever on a rank that hangs.
 * At exit the finalize then runs under a watchdog: if it has not returned after
 * FINALIZE_GRACE_S the process ends without it (_exit(1)), and mpirun ends the job (the hung
 * rank too). */
#define FINALIZE_GRACE_S 2

typedef enum { POST_NONE = 0, POST_AVG, POST_MOVE, POST_MOVE_AVG } post_kind;

typedef struct mpi_req {
    MPI_Request r;
    const char *op;               /* "all_reduce", ... */
    uint64_t seq;                 /* collective number on this comm (same on every rank) */
    char what[96];
    bool done;                    /* completed by a test() call; post-processing pending */
    post_kind post;
    volt_comm_dtype dt;
    void *buf;                    /* AVG: buf[0..count) /= world; MOVE: move src -> buf */
    const void *src;
    size_t count;
    unsigned char *bounce;        /* small collectives run here (bounce_in): the caller's buffer is */
    size_t bounce_cap;            /* written only by the wait, so a timed-out one never writes into */
    void *bounce_dst;             /* a buffer the caller has freed or left (its stack); kept with the */
    size_t bounce_n;              /* request, and leaked with it when the comm broke */
    volt__comm_env env;           /* a control collective's envelope in front of the data (comm.h) */
    struct mpi_req *next;         /* free list / all-list link */
    struct mpi_req *all_next;
} mpi_req;

typedef struct mpi_impl {
    MPI_Comm comm;
    bool comm_valid;
    MPI_Op sum_bf16, sum_f16;     /* the 16-bit sums (MPI_OP_NULL until made) */
    bool broken;                  /* a wait timed out / failed: collectives no longer match */
    volt_status broken_status;    /* ... with this status, */
    char broken_msg[384];         /* ... and this message (repeated by every later call) */
    uint64_t seq;
    mpi_req *free_list, *all;     /* requests are recycled, freed at destroy */
    int in_flight;
    char errmsg[768];
    struct mpi_impl *broken_next;  /* the broken comms' impls, kept (m_destroy) */
    int *world_of;                 /* member i's rank in MPI_COMM_WORLD; NULL: the comm spans the world */
} mpi_impl;

static mpi_impl *g_broken_impls;   /* reachable, so a leak checker sees them kept, not lost */

/* ---- leave notices (comm.h) ------------------------------------------------------------------
 * Only when volt initialised MPI (g_we_initialised): a receive for any rank's notice stays posted
 * on MPI_COMM_WORLD (tag VOLT__LEAVE_TAG: no collective or other message matches it), polled by
 * the waits; finalize_at_exit sends this process's notice to every other rank before it
 * finalizes. A leaver gives its own rank (MPI_SOURCE) and its words. */
static struct {
    bool on;
    int world, rank;
    MPI_Request in;
    char got[VOLT__LEAVE_MSG];
    unsigned char *left;        /* [world]: that rank left */
    char (*words)[VOLT__LEAVE_MSG];   /* [world]: its words */
} g_leave = { .in = MPI_REQUEST_NULL };

static void leave_repost(void) {
    if (MPI_Irecv(g_leave.got, VOLT__LEAVE_MSG, MPI_CHAR, MPI_ANY_SOURCE, VOLT__LEAVE_TAG, MPI_COMM_WORLD, &g_leave.in) != MPI_SUCCESS)
        g_leave.in = MPI_REQUEST_NULL;
}

static void leave_open(void) {
    int world = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (world <= 1) return;
    g_leave.left = calloc((size_t)world, 1);
    g_leave.words = calloc((size_t)world, sizeof *g_leave.words);
    if (!g_leave.left || !g_leave.words) {   /* no notices: the waits keep their timeout */
        free(g_leave.left);
        free(g_leave.words);
        g_leave.left = NULL;
        g_leave.words = NULL;
        return;
    }
    g_leave.world = world;
    g_leave.rank = rank;
    leave_repost();
    g_leave.on = g_leave.in != MPI_REQUEST_NULL;
}

static void leave_poll(void) {
    while (g_leave.on && g_leave.in != MPI_REQUEST_NULL) {
        int flag = 0;
        MPI_Status stt;
        if (MPI_Test(&g_leave.in, &flag, &stt) != MPI_SUCCESS || !flag) return;
        const int r = stt.MPI_SOURCE;
        g_leave.got[VOLT__LEAVE_MSG - 1] = 0;
        if (r >= 0 && r < g_leave.world && !g_leave.left[r]) {
            g_leave.left[r] = 1;
            memcpy(g_leave.words[r], g_leave.got, VOLT__LEAVE_MSG);
        }
        leave_repost();
    }
}

/* The first member of the group whose world ranks are given (n of them; NULL: every rank of
 * MPI_COMM_WORLD, n its size) that has left, else -1; *msg (msglen) its words. Polls for
 * notices. */
static int mpi_left(const int *world_ranks, int n, char *msg, size_t msglen) {
    leave_poll();
    if (!g_leave.on) return -1;
    for (int i = 0; i < n; i++) {
        const int w = world_ranks ? world_ranks[i] : i;
        if (w < 0 || w >= g_leave.world || w == g_leave.rank || !g_leave.left[w]) continue;
        if (msg && msglen) snprintf(msg, msglen, "%s", g_leave.words[w]);
        return i;
    }
    return -1;
}

int volt__comm_left_expired(const volt_comm *c, const int *world_of, double *since, char *msg, size_t msglen) {
    const int who = mpi_left(world_of, c->world, msg, msglen);
    if (who < 0) return -1;
    const double now = volt__now();
    if (*since < 0) *since = now;
    return now - *since > (VOLT__LEAVE_GRACE_S < c->timeout_s ? VOLT__LEAVE_GRACE_S : c->timeout_s) ? who : -1;
}

/* At exit, before MPI_Finalize: every other rank is told (each send is small, so MPI's eager
 * protocol completes it without the receiver; given at most 1 s), then this rank's own receive
 * is cancelled. */
static void leave_announce(void) {
    if (!g_leave.on) return;
    static char out[VOLT__LEAVE_MSG];   /* read by sends that may outlive this call (MPI_Request_free) */
    snprintf(out, sizeof out, "%s", volt__comm_failure());
    MPI_Request *rq = malloc((size_t)g_leave.world * sizeof *rq);
    if (rq) {
        for (int r = 0; r < g_leave.world; r++) {
            rq[r] = MPI_REQUEST_NULL;
            if (r != g_leave.rank &&
                MPI_Isend(out, (int)strlen(out) + 1, MPI_CHAR, r, VOLT__LEAVE_TAG, MPI_COMM_WORLD, &rq[r]) != MPI_SUCCESS)
                rq[r] = MPI_REQUEST_NULL;
        }
        const double t0 = volt__now();
        int all = 0;
        while (MPI_Testall(g_leave.world, rq, &all, MPI_STATUSES_IGNORE) == MPI_SUCCESS && !all && volt__now() - t0 < 1.0) {
            struct timespec ts = { 0, 100000 };
            nanosleep(&ts, NULL);
        }
        for (int r = 0; r < g_leave.world && !all; r++)
            if (rq[r] != MPI_REQUEST_NULL) MPI_Request_free(&rq[r]);
        free(rq);
    }
    if (g_leave.in != MPI_REQUEST_NULL) {
        MPI_Cancel(&g_leave.in);
        MPI_Wait(&g_leave.in, MPI_STATUS_IGNORE);
    }
    g_leave.on = false;
}

#define cerr(c, st, ...) VOLT__OBJ_ERRF((mpi_impl *)(c)->impl, st, __VA_ARGS__)

/* Translate an MPI return code at the backend boundary. */
static volt_status mpi_fail(volt_comm *c, int rc, const char *file, int line, const char *call, const char *what) {
    char s[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
    return cerr(c, VOLT_ERR_COMM, "rank %d: %s:%d: %s%s%s%s failed: %s", c->rank, file, line, call,
                what && *what ? " (" : "", what && *what ? what : "", what && *what ? ")" : "", s);
}
#define MPI_TRY(c, call, what) do { int rc_ = (call); \
    if (rc_ != MPI_SUCCESS) return mpi_fail((c), rc_, __FILE__, __LINE__, #call, (what)); } while (0)

static MPI_Datatype mpi_type(volt_comm_dtype dt) {
    switch (dt) {
    case VOLT_COMM_F32: return MPI_FLOAT;
    case VOLT_COMM_F64: return MPI_DOUBLE;
    case VOLT_COMM_BYTE: return MPI_BYTE;
    case VOLT_COMM_BF16: case VOLT_COMM_F16: return MPI_UINT16_T;
    }
    return MPI_DATATYPE_NULL;
}

/* ---- 16-bit sums: f32 add of each pair, one rounding ---------------------------------- */
static float bf16_f(uint16_t h) { return volt__bits_f(volt__bf2f(h)); }
static float f16_f(uint16_t h) { return volt__bits_f(volt__h2f(h)); }
static void sum_bf16_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = volt__f2bf(volt__f_bits(bf16_f(a[i]) + bf16_f(b[i])));
}
static void sum_f16_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = volt__f2h(volt__f_bits(f16_f(a[i]) + f16_f(b[i])));
}

static MPI_Op sum_op(const mpi_impl *im, volt_comm_dtype dt) {
    return dt == VOLT_COMM_BF16 ? im->sum_bf16 : dt == VOLT_COMM_F16 ? im->sum_f16 : MPI_SUM;
}

/* The first failure sticks: every later call fails at once with its status and message
 * (a caller that ignored the first error still reports the cause). */
static void mark_broken(mpi_impl *im, volt_status st) {
    if (im->broken) return;
    im->broken = true;
    im->broken_status = st;
    snprintf(im->broken_msg, sizeof im->broken_msg, "%.*s", (int)sizeof im->broken_msg - 1, im->errmsg);
    volt__comm_note_broken(im->broken_msg);
}

/* ---- requests ------------------------------------------------------------------------ */
static volt_status req_start(volt_comm *c, const char *op, const char *what, size_t count, volt_comm_dtype dt,
                             mpi_req **out) {
    mpi_impl *im = c->impl;
    *out = NULL;
    if (im->broken)
        return cerr(c, im->broken_status, "rank %d: %s (%s): not started, the communicator is unusable after: %s",
                    c->rank, op, what ? what : "-", im->broken_msg);
    if (count > (size_t)INT_MAX)
        return cerr(c, VOLT_ERR_UNSUPPORTED, "rank %d: %s (%s): %zu elements exceed MPI's int count",
                    c->rank, op, what ? what : "-", count);
    if (mpi_type(dt) == MPI_DATATYPE_NULL) return cerr(c, VOLT_ERR_INVALID_ARG, "rank %d: %s: bad dtype %d", c->rank, op, (int)dt);
    mpi_req *q = im->free_list;
    if (q) im->free_list = q->next;
    else {
        if (!(q = calloc(1, sizeof *q))) return VOLT_ERR_NOMEM;
        q->all_next = im->all;
        im->all = q;
    }
    mpi_req *keep = q->all_next;
    unsigned char *bounce = q->bounce;
    const size_t bounce_cap = q->bounce_cap;
    memset(q, 0, sizeof *q);
    q->all_next = keep;
    q->bounce = bounce;
    q->bounce_cap = bounce_cap;
    q->r = MPI_REQUEST_NULL;
    q->op = op;
    q->seq = ++im->seq;
    snprintf(q->what, sizeof q->what, "%s", what && *what ? what : "-");
    *out = q;
    return VOLT_OK;
}

static void req_release(volt_comm *c, mpi_req *q) {
    mpi_impl *im = c->impl;
    q->next = im->free_list;
    im->free_list = q;
}

/* A start failed after req_start: give the handle back and keep the error. */
static volt_status start_failed(volt_comm *c, mpi_req *q, volt_status st) {
    req_release(c, q);
    return st;
}

static volt_status launched(volt_comm *c, mpi_req *q, volt_comm_req **req) {
    ((mpi_impl *)c->impl)->in_flight++;
    *req = (volt_comm_req *)q;
    return VOLT_OK;
}

/* The small collectives (all_reduce, broadcast of at most BOUNCE_MAX bytes: votes, flags,
 * messages, often on the caller's stack) run in the request's own heap buffer, copied back to
 * dst by the wait. A collective that timed out is abandoned, not cancelled, and MPI may still
 * write its result later (at finalize); it then lands in memory the comm owns and never frees
 * once broken (m_destroy), not in a stack frame or a freed block of the caller. The large
 * buffers (gradients, parameters) are the strategy's, allocated for the comm's life. Returns
 * where the collective should run: the bounce buffer holding src's n bytes, or dst itself
 * (too large, or no memory for the buffer; NULL for an enveloped one: it must not run bare).
 *
 * Control collectives (f64 all-reduces, byte broadcasts up to BOUNCE_MAX) carry the envelope
 * of comm.h in front of their data, in the bounce buffer. A mismatched message larger than
 * what a rank posted is MPI_ERR_TRUNCATE, reported the same way (m_wait). Every bounce buffer
 * has at least BOUNCE_MIN bytes, so a small mismatched message that MPI copies whole lands in
 * memory the request owns. */
enum { BOUNCE_MAX = VOLT__ENV_MAX, BOUNCE_MIN = 8 << 10, HDR_BYTES = VOLT__ENV_BYTES };

static void *bounce_in(mpi_req *q, const void *src, void *dst, size_t n, int hdr) {
    const size_t h = hdr ? HDR_BYTES : 0;
    if (n == 0 || n > BOUNCE_MAX) return dst;
    if (q->bounce_cap < n + h || q->bounce_cap < BOUNCE_MIN) {
        const size_t cap = n + h > BOUNCE_MIN ? n + h : BOUNCE_MIN;
        unsigned char *b = realloc(q->bounce, cap);
        if (!b) return hdr ? NULL : dst;
        q->bounce = b;
        q->bounce_cap = cap;
    }
    memcpy(q->bounce + h, src, n);
    q->bounce_dst = dst;
    q->bounce_n = n;
    q->env.kind = hdr;
    return q->bounce + h;
}

/* After the wait: the envelope as every rank issued this collective, else VOLT_ERR_COMM saying
 * what met what. */
static volt_status hdr_check(volt_comm *c, mpi_req *q) {
    char msg[512];
    if (volt__comm_env_check(&q->env, c, q->bounce, q->op, q->seq, q->what, q->bounce_n, msg, sizeof msg) == VOLT_OK)
        return VOLT_OK;
    return cerr(c, VOLT_ERR_COMM, "%s", msg);
}

#define START_MPI(c, q, call) do { int rc_ = (call); \
    if (rc_ != MPI_SUCCESS) return start_failed((c), (q), mpi_fail((c), rc_, __FILE__, __LINE__, #call, (q)->what)); } while (0)

/* ---- collectives ------------------------------------------------------------------------ */
static volt_status m_all_reduce(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                                volt_comm_op op, const char *what, volt_comm_req **req) {
    *req = NULL;
    if (dt == VOLT_COMM_BYTE) return cerr(c, VOLT_ERR_INVALID_ARG, "rank %d: all_reduce: byte buffers cannot be reduced", c->rank);
    mpi_req *q;
    VOLT_TRY(req_start(c, "all_reduce", what, count, dt, &q));
    mpi_impl *im = c->impl;
    const int hdr = volt__comm_env_kind(false, dt, count);
    void *at = bounce_in(q, send, recv, count * volt__comm_dtype_size(dt), hdr);
    if (!at) {   /* this rank counted a collective the others run: out of step from here on */
        const volt_status st = cerr(c, VOLT_ERR_NOMEM, "rank %d: all_reduce (%s): out of memory", c->rank, q->what);
        mark_broken(im, st);
        return start_failed(c, q, st);
    }
    const size_t extra = hdr ? HDR_BYTES / sizeof(double) : 0;
    if (hdr) { volt__comm_env_set(&q->env, hdr, c, q->seq, q->what, 0, count * sizeof(double), q->bounce); at = q->bounce; }
    START_MPI(c, q, MPI_Iallreduce(send == recv || at != recv ? MPI_IN_PLACE : send, at, (int)(count + extra), mpi_type(dt),
                                   sum_op(im, dt), im->comm, &q->r));
    if (op == VOLT_COMM_AVG) { q->post = POST_AVG; q->buf = recv; q->count = count; q->dt = dt; }
    return launched(c, q, req);
}

static volt_status m_reduce_scatter(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                                    volt_comm_op op, const char *what, volt_comm_req **req) {
    *req = NULL;
    if (dt == VOLT_COMM_BYTE) return cerr(c, VOLT_ERR_INVALID_ARG, "rank %d: reduce_scatter: byte buffers cannot be reduced", c->rank);
    mpi_req *q;
    VOLT_TRY(req_start(c, "reduce_scatter", what, count, dt, &q));
    mpi_impl *im = c->impl;
    const size_t esz = volt__comm_dtype_size(dt);
    const bool in_place = (const char *)recv == (const char *)send + (size_t)c->rank * count * esz;
    if (in_place) {
        /* MPI_IN_PLACE takes the input from recvbuf (world*count) and leaves this rank's
         * chunk in its first count elements: move it to the chunk's own place afterwards. */
        START_MPI(c, q, MPI_Ireduce_scatter_block(MPI_IN_PLACE, (void *)send, (int)count, mpi_type(dt), sum_op(im, dt),
                                                  im->comm, &q->r));
        if (c->rank != 0) { q->post = POST_MOVE; q->src = send; }
    } else {
        START_MPI(c, q, MPI_Ireduce_scatter_block(send, recv, (int)count, mpi_type(dt), sum_op(im, dt), im->comm, &q->r));
    }
    q->buf = recv;
    q->count = count;
    q->dt = dt;
    if (op == VOLT_COMM_AVG) q->post = q->post == POST_MOVE ? POST_MOVE_AVG : POST_AVG;
    return launched(c, q, req);
}

static volt_status m_all_gather(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                                const char *what, volt_comm_req **req) {
    *req = NULL;
    mpi_req *q;
    VOLT_TRY(req_start(c, "all_gather", what, count, dt, &q));
    mpi_impl *im = c->impl;
    const size_t esz = volt__comm_dtype_size(dt);
    if ((const char *)send == (const char *)recv + (size_t)c->rank * count * esz)
        START_MPI(c, q, MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, (int)count, mpi_type(dt), im->comm, &q->r));
    else
        START_MPI(c, q, MPI_Iallgather(send, (int)count, mpi_type(dt), recv, (int)count, mpi_type(dt), im->comm, &q->r));
    return launched(c, q, req);
}

static volt_status m_broadcast(volt_comm *c, void *buf, size_t count, volt_comm_dtype dt, int root,
                               const char *what, volt_comm_req **req) {
    *req = NULL;
    if (root < 0 || root >= c->world) return cerr(c, VOLT_ERR_INVALID_ARG, "rank %d: broadcast: root %d not in [0, %d)", c->rank, root, c->world);
    mpi_req *q;
    VOLT_TRY(req_start(c, "broadcast", what, count, dt, &q));
    const int hdr = volt__comm_env_kind(true, dt, count);
    void *at = bounce_in(q, buf, buf, count * volt__comm_dtype_size(dt), hdr);
    if (!at) {   /* this rank counted a collective the others run: out of step from here on */
        const volt_status st = cerr(c, VOLT_ERR_NOMEM, "rank %d: broadcast (%s): out of memory", c->rank, q->what);
        mark_broken(c->impl, st);
        return start_failed(c, q, st);
    }
    const size_t extra = hdr ? HDR_BYTES : 0;
    if (hdr) { volt__comm_env_set(&q->env, hdr, c, q->seq, q->what, root, count, q->bounce); at = q->bounce; }
    START_MPI(c, q, MPI_Ibcast(at, (int)(count + extra), mpi_type(dt), root, ((mpi_impl *)c->impl)->comm, &q->r));
    return launched(c, q, req);
}

static volt_status m_barrier(volt_comm *c, const char *what, volt_comm_req **req) {
    *req = NULL;
    mpi_req *q;
    VOLT_TRY(req_start(c, "barrier", what, 0, VOLT_COMM_BYTE, &q));
    START_MPI(c, q, MPI_Ibarrier(((mpi_impl *)c->impl)->comm, &q->r));
    return launched(c, q, req);
}

/* ---- completion -------------------------------------------------------------------------- */
static void post_process(volt_comm *c, mpi_req *q) {
    if (q->bounce_dst) memcpy(q->bounce_dst, q->bounce + (q->env.kind ? HDR_BYTES : 0), q->bounce_n);   /* before AVG, which works on the caller's */
    const size_t esz = volt__comm_dtype_size(q->dt);
    if (q->post == POST_MOVE || q->post == POST_MOVE_AVG) memmove(q->buf, q->src, q->count * esz);
    if (q->post == POST_AVG || q->post == POST_MOVE_AVG) {
        if (q->dt == VOLT_COMM_F32) {
            float *x = q->buf;
            const float w = (float)c->world;
            for (size_t i = 0; i < q->count; i++) x[i] = x[i] / w;
        } else if (q->dt == VOLT_COMM_BF16) {
            uint16_t *x = q->buf;
            const float w = (float)c->world;
            for (size_t i = 0; i < q->count; i++) x[i] = volt__f2bf(volt__f_bits(bf16_f(x[i]) / w));
        } else if (q->dt == VOLT_COMM_F16) {
            uint16_t *x = q->buf;
            const float w = (float)c->world;
            for (size_t i = 0; i < q->count; i++) x[i] = volt__f2h(volt__f_bits(f16_f(x[i]) / w));
        } else {
            double *x = q->buf;
            const double w = (double)c->world;
            for (size_t i = 0; i < q->count; i++) x[i] = x[i] / w;
        }
    }
}

static volt_status m_test(volt_comm *c, volt_comm_req *req, bool *done) {
    mpi_req *q = (mpi_req *)req;
    *done = false;
    if (!q) return VOLT_ERR_INVALID_ARG;
    if (q->done) { *done = true; return VOLT_OK; }
    int flag = 0;
    MPI_TRY(c, MPI_Test(&q->r, &flag, MPI_STATUS_IGNORE), q->what);
    if (flag) q->done = *done = true;
    return VOLT_OK;
}

static volt_status m_wait(volt_comm *c, volt_comm_req *req) {
    mpi_impl *im = c->impl;
    mpi_req *q = (mpi_req *)req;
    if (!q) return cerr(c, VOLT_ERR_INVALID_ARG, "rank %d: wait on a NULL request", c->rank);
    im->in_flight--;
    if (im->broken && !q->done) {   /* out of step with the other ranks: do not wait again */
        req_release(c, q);
        return cerr(c, im->broken_status, "rank %d: %s #%llu (%s): abandoned, the communicator is unusable after: %s",
                    c->rank, q->op, (unsigned long long)q->seq, q->what, im->broken_msg);
    }
    const double t0 = volt__now();
    long spins = 0, sleep_ns = 1000, polls = 0;
    double left_at = -1;   /* when a member was first seen gone during this wait */
    while (!q->done) {
        int flag = 0, rc = MPI_Test(&q->r, &flag, MPI_STATUS_IGNORE), cls = 0;
        if (rc != MPI_SUCCESS) {
            volt_status st = MPI_Error_class(rc, &cls) == MPI_SUCCESS && cls == MPI_ERR_TRUNCATE
                ? cerr(c, VOLT_ERR_COMM, "rank %d: %s #%llu (%s): a larger message than this rank's arrived (MPI_ERR_TRUNCATE): "
                       "the ranks called different collectives (one rank is in another call than the others: every rank "
                       "must make the same calls, e.g. save_checkpoint under a sharding strategy)", c->rank, q->op,
                       (unsigned long long)q->seq, q->what)
                : mpi_fail(c, rc, __FILE__, __LINE__, q->op, q->what);
            mark_broken(im, st);
            req_release(c, q);
            return st;
        }
        if (flag) break;
        char words[VOLT__LEAVE_MSG];
        int who;
        if (g_leave.on && (polls++ & 63) == 0 &&   /* a member left the job: this collective may never complete */
            (who = volt__comm_left_expired(c, im->world_of, &left_at, words, sizeof words)) >= 0) {
            cerr(c, VOLT_ERR_COMM, "rank %d: %s #%llu (%s): rank %d left the job%s%s%s, and this collective cannot "
                 "complete", c->rank, q->op, (unsigned long long)q->seq, q->what, who,
                 words[0] ? " after an error (" : "", words, words[0] ? ")" : "");
            mark_broken(im, VOLT_ERR_COMM);
            return VOLT_ERR_COMM;
        }
        const double el = volt__now() - t0;
        if (el > c->timeout_s) {
            /* The collective cannot be cancelled (MPI forbids it for collectives): abandon the
             * handle; the comm is now out of step with the other ranks. */
            cerr(c, VOLT_ERR_TIMEOUT, "rank %d: %s #%llu (%s) timed out after %g s (a rank died, hangs, or issued "
                 "its collectives in another order; VOLT_COMM_TIMEOUT sets the limit)",
                 c->rank, q->op, (unsigned long long)q->seq, q->what, c->timeout_s);
            mark_broken(im, VOLT_ERR_TIMEOUT);
            return VOLT_ERR_TIMEOUT;
        }
        /* spin briefly (low latency), then back off so oversubscribed ranks get the CPU */
        if (++spins > 256) {
            struct timespec ts = { 0, sleep_ns };
            nanosleep(&ts, NULL);
            if (sleep_ns < 200000) sleep_ns *= 2;
        }
    }
    volt_status hs = hdr_check(c, q);
    if (hs < 0) {   /* out of step: no later collective may match either */
        mark_broken(im, hs);
        req_release(c, q);
        return hs;
    }
    post_process(c, q);
    req_release(c, q);
    return VOLT_OK;
}

static const char *m_errmsg(const volt_comm *c) { return ((const mpi_impl *)c->impl)->errmsg; }

static void m_destroy(volt_comm *c) {
    mpi_impl *im = c->impl;
    int fin = 0;
    MPI_Finalized(&fin);
    /* a broken comm may still have collectives pending: leave it to MPI_Finalize */
    if (im->comm_valid && !im->broken && !im->in_flight && !fin) MPI_Comm_free(&im->comm);
    if (!fin && !im->broken) {
        if (im->sum_bf16 != MPI_OP_NULL) MPI_Op_free(&im->sum_bf16);
        if (im->sum_f16 != MPI_OP_NULL) MPI_Op_free(&im->sum_f16);
    }
    /* broken: a collective may still be pending inside MPI, writing into a request's bounce
     * buffer at finalize; the requests (and, with them, the impl) stay allocated */
    if (im->broken) {
        im->broken_next = g_broken_impls;
        g_broken_impls = im;
        free(c);
        return;
    }
    for (mpi_req *q = im->all, *n; q; q = n) {
        n = q->all_next;
        free(q->bounce);
        free(q);
    }
    free(im->world_of);
    free(im);
    free(c);
}

static const volt_comm_ops mpi_ops = {
    .version = VOLT_COMM_OPS_VERSION, .name = "mpi",
    .all_reduce = m_all_reduce, .reduce_scatter = m_reduce_scatter, .all_gather = m_all_gather,
    .broadcast = m_broadcast, .barrier = m_barrier, .wait = m_wait, .test = m_test,
    .errmsg = m_errmsg, .destroy = m_destroy, .flags = 0,
};

/* ---- creation ------------------------------------------------------------------------------ */
static void *finalize_watchdog(void *arg) {
    (void)arg;
    struct timespec ts = { FINALIZE_GRACE_S, 0 };
    while (nanosleep(&ts, &ts) != 0) {}
    static const char msg[] = "volt: MPI_Finalize did not return after a communication failure (a rank hangs?): "
                              "ending this process without it\n";
    if (write(2, msg, sizeof msg - 1) < 0) {}
    _exit(1);
    return NULL;
}

static void finalize_at_exit(void) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) return;
    leave_announce();
    if (volt__comm_broken()) {   /* the finalize may never return: bounded by the watchdog */
        fflush(NULL);
        pthread_t th;
        if (pthread_create(&th, NULL, finalize_watchdog, NULL) != 0) _exit(1);
        pthread_detach(th);
    }
    MPI_Finalize();
}

static volt_status init_mpi(char *err, size_t errlen) {
    int init = 0, fin = 0;
    MPI_Finalized(&fin);
    if (fin) {
        snprintf(err, errlen, "MPI was already finalized in this process");
        return VOLT_ERR_STATE;
    }
    MPI_Initialized(&init);
    if (init) return VOLT_OK;
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, s, &len);
        snprintf(err, errlen, "%s:%d: MPI_Init_thread failed: %s", __FILE__, __LINE__, s);
        return VOLT_ERR_COMM;
    }
    g_we_initialised = true;
    /* the world communicator is ours too: report its errors instead of aborting */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (atexit(finalize_at_exit) != 0) {
        snprintf(err, errlen, "cannot register MPI_Finalize at exit");
        return VOLT_ERR_STATE;
    }
    leave_open();
    return VOLT_OK;
}

/* The communicator a comm is built on: *mpi_comm (volt_comm_config.mpi_comm), else
 * MPI_COMM_WORLD; MPI_COMM_NULL (a rank left out of a split) is refused. MPI is initialised. */
static volt_status base_comm(const void *mpi_comm, MPI_Comm *out, const char **name, char *err, size_t errlen) {
    VOLT_TRY(init_mpi(err, errlen));
    *out = mpi_comm ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD;
    *name = mpi_comm ? "the given MPI communicator" : "MPI_COMM_WORLD";
    if (*out == MPI_COMM_NULL) {
        snprintf(err, errlen, "volt_comm_config.mpi_comm is MPI_COMM_NULL (a rank outside every group of the split?)");
        return VOLT_ERR_INVALID_ARG;
    }
    return VOLT_OK;
}

volt_status volt__comm_mpi_members(const void *mpi_comm, int n, int **out) {
    *out = NULL;
    if (!mpi_comm || !g_leave.on || *(const MPI_Comm *)mpi_comm == MPI_COMM_WORLD) return VOLT_OK;
    int *mine = malloc((size_t)n * sizeof *mine), *w = malloc((size_t)n * sizeof *w);
    if (!mine || !w) { free(mine); free(w); return VOLT_ERR_NOMEM; }
    for (int i = 0; i < n; i++) mine[i] = i;
    MPI_Group g = MPI_GROUP_NULL, wg = MPI_GROUP_NULL;
    int rc = MPI_Comm_group(*(const MPI_Comm *)mpi_comm, &g);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_group(MPI_COMM_WORLD, &wg);
    if (rc == MPI_SUCCESS) rc = MPI_Group_translate_ranks(g, n, mine, wg, w);
    if (g != MPI_GROUP_NULL) MPI_Group_free(&g);
    if (wg != MPI_GROUP_NULL) MPI_Group_free(&wg);
    free(mine);
    if (rc != MPI_SUCCESS) { free(w); return VOLT_ERR_COMM; }
    *out = w;
    return VOLT_OK;
}

volt_status volt__comm_mpi_create(const volt_comm_config *cfg, volt_comm **out, char *err, size_t errlen) {
    *out = NULL;
    VOLT_TRY(volt__comm_config_check(cfg, err, errlen));
    VOLT_TRY(volt__comm_refuse_if_broken(err, errlen));
    MPI_Comm base = MPI_COMM_NULL;
    const char *base_name = NULL;
    VOLT_TRY(base_comm(cfg->version >= 3 ? cfg->mpi_comm : NULL, &base, &base_name, err, errlen));
    volt_comm *c = calloc(1, sizeof *c);
    mpi_impl *im = calloc(1, sizeof *im);
    if (!c || !im) { free(c); free(im); return VOLT_ERR_NOMEM; }
    c->ops = &mpi_ops;
    c->impl = im;
    c->timeout_s = cfg->timeout_s;
    im->sum_bf16 = im->sum_f16 = MPI_OP_NULL;
    int rank = 0, world = 1;
    MPI_Comm_rank(base, &rank);
    MPI_Comm_size(base, &world);
    c->rank = rank;
    c->world = world;
    /* a private communicator (our collectives never match the application's), created
     * non-blocking so a rank that never gets here gives a timeout, not a hang */
    mpi_req *q = NULL;
    volt_status st = req_start(c, "comm_dup", base_name, 0, VOLT_COMM_BYTE, &q);
    int rc = st == VOLT_OK ? MPI_Comm_idup(base, &im->comm, &q->r) : MPI_SUCCESS;
    if (st == VOLT_OK && rc != MPI_SUCCESS) {
        st = mpi_fail(c, rc, __FILE__, __LINE__, "MPI_Comm_idup", NULL);
        req_release(c, q);
    } else if (st == VOLT_OK) {
        im->in_flight++;
        st = m_wait(c, (volt_comm_req *)q);
    }
    if (st == VOLT_OK && (st = volt__comm_mpi_members(&base, c->world, &im->world_of)) < 0)
        st = cerr(c, st, "rank %d: the comm's members in MPI_COMM_WORLD (MPI_Group_translate_ranks): %s", c->rank,
                  volt_status_str(st));
    if (st == VOLT_OK) {
        im->comm_valid = true;
        im->seq = 0;   /* number the caller's collectives from 1 */
        rc = MPI_Comm_set_errhandler(im->comm, MPI_ERRORS_RETURN);
        if (rc != MPI_SUCCESS) st = mpi_fail(c, rc, __FILE__, __LINE__, "MPI_Comm_set_errhandler", NULL);
    }
    if (st == VOLT_OK && (rc = MPI_Op_create(sum_bf16_fn, 1, &im->sum_bf16)) != MPI_SUCCESS)
        st = mpi_fail(c, rc, __FILE__, __LINE__, "MPI_Op_create", "bf16 sum");
    if (st == VOLT_OK && (rc = MPI_Op_create(sum_f16_fn, 1, &im->sum_f16)) != MPI_SUCCESS)
        st = mpi_fail(c, rc, __FILE__, __LINE__, "MPI_Op_create", "f16 sum");
    if (st < 0) {
        snprintf(err, errlen, "%s", im->errmsg);
        m_destroy(c);
        return st;
    }
    *out = c;
    return VOLT_OK;
}

/* ---- bootstrap helpers for the NCCL backend (comm.h) ------------------------------------- */
volt_status volt__comm_mpi_world(const void *mpi_comm, int *rank, int *world, char *err, size_t errlen) {
    MPI_Comm base = MPI_COMM_NULL;
    const char *name = NULL;
    VOLT_TRY(base_comm(mpi_comm, &base, &name, err, errlen));
    MPI_Comm_rank(base, rank);
    MPI_Comm_size(base, world);
    return VOLT_OK;
}

volt_status volt__comm_mpi_bootstrap_bcast(const void *mpi_comm, void *buf, size_t n, double timeout_s, char *err,
                                          size_t errlen) {
    MPI_Comm base = MPI_COMM_NULL;
    const char *name = NULL;
    VOLT_TRY(base_comm(mpi_comm, &base, &name, err, errlen));
    int rank = 0;
    MPI_Comm_rank(base, &rank);
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Ibcast(buf, (int)n, MPI_BYTE, 0, base, &r);
    const double t0 = volt__now();
    while (rc == MPI_SUCCESS) {
        int flag = 0;
        rc = MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag) break;
        if (volt__now() - t0 > timeout_s) {
            snprintf(err, errlen, "rank %d: broadcast #0 (NCCL unique id, over %s) timed out after %g s (a rank died, "
                     "hangs, or never created its comm; VOLT_COMM_TIMEOUT sets the limit)", rank, name, timeout_s);
            volt__comm_note_broken(err);
            return VOLT_ERR_TIMEOUT;
        }
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
    }
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, s, &len);
        snprintf(err, errlen, "rank %d: %s:%d: MPI_Ibcast (NCCL unique id) failed: %s", rank, __FILE__, __LINE__, s);
        return VOLT_ERR_COMM;
    }
    return VOLT_OK;
}
