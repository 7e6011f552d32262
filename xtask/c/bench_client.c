/*
 * bench_client.c - one rank's workload on OpenPMIx, the twin of
 * `pmix-bench client` (pmix-tests/src/bin/pmix-bench.rs): same steps, same
 * order, same metric names.  Started by bench_host, which reads what this
 * prints on stdout ("<metric> <value>" lines, "NOTE <text>" lines).
 *
 * usage: bench_client [--get G] [--peer W] [--fence F] [--barrier B]
 *                     [--pub P] [--pub-all A]
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

static pmix_proc_t me;
static char report[8192];
static size_t report_len;

static void add(const char *name, double v)
{
    int k = snprintf(report + report_len, sizeof report - report_len, "%s %.3f\n", name, v);
    if (k > 0 && (size_t) k < sizeof report - report_len) {
        report_len += (size_t) k;
    }
}

static void note(const char *text)
{
    int k = snprintf(report + report_len, sizeof report - report_len, "NOTE %s\n", text);
    if (k > 0 && (size_t) k < sizeof report - report_len) {
        report_len += (size_t) k;
    }
}

/* Any failure ends this rank; the host then ends the job. */
static void fail(const char *what, pmix_status_t rc)
{
    fprintf(stderr, "bench_client rank %u: %s: %s\n", me.rank, what, PMIx_Error_string(rc));
    exit(1);
}

static void barrier(void)
{
    pmix_status_t rc = PMIx_Fence(NULL, 0, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fail("fence (barrier)", rc);
    }
}

static void fence_collect(void)
{
    pmix_info_t info;
    bool yes = true;
    pmix_status_t rc;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    rc = PMIx_Fence(NULL, 0, &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS) {
        fail("fence (collect)", rc);
    }
}

static double get_job_loop(const pmix_proc_t *wild, long iters)
{
    double t = bench_now();
    for (long i = 0; i < iters; i++) {
        pmix_value_t *v = NULL;
        pmix_status_t rc = PMIx_Get(wild, PMIX_JOB_SIZE, NULL, 0, &v);
        if (rc != PMIX_SUCCESS) {
            fail("get JOB_SIZE", rc);
        }
        PMIX_VALUE_RELEASE(v);
    }
    return (bench_now() - t) * 1e6 / (double) (iters > 0 ? iters : 1);
}

static void card_of(uint32_t rank, char *buf, size_t len)
{
    snprintf(buf, len, "card-%08u-%050u", rank, 0u);
}

/* One pass of gets of every rank's card, each checked; mean us per get. */
static double peers_pass(uint32_t n, char (*cards)[80])
{
    pmix_proc_t peer;
    double t = bench_now();
    PMIX_LOAD_NSPACE(peer.nspace, me.nspace);
    for (uint32_t r = 0; r < n; r++) {
        pmix_value_t *v = NULL;
        pmix_status_t rc;
        peer.rank = r;
        rc = PMIx_Get(&peer, "bench.card", NULL, 0, &v);
        if (rc != PMIX_SUCCESS) {
            fail("get bench.card", rc);
        }
        if (v->type != PMIX_STRING || strcmp(v->data.string, cards[r]) != 0) {
            fail("bench.card has the wrong content", PMIX_ERR_BAD_PARAM);
        }
        PMIX_VALUE_RELEASE(v);
    }
    return (bench_now() - t) * 1e6 / (double) n;
}

struct pub_times {
    double publish, lookup, unpublish; /* seconds, summed */
};

/* Publish, look up and unpublish one key, `iters` times.  Returns false if the
 * library does not support publishing. */
static bool pub_loop(long iters, const char *prefix, struct pub_times *t)
{
    memset(t, 0, sizeof *t);
    for (long i = 0; i < iters; i++) {
        char key[PMIX_MAX_KEYLEN + 1], val[64];
        char *keys[2] = {key, NULL};
        pmix_info_t info;
        pmix_pdata_t pd;
        pmix_status_t rc;
        double t0;

        snprintf(key, sizeof key, "%s.%u.%ld", prefix, me.rank, i);
        snprintf(val, sizeof val, "port-%u-%ld", me.rank, i);

        PMIX_INFO_LOAD(&info, key, val, PMIX_STRING);
        t0 = bench_now();
        rc = PMIx_Publish(&info, 1);
        t->publish += bench_now() - t0;
        PMIX_INFO_DESTRUCT(&info);
        if (rc == PMIX_ERR_NOT_SUPPORTED) {
            return false;
        }
        if (rc != PMIX_SUCCESS) {
            fail("publish", rc);
        }

        PMIX_PDATA_CONSTRUCT(&pd);
        PMIX_LOAD_KEY(pd.key, key);
        t0 = bench_now();
        rc = PMIx_Lookup(&pd, 1, NULL, 0);
        t->lookup += bench_now() - t0;
        if (rc != PMIX_SUCCESS) {
            fail("lookup", rc);
        }
        if (pd.value.type != PMIX_STRING || strcmp(pd.value.data.string, val) != 0) {
            fail("lookup returned the wrong value", PMIX_ERR_BAD_PARAM);
        }
        PMIX_PDATA_DESTRUCT(&pd);

        t0 = bench_now();
        rc = PMIx_Unpublish(keys, NULL, 0);
        t->unpublish += bench_now() - t0;
        if (rc != PMIX_SUCCESS) {
            fail("unpublish", rc);
        }
    }
    return true;
}

static double us_per(double seconds, long n)
{
    return seconds * 1e6 / (double) (n > 0 ? n : 1);
}

int main(int argc, char **argv)
{
    long get = 100000, peer = 10000, fences = 100, barriers = 1000, pubs = 2000, pubs_all = 200;
    struct {
        const char *name;
        long *slot;
    } opts[] = {{"--get", &get},         {"--peer", &peer}, {"--fence", &fences},
                {"--barrier", &barriers}, {"--pub", &pubs},  {"--pub-all", &pubs_all}};
    pmix_proc_t wild;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    uint32_t n;
    double t;
    struct pub_times pt;

    for (int a = 1; a < argc; a += 2) {
        size_t k = 0;
        while (k < sizeof opts / sizeof opts[0] && strcmp(opts[k].name, argv[a]) != 0) {
            k++;
        }
        if (k == sizeof opts / sizeof opts[0] || a + 1 >= argc) {
            fprintf(stderr, "bench_client: bad option %s\n", argv[a]);
            return 2;
        }
        *opts[k].slot = atol(argv[a + 1]);
    }

    t = bench_now();
    rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "bench_client: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    add("init_ms", (bench_now() - t) * 1e3);
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v);
    if (rc != PMIX_SUCCESS || v->type != PMIX_UINT32) {
        fail("get JOB_SIZE", rc);
    }
    n = v->data.uint32;
    PMIX_VALUE_RELEASE(v);

    /* Job-level get: rank 0 alone while the others wait in the fence, then everyone. */
    barrier();
    if (me.rank == 0) {
        add("get_job_solo_us", get_job_loop(&wild, get));
    }
    barrier();
    add("get_job_all_us", get_job_loop(&wild, get / (long) n > 1000 ? get / (long) n : 1000));
    barrier();

    /* Modex: a 64-byte business card and two numbers, commit, the first collecting fence. */
    {
        char card[80];
        uint32_t port = 10000 + me.rank;
        uint64_t addr = 0x0a000000ull + me.rank;
        pmix_value_t val;
        card_of(me.rank, card, sizeof card);
        t = bench_now();
        PMIX_VALUE_LOAD(&val, card, PMIX_STRING);
        rc = PMIx_Put(PMIX_GLOBAL, "bench.card", &val);
        PMIX_VALUE_DESTRUCT(&val);
        if (rc == PMIX_SUCCESS) {
            PMIX_VALUE_LOAD(&val, &port, PMIX_UINT32);
            rc = PMIx_Put(PMIX_GLOBAL, "bench.port", &val);
        }
        if (rc == PMIX_SUCCESS) {
            PMIX_VALUE_LOAD(&val, &addr, PMIX_UINT64);
            rc = PMIx_Put(PMIX_GLOBAL, "bench.addr", &val);
        }
        if (rc != PMIX_SUCCESS) {
            fail("put", rc);
        }
        rc = PMIx_Commit();
        if (rc != PMIX_SUCCESS) {
            fail("commit", rc);
        }
        add("put_commit_us", (bench_now() - t) * 1e6);
        t = bench_now();
        fence_collect();
        add("fence_first_us", (bench_now() - t) * 1e6);
        /* Untimed: no rank starts the CPU-bound gets below while a peer has yet to see the
         * fence complete (see docs/benchmarks.md, "The first collecting fence"). */
        barrier();
    }

    /* Every rank's card: the first pass, then repeated passes. */
    {
        char (*cards)[80] = calloc(n, sizeof *cards);
        long passes = peer / (long) n > 1 ? peer / (long) n : 1;
        double sum = 0;
        if (cards == NULL) {
            fail("calloc", PMIX_ERR_NOMEM);
        }
        for (uint32_t r = 0; r < n; r++) {
            card_of(r, cards[r], sizeof cards[r]);
        }
        add("get_peer_first_us", peers_pass(n, cards));
        for (long p = 0; p < passes; p++) {
            sum += peers_pass(n, cards);
        }
        add("get_peer_warm_us", sum / (double) passes);
        free(cards);
    }
    barrier();

    t = bench_now();
    for (long i = 0; i < fences; i++) {
        fence_collect();
    }
    add("fence_collect_us", us_per(bench_now() - t, fences));

    barrier();
    t = bench_now();
    for (long i = 0; i < barriers; i++) {
        barrier();
    }
    add("barrier_us", us_per(bench_now() - t, barriers));

    /* Publish/lookup/unpublish: rank 0 alone, then every rank with keys of its own. */
    if (me.rank == 0) {
        if (pub_loop(pubs, "solo", &pt)) {
            add("pub_solo_publish_us", us_per(pt.publish, pubs));
            add("pub_solo_lookup_us", us_per(pt.lookup, pubs));
            add("pub_solo_unpublish_us", us_per(pt.unpublish, pubs));
        } else {
            note("publish: PMIX_ERR_NOT_SUPPORTED (publish/lookup rows not measured)");
        }
    }
    barrier();
    if (pub_loop(pubs_all, "all", &pt)) {
        add("pub_all_op_us", us_per(pt.publish + pt.lookup + pt.unpublish, 3 * pubs_all));
    }
    barrier();

    t = bench_now();
    rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fail("finalize", rc);
    }
    add("finalize_ms", (bench_now() - t) * 1e3);

    /* One write, so that nothing of it is lost if the host reads while we exit. */
    if (write(STDOUT_FILENO, report, report_len) != (ssize_t) report_len) {
        return 1;
    }
    return 0;
}
