/*
 * pmix_spawn.c - a libpmix program that spawns a job of its own copies, used by pmix-tests to
 * check PMIx_Spawn from a libpmix client under pmix-rs's server (pmix_host.c does not spawn).
 *
 *   pmix_spawn [N]      spawns N (default 2) copies of itself as "pmix_spawn child", waits for
 *                       the spawn to answer, prints "parent nspace=NS child_nspace=CNS",
 *                       fences with its own job and finalizes
 *   pmix_spawn child    gets PMIX_PARENT_ID and PMIX_JOB_SIZE and prints
 *                       "child nspace=CNS rank=R size=S parent=NS"
 *   pmix_spawn N connect  the same, and then parent and children also connect their two
 *                       namespaces (PMIx_Connect), read each other's committed data and job size
 *                       across them, print "link from=NS rank=R peer=PNS peer_rank=Q value=V
 *                       peer_size=S" for every datum read, and disconnect (PMIx_Disconnect)
 *
 * Any failure prints "FAIL: <what>" on stderr and exits 2.
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_spawn pmix_spawn.c $(pkg-config --cflags --libs pmix)
 */
#include <pmix.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, pmix_status_t rc)
{
    fprintf(stderr, "FAIL: %s: %s (%d)\n", what, PMIx_Error_string(rc), rc);
    exit(2);
}

static pmix_proc_t me;

/* Puts "spawn.<role>" = "<role>-<nspace>-<rank>" and commits it. */
static void put_mine(const char *role)
{
    char key[PMIX_MAX_KEYLEN + 1], val[PMIX_MAX_NSLEN + 64];
    pmix_value_t v;
    pmix_status_t rc;
    snprintf(key, sizeof key, "spawn.%s", role);
    snprintf(val, sizeof val, "%s-%s-%u", role, me.nspace, me.rank);
    PMIX_VALUE_LOAD(&v, val, PMIX_STRING);
    if ((rc = PMIx_Put(PMIX_GLOBAL, key, &v)) != PMIX_SUCCESS)
        fail("PMIx_Put", rc);
    PMIX_VALUE_DESTRUCT(&v);
    if ((rc = PMIx_Commit()) != PMIX_SUCCESS)
        fail("PMIx_Commit", rc);
}

/* Connects this job with `other`, reads what every rank of `other` (of `nother` ranks, put under
 * "spawn.<role>") committed and its job size, prints it, and disconnects. */
static void link_with(const char *other, uint32_t nother, const char *role)
{
    pmix_proc_t procs[2], wild;
    pmix_value_t *v = NULL, *size = NULL;
    pmix_status_t rc;
    char key[PMIX_MAX_KEYLEN + 1];
    /* The same list, in the same order, on both sides: the parent's job first. */
    bool i_am_parent = strcmp(role, "child") == 0;
    PMIX_LOAD_PROCID(&procs[i_am_parent ? 0 : 1], me.nspace, PMIX_RANK_WILDCARD);
    PMIX_LOAD_PROCID(&procs[i_am_parent ? 1 : 0], other, PMIX_RANK_WILDCARD);
    if ((rc = PMIx_Connect(procs, 2, NULL, 0)) != PMIX_SUCCESS)
        fail("PMIx_Connect", rc);
    PMIX_LOAD_PROCID(&wild, other, PMIX_RANK_WILDCARD);
    if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &size)) != PMIX_SUCCESS)
        fail("get the other job's PMIX_JOB_SIZE", rc);
    snprintf(key, sizeof key, "spawn.%s", role);
    for (uint32_t r = 0; r < nother; r++) {
        pmix_proc_t peer;
        PMIX_LOAD_PROCID(&peer, other, r);
        if ((rc = PMIx_Get(&peer, key, NULL, 0, &v)) != PMIX_SUCCESS)
            fail("get the other job's datum", rc);
        if (v->type != PMIX_STRING)
            fail("the other job's datum is not a string", PMIX_ERR_TYPE_MISMATCH);
        printf("link from=%s rank=%u peer=%s peer_rank=%u value=%s peer_size=%u\n", me.nspace,
               me.rank, other, r, v->data.string, size->data.uint32);
        PMIX_VALUE_RELEASE(v);
    }
    PMIX_VALUE_RELEASE(size);
    if ((rc = PMIx_Disconnect(procs, 2, NULL, 0)) != PMIX_SUCCESS)
        fail("PMIx_Disconnect", rc);
}

int main(int argc, char **argv)
{
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS)
        fail("PMIx_Init", rc);
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        pmix_proc_t wild;
        PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
        pmix_value_t *parent = NULL, *size = NULL;
        /* A per-process attribute: asked of this process's own name. */
        if ((rc = PMIx_Get(&me, PMIX_PARENT_ID, NULL, 0, &parent)) != PMIX_SUCCESS)
            fail("get PMIX_PARENT_ID", rc);
        if (parent->type != PMIX_PROC)
            fail("PMIX_PARENT_ID is not a proc", PMIX_ERR_TYPE_MISMATCH);
        if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &size)) != PMIX_SUCCESS)
            fail("get PMIX_JOB_SIZE", rc);
        printf("child nspace=%s rank=%u size=%u parent=%s\n", me.nspace, me.rank,
               size->data.uint32, parent->data.proc->nspace);
        if (argc > 2 && strcmp(argv[2], "connect") == 0) {
            /* The parent's job is one process (as the test starts it). */
            put_mine("child");
            link_with(parent->data.proc->nspace, 1, "parent");
        }
        PMIX_VALUE_RELEASE(parent);
        PMIX_VALUE_RELEASE(size);
    } else {
        int n = argc > 1 ? atoi(argv[1]) : 2;
        bool connect = argc > 2 && strcmp(argv[2], "connect") == 0;
        pmix_app_t app;
        PMIX_APP_CONSTRUCT(&app);
        app.cmd = strdup(argv[0]);
        app.argv = calloc(4, sizeof(char *));
        if (app.cmd == NULL || app.argv == NULL)
            fail("out of memory", PMIX_ERR_NOMEM);
        app.argv[0] = strdup(argv[0]);
        app.argv[1] = strdup("child");
        if (connect)
            app.argv[2] = strdup("connect");
        app.maxprocs = n;
        if (connect)
            put_mine("parent");
        char child[PMIX_MAX_NSLEN + 1];
        if ((rc = PMIx_Spawn(NULL, 0, &app, 1, child)) != PMIX_SUCCESS)
            fail("PMIx_Spawn", rc);
        printf("parent nspace=%s child_nspace=%s\n", me.nspace, child);
        PMIX_APP_DESTRUCT(&app);
        if (connect)
            link_with(child, (uint32_t) n, "child");
        if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS)
            fail("PMIx_Fence", rc);
    }
    if ((rc = PMIx_Finalize(NULL, 0)) != PMIX_SUCCESS)
        fail("PMIx_Finalize", rc);
    return 0;
}
