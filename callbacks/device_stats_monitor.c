/* DeviceStatsMonitor (Lightning's): the device's stats around the training batches the
 * loggers write a row for (every log_every_n_steps optimizer steps), logged as step metrics
 * "DeviceStatsMonitor.on_train_batch_start/<stat>" (sampled before the batch that makes the
 * step) and "DeviceStatsMonitor.on_train_batch_end/<stat>" (after it).
 *
 * Stats: on a device with memory of its own (cuda) torch.cuda.memory_stats' names for
 * volt_trainer_device_memory — allocated_bytes.all.current / .peak, reserved_bytes.all.current
 * / .peak; on the cpu (and with cpu_stats = 1 on a GPU too) Lightning's CPU stats, psutil's
 * figures for the whole host, from /proc: cpu_percent (busy time over all time since the
 * previous sample, psutil.cpu_percent()), cpu_vm_percent ((MemTotal - MemAvailable) /
 * MemTotal) and cpu_swap_percent ((SwapTotal - SwapFree) / SwapTotal; 0 without swap).
 * A sample reads two /proc files into a buffer on the stack (no allocation) and asks the
 * backend for its counters (no device synchronization). $VOLT_PROC_DIR (tests) reads the two
 * files from another folder. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "volt/trainer.h"
#include "callbacks/util.h"

enum { ST_ALLOC, ST_ALLOC_PEAK, ST_RES, ST_RES_PEAK, ST_CPU, ST_VM, ST_SWAP, N_STATS };
static const char *const stat_names[N_STATS] = {
    "allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
    "reserved_bytes.all.peak", "cpu_percent", "cpu_vm_percent", "cpu_swap_percent",
};
enum { AT_START, AT_END };

typedef struct dsm {
    int cpu_stats;                     /* the config's: -1 auto, 0, 1 */
    bool device, host;                 /* this fit logs the device's memory / the host's stats */
    bool training;
    int64_t seen_step;                 /* global_step at the last train batch end */
    unsigned long long busy0, total0;  /* /proc/stat at the previous sample */
    char names[2][N_STATS][80];        /* "DeviceStatsMonitor.on_train_batch_start/cpu_percent", ... */
    char stat_path[300], meminfo_path[300];   /* /proc/stat, /proc/meminfo ($VOLT_PROC_DIR: tests) */
} dsm;

/* ---- the host's figures (/proc) ---------------------------------------------------------------- */
static bool read_file(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    return n > 0;
}

/* The first line of /proc/stat, "cpu  user nice system idle iowait irq softirq steal guest
 * guest_nice": psutil's busy time (all but idle and iowait; guest is inside user already). */
static bool cpu_times(const dsm *m, unsigned long long *busy, unsigned long long *total) {
    char buf[512];
    if (!read_file(m->stat_path, buf, sizeof buf) || strncmp(buf, "cpu ", 4)) return false;
    unsigned long long v[10] = { 0 };
    const char *p = buf + 4;
    int n = 0;
    for (; n < 10; n++) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(p, &end, 10);
        if (end == p || errno) break;
        v[n] = x;
        p = end;
    }
    if (n < 4) return false;
    unsigned long long all = 0;
    for (int i = 0; i < n && i < 8; i++) all += v[i];   /* guest, guest_nice: counted in user, nice */
    *total = all;
    *busy = all - v[3] - v[4];
    return true;
}

static bool meminfo_field(const char *buf, const char *key, unsigned long long *kib) {
    const size_t k = strlen(key);
    for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, key, k) && p[k] == ':') {
            char *end;
            *kib = strtoull(p + k + 1, &end, 10);
            return end != p + k + 1;
        }
    return false;
}

static bool vm_percent(const dsm *m, double *vm, double *swap) {
    char buf[4096];
    unsigned long long total, avail, stot = 0, sfree = 0;
    if (!read_file(m->meminfo_path, buf, sizeof buf) || !meminfo_field(buf, "MemTotal", &total) ||
        !meminfo_field(buf, "MemAvailable", &avail) || total == 0)
        return false;
    *vm = 100.0 * (double)(total - (avail < total ? avail : total)) / (double)total;
    if (meminfo_field(buf, "SwapTotal", &stot) && meminfo_field(buf, "SwapFree", &sfree) && stot > 0)
        *swap = 100.0 * (double)(stot - (sfree < stot ? sfree : stot)) / (double)stot;
    else
        *swap = 0;
    return true;
}

/* ---- sampling ---------------------------------------------------------------------------------- */
static volt_status sample(dsm *m, volt_trainer *t, int at) {
    if (m->device) {
        volt_device_memory dm;
        VOLT_TRY(volt_trainer_device_memory(t, &dm));   /* its message is the trainer's */
        const int64_t v[4] = { dm.allocated_bytes, dm.allocated_peak_bytes, dm.reserved_bytes, dm.reserved_peak_bytes };
        for (int i = 0; i < 4; i++) VOLT_TRY(volt_trainer_log_metric(t, m->names[at][ST_ALLOC + i], (double)v[i], VOLT_LOG_STEP));
    }
    if (m->host) {
        unsigned long long busy, total;
        double vm, swap;
        if (!cpu_times(m, &busy, &total) || !vm_percent(m, &vm, &swap))
            return volt_trainer_fail(t, VOLT_ERR_IO, "DeviceStatsMonitor: cannot read the host's stats from %s and %s",
                                     m->stat_path, m->meminfo_path);
        const unsigned long long dt = total - m->total0, db = busy - m->busy0;
        const double cpu = total > m->total0 && busy >= m->busy0 ? 100.0 * (double)db / (double)dt : 0.0;
        m->busy0 = busy;
        m->total0 = total;
        VOLT_TRY(volt_trainer_log_metric(t, m->names[at][ST_CPU], cpu > 100.0 ? 100.0 : cpu, VOLT_LOG_STEP));
        VOLT_TRY(volt_trainer_log_metric(t, m->names[at][ST_VM], vm, VOLT_LOG_STEP));
        VOLT_TRY(volt_trainer_log_metric(t, m->names[at][ST_SWAP], swap, VOLT_LOG_STEP));
    }
    return VOLT_OK;
}

static bool off(const dsm *m, volt_trainer *t) {
    const volt_trainer_config *c = volt_trainer_get_config(t);
    return !m->training || (!m->device && !m->host) || (c && c->fast_dev_run > 0);   /* fast_dev_run: no logging */
}

static int64_t every(volt_trainer *t) {
    const volt_trainer_config *c = volt_trainer_get_config(t);
    return c && c->log_every_n_steps > 0 ? c->log_every_n_steps : 50;
}

/* ---- hooks ------------------------------------------------------------------------------------- */
/* Lightning's setup check: without a logger nothing would receive the stats. */
static volt_status dsm_on_fit_start(void *self, volt_trainer *t) {
    dsm *m = self;
    if (!volt__cb_has_logger(t))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "DeviceStatsMonitor: the trainer has no logger (enable_logger "
                                 "is false and no *Logger callback was added): the stats would reach nothing");
    volt_device_memory dm;
    volt_status st = volt_trainer_device_memory(t, &dm);
    if (st < 0 && st != VOLT_ERR_UNSUPPORTED) return st;
    m->device = st >= 0;
    /* Lightning's cpu_stats: None = the host's stats when the device is the cpu; False on
     * the cpu = nothing at all */
    m->host = m->cpu_stats > 0 || (m->cpu_stats < 0 && !m->device);
    double vm, swap;
    if (m->host && (!cpu_times(m, &m->busy0, &m->total0) || !vm_percent(m, &vm, &swap)))
        return volt_trainer_fail(t, VOLT_ERR_UNSUPPORTED, "DeviceStatsMonitor: the host's stats need %s and %s (Linux's, "
                                 "with MemTotal and MemAvailable); set cpu_stats to 0 to log the device's alone",
                                 m->stat_path, m->meminfo_path);
    return VOLT_OK;
}

static volt_status dsm_on_train_start(void *self, volt_trainer *t) {
    dsm *m = self;
    m->training = true;
    m->seen_step = volt_trainer_global_step(t);
    if (m->host) cpu_times(m, &m->busy0, &m->total0);   /* cpu_percent's first interval starts here */
    return VOLT_OK;
}

static volt_status dsm_on_train_end(void *self, volt_trainer *t) {
    (void)t;
    ((dsm *)self)->training = false;
    return VOLT_OK;
}

/* Before the batch whose optimizer step would make a row: with accumulation, the window's
 * last micro-batch (the trainer's rule: every accumulate_grad_batches-th batch of the epoch,
 * and its last). A step 16-mixed then skips leaves these values fresh in no row. */
static volt_status dsm_on_train_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b;
    dsm *m = self;
    if (off(m, t) || (volt_trainer_global_step(t) + 1) % every(t) != 0) return VOLT_OK;
    const volt_trainer_config *c = volt_trainer_get_config(t);
    const int64_t acc = c && c->accumulate_grad_batches > 0 ? c->accumulate_grad_batches : 1;
    if ((i + 1) % acc != 0 && i + 1 != volt_trainer_num_train_batches(t)) return VOLT_OK;
    return sample(m, t, AT_START);
}

/* After the optimizer step the loggers write a row for (this callback runs before them) */
static volt_status dsm_on_train_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b; (void)i;
    dsm *m = self;
    if (off(m, t)) return VOLT_OK;
    const int64_t gs = volt_trainer_global_step(t);
    if (gs == m->seen_step) return VOLT_OK;   /* accumulating, or a skipped step (16-mixed) */
    m->seen_step = gs;
    return gs % every(t) == 0 ? sample(m, t, AT_END) : VOLT_OK;
}

static const volt_callback_ops dsm_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "DeviceStatsMonitor",
    .on_fit_start = dsm_on_fit_start,
    .on_train_start = dsm_on_train_start,
    .on_train_end = dsm_on_train_end,
    .on_train_batch_start = dsm_on_train_batch_start,
    .on_train_batch_end = dsm_on_train_batch_end,
    .destroy = free,
};

void volt_device_stats_config_init(volt_device_stats_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_DEVICE_STATS_CONFIG_VERSION;
    cfg->cpu_stats = -1;
}

volt_status volt_add_device_stats_monitor(volt_trainer *t, const volt_device_stats_config *cfg) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    volt_device_stats_config def;
    if (!cfg) {
        volt_device_stats_config_init(&def);
        cfg = &def;
    }
    if (cfg->version < 1 || cfg->version > VOLT_DEVICE_STATS_CONFIG_VERSION)
        return volt_trainer_fail(t, VOLT_ERR_VERSION, "DeviceStatsMonitor: config version %u, this library knows 1..%u "
                                 "(call volt_device_stats_config_init)", cfg->version, VOLT_DEVICE_STATS_CONFIG_VERSION);
    if (cfg->cpu_stats < -1 || cfg->cpu_stats > 1)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "DeviceStatsMonitor: cpu_stats must be -1 (auto), 0 or 1, got %d",
                                 cfg->cpu_stats);
    if (volt__cb_has(t, dsm_ops.name))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "DeviceStatsMonitor: the trainer has one already");
    dsm *m = calloc(1, sizeof *m);
    if (!m) return VOLT_ERR_NOMEM;
    m->cpu_stats = cfg->cpu_stats;
    const char *proc = getenv("VOLT_PROC_DIR");   /* tests give files of their own */
    if (!proc || !*proc) proc = "/proc";
    snprintf(m->stat_path, sizeof m->stat_path, "%s/stat", proc);
    snprintf(m->meminfo_path, sizeof m->meminfo_path, "%s/meminfo", proc);
    static const char *const hook[2] = { "on_train_batch_start", "on_train_batch_end" };
    for (int a = 0; a < 2; a++)
        for (int s = 0; s < N_STATS; s++)
            snprintf(m->names[a][s], sizeof m->names[a][s], "DeviceStatsMonitor.%s/%s", hook[a], stat_names[s]);
    return volt_trainer_add_callback(t, &dsm_ops, m);
}
