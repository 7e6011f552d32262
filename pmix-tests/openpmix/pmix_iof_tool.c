/*
 * pmix_iof_tool.c - a libpmix tool that pulls a job's output (PMIx_IOF_pull) or pushes input
 * to one of its processes (PMIx_IOF_push), attached to the server of a pid. pmix_iof_tool.py
 * is the python3-pmix twin of `pull`.
 *
 *     pmix_iof_tool pull PID NSPACE NLINES
 *
 * pulls the stdout and stderr of every process of NSPACE, prints `tool pulled` once the pull
 * is registered, then one line per line of output received,
 *
 *     iof rank=<source rank> channel=<stdout|stderr> line=<the line>
 *
 * once NLINES lines came (30 s at most), then deregisters, finalizes and prints
 * `tool finalized`.
 *
 *     pmix_iof_tool push PID NSPACE RANK TEXT
 *
 * pushes "TEXT\n" to NSPACE:RANK's stdin, then an empty push (the end of its input), and
 * prints `tool pushed`. "FAIL rank=-1: <what>" on stderr and exit 2 on any failure. Built
 * against Debian's libpmix 4.2, run with it or with Open MPI 5's OpenPMIx 5.0.11.
 */
#include <pmix_tool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fail_rank(void) { return -1; }
#include "pmix_fail.h"

#define MAX_LINES 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;
static char *lines[MAX_LINES];
static size_t nlines;

/* Called on libpmix's thread with each chunk of pulled output. */
static void on_output(size_t id, pmix_iof_channel_t channel, pmix_proc_t *source,
                      pmix_byte_object_t *payload, pmix_info_t info[], size_t ninfo)
{
    (void) id;
    (void) info;
    (void) ninfo;
    const char *name = channel == PMIX_FWD_STDOUT_CHANNEL   ? "stdout"
                       : channel == PMIX_FWD_STDERR_CHANNEL ? "stderr"
                                                            : "other";
    pthread_mutex_lock(&lock);
    size_t at = 0;
    while (payload != NULL && at < payload->size && nlines < MAX_LINES) {
        const char *start = payload->bytes + at;
        size_t left = payload->size - at;
        const char *nl = memchr(start, '\n', left);
        size_t len = nl ? (size_t) (nl - start) : left;
        char *line = malloc(len + 80 + strlen(name));
        if (line == NULL)
            break;
        sprintf(line, "iof rank=%u channel=%s line=%.*s", source->rank, name, (int) len, start);
        lines[nlines++] = line;
        at += len + (nl ? 1 : 0);
    }
    pthread_cond_broadcast(&more);
    pthread_mutex_unlock(&lock);
}

static void on_op(pmix_status_t status, void *cbdata);
static void begin_op(void);
static void end_op(const char *what, pmix_status_t rc);

static void pull(const char *nspace, size_t want)
{
    pmix_proc_t procs[1];
    PMIX_LOAD_PROCID(&procs[0], nspace, PMIX_RANK_WILDCARD);
    pmix_status_t rc = PMIx_IOF_pull(procs, 1, NULL, 0,
                                     PMIX_FWD_STDOUT_CHANNEL | PMIX_FWD_STDERR_CHANNEL,
                                     on_output, NULL, NULL);
    if (rc < 0)
        fail("PMIx_IOF_pull: %s", PMIx_Error_string(rc));
    size_t id = (size_t) rc;
    printf("tool pulled\n");
    fflush(stdout);
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    end.tv_sec += 30;
    pthread_mutex_lock(&lock);
    while (nlines < want) {
        if (pthread_cond_timedwait(&more, &lock, &end) != 0) {
            size_t got = nlines;
            pthread_mutex_unlock(&lock);
            fail("only %zu of %zu lines came", got, want);
        }
    }
    for (size_t i = 0; i < nlines; i++)
        printf("%s\n", lines[i]);
    pthread_mutex_unlock(&lock);
    fflush(stdout);
    begin_op();
    end_op("PMIx_IOF_deregister", PMIx_IOF_deregister(id, NULL, 0, on_op, NULL));
}

static pmix_status_t op_status;
static int op_done;

/* Called on libpmix's thread with the answer to a push or a deregistration. */
static void on_op(pmix_status_t status, void *cbdata)
{
    (void) cbdata;
    pthread_mutex_lock(&lock);
    op_status = status;
    op_done = 1;
    pthread_cond_broadcast(&more);
    pthread_mutex_unlock(&lock);
}

static void begin_op(void)
{
    pthread_mutex_lock(&lock);
    op_done = 0;
    pthread_mutex_unlock(&lock);
}

/* Waits here for the answer to an operation begun with begin_op and started with on_op as
 * its callback: libpmix's own wait (no callback) for a push or a deregistration is racy in
 * 4.2.2 and 5.0.11, as its answer handler frees the lock the caller waits on (push hangs
 * every time; deregistration now and then). */
static void end_op(const char *what, pmix_status_t rc)
{
    if (rc != PMIX_SUCCESS)
        fail("%s: %s", what, PMIx_Error_string(rc));
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    end.tv_sec += 30;
    pthread_mutex_lock(&lock);
    while (!op_done)
        if (pthread_cond_timedwait(&more, &lock, &end) != 0)
            fail("%s: no answer", what);
    rc = op_status;
    pthread_mutex_unlock(&lock);
    if (rc != PMIX_SUCCESS)
        fail("%s answered %s", what, PMIx_Error_string(rc));
}

static void push_one(pmix_proc_t *target, pmix_byte_object_t *bo)
{
    begin_op();
    end_op("PMIx_IOF_push", PMIx_IOF_push(target, 1, bo, NULL, 0, on_op, NULL));
}

static void push(const char *nspace, unsigned rank, const char *text)
{
    pmix_proc_t target;
    PMIX_LOAD_PROCID(&target, nspace, rank);
    size_t len = strlen(text);
    char *data = malloc(len + 1);
    if (data == NULL)
        fail("out of memory");
    memcpy(data, text, len);
    data[len] = '\n';
    pmix_byte_object_t bo = {.bytes = data, .size = len + 1};
    push_one(&target, &bo);
    /* libpmix sends nothing for a NULL byte object: an empty one ends the input. */
    pmix_byte_object_t end = {.bytes = data, .size = 0};
    push_one(&target, &end);
    free(data);
}

int main(int argc, char **argv)
{
    if (argc < 4 || (strcmp(argv[1], "pull") != 0 && strcmp(argv[1], "push") != 0)
        || (strcmp(argv[1], "pull") == 0 && argc != 5)
        || (strcmp(argv[1], "push") == 0 && argc != 6))
        fail("usage: pmix_iof_tool pull PID NSPACE NLINES | push PID NSPACE RANK TEXT");
    pid_t pid = (pid_t) atol(argv[2]);
    pmix_info_t dir;
    PMIX_INFO_LOAD(&dir, PMIX_SERVER_PIDINFO, &pid, PMIX_PID);
    pmix_proc_t me;
    MUST(PMIx_tool_init(&me, &dir, 1));
    if (strcmp(argv[1], "pull") == 0) {
        pull(argv[3], (size_t) atol(argv[4]));
        MUST(PMIx_tool_finalize());
        printf("tool finalized\n");
    } else {
        push(argv[3], (unsigned) atol(argv[4]), argv[5]);
        MUST(PMIx_tool_finalize());
        printf("tool pushed\n");
    }
    return 0;
}
