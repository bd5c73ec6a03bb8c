/* cudasim NCCL: the inter-process part (nccl_shm.cc), used by nccl.cc for nranks > 1.
 * A communicator of several ranks is one POSIX shared-memory segment named by the unique id:
 * a header (per rank: pid, barrier arrivals, the descriptor of its current collective, an
 * aborted flag) and one slot per rank through which the data moves. docs/NCCL.md. */
#pragma once
#include <nccl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#pragma GCC visibility push(hidden)
namespace ncclsim {

struct ShmHdr;

/* One collective as every rank must issue it (compared between ranks before data moves). */
struct Desc {
    uint64_t seq;      /* per-comm sequence number, from 1 */
    uint64_t count;
    int32_t kind;      /* 0 AllReduce, 1 ReduceScatter, 2 AllGather, 3 Broadcast */
    int32_t type;
    int32_t op;
    int32_t root;
};

/* This rank's attachment to the segment. */
struct Link {
    char name[64];
    int rank = 0, nranks = 0;
    int fd = -1;
    int stage = 0;              /* 0 open, 1 wait for the creator, 2 rendezvous, 3 ready */
    ShmHdr *hdr = nullptr;
    size_t map_bytes = 0;
    unsigned char *slots = nullptr;
    size_t slot_bytes = 0;
    uint64_t nbar = 0;          /* barriers this rank entered */
    bool unlinked = false;
    long last_live_ms = 0;
};

/* Writes the magic and a fresh segment name into a unique id whose bytes are random. */
void id_stamp(ncclUniqueId *id);
/* The segment name of an id made by id_stamp; false for any other id. */
bool id_name(const ncclUniqueId &id, char *name, size_t n);

/* One step of attach + rendezvous: ncclInProgress (call again), ncclSuccess (every rank is
 * attached; the name is unlinked) or an error with its message in err. */
ncclResult_t link_step(Link *l, char *err, size_t errn);
/* Marks this rank aborted in the segment (peers waiting for it fail) and unlinks the name. */
void link_abort(Link *l);
/* Unmaps and closes (and unlinks the name if the rendezvous never completed). */
void link_close(Link *l);

/* One collective on this rank (runs on the stream's worker). ncclSuccess, or an error with its
 * message in err: ncclInvalidUsage (the ranks issued different collectives), ncclRemoteError
 * (a peer exited or aborted); ncclInternalError with no message when `aborted` became true. */
ncclResult_t link_run(Link *l, const Desc &d, const void *send, void *recv, size_t es,
                      const std::atomic<bool> &aborted, char *err, size_t errn);

}  // namespace ncclsim
#pragma GCC visibility pop
