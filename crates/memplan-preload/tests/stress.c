/* A multi-threaded allocator stress program for libmemplan_preload.so (and any malloc).
 *
 *   stress [THREADS [ROUNDS [WARMUP [FORK_EVERY [SEED]]]]]
 *
 * First the main thread alone runs WARMUP identical iterations of large allocations (a
 * program the pool can plan: it learns, trains on its background thread and serves).
 * Then THREADS threads each run ROUNDS rounds of malloc / calloc / realloc / memalign /
 * posix_memalign / aligned_alloc / free, small and large, on a table of live blocks
 * interleaved with the other threads' (a program the pool cannot plan), and every 200
 * rounds six iterations of the warm-up's kind in a row (only when WARMUP > 0: with
 * WARMUP 0 nothing in the run repeats, a program the pool cannot plan). Every block is
 * filled with a pattern of its own and checked before it is resized or freed, and every
 * thread's live blocks are checked again at the end. Every FORK_EVERY rounds (0: never)
 * a thread forks: the child checks the blocks it inherited, allocates, fills, checks and
 * frees blocks of its own and _exit()s; the parent waitpid()s and checks its status.
 *
 * Prints "stress: all contents verified ..." and exits 0, or names the first corrupted
 * block and exits 1. The wall time and the minor faults of the run go to stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 48

typedef struct {
    uint64_t *p;  /* the block (every allocation here is at least 8-aligned) */
    size_t n;     /* its size in bytes */
    uint64_t tag; /* the pattern's seed */
    size_t align; /* the alignment asked for (0: malloc's) */
} block;

static int rounds = 2000, warmup = 40, fork_every = 0;
static unsigned long seed = 1;

static uint64_t next(uint64_t *s) {
    /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t word(uint64_t tag, size_t i) { return tag * 0x2545F4914F6CDD1Dull + i * 0x9E3779B97F4A7C15ull; }

/* Byte `i` of the pattern: the byte of its word, so that any prefix compares equal. */
static unsigned char tail_byte(uint64_t tag, size_t i) {
    uint64_t w = word(tag, i / 8);
    return ((const unsigned char *)&w)[i % 8];
}

static void fill(block *b) {
    size_t words = b->n / 8;
    for (size_t i = 0; i < words; i++) b->p[i] = word(b->tag, i);
    unsigned char *tail = (unsigned char *)b->p;
    for (size_t i = words * 8; i < b->n; i++) tail[i] = tail_byte(b->tag, i);
}

/* Checks the first `n` bytes of `b`'s pattern. */
static int intact(const block *b, size_t n) {
    size_t words = n / 8;
    for (size_t i = 0; i < words; i++)
        if (b->p[i] != word(b->tag, i)) return 0;
    const unsigned char *tail = (const unsigned char *)b->p;
    for (size_t i = words * 8; i < n; i++)
        if (tail[i] != tail_byte(b->tag, i)) return 0;
    return 1;
}

static void die(const char *what, const block *b, int thread) {
    fprintf(stderr, "stress: %s: thread %d, block %p of %zu bytes (tag %llu)\n", what, thread, (void *)b->p,
            b->n, (unsigned long long)b->tag);
    fflush(stderr);
    _exit(1);
}

static void check(const block *b, int thread) {
    if (b->p && !intact(b, b->n)) die("corrupted block", b, thread);
}

static size_t pick_size(uint64_t *s) {
    uint64_t r = next(s);
    switch (r % 8) {
    case 0: case 1: case 2: return 1 + (r >> 8) % 256;        /* tiny */
    case 3: case 4: return 256 + (r >> 8) % 16384;            /* small */
    case 5: case 6: return 65536 + (r >> 8) % (448 << 10);    /* large: the pool's */
    default: return (512 << 10) + (r >> 8) % (1536 << 10);   /* larger */
    }
}

/* A fresh block of `n` bytes by one of the allocation functions, filled. */
static void allocate(block *b, size_t n, uint64_t *s, int thread) {
    uint64_t r = next(s);
#ifdef POW2_ONLY /* for allocators that refuse memalign(24, n) */
    static const size_t aligns[] = {16, 32, 64, 128, 4096, 32, 64, 8192};
#else
    static const size_t aligns[] = {16, 32, 64, 128, 4096, 24, 48, 8192};
#endif
    b->n = n;
    b->tag = next(s);
    b->align = 0;
    switch (r % 6) {
    case 0: b->p = malloc(n); break;
    case 1: {
        size_t k = 1 + (r >> 8) % 4;
        size_t each = (n + k - 1) / k;
        b->n = each * k;
        b->p = calloc(k, each);
        if (b->p) {
            const unsigned char *c = (const unsigned char *)b->p;
            for (size_t i = 0; i < b->n; i++)
                if (c[i]) die("calloc block not zeroed", b, thread);
        }
        break;
    }
    case 2: {
        size_t a = aligns[(r >> 8) % 8];
        b->align = a;
        b->p = memalign(a, n);
        /* glibc rounds an alignment that is no power of two up to the next one */
        size_t want = a == 24 ? 32 : a == 48 ? 64 : a;
        if (b->p && (uintptr_t)b->p % want) die("memalign block misaligned", b, thread);
        break;
    }
    case 3: {
        size_t a = aligns[(r >> 8) % 5];
        void *p = NULL;
        b->align = a;
        if (posix_memalign(&p, a, n) != 0) p = NULL;
        b->p = p;
        if (b->p && (uintptr_t)b->p % a) die("posix_memalign block misaligned", b, thread);
        break;
    }
    case 4: {
        size_t a = aligns[(r >> 8) % 5];
        b->align = a;
        b->p = aligned_alloc(a, n);
        if (b->p && (uintptr_t)b->p % a) die("aligned_alloc block misaligned", b, thread);
        break;
    }
    default: b->p = realloc(NULL, n); break;
    }
    if (!b->p) die("out of memory", b, thread);
    if (malloc_usable_size(b->p) < b->n) die("malloc_usable_size below the size asked", b, thread);
    fill(b);
}

static void release(block *b, int thread) {
    check(b, thread);
    free(b->p);
    b->p = NULL;
}

/* realloc keeps the common prefix; the rest gets the pattern again. */
static void resize(block *b, size_t n, int thread) {
    check(b, thread);
    uint64_t *p = realloc(b->p, n);
    if (!p) die("realloc out of memory", b, thread);
    size_t keep = b->n < n ? b->n : n;
    b->p = p;
    if (!intact(b, keep)) die("realloc lost contents", b, thread);
    b->n = n;
    fill(b);
}

static void fork_and_check(block *live, int count, uint64_t *s, int thread) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("stress: fork");
        _exit(1);
    }
    if (pid == 0) {
        for (int i = 0; i < count; i++) check(&live[i], thread);
        block mine[8];
        for (int round = 0; round < 4; round++) {
            for (int i = 0; i < 8; i++) allocate(&mine[i], pick_size(s), s, thread);
            resize(&mine[0], pick_size(s), thread);
            for (int i = 7; i >= 0; i--) release(&mine[i], thread);
        }
        for (int i = 0; i < count; i++) check(&live[i], thread);
        _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "stress: the child of thread %d failed (status %d)\n", thread, status);
        _exit(1);
    }
}

/* One iteration of a training-like program: the same large sizes, in the same order. */
static void iteration(int it) {
    static const size_t sizes[] = {300000, 1200000, 70000, 2000000, 300000, 650000, 90000, 128000};
    enum { N = sizeof sizes / sizeof sizes[0] };
    block b[N];
    uint64_t s = (uint64_t)it;
    for (int i = 0; i < N; i++) {
        b[i].n = sizes[i];
        b[i].tag = next(&s);
        b[i].align = 0;
        b[i].p = malloc(sizes[i]);
        if (!b[i].p) die("out of memory", &b[i], -1);
        fill(&b[i]);
    }
    for (int i = N - 1; i >= 0; i--) release(&b[i], -1);
}

static unsigned long forks_done;

static void *worker(void *arg) {
    int thread = (int)(intptr_t)arg;
    uint64_t s = seed * 1000003u + (uint64_t)thread * 7919u;
    block live[SLOTS];
    memset(live, 0, sizeof live);
    for (int round = 0; round < rounds; round++) {
        int i = (int)(next(&s) % SLOTS);
        uint64_t op = next(&s) % 4;
        if (!live[i].p) allocate(&live[i], pick_size(&s), &s, thread);
        else if (op == 0 && live[i].align == 0) resize(&live[i], pick_size(&s), thread);
        else release(&live[i], thread);
        /* now and then a thread runs an iteration the pool could plan on its own */
        if (warmup > 0 && round % 200 == 199)
            for (int it = 0; it < 6; it++) iteration(round + it);
        if (fork_every > 0 && round % fork_every == fork_every - 1) {
            fork_and_check(live, SLOTS, &s, thread);
            __atomic_fetch_add(&forks_done, 1, __ATOMIC_RELAXED);
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (live[i].p) release(&live[i], thread);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    if (argc > 2) rounds = atoi(argv[2]);
    if (argc > 3) warmup = atoi(argv[3]);
    if (argc > 4) fork_every = atoi(argv[4]);
    if (argc > 5) seed = strtoul(argv[5], NULL, 10);
    if (threads < 1 || threads > 256 || rounds < 0 || warmup < 0 || fork_every < 0) {
        fprintf(stderr, "usage: stress [THREADS [ROUNDS [WARMUP [FORK_EVERY [SEED]]]]]\n");
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int it = 0; it < warmup; it++) iteration(it);
    pthread_t tids[256];
    for (int t = 0; t < threads; t++)
        if (pthread_create(&tids[t], NULL, worker, (void *)(intptr_t)t) != 0) {
            fprintf(stderr, "stress: pthread_create failed\n");
            return 1;
        }
    for (int t = 0; t < threads; t++) pthread_join(tids[t], NULL);
    /* the pool serves a planned program again after the threads */
    for (int it = 0; it < warmup; it++) iteration(it);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("stress: all contents verified (%d threads, %d rounds each, %d warm-up iterations, %lu forks)\n",
           threads, rounds, warmup, forks_done);
    fprintf(stderr, "stress: wall %.3f s, minor faults %ld\n",
            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, usage.ru_minflt);
    return 0;
}
