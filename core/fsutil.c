/* File-system helpers (core/fsutil.h). */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "core/err.h"
#include "core/fsutil.h"

volt_status volt__mkdirs(const char *path, char *err, size_t errlen) {
    const size_t len = path ? strlen(path) : 0;
    if (len == 0) return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "bad directory path '%s'", path ? path : "");
    char *buf = malloc(len + 1);
    if (!buf) return volt__errf(err, errlen, VOLT_ERR_NOMEM, "out of memory");
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        const char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            volt_status st = volt__errf(err, errlen, VOLT_ERR_IO, "cannot create directory '%s': %s", buf, strerror(errno));
            free(buf);
            return st;
        }
        buf[i] = c;
    }
    free(buf);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return volt__errf(err, errlen, VOLT_ERR_IO, "'%s' is not a directory", path);
    return VOLT_OK;
}

bool volt__path_stays_under(const char *name) {
    if (!name || name[0] == '/') return false;
    for (const char *p = name; *p;) {
        const size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') return false;
        p += n;
        while (*p == '/') p++;
    }
    return true;
}

bool volt__file_newer(const struct timespec *ta, const char *a, const struct timespec *tb, const char *b) {
    if (ta->tv_sec != tb->tv_sec) return ta->tv_sec > tb->tv_sec;
    if (ta->tv_nsec != tb->tv_nsec) return ta->tv_nsec > tb->tv_nsec;
    return strcmp(a, b) > 0;
}

int volt__open_regular(const char *path) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        const int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return -2;
    }
    const int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

volt_status volt__write_text_atomic(const char *path, const char *text, char *err, size_t errlen) {
    char tmp[4096 + 8];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "path too long: '%s'", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return volt__errf(err, errlen, VOLT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return volt__errf(err, errlen, VOLT_ERR_IO, "cannot write '%s': %s", tmp, strerror(e));
        }
        off += (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        unlink(tmp);
        return volt__errf(err, errlen, VOLT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return volt__errf(err, errlen, VOLT_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(e));
    }
    return VOLT_OK;
}

bool volt__utf8_ok(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p++;
        int more;
        unsigned min;
        if (c < 0x80) continue;
        else if ((c & 0xE0) == 0xC0) { more = 1; min = 0x80; c &= 0x1F; }
        else if ((c & 0xF0) == 0xE0) { more = 2; min = 0x800; c &= 0x0F; }
        else if ((c & 0xF8) == 0xF0) { more = 3; min = 0x10000; c &= 0x07; }
        else return false;
        for (int i = 0; i < more; i++) {
            if ((*p & 0xC0) != 0x80) return false;
            c = (c << 6) | (*p++ & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
    }
    return true;
}
