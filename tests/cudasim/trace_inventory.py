#!/usr/bin/env python3
"""tests/cudasim/trace_inventory.py -- one training step's kernels from two CUDASIM_TRACE files.

Usage: trace_inventory.py TRACE_A ROWS_A TRACE_B ROWS_B ROWS_SEED

The traces are the same program at two batch sizes (rows = batch x sequence length), e.g.
bench_distilbert at B 1 and B 2, T 16 (docs/CUDA.md, "The seed step's kernels"). The last
step of each (from the launch after the last optimizer update that precedes the step's first
k_arange to the end) is taken; the two steps must issue the same calls in the same order.
Every numeric argument (and grid dimension) of call i is fitted as a + b x rows from the
two runs and evaluated at ROWS_SEED; each kernel's DRAM bytes are then computed from those
arguments (the formulas below: the kernel's reads and writes of device memory, assuming no
cache reuse across kernels), and the time at the model below. Traces of the code before
issue 11's kernel changes (one kernel per elementwise op, column sums in C / 32 blocks) are
read too (the kernels' argument lists tell the two apart), for the before / after tables.

Time model (an estimate, no GPU measured): a memory-bound kernel moves its bytes at
min(3.5 TB/s, bytes in flight / 700 ns) (Little's law with H200's ~700 ns loaded DRAM latency),
bytes in flight = resident threads (at most 132 SMs x 2048) x bytes each thread has
outstanding (its loads of one loop iteration; loops assumed unrolled x4 where the loads are
independent); every call costs at least 1.5 us (a dependent kernel launch inside a CUDA graph).
GEMMs: max(flops / 600 TFLOP/s (bf16, ~60% of the H200's dense peak), bytes / 3.5 TB/s).
Attention kernels are another issue's: counted, not modelled (shown as "-").
"""
import re
import sys
from collections import OrderedDict

BW = 3.5e12
LAT = 700e-9
RESIDENT = 132 * 2048
FLOOR = 1.5e-6
GEMM_FLOPS = 600e12
COLSUM_BLOCKS, COLSUM_MIN_ROWS = 1024, 64   # core/cuda/launch.h


def colsum_chunks(R, C):   # core/cuda/elementwise.cu volt_cu_colsum_chunks
    gx = (C + 31) // 32
    ch = min((COLSUM_BLOCKS + gx - 1) // gx, (R + COLSUM_MIN_ROWS - 1) // COLSUM_MIN_ROWS)
    ch = max(ch, 1)
    rc = max(((R + ch - 1) // ch + 7) // 8 * 8, 8)
    return (R + rc - 1) // rc, rc


def parse(path):
    out = []
    for line in open(path):
        f = line.split()
        if len(f) < 5:
            continue
        kind, name = f[0], f[1]
        grid = [int(x) for x in f[2].split(',')]
        block = [int(x) for x in f[3].split(',')]
        rest = ' '.join(f[5:])
        op = None
        m = re.match(r'\{(\S+) bpi=(\d+)\}\s*(.*)', rest)
        if m:
            op = (m.group(1), int(m.group(2)))
            rest = m.group(3)
        out.append(dict(kind=kind, name=name, grid=grid, block=block, op=op, args=rest.split()))
    return out


def last_step(calls):
    ar = [i for i, c in enumerate(calls) if c['name'] == 'k_arange']
    start = ar[-1]
    while start > 0 and 'pm_update' not in calls[start - 1]['name'] and \
            not (calls[start - 1]['op'] and 'pm_update' in calls[start - 1]['op'][0]):
        start -= 1
    return calls[start:]


def num(t):
    try:
        return float(t) if any(ch in t for ch in '.e') and not t.lstrip('-').isdigit() else int(t)
    except ValueError:
        return None


def fit(a, b, ra, rb, rs):
    if a == b:
        return a
    v = a + (b - a) * (rs - ra) / (rb - ra)
    return int(round(v)) if isinstance(a, int) else v


def scaled(ca, cb, ra, rb, rs):
    if (ca['name'], ca['op'], len(ca['args'])) != (cb['name'], cb['op'], len(cb['args'])):
        sys.exit('the two steps differ: %s vs %s' % (ca['name'], cb['name']))
    args = []
    for x, y in zip(ca['args'], cb['args']):
        nx, ny = num(x), num(y)
        args.append(fit(nx, ny, ra, rb, rs) if nx is not None and ny is not None else x)
    c = dict(ca)
    c['args'] = args
    c['grid'] = [fit(x, y, ra, rb, rs) for x, y in zip(ca['grid'], cb['grid'])]
    return c


DT = {0: ('f32', 4), 1: ('bf16', 2), 2: ('f16', 2)}


def model(c):
    """-> list of (label, grid, block, bytes, seconds, flops) for one call (a column sum at the
    seed size may be two: the row chunks, then the sum of their partial rows)"""
    n, a, g, b = c['name'], c['args'], c['grid'], c['block']
    thr = lambda grid, block: grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]

    def mem(label, grid, block, byts, per_thread):
        res = min(thr(grid, block), RESIDENT)
        bw = min(BW, res * per_thread / LAT) if res else BW
        return (label, grid, block, byts, max(FLOOR, byts / bw), 0)

    def flat(cnt, block=256, cap=None):   # a grid-stride loop's grid
        gx = max(1, (cnt + block - 1) // block)
        return [min(gx, cap) if cap else gx, 1, 1]

    if c['kind'] == 'gemm':
        m, nn, k, batch, es, epi, beta = a[0], a[1], a[2], a[3], a[4], a[5], float(a[6])
        byts = batch * ((m * k + k * nn) * es + m * nn * 4 * (2 if beta else 1))
        fl = 2 * m * nn * k * batch
        return [('cublasLtMatmul m %d n %d k %d%s' % (m, nn, k, ' + bias epilogue' if epi != 1 else ''), g, b, byts,
                 max(FLOOR, fl / GEMM_FLOPS, byts / BW), fl)]
    if c['kind'] == 'memset':
        return [mem('cudaMemsetAsync', [RESIDENT // 256, 1, 1], [256, 1, 1], a[0], 16)]
    if c['kind'] == 'copy':
        kind = {1: 'H2D', 2: 'D2H', 3: 'D2D'}.get(a[1], '?')
        t = max(FLOOR, a[0] / (50e9 if kind in ('H2D', 'D2H') else BW))
        return [('cudaMemcpyAsync %s' % kind, g, b, a[0], t, 0)]
    if c['op']:   # k_map<op> (after issue 11): bytes per item from the op, 16-byte accesses when vec
        opn, bpi = c['op']
        cnt, vec = a[0], a[1] == 1
        label = 'k_map<%s>' % opn
        if opn == 'op_convert':
            label += ' %d B/elem' % bpi
        return [mem(label, flat(cnt // 4 if vec else cnt, cap=4096), b, cnt * bpi, bpi * (4 if vec else 1))]
    # before issue 11: one kernel per op, one item per thread and iteration
    old = {'k_binary': lambda: (8 * a[4] * a[5], None), 'k_scale': lambda: (8 * a[2], None),
           'k_axpy': lambda: ((8 + 4 * a[4]) * a[2], None), 'k_mul_grad_a': lambda: ((8 + 4 * a[5]) * a[3] * a[4], None),
           'k_unary': lambda: (8 * a[3], None), 'k_unary_grad': lambda: ((12 + 4 * a[6]) * a[5], None),
           'k_convert': lambda: ((DT[a[1]][1] + DT[a[3]][1]) * a[4], '%s->%s' % (DT[a[3]][0], DT[a[1]][0])),
           'k_pm_update': lambda: ((2 * DT[a[2]][1] + 4 + 2 * DT[a[6]][1] * (ptr(a[4]) + ptr(a[5]))) * a[7], None)}
    if n in old:
        byts, sub = old[n]()
        return [mem(n + (' ' + sub if sub else ''), g, b, byts, 8)]
    if n == 'k_colsum' and len(a) == 6:   # before: C / 32 blocks, each over all R rows
        has_a, R, C, acc = ptr(a[1]), a[2], a[3], a[5]
        return [mem('k_colsum' + (' (x a)' if has_a else ''), g, b, R * C * 4 * (1 + has_a) + C * 4 * (1 + acc),
                    16 * (1 + has_a))]
    if n == 'k_colsum':   # after: row chunks (emulated at the seed size), partial rows summed by a second call
        has_a, R, C, acc, hb = ptr(a[1]), a[2], a[3], a[6], ptr(a[8])
        ch, rc = colsum_chunks(R, C)
        gx = (C + 31) // 32
        label = 'k_colsum' + (' (x a)' if has_a else '') + (' + dy to 16-bit' if hb else '')
        src = R * C * 4 * (1 + has_a) + (R * C * 2 if hb else 0)
        if ch == 1:
            return [mem(label, [gx, 1, 1], [32, 8, 1], src + C * 4 * (1 + acc), 16 * (1 + has_a))]
        return [mem(label, [gx, ch, 1], [32, 8, 1], src + ch * C * 4, 16 * (1 + has_a)),
                mem('k_colsum (partial rows)', [gx, 1, 1], [32, 8, 1], ch * C * 4 + C * 4 * (1 + acc), 16)]
    if n == 'k_layernorm_grad_wb':
        R, C = a[3], a[4]
        gx = (C + 31) // 32
        if len(a) == 9:
            return [mem(n, g, b, 8 * R * C + 8 * R + 8 * C, 32)]
        ch, rc = colsum_chunks(R, C)
        if ch == 1:
            return [mem(n, [gx, 1, 1], [32, 8, 1], 8 * R * C + 8 * R + 8 * C, 32)]
        return [mem(n, [gx, ch, 1], [32, 8, 1], 8 * R * C + 8 * R + 8 * ch * C, 32),
                mem('k_layernorm_grad_wb_final', [gx, 1, 1], [32, 8, 1], 8 * ch * C + 8 * C, 32)]
    if n.startswith('k_layernorm_grad_x'):
        R, C, acc = a[5], a[6], a[7]
        return [mem(n, g, b, R * C * (12 + 4 * acc) + 8 * R, 8 * ((C + 255) // 256))]
    if n.startswith('k_layernorm'):
        R, C = a[5], a[6]
        return [mem(n, g, b, 8 * R * C + 8 * R + 8 * C, 4 * ((C + 255) // 256))]
    if n == 'dropout_kernel':
        cnt, acc = a[2], a[6]
        vec = len(a) > 9 and a[9] == 1
        return [mem(n, g, b, cnt * (8 + 4 * acc), 16 if vec else 4)]
    if n == 'k_emb':
        N, D = a[4], a[5]
        return [mem(n, g, b, 8 * N + 8 * N * D, 4)]
    if n == 'k_emb_grad':
        N, D = a[4], a[5]
        return [mem(n + ' (float atomics)', g, b, 8 * N + 12 * N * D, 4)]
    if n == 'k_emb_check':
        return [mem(n, g, b, 8 * a[2], 8)]
    if n == 'k_add2d':
        return [mem(n, g, b, 12 * a[4] * a[5], 8)]
    if n in ('k_gather4', 'k_gather4_add'):
        return [mem(n, g, b, (8 if n == 'k_gather4' else 12) * a[-1], 4)]
    if n == 'k_xent_rows':
        return [mem(n, g, b, 4 * a[3] * a[4], 4)]
    if n == 'k_xent_grad':
        return [mem(n, g, b, 8 * a[3] * a[4], 8)]
    if n.startswith('attn_'):
        return [(n, g, b, None, None, 0)]
    return [mem(n, g, b, 0, 4)]


def ptr(t):   # a pointer argument: "p", or 0 for NULL (fitted as a number)
    return t not in (0, '0')


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    ta, ra, tb, rb, rs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    sa, sb = last_step(parse(ta)), last_step(parse(tb))
    if len(sa) != len(sb):
        sys.exit('the two steps have %d and %d calls' % (len(sa), len(sb)))
    rows = OrderedDict()
    for ca, cb in zip(sa, sb):
        for label, grid, block, byts, t, fl in model(scaled(ca, cb, ra, rb, rs)):
            gs = '%d,%d,%d' % tuple(grid)
            bs = '%d,%d,%d' % tuple(block)
            key = label
            r = rows.setdefault(key, dict(count=0, grids=OrderedDict(), block=bs, bytes=0, t=0.0, fl=0, model=byts is not None))
            r['count'] += 1
            r['grids'][gs] = r['grids'].get(gs, 0) + 1
            if byts is not None:
                r['bytes'] += byts
                r['t'] += t
                r['fl'] += fl
    tot = dict(count=0, bytes=0, t=0.0, tm=0.0, tg=0.0, cm=0, cg=0)
    print('| call | count | grid (count) | block | MB read+written | est. us at the model |')
    print('|---|---:|---|---|---:|---:|')
    for k, r in sorted(rows.items(), key=lambda kv: -kv[1]['t']):
        grids = ', '.join(('%s' % gs) + (' (%d)' % c if len(r['grids']) > 1 else '') for gs, c in list(r['grids'].items())[:4])
        if len(r['grids']) > 4:
            grids += ', ...'
        mb = '%.1f' % (r['bytes'] / 1e6) if r['model'] else '-'
        us = '%.1f' % (r['t'] * 1e6) if r['model'] else '-'
        print('| %s | %d | %s | %s | %s | %s |' % (k, r['count'], grids, r['block'], mb, us))
        tot['count'] += r['count']
        if r['model']:
            tot['bytes'] += r['bytes']
            if k.startswith('cublasLtMatmul'):
                tot['tg'] += r['t']
                tot['cg'] += r['count']
            elif k.startswith('cudaMemcpyAsync H2D') or k.startswith('cudaMemcpyAsync D2H'):
                pass
            else:
                tot['tm'] += r['t']
                tot['cm'] += r['count']
    print()
    print('calls %d; GEMMs %d: %.0f us; memory-bound kernels, memsets and D2D copies %d: %.0f us (%.0f MB); '
          'attention not modelled' % (tot['count'], tot['cg'], tot['tg'] * 1e6, tot['cm'], tot['tm'] * 1e6,
                                      (tot['bytes'] - sum(r['bytes'] for k, r in rows.items()
                                                          if k.startswith('cublasLtMatmul'))) / 1e6))


if __name__ == '__main__':
    main()
