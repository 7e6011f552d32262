/*
 * pmix_debugger.c - a libpmix debugger tool, the C twin of pmix-debugger (tests/debugger.rs),
 * with the same lines:
 *
 *     pmix_debugger PID
 *
 * attaches to the server of PID (PMIx_tool_init with PMIX_SERVER_PIDINFO), registers for
 * PMIX_READY_FOR_DEBUG and PMIX_EVENT_JOB_END, waits for a job held in init to be ready and
 * prints "debugger ready job=<nspace>", one "debugger proc rank=R pid=P" line per process
 * (PMIX_QUERY_PROC_TABLE), then "debugger waiting", and reads one command from stdin:
 * "release" (PMIx_Notify_event of PMIX_DEBUGGER_RELEASE to the job, "debugger released") or
 * "kill" (PMIx_Job_control with PMIX_JOB_CTRL_KILL, "debugger killed"); then waits for the
 * job's end ("debugger job-end job=<nspace>"), finalizes ("debugger finalized"). At the end of
 * stdin it exits 3 at once. "FAIL rank=-1: <what>" and exit 2 on any failure; every wait
 * gives up after 60 seconds.
 */
#include <pmix_tool.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fail_rank(void) { return -1; }
#include "pmix_fail.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static char ready_job[PMIX_MAX_NSLEN + 1];
static char ended_job[PMIX_MAX_NSLEN + 1];

static void handler(size_t id, pmix_status_t status, const pmix_proc_t *source,
                    pmix_info_t info[], size_t ninfo, pmix_info_t results[], size_t nresults,
                    pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void) id;
    (void) source;
    (void) results;
    (void) nresults;
    const char *ns = NULL;
    for (size_t i = 0; i < ninfo; i++)
        if (PMIX_CHECK_KEY(&info[i], PMIX_NSPACE) && info[i].value.type == PMIX_STRING)
            ns = info[i].value.data.string;
    pthread_mutex_lock(&lock);
    if (ns != NULL && status == PMIX_READY_FOR_DEBUG)
        snprintf(ready_job, sizeof ready_job, "%s", ns);
    if (ns != NULL && status == PMIX_EVENT_JOB_END)
        snprintf(ended_job, sizeof ended_job, "%s", ns);
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    if (cbfunc != NULL)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* Waits until `what` holds a name (60 s at most). */
static void wait_for(const char *what, char *slot)
{
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    end.tv_sec += 60;
    pthread_mutex_lock(&lock);
    while (slot[0] == '\0')
        if (pthread_cond_timedwait(&cond, &lock, &end) != 0)
            fail("no %s within 60 s", what);
    pthread_mutex_unlock(&lock);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        fail("usage: pmix_debugger PID");
    pid_t pid = (pid_t) atol(argv[1]);
    pmix_info_t dir;
    PMIX_INFO_LOAD(&dir, PMIX_SERVER_PIDINFO, &pid, PMIX_PID);
    pmix_proc_t me;
    MUST(PMIx_tool_init(&me, &dir, 1));
    pmix_status_t codes[2] = {PMIX_READY_FOR_DEBUG, PMIX_EVENT_JOB_END};
    pmix_status_t rc = PMIx_Register_event_handler(codes, 2, NULL, 0, handler, NULL, NULL);
    if (rc < 0)
        fail("PMIx_Register_event_handler: %s", PMIx_Error_string(rc));
    wait_for("PMIX_READY_FOR_DEBUG", ready_job);
    char job[PMIX_MAX_NSLEN + 1];
    pthread_mutex_lock(&lock);
    snprintf(job, sizeof job, "%s", ready_job);
    pthread_mutex_unlock(&lock);
    printf("debugger ready job=%s\n", job);

    pmix_query_t q;
    PMIX_QUERY_CONSTRUCT(&q);
    PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_PROC_TABLE);
    PMIX_INFO_CREATE(q.qualifiers, 1);
    q.nqual = 1;
    PMIX_INFO_LOAD(&q.qualifiers[0], PMIX_NSPACE, job, PMIX_STRING);
    pmix_info_t *results;
    size_t n;
    MUST(PMIx_Query_info(&q, 1, &results, &n));
    for (size_t i = 0; i < n; i++) {
        const pmix_value_t *v = &results[i].value;
        if (!PMIX_CHECK_KEY(&results[i], PMIX_QUERY_PROC_TABLE) || v->type != PMIX_DATA_ARRAY
            || v->data.darray == NULL || v->data.darray->type != PMIX_PROC_INFO)
            continue;
        const pmix_proc_info_t *pi = (const pmix_proc_info_t *) v->data.darray->array;
        for (size_t j = 0; j < v->data.darray->size; j++)
            printf("debugger proc rank=%u pid=%d\n", pi[j].proc.rank, (int) pi[j].pid);
    }
    PMIX_INFO_FREE(results, n);
    printf("debugger waiting\n");
    fflush(stdout);

    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL)
        _exit(3);
    pmix_proc_t all;
    PMIX_LOAD_PROCID(&all, job, PMIX_RANK_WILDCARD);
    if (strncmp(line, "release", 7) == 0) {
        pmix_info_t info[2];
        pmix_data_array_t range = {.type = PMIX_PROC, .size = 1, .array = &all};
        bool yes = true;
        PMIX_INFO_LOAD(&info[0], PMIX_EVENT_CUSTOM_RANGE, &range, PMIX_DATA_ARRAY);
        PMIX_INFO_LOAD(&info[1], PMIX_EVENT_NON_DEFAULT, &yes, PMIX_BOOL);
        MUST(PMIx_Notify_event(PMIX_DEBUGGER_RELEASE, &me, PMIX_RANGE_CUSTOM, info, 2, NULL,
                               NULL));
        printf("debugger released\n");
    } else if (strncmp(line, "kill", 4) == 0) {
        pmix_info_t kill;
        bool yes = true;
        PMIX_INFO_LOAD(&kill, PMIX_JOB_CTRL_KILL, &yes, PMIX_BOOL);
        pmix_info_t *answer = NULL;
        size_t nanswer = 0;
        MUST(PMIx_Job_control(&all, 1, &kill, 1, &answer, &nanswer));
        if (answer != NULL)
            PMIX_INFO_FREE(answer, nanswer);
        printf("debugger killed\n");
    } else {
        fail("unknown command %s", line);
    }
    fflush(stdout);
    wait_for("PMIX_EVENT_JOB_END", ended_job);
    printf("debugger job-end job=%s\n", ended_job);
    fflush(stdout);
    MUST(PMIx_tool_finalize());
    printf("debugger finalized\n");
    return 0;
}
