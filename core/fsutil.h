/* core/fsutil.h — file-system helpers every layer shares (internal). */
#ifndef VOLT_CORE_FSUTIL_H
#define VOLT_CORE_FSUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include "volt/core.h"

/* mkdir -p: path and every missing parent (0755). VOLT_ERR_IO naming the part that could not
 * be made, or a path that is there but not a folder; VOLT_ERR_INVALID_ARG for an empty path.
 * err may be NULL. */
volt_status volt__mkdirs(const char *path, char *err, size_t errlen);
/* A name meant to stay under the folder it is joined to: false for an absolute path and for one
 * with a ".." component ("../x", "a/../../b", ".."). */
bool volt__path_stays_under(const char *name);
/* The rule "last" picks files by, wherever it does (ModelCheckpoint, the trainer, the public
 * volt_checkpoint_find_last): file a (modified at ta) is newer than file b (at tb) when ta is
 * later, or the times are equal and a's path is the greater string. */
/* A small text file written whole or not at all: path.tmp, fsync, rename over path. err may be NULL. */
volt_status volt__write_text_atomic(const char *path, const char *text, char *err, size_t errlen);
/* path opened read-only (O_CLOEXEC) when it is a regular file: a FIFO, a device or a folder in
 * its place is refused at once (opened without blocking, checked on the open file; reads block
 * as usual afterwards). The fd; -1 with errno when it cannot be opened or stat'ed; -2 when it
 * is there but not a regular file. */
int volt__open_regular(const char *path);
/* s is well-formed UTF-8 (no overlong form, surrogate or code point past U+10FFFF): what a
 * name written into a file must be (a safetensors header, a TensorBoard tag). */
bool volt__utf8_ok(const char *s);
struct timespec;
bool volt__file_newer(const struct timespec *ta, const char *a, const struct timespec *tb, const char *b);

#endif
