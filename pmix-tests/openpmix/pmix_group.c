/*
 * pmix_group.c - a libpmix program constructing and destructing PMIx groups with its server,
 * used by pmix-tests against pmixrun (with Debian's libpmix 4.2 and with Open MPI 5's 5.0).
 *
 *   pmix_group    every rank constructs group "all" of the whole job with
 *                 PMIX_GROUP_ASSIGN_CONTEXT_ID, checks that a context id came and the
 *                 membership, when the library reports one (from 4.2.4 on: every rank,
 *                 sorted), then constructs its pair's group (ranks 2k, 2k+1) the same way, and
 *                 destructs both; prints "group rank=R all=A pair=P members=M" (the two
 *                 context ids, and the size of the membership reported for "all", 0 if none)
 *   pmix_group lcid
 *                 every rank constructs group "lcid" of the whole job with a context id,
 *                 sharing PMIX_GROUP_LOCAL_CID = 1000 + 10 * rank in PMIX_GROUP_INFO (as Open MPI
 *                 5 does), destructs it, and reads every rank's local CID back with PMIx_Get
 *                 qualified by PMIX_GROUP_CONTEXT_ID (as OpenPMIx's group_lcl_cid example
 *                 does); a get with another context id must fail. Prints
 *                 "lcid rank=R cids=<rank 0's>,<rank 1's>,... other=<PMIx_Error_string>"
 *   pmix_group pset
 *                 reads every rank's PMIX_PSET_NAME (rank by rank, as Open MPI makes the group
 *                 of a process set) and queries PMIX_QUERY_PSET_NAMES; prints
 *                 "pset rank=R names=<rank 0's>,<rank 1's>,... query=<the answer>"
 *   pmix_group fence
 *                 every rank puts "gf-R" and commits; the even ranks construct group
 *                 "ourgroup" of themselves and PMIx_Fence over {"ourgroup", PMIX_RANK_WILDCARD}
 *                 with PMIX_COLLECT_DATA, read every member's "gf-R", destruct the group;
 *                 an odd rank's fence over the id must fail; then the job fences. Prints
 *                 "gfence rank=R members=<the even ranks read, or none>"
 *
 * Any failure prints "FAIL rank=R: <what>" on stderr and exits 2 (pmix_fail.h).
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_group pmix_group.c $(pkg-config --cflags --libs pmix)
 */
#include <pmix.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static pmix_proc_t me;
static int fail_rank(void) { return me.nspace[0] ? (int) me.rank : -1; }
#include "pmix_fail.h"

/* Constructs `grp` of ranks first..first+n-1 of this job with a context id; checks the
 * membership; returns the id. */
static size_t construct(const char *grp, uint32_t first, uint32_t n, uint32_t *members)
{
    pmix_proc_t *procs;
    pmix_info_t info;
    pmix_info_t *results = NULL;
    size_t nresults = 0, ctx = 0;
    bool got_ctx = false, got_members = false;
    bool yes = true;
    pmix_status_t rc;

    PMIX_PROC_CREATE(procs, n);
    /* Given in reverse: the membership comes back sorted. */
    for (uint32_t i = 0; i < n; i++)
        PMIX_LOAD_PROCID(&procs[i], me.nspace, first + n - 1 - i);
    PMIX_INFO_LOAD(&info, PMIX_GROUP_ASSIGN_CONTEXT_ID, &yes, PMIX_BOOL);
    rc = PMIx_Group_construct(grp, procs, n, &info, 1, &results, &nresults);
    if (rc != PMIX_SUCCESS)
        fail("PMIx_Group_construct(%s): %s", grp, PMIx_Error_string(rc));
    for (size_t i = 0; i < nresults; i++) {
        if (PMIX_CHECK_KEY(&results[i], PMIX_GROUP_CONTEXT_ID)) {
            PMIX_VALUE_GET_NUMBER(rc, &results[i].value, ctx, size_t);
            if (rc != PMIX_SUCCESS)
                fail("%s: context id of type %d", grp, results[i].value.type);
            got_ctx = true;
        } else if (PMIX_CHECK_KEY(&results[i], PMIX_GROUP_MEMBERSHIP)) {
            pmix_data_array_t *a = results[i].value.data.darray;
            if (results[i].value.type != PMIX_DATA_ARRAY || a == NULL || a->type != PMIX_PROC
                || a->size != n)
                fail("%s: membership is not %u processes", grp, n);
            pmix_proc_t *m = (pmix_proc_t *) a->array;
            for (uint32_t j = 0; j < n; j++)
                if (!PMIX_CHECK_NSPACE(m[j].nspace, me.nspace) || m[j].rank != first + j)
                    fail("%s: member %u is %s:%u", grp, j, m[j].nspace, m[j].rank);
            got_members = true;
            *members = n;
        }
    }
    if (!got_ctx)
        fail("%s: no context id among %zu results (membership: %d)", grp, nresults,
             got_members);
    PMIX_INFO_FREE(results, nresults);
    PMIX_PROC_FREE(procs, n);
    return ctx;
}

/* Shares a local CID in a group's construction and reads every member's back. */
static void lcid(uint32_t size)
{
    pmix_proc_t *procs;
    pmix_info_t info[2], shared, qual[2];
    pmix_info_t *results = NULL;
    size_t nresults = 0, ctx = SIZE_MAX, mine = 1000 + 10 * (size_t) me.rank;
    pmix_data_array_t darray;
    pmix_value_t *val = NULL;
    pmix_status_t rc;
    bool yes = true;
    uint32_t timeout = 10;
    char cids[1024] = "";

    PMIX_PROC_CREATE(procs, size);
    for (uint32_t r = 0; r < size; r++)
        PMIX_LOAD_PROCID(&procs[r], me.nspace, r);
    PMIX_INFO_LOAD(&shared, PMIX_GROUP_LOCAL_CID, &mine, PMIX_SIZE);
    darray.type = PMIX_INFO;
    darray.size = 1;
    darray.array = &shared;
    PMIX_INFO_LOAD(&info[0], PMIX_GROUP_ASSIGN_CONTEXT_ID, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_GROUP_INFO, &darray, PMIX_DATA_ARRAY);
    rc = PMIx_Group_construct("lcid", procs, size, info, 2, &results, &nresults);
    if (rc != PMIX_SUCCESS)
        fail("PMIx_Group_construct(lcid): %s", PMIx_Error_string(rc));
    for (size_t i = 0; i < nresults; i++)
        if (PMIX_CHECK_KEY(&results[i], PMIX_GROUP_CONTEXT_ID))
            PMIX_VALUE_GET_NUMBER(rc, &results[i].value, ctx, size_t);
    if (ctx == SIZE_MAX)
        fail("lcid: no context id");
    PMIX_INFO_FREE(results, nresults);
    MUST(PMIx_Group_destruct("lcid", NULL, 0));

    PMIX_INFO_LOAD(&qual[0], PMIX_GROUP_CONTEXT_ID, &ctx, PMIX_SIZE);
    PMIX_INFO_SET_QUALIFIER(&qual[0]);
    PMIX_INFO_LOAD(&qual[1], PMIX_TIMEOUT, &timeout, PMIX_UINT32);
    for (uint32_t r = 0; r < size; r++) {
        rc = PMIx_Get(&procs[r], PMIX_GROUP_LOCAL_CID, qual, 2, &val);
        if (rc != PMIX_SUCCESS || val == NULL)
            fail("PMIx_Get(%u, PMIX_GROUP_LOCAL_CID, context %zu): %s", r, ctx,
                 PMIx_Error_string(rc));
        if (val->type != PMIX_SIZE)
            fail("rank %u's local CID is of type %s", r, PMIx_Data_type_string(val->type));
        char one[32];
        snprintf(one, sizeof one, "%s%zu", r > 0 ? "," : "", val->data.size);
        strncat(cids, one, sizeof cids - strlen(cids) - 1);
        PMIX_VALUE_RELEASE(val);
        val = NULL;
    }
    /* Under a context id no group has, there is nothing. */
    size_t other = ctx + 1000;
    PMIX_INFO_LOAD(&qual[0], PMIX_GROUP_CONTEXT_ID, &other, PMIX_SIZE);
    PMIX_INFO_SET_QUALIFIER(&qual[0]);
    rc = PMIx_Get(&procs[0], PMIX_GROUP_LOCAL_CID, qual, 2, &val);
    if (rc == PMIX_SUCCESS)
        fail("a local CID under context id %zu", other);
    printf("lcid rank=%u cids=%s other=%s\n", me.rank, cids, PMIx_Error_string(rc));
    fflush(stdout);
    PMIX_PROC_FREE(procs, size);
}

/* Every rank's process set, and the sets a query lists. */
static void pset(uint32_t size)
{
    pmix_proc_t p;
    pmix_value_t *val = NULL;
    pmix_status_t rc;
    char names[1024] = "";
    for (uint32_t r = 0; r < size; r++) {
        PMIX_LOAD_PROCID(&p, me.nspace, r);
        rc = PMIx_Get(&p, PMIX_PSET_NAME, NULL, 0, &val);
        if (rc != PMIX_SUCCESS || val == NULL || val->type != PMIX_STRING)
            fail("PMIx_Get(%u, PMIX_PSET_NAME): %s", r, PMIx_Error_string(rc));
        if (r > 0)
            strncat(names, ",", sizeof names - strlen(names) - 1);
        strncat(names, val->data.string, sizeof names - strlen(names) - 1);
        PMIX_VALUE_RELEASE(val);
        val = NULL;
    }
    pmix_query_t q;
    pmix_info_t *results = NULL;
    size_t nresults = 0;
    PMIX_QUERY_CONSTRUCT(&q);
    PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_PSET_NAMES);
    rc = PMIx_Query_info(&q, 1, &results, &nresults);
    if (rc != PMIX_SUCCESS || nresults != 1 || results[0].value.type != PMIX_STRING)
        fail("PMIx_Query_info(PMIX_QUERY_PSET_NAMES): %s, %zu results", PMIx_Error_string(rc),
             nresults);
    printf("pset rank=%u names=%s query=%s\n", me.rank, names, results[0].value.data.string);
    fflush(stdout);
    PMIX_INFO_FREE(results, nresults);
}

/* A fence over a group's id (the even ranks), with the members' data collected. */
static void gfence(uint32_t size)
{
    char key[32], want[32], got[256] = "";
    pmix_value_t v, *val = NULL;
    pmix_proc_t grp, p;
    pmix_info_t info;
    bool yes = true;
    pmix_status_t rc;

    snprintf(key, sizeof key, "gf-%u", me.rank);
    snprintf(want, sizeof want, "value-%u", me.rank);
    PMIX_VALUE_LOAD(&v, want, PMIX_STRING);
    MUST(PMIx_Put(PMIX_GLOBAL, key, &v));
    PMIX_VALUE_DESTRUCT(&v);
    MUST(PMIx_Commit());
    PMIX_LOAD_PROCID(&grp, "ourgroup", PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    if (me.rank % 2 == 1) {
        rc = PMIx_Fence(&grp, 1, &info, 1);
        if (rc == PMIX_SUCCESS)
            fail("a fence over a group I am not in succeeded");
        strcpy(got, "none");
    } else {
        uint32_t n = (size + 1) / 2;
        pmix_proc_t *procs;
        pmix_info_t *results = NULL;
        size_t nresults = 0;
        PMIX_PROC_CREATE(procs, n);
        for (uint32_t i = 0; i < n; i++)
            PMIX_LOAD_PROCID(&procs[i], me.nspace, 2 * i);
        rc = PMIx_Group_construct("ourgroup", procs, n, NULL, 0, &results, &nresults);
        if (rc != PMIX_SUCCESS)
            fail("PMIx_Group_construct(ourgroup): %s", PMIx_Error_string(rc));
        PMIX_INFO_FREE(results, nresults);
        rc = PMIx_Fence(&grp, 1, &info, 1);
        if (rc != PMIX_SUCCESS)
            fail("PMIx_Fence(ourgroup): %s", PMIx_Error_string(rc));
        for (uint32_t i = 0; i < n; i++) {
            snprintf(key, sizeof key, "gf-%u", 2 * i);
            snprintf(want, sizeof want, "value-%u", 2 * i);
            PMIX_LOAD_PROCID(&p, me.nspace, 2 * i);
            rc = PMIx_Get(&p, key, NULL, 0, &val);
            if (rc != PMIX_SUCCESS || val == NULL || val->type != PMIX_STRING
                || strcmp(val->data.string, want) != 0)
                fail("PMIx_Get(%u, %s): %s", 2 * i, key, PMIx_Error_string(rc));
            PMIX_VALUE_RELEASE(val);
            val = NULL;
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%u", i ? "," : "", 2 * i);
        }
        rc = PMIx_Group_destruct("ourgroup", NULL, 0);
        if (rc != PMIX_SUCCESS)
            fail("PMIx_Group_destruct(ourgroup): %s", PMIx_Error_string(rc));
        PMIX_PROC_FREE(procs, n);
    }
    MUST(PMIx_Fence(NULL, 0, NULL, 0));
    printf("gfence rank=%u members=%s\n", me.rank, got);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    pmix_value_t *val = NULL;
    pmix_proc_t wild;
    pmix_status_t rc;

    rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS)
        fail("PMIx_Init: %s", PMIx_Error_string(rc));
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val);
    if (rc != PMIX_SUCCESS || val == NULL)
        fail("PMIx_Get(JOB_SIZE): %s", PMIx_Error_string(rc));
    uint32_t size = val->data.uint32;
    PMIX_VALUE_RELEASE(val);

    if (argc > 1 && strcmp(argv[1], "lcid") == 0) {
        lcid(size);
        MUST(PMIx_Finalize(NULL, 0));
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "fence") == 0) {
        gfence(size);
        MUST(PMIx_Finalize(NULL, 0));
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "pset") == 0) {
        pset(size);
        MUST(PMIx_Finalize(NULL, 0));
        return 0;
    }
    uint32_t members = 0, pair_members = 0;
    size_t all = construct("all", 0, size, &members);
    uint32_t pair = me.rank / 2;
    char name[32];
    snprintf(name, sizeof name, "pair%u", pair);
    uint32_t n = (pair * 2 + 2 <= size) ? 2 : 1;
    size_t mine = construct(name, pair * 2, n, &pair_members);
    rc = PMIx_Group_destruct(name, NULL, 0);
    if (rc != PMIX_SUCCESS)
        fail("PMIx_Group_destruct(%s): %s", name, PMIx_Error_string(rc));
    rc = PMIx_Group_destruct("all", NULL, 0);
    if (rc != PMIX_SUCCESS)
        fail("PMIx_Group_destruct(all): %s", PMIx_Error_string(rc));
    printf("group rank=%u all=%zu pair=%zu members=%u\n", me.rank, all, mine, members);
    fflush(stdout);
    rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS)
        fail("PMIx_Finalize: %s", PMIx_Error_string(rc));
    return 0;
}
