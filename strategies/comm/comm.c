/* Backend-independent comm helpers: the config check, blocking forms (start + wait), the local rank. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "strategies/comm/comm.h"

void volt__comm_config_init(volt_comm_config *cfg) {
    *cfg = (volt_comm_config){ .version = VOLT_COMM_CONFIG_VERSION, .timeout_s = 300, .dev = NULL, .backend = NULL,
                               .mpi_comm = NULL };
}

volt_status volt__comm_config_check(const volt_comm_config *cfg, char *err, size_t errlen) {
    if (!cfg) {
        snprintf(err, errlen, "volt_comm_config: NULL (no config)");
        return VOLT_ERR_VERSION;
    }
    if (!VOLT_VERSION_OK(cfg->version, VOLT_COMM_CONFIG_VERSION)) {
        snprintf(err, errlen, "volt_comm_config: version %u, this library knows 1..%u", cfg->version, VOLT_COMM_CONFIG_VERSION);
        return VOLT_ERR_VERSION;
    }
    if (!(cfg->timeout_s > 0)) {
        snprintf(err, errlen, "comm timeout must be > 0 s, got %g", cfg->timeout_s);
        return VOLT_ERR_INVALID_ARG;
    }
    return VOLT_OK;
}

/* ---- graph owners (comm.h) ---- */
typedef struct { const volt_comm *comm; void (*release)(void *); void *ctx; } graph_owner;
static graph_owner *g_owners;
static int g_n_owners, g_cap_owners;
static pthread_mutex_t g_owners_mu = PTHREAD_MUTEX_INITIALIZER;

bool volt__comm_graph_owner_add(const volt_comm *c, void (*release)(void *ctx), void *ctx) {
    bool ok = true;
    pthread_mutex_lock(&g_owners_mu);
    if (g_n_owners == g_cap_owners) {
        const int cap = g_cap_owners ? 2 * g_cap_owners : 8;
        graph_owner *o = realloc(g_owners, sizeof *o * (size_t)cap);
        if (o) { g_owners = o; g_cap_owners = cap; }
        else ok = false;
    }
    if (ok) g_owners[g_n_owners++] = (graph_owner){ c, release, ctx };
    pthread_mutex_unlock(&g_owners_mu);
    return ok;
}

void volt__comm_graph_owner_remove(void *ctx) {
    if (!ctx) return;
    pthread_mutex_lock(&g_owners_mu);
    for (int i = 0; i < g_n_owners;)
        if (g_owners[i].ctx == ctx) g_owners[i] = g_owners[--g_n_owners];
        else i++;
    if (!g_n_owners) {   /* nothing left: no allocation outlives the last owner */
        free(g_owners);
        g_owners = NULL;
        g_cap_owners = 0;
    }
    pthread_mutex_unlock(&g_owners_mu);
}

/* Under the lock: a release (trainer/compile.c's, freeing its graphs) never calls back into the
 * registry, and an owner's remove, which runs before it frees anything, waits for it. */
void volt__comm_release_graphs(const volt_comm *c) {
    pthread_mutex_lock(&g_owners_mu);
    for (int i = 0; i < g_n_owners; i++)
        if (g_owners[i].comm == c) g_owners[i].release(g_owners[i].ctx);
    pthread_mutex_unlock(&g_owners_mu);
}

static int env_int(const char *const *names, int dflt) {
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        char *end = NULL;
        long x = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && end && !*end && x >= 0 && x < 1 << 20) return (int)x;
    }
    return dflt;
}

int volt__comm_local_rank(void) {
    static const char *const n[] = { "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "LOCAL_RANK", NULL };
    static const char *const w[] = { "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL };
    return env_int(n, env_int(w, 0));
}

int volt__comm_launched_size(void) {
    static const char *const w[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL };
    /* srun --mpi=pmix sets neither: a PMIx task of a Slurm step has the step's task count (a
     * batch script, not a step's task, has no PMIX_RANK) */
    static const char *const slurm[] = { "SLURM_STEP_NUM_TASKS", NULL };
    const int s = env_int(w, getenv("PMIX_RANK") ? env_int(slurm, 1) : 1);
    return s > 0 ? s : 1;
}

int volt__comm_launched_rank(void) {
    static const char *const w[] = { "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL };
    return env_int(w, 0);
}

int volt__comm_local_size(void) {
    static const char *const n[] = { "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "MPI_LOCALNRANKS", "LOCAL_WORLD_SIZE", NULL };
    static const char *const w[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL };
    const int s = env_int(n, env_int(w, 1));
    return s > 0 ? s : 1;
}

void volt__comm_destroy(volt_comm *c) {
    if (c) c->ops->destroy(c);
}

size_t volt__comm_dtype_size(volt_comm_dtype dt) {
    switch (dt) {
    case VOLT_COMM_F32: return 4;
    case VOLT_COMM_F64: return 8;
    case VOLT_COMM_BYTE: return 1;
    case VOLT_COMM_BF16: case VOLT_COMM_F16: return 2;
    }
    return 0;
}

const char *volt__comm_errmsg(const volt_comm *c) { return c ? c->ops->errmsg(c) : ""; }

#define START_WAIT(call) do { \
    volt_comm_req *r_ = NULL; \
    volt_status st_ = (call); \
    if (st_ < 0) return st_; \
    return c->ops->wait(c, r_); } while (0)

volt_status volt__comm_all_reduce(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                                 volt_comm_op op, const char *what) {
    START_WAIT(c->ops->all_reduce(c, send, recv, count, dt, op, what, &r_));
}

volt_status volt__comm_reduce_scatter(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                                     volt_comm_op op, const char *what) {
    START_WAIT(c->ops->reduce_scatter(c, send, recv, count, dt, op, what, &r_));
}

volt_status volt__comm_all_gather(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                                 const char *what) {
    START_WAIT(c->ops->all_gather(c, send, recv, count, dt, what, &r_));
}

volt_status volt__comm_broadcast(volt_comm *c, void *buf, size_t count, volt_comm_dtype dt, int root, const char *what) {
    START_WAIT(c->ops->broadcast(c, buf, count, dt, root, what, &r_));
}

volt_status volt__comm_barrier(volt_comm *c, const char *what) {
    START_WAIT(c->ops->barrier(c, what, &r_));
}

/* ---- the envelope of control collectives (comm.h) ---- */
#define ENV_MAGIC 0x766f6c74u   /* "volt" */

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return x;
}

int volt__comm_env_kind(bool broadcast, volt_comm_dtype dt, size_t count) {
    if (broadcast) return dt == VOLT_COMM_BYTE && count && count <= VOLT__ENV_MAX ? VOLT__ENV_ROOT : VOLT__ENV_NONE;
    return dt == VOLT_COMM_F64 && count && count <= VOLT__ENV_MAX / sizeof(double) ? VOLT__ENV_SUM : VOLT__ENV_NONE;
}

void volt__comm_env_set(volt__comm_env *e, int kind, const volt_comm *c, uint64_t seq, const char *what, int root, size_t n,
                        void *hdr) {
    e->kind = kind;
    if (kind == VOLT__ENV_SUM) {
        uint64_t k = mix64(0x51ull << 56 ^ (uint64_t)n << 20 ^ seq);
        for (const char *w = what ? what : ""; *w; w++) k = (k ^ (unsigned char)*w) * 0x100000001b3ull;   /* the call site's name */
        /* 32 bits each: a sum of W of them is exact in a double for W up to 2^21 ranks */
        const double a = (double)(k >> 32), b = (double)(mix64(k) >> 32), w = (double)c->world;
        const double mine[2] = { a, b }, want[2] = { a * w, b * w };
        memcpy(hdr, mine, sizeof mine);
        memcpy(e->want, want, sizeof want);
    } else if (kind == VOLT__ENV_ROOT) {
        const uint32_t m = ENV_MAGIC, cnt = (uint32_t)n;
        memcpy(e->want, &m, 4);
        memcpy(e->want + 4, &cnt, 4);
        memcpy(e->want + 8, &seq, 8);
        if (c->rank == root) memcpy(hdr, e->want, VOLT__ENV_BYTES);
        else memset(hdr, 0, VOLT__ENV_BYTES);
    }
}

volt_status volt__comm_env_check(const volt__comm_env *e, const volt_comm *c, const void *hdr, const char *op, uint64_t seq,
                                 const char *what, size_t n, char *msg, size_t msglen) {
    static const char why[] = "the ranks called different collectives (one rank is in another call than the others: every "
                              "rank must make the same calls, e.g. save_checkpoint under a sharding strategy)";
    if (!e->kind || !memcmp(hdr, e->want, VOLT__ENV_BYTES)) return VOLT_OK;
    const unsigned char *h = hdr;
    uint32_t m, cnt;
    uint64_t rseq;
    memcpy(&m, h, 4);
    memcpy(&cnt, h + 4, 4);
    memcpy(&rseq, h + 8, 8);
    if (e->kind == VOLT__ENV_ROOT && m == ENV_MAGIC)
        snprintf(msg, msglen, "rank %d: %s #%llu (%s) of %zu bytes met the root's broadcast #%llu of %u bytes: %s", c->rank, op,
                 (unsigned long long)seq, what, n, (unsigned long long)rseq, cnt, why);
    else
        snprintf(msg, msglen, "rank %d: %s #%llu (%s) of %zu bytes met another collective on some rank: %s", c->rank, op,
                 (unsigned long long)seq, what, n, why);
    return VOLT_ERR_COMM;
}
