/* Peak memory of importing pretrained DistilBERT weights (volt_distilbert_load, through
 * init_weights as the text app's --pretrained does): the model of a preset is set up on the
 * cpu, its weights read from a Hugging Face folder, and the process's peak RSS printed next to
 * the parameters' own bytes. Public API only, so the same file builds against an older libvolt
 * for a before/after (docs/BENCHMARKS.md).
 *   bench_pretrained_load DIR [PRESET]      DIR holds model.safetensors (and config.json: the shape) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "volt/volt.h"
#include "volt/distilbert.h"

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s DIR [PRESET]\n", argv[0]); return 2; }
    volt_distilbert_config c;
    volt_distilbert_config_init(&c);
    volt_distilbert_preset(&c, argc > 2 ? argv[2] : "distilbert-base");
    c.n_classes = 2;
    c.pretrained_dir = argv[1];
    void *m = NULL;
    volt_params *ps = NULL;
    volt_params_config pc;
    volt_params_config_init(&pc);
    if (volt_distilbert_create(&c, &m) < 0 || volt_params_create(&pc, &ps) < 0 || volt_distilbert_ops.setup(m, ps) < 0 ||
        volt_params_finalize(ps) < 0) {
        fprintf(stderr, "setup failed: %s\n", ps ? volt_params_errmsg(ps) : "");
        return 1;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    volt_status st = volt_distilbert_ops.init_weights(m, ps);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (st < 0) { fprintf(stderr, "load failed: %s\n", volt_params_errmsg(ps)); return 1; }
    int64_t numel = 0;
    for (int i = 0; i < volt_params_count(ps); i++) numel += volt_tensor_numel(volt_params_at(ps, i));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%-12s %14s %14s %10s\n", "preset", "params MB", "peak RSS MB", "load s");
    printf("%-12s %14.1f %14.1f %10.2f\n", argc > 2 ? argv[2] : "distilbert-base", (double)numel * 4 / 1e6, (double)ru.ru_maxrss / 1e3,
           (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec));
    volt_params_destroy(ps);
    volt_distilbert_destroy(m);
    return 0;
}
