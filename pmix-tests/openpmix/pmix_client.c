/*
 * pmix_client.c - a client on the real OpenPMIx client library (libpmix), used by pmix-tests
 * as a known-good program: run under pmix-rs's server it tests that server; run under a real
 * OpenPMIx server (pmix_host.c, Open MPI's mpirun) it checks the program itself.
 *
 *   pmix_client [SCENARIO ...]          no scenario: job modex fence publish
 *
 * Scenarios, run in the order given, every rank running the same ones:
 *   job           job-level and per-process gets (this process and every peer); prints
 *                 "job rank=R size=N local_size=L univ_size=U num_nodes=M nodeid=I
 *                  hostname=H local_rank=LR node_rank=NR appnum=A nspace=NS"
 *   modex         puts one key per scope and value type (LOCAL string, REMOTE uint32, GLOBAL
 *                 int64 / bool / byte object / double / string), commits, fences with
 *                 PMIX_COLLECT_DATA, then gets every peer's keys and checks their values;
 *                 prints "modex rank=R collect=1 peers=P"
 *   modex-direct  the same with a fence without PMIX_COLLECT_DATA (the server fetches each
 *                 peer's data when it is asked for); prints "modex rank=R collect=0 peers=P"
 *                 Both also check that a peer on the same node does not see the REMOTE key
 *                 and that a key nobody put is not found.
 *   peers         modex's puts, a fence with PMIX_COLLECT_DATA, then every peer's keys it may
 *                 see (and no get of a key it may not: no "not found" round trip to the
 *                 server); then each rank changes two values (one to a longer one), adds a
 *                 key, and after a second collecting fence every rank checks the new key and
 *                 the unchanged values, and counts the changed values it sees changed (with
 *                 the hash store libpmix keeps what it fetched before: old values are
 *                 accepted); prints "peers rank=R peers=P rounds=2 fresh=F". Under a server
 *                 with a shared-memory store every get is answered from memory.
 *   fence         fences of every form: NULL procs, the wildcard proc with PMIX_COLLECT_DATA,
 *                 every rank listed, and (3 ranks or more) ranks 0 and 1 alone while the
 *                 others fence among themselves; prints "fence rank=R fences=F"
 *   publish       rank 0 publishes two keys (a string and a uint32); the others look them up
 *                 with PMIX_WAIT (they may ask first: the server must wait) and check values
 *                 and publisher; fence; rank 0 unpublishes; fence; every rank checks that
 *                 looking up the unpublished key, and a key never published, fail;
 *                 prints "publish rank=R looked_up=K"
 *   duplicate     rank 0 publishes a key, then the same key (another value) on the same
 *                 range again; fence; every rank looks the key up; fence; rank 0
 *                 unpublishes; prints "duplicate rank=R again=S value=V": S the second
 *                 publish's status as a number (the standard's PMIX_ERR_DUPLICATE_KEY is
 *                 -53; 0 from a server that accepts it), V the value found
 *   nskeys        keys named after the namespace, as OpenPMIx's examples and real codes make
 *                 them: "<nspace>-<rank>-local" (LOCAL) and "<nspace>-<rank>-remote" (REMOTE),
 *                 string values; commit, fence with PMIX_COLLECT_DATA, then every peer's key
 *                 its scope lets this process see (LOCAL on its node, REMOTE off it, both of
 *                 itself); prints "nskeys rank=R peers=P". A namespace in the prefix the
 *                 standard reserves for attributes ("pmix") makes these reserved keys.
 *   local-procs   PMIX_LOCAL_PROCS at the wildcard rank: the processes of this job on this
 *                 node, as many as PMIX_LOCAL_SIZE, each of this namespace and named in
 *                 PMIX_LOCAL_PEERS, this process among them; prints "lprocs rank=R n=N"
 *   abort CODE    after a fence, rank 1 prints "aborting rank=1 code=CODE" and calls
 *                 PMIx_Abort(CODE) for the whole job; the others wait in a fence rank 1
 *                 never joins, until the launcher kills them (or, should the fence end
 *                 with an error, exit 3; it must not succeed). Rank 1 exits CODE if
 *                 PMIx_Abort returns.
 *
 * After the last scenario every rank finalizes and prints "OK rank=R size=N".
 * Any failure prints "FAIL rank=R: <what>" on stderr and exits 2 without finalizing.
 * Lines go out one write each (stdout is line buffered), so ranks sharing stdout never mix
 * within a line.
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_client pmix_client.c $(pkg-config --cflags --libs pmix)
 */
#include <pmix.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pmix_proc_t me;        /* this process, from PMIx_Init */
static uint32_t job_size;     /* PMIX_JOB_SIZE */

/* The rank "FAIL" lines name (pmix_fail.h). */
static int fail_rank(void)
{
    return me.rank == PMIX_RANK_UNDEF ? -1 : (int)me.rank;
}

#include "pmix_fail.h"

/* ---- gets ------------------------------------------------------------------------------ */

/* Gets `key` of `proc`, which must exist with type `type`; the caller releases the value. */
static pmix_value_t *get_typed(const pmix_proc_t *proc, const char *key, pmix_data_type_t type)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(proc, key, NULL, 0, &v);
    if (rc != PMIX_SUCCESS)
        fail("get %s of %s:%u: %s (%d)", key, proc->nspace, proc->rank, PMIx_Error_string(rc),
             rc);
    if (v == NULL)
        fail("get %s of %s:%u succeeded without a value", key, proc->nspace, proc->rank);
    if (v->type != type)
        fail("get %s of %s:%u: type %s, expected %s", key, proc->nspace, proc->rank,
             PMIx_Data_type_string(v->type), PMIx_Data_type_string(type));
    return v;
}

static uint32_t get_u32(const pmix_proc_t *proc, const char *key)
{
    pmix_value_t *v = get_typed(proc, key, PMIX_UINT32);
    uint32_t x = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
    return x;
}

static uint16_t get_u16(const pmix_proc_t *proc, const char *key)
{
    pmix_value_t *v = get_typed(proc, key, PMIX_UINT16);
    uint16_t x = v->data.uint16;
    PMIX_VALUE_RELEASE(v);
    return x;
}

/* A string value; the caller frees it. */
static char *get_str(const pmix_proc_t *proc, const char *key)
{
    pmix_value_t *v = get_typed(proc, key, PMIX_STRING);
    if (v->data.string == NULL)
        fail("get %s of %s:%u: a NULL string", key, proc->nspace, proc->rank);
    char *s = strdup(v->data.string);
    PMIX_VALUE_RELEASE(v);
    return s;
}

static pmix_proc_t proc_of(pmix_rank_t rank)
{
    pmix_proc_t p;
    PMIX_LOAD_PROCID(&p, me.nspace, rank);
    return p;
}

/* The node id of `proc`, whose hostname is `host`; `my_host` is this process's.
 *
 * libpmix 4.2 answers a get of a node-level key (PMIX_NODEID among them) of a rank on
 * another node from that node's info array, and its hash store files an array's node id
 * apart from the keys that lookup searches: the plain get is NOT_FOUND, answered without
 * asking the server, whatever the server sent (the real OpenPMIx server too; OpenPMIx's
 * master reads the rank's own data instead). For such a rank only, a NOT_FOUND is retried
 * with PMIX_JOB_INFO, which makes libpmix 4.2 read the rank's own data, where the server
 * also puts its node id. A rank on this node must answer the plain get. */
static uint32_t nodeid_of(const pmix_proc_t *proc, const char *host, const char *my_host)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(proc, PMIX_NODEID, NULL, 0, &v);
    if (rc == PMIX_ERR_NOT_FOUND && strcmp(host, my_host) != 0) {
        pmix_info_t job_realm;
        PMIX_INFO_LOAD(&job_realm, PMIX_JOB_INFO, NULL, PMIX_BOOL);
        rc = PMIx_Get(proc, PMIX_NODEID, &job_realm, 1, &v);
        PMIX_INFO_DESTRUCT(&job_realm);
    }
    if (rc != PMIX_SUCCESS)
        fail("get %s of %s:%u (on %s): %s (%d)", PMIX_NODEID, proc->nspace, proc->rank, host,
             PMIx_Error_string(rc), rc);
    if (v == NULL || v->type != PMIX_UINT32)
        fail("get %s of %s:%u: no uint32", PMIX_NODEID, proc->nspace, proc->rank);
    uint32_t id = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
    return id;
}

/* Whether rank `r` runs on this node (by hostname), checked against its node id. */
static bool on_my_node(pmix_rank_t r, const char *my_host, uint32_t my_node)
{
    pmix_proc_t p = proc_of(r);
    char *h = get_str(&p, PMIX_HOSTNAME);
    bool same = strcmp(h, my_host) == 0;
    uint32_t nid = nodeid_of(&p, h, my_host);
    if (same != (nid == my_node))
        fail("rank %u on %s has node id %u, this rank on %s node id %u", r, h, nid, my_host,
             my_node);
    free(h);
    return same;
}

/* ---- job ------------------------------------------------------------------------------- */

static void scenario_job(void)
{
    pmix_proc_t wild = proc_of(PMIX_RANK_WILDCARD);
    uint32_t size = get_u32(&wild, PMIX_JOB_SIZE);
    uint32_t local_size = get_u32(&wild, PMIX_LOCAL_SIZE);
    uint32_t univ_size = get_u32(&wild, PMIX_UNIV_SIZE);
    uint32_t num_nodes = get_u32(&wild, PMIX_NUM_NODES);
    uint32_t nodeid = get_u32(&me, PMIX_NODEID);
    char *hostname = get_str(&me, PMIX_HOSTNAME);
    uint16_t local_rank = get_u16(&me, PMIX_LOCAL_RANK);
    uint16_t node_rank = get_u16(&me, PMIX_NODE_RANK);
    uint32_t appnum = get_u32(&me, PMIX_APPNUM);

    if (size != job_size)
        fail("job size %u at the wildcard rank, %u at init", size, job_size);
    if (me.rank >= size)
        fail("rank %u is not below the job size %u", me.rank, size);
    if (local_size == 0 || local_size > size)
        fail("local size %u with job size %u", local_size, size);
    if (local_rank >= local_size)
        fail("local rank %u is not below the local size %u", local_rank, local_size);
    /* Not compared with the job size: mpirun --oversubscribe gives the slots, fewer. */
    if (univ_size == 0)
        fail("universe size 0");
    if (num_nodes == 0)
        fail("number of nodes is 0");

    /* The local peers (comma-separated ranks) include this rank, local_size of them. */
    char *peers = get_str(&wild, PMIX_LOCAL_PEERS);
    uint32_t npeers = 0;
    bool found_me = false;
    for (char *tok = strtok(peers, ","); tok != NULL; tok = strtok(NULL, ",")) {
        npeers++;
        if (strtoul(tok, NULL, 10) == me.rank)
            found_me = true;
    }
    if (npeers != local_size || !found_me)
        fail("local peers list has %u ranks (local size %u) and %s this rank", npeers,
             local_size, found_me ? "includes" : "lacks");
    free(peers);

    /* Every peer's per-process data is there too: what MPI libraries ask for each rank. */
    for (pmix_rank_t r = 0; r < size; r++) {
        pmix_proc_t p = proc_of(r);
        char *h = get_str(&p, PMIX_HOSTNAME);
        uint32_t nid = nodeid_of(&p, h, hostname);
        uint16_t lr = get_u16(&p, PMIX_LOCAL_RANK);
        (void)get_u32(&p, PMIX_APPNUM);
        if (r == me.rank && (strcmp(h, hostname) != 0 || nid != nodeid || lr != local_rank))
            fail("my own data read as a peer's differs: host %s/%s nodeid %u/%u lrank %u/%u", h,
                 hostname, nid, nodeid, lr, local_rank);
        if ((strcmp(h, hostname) == 0) != (nid == nodeid))
            fail("rank %u on %s has node id %u, this rank on %s node id %u", r, h, nid,
                 hostname, nodeid);
        free(h);
    }

    printf("job rank=%u size=%u local_size=%u univ_size=%u num_nodes=%u nodeid=%u hostname=%s "
           "local_rank=%u node_rank=%u appnum=%u nspace=%s\n",
           me.rank, size, local_size, univ_size, num_nodes, nodeid, hostname, local_rank,
           node_rank, appnum, me.nspace);
    free(hostname);
}

/* ---- modex ----------------------------------------------------------------------------- */

/* The keys every rank puts, each value a function of the rank. */
#define K_LOCAL_STR "oracle.local.str"
#define K_REMOTE_U32 "oracle.remote.u32"
#define K_GLOBAL_I64 "oracle.global.i64"
#define K_GLOBAL_BOOL "oracle.global.bool"
#define K_GLOBAL_BYTES "oracle.global.bytes"
#define K_GLOBAL_DOUBLE "oracle.global.double"
#define K_GLOBAL_STR "oracle.global.str"

static void local_str(pmix_rank_t r, char *buf, size_t len)
{
    snprintf(buf, len, "local-value-of-rank-%u", r);
}

static void global_str(pmix_rank_t r, char *buf, size_t len)
{
    /* Longer than a varint's one byte of length, with spaces and punctuation. */
    snprintf(buf, len,
             "global value of rank %u: the quick brown fox jumps over the lazy dog, "
             "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ !#$%%&()*+-./:;<=>?@",
             r);
}

static uint32_t remote_u32(pmix_rank_t r) { return 4000000000u - r; }
static int64_t global_i64(pmix_rank_t r) { return -((int64_t)1 << 40) - (int64_t)r; }
static bool global_bool(pmix_rank_t r) { return r % 2 == 0; }
/* Exact in the 6 decimals a double travels with over the 4.2 wire (printed with %f). */
static double global_double(pmix_rank_t r) { return 1000.5 + 0.125 * (double)r; }
static size_t bytes_len(pmix_rank_t r) { return 200 + r; }
static uint8_t byte_at(pmix_rank_t r, size_t i) { return (uint8_t)(i * 7 + r * 13); }

static void put(pmix_scope_t scope, const char *key, const void *data, pmix_data_type_t type)
{
    pmix_value_t v;
    PMIX_VALUE_LOAD(&v, data, type);
    MUST(PMIx_Put(scope, key, &v));
    PMIX_VALUE_DESTRUCT(&v);
}

static void put_all(void)
{
    char buf[256];
    pmix_rank_t r = me.rank;
    local_str(r, buf, sizeof buf);
    put(PMIX_LOCAL, K_LOCAL_STR, buf, PMIX_STRING);
    uint32_t u = remote_u32(r);
    put(PMIX_REMOTE, K_REMOTE_U32, &u, PMIX_UINT32);
    int64_t i = global_i64(r);
    put(PMIX_GLOBAL, K_GLOBAL_I64, &i, PMIX_INT64);
    bool b = global_bool(r);
    put(PMIX_GLOBAL, K_GLOBAL_BOOL, &b, PMIX_BOOL);
    double d = global_double(r);
    put(PMIX_GLOBAL, K_GLOBAL_DOUBLE, &d, PMIX_DOUBLE);
    global_str(r, buf, sizeof buf);
    put(PMIX_GLOBAL, K_GLOBAL_STR, buf, PMIX_STRING);
    size_t n = bytes_len(r);
    pmix_byte_object_t bo;
    bo.size = n;
    bo.bytes = malloc(n);
    if (bo.bytes == NULL)
        fail("out of memory");
    for (size_t k = 0; k < n; k++)
        bo.bytes[k] = (char)byte_at(r, k);
    put(PMIX_GLOBAL, K_GLOBAL_BYTES, &bo, PMIX_BYTE_OBJECT);
    free(bo.bytes);
}

/* Gets and checks every key `r` put that this process may see: all of them from itself; the
 * LOCAL and GLOBAL ones from a peer on this node; the REMOTE and GLOBAL ones from a peer on
 * another node. */
static void check_peer_keys(pmix_rank_t r, bool same_node, bool absent_too);

static void check_peer(pmix_rank_t r, bool same_node)
{
    check_peer_keys(r, same_node, true);
}

static void check_peer_keys(pmix_rank_t r, bool same_node, bool absent_too)
{
    pmix_proc_t p = proc_of(r);
    char want[256];
    bool self = r == me.rank;
    pmix_value_t *v;

    if (self || same_node) {
        char *s = get_str(&p, K_LOCAL_STR);
        local_str(r, want, sizeof want);
        if (strcmp(s, want) != 0)
            fail("%s of rank %u is \"%s\", expected \"%s\"", K_LOCAL_STR, r, s, want);
        free(s);
    }
    if (self || !same_node) {
        uint32_t u = get_u32(&p, K_REMOTE_U32);
        if (u != remote_u32(r))
            fail("%s of rank %u is %u, expected %u", K_REMOTE_U32, r, u, remote_u32(r));
    } else if (absent_too) {
        /* REMOTE data is for other nodes only: OpenPMIx answers a peer on the same node
         * "not found" at once. */
        v = NULL;
        pmix_status_t rc = PMIx_Get(&p, K_REMOTE_U32, NULL, 0, &v);
        if (rc == PMIX_SUCCESS)
            fail("got %s, put with PMIX_REMOTE, of rank %u on this node", K_REMOTE_U32, r);
    }
    v = get_typed(&p, K_GLOBAL_I64, PMIX_INT64);
    if (v->data.int64 != global_i64(r))
        fail("%s of rank %u is %" PRId64 ", expected %" PRId64, K_GLOBAL_I64, r, v->data.int64,
             global_i64(r));
    PMIX_VALUE_RELEASE(v);
    v = get_typed(&p, K_GLOBAL_BOOL, PMIX_BOOL);
    if (v->data.flag != global_bool(r))
        fail("%s of rank %u is %d, expected %d", K_GLOBAL_BOOL, r, v->data.flag, global_bool(r));
    PMIX_VALUE_RELEASE(v);
    v = get_typed(&p, K_GLOBAL_DOUBLE, PMIX_DOUBLE);
    if (v->data.dval != global_double(r))
        fail("%s of rank %u is %.17g, expected %.17g", K_GLOBAL_DOUBLE, r, v->data.dval,
             global_double(r));
    PMIX_VALUE_RELEASE(v);
    char *s = get_str(&p, K_GLOBAL_STR);
    global_str(r, want, sizeof want);
    if (strcmp(s, want) != 0)
        fail("%s of rank %u is \"%s\", expected \"%s\"", K_GLOBAL_STR, r, s, want);
    free(s);
    v = get_typed(&p, K_GLOBAL_BYTES, PMIX_BYTE_OBJECT);
    if (v->data.bo.size != bytes_len(r))
        fail("%s of rank %u has %zu bytes, expected %zu", K_GLOBAL_BYTES, r, v->data.bo.size,
             bytes_len(r));
    for (size_t k = 0; k < v->data.bo.size; k++)
        if ((uint8_t)v->data.bo.bytes[k] != byte_at(r, k))
            fail("%s of rank %u: byte %zu is %u, expected %u", K_GLOBAL_BYTES, r, k,
                 (uint8_t)v->data.bo.bytes[k], byte_at(r, k));
    PMIX_VALUE_RELEASE(v);
}

static void scenario_modex(bool collect)
{
    put_all();
    MUST(PMIx_Commit());

    pmix_proc_t wild = proc_of(PMIX_RANK_WILDCARD);
    pmix_info_t info;
    bool yes = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    MUST(PMIx_Fence(&wild, 1, collect ? &info : NULL, collect ? 1 : 0));
    PMIX_INFO_DESTRUCT(&info);

    uint32_t my_node = get_u32(&me, PMIX_NODEID);
    char *my_host = get_str(&me, PMIX_HOSTNAME);
    for (pmix_rank_t r = 0; r < job_size; r++)
        check_peer(r, on_my_node(r, my_host, my_node));
    free(my_host);
    /* A key nobody put is an error. Asked with PMIX_IMMEDIATE: without it OpenPMIx's server
     * holds the request for the key to appear, and answers PMIX_ERR_TIMEOUT after 2 s. */
    pmix_proc_t peer = proc_of((me.rank + 1) % job_size);
    pmix_value_t *v = NULL;
    pmix_info_t immediate;
    PMIX_INFO_LOAD(&immediate, PMIX_IMMEDIATE, &yes, PMIX_BOOL);
    pmix_status_t rc = PMIx_Get(&peer, "oracle.never.put", &immediate, 1, &v);
    if (rc == PMIX_SUCCESS)
        fail("get of a key rank %u never put succeeded", peer.rank);
    rc = PMIx_Get(&wild, "oracle.never.put", &immediate, 1, &v);
    if (rc == PMIX_SUCCESS)
        fail("get of a job-level key nobody put succeeded");
    PMIX_INFO_DESTRUCT(&immediate);
    printf("modex rank=%u collect=%d peers=%u\n", me.rank, collect ? 1 : 0, job_size);
}

/* ---- local-procs ----------------------------------------------------------------------- */

static void scenario_local_procs(void)
{
    pmix_proc_t wild = proc_of(PMIX_RANK_WILDCARD);
    uint32_t local_size = get_u32(&wild, PMIX_LOCAL_SIZE);
    char *peers = get_str(&wild, PMIX_LOCAL_PEERS);
    pmix_value_t *v = get_typed(&wild, PMIX_LOCAL_PROCS, PMIX_DATA_ARRAY);
    pmix_data_array_t *a = v->data.darray;
    if (a == NULL || a->type != PMIX_PROC)
        fail("PMIX_LOCAL_PROCS is not an array of procs");
    if (a->size != local_size)
        fail("PMIX_LOCAL_PROCS holds %zu procs, PMIX_LOCAL_SIZE is %u", a->size, local_size);
    pmix_proc_t *procs = (pmix_proc_t *) a->array;
    bool self = false;
    for (size_t i = 0; i < a->size; i++) {
        if (!PMIX_CHECK_NSPACE(procs[i].nspace, me.nspace))
            fail("PMIX_LOCAL_PROCS names %s, not this namespace", procs[i].nspace);
        char r[16];
        snprintf(r, sizeof r, "%u", procs[i].rank);
        bool listed = false;
        for (char *p = peers; p != NULL && *p != '\0';) {
            size_t n = strcspn(p, ",");
            if (n == strlen(r) && strncmp(p, r, n) == 0)
                listed = true;
            p += n + (p[n] == ',' ? 1 : 0);
        }
        if (!listed)
            fail("rank %u of PMIX_LOCAL_PROCS is not in PMIX_LOCAL_PEERS \"%s\"", procs[i].rank,
                 peers);
        self |= procs[i].rank == me.rank;
    }
    if (!self)
        fail("PMIX_LOCAL_PROCS does not hold this process");
    free(peers);
    PMIX_VALUE_RELEASE(v);
    printf("lprocs rank=%u n=%u\n", me.rank, local_size);
}

/* ---- nskeys ---------------------------------------------------------------------------- */

static void collect_fence(void);

static void nskey(pmix_rank_t r, const char *kind, char *buf, size_t len)
{
    snprintf(buf, len, "%s-%u-%s", me.nspace, r, kind);
}

static void scenario_nskeys(void)
{
    char key[PMIX_MAX_KEYLEN + 1], val[PMIX_MAX_KEYLEN + 16];
    nskey(me.rank, "local", key, sizeof key);
    snprintf(val, sizeof val, "local of %u", me.rank);
    put(PMIX_LOCAL, key, val, PMIX_STRING);
    nskey(me.rank, "remote", key, sizeof key);
    snprintf(val, sizeof val, "remote of %u", me.rank);
    put(PMIX_REMOTE, key, val, PMIX_STRING);
    MUST(PMIx_Commit());
    collect_fence();

    uint32_t my_node = get_u32(&me, PMIX_NODEID);
    char *my_host = get_str(&me, PMIX_HOSTNAME);
    for (pmix_rank_t r = 0; r < job_size; r++) {
        pmix_proc_t p = proc_of(r);
        bool here = on_my_node(r, my_host, my_node);
        const char *kinds[2] = {"local", "remote"};
        for (int k = 0; k < 2; k++) {
            if (r != me.rank && here != (k == 0))
                continue;
            nskey(r, kinds[k], key, sizeof key);
            char *got = get_str(&p, key);
            snprintf(val, sizeof val, "%s of %u", kinds[k], r);
            if (strcmp(got, val) != 0)
                fail("%s of rank %u is \"%s\", expected \"%s\"", key, r, got, val);
            free(got);
        }
    }
    free(my_host);
    printf("nskeys rank=%u peers=%u\n", me.rank, job_size);
}

/* ---- peers ----------------------------------------------------------------------------- */

static void round2_str(pmix_rank_t r, char *buf, size_t len)
{
    snprintf(buf, len, "second round: a longer global string from rank %u", r);
}
static int64_t round2_i64(pmix_rank_t r) { return 77 + (int64_t)r; }
static uint32_t round2_new(pmix_rank_t r) { return 900 + r; }

static void collect_fence(void)
{
    pmix_proc_t wild = proc_of(PMIX_RANK_WILDCARD);
    pmix_info_t info;
    bool yes = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    MUST(PMIx_Fence(&wild, 1, &info, 1));
    PMIX_INFO_DESTRUCT(&info);
}

static void scenario_peers(void)
{
    put_all();
    MUST(PMIx_Commit());
    collect_fence();
    uint32_t my_node = get_u32(&me, PMIX_NODEID);
    char *my_host = get_str(&me, PMIX_HOSTNAME);
    for (pmix_rank_t r = 0; r < job_size; r++)
        check_peer_keys(r, on_my_node(r, my_host, my_node), false);
    free(my_host);
    /* No rank changes its values before every rank has read them. */
    MUST(PMIx_Fence(NULL, 0, NULL, 0));

    char buf[256];
    round2_str(me.rank, buf, sizeof buf);
    put(PMIX_GLOBAL, K_GLOBAL_STR, buf, PMIX_STRING);
    int64_t i = round2_i64(me.rank);
    put(PMIX_GLOBAL, K_GLOBAL_I64, &i, PMIX_INT64);
    uint32_t u = round2_new(me.rank);
    put(PMIX_GLOBAL, "oracle.round2.u32", &u, PMIX_UINT32);
    MUST(PMIx_Commit());
    collect_fence();
    unsigned fresh = 0;
    for (pmix_rank_t r = 0; r < job_size; r++) {
        pmix_proc_t p = proc_of(r);
        char want[256], old[256];
        char *s = get_str(&p, K_GLOBAL_STR);
        round2_str(r, want, sizeof want);
        global_str(r, old, sizeof old);
        if (strcmp(s, want) == 0)
            fresh++;
        else if (r == me.rank || strcmp(s, old) != 0)
            fail("round 2: %s of rank %u is \"%s\", expected \"%s\"", K_GLOBAL_STR, r, s, want);
        free(s);
        pmix_value_t *v = get_typed(&p, K_GLOBAL_I64, PMIX_INT64);
        if (v->data.int64 == round2_i64(r))
            fresh++;
        else if (r == me.rank || v->data.int64 != global_i64(r))
            fail("round 2: %s of rank %u is %" PRId64, K_GLOBAL_I64, r, v->data.int64);
        PMIX_VALUE_RELEASE(v);
        if (get_u32(&p, "oracle.round2.u32") != round2_new(r))
            fail("round 2: oracle.round2.u32 of rank %u is wrong", r);
        /* The values that did not change are still there. */
        v = get_typed(&p, K_GLOBAL_BOOL, PMIX_BOOL);
        if (v->data.flag != global_bool(r))
            fail("round 2: %s of rank %u changed", K_GLOBAL_BOOL, r);
        PMIX_VALUE_RELEASE(v);
    }
    printf("peers rank=%u peers=%u rounds=2 fresh=%u\n", me.rank, job_size, fresh);
}

/* ---- fence ----------------------------------------------------------------------------- */

static void scenario_fence(void)
{
    unsigned fences = 0;
    pmix_proc_t wild = proc_of(PMIX_RANK_WILDCARD);

    MUST(PMIx_Fence(NULL, 0, NULL, 0));
    fences++;

    pmix_info_t info;
    bool yes = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    MUST(PMIx_Fence(&wild, 1, &info, 1));
    PMIX_INFO_DESTRUCT(&info);
    fences++;

    pmix_proc_t *all = calloc(job_size, sizeof *all);
    if (all == NULL)
        fail("out of memory");
    for (pmix_rank_t r = 0; r < job_size; r++)
        all[r] = proc_of(r);
    MUST(PMIx_Fence(all, job_size, NULL, 0));
    fences++;

    /* Two disjoint fences at once: {0, 1} and {2, ..., n-1}. */
    if (job_size >= 3) {
        if (me.rank < 2)
            MUST(PMIx_Fence(all, 2, NULL, 0));
        else
            MUST(PMIx_Fence(all + 2, job_size - 2, NULL, 0));
        fences++;
        /* and everyone again, so no rank runs ahead into the next scenario */
        MUST(PMIx_Fence(&wild, 1, NULL, 0));
        fences++;
    }
    free(all);
    printf("fence rank=%u fences=%u\n", me.rank, fences);
}

/* ---- publish / lookup / unpublish ------------------------------------------------------- */

#define PUB_STR_KEY "oracle.pub.str"
#define PUB_U32_KEY "oracle.pub.u32"
#define PUB_STR_VALUE "published-by-rank-0"
#define PUB_U32_VALUE 424242u

/* Looks `key` up without waiting; it must fail. */
static void lookup_must_miss(const char *key)
{
    pmix_pdata_t pd;
    PMIX_PDATA_CONSTRUCT(&pd);
    PMIX_LOAD_KEY(pd.key, key);
    pmix_status_t rc = PMIx_Lookup(&pd, 1, NULL, 0);
    if (rc == PMIX_SUCCESS)
        fail("lookup of %s succeeded (type %s) but it is not published", key,
             PMIx_Data_type_string(pd.value.type));
    PMIX_PDATA_DESTRUCT(&pd);
}

static void scenario_publish(void)
{
    unsigned looked_up = 0;
    if (me.rank == 0) {
        pmix_info_t info[2];
        uint32_t u = PUB_U32_VALUE;
        PMIX_INFO_LOAD(&info[0], PUB_STR_KEY, PUB_STR_VALUE, PMIX_STRING);
        PMIX_INFO_LOAD(&info[1], PUB_U32_KEY, &u, PMIX_UINT32);
        MUST(PMIx_Publish(info, 2));
        PMIX_INFO_DESTRUCT(&info[0]);
        PMIX_INFO_DESTRUCT(&info[1]);
    } else {
        /* No fence first: this lookup may reach the server before rank 0's publish, and then
         * the server must hold it until the keys are there. */
        pmix_pdata_t pd[2];
        PMIX_PDATA_CONSTRUCT(&pd[0]);
        PMIX_PDATA_CONSTRUCT(&pd[1]);
        PMIX_LOAD_KEY(pd[0].key, PUB_STR_KEY);
        PMIX_LOAD_KEY(pd[1].key, PUB_U32_KEY);
        pmix_info_t wait;
        int all = 0; /* 0: wait for all of them */
        PMIX_INFO_LOAD(&wait, PMIX_WAIT, &all, PMIX_INT);
        MUST(PMIx_Lookup(pd, 2, &wait, 1));
        PMIX_INFO_DESTRUCT(&wait);
        if (pd[0].value.type != PMIX_STRING || pd[0].value.data.string == NULL ||
            strcmp(pd[0].value.data.string, PUB_STR_VALUE) != 0)
            fail("lookup of %s: type %s value \"%s\", expected the string \"%s\"", PUB_STR_KEY,
                 PMIx_Data_type_string(pd[0].value.type),
                 pd[0].value.type == PMIX_STRING && pd[0].value.data.string
                     ? pd[0].value.data.string
                     : "",
                 PUB_STR_VALUE);
        if (pd[1].value.type != PMIX_UINT32 || pd[1].value.data.uint32 != PUB_U32_VALUE)
            fail("lookup of %s: type %s value %u, expected the uint32 %u", PUB_U32_KEY,
                 PMIx_Data_type_string(pd[1].value.type), pd[1].value.data.uint32,
                 PUB_U32_VALUE);
        for (int k = 0; k < 2; k++) {
            if (strcmp(pd[k].proc.nspace, me.nspace) != 0 || pd[k].proc.rank != 0)
                fail("lookup of %s: publisher %s:%u, expected %s:0", pd[k].key,
                     pd[k].proc.nspace, pd[k].proc.rank, me.nspace);
            PMIX_PDATA_DESTRUCT(&pd[k]);
        }
        looked_up = 2;
    }
    MUST(PMIx_Fence(NULL, 0, NULL, 0));
    if (me.rank == 0) {
        char *keys[] = {PUB_STR_KEY, NULL};
        MUST(PMIx_Unpublish(keys, NULL, 0));
    }
    MUST(PMIx_Fence(NULL, 0, NULL, 0));
    lookup_must_miss(PUB_STR_KEY);
    lookup_must_miss("oracle.never.published");
    printf("publish rank=%u looked_up=%u\n", me.rank, looked_up);
}

/* ---- abort ----------------------------------------------------------------------------- */

static void scenario_abort(int code)
{
    MUST(PMIx_Fence(NULL, 0, NULL, 0));
    if (me.rank == 1) {
        printf("aborting rank=1 code=%d\n", code);
        fflush(stdout);
        pmix_status_t rc = PMIx_Abort(code, "pmix_client abort scenario", NULL, 0);
        fprintf(stderr, "rank 1: PMIx_Abort returned %s; exiting %d\n", PMIx_Error_string(rc),
                code);
        exit(code);
    }
    /* Rank 1 never arrives: the launcher tears the job down, or the server ends the fence
     * with an error once rank 1 is gone (Open MPI's mpirun: PMIX_ERR_PARTIAL_SUCCESS). */
    pmix_status_t rc = PMIx_Fence(NULL, 0, NULL, 0);
    if (rc == PMIX_SUCCESS)
        fail("a fence without rank 1, which aborted, succeeded");
    fprintf(stderr, "rank %u: the fence rank 1 never joined ended with %s (%d); exiting 3\n",
            me.rank, PMIx_Error_string(rc), rc);
    exit(3);
}

static void scenario_duplicate(void)
{
    const char *key = "oracle.dup";
    pmix_status_t again = PMIX_SUCCESS;
    if (me.rank == 0) {
        pmix_info_t info;
        PMIX_INFO_LOAD(&info, key, "first", PMIX_STRING);
        MUST(PMIx_Publish(&info, 1));
        PMIX_INFO_DESTRUCT(&info);
        PMIX_INFO_LOAD(&info, key, "second", PMIX_STRING);
        again = PMIx_Publish(&info, 1);
        PMIX_INFO_DESTRUCT(&info);
    }
    MUST(PMIx_Fence(NULL, 0, NULL, 0));
    pmix_pdata_t pd;
    PMIX_PDATA_CONSTRUCT(&pd);
    PMIX_LOAD_KEY(pd.key, key);
    MUST(PMIx_Lookup(&pd, 1, NULL, 0));
    if (pd.value.type != PMIX_STRING || pd.value.data.string == NULL)
        fail("lookup of %s: type %s", key, PMIx_Data_type_string(pd.value.type));
    printf("duplicate rank=%u again=%d value=%s\n", me.rank, again, pd.value.data.string);
    PMIX_PDATA_DESTRUCT(&pd);
    MUST(PMIx_Fence(NULL, 0, NULL, 0));
    if (me.rank == 0) {
        char *keys[] = {(char *) key, NULL};
        MUST(PMIx_Unpublish(keys, NULL, 0));
    }
}

/* ---- main ------------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    me.rank = PMIX_RANK_UNDEF;
    static char *defaults[] = {"job", "modex", "fence", "publish"};
    char **scen = argc > 1 ? argv + 1 : defaults;
    int nscen = argc > 1 ? argc - 1 : (int)(sizeof defaults / sizeof defaults[0]);

    /* Check the arguments before touching PMIx. */
    for (int i = 0; i < nscen; i++) {
        const char *s = scen[i];
        if (strcmp(s, "abort") == 0) {
            if (i + 1 >= nscen)
                fail("abort needs an exit code");
            i++;
        } else if (strcmp(s, "job") != 0 && strcmp(s, "modex") != 0 &&
                   strcmp(s, "modex-direct") != 0 && strcmp(s, "fence") != 0 &&
                   strcmp(s, "publish") != 0 && strcmp(s, "peers") != 0 &&
                   strcmp(s, "duplicate") != 0 && strcmp(s, "nskeys") != 0 &&
                   strcmp(s, "local-procs") != 0) {
            fail("unknown scenario %s (job, modex, modex-direct, peers, fence, publish, "
                 "duplicate, nskeys, local-procs, abort CODE)",
                 s);
        }
    }

    MUST(PMIx_Init(&me, NULL, 0));
    pmix_proc_t wild = proc_of(PMIX_RANK_WILDCARD);
    job_size = get_u32(&wild, PMIX_JOB_SIZE);
    if (job_size == 0)
        fail("job size 0");

    for (int i = 0; i < nscen; i++) {
        const char *s = scen[i];
        if (strcmp(s, "job") == 0)
            scenario_job();
        else if (strcmp(s, "modex") == 0)
            scenario_modex(true);
        else if (strcmp(s, "modex-direct") == 0)
            scenario_modex(false);
        else if (strcmp(s, "peers") == 0)
            scenario_peers();
        else if (strcmp(s, "fence") == 0)
            scenario_fence();
        else if (strcmp(s, "publish") == 0) {
            if (job_size < 2)
                fail("the publish scenario needs 2 ranks or more");
            scenario_publish();
        } else if (strcmp(s, "duplicate") == 0) {
            scenario_duplicate();
        } else if (strcmp(s, "nskeys") == 0) {
            scenario_nskeys();
        } else if (strcmp(s, "local-procs") == 0) {
            scenario_local_procs();
        } else if (strcmp(s, "abort") == 0) {
            if (job_size < 2)
                fail("the abort scenario needs 2 ranks or more");
            scenario_abort(atoi(scen[++i]));
        }
    }

    MUST(PMIx_Finalize(NULL, 0));
    printf("OK rank=%u size=%u\n", me.rank, job_size);
    return 0;
}
