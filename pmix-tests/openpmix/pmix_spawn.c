/*
 * pmix_spawn.c - a libpmix program that spawns a job of its own copies, used by pmix-tests to
 * check PMIx_Spawn from a libpmix client under pmix-rs's server (pmix_host.c does not spawn).
 *
 *   pmix_spawn [N]      spawns N (default 2) copies of itself as "pmix_spawn child", waits for
 *                       the spawn to answer, prints "parent nspace=NS child_nspace=CNS",
 *                       fences with its own job and finalizes
 *   pmix_spawn child    gets PMIX_PARENT_ID and PMIX_JOB_SIZE and prints
 *                       "child nspace=CNS rank=R size=S parent=NS"
 *
 * Any failure prints "FAIL: <what>" on stderr and exits 2.
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_spawn pmix_spawn.c $(pkg-config --cflags --libs pmix)
 */
#include <pmix.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, pmix_status_t rc)
{
    fprintf(stderr, "FAIL: %s: %s (%d)\n", what, PMIx_Error_string(rc), rc);
    exit(2);
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS)
        fail("PMIx_Init", rc);
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        pmix_proc_t wild;
        PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
        pmix_value_t *parent = NULL, *size = NULL;
        if ((rc = PMIx_Get(&wild, PMIX_PARENT_ID, NULL, 0, &parent)) != PMIX_SUCCESS)
            fail("get PMIX_PARENT_ID", rc);
        if (parent->type != PMIX_PROC)
            fail("PMIX_PARENT_ID is not a proc", PMIX_ERR_TYPE_MISMATCH);
        if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &size)) != PMIX_SUCCESS)
            fail("get PMIX_JOB_SIZE", rc);
        printf("child nspace=%s rank=%u size=%u parent=%s\n", me.nspace, me.rank,
               size->data.uint32, parent->data.proc->nspace);
        PMIX_VALUE_RELEASE(parent);
        PMIX_VALUE_RELEASE(size);
    } else {
        int n = argc > 1 ? atoi(argv[1]) : 2;
        pmix_app_t app;
        PMIX_APP_CONSTRUCT(&app);
        app.cmd = strdup(argv[0]);
        app.argv = calloc(3, sizeof(char *));
        if (app.cmd == NULL || app.argv == NULL)
            fail("out of memory", PMIX_ERR_NOMEM);
        app.argv[0] = strdup(argv[0]);
        app.argv[1] = strdup("child");
        app.maxprocs = n;
        char child[PMIX_MAX_NSLEN + 1];
        if ((rc = PMIx_Spawn(NULL, 0, &app, 1, child)) != PMIX_SUCCESS)
            fail("PMIx_Spawn", rc);
        printf("parent nspace=%s child_nspace=%s\n", me.nspace, child);
        PMIX_APP_DESTRUCT(&app);
        if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS)
            fail("PMIx_Fence", rc);
    }
    if ((rc = PMIx_Finalize(NULL, 0)) != PMIX_SUCCESS)
        fail("PMIx_Finalize", rc);
    return 0;
}
