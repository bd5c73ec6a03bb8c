/* cudasim NCCL across processes (nranks > 1): the shared-memory segment a unique id names, the
 * rendezvous, the barriers and the collectives' data movement and reductions. nccl.cc calls
 * these; the header nccl_sim.h says what each does; docs/NCCL.md, "NCCL simulator".
 *
 * The segment: "/volt-cudasim-nccl-<32 hex>" (the id's bytes 8..), created by the first rank
 * to arrive (O_EXCL), sized header + nranks * slot, filled in and then marked ready; the others
 * open it, wait for ready, check nranks, and claim their rank (its pid, once). When every rank
 * is attached, the name is unlinked (the mappings stay), so nothing is left in /dev/shm by a
 * crash after init.
 *
 * A collective, in chunks of what a slot holds: each rank writes its descriptor and copies its
 * part of sendbuff into its slot; barrier; at the first chunk every rank compares every rank's
 * descriptor with its own (sequence number, kind, count, type, op, root) and all of them stop
 * with the same error on a difference; each rank computes its result from the slots, reducing
 * in rank order 0..n-1 (so every rank gets the same bits; ncclAvg is 1/n times each term for
 * floating types, the sum divided by n for integers, as NCCL's PreMulSum / SumPostDiv; a second
 * process claiming a rank, or another nranks, is ncclInvalidUsage at init); barrier (the slots are reused after
 * it). A barrier is per-rank arrival counters in the segment: a rank waits (yield, then short
 * sleeps) until every rank's count reaches its own, and gives up when its comm is aborted, or a
 * rank it waits for has aborted its comm or is no longer alive (kill(pid, 0), or a zombie in
 * /proc), which is ncclRemoteError "rank N (pid P) exited". */
#include "nccl_sim.h"

#include <cerrno>
#include <cstdarg>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#pragma GCC visibility push(hidden)
namespace ncclsim {

enum { MAXR = 64 };
static const char kMagic[8] = { 'c', 'u', 'd', 'a', 's', 'i', 'm', 'N' };
static const uint32_t kSegMagic = 0x4e43534dU;

struct alignas(64) RankRec {
    std::atomic<int32_t> pid;
    std::atomic<int32_t> aborted;
    std::atomic<uint64_t> arrived;    /* barriers entered */
    Desc desc;                        /* the current collective, written before the first barrier */
};

struct ShmHdr {
    std::atomic<uint32_t> ready;      /* set by the creator once the fields below are written */
    uint32_t magic;
    int32_t nranks;
    uint32_t pad;
    uint64_t slot_bytes;
    std::atomic<int32_t> attached;
    RankRec ranks[MAXR];
};

static long now_ms() {
    return (long)std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
}

void id_stamp(ncclUniqueId *id) {
    memcpy(id->internal, kMagic, sizeof kMagic);
    char name[64];
    int k = snprintf(name, sizeof name, "/volt-cudasim-nccl-");
    for (int i = 0; i < 16; i++) k += snprintf(name + k, sizeof name - (size_t)k, "%02x", (unsigned char)id->internal[64 + i]);
    memcpy(id->internal + 8, name, (size_t)k + 1);
}

bool id_name(const ncclUniqueId &id, char *name, size_t n) {
    if (memcmp(id.internal, kMagic, sizeof kMagic)) return false;
    const char *p = id.internal + 8;
    const size_t len = strnlen(p, 56);
    if (len == 56 || len + 1 > n || strncmp(p, "/volt-cudasim-nccl-", 19)) return false;
    memcpy(name, p, len + 1);
    return true;
}

static size_t slot_bytes_from_env(int nranks) {
    size_t s = 1 << 20;
    if (const char *e = getenv("VOLT_CUDASIM_NCCL_SLOT_BYTES")) {   /* small slots: the tests' chunking */
        const long v = strtol(e, nullptr, 10);
        if (v > 0) s = (size_t)v;
    }
    const size_t min = 8 * (size_t)nranks;   /* one element of every rank's block (ReduceScatter) */
    if (s < min) s = min;
    return (s + 63) & ~(size_t)63;
}

static ncclResult_t errf(char *err, size_t n, ncclResult_t rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static ncclResult_t errf(char *err, size_t n, ncclResult_t rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return rc;
}

/* Alive, and not a zombie waiting for its parent. */
static bool pid_alive(int pid) {
    if (pid <= 0) return true;
    if (kill(pid, 0) != 0 && errno == ESRCH) return false;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')');
    return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

/* A peer this rank cannot go on without: ncclRemoteError when it aborted or died. */
static ncclResult_t peer_check(Link *l, int j, char *err, size_t errn) {
    RankRec &r = l->hdr->ranks[j];
    const int pid = r.pid.load(std::memory_order_acquire);
    if (r.aborted.load(std::memory_order_acquire))
        return errf(err, errn, ncclRemoteError, "cudasim NCCL: rank %d (pid %d) aborted its communicator", j, pid);
    if (pid && !pid_alive(pid))
        return errf(err, errn, ncclRemoteError, "cudasim NCCL: rank %d (pid %d) exited", j, pid);
    return ncclSuccess;
}

static void unlink_once(Link *l) {
    if (l->unlinked) return;
    l->unlinked = true;
    shm_unlink(l->name);   /* ENOENT: a peer did it */
}

ncclResult_t link_step(Link *l, char *err, size_t errn) {
    for (;;) {
        switch (l->stage) {
        case 0: {   /* create, or open what another rank created */
            const size_t total = sizeof(ShmHdr) + (size_t)l->nranks * slot_bytes_from_env(l->nranks);
            int fd = shm_open(l->name, O_CREAT | O_EXCL | O_RDWR, 0600);
            if (fd >= 0) {
                if (ftruncate(fd, (off_t)total) != 0) {
                    const int e = errno;
                    close(fd);
                    shm_unlink(l->name);
                    return errf(err, errn, ncclSystemError, "cudasim NCCL: ftruncate %s to %zu bytes: %s", l->name, total, strerror(e));
                }
                void *m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                if (m == MAP_FAILED) {
                    const int e = errno;
                    close(fd);
                    shm_unlink(l->name);
                    return errf(err, errn, ncclSystemError, "cudasim NCCL: mmap %s: %s", l->name, strerror(e));
                }
                ShmHdr *h = static_cast<ShmHdr *>(m);
                h->magic = kSegMagic;
                h->nranks = l->nranks;
                h->slot_bytes = slot_bytes_from_env(l->nranks);
                h->ready.store(1, std::memory_order_release);
                l->fd = fd;
                l->hdr = h;
                l->map_bytes = total;
                l->stage = 2;
                break;
            }
            if (errno != EEXIST)
                return errf(err, errn, ncclSystemError, "cudasim NCCL: shm_open %s: %s", l->name, strerror(errno));
            fd = shm_open(l->name, O_RDWR, 0600);
            if (fd < 0) {
                if (errno == ENOENT) return ncclInProgress;   /* unlinked between the two calls: try again */
                return errf(err, errn, ncclSystemError, "cudasim NCCL: shm_open %s: %s", l->name, strerror(errno));
            }
            l->fd = fd;
            l->stage = 1;
            break;
        }
        case 1: {   /* the creator's size and header */
            struct stat st;
            if (fstat(l->fd, &st) != 0)
                return errf(err, errn, ncclSystemError, "cudasim NCCL: fstat %s: %s", l->name, strerror(errno));
            if ((size_t)st.st_size < sizeof(ShmHdr)) return ncclInProgress;
            void *m = mmap(nullptr, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, l->fd, 0);
            if (m == MAP_FAILED) return errf(err, errn, ncclSystemError, "cudasim NCCL: mmap %s: %s", l->name, strerror(errno));
            ShmHdr *h = static_cast<ShmHdr *>(m);
            if (!h->ready.load(std::memory_order_acquire)) {
                munmap(m, (size_t)st.st_size);
                return ncclInProgress;
            }
            l->hdr = h;
            l->map_bytes = (size_t)st.st_size;
            if (h->magic != kSegMagic || h->nranks < 2 || h->nranks > MAXR ||
                sizeof(ShmHdr) + (size_t)h->nranks * h->slot_bytes != (size_t)st.st_size)
                return errf(err, errn, ncclInvalidUsage, "cudasim NCCL: %s is not a communicator segment", l->name);
            if (h->nranks != l->nranks)
                return errf(err, errn, ncclInvalidUsage, "cudasim NCCL: nranks %d differs from the %d of the communicator's "
                            "other ranks (same unique id)", l->nranks, h->nranks);
            l->stage = 2;
            break;
        }
        case 2: {   /* claim the rank, once */
            ShmHdr *h = l->hdr;
            l->slot_bytes = h->slot_bytes;
            l->slots = reinterpret_cast<unsigned char *>(h) + sizeof(ShmHdr);
            int32_t none = 0;
            if (!h->ranks[l->rank].pid.compare_exchange_strong(none, (int32_t)getpid(), std::memory_order_acq_rel))
                return errf(err, errn, ncclInvalidUsage, "cudasim NCCL: rank %d of %d is already attached (pid %d): each "
                            "rank inits once per unique id", l->rank, l->nranks, (int)none);
            h->attached.fetch_add(1, std::memory_order_acq_rel);
            l->stage = 3;
            break;
        }
        case 3: {   /* every rank attached? */
            ShmHdr *h = l->hdr;
            if (h->attached.load(std::memory_order_acquire) >= l->nranks) {
                unlink_once(l);
                l->stage = 4;
                return ncclSuccess;
            }
            for (int j = 0; j < l->nranks; j++) {
                const ncclResult_t rc = peer_check(l, j, err, errn);
                /* all attached before that peer went: init succeeded, the first collective reports it */
                if (rc != ncclSuccess && h->attached.load(std::memory_order_acquire) < l->nranks) return rc;
            }
            return ncclInProgress;
        }
        default: return ncclSuccess;
        }
    }
}

void link_abort(Link *l) {
    if (l->hdr && l->stage >= 3) l->hdr->ranks[l->rank].aborted.store(1, std::memory_order_release);
    if (l->stage < 4 && l->stage > 0) unlink_once(l);
}

void link_close(Link *l) {
    if (l->stage > 0 && l->stage < 4) unlink_once(l);
    if (l->hdr) munmap(l->hdr, l->map_bytes);
    if (l->fd >= 0) close(l->fd);
    l->hdr = nullptr;
    l->fd = -1;
}

/* Waits until every rank has entered this rank's current barrier. */
static ncclResult_t barrier(Link *l, const std::atomic<bool> &aborted, char *err, size_t errn) {
    ShmHdr *h = l->hdr;
    const uint64_t nb = ++l->nbar;
    h->ranks[l->rank].arrived.store(nb, std::memory_order_release);
    for (unsigned spin = 0;; spin++) {
        int late = -1;
        for (int j = 0; j < l->nranks && late < 0; j++)
            if (h->ranks[j].arrived.load(std::memory_order_acquire) < nb) late = j;
        if (late < 0) return ncclSuccess;
        if (aborted.load(std::memory_order_acquire)) return ncclInternalError;
        if (spin < 64) {
            sched_yield();
            continue;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(spin < 1024 ? 20 : 200));
        const long t = now_ms();
        if (t - l->last_live_ms >= 50) {
            l->last_live_ms = t;
            /* The peer may have arrived, then aborted or exited, while this rank slept: the
             * barrier is passed then, and the next one reports the peer. Its arrival was
             * stored before its abort, so the acquire in peer_check makes it visible here. */
            const ncclResult_t rc = peer_check(l, late, err, errn);
            if (rc != ncclSuccess && h->ranks[late].arrived.load(std::memory_order_acquire) < nb) return rc;
        }
    }
}

/* ---- element types and reductions ------------------------------------------------------------ */
/* A small float format: E exponent bits, M mantissa bits; IEEE (inf/NaN at the top exponent) or
 * e4m3 (no inf; S.1111.111 is NaN; overflow saturates to 448). Round to nearest even. */
template <int E, int M, bool IEEE> struct Mini {
    static constexpr int bias = (1 << (E - 1)) - 1;
    static double maxv() { return IEEE ? std::ldexp(2.0 - std::ldexp(1.0, -M), bias) : 448.0; }
    static float load(uint32_t v) {
        const int s = (v >> (E + M)) & 1, ex = (v >> M) & ((1 << E) - 1);
        const uint32_t mant = v & ((1u << M) - 1);
        double r;
        if (IEEE && ex == (1 << E) - 1) r = mant ? NAN : INFINITY;
        else if (!IEEE && ex == (1 << E) - 1 && mant == (1u << M) - 1) r = NAN;
        else if (ex == 0) r = std::ldexp((double)mant, 1 - bias - M);
        else r = std::ldexp(1.0 + std::ldexp((double)mant, -M), ex - bias);
        return (float)(s ? -r : r);
    }
    static uint32_t store(float f) {
        const uint32_t sign = std::signbit(f) ? 1u << (E + M) : 0;
        if (std::isnan(f)) return sign | (IEEE ? (((1u << E) - 1) << M) | (1u << (M - 1)) : 0x7f);
        double a = std::fabs((double)f);
        if (std::isinf(a)) return IEEE ? sign | (((1u << E) - 1) << M) : sign | 0x7e;
        int e;
        std::frexp(a, &e);   /* a = m 2^e, m in [0.5, 1) */
        e -= 1;
        if (e < 1 - bias) e = 1 - bias;
        const double q = std::ldexp(1.0, e - M);
        a = std::nearbyint(a / q) * q;
        if (a > maxv()) return IEEE ? sign | (((1u << E) - 1) << M) : sign | 0x7e;
        if (a < std::ldexp(1.0, 1 - bias)) return sign | (uint32_t)std::ldexp(a, bias - 1 + M);
        std::frexp(a, &e);
        e -= 1;
        const uint32_t mant = (uint32_t)(std::ldexp(a, M - e) - std::ldexp(1.0, M));
        return sign | ((uint32_t)(e + bias) << M) | mant;
    }
};

template <class T> struct Native {
    typedef T S;
    static T load(const unsigned char *p) { T v; memcpy(&v, p, sizeof v); return v; }
    static void store(unsigned char *p, T v) { memcpy(p, &v, sizeof v); }
};
template <class F, class W> struct Packed {   /* a minifloat in W bytes, computed in float */
    typedef float S;
    static float load(const unsigned char *p) { W v; memcpy(&v, p, sizeof v); return F::load(v); }
    static void store(unsigned char *p, float f) { const W v = (W)F::store(f); memcpy(p, &v, sizeof v); }
};
struct Bf16 {
    static float load(uint32_t v) { const uint32_t b = v << 16; float f; memcpy(&f, &b, 4); return f; }
    static uint32_t store(float f) {
        uint32_t b;
        memcpy(&b, &f, 4);
        if (std::isnan(f)) return (b >> 16) | 0x40;
        return (b + 0x7fff + ((b >> 16) & 1)) >> 16;
    }
};

/* dst[i] = op over ranks 0..n-1 of src[j][i], each step rounded to the type; ncclAvg: floating
 * types multiply each term by 1/n first (NCCL's PreMulSum), integers divide the sum (SumPostDiv). */
template <class A> static void reduce_t(int op, int n, const unsigned char *const *src, unsigned char *dst, size_t k, size_t es) {
    typedef typename A::S S;
    const bool fp = (S)0.5 != (S)0;
    for (size_t i = 0; i < k; i++) {
        const size_t o = i * es;
        S acc = A::load(src[0] + o);
        if (op == ncclAvg && fp) { A::store(dst + o, (S)(acc * (S)(1.0 / n))); acc = A::load(dst + o); }
        for (int j = 1; j < n; j++) {
            S x = A::load(src[j] + o);
            switch (op) {
            case ncclProd: acc = (S)(acc * x); break;
            case ncclMax: acc = x > acc ? x : acc; break;
            case ncclMin: acc = x < acc ? x : acc; break;
            case ncclAvg:
                if (fp) { A::store(dst + o, (S)(x * (S)(1.0 / n))); x = A::load(dst + o); }
                acc = (S)(acc + x);
                break;
            default: acc = (S)(acc + x); break;
            }
            A::store(dst + o, acc);   /* rounded to the type at each step */
            acc = A::load(dst + o);
        }
        if (op == ncclAvg && !fp) acc = (S)(acc / (S)n);
        A::store(dst + o, acc);
    }
}

static void reduce(int type, int op, int n, const unsigned char *const *src, unsigned char *dst, size_t k, size_t es) {
    switch (type) {
    case ncclInt8: reduce_t<Native<int8_t>>(op, n, src, dst, k, es); break;
    case ncclUint8: reduce_t<Native<uint8_t>>(op, n, src, dst, k, es); break;
    case ncclInt32: reduce_t<Native<int32_t>>(op, n, src, dst, k, es); break;
    case ncclUint32: reduce_t<Native<uint32_t>>(op, n, src, dst, k, es); break;
    case ncclInt64: reduce_t<Native<int64_t>>(op, n, src, dst, k, es); break;
    case ncclUint64: reduce_t<Native<uint64_t>>(op, n, src, dst, k, es); break;
    case ncclFloat16: reduce_t<Packed<Mini<5, 10, true>, uint16_t>>(op, n, src, dst, k, es); break;
    case ncclFloat32: reduce_t<Native<float>>(op, n, src, dst, k, es); break;
    case ncclFloat64: reduce_t<Native<double>>(op, n, src, dst, k, es); break;
    case ncclBfloat16: reduce_t<Packed<Bf16, uint16_t>>(op, n, src, dst, k, es); break;
    case ncclFloat8e4m3: reduce_t<Packed<Mini<4, 3, false>, uint8_t>>(op, n, src, dst, k, es); break;
    case ncclFloat8e5m2: reduce_t<Packed<Mini<5, 2, true>, uint8_t>>(op, n, src, dst, k, es); break;
    default: break;
    }
}

/* ---- a collective ------------------------------------------------------------------------------ */
static const char *const kKind[] = { "AllReduce", "ReduceScatter", "AllGather", "Broadcast" };

static ncclResult_t check_descs(Link *l, const Desc &d, char *err, size_t errn) {
    for (int j = 0; j < l->nranks; j++) {
        const Desc &o = l->hdr->ranks[j].desc;
        if (!memcmp(&o, &d, sizeof d)) continue;
        const bool kk = o.kind >= 0 && o.kind < 4;
        return errf(err, errn, ncclInvalidUsage, "cudasim NCCL: collective #%llu differs between ranks: rank %d issued "
                    "%s(count %llu, type %d, op %d, root %d) as #%llu, rank %d %s(count %llu, type %d, op %d, root %d) "
                    "(the ranks must issue the same collectives in the same order)",
                    (unsigned long long)d.seq, l->rank, kKind[d.kind], (unsigned long long)d.count, d.type, d.op, d.root,
                    (unsigned long long)o.seq, j, kk ? kKind[o.kind] : "?", (unsigned long long)o.count, o.type, o.op, o.root);
    }
    return ncclSuccess;
}

ncclResult_t link_run(Link *l, const Desc &d, const void *sendv, void *recvv, size_t es,
                      const std::atomic<bool> &aborted, char *err, size_t errn) {
    const int n = l->nranks, r = l->rank;
    const unsigned char *send = static_cast<const unsigned char *>(sendv);
    unsigned char *recv = static_cast<unsigned char *>(recvv);
    const size_t c = d.count;
    const size_t k = d.kind == 1 ? l->slot_bytes / ((size_t)n * es) : l->slot_bytes / es;   /* elements per chunk */
    unsigned char *mine = l->slots + (size_t)r * l->slot_bytes;
    const unsigned char *src[MAXR];
    l->hdr->ranks[r].desc = d;
    for (size_t o = 0; o < c; o += k) {
        const size_t m = c - o < k ? c - o : k, mb = m * es;
        switch (d.kind) {
        case 1:
            for (int j = 0; j < n; j++) memcpy(mine + (size_t)j * mb, send + ((size_t)j * c + o) * es, mb);
            break;
        case 3:
            if (r == d.root) memcpy(mine, send + o * es, mb);
            break;
        default: memcpy(mine, send + o * es, mb); break;
        }
        ncclResult_t rc = barrier(l, aborted, err, errn);
        if (rc != ncclSuccess) return rc;
        if (o == 0 && (rc = check_descs(l, d, err, errn)) != ncclSuccess) return rc;
        switch (d.kind) {
        case 0:
            for (int j = 0; j < n; j++) src[j] = l->slots + (size_t)j * l->slot_bytes;
            reduce(d.type, d.op, n, src, recv + o * es, m, es);
            break;
        case 1:
            for (int j = 0; j < n; j++) src[j] = l->slots + (size_t)j * l->slot_bytes + (size_t)r * mb;
            reduce(d.type, d.op, n, src, recv + o * es, m, es);
            break;
        case 2:
            for (int j = 0; j < n; j++) memcpy(recv + ((size_t)j * c + o) * es, l->slots + (size_t)j * l->slot_bytes, mb);
            break;
        default: memcpy(recv + o * es, l->slots + (size_t)d.root * l->slot_bytes, mb); break;
        }
        if ((rc = barrier(l, aborted, err, errn)) != ncclSuccess) return rc;
    }
    return ncclSuccess;
}

}  // namespace ncclsim
#pragma GCC visibility pop
