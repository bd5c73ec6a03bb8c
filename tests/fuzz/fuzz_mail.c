/* Mail bodies (RFC 822, MIME, quoted-printable, base64, charsets) and HTML stripping: the
 * first byte picks which; the output must be valid, NUL-terminated UTF-8 of the stated length. */
#include "fuzz_util.h"
#include "volt/text.h"

static int utf8_ok(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++) if (((unsigned char)s[i + j] >> 6) != 2) return 0;
        i += k;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *out = NULL;
    size_t n = 0;
    volt_status st = data[0] & 1 ? volt_text_html_strip((const char *)data + 1, size - 1, &out, &n)
                                 : volt_text_mail_body((const char *)data + 1, size - 1, &out, &n);
    if (st == VOLT_OK && (!out || out[n] != 0 || strlen(out) != n || !utf8_ok(out, n))) abort();
    free(out);
    return 0;
}
