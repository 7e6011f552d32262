/*
 * pmix_host.c - a minimal single-node launcher on the real OpenPMIx *server* library
 * (libpmix), used by pmix-tests to run PMIx clients (ours in Rust, libpmix's, python3-pmix)
 * under the reference server.
 *
 *   pmix_host [-n N] [-t SECONDS] [-s NSPACE] [-e] [-v] -- PROGRAM [ARGS...]
 *
 *   -n N        processes to start (default 2)
 *   -t SECONDS  deadline for the whole job (default 30): past it the processes still running
 *               are killed and pmix_host exits 124
 *   -s NSPACE   the job's namespace (default "oracle.<pid>")
 *   -e          print the environment PMIx_server_setup_fork gives rank 0 (PMIX_* lines only,
 *               on stdout) and exit without starting anything
 *   -v          log every upcall from the server library on stderr
 *
 * What it does:
 *   - makes a private session directory (mkdtemp under $TMPDIR or /tmp) and points the
 *     server's tmpdirs and the job's PMIX_TMPDIR / PMIX_NSDIR into it (never a shared
 *     directory: Open MPI deletes what it finds in PMIX_NSDIR at finalize); removes it at exit;
 *   - sets PMIX_MCA_gds=hash before PMIx_server_init, so the server offers its clients only
 *     the hash store and every piece of job and modex data travels over the socket (no
 *     shared-memory store, which a client that is not libpmix could not read);
 *   - registers one namespace of N processes, all on this node, with the job-level, node-level
 *     and per-process information a client and an MPI library ask for;
 *   - starts N copies of PROGRAM, each with the environment setup_fork gives it, and waits for
 *     them, at most the deadline;
 *   - implements the upcalls a simple client needs: client connected / finalized, abort (the
 *     job is torn down and pmix_host exits with the abort code), fence (everything is local;
 *     see h_fence), publish / lookup (PMIX_WAIT honoured) / unpublish on a small table.
 *
 * Messages go to stderr, prefixed "pmix_host:"; the processes' stdout and stderr are ours.
 * Exit status: 0 if every process finalized and exited 0; the abort code after PMIx_Abort
 * (1 if that code is 0 or does not fit); 124 at the deadline; 143 if pmix_host was sent
 * SIGTERM or SIGINT; otherwise the first failing process's exit code (128 + signal if
 * killed), or 1 for a process that exited 0 without PMIx_Finalize; 3 for a setup failure.
 * Only after a clean job does it call PMIx_server_finalize (bounded by a 10 s watchdog):
 * after processes died without finalizing, libpmix 4.2.2's finalize sometimes hangs.
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_host pmix_host.c $(pkg-config --cflags --libs pmix)
 */
#define _GNU_SOURCE
#include <pmix.h>
#include <pmix_server.h>

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int verbose;
static char nspace[PMIX_MAX_NSLEN + 1];
static char session_dir[4096];
static char ns_dir[4096 + 8];

static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("pmix_host: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

#define VLOG(...)              \
    do {                       \
        if (verbose)           \
            say(__VA_ARGS__);  \
    } while (0)

/* ---- per-process state, shared between the server's thread (upcalls) and main ----------- */

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static int nprocs = 2;
static bool *connected, *finalized;
static volatile sig_atomic_t aborted; /* set once by the abort upcall */
static int abort_code, abort_rank;

/* Wakes main's sigtimedwait: SIGUSR1 is blocked in every thread, so it stays pending. */
static void wake_main(void)
{
    kill(getpid(), SIGUSR1);
}

static bool ours(const pmix_proc_t *p)
{
    return p != NULL && PMIX_CHECK_NSPACE(p->nspace, nspace) && p->rank < (pmix_rank_t)nprocs;
}

/* ---- upcalls: connection, finalize, abort ---------------------------------------------- */

static pmix_status_t h_connected2(const pmix_proc_t *proc, void *server_object,
                                  pmix_info_t info[], size_t ninfo, pmix_op_cbfunc_t cbfunc,
                                  void *cbdata)
{
    (void)server_object, (void)info, (void)ninfo, (void)cbfunc, (void)cbdata;
    VLOG("%s:%u connected", proc->nspace, proc->rank);
    pthread_mutex_lock(&state_lock);
    if (ours(proc))
        connected[proc->rank] = true;
    pthread_mutex_unlock(&state_lock);
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t h_finalized(const pmix_proc_t *proc, void *server_object,
                                 pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)server_object, (void)cbfunc, (void)cbdata;
    VLOG("%s:%u finalized", proc->nspace, proc->rank);
    pthread_mutex_lock(&state_lock);
    if (ours(proc))
        finalized[proc->rank] = true;
    pthread_mutex_unlock(&state_lock);
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t h_abort(const pmix_proc_t *proc, void *server_object, int status,
                             const char msg[], pmix_proc_t procs[], size_t nprocs_arg,
                             pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)server_object, (void)procs, (void)cbfunc, (void)cbdata;
    say("%s:%u called abort with status %d (%s), %zu procs named (all: the whole job)",
        proc->nspace, proc->rank, status, msg ? msg : "", nprocs_arg);
    pthread_mutex_lock(&state_lock);
    if (!aborted) {
        abort_code = status;
        abort_rank = (int)proc->rank;
        aborted = 1;
    }
    pthread_mutex_unlock(&state_lock);
    wake_main();
    /* Acknowledged at once: main tears the job down, the caller included. */
    return PMIX_OPERATION_SUCCEEDED;
}

/* ---- fence ------------------------------------------------------------------------------
 * Every process is on this node, so the server library completes every fence itself and
 * never calls this (verified with -v: no "fence_nb" line). It is here for completeness: with
 * one node, the data collected locally is all the data there is. The library may release
 * `data` when this returns, so it goes back as a copy. */

static void free_copy(void *cbdata)
{
    free(cbdata);
}

static pmix_status_t h_fence(const pmix_proc_t procs[], size_t nprocs_arg,
                             const pmix_info_t info[], size_t ninfo, char *data, size_t ndata,
                             pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    (void)procs, (void)info;
    say("fence_nb upcall (%zu procs, %zu infos, %zu bytes)", nprocs_arg, ninfo, ndata);
    char *copy = NULL;
    if (ndata > 0) {
        copy = malloc(ndata);
        if (copy == NULL)
            return PMIX_ERR_NOMEM;
        memcpy(copy, data, ndata);
    }
    if (cbfunc != NULL)
        cbfunc(PMIX_SUCCESS, copy, ndata, cbdata, free_copy, copy);
    else
        free(copy);
    return PMIX_SUCCESS;
}

static pmix_status_t h_dmodex(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                              pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    (void)info, (void)ninfo, (void)cbfunc, (void)cbdata;
    /* Only for processes on other nodes; there are none. */
    say("direct_modex upcall for %s:%u: not supported (one node)", proc->nspace, proc->rank);
    return PMIX_ERR_NOT_SUPPORTED;
}

/* ---- publish / lookup / unpublish ------------------------------------------------------ */

#define MAX_PUBLISHED 256
#define MAX_WAITING 64

/* One published key. */
struct published {
    bool used;
    pmix_key_t key;
    pmix_proc_t owner;
    pmix_value_t value;
};

/* A lookup with PMIX_WAIT that found not all of its keys: answered by a later publish. */
struct waiting {
    bool used;
    char **keys; /* NULL-terminated copy */
    pmix_lookup_cbfunc_t cbfunc;
    void *cbdata;
};

static struct published table[MAX_PUBLISHED];
static struct waiting waiters[MAX_WAITING];

static struct published *find(const char *key)
{
    for (int i = 0; i < MAX_PUBLISHED; i++)
        if (table[i].used && PMIX_CHECK_KEY(&table[i], key))
            return &table[i];
    return NULL;
}

/* PMIx directives ride along with the data ("pmix.range", "pmix.persist", "pmix.userid",
 * ...); every other key is data. */
static bool is_directive(const char *key)
{
    return strncmp(key, "pmix.", 5) == 0;
}

static size_t count_keys(char **keys)
{
    size_t n = 0;
    while (keys != NULL && keys[n] != NULL)
        n++;
    return n;
}

/* A copy of a NULL-terminated list of keys (the library frees its own after the upcall). */
static char **copy_keys(char **keys)
{
    size_t n = count_keys(keys);
    char **copy = calloc(n + 1, sizeof *copy);
    for (size_t k = 0; copy != NULL && k < n; k++)
        copy[k] = strdup(keys[k]);
    return copy;
}

static void free_keys(char **keys)
{
    for (size_t k = 0; keys != NULL && keys[k] != NULL; k++)
        free(keys[k]);
    free(keys);
}

/* Answers `cbfunc` if every key is published (then true); the caller holds state_lock. The
 * library packs the answer before cbfunc returns, so the array is freed right after. */
static bool answer_lookup(char **keys, pmix_lookup_cbfunc_t cbfunc, void *cbdata)
{
    size_t n = count_keys(keys);
    for (size_t k = 0; k < n; k++)
        if (find(keys[k]) == NULL)
            return false;
    pmix_pdata_t *pd = NULL;
    if (n > 0)
        PMIX_PDATA_CREATE(pd, n);
    for (size_t k = 0; k < n; k++) {
        struct published *e = find(keys[k]);
        pd[k].proc = e->owner;
        PMIX_LOAD_KEY(pd[k].key, keys[k]);
        PMIx_Value_xfer(&pd[k].value, &e->value);
    }
    cbfunc(PMIX_SUCCESS, pd, n, cbdata);
    if (n > 0)
        PMIX_PDATA_FREE(pd, n);
    return true;
}

static pmix_status_t h_publish(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                               pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    pmix_status_t rc = PMIX_SUCCESS;
    pthread_mutex_lock(&state_lock);
    for (size_t i = 0; i < ninfo && rc == PMIX_SUCCESS; i++) {
        if (is_directive(info[i].key))
            continue;
        if (find(info[i].key) != NULL) {
            rc = PMIX_ERR_DUPLICATE_KEY;
            break;
        }
        int slot = 0;
        while (slot < MAX_PUBLISHED && table[slot].used)
            slot++;
        if (slot == MAX_PUBLISHED) {
            rc = PMIX_ERR_OUT_OF_RESOURCE;
            break;
        }
        struct published *e = &table[slot];
        e->used = true;
        PMIX_LOAD_KEY(e->key, info[i].key);
        e->owner = *proc;
        PMIx_Value_xfer(&e->value, &info[i].value);
        VLOG("%s:%u published %s", proc->nspace, proc->rank, info[i].key);
    }
    /* Lookups waiting for these keys may be complete now. */
    for (int w = 0; w < MAX_WAITING; w++) {
        if (waiters[w].used && answer_lookup(waiters[w].keys, waiters[w].cbfunc,
                                             waiters[w].cbdata)) {
            free_keys(waiters[w].keys);
            waiters[w].used = false;
        }
    }
    pthread_mutex_unlock(&state_lock);
    if (cbfunc != NULL)
        cbfunc(rc, cbdata);
    return PMIX_SUCCESS;
}

static pmix_status_t h_lookup(const pmix_proc_t *proc, char **keys, const pmix_info_t info[],
                              size_t ninfo, pmix_lookup_cbfunc_t cbfunc, void *cbdata)
{
    bool wait = false;
    for (size_t i = 0; i < ninfo; i++)
        if (PMIX_CHECK_KEY(&info[i], PMIX_WAIT))
            wait = true; /* any count: this host waits for all the keys */
    VLOG("%s:%u looks up %zu keys%s", proc->nspace, proc->rank, count_keys(keys),
         wait ? ", waiting" : "");
    pthread_mutex_lock(&state_lock);
    if (answer_lookup(keys, cbfunc, cbdata)) {
        pthread_mutex_unlock(&state_lock);
        return PMIX_SUCCESS;
    }
    if (!wait) {
        pthread_mutex_unlock(&state_lock);
        cbfunc(PMIX_ERR_NOT_FOUND, NULL, 0, cbdata);
        return PMIX_SUCCESS;
    }
    int w = 0;
    while (w < MAX_WAITING && waiters[w].used)
        w++;
    if (w == MAX_WAITING) {
        pthread_mutex_unlock(&state_lock);
        return PMIX_ERR_OUT_OF_RESOURCE;
    }
    waiters[w].keys = copy_keys(keys);
    if (waiters[w].keys == NULL) {
        pthread_mutex_unlock(&state_lock);
        return PMIX_ERR_NOMEM;
    }
    waiters[w].used = true;
    waiters[w].cbfunc = cbfunc;
    waiters[w].cbdata = cbdata;
    pthread_mutex_unlock(&state_lock);
    return PMIX_SUCCESS;
}

static pmix_status_t h_unpublish(const pmix_proc_t *proc, char **keys, const pmix_info_t info[],
                                 size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)info, (void)ninfo;
    pmix_status_t rc = PMIX_SUCCESS;
    pthread_mutex_lock(&state_lock);
    if (count_keys(keys) == 0) {
        /* no keys: everything this process published */
        for (int i = 0; i < MAX_PUBLISHED; i++)
            if (table[i].used && PMIX_CHECK_PROCID(&table[i].owner, proc)) {
                PMIX_VALUE_DESTRUCT(&table[i].value);
                table[i].used = false;
            }
    }
    for (size_t k = 0; k < count_keys(keys); k++) {
        struct published *e = find(keys[k]);
        if (e == NULL || !PMIX_CHECK_PROCID(&e->owner, proc)) {
            rc = PMIX_ERR_NOT_FOUND;
            continue;
        }
        VLOG("%s:%u unpublished %s", proc->nspace, proc->rank, keys[k]);
        PMIX_VALUE_DESTRUCT(&e->value);
        e->used = false;
    }
    pthread_mutex_unlock(&state_lock);
    if (cbfunc != NULL)
        cbfunc(rc, cbdata);
    return PMIX_SUCCESS;
}

/* ---- events: accepted, nothing to do ---------------------------------------------------- */

static pmix_status_t h_register_events(pmix_status_t *codes, size_t ncodes,
                                       const pmix_info_t info[], size_t ninfo,
                                       pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)codes, (void)info, (void)ninfo, (void)cbfunc, (void)cbdata;
    VLOG("register_events (%zu codes)", ncodes);
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t h_deregister_events(pmix_status_t *codes, size_t ncodes,
                                         pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)codes, (void)cbfunc, (void)cbdata;
    VLOG("deregister_events (%zu codes)", ncodes);
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t h_notify_event(pmix_status_t code, const pmix_proc_t *source,
                                    pmix_data_range_t range, pmix_info_t info[], size_t ninfo,
                                    pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)range, (void)info, (void)ninfo, (void)cbfunc, (void)cbdata;
    VLOG("notify_event %d from %s:%u", code, source ? source->nspace : "?",
         source ? source->rank : 0);
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_server_module_t module = {
    .client_connected2 = h_connected2,
    .client_finalized = h_finalized,
    .abort = h_abort,
    .fence_nb = h_fence,
    .direct_modex = h_dmodex,
    .publish = h_publish,
    .lookup = h_lookup,
    .unpublish = h_unpublish,
    .register_events = h_register_events,
    .deregister_events = h_deregister_events,
    .notify_event = h_notify_event,
};

/* ---- registration ----------------------------------------------------------------------- */

/* Completion of a non-blocking registration call, waited for on a condition variable. */
struct done {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    pmix_status_t status;
};

static void op_done(pmix_status_t status, void *cbdata)
{
    struct done *d = cbdata;
    pthread_mutex_lock(&d->lock);
    d->status = status;
    d->done = true;
    pthread_cond_signal(&d->cond);
    pthread_mutex_unlock(&d->lock);
}

/* Waits for the callback of a call that returned `rc`; returns the final status. */
static pmix_status_t finish_op(pmix_status_t rc, struct done *d)
{
    if (rc == PMIX_OPERATION_SUCCEEDED)
        return PMIX_SUCCESS;
    if (rc != PMIX_SUCCESS)
        return rc;
    pthread_mutex_lock(&d->lock);
    while (!d->done)
        pthread_cond_wait(&d->cond, &d->lock);
    pthread_mutex_unlock(&d->lock);
    return d->status;
}

#define DONE_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, PMIX_SUCCESS}

static void setup_fail(const char *what, pmix_status_t rc)
{
    say("%s failed: %s (%d)", what, PMIx_Error_string(rc), rc);
    exit(3);
}

static void add(void *list, const char *key, const void *value, pmix_data_type_t type)
{
    pmix_status_t rc = PMIx_Info_list_add(list, key, value, type);
    if (rc != PMIX_SUCCESS)
        setup_fail(key, rc);
}

static void register_job(const char *hostname)
{
    /* "0,1,...,n-1": every rank is local. */
    size_t cap = (size_t)nprocs * 12 + 1;
    char *peers = calloc(1, cap);
    if (peers == NULL)
        setup_fail("calloc", PMIX_ERR_NOMEM);
    for (int r = 0; r < nprocs; r++)
        snprintf(peers + strlen(peers), cap - strlen(peers), r ? ",%d" : "%d", r);
    char *node_map = NULL, *proc_map = NULL;
    pmix_status_t rc = PMIx_generate_regex(hostname, &node_map);
    if (rc != PMIX_SUCCESS)
        setup_fail("PMIx_generate_regex", rc);
    rc = PMIx_generate_ppn(peers, &proc_map);
    if (rc != PMIX_SUCCESS)
        setup_fail("PMIx_generate_ppn", rc);

    uint32_t n = (uint32_t)nprocs, one = 1, zero = 0;
    pmix_rank_t leader = 0;
    void *job = PMIx_Info_list_start();
    /* job level */
    add(job, PMIX_JOBID, nspace, PMIX_STRING);
    add(job, PMIX_UNIV_SIZE, &n, PMIX_UINT32);
    add(job, PMIX_JOB_SIZE, &n, PMIX_UINT32);
    add(job, PMIX_MAX_PROCS, &n, PMIX_UINT32);
    add(job, PMIX_NUM_NODES, &one, PMIX_UINT32);
    add(job, PMIX_NODE_MAP, node_map, PMIX_REGEX);
    add(job, PMIX_PROC_MAP, proc_map, PMIX_REGEX);
    add(job, PMIX_TMPDIR, session_dir, PMIX_STRING);
    add(job, PMIX_NSDIR, ns_dir, PMIX_STRING);
    /* this node */
    add(job, PMIX_HOSTNAME, hostname, PMIX_STRING);
    add(job, PMIX_NODEID, &zero, PMIX_UINT32);
    add(job, PMIX_LOCAL_SIZE, &n, PMIX_UINT32);
    add(job, PMIX_NODE_SIZE, &n, PMIX_UINT32);
    add(job, PMIX_LOCAL_PEERS, peers, PMIX_STRING);
    add(job, PMIX_LOCALLDR, &leader, PMIX_PROC_RANK);
    /* one app: app number 0, all ranks */
    add(job, PMIX_APPNUM, &zero, PMIX_UINT32);
    add(job, PMIX_APP_SIZE, &n, PMIX_UINT32);
    add(job, PMIX_APPLDR, &leader, PMIX_PROC_RANK);
    /* each process */
    for (int r = 0; r < nprocs; r++) {
        pmix_rank_t rank = (pmix_rank_t)r;
        uint16_t local_rank = (uint16_t)r;
        void *proc = PMIx_Info_list_start();
        add(proc, PMIX_RANK, &rank, PMIX_PROC_RANK);
        add(proc, PMIX_GLOBAL_RANK, &rank, PMIX_PROC_RANK);
        add(proc, PMIX_APP_RANK, &rank, PMIX_PROC_RANK);
        add(proc, PMIX_APPNUM, &zero, PMIX_UINT32);
        add(proc, PMIX_LOCAL_RANK, &local_rank, PMIX_UINT16);
        add(proc, PMIX_NODE_RANK, &local_rank, PMIX_UINT16);
        add(proc, PMIX_NODEID, &zero, PMIX_UINT32);
        add(proc, PMIX_HOSTNAME, hostname, PMIX_STRING);
        pmix_data_array_t array;
        rc = PMIx_Info_list_convert(proc, &array);
        if (rc != PMIX_SUCCESS)
            setup_fail("PMIx_Info_list_convert", rc);
        add(job, PMIX_PROC_DATA, &array, PMIX_DATA_ARRAY);
        PMIx_Data_array_destruct(&array);
        PMIx_Info_list_release(proc);
    }
    pmix_data_array_t info;
    rc = PMIx_Info_list_convert(job, &info);
    if (rc != PMIX_SUCCESS)
        setup_fail("PMIx_Info_list_convert", rc);
    PMIx_Info_list_release(job);

    struct done d = DONE_INIT;
    rc = PMIx_server_register_nspace(nspace, nprocs, info.array, info.size, op_done, &d);
    rc = finish_op(rc, &d);
    if (rc != PMIX_SUCCESS)
        setup_fail("PMIx_server_register_nspace", rc);
    PMIx_Data_array_destruct(&info);
    free(peers);
    free(node_map);
    free(proc_map);

    for (int r = 0; r < nprocs; r++) {
        pmix_proc_t p;
        PMIX_LOAD_PROCID(&p, nspace, (pmix_rank_t)r);
        struct done dc = DONE_INIT;
        rc = PMIx_server_register_client(&p, getuid(), getgid(), NULL, op_done, &dc);
        rc = finish_op(rc, &dc);
        if (rc != PMIX_SUCCESS)
            setup_fail("PMIx_server_register_client", rc);
    }
}

/* The environment for rank `r`: ours without PMIX_* variables left by whoever started us
 * (PMIX_MCA_* parameters stay), plus what setup_fork adds. */
static char **child_env(int r)
{
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + 1, sizeof *env);
    if (env == NULL)
        setup_fail("calloc", PMIX_ERR_NOMEM);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "PMIX_", 5) == 0 && strncmp(environ[i], "PMIX_MCA_", 9) != 0)
            continue;
        env[k++] = strdup(environ[i]);
    }
    pmix_proc_t p;
    PMIX_LOAD_PROCID(&p, nspace, (pmix_rank_t)r);
    pmix_status_t rc = PMIx_server_setup_fork(&p, &env);
    if (rc != PMIX_SUCCESS)
        setup_fail("PMIx_server_setup_fork", rc);
    return env;
}

/* ---- processes -------------------------------------------------------------------------- */

static pid_t *pids;     /* 0 once reaped */
static int *status_of;  /* exit code, or 128 + signal */

static int running(void)
{
    int n = 0;
    for (int r = 0; r < nprocs; r++)
        n += pids[r] != 0;
    return n;
}

static void reap(void)
{
    for (;;) {
        int st = 0;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0)
            return;
        for (int r = 0; r < nprocs; r++) {
            if (pids[r] == pid) {
                pids[r] = 0;
                status_of[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                VLOG("rank %d exited with %d", r, status_of[r]);
            }
        }
    }
}

static void signal_all(int sig)
{
    for (int r = 0; r < nprocs; r++)
        if (pids[r] != 0)
            kill(pids[r], sig);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits for a signal in `set` (or for `until`); returns it, or 0 at `until`. */
static int wait_signal(const sigset_t *set, double until)
{
    double left = until - now();
    if (left <= 0)
        return 0;
    struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
    int sig = sigtimedwait(set, NULL, &ts);
    return sig < 0 ? 0 : sig;
}

/* SIGTERM to every process still running, then SIGKILL to what is left after `grace`
 * seconds; reaps them all. */
static void tear_down(const sigset_t *set, double grace)
{
    signal_all(SIGTERM);
    double until = now() + grace;
    reap();
    while (running() > 0 && wait_signal(set, until) != 0)
        reap();
    signal_all(SIGKILL);
    while (running() > 0) {
        int st;
        pid_t pid = waitpid(-1, &st, 0);
        if (pid < 0 && errno != EINTR)
            break;
        for (int r = 0; r < nprocs; r++)
            if (pids[r] == pid) {
                pids[r] = 0;
                status_of[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            }
    }
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* PMIx_server_finalize, bounded: it returns at once after a clean job, but should it hang
 * (see the end of main) the watchdog ends pmix_host with `result` after 10 s. */
static pthread_mutex_t finalize_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t finalize_cond = PTHREAD_COND_INITIALIZER;
static bool finalize_done;
static int finalize_result;

static void *finalize_watchdog(void *arg)
{
    (void)arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&finalize_lock);
    int rc = 0;
    while (!finalize_done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&finalize_cond, &finalize_lock, &until);
    bool done = finalize_done;
    pthread_mutex_unlock(&finalize_lock);
    if (!done) {
        say("PMIx_server_finalize did not return within 10 s; exiting without it");
        fflush(NULL);
        _exit(finalize_result);
    }
    return NULL;
}

static void finalize_server(int result)
{
    finalize_result = result;
    pthread_t watchdog;
    bool watched = pthread_create(&watchdog, NULL, finalize_watchdog, NULL) == 0;
    pmix_status_t rc = PMIx_server_finalize();
    if (rc != PMIX_SUCCESS)
        say("PMIx_server_finalize: %s", PMIx_Error_string(rc));
    pthread_mutex_lock(&finalize_lock);
    finalize_done = true;
    pthread_cond_signal(&finalize_cond);
    pthread_mutex_unlock(&finalize_lock);
    if (watched)
        pthread_join(watchdog, NULL);
}

static void usage(void)
{
    fprintf(stderr, "usage: pmix_host [-n N] [-t SECONDS] [-s NSPACE] [-e] [-v] -- PROGRAM "
                    "[ARGS...]\n");
    exit(3);
}

int main(int argc, char **argv)
{
    double deadline = 30;
    int envdump = 0, c;
    snprintf(nspace, sizeof nspace, "oracle.%d", (int)getpid());
    while ((c = getopt(argc, argv, "+n:t:s:ev")) != -1) {
        switch (c) {
        case 'n':
            nprocs = atoi(optarg);
            break;
        case 't':
            deadline = atof(optarg);
            break;
        case 's':
            if (strlen(optarg) > PMIX_MAX_NSLEN)
                usage();
            snprintf(nspace, sizeof nspace, "%s", optarg);
            break;
        case 'e':
            envdump = 1;
            break;
        case 'v':
            verbose = 1;
            break;
        default:
            usage();
        }
    }
    if (nprocs < 1 || deadline <= 0 || (!envdump && optind >= argc))
        usage();
    char **cmd = argv + optind;
    double end = now() + deadline;

    /* These signals are taken by sigtimedwait in main only: blocked here, before the server
     * library starts its thread, so every thread inherits the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    const char *tmp = getenv("TMPDIR");
    snprintf(session_dir, sizeof session_dir, "%s/pmix_host.XXXXXX",
             tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    if (mkdtemp(session_dir) == NULL) {
        say("mkdtemp %s: %s", session_dir, strerror(errno));
        return 3;
    }
    snprintf(ns_dir, sizeof ns_dir, "%s/ns", session_dir);
    if (mkdir(ns_dir, 0700) != 0) {
        say("mkdir %s: %s", ns_dir, strerror(errno));
        return 3;
    }

    /* Only the hash store: see the header. */
    setenv("PMIX_MCA_gds", "hash", 1);
    connected = calloc((size_t)nprocs, sizeof *connected);
    finalized = calloc((size_t)nprocs, sizeof *finalized);
    pids = calloc((size_t)nprocs, sizeof *pids);
    status_of = calloc((size_t)nprocs, sizeof *status_of);
    if (!connected || !finalized || !pids || !status_of)
        setup_fail("calloc", PMIX_ERR_NOMEM);

    char hostname[256] = "";
    gethostname(hostname, sizeof hostname - 1);
    pmix_info_t sinfo[2];
    PMIX_INFO_LOAD(&sinfo[0], PMIX_SERVER_TMPDIR, session_dir, PMIX_STRING);
    PMIX_INFO_LOAD(&sinfo[1], PMIX_SYSTEM_TMPDIR, session_dir, PMIX_STRING);
    pmix_status_t rc = PMIx_server_init(&module, sinfo, 2);
    if (rc != PMIX_SUCCESS)
        setup_fail("PMIx_server_init", rc);
    register_job(hostname);

    int result = 0;
    if (envdump) {
        char **env = child_env(0);
        for (size_t i = 0; env[i] != NULL; i++)
            if (strncmp(env[i], "PMIX_", 5) == 0)
                printf("%s\n", env[i]);
        goto out;
    }

    for (int r = 0; r < nprocs; r++) {
        char **env = child_env(r);
        pid_t pid = fork();
        if (pid < 0)
            setup_fail("fork", PMIX_ERR_SYS_OTHER);
        if (pid == 0) {
            sigset_t none;
            sigemptyset(&none);
            pthread_sigmask(SIG_SETMASK, &none, NULL);
            execvpe(cmd[0], cmd, env);
            fprintf(stderr, "pmix_host: exec %s: %s\n", cmd[0], strerror(errno));
            _exit(127);
        }
        pids[r] = pid;
        for (size_t i = 0; env[i] != NULL; i++)
            free(env[i]);
        free(env);
    }

    /* Until every process has exited, the job aborted, the deadline, or a signal to us. */
    int stop = 0;
    while (running() > 0) {
        reap();
        if (aborted || running() == 0)
            break;
        int sig = wait_signal(&set, end);
        if (sig == 0) {
            reap();
            if (running() == 0)
                break;
            say("deadline of %g s passed; killing the processes still running:", deadline);
            for (int r = 0; r < nprocs; r++)
                if (pids[r] != 0)
                    say("  rank %d (pid %d)%s", r, (int)pids[r],
                        connected[r] ? "" : ", never connected");
            stop = 124;
            break;
        }
        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
            say("signal %d: ending the job", sig);
            stop = 143;
            break;
        }
    }
    if (aborted || stop)
        tear_down(&set, 3.0);

    if (aborted) {
        say("job aborted by rank %d with status %d", abort_rank, abort_code);
        result = abort_code > 0 && abort_code < 256 ? abort_code : 1;
    } else if (stop) {
        result = stop;
    } else {
        for (int r = 0; r < nprocs; r++) {
            pthread_mutex_lock(&state_lock);
            bool fin = finalized[r];
            pthread_mutex_unlock(&state_lock);
            if (status_of[r] != 0) {
                say("rank %d exited with status %d%s", r, status_of[r],
                    status_of[r] > 128 ? " (128 + signal)" : "");
                if (result == 0)
                    result = status_of[r];
            } else if (!fin) {
                say("rank %d exited 0 without calling PMIx_Finalize", r);
                if (result == 0)
                    result = 1;
            }
        }
    }

out:
    nftw(session_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (result != 0) {
        /* Not PMIx_server_finalize: after processes died without finalizing (killed in a
         * fence after an abort, say), libpmix 4.2.2's finalize now and then never returns
         * (its progress thread blocks on a lock, ~10% of abort runs) or crashes. There is
         * nothing left to tidy that exiting does not. */
        fflush(NULL);
        _exit(result);
    }
    finalize_server(result);
    return result;
}
