/*
 * pmix_tool_get.c - a libpmix tool that reads a running job's data with PMIx_Get, as a
 * debugger or monitor reads the size and placement of the job it attached to:
 *
 *     pmix_tool_get PID NSPACE
 *
 * attaches to the server of PID (PMIx_tool_init with PMIX_SERVER_PIDINFO) and prints, for
 * each get, "get <what> status=<status number> value=<value>" (value only on success; the
 * number, as libraries spell statuses differently: "NOT-FOUND" in 4.2, "PMIX_ERR_NOT_FOUND"
 * in 5.0):
 *
 *     job-size        PMIX_JOB_SIZE of NSPACE, rank PMIX_RANK_WILDCARD
 *     local-size      PMIX_LOCAL_SIZE of NSPACE, rank PMIX_RANK_WILDCARD
 *     rank1-local     PMIX_LOCAL_RANK of rank 1 of NSPACE
 *     rank0-host      PMIX_HOSTNAME of rank 0 of NSPACE ("here" when it is this host's name)
 *     rank0-missing   a key no process put ("pmixrs.tool.none"), of rank 0
 *     job-size-nb     PMIX_JOB_SIZE of NSPACE through PMIx_Get_nb (waited for 60 s at most)
 *
 * then "get finalized". "FAIL rank=-1: <what>" on stderr and exit 2 on a failure of the tool
 * itself. Built against Debian's libpmix 4.2 and run with it, or on another libpmix.so.2
 * through LD_LIBRARY_PATH.
 */
#include <pmix_tool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fail_rank(void) { return -1; }
#include "pmix_fail.h"

/* Prints one get's outcome; integers and strings are all these keys have. */
static void report(const char *what, pmix_status_t rc, const pmix_value_t *v)
{
    printf("get %s status=%d", what, rc);
    if (rc == PMIX_SUCCESS && v != NULL) {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        switch (v->type) {
        case PMIX_UINT32:
            printf(" value=%u", v->data.uint32);
            break;
        case PMIX_UINT16:
            printf(" value=%u", (unsigned) v->data.uint16);
            break;
        case PMIX_STRING:
            printf(" value=%s", v->data.string != NULL && strcmp(v->data.string, host) == 0
                                    ? "here"
                                    : (v->data.string ? v->data.string : "(null)"));
            break;
        default:
            printf(" value=<type %s>", PMIx_Data_type_string(v->type));
        }
    }
    printf("\n");
    fflush(stdout);
}

static void get(const char *what, const char *nspace, pmix_rank_t rank, const char *key)
{
    pmix_proc_t p;
    PMIX_LOAD_PROCID(&p, nspace, rank);
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(&p, key, NULL, 0, &v);
    report(what, rc, v);
    if (rc == PMIX_SUCCESS && v != NULL)
        PMIX_VALUE_RELEASE(v);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int nb_done;

static void got_nb(pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
    (void) cbdata;
    report("job-size-nb", status, kv);
    pthread_mutex_lock(&lock);
    nb_done = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        fail("usage: pmix_tool_get PID NSPACE");
    pid_t pid = (pid_t) atol(argv[1]);
    const char *job = argv[2];
    pmix_info_t dir;
    PMIX_INFO_LOAD(&dir, PMIX_SERVER_PIDINFO, &pid, PMIX_PID);
    pmix_proc_t me;
    MUST(PMIx_tool_init(&me, &dir, 1));

    get("job-size", job, PMIX_RANK_WILDCARD, PMIX_JOB_SIZE);
    get("local-size", job, PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE);
    get("rank1-local", job, 1, PMIX_LOCAL_RANK);
    get("rank0-host", job, 0, PMIX_HOSTNAME);
    get("rank0-missing", job, 0, "pmixrs.tool.none");

    pmix_proc_t p;
    PMIX_LOAD_PROCID(&p, job, PMIX_RANK_WILDCARD);
    MUST(PMIx_Get_nb(&p, PMIX_JOB_SIZE, NULL, 0, got_nb, NULL));
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    end.tv_sec += 60;
    pthread_mutex_lock(&lock);
    while (!nb_done)
        if (pthread_cond_timedwait(&cond, &lock, &end) != 0)
            fail("PMIx_Get_nb did not complete within 60 s");
    pthread_mutex_unlock(&lock);

    MUST(PMIx_tool_finalize());
    printf("get finalized\n");
    return 0;
}
