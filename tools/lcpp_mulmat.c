// llama.cpp's CPU matrix-vector product timed the way `lowbit bench` times ours: the weights
// are uploaded in copies spanning >= 256 MiB (so each call reads them from memory, not from
// the last-level cache) and the timed calls cycle through the copies. Baseline for issue 3's
// "1.25x faster than llama.cpp" comparison; built and run by tools/lcpp_mulmat.sh.
//
// Usage: lcpp_mulmat TYPE ROWS K THREADS ROUNDS   (TYPE: a ggml type name, e.g. q4_0, iq2_xxs)
// Prints one line: type, shape, threads, the fastest round's median microseconds per call, and
// every round's figure. Weights: 64 rows quantized by ggml_quantize_chunk from a Gaussian-ish
// tensor (an importance matrix of ones where the type requires one), repeated to fill the
// matrix; x: K floats in [-1, 1).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ggml-cpu.h"
#include "ggml.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s TYPE ROWS K THREADS ROUNDS\n", argv[0]);
        return 2;
    }
    enum ggml_type type = GGML_TYPE_COUNT;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char *name = ggml_type_name((enum ggml_type)t);
        if (name && strcmp(name, argv[1]) == 0) type = (enum ggml_type)t;
    }
    if (type == GGML_TYPE_COUNT) {
        fprintf(stderr, "unknown ggml type '%s'\n", argv[1]);
        return 2;
    }
    const int64_t rows = atoll(argv[2]), k = atoll(argv[3]);
    const int threads = atoi(argv[4]), rounds = atoi(argv[5]);
    const size_t rb = ggml_row_size(type, k), bytes = rb * rows;
    const size_t footprint = 256ull << 20;
    const int copies = (int)((footprint + bytes - 1) / bytes);

    // 64 quantized rows, repeated.
    const int64_t seed_rows = rows < 64 ? rows : 64;
    float *src = malloc(sizeof(float) * seed_rows * k);
    float *imat = malloc(sizeof(float) * k);
    for (int64_t i = 0; i < seed_rows * k; i++) {
        src[i] = (uniform() + uniform() + uniform() - 1.5f) * 2.0f;
    }
    for (int64_t i = 0; i < k; i++) imat[i] = 1.0f;
    uint8_t *seed = malloc(rb * seed_rows);
    ggml_quantize_chunk(type, src, seed, 0, seed_rows, k,
                        ggml_quantize_requires_imatrix(type) ? imat : NULL);

    // The context's memory: 2 MiB-aligned and advised for transparent huge pages, as lowbit's
    // weight arena is, so both kernels read the same kind of memory.
    size_t mem = (size_t)copies * (bytes + 4096) + k * 4 + rows * 4 * copies + (64 << 20);
    mem = (mem + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    void *arena = aligned_alloc(2u << 20, mem);
    if (!arena || madvise(arena, mem, MADV_HUGEPAGE) != 0) {
        fprintf(stderr, "cannot allocate or advise %zu bytes\n", mem);
        return 1;
    }
    struct ggml_init_params ip = {
        .mem_size = mem,
        .mem_buffer = arena,
        .no_alloc = false,
    };
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, k);
    for (int64_t i = 0; i < k; i++) ((float *)x->data)[i] = uniform() * 2.0f - 1.0f;
    struct ggml_cgraph **graphs = malloc(sizeof(*graphs) * copies);
    for (int c = 0; c < copies; c++) {
        struct ggml_tensor *w = ggml_new_tensor_2d(ctx, type, k, rows);
        for (int64_t r = 0; r < rows; r++) {
            memcpy((uint8_t *)w->data + r * rb, seed + (r % seed_rows) * rb, rb);
        }
        struct ggml_tensor *y = ggml_mul_mat(ctx, w, x);
        graphs[c] = ggml_new_graph(ctx);
        ggml_build_forward_expand(graphs[c], y);
    }

    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
    // LCPP_POLL: the threadpool's polling level (0-100; ggml's default otherwise).
    if (getenv("LCPP_POLL")) tpp.poll = (uint32_t)atoi(getenv("LCPP_POLL"));
    struct ggml_threadpool *tp = ggml_threadpool_new(&tpp);
    struct ggml_cplan plan = ggml_graph_plan(graphs[0], threads, tp);
    uint8_t *work = malloc(plan.work_size ? plan.work_size : 1);
    plan.work_data = work;

    // Warm-up, then per round: 5 runs of enough calls for 0.2 s; the round's figure is the
    // median run's per-call time (as lowbit bench).
    for (int c = 0; c < copies * 2; c++) ggml_graph_compute(graphs[c % copies], &plan);
    double t0 = now();
    ggml_graph_compute(graphs[0], &plan);
    double one = now() - t0;
    int iters = (int)(0.04 / (one > 1e-9 ? one : 1e-9)) + 1;
    double best = 1e30;
    double *each = malloc(sizeof(double) * rounds);
    int next = 0;
    for (int r = 0; r < rounds; r++) {
        double runs[5];
        for (int j = 0; j < 5; j++) {
            double t = now();
            for (int i = 0; i < iters; i++) {
                next = (next + 1) % copies;
                ggml_graph_compute(graphs[next], &plan);
            }
            runs[j] = (now() - t) / iters;
        }
        qsort(runs, 5, sizeof(double), cmp);
        each[r] = runs[2] * 1e6;
        if (each[r] < best) best = each[r];
    }
    printf("%s %lldx%lld threads %d copies %d us %.1f rounds", argv[1], (long long)rows,
           (long long)k, threads, copies, best);
    for (int r = 0; r < rounds; r++) printf(" %.1f", each[r]);
    printf("\n");
    ggml_threadpool_free(tp);
    ggml_free(ctx);
    return 0;
}
