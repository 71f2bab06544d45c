/* The allocation functions at their edges: prints one line per case (result and errno),
 * so that a run with libmemplan_preload.so preloaded can be compared line by line with a
 * run on the system allocator alone. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *err(int e) {
    return e == 0 ? "0" : e == ENOMEM ? "ENOMEM" : e == EINVAL ? "EINVAL" : "other";
}

/* null or not; aligned to `align` or not; errno */
static void show(const char *what, void *p, size_t align, int e) {
    printf("%-40s %s%s errno=%s\n", what, p ? "block" : "NULL",
           p ? ((uintptr_t)p % align ? " MISALIGNED" : " aligned") : "", err(e));
    free(p);
}

#define CASE(what, align, expr)      \
    do {                             \
        errno = 0;                   \
        void *p_ = (expr);           \
        show(what, p_, align, errno);\
    } while (0)

int main(void) {
    CASE("malloc(SIZE_MAX)", 16, malloc(SIZE_MAX));
    CASE("malloc(PTRDIFF_MAX + 1)", 16, malloc((size_t)PTRDIFF_MAX + 1));
    CASE("malloc(1 << 20)", 16, malloc(1 << 20));
    CASE("calloc(SIZE_MAX / 2, 3)", 16, calloc(SIZE_MAX / 2, 3));
    CASE("calloc(SIZE_MAX, SIZE_MAX)", 16, calloc(SIZE_MAX, SIZE_MAX));
    CASE("calloc(1 << 20, 1)", 16, calloc(1 << 20, 1));
    CASE("pvalloc(SIZE_MAX - 100)", 4096, pvalloc(SIZE_MAX - 100));
    CASE("pvalloc(SIZE_MAX)", 4096, pvalloc(SIZE_MAX));
    CASE("pvalloc(100)", 4096, pvalloc(100));
    CASE("pvalloc(200000)", 4096, pvalloc(200000));
    CASE("valloc(SIZE_MAX)", 4096, valloc(SIZE_MAX));
    CASE("valloc(100000)", 4096, valloc(100000));
    CASE("memalign(24, 100)", 32, memalign(24, 100));
    CASE("memalign(24, 200000)", 32, memalign(24, 200000));
    CASE("memalign(3, 100)", 16, memalign(3, 100));
    CASE("memalign(0, 100)", 16, memalign(0, 100));
    CASE("memalign(4096 + 1, 100)", 8192, memalign(4097, 100));
    CASE("memalign(SIZE_MAX, 100)", 16, memalign(SIZE_MAX, 100));
    CASE("memalign(64, SIZE_MAX)", 64, memalign(64, SIZE_MAX));
    CASE("aligned_alloc(64, 100)", 64, aligned_alloc(64, 100));
    CASE("aligned_alloc(64, 200000)", 64, aligned_alloc(64, 200000));
    CASE("aligned_alloc(24, 100)", 32, aligned_alloc(24, 100));
    CASE("aligned_alloc(64, SIZE_MAX)", 64, aligned_alloc(64, SIZE_MAX));
    CASE("aligned_alloc(0, 100)", 16, aligned_alloc(0, 100));
    {
        size_t aligns[] = {24, 4, 0, 3, 8, 16, 4096, (size_t)1 << 63};
        for (int i = 0; i < 8; i++) {
            void *p = (void *)1;
            errno = 0;
            int r = posix_memalign(&p, aligns[i], 100);
            printf("posix_memalign(%zu, 100) returns %s, out %s\n", aligns[i], err(r),
                   p == (void *)1 ? "untouched" : p ? ((uintptr_t)p % aligns[i] ? "MISALIGNED" : "aligned") : "NULL");
            if (r == 0) free(p);
        }
        void *p = (void *)1;
        int r = posix_memalign(&p, 64, SIZE_MAX);
        printf("posix_memalign(64, SIZE_MAX) returns %s, out %s\n", err(r), p == (void *)1 ? "untouched" : "changed");
    }
    {
        char *p = malloc(100);
        memset(p, 7, 100);
        errno = 0;
        void *q = realloc(p, SIZE_MAX);
        printf("realloc(p, SIZE_MAX) %s errno=%s, p %s\n", q ? "block" : "NULL", err(errno),
               p[0] == 7 && p[99] == 7 ? "intact" : "CHANGED");
        char *big = malloc(300000);
        memset(big, 9, 300000);
        errno = 0;
        q = realloc(big, SIZE_MAX - 4096);
        printf("realloc(large p, SIZE_MAX - 4096) %s errno=%s, p %s\n", q ? "block" : "NULL", err(errno),
               big[0] == 9 && big[299999] == 9 ? "intact" : "CHANGED");
        errno = 0;
        q = reallocarray(p, SIZE_MAX / 2, 3);
        printf("reallocarray(p, SIZE_MAX / 2, 3) %s errno=%s, p %s\n", q ? "block" : "NULL", err(errno),
               p[0] == 7 && p[99] == 7 ? "intact" : "CHANGED");
        q = reallocarray(p, 1000, 300);
        printf("reallocarray(p, 1000, 300) %s, contents %s\n", q ? "block" : "NULL",
               q && ((char *)q)[0] == 7 && ((char *)q)[99] == 7 ? "kept" : "LOST");
        free(q);
        free(big);
    }
    printf("malloc_usable_size(NULL) = %zu\n", malloc_usable_size(NULL));
    {
        void *p = malloc(300000);
        printf("malloc_usable_size(malloc(300000)) %s\n", malloc_usable_size(p) >= 300000 ? ">= 300000" : "TOO SMALL");
        free(p);
    }
    printf("edges: done\n");
    return 0;
}
