/* libvolt_cudasim_cublasLt.so: a CPU simulation of cuBLASLt for volt's tests.
 *
 * core/cuda/gemm.c dlopens cuBLASLt ($VOLT_CUBLASLT); pointed at this file it gets the 14 entry points of its
 * LT_FUNCS list with the real signatures and C linkage of /usr/local/cuda/include/cublasLt.h (included below, so
 * enums, attribute numbers and struct layouts are the real ones). Device memory is host memory (the simulated
 * runtime, tests/cudasim/runtime.cc); the work of cublasLtMatmul is queued on the stream with cudaLaunchHostFunc.
 *
 * WHAT IT SIMULATES
 * - Handles, matmul descriptors, matrix layouts and preferences as live objects: a destroyed or unknown object
 *   passed back is refused (INVALID_VALUE; NOT_INITIALIZED for the handle) instead of being read.
 * - cublasLtMatmul: D = alpha op(A) op(B) + beta C (+ epilogue), column-major (CUBLASLT_ORDER_COL), strided batch
 *   (BATCH_COUNT, STRIDED_BATCH_OFFSET; a stride of 0 broadcasts), any leading dimension >= rows, transposes N and
 *   T (C = T for real types), C == D in place or C != D out of place (C's ld may be 0: column broadcast).
 *   Compute types CUBLAS_COMPUTE_32F (and _PEDANTIC, the same numbers here) with A = B of CUDA_R_32F, CUDA_R_16BF or
 *   CUDA_R_16F, and CUBLAS_COMPUTE_32F_FAST_TF32 with A = B = CUDA_R_32F; scale type CUDA_R_32F; C = D = CUDA_R_32F.
 *   Pointer modes HOST (alpha/beta read during the call, as the real one bakes them into the launch) and DEVICE
 *   (read when the stream runs the job). k = 0 gives D = beta C (+ bias) with A and B unread (may be NULL), m = 0 or
 *   n = 0 does nothing, as BLAS defines them (volt never asks; not checked against the real library).
 * - Epilogues DEFAULT, BIAS (bias[i] added to every column of D: the vector has D's row count, CUDA_R_32F = Dtype,
 *   BIAS_BATCH_STRIDE per batch), BGRADA (bias[i] = sum over k of op(A)(i, k): D's rows) and BGRADB (bias[j] = sum
 *   over k of op(B)(k, j): D's columns), both written as CUDA_R_32F (= Dtype).
 * - Numerics: operands converted to float (bf16 / f16 exactly); under FAST_TF32 each f32 operand is first rounded
 *   to TF32 (10-bit mantissa, round to nearest, ties away from zero as PTX cvt.rna.tf32.f32; inf/NaN kept). Each
 *   product is a float product, the k products are summed in double in increasing k, the sum is rounded to float
 *   acc; then D = fl(fl(alpha * acc) + fl(beta * C)) (beta == 0: C is not read, NaN in C does not propagate), then
 *   + bias, each step rounded to float, no FMA. Deterministic. Bias gradients: double sums of the unrounded
 *   operands, rounded to float.
 * - Stream order: the job (every descriptor, layout, scalar and pointer copied at call time) runs when the stream
 *   reaches it, so A, B, C and the bias are read then, and D written then. Under graph capture (cudaStreamIsCapturing
 *   says so) the job is kept until the process exits, so each graph launch can replay it.
 * - cublasLtMatmulAlgoGetHeuristic returns one algorithm (returnAlgoCount 1, workspaceSize 0, state SUCCESS,
 *   wavesCount 1) or the status of the problem's rejection (below) with returnAlgoCount 0; with
 *   CUDASIM_LT_NO_EPILOGUE=1 it has none (NOT_SUPPORTED) for any epilogue, as a real library may.
 *
 * WHAT IT REJECTS (validation is at heuristic time for the problem, and again at matmul time with the pointers)
 * - INVALID_VALUE: NULL out-pointers, buf NULL or a size that is not the attribute's, an unknown attribute, a
 *   requestedAlgoCount <= 0, op(A) / op(B) / C / D whose sizes do not chain (m x k, k x n, m x n), an ld < rows
 *   (ld < 1), batch counts < 1 or different between A, B, C and D, a transpose other than N/T/C, C == D with
 *   different C and D layouts, NULL A / B / D (when m, n, k > 0), NULL alpha or beta, NULL C with beta != 0 (or
 *   with device pointer mode), BIAS / BGRAD with a NULL bias pointer at matmul, a workspace of nonzero size that
 *   is NULL or not 256-byte aligned, an algo not made by this library's heuristic or made for other types.
 * - NOT_SUPPORTED: a data type / compute type / scale type combination outside the list above (the real library
 *   has more: see "not simulated"), a bias type other than CUDA_R_32F, TRANSC != N, a fill mode other than FULL,
 *   rows or columns past INT32_MAX, an A / B / C / D / bias pointer not aligned to its element size or to the
 *   preference's MIN_ALIGNMENT_*_BYTES the algo was chosen with (default 256; not for the bias), an algo chosen for another
 *   epilogue, and everything listed as not simulated.
 * - EXECUTION_FAILED: a bias pointer less aligned than the algo assumed (the heuristic reads the descriptor's
 *   BIAS_POINTER to choose; NULL there means 16 bytes, a real kernel's widest bias load). The real kernel faults
 *   with a misaligned address, asynchronously; here it is reported by the call.
 *
 * WHERE IT DELIBERATELY DIFFERS FROM THE REAL LIBRARY (stricter, so bugs show here first)
 * - Alignment is held to the promise: a pointer less aligned than the preference the algo was chosen with is
 *   refused even where a real kernel would happen to cope.
 * - Overlaps the real library does not check (it computes garbage or races) are refused with INVALID_VALUE: D
 *   overlapping itself (two elements at one address across columns or batches), D overlapping A, B, C (when
 *   C != D) or the bias vector, a bias gradient output overlapping A or B. Overlap is exact (column segments),
 *   so interleaved but disjoint layouts pass.
 * - Attributes volt does not use and this file does not model are refused with NOT_SUPPORTED when set instead of
 *   being ignored (see "not simulated"); CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT
 *   and CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK are accepted (the one algorithm has no split-K reduction and
 *   passes any such filter).
 * - cublasLtGetStatusString appends the reason of this thread's last failure with that status
 *   ("... [cublasLt sim: D's ld 3 < rows 4]"); with CUBLASLT_LOG_LEVEL >= 1 every failure is also printed on
 *   stderr. volt_cudasim_cublaslt_last_error() (an extra export) returns the reason. Rejections are synchronous;
 *   nothing is queued and D is untouched.
 * - Every problem needs workspace 0, so no workspace preference is ever too small.
 *
 * NOT SIMULATED (refused with NOT_SUPPORTED and a reason naming it): C/D types other than CUDA_R_32F (the real one
 * also takes 16F/16BF C = D with same-type A/B), 8-bit and complex types, compute types 16F, 32F_FAST_16F,
 * 32F_FAST_16BF, 32F_EMULATED_*, 64F, 32I; orders other than COL; pointer-array batches; planar complex; vector
 * pointer modes; RELU / GELU / DRELU / DGELU and AUX epilogues; A/B/C/D scale pointers, amax, fp8 fast accumulation,
 * scale modes, emulation descriptors; search mode LIMITED_BY_ALGO_ID, IMPL_MASK; all other entry points of
 * cublasLt.h (MatrixTransform, AlgoGetIds / Init / Check / Cap / Config, Get*Attribute, the logger, ...).
 * cuBLASLt's own restrictions on BGRADA / BGRADB (which transposes and types its kernels take) are not modelled.
 *
 * Runtime calls made: cudaLaunchHostFunc, and cudaStreamIsCapturing (weak: a runtime without it makes every job
 * kept until exit, correct but unbounded). The queued host function makes no CUDA call.
 *
 * Files: cublaslt.cc (the entry points), cublaslt_problem.cc (validation, the algorithm, overlaps), cublaslt_run.cc
 * (the numbers: the queued job), cublaslt_sim.h (their private header). Build (standalone), from the repository root:
 *   g++ -std=c++17 -O2 -fPIC -shared -I/usr/local/cuda/include tests/cudasim/cublaslt.cc
 *       tests/cudasim/cublaslt_problem.cc tests/cudasim/cublaslt_run.cc -o libvolt_cudasim_cublasLt.so
 * (test: tests/cudasim/test_cublaslt_sim.cc) */
#include "cublaslt_sim.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#pragma weak cudaStreamIsCapturing

using namespace volt_lt_sim;

extern "C" const char *volt_cudasim_cublaslt_last_error(void);

extern "C" {

const char *volt_cudasim_cublaslt_last_error(void) { return last_reason(); }

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t *lightHandle) {
    if (!lightHandle) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate", "lightHandle is NULL");
    cublasLtContext *h = new (std::nothrow) cublasLtContext{ ALGO_MAGIC };
    if (!h) return CUBLAS_STATUS_ALLOC_FAILED;
    add_live(h, K_HANDLE);
    *lightHandle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t lightHandle) {
    if (!remove_live(lightHandle, K_HANDLE))
        return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy", "the handle is NULL or not live");
    delete lightHandle;
    return CUBLAS_STATUS_SUCCESS;
}

const char *CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
    const char *s;
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: s = "the operation completed successfully"; break;
    case CUBLAS_STATUS_NOT_INITIALIZED: s = "the library was not initialized"; break;
    case CUBLAS_STATUS_ALLOC_FAILED: s = "the resource allocation failed"; break;
    case CUBLAS_STATUS_INVALID_VALUE: s = "an invalid numeric value was used as an argument"; break;
    case CUBLAS_STATUS_ARCH_MISMATCH: s = "an absent device architectural feature is required"; break;
    case CUBLAS_STATUS_MAPPING_ERROR: s = "an access to GPU memory space failed"; break;
    case CUBLAS_STATUS_EXECUTION_FAILED: s = "the GPU program failed to execute"; break;
    case CUBLAS_STATUS_INTERNAL_ERROR: s = "an internal operation failed"; break;
    case CUBLAS_STATUS_NOT_SUPPORTED: s = "the functionality requested is not supported"; break;
    case CUBLAS_STATUS_LICENSE_ERROR: s = "the functionality requested requires some license"; break;
    default: s = "unknown error"; break;
    }
    if (status == CUBLAS_STATUS_SUCCESS || status != last_status() || !*last_reason()) return s;
    thread_local std::string msg;
    msg = std::string(s) + " [cublasLt sim: " + last_reason() + "]";
    return msg.c_str();
}

/* ---- preference ---- */
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
    if (!pref) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate", "pref is NULL");
    Pref *p = new (std::nothrow) Pref{ CUBLASLT_SEARCH_BEST_FIT, 0xffffffffu, 0, { 256, 256, 256, 256 }, 0.f };
    if (!p) return CUBLAS_STATUS_ALLOC_FAILED;
    add_live(p, K_PREF);
    *pref = reinterpret_cast<cublasLtMatmulPreference_t>(p);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    if (!remove_live(pref, K_PREF))
        return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceDestroy", "pref is NULL or not live");
    delete reinterpret_cast<Pref *>(pref);
    return CUBLAS_STATUS_SUCCESS;
}

#define SET_CHECK(fn, obj, kind, T)                                                                                   \
    do {                                                                                                              \
        if (!is_live(obj, kind)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "the %s is NULL or not live", kind_name[kind]); \
        if (!buf) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute %d: buf is NULL", (int)attr);               \
        if (sizeInBytes != sizeof(T))                                                                                 \
            return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute %d: sizeInBytes %zu, the attribute is %zu bytes", \
                        (int)attr, sizeInBytes, sizeof(T));                                                           \
    } while (0)

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                  cublasLtMatmulPreferenceAttributes_t attr,
                                                                  const void *buf, size_t sizeInBytes) {
    static const char fn[] = "cublasLtMatmulPreferenceSetAttribute";
    Pref *p = reinterpret_cast<Pref *>(pref);
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: {
        SET_CHECK(fn, pref, K_PREF, uint32_t);
        uint32_t v;
        memcpy(&v, buf, 4);
        if (v != CUBLASLT_SEARCH_BEST_FIT)
            return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "search mode %u is not simulated (BEST_FIT only)", v);
        p->search = v;
        return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
        SET_CHECK(fn, pref, K_PREF, uint64_t);
        memcpy(&p->max_ws, buf, 8);
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
        SET_CHECK(fn, pref, K_PREF, uint32_t);
        memcpy(&p->red_mask, buf, 4);
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: {
        SET_CHECK(fn, pref, K_PREF, uint32_t);
        uint32_t v;
        memcpy(&v, buf, 4);
        if (v == 0 || (v & (v - 1)))
            return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "minimum alignment %u is not a power of two", v);
        p->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = v;
        return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT:
        SET_CHECK(fn, pref, K_PREF, float);
        memcpy(&p->waves, buf, 4);
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_IMPL_MASK:
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "CUBLASLT_MATMUL_PREF_IMPL_MASK is not simulated");
    default:
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute %d is not a preference attribute", (int)attr);
    }
}

/* ---- matrix layout ---- */
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                                       uint64_t rows, uint64_t cols, int64_t ld) {
    if (!matLayout) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate", "matLayout is NULL");
    Layout *l = new (std::nothrow) Layout{ (uint32_t)type, CUBLASLT_ORDER_COL, rows, cols, ld, 1, 0, 0, CUBLASLT_BATCH_MODE_STRIDED };
    if (!l) return CUBLAS_STATUS_ALLOC_FAILED;
    add_live(l, K_LAYOUT);
    *matLayout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
    if (!remove_live(matLayout, K_LAYOUT))
        return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutDestroy", "the layout is NULL or not live");
    delete reinterpret_cast<Layout *>(matLayout);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                             cublasLtMatrixLayoutAttribute_t attr, const void *buf,
                                                             size_t sizeInBytes) {
    static const char fn[] = "cublasLtMatrixLayoutSetAttribute";
    Layout *l = reinterpret_cast<Layout *>(matLayout);
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: SET_CHECK(fn, matLayout, K_LAYOUT, uint32_t); memcpy(&l->type, buf, 4); break;
    case CUBLASLT_MATRIX_LAYOUT_ORDER: SET_CHECK(fn, matLayout, K_LAYOUT, int32_t); memcpy(&l->order, buf, 4); break;
    case CUBLASLT_MATRIX_LAYOUT_ROWS: SET_CHECK(fn, matLayout, K_LAYOUT, uint64_t); memcpy(&l->rows, buf, 8); break;
    case CUBLASLT_MATRIX_LAYOUT_COLS: SET_CHECK(fn, matLayout, K_LAYOUT, uint64_t); memcpy(&l->cols, buf, 8); break;
    case CUBLASLT_MATRIX_LAYOUT_LD: SET_CHECK(fn, matLayout, K_LAYOUT, int64_t); memcpy(&l->ld, buf, 8); break;
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: SET_CHECK(fn, matLayout, K_LAYOUT, int32_t); memcpy(&l->batch, buf, 4); break;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
        SET_CHECK(fn, matLayout, K_LAYOUT, int64_t);
        memcpy(&l->stride, buf, 8);
        break;
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET: SET_CHECK(fn, matLayout, K_LAYOUT, int64_t); memcpy(&l->plane, buf, 8); break;
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE: SET_CHECK(fn, matLayout, K_LAYOUT, uint32_t); memcpy(&l->bmode, buf, 4); break;
    default: return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute %d is not a matrix layout attribute", (int)attr);
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- matmul descriptor ---- */
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType) {
    if (!matmulDesc) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate", "matmulDesc is NULL");
    Desc *d = new (std::nothrow) Desc{ (int32_t)computeType, (int32_t)scaleType, CUBLASLT_POINTER_MODE_HOST, CUBLAS_OP_N, CUBLAS_OP_N,
                        CUBLAS_OP_N, CUBLAS_FILL_MODE_FULL, 0, CUBLASLT_EPILOGUE_DEFAULT, nullptr, 0, -1 };
    if (!d) return CUBLAS_STATUS_ALLOC_FAILED;
    add_live(d, K_DESC);
    *matmulDesc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
    if (!remove_live(matmulDesc, K_DESC))
        return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescDestroy", "the descriptor is NULL or not live");
    delete reinterpret_cast<Desc *>(matmulDesc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr, const void *buf,
                                                           size_t sizeInBytes) {
    static const char fn[] = "cublasLtMatmulDescSetAttribute";
    Desc *d = reinterpret_cast<Desc *>(matmulDesc);
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: SET_CHECK(fn, matmulDesc, K_DESC, int32_t); memcpy(&d->compute, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: SET_CHECK(fn, matmulDesc, K_DESC, int32_t); memcpy(&d->scale, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: SET_CHECK(fn, matmulDesc, K_DESC, int32_t); memcpy(&d->pmode, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_TRANSA: SET_CHECK(fn, matmulDesc, K_DESC, int32_t); memcpy(&d->ta, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: SET_CHECK(fn, matmulDesc, K_DESC, int32_t); memcpy(&d->tb, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_TRANSC: SET_CHECK(fn, matmulDesc, K_DESC, int32_t); memcpy(&d->tc, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_FILL_MODE: SET_CHECK(fn, matmulDesc, K_DESC, int32_t); memcpy(&d->fill, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: SET_CHECK(fn, matmulDesc, K_DESC, uint32_t); memcpy(&d->epi, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: SET_CHECK(fn, matmulDesc, K_DESC, void *); memcpy(&d->bias, buf, sizeof(void *)); break;
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
        SET_CHECK(fn, matmulDesc, K_DESC, int64_t);
        memcpy(&d->bias_stride, buf, 8);
        break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: SET_CHECK(fn, matmulDesc, K_DESC, int32_t); memcpy(&d->bias_type, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: SET_CHECK(fn, matmulDesc, K_DESC, int32_t); memcpy(&d->sm, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: case CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE:
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER: case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER: case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER:
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: case CUBLASLT_MATMUL_DESC_A_SCALE_MODE: case CUBLASLT_MATMUL_DESC_B_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_C_SCALE_MODE: case CUBLASLT_MATMUL_DESC_D_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE: case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE: case CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR:
        if (!is_live(matmulDesc, K_DESC)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "the matmul descriptor is NULL or not live");
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "matmul descriptor attribute %d is not simulated", (int)attr);
    default: return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute %d is not a matmul descriptor attribute", (int)attr);
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- heuristic ---- */
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                                           cublasLtMatmulDesc_t operationDesc,
                                                           cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                                           cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                                           cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                                           cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                                           int *returnAlgoCount) {
    static const char fn[] = "cublasLtMatmulAlgoGetHeuristic";
    if (returnAlgoCount) *returnAlgoCount = 0;
    if (!is_live(lightHandle, K_HANDLE)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "the handle is NULL or not live");
    if (requestedAlgoCount <= 0)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "requestedAlgoCount %d <= 0", requestedAlgoCount);
    if (!heuristicResultsArray || !returnAlgoCount)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "heuristicResultsArray or returnAlgoCount is NULL");
    if (!is_live(preference, K_PREF)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "the preference is NULL or not live");
    Problem p;
    cublasStatus_t st = resolve(fn, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
    if (st) return st;
    /* CUDASIM_LT_NO_EPILOGUE=1: no algorithm for a fused epilogue, as a real library may answer for a type, layout
     * or alignment it has no fused kernel for (NOT_SUPPORTED, 0 results): the caller's fallback runs */
    const char *ne = getenv("CUDASIM_LT_NO_EPILOGUE");
    if (ne && *ne && strcmp(ne, "0") && p.epi != CUBLASLT_EPILOGUE_DEFAULT)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "no algorithm with epilogue %u (CUDASIM_LT_NO_EPILOGUE)", p.epi);
    const Pref *pr = reinterpret_cast<const Pref *>(preference);
    cublasLtMatmulHeuristicResult_t &r = heuristicResultsArray[0];
    memset(&r, 0, sizeof r);
    make_algo(p, pr->align, &r.algo);
    r.workspaceSize = 0;
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- matmul ---- */
/* CUDASIM_TRACE=path: one line per matmul, appended to the runtime's launch trace. */
static FILE *trace_file() {
    static FILE *f;
    static std::once_flag once;
    std::call_once(once, [] {
        const char *p = getenv("CUDASIM_TRACE");
        if (p && *p) f = fopen(p, "a");
    });
    return f;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                                           const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                                           const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                                           const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                                           cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                                           void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
    static const char fn[] = "cublasLtMatmul";
    if (!is_live(lightHandle, K_HANDLE)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "the handle is NULL or not live");
    Problem p;
    cublasStatus_t st = resolve(fn, computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
    if (st) return st;

    /* the algorithm: the heuristic's, for these types and this epilogue; NULL = an implicit heuristic query with
       default preferences (256-byte alignment) */
    cublasLtMatmulAlgo_t implicit;
    if (!algo) {
        const uint32_t def[4] = { 256, 256, 256, 256 };
        make_algo(p, def, &implicit);
        algo = &implicit;
    }
    if (algo->data[0] != ALGO_MAGIC)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "algo was not made by cublasLtMatmulAlgoGetHeuristic");
    if (algo->data[1] != fingerprint(p))
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn,
                    "algo was chosen for other compute/scale/data types than this descriptor and these layouts");
    if (algo->data[2] != p.epi)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "algo was chosen for epilogue %llu, the descriptor has %u",
                    (unsigned long long)algo->data[2], p.epi);

    /* scalars and pointers */
    if (!alpha || !beta) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "alpha or beta is NULL");
    const bool dev = p.pmode == CUBLASLT_POINTER_MODE_DEVICE;
    float alpha_v = 0.f, beta_v = 0.f;
    if (!dev) {
        memcpy(&alpha_v, alpha, 4);
        memcpy(&beta_v, beta, 4);
    }
    const bool work = p.m > 0 && p.n > 0;
    const bool reads_c = dev || beta_v != 0.f;
    if (work && ((p.k > 0 && (!A || !B)) || !D))
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "%s is NULL", !D ? "D" : !A ? "A" : "B");
    if (work && reads_c && !C)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "C is NULL but beta %s", dev ? "is a device pointer" : "!= 0");
    const size_t es = elem_size(p.abtype);
    if ((st = check_pointer(fn, "A", A, p.abtype, algo->data[3])) || (st = check_pointer(fn, "B", B, p.abtype, algo->data[4])) ||
        (C && (st = check_pointer(fn, "C", C, p.C.type, algo->data[5]))) ||
        (st = check_pointer(fn, "D", D, p.D.type, algo->data[6])))
        return st;
    const bool in_place = C == D;
    if (C && in_place && !same_layout(p.C, p.D))
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "C == D (in place) but Cdesc (ld %lld) differs from Ddesc (ld %lld)",
                    (long long)p.C.ld, (long long)p.D.ld);
    if (p.epi != CUBLASLT_EPILOGUE_DEFAULT && work) {
        if (!p.bias)
            return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "epilogue %u needs CUBLASLT_MATMUL_DESC_BIAS_POINTER", p.epi);
        if ((uintptr_t)p.bias % 4)
            return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "bias = %p is not aligned to its 4-byte elements", p.bias);
        if ((uintptr_t)p.bias % algo->data[7])
            return fail(CUBLAS_STATUS_EXECUTION_FAILED, fn,
                        "bias = %p is %u-byte aligned but the algo assumed %llu (the heuristic saw %s): the kernel "
                        "would fault on a misaligned address",
                        p.bias, ptr_align(p.bias), (unsigned long long)algo->data[7],
                        algo->data[7] == 16 ? "no bias pointer or a 16-byte aligned one" : "a less aligned one");
    }
    if (workspaceSizeInBytes && (!workspace || (uintptr_t)workspace % 256))
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "workspace %p of %zu bytes: it must be non-NULL and 256-byte aligned",
                    workspace, workspaceSizeInBytes);

    if (FILE *tf = trace_file()) {   /* CUDASIM_TRACE (README.md, "Launch trace") */
        flockfile(tf);
        fprintf(tf, "gemm cublasLtMatmul 0,0,0 0,0,0 0 %lld %lld %lld %d %zu %d %g %d\n", (long long)p.m, (long long)p.n,
                (long long)p.k, p.D.batch, es, (int)p.epi, (double)beta_v, (int)dev);
        fflush(tf);
        funlockfile(tf);
    }

    /* overlaps the real library does not check (it would compute garbage) */
    if (work) {
        const Segs sd = segs(D, p.D, 4);
        if (self_overlap(sd))
            return fail(CUBLAS_STATUS_INVALID_VALUE, fn,
                        "D's elements overlap each other (ld %lld, batch stride %lld, %llu x %llu, batch %d)",
                        (long long)p.D.ld, (long long)p.D.stride, (unsigned long long)p.D.rows,
                        (unsigned long long)p.D.cols, p.D.batch);
        const Segs sa = segs(A, p.A, es), sb = segs(B, p.B, es);
        if (overlap(sd, sa)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "D overlaps A");
        if (overlap(sd, sb)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "D overlaps B");
        if (C && !in_place && reads_c && overlap(sd, segs(C, p.C, 4)))
            return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "D overlaps C but C != D (out of place)");
        if (p.epi != CUBLASLT_EPILOGUE_DEFAULT) {
            const int64_t len = p.epi == CUBLASLT_EPILOGUE_BGRADB ? p.n : p.m;
            Segs sbias;
            for (int32_t b = 0; b < p.D.batch; b++) {
                const uintptr_t lo = (uintptr_t)p.bias + (uintptr_t)(b * p.bias_stride * 4);
                sbias.push_back({ lo, lo + (uintptr_t)len * 4 });
            }
            std::sort(sbias.begin(), sbias.end());
            if (overlap(sd, sbias)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "D overlaps the bias vector");
            if (p.epi != CUBLASLT_EPILOGUE_BIAS && (overlap(sbias, sa) || overlap(sbias, sb) || self_overlap(sbias)))
                return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "the bias gradient overlaps A, B or itself");
        }
    }
    if (!work) return CUBLAS_STATUS_SUCCESS;

    Job *j = new (std::nothrow) Job{ p, A, B, reads_c ? C : nullptr, D, const_cast<void *>(p.bias), alpha_v, beta_v,
                      dev ? static_cast<const float *>(alpha) : nullptr, dev ? static_cast<const float *>(beta) : nullptr,
                      true };
    if (!j) return fail(CUBLAS_STATUS_ALLOC_FAILED, fn, "out of host memory for the queued job");
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (&cudaStreamIsCapturing != nullptr) {
        if (cudaStreamIsCapturing(stream, &cap) != cudaSuccess) cap = cudaStreamCaptureStatusActive;   /* keep: safe */
        j->kept = cap != cudaStreamCaptureStatusNone;
    }
    if (j->kept) {
        std::lock_guard<std::mutex> g(g_mu);
        g_kept.push_back(j);
    }
    if (cudaLaunchHostFunc(stream, run_job, j) != cudaSuccess) {
        if (j->kept) {
            std::lock_guard<std::mutex> g(g_mu);
            g_kept.erase(std::find(g_kept.begin(), g_kept.end(), static_cast<void *>(j)));
        }
        delete j;
        return fail(CUBLAS_STATUS_EXECUTION_FAILED, fn, "cudaLaunchHostFunc failed on stream %p", (void *)stream);
    }
    return CUBLAS_STATUS_SUCCESS;
}

}   // extern "C"
