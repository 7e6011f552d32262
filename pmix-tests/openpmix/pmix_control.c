/*
 * pmix_control.c - a libpmix program asking its server for what the server and its host know
 * or do: PMIx_Query_info, PMIx_Log and PMIx_Job_control, used by pmix-tests against pmixrun.
 *
 *   pmix_control query        queries the namespaces, their information (QUERY_NAMESPACE_INFO:
 *                             nsinfo=1 when this job's names it, its command line with this
 *                             program and its size 2) and this job's process table; prints
 *                             "query rank=R has_own_nspace=1 ptable=N own_pid=1 own_exe=1
 *                             own_host=1 own_state=1": its own row has its pid, its program
 *                             (the same file as /proc/self/exe), its PMIX_HOSTNAME and the
 *                             running state
 *   pmix_control psets        (under pmixrun --pset) queries the number and names of the process
 *                             sets, then the members of its own (PMIX_PSET_NAME); prints
 *                             "psets rank=R num=N names=A,B mine=A members=0,1 heard=A,B", the
 *                             members as ranks of its own namespace ("?" for another's), and
 *                             the sets a handler for PMIX_PROCESS_SET_DEFINE registered after
 *                             the sets were defined hears within 10 s (in the order listed)
 *   pmix_control attrs        queries PMIX_QUERY_ATTRIBUTE_SUPPORT for the server's attributes of
 *                             PMIx_Fence and PMIx_Get and its functions; prints "attrs rank=R
 *                             fence_collect=1 get_timeout=1 functions=1" when the answer has
 *                             PMIx_Fence's PMIX_COLLECT_DATA and PMIx_Get's PMIX_TIMEOUT as
 *                             described PMIX_REGATTRs of the right type, and PMIx_Fence among
 *                             the PMIX_SERVER_FUNCTIONS
 *   pmix_control log          logs "log from rank R" on the server's stderr channel; prints
 *                             "log rank=R ok"
 *   pmix_control channels     logs "syslog from rank R" to PMIX_LOG_SYSLOG at PMIX_LOG_SYSLOG_PRI
 *                             4 (warning), "record from rank R" to PMIX_LOG_JOB_RECORD, and an
 *                             email (PMIX_LOG_EMAIL); prints "channels rank=R syslog=S1
 *                             record=S2 email=S3", the statuses as numbers
 *   pmix_control kill|signal  rank 0 registers for PMIX_EVENT_PROC_TERMINATED, then asks for
 *                             rank 1 to be killed (PMIX_JOB_CTRL_KILL) or sent SIGTERM
 *                             (PMIX_JOB_CTRL_SIGNAL) while rank 1 waits in a fence rank 0 never
 *                             joins; rank 0 prints "<scenario> rank=0 affected=1 exit=E" once
 *                             the event came, and finalizes
 *   pmix_control terminate    the same with PMIX_JOB_CTRL_TERMINATE, rank 1 ignoring SIGTERM:
 *                             only the SIGKILL that follows ends it (exit=137)
 *   pmix_control unsupported  asks for PMIX_JOB_CTRL_PAUSE; prints
 *                             "unsupported rank=R status=<name>"
 *   pmix_control cleanup DIR  makes DIR/rank<R>/sub/f and DIR/file<R>, registers the directory
 *                             (recursive) and the file for cleanup; prints
 *                             "cleanup rank=R registered"
 *   pmix_control watch        spawns two copies of itself ("pmix_control child", which only
 *                             init and finalize) with PMIX_NOTIFY_COMPLETION and
 *                             PMIX_NOTIFY_PROC_TERMINATION; prints "watch rank=R ends=2
 *                             job_end=<status name>" once it heard of both ends and the job's
 *   pmix_control late-watch   spawns them with PMIX_NOTIFY_COMPLETION alone, registers for
 *                             PMIX_EVENT_JOB_END two seconds later (after the job ended) and
 *                             prints "late-watch rank=R job_end=<status name>" once it heard
 *
 * Any failure prints "FAIL rank=R: <what>" on stderr and exits 2 (pmix_fail.h).
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_control pmix_control.c $(pkg-config --cflags --libs pmix)
 */
#include <pmix.h>

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static pmix_proc_t me;
static int fail_rank(void) { return me.nspace[0] ? (int) me.rank : -1; }
#include "pmix_fail.h"

/* ---- query ---------------------------------------------------------------------------- */

/* This job's entry in a PMIX_QUERY_NAMESPACE_INFO answer (an array of PMIX_JOB_INFO_ARRAYs): 1
 * if it names this namespace, a command line with this program in it, and the job's size. */
static int nsinfo_has_own(const pmix_value_t *v, const char *prog)
{
    if (v->type != PMIX_DATA_ARRAY || v->data.darray == NULL || v->data.darray->type != PMIX_INFO)
        fail("namespace info of type %d", v->type);
    const pmix_info_t *jobs = (const pmix_info_t *) v->data.darray->array;
    for (size_t j = 0; j < v->data.darray->size; j++) {
        const pmix_data_array_t *a = jobs[j].value.data.darray;
        if (!PMIX_CHECK_KEY(&jobs[j], PMIX_JOB_INFO_ARRAY) || jobs[j].value.type != PMIX_DATA_ARRAY
            || a == NULL || a->type != PMIX_INFO)
            fail("namespace info holds %s of type %d", jobs[j].key, jobs[j].value.type);
        const pmix_info_t *f = (const pmix_info_t *) a->array;
        bool own = false, cmd = false, size = false;
        for (size_t k = 0; k < a->size; k++) {
            if (PMIX_CHECK_KEY(&f[k], PMIX_NSPACE) && f[k].value.type == PMIX_STRING)
                own = PMIX_CHECK_NSPACE(f[k].value.data.string, me.nspace);
            else if (PMIX_CHECK_KEY(&f[k], PMIX_CMD_LINE) && f[k].value.type == PMIX_STRING)
                cmd = strstr(f[k].value.data.string, prog) != NULL;
            else if (PMIX_CHECK_KEY(&f[k], PMIX_JOB_SIZE) && f[k].value.type == PMIX_UINT32)
                size = f[k].value.data.uint32 == 2;
        }
        if (own)
            return cmd && size;
    }
    return 0;
}

static void query(void)
{
    pmix_query_t q[3];
    pmix_status_t rc;
    pmix_info_t *results = NULL;
    size_t nresults = 0, n, ptable = 0;
    bool has_own = false, own_pid = false, own_exe = false, own_host = false, own_state = false;
    char self_exe[4096], row_exe[4096];
    pmix_value_t *host = NULL;
    pmix_proc_t wild;

    PMIX_QUERY_CONSTRUCT(&q[0]);
    PMIX_ARGV_APPEND(rc, q[0].keys, PMIX_QUERY_NAMESPACES);
    if (rc != PMIX_SUCCESS)
        fail("PMIX_ARGV_APPEND");
    PMIX_QUERY_CONSTRUCT(&q[1]);
    PMIX_ARGV_APPEND(rc, q[1].keys, PMIX_QUERY_PROC_TABLE);
    if (rc != PMIX_SUCCESS)
        fail("PMIX_ARGV_APPEND");
    PMIX_QUERY_QUALIFIERS_CREATE(&q[1], 1);
    PMIX_INFO_LOAD(&q[1].qualifiers[0], PMIX_NSPACE, me.nspace, PMIX_STRING);
    PMIX_QUERY_CONSTRUCT(&q[2]);
    PMIX_ARGV_APPEND(rc, q[2].keys, PMIX_QUERY_NAMESPACE_INFO);
    if (rc != PMIX_SUCCESS)
        fail("PMIX_ARGV_APPEND");
    int nsinfo = -1;
    if (realpath("/proc/self/exe", self_exe) == NULL)
        fail("realpath /proc/self/exe: %s", strerror(errno));
    PMIX_PROC_LOAD(&wild, me.nspace, me.rank);
    MUST(PMIx_Get(&wild, PMIX_HOSTNAME, NULL, 0, &host));
    if (host->type != PMIX_STRING)
        fail("PMIX_HOSTNAME of type %d", host->type);
    MUST(PMIx_Query_info(q, 3, &results, &nresults));
    for (n = 0; n < nresults; n++) {
        if (PMIX_CHECK_KEY(&results[n], PMIX_QUERY_NAMESPACES)) {
            if (results[n].value.type != PMIX_STRING)
                fail("namespaces of type %d", results[n].value.type);
            has_own = strstr(results[n].value.data.string, me.nspace) != NULL;
        } else if (PMIX_CHECK_KEY(&results[n], PMIX_QUERY_NAMESPACE_INFO)) {
            const char *slash = strrchr(self_exe, '/');
            nsinfo = nsinfo_has_own(&results[n].value, slash ? slash + 1 : self_exe);
        } else if (PMIX_CHECK_KEY(&results[n], PMIX_QUERY_PROC_TABLE)) {
            pmix_data_array_t *a = results[n].value.data.darray;
            if (results[n].value.type != PMIX_DATA_ARRAY || a->type != PMIX_PROC_INFO)
                fail("process table of type %d", results[n].value.type);
            pmix_proc_info_t *pi = (pmix_proc_info_t *) a->array;
            ptable = a->size;
            for (size_t i = 0; i < a->size; i++) {
                if (pi[i].proc.rank != me.rank)
                    continue;
                own_pid = pi[i].pid == getpid();
                own_exe = pi[i].executable_name != NULL &&
                          realpath(pi[i].executable_name, row_exe) != NULL &&
                          strcmp(row_exe, self_exe) == 0;
                own_host = pi[i].hostname != NULL &&
                           strcmp(pi[i].hostname, host->data.string) == 0;
                own_state = pi[i].state == PMIX_PROC_STATE_RUNNING;
            }
        }
    }
    printf("query rank=%u has_own_nspace=%d ptable=%zu own_pid=%d own_exe=%d own_host=%d "
           "own_state=%d nsinfo=%d\n",
           me.rank, has_own, ptable, own_pid, own_exe, own_host, own_state, nsinfo);
    PMIX_INFO_FREE(results, nresults);
    PMIX_VALUE_RELEASE(host);
}

/* ---- psets ---------------------------------------------------------------------------- */

static void heard_psets(const char *names, char *heard, size_t size);

static void psets(void)
{
    pmix_query_t q[2];
    pmix_status_t rc;
    pmix_info_t *results = NULL;
    size_t nresults = 0, num = 0, n;
    char names[256] = "", members[256] = "";
    pmix_value_t *mine = NULL;

    MUST(PMIx_Get(&me, PMIX_PSET_NAME, NULL, 0, &mine));
    if (mine->type != PMIX_STRING)
        fail("PMIX_PSET_NAME of type %d", mine->type);
    PMIX_QUERY_CONSTRUCT(&q[0]);
    PMIX_ARGV_APPEND(rc, q[0].keys, PMIX_QUERY_NUM_PSETS);
    if (rc != PMIX_SUCCESS)
        fail("PMIX_ARGV_APPEND");
    PMIX_ARGV_APPEND(rc, q[0].keys, PMIX_QUERY_PSET_NAMES);
    if (rc != PMIX_SUCCESS)
        fail("PMIX_ARGV_APPEND");
    PMIX_QUERY_CONSTRUCT(&q[1]);
    PMIX_ARGV_APPEND(rc, q[1].keys, PMIX_QUERY_PSET_MEMBERSHIP);
    if (rc != PMIX_SUCCESS)
        fail("PMIX_ARGV_APPEND");
    PMIX_QUERY_QUALIFIERS_CREATE(&q[1], 1);
    PMIX_INFO_LOAD(&q[1].qualifiers[0], PMIX_PSET_NAME, mine->data.string, PMIX_STRING);
    MUST(PMIx_Query_info(q, 2, &results, &nresults));
    for (n = 0; n < nresults; n++) {
        pmix_value_t *v = &results[n].value;
        if (PMIX_CHECK_KEY(&results[n], PMIX_QUERY_NUM_PSETS)) {
            if (v->type != PMIX_SIZE)
                fail("number of process sets of type %d", v->type);
            num = v->data.size;
        } else if (PMIX_CHECK_KEY(&results[n], PMIX_QUERY_PSET_NAMES)) {
            if (v->type != PMIX_STRING)
                fail("process set names of type %d", v->type);
            snprintf(names, sizeof names, "%s", v->data.string);
        } else if (PMIX_CHECK_KEY(&results[n], PMIX_QUERY_PSET_MEMBERSHIP)) {
            if (v->type != PMIX_DATA_ARRAY || v->data.darray->type != PMIX_PROC)
                fail("process set members of type %d", v->type);
            pmix_proc_t *p = (pmix_proc_t *) v->data.darray->array;
            for (size_t i = 0; i < v->data.darray->size; i++) {
                char one[32];
                if (PMIX_CHECK_NSPACE(p[i].nspace, me.nspace))
                    snprintf(one, sizeof one, "%s%u", i ? "," : "", p[i].rank);
                else
                    snprintf(one, sizeof one, "%s?", i ? "," : "");
                strncat(members, one, sizeof members - strlen(members) - 1);
            }
        }
    }
    char heard[256] = "";
    heard_psets(names, heard, sizeof heard);
    printf("psets rank=%u num=%zu names=%s mine=%s members=%s heard=%s\n", me.rank, num, names,
           mine->data.string, members, heard);
    PMIX_INFO_FREE(results, nresults);
    PMIX_VALUE_RELEASE(mine);
}

/* ---- attrs ---------------------------------------------------------------------------- */

/* Whether `regs` (a function's PMIX_REGATTR array) describes `key`, named `name`, of `type`. */
static bool described(const pmix_data_array_t *regs, const char *name, const char *key,
                      pmix_data_type_t type)
{
    const pmix_regattr_t *r = (const pmix_regattr_t *) regs->array;
    for (size_t i = 0; i < regs->size; i++)
        if (r[i].name != NULL && strcmp(r[i].name, name) == 0 && strcmp(r[i].string, key) == 0)
            return r[i].type == type && r[i].description != NULL && r[i].description[0] != NULL;
    return false;
}

static void attrs(void)
{
    pmix_query_t q;
    pmix_status_t rc;
    pmix_info_t *results = NULL;
    size_t nresults = 0;
    bool fence_collect = false, get_timeout = false, functions = false, yes = true;

    PMIX_QUERY_CONSTRUCT(&q);
    PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_ATTRIBUTE_SUPPORT);
    if (rc != PMIX_SUCCESS)
        fail("PMIX_ARGV_APPEND");
    PMIX_QUERY_QUALIFIERS_CREATE(&q, 2);
    PMIX_INFO_LOAD(&q.qualifiers[0], PMIX_SERVER_ATTRIBUTES, "PMIx_Fence,PMIx_Get", PMIX_STRING);
    PMIX_INFO_LOAD(&q.qualifiers[1], PMIX_SERVER_FUNCTIONS, &yes, PMIX_BOOL);
    MUST(PMIx_Query_info(&q, 1, &results, &nresults));
    for (size_t n = 0; n < nresults; n++) {
        pmix_value_t *v = &results[n].value;
        if (!PMIX_CHECK_KEY(&results[n], PMIX_QUERY_ATTRIBUTE_SUPPORT))
            continue;
        if (v->type != PMIX_DATA_ARRAY || v->data.darray->type != PMIX_INFO)
            fail("attribute support of type %d", v->type);
        pmix_info_t *levels = (pmix_info_t *) v->data.darray->array;
        for (size_t m = 0; m < v->data.darray->size; m++) {
            pmix_value_t *w = &levels[m].value;
            if (PMIX_CHECK_KEY(&levels[m], PMIX_SERVER_FUNCTIONS)) {
                if (w->type != PMIX_STRING)
                    fail("server functions of type %d", w->type);
                functions = strstr(w->data.string, "PMIx_Fence") != NULL;
            } else if (w->type == PMIX_DATA_ARRAY && w->data.darray->type == PMIX_REGATTR) {
                if (PMIX_CHECK_KEY(&levels[m], "PMIx_Fence"))
                    fence_collect = described(w->data.darray, "PMIX_COLLECT_DATA",
                                              PMIX_COLLECT_DATA, PMIX_BOOL);
                else if (PMIX_CHECK_KEY(&levels[m], "PMIx_Get"))
                    get_timeout = described(w->data.darray, "PMIX_TIMEOUT", PMIX_TIMEOUT,
                                            PMIX_INT);
            } else {
                fail("attributes of %s of type %d", levels[m].key, w->type);
            }
        }
    }
    printf("attrs rank=%u fence_collect=%d get_timeout=%d functions=%d\n", me.rank, fence_collect,
           get_timeout, functions);
    PMIX_INFO_FREE(results, nresults);
}

/* ---- log ------------------------------------------------------------------------------ */

static void log_line(void)
{
    char text[64];
    pmix_info_t data;
    snprintf(text, sizeof text, "log from rank %u", me.rank);
    PMIX_INFO_LOAD(&data, PMIX_LOG_STDERR, text, PMIX_STRING);
    MUST(PMIx_Log(&data, 1, NULL, 0));
    PMIX_INFO_DESTRUCT(&data);
    printf("log rank=%u ok\n", me.rank);
}

static pmix_status_t log_one(const char *key, const char *fmt, pmix_info_t *dirs, size_t ndirs)
{
    char text[64];
    pmix_info_t data;
    snprintf(text, sizeof text, fmt, me.rank);
    PMIX_INFO_LOAD(&data, key, text, PMIX_STRING);
    pmix_status_t rc = PMIx_Log(&data, 1, dirs, ndirs);
    PMIX_INFO_DESTRUCT(&data);
    return rc;
}

static void channels(void)
{
    pmix_info_t pri;
    int warning = 4;
    PMIX_INFO_LOAD(&pri, PMIX_LOG_SYSLOG_PRI, &warning, PMIX_INT);
    pmix_status_t sys = log_one(PMIX_LOG_SYSLOG, "syslog from rank %u", &pri, 1);
    PMIX_INFO_DESTRUCT(&pri);
    pmix_status_t rec = log_one(PMIX_LOG_JOB_RECORD, "record from rank %u", NULL, 0);
    pmix_info_t email, *fields;
    pmix_data_array_t *mail;
    PMIX_DATA_ARRAY_CREATE(mail, 3, PMIX_INFO);
    fields = (pmix_info_t *) mail->array;
    PMIX_INFO_LOAD(&fields[0], PMIX_LOG_EMAIL_ADDR, "nobody@example.invalid", PMIX_STRING);
    PMIX_INFO_LOAD(&fields[1], PMIX_LOG_EMAIL_SUBJECT, "test", PMIX_STRING);
    PMIX_INFO_LOAD(&fields[2], PMIX_LOG_MSG, "body", PMIX_STRING);
    PMIX_INFO_LOAD(&email, PMIX_LOG_EMAIL, mail, PMIX_DATA_ARRAY);
    pmix_status_t mailed = PMIx_Log(&email, 1, NULL, 0);
    PMIX_INFO_DESTRUCT(&email);
    PMIX_DATA_ARRAY_FREE(mail);
    printf("channels rank=%u syslog=%d record=%d email=%d\n", me.rank, sys, rec, mailed);
}

/* ---- kill / signal -------------------------------------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

/* The process sets PMIX_PROCESS_SET_DEFINE told of, comma-separated. */
static char psets_heard[256] = ",";

static void on_pset(size_t id, pmix_status_t status, const pmix_proc_t *source,
                    pmix_info_t info[], size_t ninfo, pmix_info_t results[], size_t nresults,
                    pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void) id, (void) status, (void) source, (void) results, (void) nresults;
    pthread_mutex_lock(&lock);
    for (size_t n = 0; n < ninfo; n++)
        if (PMIX_CHECK_KEY(&info[n], PMIX_PSET_NAME) && info[n].value.type == PMIX_STRING) {
            strncat(psets_heard, info[n].value.data.string,
                    sizeof psets_heard - strlen(psets_heard) - 2);
            strcat(psets_heard, ",");
        }
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* Registers for PMIX_PROCESS_SET_DEFINE (after the sets were defined: they were at the job's
 * start) and waits up to 10 s to hear of every set of `names`; `heard` gets those heard, in
 * the order of `names`. */
static void heard_psets(const char *names, char *heard, size_t size)
{
    pmix_status_t code = PMIX_PROCESS_SET_DEFINE;
    pmix_status_t id = PMIx_Register_event_handler(&code, 1, NULL, 0, on_pset, NULL, NULL);
    if (id < 0)
        fail("PMIx_Register_event_handler(PROCESS_SET_DEFINE): %s", PMIx_Error_string(id));
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&lock);
    for (;;) {
        char all[256], *save = NULL;
        size_t missing = 0;
        heard[0] = '\0';
        snprintf(all, sizeof all, "%s", names);
        for (char *n = strtok_r(all, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
            char one[64];
            snprintf(one, sizeof one, ",%s,", n);
            if (strstr(psets_heard, one) == NULL) {
                missing++;
                continue;
            }
            if (heard[0])
                strncat(heard, ",", size - strlen(heard) - 1);
            strncat(heard, n, size - strlen(heard) - 1);
        }
        if (missing == 0
            || pthread_cond_timedwait(&cond, &lock, &until) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&lock);
    PMIx_Deregister_event_handler(id, NULL, NULL);
}
static int affected = -1, exit_code = -1;

static void on_terminated(size_t id, pmix_status_t status, const pmix_proc_t *source,
                          pmix_info_t info[], size_t ninfo, pmix_info_t results[],
                          size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc,
                          void *cbdata)
{
    (void) id, (void) status, (void) source, (void) results, (void) nresults;
    pthread_mutex_lock(&lock);
    for (size_t n = 0; n < ninfo; n++) {
        if (PMIX_CHECK_KEY(&info[n], PMIX_EVENT_AFFECTED_PROC))
            affected = (int) info[n].value.data.proc->rank;
        else if (PMIX_CHECK_KEY(&info[n], PMIX_EXIT_CODE))
            exit_code = info[n].value.data.integer;
    }
    if (affected == 1)
        pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void kill_peer(const char *scenario)
{
    pmix_proc_t all, peer;
    PMIX_PROC_LOAD(&all, me.nspace, PMIX_RANK_WILDCARD);
    if (me.rank != 0) {
        if (strcmp(scenario, "terminate") == 0 && signal(SIGTERM, SIG_IGN) == SIG_ERR)
            fail("ignoring SIGTERM: %s", strerror(errno));
        /* Wait where only a kill gets us out: rank 0 never enters this fence. */
        MUST(PMIx_Fence(&all, 1, NULL, 0));
        MUST(PMIx_Fence(&all, 1, NULL, 0));
        fail("the second fence completed");
    }
    /* Without a callback the registration is complete when it returns. */
    pmix_status_t code = PMIX_EVENT_PROC_TERMINATED;
    pmix_status_t id = PMIx_Register_event_handler(&code, 1, NULL, 0, on_terminated, NULL, NULL);
    if (id < 0)
        fail("PMIx_Register_event_handler returned %s", PMIx_Error_string(id));
    MUST(PMIx_Fence(&all, 1, NULL, 0));
    pmix_info_t directive;
    bool yes = true;
    if (strcmp(scenario, "kill") == 0) {
        PMIX_INFO_LOAD(&directive, PMIX_JOB_CTRL_KILL, &yes, PMIX_BOOL);
    } else if (strcmp(scenario, "terminate") == 0) {
        PMIX_INFO_LOAD(&directive, PMIX_JOB_CTRL_TERMINATE, &yes, PMIX_BOOL);
    } else {
        int sig = SIGTERM;
        PMIX_INFO_LOAD(&directive, PMIX_JOB_CTRL_SIGNAL, &sig, PMIX_INT);
    }
    PMIX_PROC_LOAD(&peer, me.nspace, 1);
    MUST(PMIx_Job_control(&peer, 1, &directive, 1, NULL, NULL));
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    pthread_mutex_lock(&lock);
    while (affected != 1)
        if (pthread_cond_timedwait(&cond, &lock, &until) == ETIMEDOUT)
            fail("no PMIX_EVENT_PROC_TERMINATED for rank 1 within 20 s");
    printf("%s rank=0 affected=%d exit=%d\n", scenario, affected, exit_code);
    pthread_mutex_unlock(&lock);
}

/* ---- watch -------------------------------------------------------------------------- */

static int child_ends = 0, job_ended = 0;
static pmix_status_t job_term = PMIX_ERROR;

static void on_child_event(size_t id, pmix_status_t status, const pmix_proc_t *source,
                           pmix_info_t info[], size_t ninfo, pmix_info_t results[],
                           size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc,
                           void *cbdata)
{
    (void) id, (void) source, (void) results, (void) nresults;
    pthread_mutex_lock(&lock);
    for (size_t n = 0; n < ninfo; n++) {
        /* The children are the only other job. */
        if (PMIX_CHECK_KEY(&info[n], PMIX_EVENT_AFFECTED_PROC) &&
            !PMIX_CHECK_NSPACE(info[n].value.data.proc->nspace, me.nspace)) {
            if (status == PMIX_EVENT_PROC_TERMINATED)
                child_ends++;
            else if (status == PMIX_EVENT_JOB_END)
                job_ended = 1;
        } else if (PMIX_CHECK_KEY(&info[n], PMIX_JOB_TERM_STATUS)) {
            job_term = info[n].value.data.status;
        }
    }
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* Spawns two children ("child") with PMIX_NOTIFY_COMPLETION, and with
 * PMIX_NOTIFY_PROC_TERMINATION when `each`. */
/* Spawns two children of this program (`child`), asking to hear of their job's end and, with
 * `each`, of each one's; their namespace goes to `spawned`. */
static void spawn_children(const char *self, bool each, pmix_nspace_t spawned)
{
    pmix_info_t job[2];
    bool yes = true;
    PMIX_INFO_LOAD(&job[0], PMIX_NOTIFY_COMPLETION, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&job[1], PMIX_NOTIFY_PROC_TERMINATION, &yes, PMIX_BOOL);
    pmix_app_t app;
    PMIX_APP_CONSTRUCT(&app);
    app.cmd = strdup(self);
    app.argv = calloc(3, sizeof(char *));
    app.argv[0] = strdup(self);
    app.argv[1] = strdup("child");
    app.maxprocs = 2;
    pmix_status_t rc = PMIx_Spawn(job, each ? 2 : 1, &app, 1, spawned);
    if (rc != PMIX_SUCCESS)
        fail("PMIx_Spawn returned %s", PMIx_Error_string(rc));
    PMIX_APP_DESTRUCT(&app);
}

/* Waits up to 20 s to hear of `ends` children's ends and of their job's. */
static void wait_for_ends(int ends)
{
    pthread_mutex_lock(&lock);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    while (child_ends < ends || !job_ended)
        if (pthread_cond_timedwait(&cond, &lock, &until) == ETIMEDOUT)
            fail("heard of %d ends and job end %d within 20 s", child_ends, job_ended);
    pthread_mutex_unlock(&lock);
}

static void watch(const char *self)
{
    pmix_status_t codes[2] = {PMIX_EVENT_PROC_TERMINATED, PMIX_EVENT_JOB_END};
    pmix_status_t id = PMIx_Register_event_handler(codes, 2, NULL, 0, on_child_event, NULL, NULL);
    if (id < 0)
        fail("PMIx_Register_event_handler returned %s", PMIx_Error_string(id));
    pmix_nspace_t spawned;
    spawn_children(self, true, spawned);
    wait_for_ends(2);
    printf("watch rank=%u ends=%d job_end=%s\n", me.rank, child_ends, PMIx_Error_string(job_term));
}

/* Waits up to 20 s until the server lists `nspace` no more (its job ended and was let go). */
static void wait_gone(const pmix_nspace_t nspace)
{
    struct timespec until, step = {0, 10 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += 20;
    for (;;) {
        pmix_query_t q;
        pmix_status_t rc;
        pmix_info_t *results = NULL;
        size_t n = 0;
        bool listed = false;
        PMIX_QUERY_CONSTRUCT(&q);
        PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_NAMESPACES);
        if (rc != PMIX_SUCCESS)
            fail("PMIX_ARGV_APPEND");
        MUST(PMIx_Query_info(&q, 1, &results, &n));
        for (size_t i = 0; i < n; i++) {
            if (!PMIX_CHECK_KEY(&results[i], PMIX_QUERY_NAMESPACES)
                || results[i].value.type != PMIX_STRING)
                continue;
            char *names = strdup(results[i].value.data.string), *save = NULL;
            for (char *t = strtok_r(names, ",", &save); t; t = strtok_r(NULL, ",", &save))
                listed |= PMIX_CHECK_NSPACE(t, nspace);
            free(names);
        }
        PMIX_INFO_FREE(results, n);
        PMIX_QUERY_DESTRUCT(&q);
        if (!listed)
            return;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > until.tv_sec)
            fail("the spawned job %s was still listed after 20 s", nspace);
        nanosleep(&step, NULL);
    }
}

/* The job's end, heard by a handler registered once the job has ended and been let go. */
static void late_watch(const char *self)
{
    pmix_nspace_t spawned;
    spawn_children(self, false, spawned);
    wait_gone(spawned);
    pmix_status_t code = PMIX_EVENT_JOB_END;
    pmix_status_t id = PMIx_Register_event_handler(&code, 1, NULL, 0, on_child_event, NULL, NULL);
    if (id < 0)
        fail("PMIx_Register_event_handler returned %s", PMIx_Error_string(id));
    wait_for_ends(0);
    printf("late-watch rank=%u job_end=%s\n", me.rank, PMIx_Error_string(job_term));
}

/* ---- unsupported ---------------------------------------------------------------------- */

static void unsupported(void)
{
    pmix_info_t directive;
    bool yes = true;
    PMIX_INFO_LOAD(&directive, PMIX_JOB_CTRL_PAUSE, &yes, PMIX_BOOL);
    pmix_status_t rc = PMIx_Job_control(NULL, 0, &directive, 1, NULL, NULL);
    printf("unsupported rank=%u status=%s\n", me.rank, PMIx_Error_string(rc));
}

/* ---- cleanup -------------------------------------------------------------------------- */

static void make(const char *path, bool dir)
{
    if (dir ? mkdir(path, 0700) != 0 : fclose(fopen(path, "w")) != 0)
        fail("creating %s: %s", path, strerror(errno));
}

static void cleanup(const char *dir)
{
    char top[512], sub[600], file[700], loose[512];
    snprintf(top, sizeof top, "%s/rank%u", dir, me.rank);
    snprintf(sub, sizeof sub, "%s/sub", top);
    snprintf(file, sizeof file, "%s/f", sub);
    snprintf(loose, sizeof loose, "%s/file%u", dir, me.rank);
    make(top, true);
    make(sub, true);
    make(file, false);
    make(loose, false);
    pmix_info_t d[3];
    bool yes = true;
    PMIX_INFO_LOAD(&d[0], PMIX_REGISTER_CLEANUP_DIR, top, PMIX_STRING);
    PMIX_INFO_LOAD(&d[1], PMIX_CLEANUP_RECURSIVE, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&d[2], PMIX_REGISTER_CLEANUP, loose, PMIX_STRING);
    MUST(PMIx_Job_control(NULL, 0, d, 3, NULL, NULL));
    printf("cleanup rank=%u registered\n", me.rank);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        fail("usage: pmix_control query|psets|attrs|log|channels|kill|signal|terminate|unsupported|cleanup DIR|watch|late-watch");
    setvbuf(stdout, NULL, _IOLBF, 0);
    MUST(PMIx_Init(&me, NULL, 0));
    const char *s = argv[1];
    if (strcmp(s, "query") == 0)
        query();
    else if (strcmp(s, "psets") == 0)
        psets();
    else if (strcmp(s, "attrs") == 0)
        attrs();
    else if (strcmp(s, "log") == 0)
        log_line();
    else if (strcmp(s, "channels") == 0)
        channels();
    else if (strcmp(s, "kill") == 0 || strcmp(s, "signal") == 0 || strcmp(s, "terminate") == 0)
        kill_peer(s);
    else if (strcmp(s, "unsupported") == 0)
        unsupported();
    else if (strcmp(s, "cleanup") == 0 && argc > 2)
        cleanup(argv[2]);
    else if (strcmp(s, "watch") == 0)
        watch(argv[0]);
    else if (strcmp(s, "late-watch") == 0)
        late_watch(argv[0]);
    else if (strcmp(s, "child") == 0)
        ;
    else
        fail("unknown scenario %s", s);
    MUST(PMIx_Finalize(NULL, 0));
    return 0;
}
