/* Communication backends (private to strategies/): collectives over a group of ranks behind
 * one vtable (DESIGN §7). Implementations: MPI (strategies/comm/mpi/, host buffers) and NCCL
 * (strategies/comm/nccl/, GPU buffers; docs/NCCL.md) — so nothing here names an MPI or NCCL
 * type.
 *
 * Every collective is non-blocking: it starts the operation and hands back a request that
 * the caller passes to wait exactly once. wait gives up after the comm's timeout with
 * VOLT_ERR_TIMEOUT ("rank 1: all_reduce #12 (bucket 'fc1') timed out after 3 s"), so a dead or
 * diverged rank ends the job with an error instead of a hang. After a timeout the comm is
 * broken: later calls fail at once with VOLT_ERR_COMM. The blocking forms (volt_comm_*
 * below) are start + wait.
 *
 * Collectives must be issued in the same order on every rank (the strategies guarantee it).
 * In-place conventions follow NCCL: all_reduce with send == recv; reduce_scatter with recv
 * == send + rank * count; all_gather with send == recv + rank * count. Buffers belong to the
 * caller and must not be read or written between start and wait. */
#ifndef VOLT_COMM_H
#define VOLT_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include "volt/core.h"

typedef struct volt_comm volt_comm;
/* A started collective; owned by the backend until wait releases it. */
typedef struct volt_comm_req volt_comm_req;

/* BF16 / F16 (2-byte elements): a reduction adds two elements in f32 and rounds the sum to
 * the element type once (round to nearest even), pair by pair as the reduction goes (what
 * NCCL does for 16-bit types); with more than two ranks a result is thus rounded more than
 * once, and the order of the pairs is the backend's. */
typedef enum volt_comm_dtype { VOLT_COMM_F32 = 0, VOLT_COMM_F64, VOLT_COMM_BYTE, VOLT_COMM_BF16, VOLT_COMM_F16 } volt_comm_dtype;
/* AVG = SUM divided by the world size (applied on completion; 16-bit: divided in f32 and
 * rounded once; NCCL: its ncclAvg, which may differ from MPI's in the last bit). */
typedef enum volt_comm_op { VOLT_COMM_SUM = 0, VOLT_COMM_AVG } volt_comm_op;

typedef struct volt_comm_config {
    uint32_t version;      /* VOLT_COMM_CONFIG_VERSION */
    double timeout_s;      /* > 0: a wait longer than this => VOLT_ERR_TIMEOUT; default 300 */
    /* ---- version 2 ---- */
    /* The device whose memory (and, for a stream-ordered backend, whose compute stream) the
     * comm works with; volt__comm_create_for sets it. NULL: host memory (mpi). */
    struct volt_device *dev;
    /* A registry row by name ("mpi", "nccl"): forces that backend (tests: "mpi" stages a cuda
     * device through host buffers); NULL or "auto": the first row that serves the device. */
    const char *backend;
    /* ---- version 3 ---- */
    /* The MPI communicator the comm spans, as the address of an MPI_Comm (this header names no
     * MPI type); NULL: MPI_COMM_WORLD. The mpi backend duplicates it; the nccl backend takes
     * its rank and world size from it and broadcasts the NCCL unique id over it, so comms made
     * on the groups of an MPI_Comm_split are independent (no id shared between groups, no rank
     * waiting on a broadcast the other group never joins). Read only during create. */
    const void *mpi_comm;
} volt_comm_config;
#define VOLT_COMM_CONFIG_VERSION 3u

/* volt_comm_ops.flags */
enum {
    /* Collectives are ordered on the device against its compute stream (NCCL): a start runs
     * after all work issued on the compute stream before it (an event the comm stream waits
     * on), and wait makes the compute stream wait for the result (an event on the comm
     * stream) besides blocking the host until it is complete. Callers need no device
     * synchronize around collectives. */
    VOLT_COMM_STREAM_ORDERED = 1u << 0,
};

typedef struct volt_comm_ops {
    uint32_t version;      /* VOLT_COMM_OPS_VERSION */
    const char *name;      /* "mpi", "nccl" */
    /* Starts. count is in elements; `what` labels the call in error messages ("bucket
     * 'fc1'"; may be NULL; copied). On VOLT_OK *req must be waited on; on an error *req is
     * NULL and nothing was started. */
    /* recv[i] = op over ranks of send[i], i < count (send == recv: in place). */
    volt_status (*all_reduce)(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                              volt_comm_op op, const char *what, volt_comm_req **req);
    /* send: world * count elements; recv: count = chunk `rank` of op over ranks. */
    volt_status (*reduce_scatter)(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                                  volt_comm_op op, const char *what, volt_comm_req **req);
    /* send: count elements; recv: world * count, chunk r from rank r. */
    volt_status (*all_gather)(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                              const char *what, volt_comm_req **req);
    /* buf: count elements, root's content everywhere. */
    volt_status (*broadcast)(volt_comm *c, void *buf, size_t count, volt_comm_dtype dt, int root,
                             const char *what, volt_comm_req **req);
    volt_status (*barrier)(volt_comm *c, const char *what, volt_comm_req **req);
    /* Wait for req (then it is released, whatever the result): VOLT_OK, VOLT_ERR_TIMEOUT
     * (message names the rank, call, its sequence number and the timeout), VOLT_ERR_COMM. */
    volt_status (*wait)(volt_comm *c, volt_comm_req *req);
    /* Optional: drive progress without blocking; *done tells whether req has completed
     * (req stays valid until wait). */
    volt_status (*test)(volt_comm *c, volt_comm_req *req, bool *done);
    const char *(*errmsg)(const volt_comm *c);
    /* Releases the comm (requests never waited on are abandoned). NULL-safe wrapper below. */
    void (*destroy)(volt_comm *c);
    /* ---- version 2 ---- */
    unsigned flags;        /* VOLT_COMM_STREAM_ORDERED; 0 for host-buffer backends (mpi) */
    /* ---- version 3 ---- */
    /* Optional (stream-ordered backends): block the host until everything issued so far on the
     * device's compute stream has run, within the comm's deadline, failing as wait does (the
     * communicator aborted on a timeout, so kernels waiting for peers exit). A captured step
     * (compile) holds its collectives inside one graph launch: this is what bounds it. `what`
     * names it in the message. While the compute stream is being captured, a collective's
     * wait only orders the compute stream after it (nothing can be awaited on the host) and
     * test says "not done"; host buffers are refused then. */
    volt_status (*drain)(volt_comm *c, const char *what);
} volt_comm_ops;
#define VOLT_COMM_OPS_VERSION 3u

struct volt_comm {
    const volt_comm_ops *ops;
    int rank, world;
    double timeout_s;
    void *impl;
    /* Set by volt__comm_create_for: the device whose memory the caller communicates, and
     * whether the backend cannot take that memory (a host-buffer backend, a device whose
     * memory is not host-addressable): then callers pass host staging buffers, filled and
     * emptied with the device's copies (strategies/parallel/ preallocates them per unit). */
    struct volt_device *dev;
    bool staged;
};

/* ---- comm registry (strategies/comm/registry.c): one row per backend, chosen by device ---- */
typedef struct volt_comm_row {
    const char *name;            /* "mpi", "nccl" */
    const char *description;
    bool host_buffers;           /* takes host memory only: staged on non-host-addressable devices */
    /* Can serve this device (NULL = any). The first row (in registry order) that can wins. */
    bool (*serves)(const struct volt_device *dev);
    /* NULL when this build lacks the backend (no MPI; nccl: no CUDA or no MPI). */
    volt_status (*create)(const volt_comm_config *cfg, volt_comm **out, char *err, size_t errlen);
    const char *missing;         /* create == NULL: why ("built without CUDA") */
} volt_comm_row;
int volt__comm_backend_count(void);
const volt_comm_row *volt__comm_backend_at(int i);
const volt_comm_row *volt__comm_backend_find(const char *name);
/* The comm for dev: the row cfg->backend names (it must serve dev and be built in), else the
 * first registered row that serves it and is built in; sets cfg->dev for the backend and
 * (*out)->dev/staged. Errors name the device and the rows tried. */
volt_status volt__comm_create_for(struct volt_device *dev, const volt_comm_config *cfg, volt_comm **out,
                                  char *err, size_t errlen);

void volt__comm_config_init(volt_comm_config *cfg);
/* The checks every backend's create (and volt__comm_create_for) starts with: cfg given, a
 * version this library knows, timeout_s > 0. VOLT_OK, else the error with a message in err
 * naming the field and its value. */
volt_status volt__comm_config_check(const volt_comm_config *cfg, char *err, size_t errlen);
void volt__comm_destroy(volt_comm *c);                                 /* NULL-safe */
/* Blocking forms: start + wait (same timeout). */
volt_status volt__comm_all_reduce(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                                 volt_comm_op op, const char *what);
volt_status volt__comm_reduce_scatter(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                                     volt_comm_op op, const char *what);
volt_status volt__comm_all_gather(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                                 const char *what);
volt_status volt__comm_broadcast(volt_comm *c, void *buf, size_t count, volt_comm_dtype dt, int root, const char *what);
volt_status volt__comm_barrier(volt_comm *c, const char *what);
size_t volt__comm_dtype_size(volt_comm_dtype dt);
const char *volt__comm_errmsg(const volt_comm *c);

/* ---- the envelope of control collectives (comm.c; the mpi and nccl backends) -------------------
 * Control collectives (f64 all-reduces and byte broadcasts of at most VOLT__ENV_MAX data bytes:
 * votes, metrics, flags, paths, messages; nccl: from host memory only) carry VOLT__ENV_BYTES in
 * front of their data, so ranks that issued different collectives at the same point (one rank
 * saving a sharded checkpoint alone, one rank resolving a ckpt_path the others were not given)
 * get an error saying so instead of each other's bytes. A broadcast's envelope is the root's
 * {magic, byte count, collective number}, compared by every rank with its own; an f64
 * all-reduce's is two 32-bit hashes of (byte count, collective number, the caller's `what`, the
 * same on every rank at one call site: "stop vote", "grad norm", ...) that every rank adds in
 * (the all-reduce is a sum; an average divides the data afterwards): the sums are W times this
 * rank's own only when every rank contributed the same (W = 2: always; more: but for a 2^-64
 * coincidence; exact in doubles up to 2^21 ranks). The collective number must be the same on
 * every rank: only collectives count. */
enum { VOLT__ENV_BYTES = 16, VOLT__ENV_MAX = 64 << 10 };
enum { VOLT__ENV_NONE = 0, VOLT__ENV_SUM, VOLT__ENV_ROOT };
typedef struct volt__comm_env {
    int kind;                              /* VOLT__ENV_*: how the envelope travels, NONE: bare */
    unsigned char want[VOLT__ENV_BYTES];   /* what the envelope must hold after the collective */
} volt__comm_env;
/* The envelope's kind for a broadcast (else an all-reduce) of count elements of dt. */
int volt__comm_env_kind(bool broadcast, volt_comm_dtype dt, size_t count);
/* This rank's envelope written at hdr (VOLT__ENV_BYTES, in front of the n data bytes) and its
 * e->want. seq: the collective's number on c; what: its call site's name. */
void volt__comm_env_set(volt__comm_env *e, int kind, const volt_comm *c, uint64_t seq, const char *what, int root, size_t n,
                        void *hdr);
/* After the collective: VOLT_OK when hdr holds e->want (or e->kind is NONE), else VOLT_ERR_COMM
 * with msg saying what met what. op: "all_reduce", "broadcast". */
volt_status volt__comm_env_check(const volt__comm_env *e, const volt_comm *c, const void *hdr, const char *op, uint64_t seq,
                                 const char *what, size_t n, char *msg, size_t msglen);

/* A process whose MPI collectives broke (a wait timed out or failed on an MPI comm, or the
 * NCCL id's broadcast timed out) makes no new comm: the ranks' MPI calls are out of step, and
 * a new duplicate of the world communicator (or the next NCCL id's broadcast) could match
 * another rank's older call (Open MPI then aborts or crashes). The MPI backend calls
 * volt__comm_note_broken with its first failure's message; volt__comm_create_for and
 * volt__comm_mpi_create then refuse (VOLT_ERR_STATE, naming that failure). A broken NCCL comm
 * is aborted whole (ncclCommAbort) and leaves MPI in step: it does not count. */
void volt__comm_note_broken(const char *msg);
bool volt__comm_broken(void);   /* the note was made (comm_mpi.c's finalize watchdog reads it) */
volt_status volt__comm_refuse_if_broken(char *err, size_t errlen);

/* What this process's last trainer call that failed said (fit, validate, test, predict under
 * several ranks; NULL clears it, as a later call that succeeds does): the words a process that
 * leaves the job sends the others (below). "" when none. */
void volt__comm_note_failure(const char *msg);
const char *volt__comm_failure(void);

/* Leave notices (MPI initialised by volt, which then also finalizes it): a process that ends
 * (exit, after main returns) first tells every other rank of MPI_COMM_WORLD that it is leaving,
 * with its last failure's words (volt__comm_note_failure), one small message each (tag
 * VOLT__LEAVE_TAG on MPI_COMM_WORLD). A rank waiting in a collective of a comm the leaver belongs
 * to fails once the leaver is gone and the collective has not completed within a short grace
 * (the leaver may have started it: then it completes), VOLT_ERR_COMM: "rank 0: all_reduce #19
 * (step metric sync): rank 1 left the job (its last error: ...)", instead of waiting for its
 * timeout. Before, the leaver waited in MPI_Finalize for the others and they waited for the comm's
 * timeout. An application that initialised MPI itself finalizes it itself: no notices then. */
#define VOLT__LEAVE_TAG 0x766c
/* The most of a leaver's words a notice carries (bytes, with the terminator). */
#define VOLT__LEAVE_MSG 400
/* The world ranks of mpi_comm's n members (malloc'd), or *out NULL when it is the world itself,
 * or no notices are kept (nothing then asks). */
volt_status volt__comm_mpi_members(const void *mpi_comm, int n, int **out);
/* For a wait's poll loop: the rank (in c) of a member that left the job more than the grace
 * ago (VOLT__LEAVE_GRACE_S, at most c's timeout; *since, -1 before, is set at the first sighting:
 * the leaver may have started this collective, and then it completes), with its words in msg
 * ("" if none); else -1. world_of: the members' world ranks (NULL: the comm spans the world). */
int volt__comm_left_expired(const volt_comm *c, const int *world_of, double *since, char *msg, size_t msglen);
#define VOLT__LEAVE_GRACE_S 2.0

/* The MPI backend (built only with MPI): initialises MPI (MPI_THREAD_FUNNELED: only the
 * thread that created the comm may call it) unless the application already did, and then
 * finalizes it at exit; works on a private duplicate of MPI_COMM_WORLD. */
volt_status volt__comm_mpi_create(const volt_comm_config *cfg, volt_comm **out, char *err, size_t errlen);
/* This process's rank and the size of mpi_comm (volt_comm_config.mpi_comm: the address of an
 * MPI_Comm, NULL: MPI_COMM_WORLD), without making a comm: what the NCCL comm is built on.
 * Initialises MPI like volt__comm_mpi_create. MPI_COMM_NULL is an error. */
volt_status volt__comm_mpi_world(const void *mpi_comm, int *rank, int *world, char *err, size_t errlen);
/* Broadcast n host bytes from rank 0 of mpi_comm (as above) with the deadline (the NCCL
 * unique id); every rank of mpi_comm, and only those, must call it. */
volt_status volt__comm_mpi_bootstrap_bcast(const void *mpi_comm, void *buf, size_t n, double timeout_s, char *err,
                                          size_t errlen);
int volt__comm_local_rank(void);   /* the env above; 0 outside a job */
int volt__comm_local_size(void);   /* OMPI_COMM_WORLD_LOCAL_SIZE, SLURM_NTASKS_PER_NODE...; 1 outside a job */
/* The processes the launcher (mpirun) started, and this one's rank among them, from the
 * environment (OMPI_COMM_WORLD_SIZE / _RANK, PMI_SIZE, PMIX_RANK...): 1 and 0 outside a job.
 * Read before MPI is initialised (strategy "auto"). */
int volt__comm_launched_size(void);
int volt__comm_launched_rank(void);

/* CUDA graphs that captured a comm's collectives (compile over several processes:
 * trainer/compile.c). NCCL (>= 2.26) finalizes and aborts a communicator only once every graph
 * that captured one of its collectives is destroyed: an abort while the graph's owner still
 * holds it waits forever. An owner registers, for comm c, a function that destroys its graphs
 * (a launch in flight is freed when it completes, which the abort lets happen); c about to
 * abort calls its owners' first (volt__comm_release_graphs), under the registry's lock, so an
 * owner removed (before it frees what release touches) is never called after. add: false when
 * out of memory. */
bool volt__comm_graph_owner_add(const volt_comm *c, void (*release)(void *ctx), void *ctx);
void volt__comm_graph_owner_remove(void *ctx);   /* every entry of ctx; NULL-safe */
void volt__comm_release_graphs(const volt_comm *c);

/* The NCCL backend (strategies/comm/nccl/; built with CUDA and MPI): libnccl.so.2 is loaded at
 * the first create. Serves cuda devices; one GPU per rank (the device the comm is made for). */
volt_status volt__comm_nccl_create(const volt_comm_config *cfg, volt_comm **out, char *err, size_t errlen);
bool volt__comm_nccl_serves(const struct volt_device *dev);
#endif
