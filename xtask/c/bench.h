/*
 * bench.h - helpers shared by the OpenPMIx side of `cargo xtask bench`
 * (bench_host.c, bench_client.c): clock, resident memory, and a one-shot
 * latch to turn an OpenPMIx callback into a blocking call.
 */
#ifndef XTASK_BENCH_H
#define XTASK_BENCH_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Monotonic time in seconds (CLOCK_MONOTONIC, as Rust's Instant). */
static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

/* VmRSS of this process in KiB, 0 if unknown. */
static inline long bench_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char buf[512];
    long kb = 0;
    if (f == NULL) {
        return 0;
    }
    while (fgets(buf, sizeof buf, f) != NULL) {
        if (sscanf(buf, "VmRSS: %ld", &kb) == 1) {
            break;
        }
    }
    fclose(f);
    return kb;
}

/* A latch a callback opens once; the caller waits for it. */
typedef struct {
    pthread_mutex_t mx;
    pthread_cond_t cv;
    int done;
    int status;
} bench_latch_t;

static inline void bench_latch_init(bench_latch_t *l)
{
    pthread_mutex_init(&l->mx, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->done = 0;
    l->status = 0;
}

static inline void bench_latch_open(bench_latch_t *l, int status)
{
    pthread_mutex_lock(&l->mx);
    l->status = status;
    l->done = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mx);
}

static inline int bench_latch_wait(bench_latch_t *l)
{
    pthread_mutex_lock(&l->mx);
    while (!l->done) {
        pthread_cond_wait(&l->cv, &l->mx);
    }
    pthread_mutex_unlock(&l->mx);
    pthread_mutex_destroy(&l->mx);
    pthread_cond_destroy(&l->cv);
    return l->status;
}

#endif
