/*
 * pmix_jobinfo.c - reads the job data a large job's process sees, on the real OpenPMIx client
 * library (libpmix), for pmix-tests/tests/bigjob.rs; `pmix-jobinfo-client` is its twin on
 * pmix-rs's client, and the test holds the two outputs against each other and against what
 * the maps say.
 *
 *   pmix_jobinfo RANK...
 *
 * Prints, one line each (the value's type first: str, u16, u32, rank, bool, other):
 *   "job size <type> <v>", "job local_size <type> <v>", "job local_peers <type> <v>" (its own
 *   node's, job level); for each RANK and each of hostname, nodeid, local_rank, node_rank,
 *   global_rank, appnum, app_rank: "R <key> <type> <v>" ("R nodeid none" where libpmix does
 *   not find it: it answers NODEID for the ranks of its own node only); for the node of the first RANK (by
 *   PMIX_NODE_INFO and its PMIX_HOSTNAME): "node local_size <type> <v>" and
 *   "node local_peers <type> <v>"; then "OK rank=R".
 * A failure prints "FAIL rank=R: <what>" on stderr and exits 2.
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_jobinfo pmix_jobinfo.c $(pkg-config --cflags --libs pmix)
 */
#include <pmix.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pmix_proc_t me;

static int fail_rank(void)
{
    return me.rank == PMIX_RANK_UNDEF ? -1 : (int)me.rank;
}

#include "pmix_fail.h"

/* Prints "<what> <key> <type> <value>"; the value's string is kept for the caller in `keep`
 * (may be NULL). */
static void show(const char *what, const char *name, const pmix_value_t *v, char **keep)
{
    char buf[64];
    const char *type = "other";
    const char *text = "?";
    switch (v->type) {
    case PMIX_STRING:
        type = "str";
        text = v->data.string ? v->data.string : "";
        break;
    case PMIX_UINT16:
        type = "u16";
        snprintf(buf, sizeof buf, "%u", (unsigned)v->data.uint16);
        text = buf;
        break;
    case PMIX_UINT32:
        type = "u32";
        snprintf(buf, sizeof buf, "%u", (unsigned)v->data.uint32);
        text = buf;
        break;
    case PMIX_PROC_RANK:
        type = "rank";
        snprintf(buf, sizeof buf, "%u", (unsigned)v->data.rank);
        text = buf;
        break;
    case PMIX_BOOL:
        type = "bool";
        text = v->data.flag ? "true" : "false";
        break;
    default:
        snprintf(buf, sizeof buf, "%s", PMIx_Data_type_string(v->type));
        text = buf;
    }
    printf("%s %s %s %s\n", what, name, type, text);
    if (keep)
        *keep = strdup(text);
}

static pmix_value_t *get(const pmix_proc_t *p, const char *key, pmix_info_t *info, size_t n)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(p, key, info, n, &v);
    if (rc != PMIX_SUCCESS || v == NULL)
        fail("get %s of %s:%u: %s", key, p->nspace, p->rank, PMIx_Error_string(rc));
    return v;
}

int main(int argc, char **argv)
{
    PMIX_PROC_CONSTRUCT(&me);
    me.rank = PMIX_RANK_UNDEF;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS)
        fail("PMIx_Init: %s", PMIx_Error_string(rc));
    setvbuf(stdout, NULL, _IOLBF, 0);

    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    static const struct {
        const char *name;
        const char *key;
    } job_keys[] = {{"size", PMIX_JOB_SIZE},
                    {"local_size", PMIX_LOCAL_SIZE},
                    {"local_peers", PMIX_LOCAL_PEERS}};
    for (size_t i = 0; i < sizeof job_keys / sizeof job_keys[0]; i++) {
        pmix_value_t *v = get(&wild, job_keys[i].key, NULL, 0);
        show("job", job_keys[i].name, v, NULL);
        PMIX_VALUE_RELEASE(v);
    }

    static const struct {
        const char *name;
        const char *key;
    } rank_keys[] = {{"hostname", PMIX_HOSTNAME},     {"nodeid", PMIX_NODEID},
                     {"local_rank", PMIX_LOCAL_RANK}, {"node_rank", PMIX_NODE_RANK},
                     {"global_rank", PMIX_GLOBAL_RANK}, {"appnum", PMIX_APPNUM},
                     {"app_rank", PMIX_APP_RANK}};
    char *first_host = NULL;
    for (int a = 1; a < argc; a++) {
        pmix_proc_t p;
        PMIX_LOAD_PROCID(&p, me.nspace, (pmix_rank_t)strtoul(argv[a], NULL, 10));
        for (size_t i = 0; i < sizeof rank_keys / sizeof rank_keys[0]; i++) {
            /* libpmix answers NODEID only for the ranks of its own node. */
            if (strcmp(rank_keys[i].key, PMIX_NODEID) == 0) {
                pmix_value_t *v = NULL;
                pmix_status_t rc = PMIx_Get(&p, PMIX_NODEID, NULL, 0, &v);
                if (rc == PMIX_ERR_NOT_FOUND) {
                    printf("%s nodeid none\n", argv[a]);
                    continue;
                }
                if (rc != PMIX_SUCCESS || v == NULL)
                    fail("get %s of %s:%u: %s", PMIX_NODEID, p.nspace, p.rank,
                         PMIx_Error_string(rc));
                show(argv[a], "nodeid", v, NULL);
                PMIX_VALUE_RELEASE(v);
                continue;
            }
            pmix_value_t *v = get(&p, rank_keys[i].key, NULL, 0);
            show(argv[a], rank_keys[i].name, v,
                 a == 1 && i == 0 ? &first_host : NULL);
            PMIX_VALUE_RELEASE(v);
        }
    }
    if (first_host) {
        pmix_info_t info[2];
        bool yes = true;
        PMIX_INFO_LOAD(&info[0], PMIX_NODE_INFO, &yes, PMIX_BOOL);
        PMIX_INFO_LOAD(&info[1], PMIX_HOSTNAME, first_host, PMIX_STRING);
        pmix_value_t *v = get(&wild, PMIX_LOCAL_SIZE, info, 2);
        show("node", "local_size", v, NULL);
        PMIX_VALUE_RELEASE(v);
        v = get(&wild, PMIX_LOCAL_PEERS, info, 2);
        show("node", "local_peers", v, NULL);
        PMIX_VALUE_RELEASE(v);
        free(first_host);
    }
    printf("OK rank=%u\n", me.rank);
    rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS)
        fail("PMIx_Finalize: %s", PMIx_Error_string(rc));
    return 0;
}
