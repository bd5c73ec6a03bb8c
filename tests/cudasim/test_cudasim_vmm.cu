/* tests/cudasim/test_cudasim_vmm.cu — the simulator's CUDA virtual memory management
 * (runtime_vmm.cc; README.md, "Virtual memory management"), reached as the "cuda" backend reaches
 * it: cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &qres).
 * Modes (ctest runs each: tests/gpu_sim.cmake): `main` (the API, its refusals, aliasing, the
 * capacity); `unmapped_copy` and `noaccess_memset` (a sticky illegal address each);
 * `unmap_pending memset|kernel|graph` (cuMemUnmap under queued work: refused, sticky);
 * `fault unmapped|noaccess` (a kernel touching such a granule dies of SIGSEGV at that address:
 * run in a child process, the parent checks how it died). */
#include <cuda.h>
#include <cuda_runtime.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <string>

static int g_fail, g_pass;
#define CHECK(c, ...) do { if (c) g_pass++; else { g_fail++; printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #c); \
    printf(__VA_ARGS__); printf("\n"); } } while (0)
#define OK(call) CHECK((call) == cudaSuccess, "%s", cudaGetErrorString(cudaGetLastError()))
#define CU(call, want) do { const CUresult r_ = (call); CHECK(r_ == (want), "%s -> %d, want %s", #call, (int)r_, #want); } while (0)

const size_t G = (size_t)2 << 20;

#define DRV(X) X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) \
    X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemGetAccess) X(cuGetErrorString) X(cuGetErrorName)
#define DECL_(f) static decltype(&::f) p_##f;
DRV(DECL_)
#undef DECL_

static bool load_driver() {
    bool ok = true;
#define LOAD_(f) { cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound; \
        const cudaError_t e = cudaGetDriverEntryPointByVersion(#f, (void **)&p_##f, 12000, cudaEnableDefault, &q); \
        CHECK(e == cudaSuccess && p_##f && q == cudaDriverEntryPointSuccess, "entry point %s: %d, q %d", #f, (int)e, (int)q); \
        ok = ok && p_##f; }
    DRV(LOAD_)
#undef LOAD_
    return ok;
}

static CUmemAllocationProp prop_dev0() {
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    return p;
}
static CUmemAccessDesc rw_dev0() {
    CUmemAccessDesc d;
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = 0;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return d;
}
__global__ void k_iota(int *x, int n, int add) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = i + add;
}

static std::atomic<int> g_gate;
static void CUDART_CB hold(void *) { while (!g_gate.load()) usleep(1000); }

static size_t free_mem() {
    size_t fr = 0, total = 0;
    OK(cudaMemGetInfo(&fr, &total));
    return fr;
}

static void main_checks() {
    /* the entry points: unknown symbols, too old a version, a version past the driver's */
    void *fn = (void *)1;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSuccess;
    CHECK(cudaGetDriverEntryPointByVersion("cuNoSuchThing", &fn, 12000, cudaEnableDefault, &q) == cudaErrorSymbolNotFound &&
          !fn && q == cudaDriverEntryPointSymbolNotFound, "unknown symbol: fn %p q %d", fn, (int)q);
    CHECK(cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, 10010, cudaEnableDefault, &q) != cudaSuccess && !fn &&
          q == cudaDriverEntryPointVersionNotSufficent, "cuMemCreate at 10.1 (it came in 10.2): fn %p q %d", fn, (int)q);
    CHECK(cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, 99000, cudaEnableDefault, &q) == cudaErrorInvalidValue,
          "a version past the driver's accepted");
    cudaGetLastError();
    if (!load_driver()) return;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    CHECK(cudaGetDriverEntryPoint("cuMemMap", &fn, cudaEnableDefault, &q) == cudaSuccess && fn == (void *)p_cuMemMap &&
          q == cudaDriverEntryPointSuccess, "the deprecated cudaGetDriverEntryPoint: fn %p q %d", fn, (int)q);
#pragma GCC diagnostic pop
    const char *s = nullptr;
    CU(p_cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
    CHECK(s && !strcmp(s, "CUDA_ERROR_OUT_OF_MEMORY"), "name %s", s ? s : "(null)");
    CU(p_cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s), CUDA_SUCCESS);
    CHECK(s && !strcmp(s, "invalid argument"), "string %s", s ? s : "(null)");
    CU(p_cuGetErrorString((CUresult)123456, &s), CUDA_ERROR_INVALID_VALUE);
    CHECK(!s, "an unknown CUresult has a string");

    /* granularity: 2 MiB for pinned device memory; props the simulator does not model refused */
    CUmemAllocationProp prop = prop_dev0();
    size_t g = 0;
    CU(p_cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CHECK(g == G, "minimum granularity %zu", g);
    g = 0;
    CU(p_cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), CUDA_SUCCESS);
    CHECK(g == G, "recommended granularity %zu", g);
    CUmemAllocationProp bad = prop;
    bad.location.id = 7;
    CU(p_cuMemGetAllocationGranularity(&g, &bad, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_DEVICE);
    bad = prop;
    bad.type = CU_MEM_ALLOCATION_TYPE_INVALID;
    CU(p_cuMemGetAllocationGranularity(&g, &bad, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_VALUE);
    bad = prop;
    bad.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUmemGenericAllocationHandle hb = 0;
    CU(p_cuMemCreate(&hb, G, &bad, 0), CUDA_ERROR_NOT_SUPPORTED);
    bad = prop;
    bad.allocFlags.compressionType = CU_MEM_ALLOCATION_COMP_GENERIC;
    CU(p_cuMemCreate(&hb, G, &bad, 0), CUDA_ERROR_NOT_SUPPORTED);
    CU(p_cuMemCreate(&hb, G + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CU(p_cuMemCreate(&hb, G, &prop, 1), CUDA_ERROR_INVALID_VALUE);

    /* reserve 4 granules: no memory counted; create 2: 4 MiB counted */
    int *other = nullptr;   /* a cudaMalloc allocation: queued work on it must not stop an unmap */
    OK(cudaMalloc(&other, 4096));
    const size_t free0 = free_mem();
    CUdeviceptr va = 0;
    CU(p_cuMemAddressReserve(&va, 4 * G, 0, 0, 0), CUDA_SUCCESS);
    CHECK(va && va % G == 0, "reservation at %#llx (want granularity-aligned)", va);
    CHECK(free_mem() == free0, "a reservation counted as memory: free %zu -> %zu", free0, free_mem());
    CUdeviceptr bad_va = 0;
    CU(p_cuMemAddressReserve(&bad_va, G + 100, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CU(p_cuMemAddressReserve(&bad_va, G, 3 * 4096, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CUmemGenericAllocationHandle h0 = 0, h1 = 0;
    CU(p_cuMemCreate(&h0, G, &prop, 0), CUDA_SUCCESS);
    CU(p_cuMemCreate(&h1, G, &prop, 0), CUDA_SUCCESS);
    CHECK(free_mem() == free0 - 2 * G, "two 2 MiB handles: free %zu -> %zu", free0, free_mem());

    /* mapping rules: granularity, inside the reservation, not over a mapping, offset 0 */
    CU(p_cuMemMap(va + 4096, G, 0, h0, 0), CUDA_ERROR_INVALID_VALUE);
    CU(p_cuMemMap(va, G, G, h0, 0), CUDA_ERROR_INVALID_VALUE);
    CU(p_cuMemMap(va + 3 * G, 2 * G, 0, h0, 0), CUDA_ERROR_INVALID_VALUE);
    CU(p_cuMemMap(va, G, 0, 0x1234, 0), CUDA_ERROR_INVALID_VALUE);
    CU(p_cuMemMap(va, G, 0, h0, 0), CUDA_SUCCESS);
    CU(p_cuMemMap(va, G, 0, h1, 0), CUDA_ERROR_INVALID_VALUE);   /* mapped already */
    CU(p_cuMemMap(va + G, G, 0, h1, 0), CUDA_SUCCESS);
    /* access: none until cuMemSetAccess; the range must be whole mappings */
    unsigned long long acc = 99;
    CUmemLocation loc = prop.location;
    CU(p_cuMemGetAccess(&acc, &loc, va), CUDA_SUCCESS);
    CHECK(acc == CU_MEM_ACCESS_FLAGS_PROT_NONE, "access before cuMemSetAccess %llu", acc);
    cudaPointerAttributes pa;
    OK(cudaPointerGetAttributes(&pa, (void *)va));
    CHECK(pa.type != cudaMemoryTypeDevice && !pa.devicePointer, "a mapping without access is a device pointer");
    const CUmemAccessDesc rw = rw_dev0();
    CU(p_cuMemSetAccess(va, 3 * G, &rw, 1), CUDA_ERROR_INVALID_VALUE);   /* granule 2 unmapped */
    CU(p_cuMemSetAccess(va, 2 * G, &rw, 0), CUDA_ERROR_INVALID_VALUE);
    CU(p_cuMemSetAccess(va, 2 * G, &rw, 1), CUDA_SUCCESS);              /* two mappings at once */
    CU(p_cuMemGetAccess(&acc, &loc, va + G + 64), CUDA_SUCCESS);
    CHECK(acc == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "access after cuMemSetAccess %llu", acc);
    OK(cudaPointerGetAttributes(&pa, (void *)(va + 100)));
    CHECK(pa.type == cudaMemoryTypeDevice && pa.devicePointer == (void *)(va + 100), "mapped memory: type %d", (int)pa.type);

    /* fresh physical memory is the 0xff poison; a copy, memset and kernel across the two mappings */
    const int n = (int)(2 * G / sizeof(int));
    int *hbuf = (int *)malloc(2 * G), *d = (int *)va;
    OK(cudaMemcpy(hbuf, d, 2 * G, cudaMemcpyDeviceToHost));
    int fresh = 0;
    for (int i = 0; i < n; i++) fresh += hbuf[i] == -1;
    CHECK(fresh == n, "%d of %d words of new physical memory are the 0xff poison", fresh, n);
    for (int i = 0; i < n; i++) hbuf[i] = 3 * i;
    OK(cudaMemcpy(d, hbuf, 2 * G, cudaMemcpyHostToDevice));
    OK(cudaMemset(d + n / 2 - 8, 0, 64));   /* across the boundary of the two handles */
    memset(hbuf, 0, 2 * G);
    OK(cudaMemcpy(hbuf, d, 2 * G, cudaMemcpyDefault));
    int bad_words = 0;
    for (int i = 0; i < n; i++) bad_words += hbuf[i] != (i >= n / 2 - 8 && i < n / 2 + 8 ? 0 : 3 * i);
    CHECK(!bad_words, "round trip over two mappings: %d words wrong", bad_words);
    cudaStream_t st;
    OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    k_iota<<<8, 128, 0, st>>>(d + 1000, n - 2000, 7);
    OK(cudaGetLastError());
    OK(cudaMemcpyAsync(hbuf, d, 2 * G, cudaMemcpyDeviceToHost, st));
    OK(cudaStreamSynchronize(st));
    bad_words = 0;
    for (int i = 1000; i < n - 1000; i++) bad_words += hbuf[i] != i - 1000 + 7;
    CHECK(!bad_words && hbuf[999] == 3 * 999, "kernel over two mappings: %d words wrong, [999] %d", bad_words, hbuf[999]);
    /* a copy running past the reservation's end is refused, not sticky */
    CHECK(cudaMemcpy(hbuf, d + n, 4 * G + 4, cudaMemcpyDeviceToHost) != cudaSuccess, "a copy past the reservation");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue && cudaGetLastError() == cudaSuccess, "not invalid value, or sticky");

    /* alias: the handle of granule 0 mapped again at granule 3 */
    CU(p_cuMemMap(va + 3 * G, G, 0, h0, 0), CUDA_SUCCESS);
    CU(p_cuMemSetAccess(va + 3 * G, G, &rw, 1), CUDA_SUCCESS);
    int v = 4242, back = 0;
    OK(cudaMemcpy(d + 5, &v, sizeof v, cudaMemcpyHostToDevice));
    OK(cudaMemcpy(&back, (char *)(va + 3 * G) + 5 * sizeof(int), sizeof back, cudaMemcpyDeviceToHost));
    CHECK(back == 4242, "a write through one mapping of a handle read %d through the other", back);
    k_iota<<<1, 32, 0, st>>>((int *)(va + 3 * G), 32, 100);
    OK(cudaStreamSynchronize(st));
    OK(cudaMemcpy(&back, d + 9, sizeof back, cudaMemcpyDeviceToHost));
    CHECK(back == 109, "a kernel's write through the alias read %d (want 109)", back);

    /* unmapping: whole mappings only; not under queued work on the range, fine under work elsewhere */
    CU(p_cuMemUnmap(va, G / 2), CUDA_ERROR_INVALID_VALUE);
    CU(p_cuMemUnmap(va + 2 * G, G), CUDA_ERROR_INVALID_VALUE);      /* not mapped */
    CU(p_cuMemUnmap(va + G, 2 * G), CUDA_ERROR_INVALID_VALUE);      /* runs into the unmapped granule 2 */
    g_gate = 0;
    OK(cudaLaunchHostFunc(st, hold, nullptr));
    OK(cudaMemsetAsync(other, 0, 4096, st));
    k_iota<<<1, 32, 0, st>>>(other, 32, 0);
    CU(p_cuMemUnmap(va + 3 * G, G), CUDA_SUCCESS);   /* queued work elsewhere: no false alarm */
    g_gate = 1;
    OK(cudaStreamSynchronize(st));
    /* address free: exact reservation, no live mappings */
    CU(p_cuMemAddressFree(va, 4 * G), CUDA_ERROR_INVALID_VALUE);
    CU(p_cuMemAddressFree(va + G, 3 * G), CUDA_ERROR_INVALID_VALUE);
    /* release while mapped: the memory stays (and is counted) until the unmap */
    CU(p_cuMemRelease(h0), CUDA_SUCCESS);
    CU(p_cuMemRelease(h0), CUDA_ERROR_INVALID_VALUE);
    CHECK(free_mem() == free0 - 2 * G, "a released but mapped handle freed: free %zu (want %zu)", free_mem(), free0 - 2 * G);
    OK(cudaMemcpy(&back, d + 9, sizeof back, cudaMemcpyDeviceToHost));
    CHECK(back == 109, "a released handle's mapping lost its data: %d", back);
    CU(p_cuMemUnmap(va, 2 * G), CUDA_SUCCESS);      /* both mappings in one call */
    CHECK(free_mem() == free0 - G, "the unmap did not free the released handle: free %zu (want %zu)", free_mem(), free0 - G);
    CU(p_cuMemGetAccess(&acc, &loc, va), CUDA_ERROR_INVALID_VALUE);
    OK(cudaPointerGetAttributes(&pa, (void *)va));
    CHECK(!pa.devicePointer, "an unmapped address is a device pointer");
    /* remap h1 (not released): its data survived the unmap; access must be granted again */
    CU(p_cuMemMap(va + 2 * G, G, 0, h1, 0), CUDA_SUCCESS);
    CU(p_cuMemGetAccess(&acc, &loc, va + 2 * G), CUDA_SUCCESS);
    CHECK(acc == 0, "a new mapping kept the old access %llu", acc);
    CU(p_cuMemSetAccess(va + 2 * G, G, &rw, 1), CUDA_SUCCESS);
    OK(cudaMemcpy(&back, (void *)(va + 2 * G), sizeof back, cudaMemcpyDeviceToHost));
    CHECK(back == n / 2 - 1000 + 7, "handle 1 remapped: its word 0 %d (want %d, the kernel's)", back, n / 2 - 1000 + 7);
    CU(p_cuMemUnmap(va + 2 * G, G), CUDA_SUCCESS);
    CU(p_cuMemRelease(h1), CUDA_SUCCESS);
    CHECK(free_mem() == free0, "everything released: free %zu (want %zu)", free_mem(), free0);
    CU(p_cuMemAddressFree(va, 4 * G), CUDA_SUCCESS);
    CU(p_cuMemAddressFree(va, 4 * G), CUDA_ERROR_INVALID_VALUE);
    CHECK(cudaMemcpy(hbuf, d, 4, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue, "a freed reservation is device memory");
    cudaGetLastError();

    /* capacity (CUDASIM_MEM_MB=8, set by main): handles count, a released mapped one until unmapped */
    OK(cudaFree(other));
    const size_t fr = free_mem();
    CHECK(fr == 4 * G, "8 MiB free, %zu", fr);
    CUmemGenericAllocationHandle hs[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < 4; i++) CU(p_cuMemCreate(&hs[i], G, &prop, 0), CUDA_SUCCESS);
    CU(p_cuMemCreate(&hs[4], G, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    void *p = nullptr;
    CHECK(cudaMalloc(&p, 4096) == cudaErrorMemoryAllocation, "cudaMalloc past the capacity the handles hold");
    cudaGetLastError();
    CU(p_cuMemAddressReserve(&va, 64 * G, 0, 0, 0), CUDA_SUCCESS);   /* address space is not capacity */
    CU(p_cuMemMap(va, G, 0, hs[0], 0), CUDA_SUCCESS);
    CU(p_cuMemRelease(hs[0]), CUDA_SUCCESS);
    CU(p_cuMemCreate(&hs[4], G, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);   /* still mapped: not freed */
    CU(p_cuMemUnmap(va, G), CUDA_SUCCESS);
    CU(p_cuMemCreate(&hs[4], G, &prop, 0), CUDA_SUCCESS);
    for (int i = 1; i < 5; i++) CU(p_cuMemRelease(hs[i]), CUDA_SUCCESS);
    /* a 4 MiB handle in one mapping: no sub-range of it can be unmapped or given access */
    CU(p_cuMemCreate(&hs[0], 2 * G, &prop, 0), CUDA_SUCCESS);
    CU(p_cuMemMap(va + 2 * G, 2 * G, 0, hs[0], 0), CUDA_SUCCESS);
    CU(p_cuMemSetAccess(va + 2 * G, G, &rw, 1), CUDA_ERROR_INVALID_VALUE);
    CU(p_cuMemUnmap(va + 2 * G, G), CUDA_ERROR_INVALID_VALUE);
    CU(p_cuMemUnmap(va + 3 * G, G), CUDA_ERROR_INVALID_VALUE);
    CU(p_cuMemSetAccess(va + 2 * G, 2 * G, &rw, 1), CUDA_SUCCESS);
    OK(cudaMemset((void *)(va + 2 * G), 1, 2 * G));
    CU(p_cuMemUnmap(va + 2 * G, 2 * G), CUDA_SUCCESS);
    CU(p_cuMemRelease(hs[0]), CUDA_SUCCESS);
    CU(p_cuMemAddressFree(va, 64 * G), CUDA_SUCCESS);
    CHECK(free_mem() == fr, "all released: free %zu (want %zu)", free_mem(), fr);
    OK(cudaStreamDestroy(st));
    free(hbuf);
}

/* reservation of 2 granules, both mapped (read-write if `access`), then granule 1 unmapped and
 * its handle released: granule 0 is mapped, granule 1 was */
static int *half_mapped(bool access) {
    if (!load_driver()) exit(1);
    CUdeviceptr va = 0;
    CU(p_cuMemAddressReserve(&va, 2 * G, 0, 0, 0), CUDA_SUCCESS);
    const CUmemAllocationProp prop = prop_dev0();
    CUmemGenericAllocationHandle h[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        CU(p_cuMemCreate(&h[i], G, &prop, 0), CUDA_SUCCESS);
        CU(p_cuMemMap(va + i * G, G, 0, h[i], 0), CUDA_SUCCESS);
    }
    if (access) {
        const CUmemAccessDesc rw = rw_dev0();
        CU(p_cuMemSetAccess(va, 2 * G, &rw, 1), CUDA_SUCCESS);
    }
    CU(p_cuMemUnmap(va + G, G), CUDA_SUCCESS);
    CU(p_cuMemRelease(h[1]), CUDA_SUCCESS);
    return (int *)va;
}

/* a kernel writing at `at` must die of SIGSEGV there: the child runs it, the parent judges */
static int g_report = -1;
__attribute__((unused)) static void on_segv(int, siginfo_t *si, void *) {
    char b[40] = "addr ";
    uintptr_t a = (uintptr_t)si->si_addr;
    int k = 5;
    for (int sh = 60; sh >= 0; sh -= 4) b[k++] = "0123456789abcdef"[(a >> sh) & 15];
    b[k++] = '\n';
    if (write(g_report, b, (size_t)k) < 0) _exit(3);
    signal(SIGSEGV, SIG_DFL);   /* returning re-runs the access: the default action */
}
static void fault_child(bool access, int report) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    int *d = half_mapped(access);
    int *at = access ? d + G / sizeof(int) + 3 : d + 3;   /* granule 1 (unmapped) or 0 (no access) */
    char b[64];
    int k = snprintf(b, sizeof b, "want %016lx\n", (unsigned long)(uintptr_t)at);
    if (write(report, b, (size_t)k) < 0) _exit(3);
#ifndef __SANITIZE_ADDRESS__   /* under ASan its own report (the address, a stack) is what is checked */
    g_report = report;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
#endif
    k_iota<<<1, 1>>>(at, 1, 0);
    cudaDeviceSynchronize();
    k = snprintf(b, sizeof b, "survived\n");
    if (write(report, b, (size_t)k) < 0) _exit(3);
    _exit(0);
}
static void fault_test(bool access) {
    int rep[2], err[2];
    if (pipe(rep) || pipe(err)) { CHECK(false, "pipe"); return; }
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        close(rep[0]);
        close(err[0]);
        dup2(err[1], 2);
        fault_child(access, rep[1]);
    }
    close(rep[1]);
    close(err[1]);
    std::string r, e;
    char b[4096];
    ssize_t k;
    while ((k = read(rep[0], b, sizeof b)) > 0) r.append(b, (size_t)k);
    while ((k = read(err[0], b, sizeof b)) > 0) e.append(b, (size_t)k);
    int stat = 0;
    waitpid(pid, &stat, 0);
    fprintf(stderr, "%s", e.c_str());   /* the child's own report (under ASan: its stack) */
    const size_t w = r.find("want ");
    CHECK(w != std::string::npos, "the child did not get to the launch: %s", r.c_str());
    if (w == std::string::npos) return;
    const std::string want = r.substr(w + 5, 16);
    std::string trimmed = want.substr(want.find_first_not_of('0'));
    CHECK(r.find("survived") == std::string::npos, "the kernel's access to %s did not fault", want.c_str());
    const bool by_signal = WIFSIGNALED(stat) && WTERMSIG(stat) == SIGSEGV && r.find("addr " + want) != std::string::npos;
    const bool by_asan = WIFEXITED(stat) && WEXITSTATUS(stat) != 0 && e.find("SEGV") != std::string::npos &&
                         e.find(trimmed) != std::string::npos && e.find("k_iota") != std::string::npos;
    CHECK(by_signal || by_asan, "the child did not die of SIGSEGV at %s (status %#x, report: %s)", want.c_str(), stat,
          r.c_str());
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "main";
    const char *arg = argc > 2 ? argv[2] : "";
    setenv("CUDASIM_MEM_MB", "8", 1);   /* before the runtime starts: the capacity checks count on it */
    if (!strcmp(mode, "unmapped_copy") || !strcmp(mode, "noaccess_memset")) {
        const bool copy = !strcmp(mode, "unmapped_copy");
        int *d = half_mapped(copy);
        int h[8] = {0};
        /* the copy reaches into granule 1 (unmapped); the memset is in granule 0 (no access) */
        const cudaError_t e = copy ? cudaMemcpy(d + G / sizeof(int) - 4, h, sizeof h, cudaMemcpyHostToDevice)
                                   : cudaMemset(d + 16, 0, 64);
        CHECK(e == cudaErrorIllegalAddress, "%s: %s", mode, cudaGetErrorName(e));
        CHECK(cudaGetLastError() == cudaErrorIllegalAddress && cudaGetLastError() == cudaErrorIllegalAddress,
              "the illegal address is not sticky");
        void *p = nullptr;
        CHECK(cudaMalloc(&p, 16) == cudaErrorIllegalAddress, "the runtime still allocates after an illegal address");
        if (copy) CHECK(cudaMemcpy(h, d, 16, cudaMemcpyDeviceToHost) != cudaSuccess, "a copy after a sticky error");
    } else if (!strcmp(mode, "unmap_pending")) {
        int *d = half_mapped(true);
        cudaStream_t st;
        OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        cudaGraph_t g = nullptr;
        cudaGraphExec_t ge = nullptr;
        g_gate = 0;
        OK(cudaLaunchHostFunc(st, hold, nullptr));
        if (!strcmp(arg, "kernel")) {
            k_iota<<<1, 32, 0, st>>>(d + 100, 32, 0);
        } else if (!strcmp(arg, "graph")) {   /* a captured memset, replayed */
            cudaStream_t cs;
            OK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
            OK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
            OK(cudaMemsetAsync(d + 100, 0, 128, cs));
            OK(cudaStreamEndCapture(cs, &g));
            OK(cudaGraphInstantiate(&ge, g, 0));
            OK(cudaGraphLaunch(ge, st));
        } else {
            OK(cudaMemsetAsync(d + 100, 0, 128, st));
        }
        OK(cudaGetLastError());
        const CUresult r = p_cuMemUnmap((CUdeviceptr)d, G);
        CHECK(r == CUDA_ERROR_ILLEGAL_ADDRESS, "cuMemUnmap under a queued %s: %d", arg, (int)r);
        g_gate = 1;
        CHECK(cudaStreamSynchronize(st) == cudaErrorIllegalAddress, "the refused unmap is not sticky");
        if (ge) cudaGraphExecDestroy(ge);
        if (g) cudaGraphDestroy(g);
    } else if (!strcmp(mode, "fault")) {
        fault_test(!strcmp(arg, "unmapped"));
    } else {
        main_checks();
    }
    printf("cudasim vmm %s %s: %d passed, %d failed\n", mode, arg, g_pass, g_fail);
    return g_fail || !g_pass ? 1 : 0;
}
