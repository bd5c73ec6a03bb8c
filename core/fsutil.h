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

#endif
