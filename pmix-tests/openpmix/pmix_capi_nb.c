/*
 * pmix_capi_nb.c - the non-blocking calls, events and helper functions of the PMIx C API,
 * run by every rank of a job. Written for pmix-capi (pmix-rs's libpmix.so.2), whose test
 * (pmix-tests/tests/capi.rs) runs it on pmix-capi and on Debian's libpmix under pmixrun and
 * compares what they print. Every wait is bounded (30 s); a failure prints "FAIL ..." to
 * stderr and exits 1. Lines printed, one of each per rank (R its rank, N the job's size):
 *
 *   getnb rank=R size=N             PMIx_Get_nb of PMIX_JOB_SIZE, completed on a callback
 *   fencenb rank=R peer=P value=V   a put and commit, PMIx_Fence_nb with PMIX_COLLECT_DATA,
 *                                   then PMIx_Get_nb of the next rank's key
 *   event rank=R reg=S dereg=S [from=0 msg=M released=1]   (statuses as numbers: the
 *                                   libraries name them differently in PMIx_Error_string)
 *                                   a handler registered with a completion callback; rank 0
 *                                   notifies the namespace with an info; every other rank's
 *                                   handler sees it, calls its completion function, whose
 *                                   release callback the library calls; then deregistered
 *   pack rank=R ok=1 end=S          PMIx_Data_pack of int32s, a string, a proc and a value,
 *                                   unloaded, loaded in another buffer, unpacked and
 *                                   compared; S the status of unpacking past the end
 *   unload rank=R u16=7 str=abc strsz=3 nullfixed=S
 *                                   PMIx_Value_unload into the caller's memory and into new
 *                                   (a string, its size without the NUL); S the status of
 *                                   unloading a uint16 to a NULL *data (refused, as Open MPI
 *                                   5's MPI_Session_get_num_psets counts on)
 *   resolve rank=R local=L nodes=K  PMIx_Resolve_peers on this node, PMIx_Resolve_nodes
 */
#include <errno.h>
#include <pmix.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TEST_EVENT (PMIX_EXTERNAL_ERR_BASE - 17)
#define MSG_KEY "capi.test.msg"

static pmix_proc_t me;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

static void fail(const char *what, pmix_status_t rc)
{
    fprintf(stderr, "FAIL rank %u: %s: %s\n", me.rank, what, PMIx_Error_string(rc));
    exit(1);
}

static void set_flag(volatile int *flag)
{
    pthread_mutex_lock(&lock);
    *flag = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void wait_flag(volatile int *flag, const char *what)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&lock);
    while (!*flag) {
        if (ETIMEDOUT == pthread_cond_timedwait(&cond, &lock, &until)) {
            fprintf(stderr, "FAIL rank %u: no %s within 30 s\n", me.rank, what);
            exit(1);
        }
    }
    pthread_mutex_unlock(&lock);
}

/* ---- non-blocking get and fence ---- */

struct got {
    volatile int done;
    pmix_status_t status;
    pmix_value_t value;
};

static void got_value(pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
    struct got *g = cbdata;
    g->status = status;
    if (PMIX_SUCCESS == status)
        PMIx_Value_xfer(&g->value, kv); /* the library's value is lent until we return */
    set_flag(&g->done);
}

static void get_nb(const pmix_proc_t *p, const char *key, struct got *g)
{
    memset(g, 0, sizeof(*g));
    pmix_status_t rc = PMIx_Get_nb(p, key, NULL, 0, got_value, g);
    if (PMIX_SUCCESS != rc)
        fail("PMIx_Get_nb", rc);
    wait_flag(&g->done, "get callback");
    if (PMIX_SUCCESS != g->status)
        fail(key, g->status);
}

struct op {
    volatile int done;
    pmix_status_t status;
};

static void op_done(pmix_status_t status, void *cbdata)
{
    struct op *o = cbdata;
    o->status = status;
    set_flag(&o->done);
}

static void fence_nb(int collect)
{
    struct op o = {0};
    pmix_info_t info;
    bool flag = collect ? true : false;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &flag, PMIX_BOOL);
    pmix_status_t rc = PMIx_Fence_nb(NULL, 0, &info, 1, op_done, &o);
    if (PMIX_SUCCESS != rc)
        fail("PMIx_Fence_nb", rc);
    wait_flag(&o.done, "fence callback");
    if (PMIX_SUCCESS != o.status)
        fail("fence", o.status);
    PMIX_INFO_DESTRUCT(&info);
}

/* ---- events ---- */

static volatile int registered, event_seen, event_released;
static pmix_status_t reg_status;
static size_t reg_id;
static char event_msg[64];
static pmix_rank_t event_from = PMIX_RANK_UNDEF;

static void reg_done(pmix_status_t status, size_t refid, void *cbdata)
{
    (void)cbdata;
    reg_status = status;
    reg_id = refid;
    set_flag(&registered);
}

static void event_release(pmix_status_t status, void *cbdata)
{
    (void)status;
    (void)cbdata;
    set_flag(&event_released);
}

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source,
                     pmix_info_t info[], size_t ninfo, pmix_info_t *results, size_t nresults,
                     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id;
    (void)results;
    (void)nresults;
    if (TEST_EVENT == status && !event_seen) {
        for (size_t n = 0; n < ninfo; n++)
            if (0 == strcmp(info[n].key, MSG_KEY) && PMIX_STRING == info[n].value.type)
                snprintf(event_msg, sizeof(event_msg), "%s", info[n].value.data.string);
        event_from = source->rank;
        set_flag(&event_seen);
    }
    if (NULL != cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, event_release, NULL, cbdata);
}

static void events(void)
{
    pmix_status_t code = TEST_EVENT;
    pmix_status_t rc = PMIx_Register_event_handler(&code, 1, NULL, 0, on_event, reg_done, NULL);
    if (PMIX_SUCCESS != rc)
        fail("PMIx_Register_event_handler", rc);
    wait_flag(&registered, "registration callback");
    if (PMIX_SUCCESS != reg_status)
        fail("registration", reg_status);
    fence_nb(0); /* every rank has its handler */
    if (0 == me.rank) {
        pmix_info_t info;
        PMIX_INFO_LOAD(&info, MSG_KEY, "hello", PMIX_STRING);
        rc = PMIx_Notify_event(TEST_EVENT, &me, PMIX_RANGE_NAMESPACE, &info, 1, NULL, NULL);
        if (PMIX_SUCCESS != rc && PMIX_OPERATION_SUCCEEDED != rc)
            fail("PMIx_Notify_event", rc);
        PMIX_INFO_DESTRUCT(&info);
    } else {
        wait_flag(&event_seen, "event");
        wait_flag(&event_released, "release of the handler's results");
    }
    fence_nb(0); /* every rank has seen it */
    rc = PMIx_Deregister_event_handler(reg_id, NULL, NULL);
    if (0 == me.rank)
        printf("event rank=%u reg=%d dereg=%d\n", me.rank, reg_status, rc);
    else
        printf("event rank=%u reg=%d dereg=%d from=%u msg=%s released=%d\n", me.rank,
               reg_status, rc, event_from, event_msg, event_released);
}

/* ---- data buffers ---- */

static void pack(void)
{
    /* 4.2's headers make buffers with macros, which call PMIx_Data_load/_unload. */
    pmix_data_buffer_t *buf;
    PMIX_DATA_BUFFER_CREATE(buf);
    if (NULL == buf)
        fail("PMIx_Data_buffer_create", PMIX_ERR_NOMEM);
    int32_t ints[3] = {7, -8, (int32_t)me.rank};
    char *str = "packed string";
    pmix_value_t val;
    PMIX_VALUE_CONSTRUCT(&val);
    uint64_t big = 1ULL << 40;
    PMIx_Value_load(&val, &big, PMIX_UINT64);
    pmix_status_t rc;
    if (PMIX_SUCCESS != (rc = PMIx_Data_pack(NULL, buf, ints, 3, PMIX_INT32)) ||
        PMIX_SUCCESS != (rc = PMIx_Data_pack(NULL, buf, &str, 1, PMIX_STRING)) ||
        PMIX_SUCCESS != (rc = PMIx_Data_pack(NULL, buf, &me, 1, PMIX_PROC)) ||
        PMIX_SUCCESS != (rc = PMIx_Data_pack(NULL, buf, &val, 1, PMIX_VALUE)))
        fail("PMIx_Data_pack", rc);
    char *bytes = NULL;
    size_t nbytes = 0;
    PMIX_DATA_BUFFER_UNLOAD(buf, bytes, nbytes);
    PMIX_DATA_BUFFER_RELEASE(buf);
    if (NULL == bytes || 0 == nbytes)
        fail("PMIx_Data_buffer_unload", PMIX_ERROR);

    pmix_data_buffer_t in;
    PMIX_DATA_BUFFER_CONSTRUCT(&in);
    PMIX_DATA_BUFFER_LOAD(&in, bytes, nbytes);
    int32_t got_ints[3] = {0};
    char *got_str = NULL;
    pmix_proc_t got_proc;
    pmix_value_t got_val;
    int32_t n = 3;
    if (PMIX_SUCCESS != (rc = PMIx_Data_unpack(NULL, &in, got_ints, &n, PMIX_INT32)) || 3 != n)
        fail("unpack int32", rc);
    n = 1;
    if (PMIX_SUCCESS != (rc = PMIx_Data_unpack(NULL, &in, &got_str, &n, PMIX_STRING)) || 1 != n)
        fail("unpack string", rc);
    n = 1;
    if (PMIX_SUCCESS != (rc = PMIx_Data_unpack(NULL, &in, &got_proc, &n, PMIX_PROC)) || 1 != n)
        fail("unpack proc", rc);
    n = 1;
    if (PMIX_SUCCESS != (rc = PMIx_Data_unpack(NULL, &in, &got_val, &n, PMIX_VALUE)) || 1 != n)
        fail("unpack value", rc);
    if (0 != memcmp(ints, got_ints, sizeof(ints)) || NULL == got_str ||
        0 != strcmp(str, got_str) || !PMIX_CHECK_PROCID(&me, &got_proc) ||
        PMIX_UINT64 != got_val.type || big != got_val.data.uint64)
        fail("unpacked values differ", PMIX_ERROR);
    int32_t more;
    n = 1;
    pmix_status_t end = PMIx_Data_unpack(NULL, &in, &more, &n, PMIX_INT32);
    PMIX_DATA_BUFFER_DESTRUCT(&in);
    free(got_str);
    PMIx_Value_destruct(&val);
    PMIx_Value_destruct(&got_val);
    printf("pack rank=%u ok=1 end=%d\n", me.rank, end);
}

/* ---- values ---- */

static void unload(void)
{
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    uint16_t seven = 7, out = 0;
    PMIx_Value_load(&v, &seven, PMIX_UINT16);
    uint16_t *p = &out;
    size_t sz = 0;
    pmix_status_t rc = PMIx_Value_unload(&v, (void **)&p, &sz);
    if (PMIX_SUCCESS != rc || p != &out || sizeof(uint16_t) != sz)
        fail("PMIx_Value_unload of a uint16 into the caller's memory", rc);
    PMIx_Value_destruct(&v);
    PMIx_Value_load(&v, "abc", PMIX_STRING);
    char *s = NULL;
    rc = PMIx_Value_unload(&v, (void **)&s, &sz);
    if (PMIX_SUCCESS != rc || NULL == s)
        fail("PMIx_Value_unload of a string", rc);
    size_t strsz = sz;
    PMIx_Value_destruct(&v);
    PMIx_Value_load(&v, &seven, PMIX_UINT16);
    void *nowhere = NULL;
    pmix_status_t nullfixed = PMIx_Value_unload(&v, &nowhere, &sz);
    if (NULL != nowhere)
        fail("PMIx_Value_unload of a uint16 to a NULL *data wrote a pointer", nullfixed);
    printf("unload rank=%u u16=%u str=%s strsz=%zu nullfixed=%d\n", me.rank, out, s, strsz,
           nullfixed);
    free(s);
    PMIx_Value_destruct(&v);
}

/* ---- where the job runs ---- */

static void resolve(void)
{
    pmix_proc_t *procs = NULL;
    size_t nprocs = 0;
    pmix_status_t rc = PMIx_Resolve_peers(NULL, me.nspace, &procs, &nprocs);
    if (PMIX_SUCCESS != rc)
        fail("PMIx_Resolve_peers", rc);
    int found_me = 0;
    for (size_t n = 0; n < nprocs; n++)
        if (PMIX_CHECK_PROCID(&procs[n], &me))
            found_me = 1;
    if (!found_me)
        fail("PMIx_Resolve_peers without this process", PMIX_ERROR);
    PMIX_PROC_FREE(procs, nprocs);
    char *nodes = NULL;
    rc = PMIx_Resolve_nodes(me.nspace, &nodes);
    if (PMIX_SUCCESS != rc || NULL == nodes)
        fail("PMIx_Resolve_nodes", rc);
    int count = 1;
    for (char *c = nodes; *c; c++)
        count += ',' == *c;
    printf("resolve rank=%u local=%zu nodes=%d\n", me.rank, nprocs, count);
    free(nodes);
}

int main(void)
{
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc)
        fail("PMIx_Init", rc);
    setvbuf(stdout, NULL, _IOLBF, 0);

    pmix_proc_t job;
    PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
    struct got g;
    get_nb(&job, PMIX_JOB_SIZE, &g);
    uint32_t size = g.value.data.uint32;
    printf("getnb rank=%u size=%u\n", me.rank, size);
    PMIx_Value_destruct(&g.value);

    char key[64], value[64];
    snprintf(value, sizeof(value), "from-rank-%u", me.rank);
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    PMIx_Value_load(&v, value, PMIX_STRING);
    if (PMIX_SUCCESS != (rc = PMIx_Put(PMIX_GLOBAL, "capi.test.key", &v)))
        fail("PMIx_Put", rc);
    PMIx_Value_destruct(&v);
    if (PMIX_SUCCESS != (rc = PMIx_Commit()))
        fail("PMIx_Commit", rc);
    fence_nb(1);
    pmix_proc_t peer;
    PMIX_LOAD_PROCID(&peer, me.nspace, (me.rank + 1) % size);
    snprintf(key, sizeof(key), "capi.test.key");
    get_nb(&peer, key, &g);
    if (PMIX_STRING != g.value.type)
        fail("the peer's value is not a string", PMIX_ERR_TYPE_MISMATCH);
    printf("fencenb rank=%u peer=%u value=%s\n", me.rank, peer.rank, g.value.data.string);
    PMIx_Value_destruct(&g.value);

    events();
    pack();
    unload();
    resolve();

    fence_nb(0);
    if (PMIX_SUCCESS != (rc = PMIx_Finalize(NULL, 0)))
        fail("PMIx_Finalize", rc);
    return 0;
}
