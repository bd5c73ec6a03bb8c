/* Private helpers shared by data/text_*.c (not installed). */
#ifndef VOLT_DATA_TEXT_INTERNAL_H
#define VOLT_DATA_TEXT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growing byte string, always NUL-terminated once anything was reserved; `oom` sticks
 * after a failed allocation and makes later puts no-ops. */
typedef struct volt__tbuf { char *p; size_t n, cap; bool oom; } volt__tbuf;

bool volt__tbuf_reserve(volt__tbuf *b, size_t more);
void volt__tbuf_put(volt__tbuf *b, const char *s, size_t n);
static inline void volt__tbuf_putc(volt__tbuf *b, char c) {
    if (b->n + 2 > b->cap && !volt__tbuf_reserve(b, 1)) return;
    b->p[b->n++] = c;
    b->p[b->n] = '\0';
}
void volt__tbuf_put_cp(volt__tbuf *b, uint32_t cp);          /* code point as UTF-8 */

bool volt__utf8_valid(const char *s, size_t n);
size_t volt__utf8_invalid_at(const char *s, size_t n);      /* first ill-formed byte; n: valid */
uint32_t volt__cp1252(unsigned char c);                      /* 0 = unassigned */
void volt__put_cp1252(volt__tbuf *b, const char *s, size_t n); /* Windows-1252 -> UTF-8 */
/* Invalid UTF-8 dropped, whitespace runs (and U+00A0) -> one space, ends trimmed. */
void volt__put_clean(volt__tbuf *b, const char *s, size_t n);
/* HTML -> text without the whitespace clean-up. */
void volt__html_to_text(volt__tbuf *b, const char *s, size_t n);

#endif
