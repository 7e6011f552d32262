/*
 * mn_bench.c - one rank's workload for `cargo xtask bench --multinode`, on libpmix (any
 * PMIx server: pmixrun, mpirun, prterun, srun --mpi=pmix).  Prints "<metric> <value>"
 * lines on stdout (the xtask averages them over the ranks) and "NOTE <text>" lines:
 *
 *   barrier_us            PMIx_Fence without data, mean per call
 *   fence_<S>_us          put of S new bytes under one key per size, commit, collecting
 *                         fence; mean per round.  The key is the same in every round, so
 *                         that each rank has S bytes to contribute, not S times the rounds;
 *                         libpmix clients keep the first value they read of a key, so only
 *                         the first round's is read back and checked (untimed, and followed
 *                         by a fence, so that no peer has overwritten it yet)
 *   dmodex_get_us         put and commit of 100 bytes under a new key, a fence without data,
 *                         then the get of that key of a rank on another node (the PMIx
 *                         servers fetch it then: direct modex); only the get is timed
 *   dmodex_first_us       the first thing after init and a fence without data: put and
 *                         commit of 100 bytes, then, with no fence, the get of a far rank's
 *                         (start-up without a modex: the get races the peer's first commit,
 *                         waits for it, and its server fetches it)
 *   daemon_cpu_barrier_us, daemon_cpu_fence_<S>_us
 *                         the CPU time this rank's parent (the launcher's daemon on its
 *                         node) spent per barrier, and per collecting-fence round after the
 *                         first (whose untimed check is left out), during those loops
 *                         (cpu_time.h); "daemon <name>" says which process that was
 *   client_cpu_barrier_us, client_cpu_fence_<S>_us
 *                         the same for this rank's own CPU time (libpmix's threads in it)
 *   node <hostname>       where this rank ran (the xtask checks that the launcher put two
 *                         ranks on each node, as asked)
 *   spawn_ms              rank 0 only: PMIx_Spawn of one copy of this program (which
 *                         initialises and finalises), mean per call
 *
 * usage: mn_bench [--barrier B] [--fence F] [--dmodex D] [--spawn S]
 *        mn_bench --hello      init, one barrier, finalize: the launch row's program
 *        mn_bench --child      what spawn starts: init, finalize
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

#include "bench.h"
#include "cpu_time.h"

static pmix_proc_t me;
static uint32_t size;

static void fail(const char *what, pmix_status_t rc)
{
    fprintf(stderr, "mn_bench rank %u: %s: %s\n", me.rank, what, PMIx_Error_string(rc));
    exit(1);
}

static void fence(bool collect)
{
    pmix_info_t info;
    bool yes = true;
    pmix_status_t rc;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    rc = PMIx_Fence(NULL, 0, collect ? &info : NULL, collect ? 1 : 0);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS) {
        fail(collect ? "fence (collect)" : "fence (barrier)", rc);
    }
}

/* The bytes rank `rank` puts in round `round`: a header naming both, then pseudo-random
 * characters of a 64-letter alphabet (xorshift64 seeded by both). Not a repeating pattern:
 * OpenPMIx compresses strings past a few KB on put, and a periodic filler would shrink to
 * nothing, which no real business card does. */
static void fill(char *buf, size_t len, uint32_t rank, long round)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._";
    uint64_t x = 0x9e3779b97f4a7c15ull ^ ((uint64_t) rank << 32) ^ (uint64_t) round;
    int k = snprintf(buf, len, "r%u-i%ld-", rank, round);
    for (size_t i = k > 0 ? (size_t) k : 0; i + 1 < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = alphabet[x & 63];
    }
    buf[len - 1] = '\0';
}

static void put_string(const char *key, const char *s)
{
    pmix_value_t val;
    pmix_status_t rc;
    PMIX_VALUE_LOAD(&val, s, PMIX_STRING);
    rc = PMIx_Put(PMIX_GLOBAL, key, &val);
    PMIX_VALUE_DESTRUCT(&val);
    if (rc != PMIX_SUCCESS) {
        fail("put", rc);
    }
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) {
        fail("commit", rc);
    }
}

static void get_check(uint32_t rank, const char *key, const char *want)
{
    pmix_proc_t peer;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    PMIX_LOAD_PROCID(&peer, me.nspace, rank);
    rc = PMIx_Get(&peer, key, NULL, 0, &v);
    if (rc != PMIX_SUCCESS) {
        fail(key, rc);
    }
    if (v->type != PMIX_STRING || strcmp(v->data.string, want) != 0) {
        fail("a peer's value read back wrong", PMIX_ERR_BAD_PARAM);
    }
    PMIX_VALUE_RELEASE(v);
}

/* The rank half the job away: on another node whether ranks are mapped by slot or by
 * node, with two or more nodes. */
static uint32_t far_peer(void)
{
    return (me.rank + size / 2) % size;
}

/* The mean latency of `rounds` collecting fences of `bytes` each; the daemon's and this
 * rank's CPU per round after the first into *daemon_us and *self_us (-1 with fewer than two
 * rounds or no reading). */
static double fence_rounds(size_t bytes, long rounds, double *daemon_us, double *self_us)
{
    char key[64], *mine = malloc(bytes + 1), *theirs = malloc(bytes + 1);
    double spent = 0;
    cpu_mark_t from = {-1, -1};
    if (mine == NULL || theirs == NULL) {
        fail("malloc", PMIX_ERR_NOMEM);
    }
    for (long i = 0; i < rounds; i++) {
        if (i == 1) {
            from = cpu_mark();
        }
        snprintf(key, sizeof key, "mn.f%zu", bytes);
        fill(mine, bytes + 1, me.rank, i);
        double t = bench_now();
        put_string(key, mine);
        fence(true);
        spent += bench_now() - t;
        if (i == 0) {
            /* Checked before anyone puts round 1's value under the same key. */
            fill(theirs, bytes + 1, far_peer(), i);
            get_check(far_peer(), key, theirs);
            fence(false);
        }
    }
    cpu_since(from, rounds - 1, daemon_us, self_us);
    free(mine);
    free(theirs);
    return spent * 1e6 / (double) (rounds > 0 ? rounds : 1);
}

static double dmodex_rounds(long rounds)
{
    char key[64], mine[101], theirs[101];
    double spent = 0;
    for (long i = 0; i < rounds; i++) {
        snprintf(key, sizeof key, "mn.dm.%ld", i);
        fill(mine, sizeof mine, me.rank, i);
        put_string(key, mine);
        fence(false);
        fill(theirs, sizeof theirs, far_peer(), i);
        double t = bench_now();
        get_check(far_peer(), key, theirs);
        spent += bench_now() - t;
        fence(false);
    }
    return spent * 1e6 / (double) (rounds > 0 ? rounds : 1);
}

/* "<whose>_cpu_<what>_us <value>", or a NOTE saying why there is none. */
static void print_cpu(const char *whose, const char *what, double us)
{
    if (us < 0) {
        printf("NOTE no %s CPU for %s (fewer than 2 rounds, or /proc unreadable)\n", whose, what);
    } else {
        printf("%s_cpu_%s_us %.3f\n", whose, what, us);
    }
}

/* Rank 0 spawns one child `count` times; a NOTE instead of the metric if the server refuses. */
static void spawn_rounds(long count)
{
    char self[4096], *argv[] = {self, "--child", NULL};
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    pmix_app_t app;
    double spent = 0;
    if (n <= 0) {
        fail("readlink /proc/self/exe", PMIX_ERROR);
    }
    self[n] = '\0';
    for (long i = 0; i < count; i++) {
        pmix_nspace_t child;
        pmix_status_t rc;
        PMIX_APP_CONSTRUCT(&app);
        app.cmd = strdup(self);
        app.argv = argv;
        app.maxprocs = 1;
        double t = bench_now();
        rc = PMIx_Spawn(NULL, 0, &app, 1, child);
        spent += bench_now() - t;
        app.argv = NULL;
        free(app.cmd);
        app.cmd = NULL;
        PMIX_APP_DESTRUCT(&app);
        if (rc != PMIX_SUCCESS) {
            printf("NOTE spawn: %s\n", PMIx_Error_string(rc));
            return;
        }
    }
    printf("spawn_ms %.3f\n", spent * 1e3 / (double) (count > 0 ? count : 1));
}

int main(int argc, char **argv)
{
    long barriers = 200, fences = 50, dmodex = 50, spawns = 5;
    bool hello = false, child = false;
    pmix_proc_t wild;
    pmix_value_t *v = NULL;
    pmix_status_t rc;

    for (int a = 1; a < argc; a++) {
        long *slot = NULL;
        if (strcmp(argv[a], "--hello") == 0) {
            hello = true;
            continue;
        }
        if (strcmp(argv[a], "--child") == 0) {
            child = true;
            continue;
        }
        if (strcmp(argv[a], "--barrier") == 0) {
            slot = &barriers;
        } else if (strcmp(argv[a], "--fence") == 0) {
            slot = &fences;
        } else if (strcmp(argv[a], "--dmodex") == 0) {
            slot = &dmodex;
        } else if (strcmp(argv[a], "--spawn") == 0) {
            slot = &spawns;
        }
        if (slot == NULL || a + 1 >= argc) {
            fprintf(stderr, "mn_bench: bad option %s\n", argv[a]);
            return 2;
        }
        *slot = atol(argv[++a]);
    }

    rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "mn_bench: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (child) {
        return PMIx_Finalize(NULL, 0) == PMIX_SUCCESS ? 0 : 1;
    }
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v);
    if (rc != PMIX_SUCCESS || v->type != PMIX_UINT32) {
        fail("get JOB_SIZE", rc);
    }
    size = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
    fence(false);
    if (!hello) {
        char key[] = "mn.first", mine[101], theirs[101];
        fill(mine, sizeof mine, me.rank, -1);
        put_string(key, mine);
        fill(theirs, sizeof theirs, far_peer(), -1);
        double t = bench_now();
        get_check(far_peer(), key, theirs);
        printf("dmodex_first_us %.3f\n", (bench_now() - t) * 1e6);
        char host[256] = "?";
        gethostname(host, sizeof host - 1);
        printf("node %s\n", host);
        char daemon[64];
        parent_name(daemon, sizeof daemon);
        printf("daemon %s\n", daemon);
    }
    if (hello) {
        printf("hello %u %u\n", me.rank, size);
        return PMIx_Finalize(NULL, 0) == PMIX_SUCCESS ? 0 : 1;
    }

    fence(false);
    cpu_mark_t from = cpu_mark();
    double daemon_us, self_us;
    double t = bench_now();
    for (long i = 0; i < barriers; i++) {
        fence(false);
    }
    printf("barrier_us %.3f\n", (bench_now() - t) * 1e6 / (double) (barriers > 0 ? barriers : 1));
    cpu_since(from, barriers, &daemon_us, &self_us);
    print_cpu("daemon", "barrier", daemon_us);
    print_cpu("client", "barrier", self_us);

    static const size_t sizes[] = {100, 1000, 10000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        char name[32];
        fence(false);
        printf("fence_%zu_us %.3f\n", sizes[s], fence_rounds(sizes[s], fences, &daemon_us, &self_us));
        snprintf(name, sizeof name, "fence_%zu", sizes[s]);
        print_cpu("daemon", name, daemon_us);
        print_cpu("client", name, self_us);
    }
    fence(false);
    printf("dmodex_get_us %.3f\n", dmodex_rounds(dmodex));
    fence(false);
    if (me.rank == 0 && spawns > 0) {
        spawn_rounds(spawns);
    }
    fflush(stdout);
    fence(false);
    rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fail("finalize", rc);
    }
    return 0;
}
