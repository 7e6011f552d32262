/*
 * pmix_reinc.c - a libpmix process that learns whether it was restarted, for
 * pmix-tests/tests/recovery.rs: run under `pmixrun --max-restarts 1`.
 *
 *   pmix_reinc
 *
 * Each rank reads its own PMIX_REINCARNATION (how many times the launcher restarted it). In
 * its first life (0) rank 1 fences with the whole job, so that every rank is up, then exits
 * with status 3 without finalize; the other ranks fence too. Every life that does not fail
 * prints "rank R reincarnation K" and finalizes: rank 1's second life prints 1, and fences
 * with nobody (the others may be gone). Were the value not given, rank 1 would fail in both
 * lives and the run with it.
 * A failure prints "FAIL rank=R: <what>" on stderr and exits 2.
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_reinc pmix_reinc.c $(pkg-config --cflags --libs pmix)
 */
#include <pmix.h>

#include <stdio.h>
#include <stdlib.h>

static pmix_proc_t me;

static int fail_rank(void)
{
    return me.rank == PMIX_RANK_UNDEF ? -1 : (int)me.rank;
}

#include "pmix_fail.h"

int main(void)
{
    me.rank = PMIX_RANK_UNDEF;
    MUST(PMIx_Init(&me, NULL, 0));
    pmix_value_t *v = NULL;
    MUST(PMIx_Get(&me, PMIX_REINCARNATION, NULL, 0, &v));
    if (v->type != PMIX_UINT32)
        fail("PMIX_REINCARNATION has type %d, not uint32", (int)v->type);
    unsigned reincarnation = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
    if (me.rank != 1 || reincarnation == 0)
        MUST(PMIx_Fence(NULL, 0, NULL, 0));
    if (me.rank == 1 && reincarnation == 0)
        exit(3);
    printf("rank %u reincarnation %u\n", (unsigned)me.rank, reincarnation);
    fflush(stdout);
    MUST(PMIx_Finalize(NULL, 0));
    return 0;
}
