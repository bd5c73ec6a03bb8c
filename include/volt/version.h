/* volt/version.h — the library's version (semantic: a new MAJOR breaks the ABI, and is
 * the SONAME's number: libvolt.so.MAJOR). CMake reads the three macros below to set the
 * project version, so they are the one place it is written. */
#ifndef VOLT_VERSION_H
#define VOLT_VERSION_H

#include "volt/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VOLT_VERSION_MAJOR 0
#define VOLT_VERSION_MINOR 2
#define VOLT_VERSION_PATCH 0
#define VOLT__STR2(x) #x
#define VOLT__STR(x) VOLT__STR2(x)
/* "MAJOR.MINOR.PATCH" of the headers. */
#define VOLT_VERSION_STRING VOLT__STR(VOLT_VERSION_MAJOR) "." VOLT__STR(VOLT_VERSION_MINOR) "." VOLT__STR(VOLT_VERSION_PATCH)
/* One number for compile-time comparisons: 0x00MMmmpp. */
#define VOLT_VERSION_NUMBER ((VOLT_VERSION_MAJOR << 16) | (VOLT_VERSION_MINOR << 8) | VOLT_VERSION_PATCH)

/* The version of the library actually linked, "MAJOR.MINOR.PATCH" (static storage). Compare
 * with the macros to detect a header/library mismatch. */
VOLT_API const char *volt_version(void);
/* The same as VOLT_VERSION_NUMBER, of the linked library. */
VOLT_API unsigned volt_version_number(void);

#ifdef __cplusplus
}
#endif
#endif
