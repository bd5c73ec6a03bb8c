/* volt/export.h — VOLT_API marks the functions of the public API. The library is built
 * with -fvisibility=hidden, so only marked names are exported from libvolt.so; everything
 * else (internal volt__* helpers) stays inside it. */
#ifndef VOLT_EXPORT_H
#define VOLT_EXPORT_H

#if defined(_WIN32)
#  define VOLT_API
#elif defined(__GNUC__) || defined(__clang__)
#  define VOLT_API __attribute__((visibility("default")))
#else
#  define VOLT_API
#endif

#endif
