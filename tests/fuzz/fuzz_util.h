/* fuzz_util.h — what the libFuzzer targets in tests/fuzz/ share: a private scratch folder
 * per process and writing an input (or a part of it) to a file there. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline const char *fuzz_dir(void) {
    static char dir[256];
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/volt_fuzz_XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(dir)) abort();
    }
    return dir;
}

static inline void fuzz_path(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", fuzz_dir(), name); }

static inline void fuzz_write(const char *path, const uint8_t *d, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(d, 1, n, f) != n) abort();
    fclose(f);
}

/* Write without failing or blocking (the path may be unwritable on purpose, or a FIFO made
 * by the same input); false when it was not written. */
static inline int fuzz_try_write(const char *path, const uint8_t *d, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) return 0;
    size_t w = 0;
    while (w < n) {
        ssize_t k = write(fd, d + w, n - w);
        if (k <= 0) break;
        w += (size_t)k;
    }
    close(fd);
    return w == n;
}

static inline int fuzz_rm_one(const char *p, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb; (void)type; (void)ftw;
    return remove(p) != 0 && errno != ENOENT;
}

/* rm -rf without a shell (links are removed, never followed) */
static inline void fuzz_rm_rf(const char *p) {
    if (nftw(p, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT) abort();
}
#endif
