/* core/hostmem.h — large host buffers on transparent huge pages. A buffer of hundreds of MB
 * touched once (a checkpoint read, the cpu backend's parameters and Adam states) faults once
 * per 4 KiB page otherwise; the kernel here grants 2 MiB pages when asked (madvise). */
#ifndef VOLT_HOSTMEM_H
#define VOLT_HOSTMEM_H
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define VOLT_HUGE_PAGE ((size_t)2 << 20)

/* bytes rounded up to whole huge pages, aligned to one; free() it. NULL when out of memory. */
static inline void *volt__huge_alloc(size_t bytes) {
    if (bytes > SIZE_MAX - (VOLT_HUGE_PAGE - 1)) return NULL;   /* the rounding would wrap to a small block */
    const size_t r = (bytes + VOLT_HUGE_PAGE - 1) / VOLT_HUGE_PAGE * VOLT_HUGE_PAGE;
    void *p = aligned_alloc(VOLT_HUGE_PAGE, r ? r : VOLT_HUGE_PAGE);
    if (p) (void)madvise(p, r ? r : VOLT_HUGE_PAGE, MADV_HUGEPAGE);
    return p;
}
#endif
