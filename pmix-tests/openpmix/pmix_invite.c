/*
 * pmix_invite.c - a libpmix program forming PMIx groups by invitation (PMIx_Group_invite,
 * PMIx_Group_join) and leaving them (PMIx_Group_leave), used by pmix-tests against pmixrun
 * (with Debian's libpmix 4.2 and with Open MPI 5's 5.0). libpmix invites and answers with
 * events; leaving is a command to the server.
 *
 *   pmix_invite accept   (3 ranks) rank 0 invites ranks 1 and 2 into "inv" with the blocking
 *                        PMIx_Group_invite; they accept when they hear PMIX_GROUP_INVITED and
 *                        wait for PMIX_GROUP_CONSTRUCT_COMPLETE; then rank 1 leaves and the
 *                        others wait for PMIX_GROUP_LEFT naming it. Prints "invited rank=0",
 *                        "joined rank=R leader=0 members=3", "left rank=1",
 *                        "heard rank=R left=1".
 *   pmix_invite decline  (2 ranks) rank 0 invites rank 1 into "dec" (PMIx_Group_invite_nb),
 *                        which declines; rank 0 waits for PMIX_GROUP_INVITE_DECLINED from it
 *                        (libpmix's invitation itself waits for ever on a decline). Prints
 *                        "declining rank=1", "declined rank=0 by=1".
 *   pmix_invite ends     (2 ranks) rank 0 invites rank 1 into "gone"; rank 1 finalizes and
 *                        exits without answering; the server tells rank 0 (PMIX_PROC_TERMINATED),
 *                        which libpmix turns into PMIX_GROUP_INVITE_FAILED. Prints
 *                        "ending rank=1", "failed rank=0 affected=1".
 *   pmix_invite leave-unknown
 *                        every rank leaves a group that does not exist: "unknown rank=R
 *                        status=<PMIx_Error_string>".
 *
 * Every wait for an event is bounded (30 s). Any failure prints "FAIL rank=R: <what>" on
 * stderr and exits 2 (pmix_fail.h).
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_invite pmix_invite.c $(pkg-config --cflags --libs pmix)
 */
#include <pmix.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static pmix_proc_t me;
static int fail_rank(void) { return me.nspace[0] ? (int) me.rank : -1; }
#include "pmix_fail.h"

/* What the handlers saw, under `mu`. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int invited, completed, left, declined, failed;
static char invited_to[64];
static pmix_proc_t leader, left_proc, declined_by, failed_proc;
static size_t complete_members;

static void handler(size_t id, pmix_status_t status, const pmix_proc_t *source,
                    pmix_info_t info[], size_t ninfo, pmix_info_t results[], size_t nresults,
                    pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    const pmix_proc_t *affected = NULL;
    const char *grp = NULL;
    size_t range = 0;
    (void) id;
    (void) results;
    (void) nresults;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_GROUP_ID) && info[i].value.type == PMIX_STRING)
            grp = info[i].value.data.string;
        else if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC)
                 && info[i].value.type == PMIX_PROC)
            affected = info[i].value.data.proc;
        else if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_CUSTOM_RANGE)
                 && info[i].value.type == PMIX_DATA_ARRAY)
            range = info[i].value.data.darray->size;
    }
    pthread_mutex_lock(&mu);
    switch (status) {
    case PMIX_GROUP_INVITED:
        invited++;
        leader = *source;
        snprintf(invited_to, sizeof invited_to, "%s", grp ? grp : "");
        break;
    case PMIX_GROUP_CONSTRUCT_COMPLETE:
        completed++;
        complete_members = range;
        break;
    case PMIX_GROUP_LEFT:
        left++;
        if (affected)
            left_proc = *affected;
        break;
    case PMIX_GROUP_INVITE_DECLINED:
        declined++;
        declined_by = *source;
        break;
    case PMIX_GROUP_INVITE_FAILED:
        failed++;
        if (affected)
            failed_proc = *affected;
        break;
    default:
        break;
    }
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    /* Let the chain go on: libpmix's own handlers may want the event too. */
    if (cbfunc)
        cbfunc(PMIX_SUCCESS, NULL, 0, NULL, NULL, cbdata);
}

/* Waits until *counter reaches 1, for at most 30 s. */
static void wait_for(int *counter, const char *what)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&mu);
    while (*counter < 1) {
        if (pthread_cond_timedwait(&cv, &mu, &until) == ETIMEDOUT) {
            pthread_mutex_unlock(&mu);
            fail("no %s within 30 s", what);
        }
    }
    pthread_mutex_unlock(&mu);
}

static void registered(pmix_status_t status, size_t ref, void *cbdata)
{
    (void) ref;
    pthread_mutex_lock(&mu);
    *(pmix_status_t *) cbdata = status;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* One registration per code: single-code handlers run before libpmix's own (which asks for
 * several codes and ends the chain). */
static void listen_to(pmix_status_t code)
{
    pmix_status_t rc = 1;
    PMIx_Register_event_handler(&code, 1, NULL, 0, handler, registered, &rc);
    pthread_mutex_lock(&mu);
    while (rc == 1)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    if (rc != PMIX_SUCCESS)
        fail("registering for %s: %s", PMIx_Error_string(code), PMIx_Error_string(rc));
}

static void fence(void)
{
    pmix_proc_t all;
    PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
    MUST(PMIx_Fence(&all, 1, NULL, 0));
}

static void never_called(pmix_status_t status, pmix_info_t *info, size_t ninfo, void *cbdata,
                         pmix_release_cbfunc_t release, void *release_data)
{
    (void) info;
    (void) ninfo;
    (void) cbdata;
    /* libpmix completes an invitation only when all accepted. */
    fail("an invitation completed with %s", PMIx_Error_string(status));
    if (release)
        release(release_data);
}

/* Rank 0 invites rank 1 into `grp` without waiting. */
static void invite_rank_1(const char *grp)
{
    pmix_proc_t procs[2];
    PMIX_LOAD_PROCID(&procs[0], me.nspace, 0);
    PMIX_LOAD_PROCID(&procs[1], me.nspace, 1);
    MUST(PMIx_Group_invite_nb(grp, procs, 2, NULL, 0, never_called, NULL));
}

/* Waits for an invitation into `grp` from rank 0. */
static void await_invitation(const char *grp)
{
    wait_for(&invited, "PMIX_GROUP_INVITED");
    if (strcmp(invited_to, grp) != 0 || leader.rank != 0)
        fail("invited into \"%s\" by rank %u", invited_to, leader.rank);
}

static void accept_scenario(void)
{
    pmix_info_t *results = NULL;
    size_t nresults = 0;
    fence();
    if (me.rank == 0) {
        pmix_proc_t procs[3];
        for (uint32_t r = 0; r < 3; r++)
            PMIX_LOAD_PROCID(&procs[r], me.nspace, r);
        MUST(PMIx_Group_invite("inv", procs, 3, NULL, 0, &results, &nresults));
        printf("invited rank=0\n");
    } else {
        await_invitation("inv");
        MUST(PMIx_Group_join("inv", &leader, PMIX_GROUP_ACCEPT, NULL, 0, &results, &nresults));
        wait_for(&completed, "PMIX_GROUP_CONSTRUCT_COMPLETE");
        printf("joined rank=%u leader=%u members=%zu\n", me.rank, leader.rank,
               complete_members);
    }
    fflush(stdout);
    fence();
    if (me.rank == 1) {
        MUST(PMIx_Group_leave("inv", NULL, 0));
        printf("left rank=1\n");
    } else {
        wait_for(&left, "PMIX_GROUP_LEFT");
        printf("heard rank=%u left=%u\n", me.rank, left_proc.rank);
    }
    fflush(stdout);
    fence();
}

static void decline_scenario(void)
{
    pmix_info_t *results = NULL;
    size_t nresults = 0;
    fence();
    if (me.rank == 0) {
        invite_rank_1("dec");
        wait_for(&declined, "PMIX_GROUP_INVITE_DECLINED");
        printf("declined rank=0 by=%u\n", declined_by.rank);
    } else {
        await_invitation("dec");
        printf("declining rank=1\n");
        MUST(PMIx_Group_join("dec", &leader, PMIX_GROUP_DECLINE, NULL, 0, &results, &nresults));
    }
    fflush(stdout);
    fence();
}

static void ends_scenario(void)
{
    fence();
    if (me.rank == 0) {
        invite_rank_1("gone");
        wait_for(&failed, "PMIX_GROUP_INVITE_FAILED");
        printf("failed rank=0 affected=%u\n", failed_proc.rank);
    } else {
        await_invitation("gone");
        printf("ending rank=1\n");
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        fail("usage: pmix_invite accept|decline|ends|leave-unknown");
    MUST(PMIx_Init(&me, NULL, 0));
    pmix_status_t codes[] = {PMIX_GROUP_INVITED, PMIX_GROUP_CONSTRUCT_COMPLETE, PMIX_GROUP_LEFT,
                             PMIX_GROUP_INVITE_DECLINED, PMIX_GROUP_INVITE_FAILED};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        listen_to(codes[i]);
    if (strcmp(argv[1], "accept") == 0) {
        accept_scenario();
    } else if (strcmp(argv[1], "decline") == 0) {
        decline_scenario();
    } else if (strcmp(argv[1], "ends") == 0) {
        ends_scenario();
    } else if (strcmp(argv[1], "leave-unknown") == 0) {
        pmix_status_t rc = PMIx_Group_leave("nosuch", NULL, 0);
        printf("unknown rank=%u status=%s\n", me.rank, PMIx_Error_string(rc));
        fflush(stdout);
    } else {
        fail("unknown scenario %s", argv[1]);
    }
    MUST(PMIx_Finalize(NULL, 0));
    return 0;
}
