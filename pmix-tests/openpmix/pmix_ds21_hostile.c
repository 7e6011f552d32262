/*
 * pmix_ds21_hostile.c - a libpmix job in which one rank attacks the ds21 segments while the
 * others keep working: it exists to show that such a rank cannot crash or stall the server
 * (issue 18, items 1 and 6). Run under pmix-rs's pmixrun only (it needs the ds21 store).
 *
 *   pmix_ds21_hostile MODE ROUNDS        3 ranks or more, all on this node
 *
 * Rank 0 is the hostile one. It initialises first (the others wait, before PMIx_Init, until
 * lock 0's in-use flag is set), so the lock libpmix claims for it is lock 0. Then, in MODE:
 *   scribble  it maps the lock segment read-write and, on a thread, keeps overwriting the
 *             robust-list words of glibc's pthread_mutex_t (__data.__list) of every mutex,
 *             every lock's, with addresses nothing is mapped at;
 *   hold      it takes its read lock the way libpmix does (signal mutex, main mutex, signal
 *             released) and keeps it;
 *   truncate  on a thread, it keeps trying to change the size of every file it finds in the
 *             ds21 directory (segments and lock segment, through whatever links lead there):
 *             ftruncate(2) to twice the size and then to 0, open with O_TRUNC, truncate(2).
 *             Rank 0 joins a further fence before the rounds only once it has been over
 *             every file once. It prints "attack truncated=N refused=M" when it stops: how
 *             many of those calls succeeded, how many failed.
 * The attack runs until after a second fence of all ranks, from before the first one (from
 * just after it for truncate: the honest ranks are then past their own look at the lock
 * segment, which they map before PMIx_Init); in between the honest ranks run ROUNDS rounds among themselves: put a value whose length
 * changes every round, commit, fence with PMIX_COLLECT_DATA, get every honest peer's value and
 * check it is that peer's of this round (or, for data that did not reach the shared memory and
 * comes over the socket, of an earlier round or the next one: libpmix keeps what it fetched,
 * and a peer may be a round ahead). A round longer than ROUND_MAX_MS is a failure (the server
 * must not wait on a lock a client holds).
 *
 * Prints "hostile rank=0 mode=M" (for truncate, later "attack truncated=N refused=M"),
 * "honest rank=R rounds=K max_ms=T", then "OK rank=R size=N".
 * Any failure prints "FAIL rank=R: <what>" on stderr and exits 2.
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_ds21_hostile pmix_ds21_hostile.c $(pkg-config
 * --cflags --libs pmix) (glibc 2.34 and later have pthreads in libc).
 */
#define _GNU_SOURCE
#include <pmix.h>

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A round slower than this means the server waited on the hostile rank's lock (it used to
 * wait 2 s per write); the margin below that is for a loaded machine, where the attacking
 * thread spins on one of the CPUs. */
#define ROUND_MAX_MS 1500
/* How long an honest rank waits for rank 0 to claim lock 0 before its own PMIx_Init. */
#define CLAIM_WAIT_MS 20000
/* How long rank 0 waits for its truncating thread's first pass over the directory. */
#define FIRST_PASS_WAIT_MS 20000

static int my_rank = -1;

/* The rank "FAIL" lines name (pmix_fail.h). */
static int fail_rank(void)
{
    return my_rank;
}

#include "pmix_fail.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- the lock segment, as the server lays it out (docs/OPENPMIX.md) ------------------- */

struct lockseg {
    unsigned char *base;
    size_t size;
    uint32_t locks;
    size_t align;
    size_t mutex_offs;
};

/* Maps $PMIX_DSTORE_21_BASE_PATH/smlockseg-<nspace>; NULL base if it does not exist yet. */
static struct lockseg map_lockseg(const char *nspace, bool writable)
{
    struct lockseg s = {0};
    const char *dir = getenv("PMIX_DSTORE_21_BASE_PATH");
    if (dir == NULL)
        fail("PMIX_DSTORE_21_BASE_PATH is not set: the server offers no ds21 store");
    char path[4096];
    snprintf(path, sizeof path, "%s/smlockseg-%s", dir, nspace);
    int fd = open(path, writable ? O_RDWR : O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT)
            return s;
        fail("open %s: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 64)
        fail("lock segment %s: size %lld", path, (long long)st.st_size);
    s.size = (size_t)st.st_size;
    s.base = mmap(NULL, s.size, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
    close(fd);
    if (s.base == MAP_FAILED)
        fail("mmap %s: %s", path, strerror(errno));
    memcpy(&s.locks, s.base + 8, sizeof s.locks);
    memcpy(&s.align, s.base + 16, sizeof s.align);
    memcpy(&s.mutex_offs, s.base + 24, sizeof s.mutex_offs);
    if (s.align < sizeof(pthread_mutex_t) ||
        s.mutex_offs + 2 * (size_t)s.locks * s.align > s.size)
        fail("lock segment %s: a header that does not fit", path);
    return s;
}

static pthread_mutex_t *mutex_at(const struct lockseg *s, size_t i)
{
    return (pthread_mutex_t *)(s->base + s->mutex_offs + s->align * i);
}

static _Atomic int32_t *in_use_flag(const struct lockseg *s, size_t i)
{
    return (_Atomic int32_t *)(s->base + 32 + 4 * i);
}

/* An honest rank starts only once rank 0 claimed lock 0. */
static void wait_for_rank0_claim(void)
{
    const char *nspace = getenv("PMIX_NAMESPACE");
    if (nspace == NULL)
        fail("PMIX_NAMESPACE is not set");
    double end = now_ms() + CLAIM_WAIT_MS;
    for (;;) {
        struct lockseg s = map_lockseg(nspace, false);
        if (s.base != NULL) {
            int32_t claimed = atomic_load(in_use_flag(&s, 0));
            munmap(s.base, s.size);
            if (claimed != 0)
                return;
        }
        if (now_ms() > end)
            fail("rank 0 did not claim ds21 lock 0 within %d ms", CLAIM_WAIT_MS);
        struct timespec poll = {0, 1000000};
        nanosleep(&poll, NULL);
    }
}

/* ---- the attacks ---------------------------------------------------------------------- */

static atomic_bool stop_scribbling;

/* Keeps overwriting the robust-list words of every mutex until told to stop. */
static void *scribble(void *arg)
{
    const struct lockseg *s = arg;
    const size_t at = offsetof(pthread_mutex_t, __data.__list);
    uint64_t junk = 0x10;
    while (!atomic_load_explicit(&stop_scribbling, memory_order_relaxed)) {
        for (size_t i = 0; i < 2 * (size_t)s->locks; i++) {
            volatile uint64_t *w = (volatile uint64_t *)((unsigned char *)mutex_at(s, i) + at);
            for (size_t k = 0; k < sizeof(((pthread_mutex_t *)0)->__data.__list) / 8; k++)
                w[k] = junk + 8 * k;
        }
        junk = junk == 0x10 ? 0x1000 : 0x10;
    }
    return NULL;
}

static atomic_bool stop_truncating;
static unsigned long truncated, refused;
/* Posted once the truncating thread went over every file of the directory once. */
static sem_t first_pass;

/* Counts one attempt to change a segment's size. */
static void count(int rc)
{
    if (rc == 0)
        truncated++;
    else
        refused++;
}

/* Keeps trying to change the size of every file of the ds21 directory until told to stop. */
static void *truncate_all(void *arg)
{
    const char *dir = arg;
    while (!atomic_load_explicit(&stop_truncating, memory_order_relaxed)) {
        DIR *d = opendir(dir);
        if (d == NULL)
            fail("opendir %s: %s", dir, strerror(errno));
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            /* Grown first, so that what is left is a file of size 0. */
            int fd = open(path, O_RDWR);
            struct stat st;
            if (fd >= 0 && fstat(fd, &st) == 0) {
                count(ftruncate(fd, 2 * st.st_size + 4096));
                count(ftruncate(fd, 0));
            }
            if (fd >= 0)
                close(fd);
            fd = open(path, O_RDWR | O_TRUNC);
            count(fd < 0 ? -1 : 0);
            if (fd >= 0)
                close(fd);
            count(truncate(path, 0));
        }
        closedir(d);
        int posted;
        if (sem_getvalue(&first_pass, &posted) == 0 && posted == 0)
            sem_post(&first_pass);
    }
    return NULL;
}

/* ---- the honest ranks' rounds -------------------------------------------------------- */

static void round_value(pmix_rank_t r, int round, char *buf, size_t len)
{
    /* A length changing every round: values are replaced, invalidated and appended. */
    snprintf(buf, len, "round%d-rank%u-%.*s", round, r, round % 7, "xxxxxxx");
}

static void honest_rounds(const pmix_proc_t *me, uint32_t size, int rounds)
{
    size_t n = size - 1;
    pmix_proc_t *procs;
    PMIX_PROC_CREATE(procs, n);
    for (size_t i = 0; i < n; i++)
        PMIX_PROC_LOAD(&procs[i], me->nspace, (pmix_rank_t)(i + 1));
    pmix_info_t collect;
    bool yes = true;
    PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    double worst = 0;
    for (int round = 0; round < rounds; round++) {
        double start = now_ms();
        char v[64];
        round_value(me->rank, round, v, sizeof v);
        pmix_value_t pv;
        PMIX_VALUE_LOAD(&pv, v, PMIX_STRING);
        MUST(PMIx_Put(PMIX_GLOBAL, "hostile.test.v", &pv));
        PMIX_VALUE_DESTRUCT(&pv);
        MUST(PMIx_Commit());
        MUST(PMIx_Fence(procs, n, &collect, 1));
        for (size_t i = 0; i < n; i++) {
            pmix_value_t *got = NULL;
            MUST(PMIx_Get(&procs[i], "hostile.test.v", NULL, 0, &got));
            /* This round's, or, for data served over the socket, an earlier round's (libpmix
             * keeps what it fetched, as with its hash store) or the next one's (a peer done
             * with this round may have committed its next value already, and the server
             * answers with the latest). */
            bool known = false;
            for (int k = round + 1; k >= 0 && !known && got->type == PMIX_STRING; k--) {
                char want[64];
                round_value(procs[i].rank, k, want, sizeof want);
                known = strcmp(got->data.string, want) == 0;
            }
            if (!known)
                fail("round %d: rank %u's value is no round's value of it: type %d, \"%s\"", round,
                     procs[i].rank, got->type,
                     got->type == PMIX_STRING && got->data.string != NULL ? got->data.string : "");
            PMIX_VALUE_RELEASE(got);
        }
        double took = now_ms() - start;
        if (took > worst)
            worst = took;
        if (took > ROUND_MAX_MS)
            fail("round %d took %.0f ms (more than %d): the server waited on the hostile "
                 "rank's lock", round, took, ROUND_MAX_MS);
    }
    PMIX_INFO_DESTRUCT(&collect);
    PMIX_PROC_FREE(procs, n);
    printf("honest rank=%u rounds=%d max_ms=%.0f\n", me->rank, rounds, worst);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *r = getenv("PMIX_RANK");
    my_rank = r != NULL ? atoi(r) : -1;
    if (argc != 3 || (strcmp(argv[1], "scribble") != 0 && strcmp(argv[1], "hold") != 0 &&
                      strcmp(argv[1], "truncate") != 0))
        fail("usage: pmix_ds21_hostile scribble|hold|truncate ROUNDS");
    const char *mode = argv[1];
    int rounds = atoi(argv[2]);
    if (my_rank != 0)
        wait_for_rank0_claim();

    pmix_proc_t me;
    MUST(PMIx_Init(&me, NULL, 0));
    pmix_proc_t wild;
    PMIX_PROC_LOAD(&wild, me.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t *v = NULL;
    MUST(PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v));
    uint32_t size = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
    if (size < 3)
        fail("needs 3 ranks or more, not %u", size);

    bool truncating = strcmp(mode, "truncate") == 0;
    struct lockseg seg = {0};
    pthread_t scribbler, truncator;
    if (me.rank == 0 && truncating) {
        printf("hostile rank=0 mode=%s\n", mode);
    } else if (me.rank == 0) {
        seg = map_lockseg(me.nspace, true);
        if (seg.base == NULL)
            fail("no lock segment for %s", me.nspace);
        if (strcmp(mode, "scribble") == 0) {
            if (pthread_create(&scribbler, NULL, scribble, &seg) != 0)
                fail("pthread_create");
        } else {
            /* libpmix's read lock on lock 0, kept. */
            if (pthread_mutex_lock(mutex_at(&seg, 0)) != 0 ||
                pthread_mutex_lock(mutex_at(&seg, 1)) != 0 ||
                pthread_mutex_unlock(mutex_at(&seg, 0)) != 0)
                fail("cannot take the read lock of lock 0");
        }
        printf("hostile rank=0 mode=%s\n", mode);
    }
    MUST(PMIx_Fence(NULL, 0, NULL, 0));
    if (me.rank == 0 && truncating) {
        char *dir = getenv("PMIX_DSTORE_21_BASE_PATH");
        if (dir == NULL)
            fail("PMIX_DSTORE_21_BASE_PATH is not set: the server offers no ds21 store");
        if (sem_init(&first_pass, 0, 0) != 0 ||
            pthread_create(&truncator, NULL, truncate_all, dir) != 0)
            fail("sem_init or pthread_create: %s", strerror(errno));
        struct timespec end;
        clock_gettime(CLOCK_REALTIME, &end);
        end.tv_sec += FIRST_PASS_WAIT_MS / 1000;
        while (sem_timedwait(&first_pass, &end) != 0)
            if (errno != EINTR)
                fail("no pass over %s within %d ms: %s", dir, FIRST_PASS_WAIT_MS, strerror(errno));
    }
    /* The attack is under way before any round starts. */
    if (truncating)
        MUST(PMIx_Fence(NULL, 0, NULL, 0));
    if (me.rank != 0)
        honest_rounds(&me, size, rounds);
    MUST(PMIx_Fence(NULL, 0, NULL, 0));
    if (me.rank == 0 && truncating) {
        atomic_store(&stop_truncating, true);
        pthread_join(truncator, NULL);
        printf("attack truncated=%lu refused=%lu\n", truncated, refused);
    } else if (me.rank == 0) {
        if (strcmp(mode, "scribble") == 0) {
            atomic_store(&stop_scribbling, true);
            pthread_join(scribbler, NULL);
        } else if (pthread_mutex_unlock(mutex_at(&seg, 1)) != 0) {
            fail("cannot release the read lock of lock 0");
        }
        munmap(seg.base, seg.size);
    }
    MUST(PMIx_Finalize(NULL, 0));
    printf("OK rank=%u size=%u\n", me.rank, size);
    return 0;
}
