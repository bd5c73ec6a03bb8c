/* tests/cudasim/runtime_kernels.cc — kernel launches on the CPU (README.md, "How kernels
 * run"): a grid block by block on the stream's worker, every thread of a block a fiber with its
 * own stack, switched at barriers; the device side of cudasim_device.h and cudasim_mma.h. */
#include "runtime_internal.h"

#pragma GCC visibility push(hidden)
namespace cudasim {
namespace rt {
/* ---- kernels: fibers ------------------------------------------------------------------------ */
/* A context switch: the callee-saved registers and the SSE / x87 control words pushed on the
 * old stack, its stack pointer saved, the new one loaded and popped. (glibc's swapcontext
 * also switches the signal mask: a system call per switch, most of a launch's cost.) */
#if !defined(__x86_64__)
#error "tests/cudasim: the fiber switch is written for x86-64"
#endif
extern "C" void cudasim_switch(void **save_sp, void *new_sp);
__asm__(".text\n"
        ".globl cudasim_switch\n"
        ".hidden cudasim_switch\n"
        ".type cudasim_switch,@function\n"
        "cudasim_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size cudasim_switch,.-cudasim_switch\n");

struct fiber {
    void *sp = nullptr;
    void *stack = nullptr;
    cudasim::thread_state st;
    bool done = false;
    const unsigned *wait_gen = nullptr;   /* waiting until *wait_gen != wait_val */
    unsigned wait_val = 0;
#ifdef CUDASIM_ASAN
    void *fake = nullptr;
#endif
};
/* slot[gen & 1]: a shuffle's values; two buffers, so one barrier per shuffle suffices (a lane
 * can write the next shuffle's value only after every lane reached the next barrier, by
 * which time all have read this one's) */
struct warp_bar { unsigned arrived = 0, gen = 0, alive = 0; uint64_t slot[2][32]; };
struct exec_state {
    void *main_sp = nullptr;
    std::vector<fiber> f;
    std::vector<warp_bar> warps;
    unsigned arrived = 0, gen = 0, alive = 0;
    int or_acc = 0, or_res = 0;
    fiber *cur = nullptr;
    cudasim::invoke_fn invoke = nullptr;
    void *job = nullptr;
    unsigned char *dyn = nullptr;
    size_t dyn_size = 0, dyn_cap = 0;
    bool fault = false;
    char fault_msg[256];
#ifdef CUDASIM_ASAN
    const void *main_bottom = nullptr;
    size_t main_size = 0;
    void *main_fake = nullptr;
#endif
};
#ifdef CUDASIM_ASAN
const size_t STACK = 1u << 19;
#else
const size_t STACK = 1u << 17;
#endif
__attribute__((tls_model("initial-exec"))) thread_local exec_state *t_exec;
std::mutex g_kernel_mu;   /* one block runs at a time in the process: __shared__ are statics */

void exec_free() {
    exec_state *e = t_exec;
    if (!e) return;
    for (fiber &f : e->f)
        if (f.stack) munmap(f.stack, STACK);
    free(e->dyn);
    delete e;
    t_exec = nullptr;
}

void to_main(exec_state *e, fiber *f, bool finished) {
#ifdef CUDASIM_ASAN
    __sanitizer_start_switch_fiber(finished ? nullptr : &f->fake, e->main_bottom, e->main_size);
#else
    (void)finished;
#endif
    cudasim_switch(&f->sp, e->main_sp);
#ifdef CUDASIM_ASAN
    __sanitizer_finish_switch_fiber(f->fake, nullptr, nullptr);
#endif
}

/* A fiber's first frame (entered by cudasim_switch's ret, aligned as after a call); it never
 * returns: the last switch back to the scheduler leaves it, and the stack is reset for the
 * next block. */
[[noreturn]] void fiber_entry() {
    exec_state *e = t_exec;
    fiber *f = e->cur;
#ifdef CUDASIM_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &e->main_bottom, &e->main_size);
#endif
    e->invoke(e->job);
    f->done = true;
    to_main(e, f, true);
    __builtin_unreachable();
}

/* The initial stack of a fiber: control words, six registers, then fiber_entry as the
 * return address at a 16-byte boundary. */
void *fiber_stack_init(void *stack, size_t size) {
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    uint64_t *p = (uint64_t *)(top - 16);
    p[0] = (uint64_t)(uintptr_t)&fiber_entry;
    p[1] = 0;
    for (int r = 1; r <= 6; r++) p[-r] = 0;   /* rbp rbx r12 r13 r14 r15 */
    uint32_t *cw = (uint32_t *)(p - 7);
    cw[0] = 0x1f80;   /* MXCSR: all exceptions masked, round to nearest */
    cw[1] = 0x037f;   /* x87 control word: the same */
    return (void *)(p - 7);
}

void release_check(exec_state *e, unsigned w) {
    if (e->alive && e->arrived == e->alive) {
        e->arrived = 0;
        e->gen++;
        e->or_res = e->or_acc;
        e->or_acc = 0;
    }
    warp_bar &b = e->warps[w];
    if (b.alive && b.arrived == b.alive) {
        b.arrived = 0;
        b.gen++;
    }
}

void wait_on(exec_state *e, const unsigned *gen, unsigned val) {
    fiber *f = e->cur;
    f->wait_gen = gen;
    f->wait_val = val;
    while (*gen == val) to_main(e, f, false);
    f->wait_gen = nullptr;
}

/* Runs one block; false on a fault or deadlock (e->fault_msg says which). */
bool run_block(exec_state *e, dim3 bid, dim3 grid, dim3 block) {
    const unsigned nt = block.x * block.y * block.z, nw = (nt + 31) / 32;
    e->arrived = e->gen = 0;
    e->alive = nt;
    e->or_acc = e->or_res = 0;
    e->warps.assign(nw, warp_bar());
    for (unsigned w = 0; w < nw; w++) e->warps[w].alive = w + 1 < nw || nt % 32 == 0 ? 32 : nt % 32;
    if (e->dyn_size) memset(e->dyn, 0xff, e->dyn_size);
    for (unsigned t = 0; t < nt; t++) {
        fiber &f = e->f[t];
        if (!f.stack) {
            f.stack = mmap(nullptr, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (f.stack == MAP_FAILED) {
                f.stack = nullptr;
                snprintf(e->fault_msg, sizeof e->fault_msg, "no memory for fiber stacks");
                return false;
            }
        }
#ifdef CUDASIM_ASAN   /* the frame an earlier fiber's fiber_entry left (it never returns; deeper
                          frames did return, and unpoisoned themselves) */
        __asan_unpoison_memory_region((char *)f.stack + STACK - 16384, 16384);
#endif
        f.sp = fiber_stack_init(f.stack, STACK);
        f.done = false;
        f.wait_gen = nullptr;
        f.st.tid = uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
        f.st.bid = uint3{bid.x, bid.y, bid.z};
        f.st.bdim = block;
        f.st.gdim = grid;
        f.st.lane = t % 32;
        f.st.warp = t / 32;
    }
    /* Odd blocks run their threads last to first: a read of another thread's write that no
     * barrier orders sees the write when the writer runs first, and the 0xff poison (or the old
     * value) when the reader does; with both orders in one grid, either way round shows. */
    const bool rev = ((bid.x + grid.x * (bid.y + grid.y * bid.z)) & 1u) != 0;
    unsigned left = nt;
    while (left) {
        bool ran = false;
        for (unsigned k = 0; k < nt && !e->fault; k++) {
            const unsigned t = rev ? nt - 1 - k : k;
            fiber &f = e->f[t];
            if (f.done || (f.wait_gen && *f.wait_gen == f.wait_val)) continue;
            ran = true;
            e->cur = &f;
            cudasim::g_cur = &f.st;
#ifdef CUDASIM_ASAN
            __sanitizer_start_switch_fiber(&e->main_fake, f.stack, STACK);
#endif
            cudasim_switch(&e->main_sp, f.sp);
#ifdef CUDASIM_ASAN
            __sanitizer_finish_switch_fiber(e->main_fake, nullptr, nullptr);
#endif
            if (f.done) {
                left--;
                e->alive--;
                e->warps[f.st.warp].alive--;
                release_check(e, f.st.warp);
            }
        }
        if (e->fault) return false;
        if (!ran && left) {
            unsigned at_block = 0, at_warp = 0;
            for (unsigned t = 0; t < nt; t++)
                if (!e->f[t].done) (e->f[t].wait_gen == &e->gen ? at_block : at_warp)++;
            snprintf(e->fault_msg, sizeof e->fault_msg,
                     "deadlock in block (%u, %u, %u): %u threads wait at __syncthreads, %u at a warp barrier "
                     "(shuffle, __syncwarp, wmma), %u have returned",
                     bid.x, bid.y, bid.z, at_block, at_warp, nt - left);
            return false;
        }
    }
    return true;
}

void run_grid(const std::string &name, dim3 grid, dim3 block, size_t smem, void *job, cudasim::invoke_fn invoke) {
    if (sticky() != cudaSuccess) return;
    std::lock_guard<std::mutex> kl(g_kernel_mu);
    if (!t_exec) t_exec = new exec_state;
    exec_state *e = t_exec;
    const unsigned nt = block.x * block.y * block.z;
    if (e->f.size() < nt) e->f.resize(nt);
    if (e->dyn_cap < smem) {
        free(e->dyn);
        e->dyn = (unsigned char *)aligned_alloc(128, (smem + 127) & ~(size_t)127);
        e->dyn_cap = e->dyn ? smem : 0;
        if (!e->dyn) {
            diag("kernel %s: no host memory for %zu bytes of dynamic shared memory", name.c_str(), smem);
            set_sticky(cudaErrorLaunchOutOfResources);
            return;
        }
    }
    e->dyn_size = smem;
    e->invoke = invoke;
    e->job = job;
    e->fault = false;
    e->fault_msg[0] = 0;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++)
                if (!run_block(e, dim3(x, y, z), grid, block)) {
                    diag("kernel %s<<<(%u, %u, %u), (%u, %u, %u), %zu>>> failed: %s", name.c_str(), grid.x, grid.y,
                         grid.z, block.x, block.y, block.z, smem, e->fault_msg);
                    set_sticky(strstr(e->fault_msg, "misaligned") ? cudaErrorMisalignedAddress : cudaErrorLaunchFailure);
                    cudasim::g_cur = nullptr;
                    return;
                }
    cudasim::g_cur = nullptr;
}

} /* namespace rt */
} /* namespace cudasim */
#pragma GCC visibility pop

/* ---- device side (cudasim_device.h, cudasim_mma.h) ---------------------------------------- */
using namespace cudasim::rt;

namespace cudasim {
__attribute__((tls_model("initial-exec"))) thread_local thread_state *g_cur;

void sync_block() {
    exec_state *e = t_exec;
    const unsigned g = e->gen;
    e->arrived++;
    release_check(e, e->cur->st.warp);
    wait_on(e, &e->gen, g);
}
int sync_block_or(int pred) {
    exec_state *e = t_exec;
    const unsigned g = e->gen;
    e->or_acc |= pred != 0;
    e->arrived++;
    release_check(e, e->cur->st.warp);
    wait_on(e, &e->gen, g);
    return e->or_res;
}
void sync_warp() {
    exec_state *e = t_exec;
    warp_bar &b = e->warps[e->cur->st.warp];
    const unsigned g = b.gen;
    b.arrived++;
    release_check(e, e->cur->st.warp);
    wait_on(e, &b.gen, g);
}
uint64_t warp_exchange(uint64_t v, unsigned src) {
    exec_state *e = t_exec;
    const unsigned w = e->cur->st.warp;
    const unsigned buf = e->warps[w].gen & 1;
    e->warps[w].slot[buf][e->cur->st.lane] = v;
    sync_warp();
    return e->warps[w].slot[buf][src & 31];
}
void *dyn_smem() { return t_exec->dyn; }
void wmma_fault(const char *what, const void *p, unsigned ldm) {
    exec_state *e = t_exec;
    if (!e->fault)
        snprintf(e->fault_msg, sizeof e->fault_msg,
                 "wmma::%s misaligned: pointer %p (needs 32-byte alignment), ldm %u (needs 16 bytes' multiple)", what, p,
                 ldm);
    e->fault = true;
    for (;;) to_main(e, e->cur, false);   /* never resumed: the launch ends */
}

/* CUDASIM_TRACE=path (README.md, "Launch trace"): one line per launch, appended in issue order. */
static FILE *g_trace;
static std::once_flag g_trace_once;
static FILE *trace_file() {
    std::call_once(g_trace_once, [] {
        const char *p = getenv("CUDASIM_TRACE");
        if (p && *p && !(g_trace = fopen(p, "a"))) fprintf(stderr, "cudasim: CUDASIM_TRACE=%s: cannot open it\n", p);
    });
    return g_trace;
}
bool trace_enabled() { return trace_file() != nullptr; }
void trace_line(const char *fmt, ...) {
    FILE *tf = trace_file();
    if (!tf) return;
    std::lock_guard<std::mutex> l(g_mu);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(tf, fmt, ap);
    va_end(ap);
    fputc('\n', tf);
    fflush(tf);
}

cudaError_t enqueue_launch(const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, void *job,
                           invoke_fn invoke, destroy_fn destroy, const uintptr_t *ptrs, size_t nptrs,
                           const char *args) {
    init();
    std::shared_ptr<void> hold(job, destroy);
    if (cudaError_t st = sticky()) return fail(st);
    if (FILE *tf = trace_file()) {
        std::lock_guard<std::mutex> l(g_mu);
        fprintf(tf, "launch %s %u,%u,%u %u,%u,%u %zu%s\n", name, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                smem, args ? args : "");
        fflush(tf);
    }
    const unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !nt || nt > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
        grid.y > 65535 || grid.z > 65535 || grid.x > 2147483647u) {
        diag("kernel %s: invalid launch configuration <<<(%u, %u, %u), (%u, %u, %u)>>>", name, grid.x, grid.y, grid.z,
             block.x, block.y, block.z);
        return fail(cudaErrorInvalidConfiguration);
    }
    int maxdyn;
    {
        std::lock_guard<std::mutex> l(g_mu);
        maxdyn = g_max_dyn_smem;
    }
    if (smem > (size_t)maxdyn) {
        diag("kernel %s: %zu bytes of dynamic shared memory, over the %d allowed (more than 48 KiB needs "
             "cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize))", name, smem, maxdyn);
        return fail(cudaErrorInvalidValue);
    }
    std::string nm(name);
    span_list spans;
    for (size_t i = 0; i < nptrs; i++)
        if (ptrs[i]) spans.push_back({ptrs[i], 0});   /* 0: a kernel's pointer argument */
    cudaError_t e = issue(resolve(stream), [nm, grid, block, smem, hold, invoke] {
        run_grid(nm, grid, block, smem, hold.get(), invoke);
    }, std::move(spans));
    return fail(e);
}
} /* namespace cudasim */
