/*
 * pmix_cycle.c - init/finalize cycles on the real OpenPMIx client library (libpmix), used by
 * pmix-tests (tests/singleton.rs) for conformance row C01 with a C client: the server must
 * take a process back after its finalize.
 *
 *   pmix_cycle CYCLES
 *
 * Each cycle: PMIx_Init (the same name as the first time, checked), a get of PMIX_JOB_SIZE,
 * a put and commit of "cycle" (its number), PMIx_Finalize. After the last cycle, one more
 * init: a fence over the job with PMIX_COLLECT_DATA, then every peer's "cycle" must be the
 * last number (what a peer committed in its last cycle, before its finalize, is still served).
 * Prints "cycled rank=R size=N cycles=C", then finalizes.
 * Any failure prints "FAIL rank=R: <what>" on stderr and exits 2 without finalizing.
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_cycle pmix_cycle.c $(pkg-config --cflags --libs pmix)
 */
#include <pmix.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pmix_proc_t me;

static int fail_rank(void)
{
    return me.nspace[0] ? (int) me.rank : -1;
}

#include "pmix_fail.h"

static uint32_t job_size(void)
{
    pmix_proc_t wild;
    pmix_value_t *v = NULL;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    MUST(PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v));
    if (v->type != PMIX_UINT32)
        fail("PMIX_JOB_SIZE has type %d", v->type);
    uint32_t n = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        fail("usage: pmix_cycle CYCLES");
    int cycles = atoi(argv[1]);
    if (cycles < 1)
        fail("CYCLES must be 1 or more");
    bool yes_wait = true;
    pmix_proc_t first;
    memset(&first, 0, sizeof first);
    uint32_t size = 0;
    for (int i = 1; i <= cycles + 1; i++) {
        pmix_proc_t p;
        MUST(PMIx_Init(&p, NULL, 0));
        if (i == 1)
            first = p;
        else if (!PMIX_CHECK_PROCID(&p, &first))
            fail("init %d named %s:%u, the first %s:%u", i, p.nspace, p.rank, first.nspace,
                 first.rank);
        me = p;
        uint32_t n = job_size();
        if (i > 1 && n != size)
            fail("job size %u in cycle %d, %u before", n, i, size);
        size = n;
        if (i > cycles)
            break;
        pmix_value_t val;
        PMIX_VALUE_LOAD(&val, &i, PMIX_INT);
        MUST(PMIx_Put(PMIX_GLOBAL, "cycle", &val));
        MUST(PMIx_Commit());
        MUST(PMIx_Finalize(NULL, 0));
    }
    /* No fence before every rank is done cycling: a peer between its finalize and its next
     * init is gone for a fence. Each says so by publishing, and waits for the others'. */
    char key[PMIX_MAX_KEYLEN + 1];
    snprintf(key, sizeof key, "cycled.%u", me.rank);
    pmix_info_t mine;
    PMIX_INFO_LOAD(&mine, key, &cycles, PMIX_INT);
    MUST(PMIx_Publish(&mine, 1));
    pmix_pdata_t *all;
    PMIX_PDATA_CREATE(all, size);
    for (uint32_t r = 0; r < size; r++)
        snprintf(all[r].key, sizeof all[r].key, "cycled.%u", r);
    pmix_info_t wait[2];
    int secs = 60;
    PMIX_INFO_LOAD(&wait[0], PMIX_WAIT, &yes_wait, PMIX_BOOL);
    PMIX_INFO_LOAD(&wait[1], PMIX_TIMEOUT, &secs, PMIX_INT);
    MUST(PMIx_Lookup(all, size, wait, 2));
    PMIX_PDATA_FREE(all, size);
    pmix_info_t collect;
    bool yes = true;
    PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    MUST(PMIx_Fence(&wild, 1, &collect, 1));
    for (uint32_t r = 0; r < size; r++) {
        if (r == me.rank)
            continue;
        pmix_proc_t peer;
        pmix_value_t *v = NULL;
        PMIX_LOAD_PROCID(&peer, me.nspace, r);
        MUST(PMIx_Get(&peer, "cycle", NULL, 0, &v));
        if (v->type != PMIX_INT || v->data.integer != cycles)
            fail("cycle of rank %u: type %d value %d", r, v->type, v->data.integer);
        PMIX_VALUE_RELEASE(v);
    }
    MUST(PMIx_Fence(&wild, 1, NULL, 0));
    printf("cycled rank=%u size=%u cycles=%d\n", me.rank, size, cycles);
    fflush(stdout);
    MUST(PMIx_Finalize(NULL, 0));
    return 0;
}
