/*
 * pmix_bigclient.c - a libpmix client of a large job, started by pmix_bighost.c: the
 * OpenPMIx twin of `pmix-scale client` (pmix-tests/src/bin/pmix-scale.rs) for
 * `cargo xtask bench --scale`.
 *
 *   pmix_bigclient first|many --nodes N --ppn P [--reps R]
 *
 * Times PMIx_Init and the VmRSS it added. `first` then gets a far rank's (half the job away)
 * PMIX_HOSTNAME, PMIX_LOCAL_RANK and PMIX_NODEID and the far node's PMIX_LOCAL_PEERS
 * (PMIX_NODE_INFO + PMIX_HOSTNAME), each the first call and the mean of R more, every value
 * checked against the job's shape (node i is "node%05d" of i + 1, P consecutive ranks each).
 * It prints "RESULT <metric> <value>" lines ("NA <metric> <reason>" for a get that fails),
 * then "READY", and waits for its stdin to end before PMIx_Finalize, so that the host samples
 * its memory while it is alive. A failure prints "NOTE FAILED <what>" and exits 2.
 *
 * Build: cc -O2 -o pmix_bigclient pmix_bigclient.c $(pkg-config --cflags --libs pmix)
 */
#define _GNU_SOURCE
#include <pmix.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char buf[512];
    long kb = 0;
    if (f == NULL)
        return 0;
    while (fgets(buf, sizeof buf, f) != NULL)
        if (sscanf(buf, "VmRSS: %ld", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static void failed(const char *what, pmix_status_t rc)
{
    printf("NOTE FAILED %s: %s\n", what, PMIx_Error_string(rc));
    fflush(stdout);
    exit(2);
}

/* What a get must return. */
struct want {
    const char *str;  /* a string equal to it, or */
    uint64_t num;     /* an unsigned number equal to it */
};

static bool matches(const pmix_value_t *v, const struct want *w)
{
    switch (v->type) {
    case PMIX_STRING:
        return w->str != NULL && v->data.string != NULL && strcmp(v->data.string, w->str) == 0;
    case PMIX_UINT16:
        return w->str == NULL && v->data.uint16 == w->num;
    case PMIX_UINT32:
        return w->str == NULL && v->data.uint32 == w->num;
    case PMIX_PROC_RANK:
        return w->str == NULL && v->data.rank == w->num;
    default:
        return false;
    }
}

/* The first get of `key` and the mean of `reps` more, in µs, as "RESULT <name>_first_us" and
 * "RESULT <name>_us"; "NA" lines if the get fails. */
static void timed_get(const char *name, const pmix_proc_t *p, const char *key,
                      const pmix_info_t *info, size_t ninfo, int reps, const struct want *w)
{
    pmix_value_t *v = NULL;
    double t = now();
    pmix_status_t rc = PMIx_Get(p, key, info, ninfo, &v);
    double first = (now() - t) * 1e6;
    if (rc != PMIX_SUCCESS) {
        printf("NA %s_first_us PMIx_Get of %s: %s\n", name, key, PMIx_Error_string(rc));
        printf("NA %s_us PMIx_Get of %s: %s\n", name, key, PMIx_Error_string(rc));
        return;
    }
    if (!matches(v, w)) {
        printf("NOTE FAILED %s of %s:%u is not what the maps say (type %d)\n", key, p->nspace,
               p->rank, v->type);
        fflush(stdout);
        exit(2);
    }
    PMIX_VALUE_RELEASE(v);
    t = now();
    for (int i = 0; i < reps; i++) {
        v = NULL;
        rc = PMIx_Get(p, key, info, ninfo, &v);
        if (rc != PMIX_SUCCESS)
            failed("repeated PMIx_Get", rc);
        PMIX_VALUE_RELEASE(v);
    }
    printf("RESULT %s_first_us %.3f\n", name, first);
    printf("RESULT %s_us %.3f\n", name, (now() - t) * 1e6 / (reps > 0 ? reps : 1));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: pmix_bigclient first|many --nodes N --ppn P [--reps R]\n");
        return 2;
    }
    bool first = strcmp(argv[1], "first") == 0;
    long nodes = 0, ppn = 0, reps = 10000;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--nodes") == 0)
            nodes = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--ppn") == 0)
            ppn = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atol(argv[i + 1]);
    }
    if (nodes < 1 || ppn < 1) {
        fprintf(stderr, "pmix_bigclient: --nodes and --ppn are needed\n");
        return 2;
    }

    pmix_proc_t me;
    long rss0 = rss_kb();
    double t = now();
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS)
        failed("PMIx_Init", rc);
    printf("RESULT init_ms %.3f\n", (now() - t) * 1e3);
    printf("RESULT rss_added_kb %ld\n", rss_kb() - rss0);

    if (first) {
        uint32_t nprocs = (uint32_t)(nodes * ppn);
        uint32_t far = (me.rank + nprocs / 2) % nprocs;
        uint32_t far_node = far / (uint32_t)ppn;
        char name[32];
        snprintf(name, sizeof name, "node%05u", far_node + 1);
        pmix_proc_t p;
        PMIX_LOAD_PROCID(&p, me.nspace, far);
        struct want host = {name, 0}, lrank = {NULL, far % (uint32_t)ppn},
                    nodeid = {NULL, far_node};
        timed_get("get_hostname", &p, PMIX_HOSTNAME, NULL, 0, (int)reps, &host);
        timed_get("get_local_rank", &p, PMIX_LOCAL_RANK, NULL, 0, (int)reps, &lrank);
        timed_get("get_nodeid", &p, PMIX_NODEID, NULL, 0, (int)reps, &nodeid);

        size_t cap = (size_t)ppn * 11 + 1, len = 0;
        char *peers = malloc(cap);
        if (peers == NULL)
            failed("malloc", PMIX_ERR_NOMEM);
        peers[0] = '\0';
        for (uint32_t r = far_node * (uint32_t)ppn; r < (far_node + 1) * (uint32_t)ppn; r++)
            len += (size_t)snprintf(peers + len, cap - len, len ? ",%u" : "%u", r);
        struct want want_peers = {peers, 0};
        pmix_info_t on_node[2];
        bool yes = true;
        PMIX_INFO_LOAD(&on_node[0], PMIX_NODE_INFO, &yes, PMIX_BOOL);
        PMIX_INFO_LOAD(&on_node[1], PMIX_HOSTNAME, name, PMIX_STRING);
        PMIX_LOAD_PROCID(&p, me.nspace, PMIX_RANK_WILDCARD);
        timed_get("get_node_peers", &p, PMIX_LOCAL_PEERS, on_node, 2, (int)reps, &want_peers);
        PMIX_INFO_DESTRUCT(&on_node[0]);
        PMIX_INFO_DESTRUCT(&on_node[1]);
        free(peers);
    }
    printf("READY\n");
    fflush(stdout);

    /* Alive until the host has sampled our memory: it closes our stdin then. */
    char buf[256];
    while (fgets(buf, sizeof buf, stdin) != NULL) {
    }
    rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS)
        failed("PMIx_Finalize", rc);
    return 0;
}
