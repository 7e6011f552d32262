/*
 * pmix_tool.c - a libpmix tool (PMIx_tool_init) that attaches to a running server, reads the
 * process table of its job and detaches: the C twin of pmix_tool.py, with the same lines.
 *
 *     pmix_tool pid PID | nspace NSPACE | uri URI | system
 *
 * finds the server by its pid, its namespace, its URI or as the system server, then prints
 *
 *     tool me=<the tool's nspace>.<rank>
 *     tool job=<nspace> rank=<r> pid=<pid> host=<host> exe=<executable> state=<state>  (each)
 *     tool finalized
 *
 * The job is the first namespace the server lists (PMIX_QUERY_NAMESPACES) that is not the
 * tool's. "FAIL rank=-1: <what>" on stderr and exit 2 on any failure. Built against Debian's
 * libpmix 4.2 and run with it, or with Open MPI 5's OpenPMIx 5.0.11 (LD_LIBRARY_PATH).
 */
#include <pmix_tool.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail_rank(void) { return -1; }
#include "pmix_fail.h"

/* The first value of `key` among `results`, or NULL. */
static const pmix_value_t *find(const pmix_info_t *results, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (PMIX_CHECK_KEY(&results[i], key))
            return &results[i].value;
    return NULL;
}

/* One query of `key`, with an optional PMIX_NSPACE qualifier; results in *out. */
static void query(const char *key, const char *nspace, pmix_info_t **out, size_t *nout)
{
    pmix_query_t q;
    PMIX_QUERY_CONSTRUCT(&q);
    pmix_status_t rc;
    PMIX_ARGV_APPEND(rc, q.keys, key);
    if (rc != PMIX_SUCCESS)
        fail("PMIX_ARGV_APPEND: %s", PMIx_Error_string(rc));
    if (nspace != NULL) {
        PMIX_INFO_CREATE(q.qualifiers, 1);
        q.nqual = 1;
        PMIX_INFO_LOAD(&q.qualifiers[0], PMIX_NSPACE, nspace, PMIX_STRING);
    }
    rc = PMIx_Query_info(&q, 1, out, nout);
    if (rc != PMIX_SUCCESS)
        fail("PMIx_Query_info(%s%s%s): %s", key, nspace ? " of " : "", nspace ? nspace : "",
             PMIx_Error_string(rc));
    PMIX_QUERY_DESTRUCT(&q);
}

int main(int argc, char **argv)
{
    pmix_info_t dir;
    pid_t pid;
    bool yes = true;
    if (argc == 2 && strcmp(argv[1], "system") == 0) {
        PMIX_INFO_LOAD(&dir, PMIX_CONNECT_TO_SYSTEM, &yes, PMIX_BOOL);
    } else if (argc == 3 && strcmp(argv[1], "pid") == 0) {
        pid = (pid_t) atol(argv[2]);
        PMIX_INFO_LOAD(&dir, PMIX_SERVER_PIDINFO, &pid, PMIX_PID);
    } else if (argc == 3 && strcmp(argv[1], "nspace") == 0) {
        PMIX_INFO_LOAD(&dir, PMIX_SERVER_NSPACE, argv[2], PMIX_STRING);
    } else if (argc == 3 && strcmp(argv[1], "uri") == 0) {
        PMIX_INFO_LOAD(&dir, PMIX_SERVER_URI, argv[2], PMIX_STRING);
    } else {
        fail("usage: pmix_tool pid PID | nspace NSPACE | uri URI | system");
    }
    pmix_proc_t me;
    MUST(PMIx_tool_init(&me, &dir, 1));
    printf("tool me=%s.%u\n", me.nspace, me.rank);
    fflush(stdout);

    pmix_info_t *results;
    size_t n;
    query(PMIX_QUERY_NAMESPACES, NULL, &results, &n);
    const pmix_value_t *v = find(results, n, PMIX_QUERY_NAMESPACES);
    if (v == NULL || v->type != PMIX_STRING || v->data.string == NULL)
        fail("no namespaces in the answer");
    char job[PMIX_MAX_NSLEN + 1] = "";
    char *names = strdup(v->data.string), *save = NULL;
    for (char *t = strtok_r(names, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (!PMIX_CHECK_NSPACE(t, me.nspace)) {
            snprintf(job, sizeof job, "%s", t);
            break;
        }
    }
    free(names);
    PMIX_INFO_FREE(results, n);
    if (job[0] == '\0')
        fail("no job among the namespaces");

    query(PMIX_QUERY_PROC_TABLE, job, &results, &n);
    v = find(results, n, PMIX_QUERY_PROC_TABLE);
    if (v == NULL || v->type != PMIX_DATA_ARRAY || v->data.darray == NULL
        || v->data.darray->type != PMIX_PROC_INFO)
        fail("no process table of %s in the answer", job);
    const pmix_proc_info_t *pi = (const pmix_proc_info_t *) v->data.darray->array;
    for (size_t i = 0; i < v->data.darray->size; i++)
        printf("tool job=%s rank=%u pid=%d host=%s exe=%s state=%d\n", pi[i].proc.nspace,
               pi[i].proc.rank, (int) pi[i].pid, pi[i].hostname ? pi[i].hostname : "",
               pi[i].executable_name ? pi[i].executable_name : "", (int) pi[i].state);
    PMIX_INFO_FREE(results, n);
    fflush(stdout);

    MUST(PMIx_tool_finalize());
    printf("tool finalized\n");
    return 0;
}
