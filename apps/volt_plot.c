/* volt-plot: SVG plots of a metrics.csv (volt's or Lightning's CSVLogger), as volt draws
 * them at the end of fit: loss.svg and accuracy.svg, each metric against the step.
 *   volt-plot runs/text/lightning_logs/version_0/metrics.csv [--out DIR | --out PREFIX]
 * --out an existing folder (or a path ending in '/') writes DIR/loss.svg; any other PREFIX
 * writes PREFIXloss.svg. The default is the CSV's folder; usage errors exit 2. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "volt/trainer.h"

static void usage(FILE *f) {
    fputs("usage: volt-plot METRICS.csv [--out DIR | --out PREFIX]\n"
          "Draw loss.svg and accuracy.svg from a metrics.csv (each metric column against 'step').\n"
          "  -o, --out DIR      write DIR/loss.svg, DIR/accuracy.svg (an existing folder, or a path ending in '/')\n"
          "  -o, --out PREFIX   otherwise write PREFIXloss.svg, PREFIXaccuracy.svg (default: the CSV's folder)\n"
          "  -h, --help         this text\n"
          "      --version      print the version\n", f);
}

int main(int argc, char **argv) {
    static const struct option lo[] = { { "out", required_argument, NULL, 'o' }, { "help", no_argument, NULL, 'h' },
                                        { "version", no_argument, NULL, 'V' }, { NULL, 0, NULL, 0 } };
    const char *out = NULL;
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":o:h", lo, NULL)) != -1) {
        if (o == 'o') out = optarg;
        else if (o == 'h') { usage(stdout); return 0; }
        else if (o == 'V') { printf("volt-plot (volt %d.%d.%d)\n", VOLT_VERSION_MAJOR, VOLT_VERSION_MINOR, VOLT_VERSION_PATCH); return 0; }
        else if (o == ':') { fprintf(stderr, "volt-plot: %s needs a value (try --help)\n", argv[optind - 1]); return 2; }
        else { fprintf(stderr, "volt-plot: unknown option '%s' (try --help)\n", argv[optind - 1]); return 2; }
    }
    if (optind != argc - 1) { fprintf(stderr, "volt-plot: want one metrics.csv (try --help)\n"); return 2; }
    const char *csv = argv[optind];
    char prefix[4096];
    struct stat sb;
    if (out) {      /* a folder gets a '/' so the files go inside it, not beside it */
        const size_t len = strlen(out);
        const bool dir = len > 0 && out[len - 1] != '/' && stat(out, &sb) == 0 && S_ISDIR(sb.st_mode);
        if (snprintf(prefix, sizeof prefix, "%s%s", out, dir ? "/" : "") >= (int)sizeof prefix) {
            fprintf(stderr, "volt-plot: --out '%s': too long\n", out);
            return 2;
        }
    } else {
        const char *slash = strrchr(csv, '/');
        snprintf(prefix, sizeof prefix, "%.*s", slash ? (int)(slash - csv + 1) : 0, csv);
    }
    char err[4400] = "";
    int n = 0;
    volt_status st = volt_plot_metrics_csv(csv, prefix, &n, err, sizeof err);
    if (st < 0) { fprintf(stderr, "volt-plot: %s\n", err); return 1; }
    static const char *const files[] = { "loss.svg", "accuracy.svg" };
    for (int i = 0; i < 2; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s%s", prefix, files[i]);
        if (access(p, R_OK) == 0) printf("wrote %s\n", p);
    }
    return 0;
}
