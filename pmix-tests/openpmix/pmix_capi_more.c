/*
 * pmix_capi_more.c - the rest of the PMIx client C API: the non-blocking forms of publishing,
 * groups, spawning and connecting, the string functions, relative locality, node and
 * process maps, and the requests a server may not serve. Written for pmix-capi (pmix-rs's
 * libpmix.so.2), whose test (pmix-tests/tests/capi.rs) runs it under pmixrun on pmix-capi and
 * on Debian's libpmix and compares what they print: nothing here prints a namespace, a
 * pointer or a status the two libraries name differently.
 *
 *   pmix_capi_more strings   (any number of ranks; prints one set of lines per rank)
 *       "str alloc=..." "str iof=..." "str link=..." "str dev=..." "str cmp=..."
 *       "str dirs=..." each the library's word for a few codes (in brackets, so a trailing
 *       space shows); "str attr-name key=PMIX_JOB_SIZE name=PMIX_JOB_SIZE user=mykey" (a key,
 *       a name and a user key given to PMIx_Get_attribute_name); "str rel=0x..." the
 *       PMIx_Get_relative_locality of two locality strings sharing package, L3 and L2 but
 *       not L1, core or thread (the status is not printed: libpmix answers
 *       PMIX_ERR_TAKE_NEXT_OPTION with the locality computed); "str regex=R ppn=P" whether
 *       PMIx_generate_regex and PMIx_generate_ppn succeeded with a string (1) (their forms
 *       differ between OpenPMIx versions); "str progress" after PMIx_Progress.
 *
 *   pmix_capi_more nb        (2 ranks)
 *       "pub rank=0 status=0"          PMIx_Publish_nb of "capi.more" = "from-0"
 *       "lookup rank=1 status=0 n=1 key=capi.more value=from-0 publisher=0"
 *                                       PMIx_Lookup_nb of it after a fence (data lent to the
 *                                       callback, printed there)
 *       "unpub rank=0 status=0"        PMIx_Unpublish_nb of it
 *       "gcons rank=R status=0"        PMIx_Group_construct_nb of both ranks
 *       "gdest rank=R status=0"        PMIx_Group_destruct_nb of it
 *       "spawned rank=0 status=0 nspace=1"   PMIx_Spawn_nb of one "pmix_capi_more child",
 *                                       nspace=1 when the callback got a namespace
 *       "connected rank=0 status=0" / "disconnected rank=0 status=0"
 *                                       PMIx_Connect_nb and PMIx_Disconnect_nb of rank 0
 *                                       with the child
 *       "child connected=0 disconnected=0"   the child's, by PMIx_Connect and
 *                                       PMIx_Disconnect (blocking) with its parent
 *
 *   pmix_capi_more finalize-barrier   (any number of ranks; on pmix-capi only: libpmix 4.2
 *                                       and 5.0 deadlock in PMIx_Finalize there)
 *       "finalized rank=0 status=0"    rank 0's PMIx_Finalize with PMIX_EMBED_BARRIER
 *       "fence rank=R status=0"        the others' plain PMIx_Fence over the namespace,
 *                                       which only that embedded barrier completes (without
 *                                       it the fence fails: a participant finalized)
 *
 * Statuses are numbers (PMIx_Error_string's names differ between the libraries). Every wait
 * for a callback is bounded (30 s). Any failure prints "FAIL rank=R: <what>" on stderr and
 * exits 2 (pmix_fail.h).
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_capi_more pmix_capi_more.c \
 *          $(pkg-config --cflags --libs pmix)
 */
#include <pmix.h>
#include <pmix_server.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pmix_proc_t me;
static int fail_rank(void) { return me.nspace[0] ? (int) me.rank : -1; }
#include "pmix_fail.h"

/* ---- waiting for callbacks ------------------------------------------------------------ */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* One callback's outcome: `done` once it ran, its status. */
struct op {
    int done;
    pmix_status_t status;
};

static void finish(struct op *op, pmix_status_t status)
{
    pthread_mutex_lock(&mu);
    op->status = status;
    op->done = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* Waits for `op`'s callback, for at most 30 s; its status. */
static pmix_status_t await(struct op *op, const char *what)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&mu);
    while (!op->done) {
        if (pthread_cond_timedwait(&cv, &mu, &until) == ETIMEDOUT) {
            pthread_mutex_unlock(&mu);
            fail("no completion of %s within 30 s", what);
        }
    }
    pthread_mutex_unlock(&mu);
    return op->status;
}

static void op_done(pmix_status_t status, void *cbdata)
{
    finish(cbdata, status);
}

static void info_done(pmix_status_t status, pmix_info_t *info, size_t ninfo, void *cbdata,
                      pmix_release_cbfunc_t release, void *release_data)
{
    (void) info;
    (void) ninfo;
    if (release)
        release(release_data);
    finish(cbdata, status);
}

static void fence(void)
{
    pmix_proc_t all;
    PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
    MUST(PMIx_Fence(&all, 1, NULL, 0));
}

/* ---- strings -------------------------------------------------------------------------- */

static void strings(void)
{
    printf("str alloc=[%s][%s][%s][%s][%s] rank=%u\n", PMIx_Alloc_directive_string(0),
           PMIx_Alloc_directive_string(PMIX_ALLOC_NEW),
           PMIx_Alloc_directive_string(PMIX_ALLOC_EXTEND),
           PMIx_Alloc_directive_string(PMIX_ALLOC_RELEASE),
           PMIx_Alloc_directive_string(PMIX_ALLOC_REAQUIRE), me.rank);
    /* One at a time: libpmix writes the channels' words in one static buffer, which the
     * next call overwrites. */
    pmix_iof_channel_t channels[] = {0, PMIX_FWD_STDIN_CHANNEL,
                                     PMIX_FWD_STDOUT_CHANNEL | PMIX_FWD_STDERR_CHANNEL,
                                     PMIX_FWD_ALL_CHANNELS};
    printf("str iof=");
    for (size_t i = 0; i < sizeof channels / sizeof channels[0]; i++)
        printf("[%s]", PMIx_IOF_channel_string(channels[i]));
    printf(" rank=%u\n", me.rank);
    printf("str link=[%s][%s][%s] rank=%u\n", PMIx_Link_state_string(PMIX_LINK_STATE_UNKNOWN),
           PMIx_Link_state_string(PMIX_LINK_DOWN), PMIx_Link_state_string(PMIX_LINK_UP),
           me.rank);
    printf("str dev=[%s][%s][%s][%s] rank=%u\n", PMIx_Device_type_string(PMIX_DEVTYPE_UNKNOWN),
           PMIx_Device_type_string(PMIX_DEVTYPE_GPU),
           PMIx_Device_type_string(PMIX_DEVTYPE_NETWORK),
           PMIx_Device_type_string(PMIX_DEVTYPE_COPROC), me.rank);
    printf("str cmp=[%s][%s][%s][%s] rank=%u\n", PMIx_Value_comparison_string(PMIX_EQUAL),
           PMIx_Value_comparison_string(PMIX_VALUE1_GREATER),
           PMIx_Value_comparison_string(PMIX_VALUE2_GREATER),
           PMIx_Value_comparison_string(PMIX_VALUE_TYPE_DIFFERENT), me.rank);
    pmix_info_directives_t dirs[] = {0, PMIX_INFO_REQD, PMIX_INFO_ARRAY_END,
                                     PMIX_INFO_REQD_PROCESSED, PMIX_INFO_QUALIFIER,
                                     PMIX_INFO_REQD | PMIX_INFO_ARRAY_END};
    printf("str dirs=");
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char *s = PMIx_Info_directives_string(dirs[i]);
        printf("[%s]", s ? s : "(null)");
        free(s);
    }
    printf(" rank=%u\n", me.rank);
    printf("str attr-name key=%s name=%s user=%s rank=%u\n",
           PMIx_Get_attribute_name(PMIX_JOB_SIZE), PMIx_Get_attribute_name("PMIX_JOB_SIZE"),
           PMIx_Get_attribute_name("mykey"), me.rank);

    pmix_locality_t loc = 0;
    (void) PMIx_Get_relative_locality("hwloc:SK0:L30:L20:L10:CR0:HT0",
                                      "hwloc:SK0:L30:L20:L11:CR1:HT2", &loc);
    printf("str rel=%#x rank=%u\n", (unsigned) loc, me.rank);

    char *regex = NULL, *ppn = NULL;
    pmix_status_t rrc = PMIx_generate_regex("c001,c002,c005", &regex);
    pmix_status_t prc = PMIx_generate_ppn("0,1;2", &ppn);
    printf("str regex=%d ppn=%d rank=%u\n", rrc == PMIX_SUCCESS && regex != NULL,
           prc == PMIX_SUCCESS && ppn != NULL, me.rank);
    free(regex);
    free(ppn);

    PMIx_Progress();
    printf("str progress rank=%u\n", me.rank);
}

/* ---- non-blocking calls ----------------------------------------------------------------- */

struct lookup {
    struct op op;
    char line[1024];
};

static void lookup_done(pmix_status_t status, pmix_pdata_t data[], size_t ndata, void *cbdata)
{
    struct lookup *l = cbdata;
    /* The data is the library's until this returns: printed here. */
    if (ndata > 0 && data[0].value.type == PMIX_STRING)
        snprintf(l->line, sizeof l->line, "n=%zu key=%.64s value=%.64s publisher=%u", ndata,
                 data[0].key, data[0].value.data.string, data[0].proc.rank);
    else
        snprintf(l->line, sizeof l->line, "n=%zu", ndata);
    finish(&l->op, status);
}

static void names_nb(void)
{
    if (me.rank == 0) {
        pmix_info_t info;
        struct op op = {0};
        PMIX_INFO_LOAD(&info, "capi.more", "from-0", PMIX_STRING);
        MUST(PMIx_Publish_nb(&info, 1, op_done, &op));
        printf("pub rank=0 status=%d\n", await(&op, "PMIx_Publish_nb"));
        PMIX_INFO_DESTRUCT(&info);
    }
    fence();
    if (me.rank == 1) {
        char *keys[] = {"capi.more", NULL};
        struct lookup l = {0};
        MUST(PMIx_Lookup_nb(keys, NULL, 0, lookup_done, &l));
        pmix_status_t rc = await(&l.op, "PMIx_Lookup_nb");
        printf("lookup rank=1 status=%d %s\n", rc, l.line);
    }
    fence();
    if (me.rank == 0) {
        char *keys[] = {"capi.more", NULL};
        struct op op = {0};
        MUST(PMIx_Unpublish_nb(keys, NULL, 0, op_done, &op));
        printf("unpub rank=0 status=%d\n", await(&op, "PMIx_Unpublish_nb"));
    }
    fflush(stdout);
}

static void groups_nb(void)
{
    pmix_proc_t procs[2];
    struct op cons = {0}, dest = {0};
    PMIX_LOAD_PROCID(&procs[0], me.nspace, 0);
    PMIX_LOAD_PROCID(&procs[1], me.nspace, 1);
    MUST(PMIx_Group_construct_nb("capimore", procs, 2, NULL, 0, info_done, &cons));
    printf("gcons rank=%u status=%d\n", me.rank, await(&cons, "PMIx_Group_construct_nb"));
    MUST(PMIx_Group_destruct_nb("capimore", NULL, 0, op_done, &dest));
    printf("gdest rank=%u status=%d\n", me.rank, await(&dest, "PMIx_Group_destruct_nb"));
    fflush(stdout);
}

struct spawned {
    struct op op;
    pmix_nspace_t nspace;
};

static void spawn_done(pmix_status_t status, pmix_nspace_t nspace, void *cbdata)
{
    struct spawned *s = cbdata;
    /* The namespace is the library's until this returns: copied. */
    if (nspace != NULL)
        PMIX_LOAD_NSPACE(s->nspace, nspace);
    finish(&s->op, status);
}

static void spawn_nb(const char *self)
{
    if (me.rank != 0)
        return;
    pmix_app_t app;
    struct spawned s = {0};
    PMIX_APP_CONSTRUCT(&app);
    app.cmd = strdup(self);
    app.argv = calloc(3, sizeof(char *));
    app.argv[0] = strdup(self);
    app.argv[1] = strdup("child");
    app.maxprocs = 1;
    MUST(PMIx_Spawn_nb(NULL, 0, &app, 1, spawn_done, &s));
    pmix_status_t rc = await(&s.op, "PMIx_Spawn_nb");
    printf("spawned rank=0 status=%d nspace=%d\n", rc, s.nspace[0] != '\0');
    fflush(stdout);
    PMIX_APP_DESTRUCT(&app);
    if (rc != PMIX_SUCCESS)
        return;

    pmix_proc_t pair[2];
    struct op conn = {0}, disc = {0};
    PMIX_LOAD_PROCID(&pair[0], me.nspace, 0);
    PMIX_LOAD_PROCID(&pair[1], s.nspace, 0);
    MUST(PMIx_Connect_nb(pair, 2, NULL, 0, op_done, &conn));
    printf("connected rank=0 status=%d\n", await(&conn, "PMIx_Connect_nb"));
    MUST(PMIx_Disconnect_nb(pair, 2, NULL, 0, op_done, &disc));
    printf("disconnected rank=0 status=%d\n", await(&disc, "PMIx_Disconnect_nb"));
    fflush(stdout);
}

/* The spawned child: connects with its parent (PMIX_PARENT_ID) and disconnects. */
static void child(void)
{
    pmix_value_t *v = NULL;
    pmix_proc_t pair[2];
    /* A per-process attribute: asked of this process's own name. */
    MUST(PMIx_Get(&me, PMIX_PARENT_ID, NULL, 0, &v));
    if (v->type != PMIX_PROC)
        fail("PMIX_PARENT_ID of type %d", v->type);
    pair[0] = *v->data.proc;
    PMIX_LOAD_PROCID(&pair[1], me.nspace, me.rank);
    PMIX_VALUE_RELEASE(v);
    pmix_status_t c = PMIx_Connect(pair, 2, NULL, 0);
    pmix_status_t d = PMIx_Disconnect(pair, 2, NULL, 0);
    printf("child connected=%d disconnected=%d\n", c, d);
    fflush(stdout);
}

/* Rank 0 finalizes with an embedded barrier, the others fence; see the header. Rank 0
 * returns finalized, the others not yet. */
static void finalize_barrier(void)
{
    if (me.rank == 0) {
        pmix_info_t info;
        bool yes = true;
        PMIX_INFO_LOAD(&info, PMIX_EMBED_BARRIER, &yes, PMIX_BOOL);
        pmix_status_t rc = PMIx_Finalize(&info, 1);
        printf("finalized rank=0 status=%d\n", rc);
        return;
    }
    pmix_proc_t all;
    PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
    printf("fence rank=%u status=%d\n", me.rank, PMIx_Fence(&all, 1, NULL, 0));
}

int main(int argc, char **argv)
{
    if (argc < 2)
        fail("usage: pmix_capi_more strings|nb|child|finalize-barrier");
    MUST(PMIx_Init(&me, NULL, 0));
    if (strcmp(argv[1], "strings") == 0) {
        strings();
    } else if (strcmp(argv[1], "nb") == 0) {
        names_nb();
        fence();
        groups_nb();
        fence();
        spawn_nb(argv[0]);
        fence();
    } else if (strcmp(argv[1], "child") == 0) {
        child();
    } else if (strcmp(argv[1], "finalize-barrier") == 0) {
        finalize_barrier();
        if (me.rank == 0) {
            fflush(stdout);
            return 0;
        }
    } else {
        fail("unknown scenario %s", argv[1]);
    }
    fflush(stdout);
    MUST(PMIx_Finalize(NULL, 0));
    return 0;
}
