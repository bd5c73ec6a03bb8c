/* fuzz_util.h — what the libFuzzer targets in tests/fuzz/ share: a private scratch folder
 * per process and writing an input (or a part of it) to a file there. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *fuzz_dir(void) {
    static char dir[256];
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/volt_fuzz_XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(dir)) abort();
    }
    return dir;
}

static void fuzz_path(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", fuzz_dir(), name); }

static void fuzz_write(const char *path, const uint8_t *d, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(d, 1, n, f) != n) abort();
    fclose(f);
}

static void fuzz_rm_rf(const char *p) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    if (system(cmd) != 0) abort();
}
#endif
