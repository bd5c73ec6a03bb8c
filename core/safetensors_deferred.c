/* safetensors: tensors left in the file by volt_st_open_deferred, checked through in pieces
 * and then read one at a time (volt_st_check, volt_st_read_deferred; a slice of one with
 * volt__st_keep_range). See volt/safetensors.h and core/safetensors_internal.h.
 *
 * Soundness: the check reads every deferred tensor through whole (its stored crc covers all
 * its bytes) and remembers the crc of the bytes a later read will give (all of them, or the
 * kept slice); the read compares the bytes it got with that crc. So what is used is what was
 * checked against the stored crc, even when only a slice is read, and a file changed between
 * the check and the read is caught. A file from elsewhere keeps no crcs: the check then only
 * establishes that every byte is there and what the bytes were, and the read that they did not
 * change since. A tensor no read will use can be left (volt__st_leave): the check skips it and
 * a read of it is refused, so nothing unchecked is ever used. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "core/safetensors_internal.h"

#define ST_PIECE ((size_t)8 << 20)

/* ---- the largest buffer read into, and the tests' hook ------------------------------------------ */
static size_t st_peak;
static uint64_t st_deferred_bytes, st_check_bytes;
static void (*st_check_hook)(const char *path, void *ctx);
static void *st_check_hook_ctx;

void volt__st_note_read(size_t n) {
    size_t cur = __atomic_load_n(&st_peak, __ATOMIC_RELAXED);
    while (n > cur && !__atomic_compare_exchange_n(&st_peak, &cur, n, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}

size_t volt__st_read_peak(bool reset) {
    return reset ? __atomic_exchange_n(&st_peak, 0, __ATOMIC_RELAXED) : __atomic_load_n(&st_peak, __ATOMIC_RELAXED);
}

uint64_t volt__st_deferred_read_bytes(bool reset) {
    return reset ? __atomic_exchange_n(&st_deferred_bytes, 0, __ATOMIC_RELAXED) : __atomic_load_n(&st_deferred_bytes, __ATOMIC_RELAXED);
}

uint64_t volt__st_check_read_bytes(bool reset) {
    return reset ? __atomic_exchange_n(&st_check_bytes, 0, __ATOMIC_RELAXED) : __atomic_load_n(&st_check_bytes, __ATOMIC_RELAXED);
}

void volt__st_set_check_hook(void (*fn)(const char *path, void *ctx), void *ctx) {
    st_check_hook = fn;
    st_check_hook_ctx = ctx;
}

/* ---- checking -------------------------------------------------------------------------------- */
int st_file_crc(const volt_st_file *f, const st_rentry *e, uint32_t *whole, uint32_t *kept) {
    const uint64_t n = e->end - e->begin;
    const size_t cap = n < ST_PIECE ? (size_t)n : ST_PIECE;
    unsigned char *buf = malloc(cap ? cap : 1);
    if (!buf) { errno = 0; return -1; }
    volt__st_note_read(cap);
    uLong c = crc32(0L, Z_NULL, 0), k = c;
    int r = 1;
    for (uint64_t at = 0; at < n && r > 0; at += cap) {
        const size_t m = n - at < cap ? (size_t)(n - at) : cap;
        if ((r = st_pread_full(f->fd, buf, m, f->base + e->begin + at)) <= 0) break;
        __atomic_fetch_add(&st_check_bytes, (uint64_t)m, __ATOMIC_RELAXED);
        c = crc32(c, buf, (uInt)m);
        const uint64_t a = e->ka > at ? e->ka : at, b = e->kb < at + m ? e->kb : at + m;   /* the kept bytes in it */
        if (a < b) k = crc32(k, buf + (a - at), (uInt)(b - a));
    }
    free(buf);
    *whole = (uint32_t)c;
    *kept = (uint32_t)k;
    return r;
}

static volt_status st_check_entry(volt_st_file *f, st_rentry *e, char *err, size_t errlen) {
    if (e->unread || e->left) return VOLT_OK;
    if (!e->deferred) return volt_st_verify(f, e->name, err, errlen);
    uint32_t w = 0, got = 0, kept = 0;
    int has = st_expected_crc(f, e, &w, err, errlen);
    if (has < 0) return has;
    int r = st_file_crc(f, e, &got, &kept);
    if (r < 0)
        return st_fail(err, errlen, errno ? VOLT_ERR_IO : VOLT_ERR_NOMEM, "file '%s': tensor '%s': read failed: %s", f->path,
                       e->name, errno ? strerror(errno) : "out of memory");
    if (r == 0)
        return st_fail(err, errlen, VOLT_ERR_CORRUPT, "file '%s': truncated (shrank while reading tensor '%s')", f->path, e->name);
    if (has && got != w)
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s' crc mismatch (file corrupt?): stored %08x, computed %08x", f->path, e->name,
                       (unsigned)w, (unsigned)got);
    e->kcrc = kept;
    e->checked = true;
    return VOLT_OK;
}

static bool check_bad(void *ctx, int i) {
    volt_st_file *f = ctx;
    char e[8];
    return st_check_entry(f, &f->t[i], e, sizeof e) < 0;
}

/* The tensors are read through on the OpenMP threads (one piece each at a time;
 * volt__st_first_bad). */
volt_status volt_st_check(volt_st_file *f, char *err, size_t errlen) {
    if (!f) return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "volt_st_check: NULL file");
    const int first_bad = volt__st_first_bad(f->n, check_bad, f);
    if (first_bad >= 0) {
        volt_status st = st_check_entry(f, &f->t[first_bad], err, errlen);
        f->t[first_bad].checked = false;
        return st < 0 ? st
                      : st_fail(err, errlen, VOLT_ERR_CORRUPT, "file '%s': tensor '%s' changed while it was being checked",
                                f->path, f->t[first_bad].name);
    }
    if (st_check_hook) st_check_hook(f->path, st_check_hook_ctx);
    return VOLT_OK;
}

/* ---- reading --------------------------------------------------------------------------------- */
volt_status volt__st_keep_range(volt_st_file *f, const char *name, uint64_t a, uint64_t b) {
    st_rentry *e = f && name ? (st_rentry *)st_lookup(f, name) : NULL;   /* f's own table */
    if (!e || !e->deferred || e->checked) return VOLT_ERR_STATE;
    const size_t es = volt_dtype_size(e->dtype);
    if (a > b || b > e->end - e->begin || a % es || b % es) return VOLT_ERR_INVALID_ARG;
    e->ka = a;
    e->kb = b;
    e->left = false;
    return VOLT_OK;
}

volt_status volt__st_leave(volt_st_file *f, const char *name) {
    if (!f) return VOLT_ERR_STATE;
    if (!name) {
        for (int i = 0; i < f->n; i++)
            if (f->t[i].deferred && !f->t[i].checked) f->t[i].left = true;
        return VOLT_OK;
    }
    st_rentry *e = (st_rentry *)st_lookup(f, name);
    if (!e || !e->deferred || e->checked) return VOLT_ERR_STATE;
    e->left = true;
    return VOLT_OK;
}

size_t volt__st_deferred_max_bytes(const volt_st_file *f) {
    size_t m = 0;
    for (int i = 0; f && i < f->n; i++)
        if (f->t[i].deferred && !f->t[i].left && f->t[i].kb - f->t[i].ka > m) m = (size_t)(f->t[i].kb - f->t[i].ka);
    return m;
}

volt_status volt_st_read_deferred(const volt_st_file *f, const char *name, void *dst, size_t cap, char *err, size_t errlen) {
    if (!f || !name || !dst) return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "volt_st_read_deferred: NULL argument");
    const st_rentry *e = st_lookup(f, name);
    if (!e) return st_fail(err, errlen, VOLT_ERR_NOT_FOUND, "file '%s': no tensor '%s'", f->path, name);
    if (!e->deferred || f->fd < 0)
        return st_fail(err, errlen, VOLT_ERR_STATE, "file '%s': tensor '%s' is not deferred", f->path, name);
    if (e->left)
        return st_fail(err, errlen, VOLT_ERR_STATE, "file '%s': tensor '%s' was left unread and unchecked (volt__st_leave)",
                       f->path, name);
    if (!e->checked)
        return st_fail(err, errlen, VOLT_ERR_STATE, "file '%s': tensor '%s' read before volt_st_check", f->path, name);
    const size_t n = (size_t)(e->kb - e->ka);
    if (n > cap) return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "file '%s': tensor '%s': %zu bytes, room for %zu", f->path, name, n, cap);
    volt__st_note_read(n);
    __atomic_fetch_add(&st_deferred_bytes, (uint64_t)n, __ATOMIC_RELAXED);
    int r = st_pread_full(f->fd, dst, n, f->base + e->begin + e->ka);
    if (r < 0) return st_fail(err, errlen, VOLT_ERR_IO, "file '%s': tensor '%s': read failed: %s", f->path, name, strerror(errno));
    if (r == 0) return st_fail(err, errlen, VOLT_ERR_CORRUPT, "file '%s': truncated (shrank after it was checked, at tensor '%s')", f->path, name);
    const uint32_t got = st_crc32(dst, n);
    if (got != e->kcrc)
        return st_fail(err, errlen, VOLT_ERR_CORRUPT, "file '%s': tensor '%s' changed after it was checked (crc %08x, "
                       "checked %08x): the file was written to while it was being loaded", f->path, name, (unsigned)got,
                       (unsigned)e->kcrc);
    return VOLT_OK;
}
