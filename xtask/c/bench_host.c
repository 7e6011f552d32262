/*
 * bench_host.c - a one-node host on the OpenPMIx server library, the twin of
 * `pmix-bench job` / `pmix-bench regex` (pmix-tests/src/bin/pmix-bench.rs):
 * same workloads, same output lines, so that `cargo xtask bench` can put the
 * two side by side.
 *
 * usage: bench_host job --client PATH [--n N] [--pin CPU] [--timeout S] [-- CLIENT-ARGS]
 *        bench_host regex [--quick]
 *
 * Output on stdout: "RESULT <metric> <value>" (the host's own numbers),
 * "CLIENT <rank> <metric> <value>" (each rank's), "NOTE <text>".
 *
 * The host's callbacks: fences complete within the library on one node (and
 * fence_nb, if called, hands the node's contribution straight back);
 * publish/lookup/unpublish keep a table; abort ends the job.  OpenPMIx calls
 * them all on its progress thread, so the table needs no lock.
 *
 * BENCH_CLIENT_LIBRARY_PATH, if set, becomes the clients' LD_LIBRARY_PATH (not
 * this host's): the client program on pmix-rs's libpmix.so.2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pmix.h>
#include <pmix_server.h>

#include "bench.h"

extern char **environ;

/* ------------------------------------------------------------- output */

static char *out;
static size_t out_len, out_cap;

static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...)
{
    va_list ap;
    int k;
    for (;;) {
        va_start(ap, fmt);
        k = vsnprintf(out + out_len, out_cap - out_len, fmt, ap);
        va_end(ap);
        if (k >= 0 && (size_t) k < out_cap - out_len) {
            out_len += (size_t) k;
            return;
        }
        out_cap = out_cap * 2 + (size_t) (k > 0 ? k : 0) + 4096;
        out = realloc(out, out_cap);
        if (out == NULL) {
            abort();
        }
    }
}

static void result(const char *name, double v)
{
    emit("RESULT %s %.3f\n", name, v);
}

static void flush_out(void)
{
    if (out_len > 0 && fwrite(out, 1, out_len, stdout) != out_len) {
        perror("bench_host: stdout");
    }
    fflush(stdout);
}

/* ------------------------------------------------------------- host callbacks */

struct entry {
    struct entry *next;
    char key[PMIX_MAX_KEYLEN + 1];
    pmix_proc_t owner;
    pmix_value_t value;
};

static struct entry *table;
static atomic_int aborted;

static struct entry **find(const char *key)
{
    struct entry **e = &table;
    while (*e != NULL && strncmp((*e)->key, key, PMIX_MAX_KEYLEN) != 0) {
        e = &(*e)->next;
    }
    return e;
}

static pmix_status_t on_connected(const pmix_proc_t *p, void *obj, pmix_op_cbfunc_t cb,
                                  void *cbdata)
{
    (void) p, (void) obj, (void) cb, (void) cbdata;
    return PMIX_OPERATION_SUCCEEDED; /* 4.2 passes no callback here */
}

static pmix_status_t on_finalized(const pmix_proc_t *p, void *obj, pmix_op_cbfunc_t cb,
                                  void *cbdata)
{
    (void) p, (void) obj, (void) cb, (void) cbdata;
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t on_abort(const pmix_proc_t *p, void *obj, int status, const char msg[],
                              pmix_proc_t procs[], size_t nprocs, pmix_op_cbfunc_t cb,
                              void *cbdata)
{
    (void) obj, (void) procs, (void) nprocs;
    fprintf(stderr, "bench_host: %s:%u aborted the job (%d): %s\n", p->nspace, p->rank, status,
            msg != NULL ? msg : "");
    atomic_store(&aborted, 1);
    if (cb != NULL) {
        cb(PMIX_SUCCESS, cbdata);
    }
    return PMIX_SUCCESS;
}

static void free_blob(void *blob)
{
    free(blob);
}

static pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                              size_t ninfo, char *data, size_t ndata, pmix_modex_cbfunc_t cb,
                              void *cbdata)
{
    (void) procs, (void) nprocs, (void) info, (void) ninfo;
    /* One node: its contribution is the whole allgather.  The library leaves
     * the blob to us, so it comes back with a release function. */
    cb(PMIX_SUCCESS, data, ndata, cbdata, free_blob, data);
    return PMIX_SUCCESS;
}

static pmix_status_t on_publish(const pmix_proc_t *p, const pmix_info_t info[], size_t ninfo,
                                pmix_op_cbfunc_t cb, void *cbdata)
{
    /* The library mixes directives (pmix.* keys) into the data: skip them. */
    for (size_t i = 0; i < ninfo; i++) {
        if (!PMIX_CHECK_RESERVED_KEY(info[i].key) && *find(info[i].key) != NULL) {
            return PMIX_ERR_DUPLICATE_KEY;
        }
    }
    for (size_t i = 0; i < ninfo; i++) {
        struct entry *e;
        if (PMIX_CHECK_RESERVED_KEY(info[i].key)) {
            continue;
        }
        e = calloc(1, sizeof *e);
        if (e == NULL) {
            return PMIX_ERR_NOMEM;
        }
        PMIX_LOAD_KEY(e->key, info[i].key);
        e->owner = *p;
        PMIx_Value_xfer(&e->value, &info[i].value);
        e->next = table;
        table = e;
    }
    if (cb != NULL) {
        cb(PMIX_SUCCESS, cbdata);
    }
    return PMIX_SUCCESS;
}

static pmix_status_t on_lookup(const pmix_proc_t *p, char **keys, const pmix_info_t info[],
                               size_t ninfo, pmix_lookup_cbfunc_t cb, void *cbdata)
{
    size_t nkeys = 0, found = 0;
    pmix_pdata_t *pd;
    (void) p, (void) info, (void) ninfo;
    while (keys[nkeys] != NULL) {
        nkeys++;
    }
    PMIX_PDATA_CREATE(pd, nkeys > 0 ? nkeys : 1);
    for (size_t k = 0; k < nkeys; k++) {
        struct entry *e = *find(keys[k]);
        if (e != NULL) {
            pd[found].proc = e->owner;
            PMIX_LOAD_KEY(pd[found].key, e->key);
            PMIx_Value_xfer(&pd[found].value, &e->value);
            found++;
        }
    }
    cb(found > 0 ? PMIX_SUCCESS : PMIX_ERR_NOT_FOUND, found > 0 ? pd : NULL, found, cbdata);
    PMIX_PDATA_FREE(pd, nkeys > 0 ? nkeys : 1);
    return PMIX_SUCCESS;
}

static pmix_status_t on_unpublish(const pmix_proc_t *p, char **keys, const pmix_info_t info[],
                                  size_t ninfo, pmix_op_cbfunc_t cb, void *cbdata)
{
    (void) info, (void) ninfo;
    for (struct entry **e = &table; *e != NULL;) {
        bool wanted = keys == NULL; /* no keys: all of the caller's */
        for (size_t k = 0; keys != NULL && keys[k] != NULL; k++) {
            wanted = wanted || strncmp(keys[k], (*e)->key, PMIX_MAX_KEYLEN) == 0;
        }
        if (wanted && PMIX_CHECK_PROCID(&(*e)->owner, p)) {
            struct entry *gone = *e;
            *e = gone->next;
            PMIX_VALUE_DESTRUCT(&gone->value);
            free(gone);
        } else {
            e = &(*e)->next;
        }
    }
    if (cb != NULL) {
        cb(PMIX_SUCCESS, cbdata);
    }
    return PMIX_SUCCESS;
}

static pmix_server_module_t module = {
    .client_connected = on_connected,
    .client_finalized = on_finalized,
    .abort = on_abort,
    .fence_nb = on_fence,
    .publish = on_publish,
    .lookup = on_lookup,
    .unpublish = on_unpublish,
};

/* ------------------------------------------------------------- server plumbing */

static void latch_cb(pmix_status_t status, void *cbdata)
{
    bench_latch_open(cbdata, status);
}

static pmix_status_t register_nspace(const char *ns, int nlocal, pmix_info_t *info, size_t ninfo)
{
    bench_latch_t l;
    pmix_nspace_t name;
    pmix_status_t rc;
    bench_latch_init(&l);
    PMIX_LOAD_NSPACE(name, ns);
    rc = PMIx_server_register_nspace(name, nlocal, info, ninfo, latch_cb, &l);
    if (rc == PMIX_OPERATION_SUCCEEDED) {
        bench_latch_open(&l, PMIX_SUCCESS);
    } else if (rc != PMIX_SUCCESS) {
        bench_latch_open(&l, rc);
    }
    return bench_latch_wait(&l);
}

static void deregister_nspace(const char *ns)
{
    bench_latch_t l;
    pmix_nspace_t name;
    bench_latch_init(&l);
    PMIX_LOAD_NSPACE(name, ns);
    PMIx_server_deregister_nspace(name, latch_cb, &l);
    bench_latch_wait(&l);
}

static pmix_status_t register_client(const pmix_proc_t *p)
{
    bench_latch_t l;
    pmix_status_t rc;
    bench_latch_init(&l);
    rc = PMIx_server_register_client(p, getuid(), getgid(), NULL, latch_cb, &l);
    if (rc == PMIX_OPERATION_SUCCEEDED) {
        bench_latch_open(&l, PMIX_SUCCESS);
    } else if (rc != PMIX_SUCCESS) {
        bench_latch_open(&l, rc);
    }
    return bench_latch_wait(&l);
}

static char tmpdir[] = "/tmp/xtask-bench.XXXXXX";

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void) sb, (void) flag, (void) ftw;
    return remove(path);
}

/* Starts the server with a private rendezvous directory; returns its init time (s). */
static double server_init(void)
{
    pmix_info_t info[2];
    pmix_status_t rc;
    double t;
    if (mkdtemp(tmpdir) == NULL) {
        perror("bench_host: mkdtemp");
        exit(1);
    }
    PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TMPDIR, tmpdir, PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_SYSTEM_TMPDIR, tmpdir, PMIX_STRING);
    t = bench_now();
    rc = PMIx_server_init(&module, info, 2);
    t = bench_now() - t;
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "bench_host: PMIx_server_init: %s\n", PMIx_Error_string(rc));
        nftw(tmpdir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
        exit(1);
    }
    return t;
}

static void server_finalize(void)
{
    PMIx_server_finalize();
    nftw(tmpdir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* ------------------------------------------------------------- job */

/* What `pmix-bench job` registers too: sizes, this node's maps and peers, and
 * one PROC_INFO_ARRAY per rank. */
static pmix_info_t *job_info(uint32_t n, size_t *ninfo)
{
    char host[256] = "localhost", *peers, *nodemap = NULL, *procmap = NULL;
    size_t len = 0, i = 0;
    uint32_t one = 1;
    pmix_info_t *info;

    gethostname(host, sizeof host - 1);
    peers = malloc((size_t) n * 11 + 1);
    if (peers == NULL) {
        abort();
    }
    peers[0] = '\0';
    for (uint32_t r = 0; r < n; r++) {
        len += (size_t) sprintf(peers + len, r > 0 ? ",%u" : "%u", r);
    }
    PMIx_generate_regex(host, &nodemap);
    PMIx_generate_ppn(peers, &procmap); /* one node: its ranks are the peer list */

    *ninfo = 7 + n;
    PMIX_INFO_CREATE(info, *ninfo);
    PMIX_INFO_LOAD(&info[i++], PMIX_JOB_SIZE, &n, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[i++], PMIX_UNIV_SIZE, &n, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[i++], PMIX_LOCAL_SIZE, &n, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[i++], PMIX_NUM_NODES, &one, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[i++], PMIX_LOCAL_PEERS, peers, PMIX_STRING);
    PMIX_INFO_LOAD(&info[i++], PMIX_NODE_MAP, nodemap, PMIX_REGEX);
    PMIX_INFO_LOAD(&info[i++], PMIX_PROC_MAP, procmap, PMIX_REGEX);
    for (uint32_t r = 0; r < n; r++) {
        pmix_data_array_t *arr;
        pmix_info_t *pi;
        pmix_rank_t rank = r;
        uint16_t local = (uint16_t) r;
        uint32_t nodeid = 0;
        PMIX_DATA_ARRAY_CREATE(arr, 5, PMIX_INFO);
        pi = arr->array;
        PMIX_INFO_LOAD(&pi[0], PMIX_RANK, &rank, PMIX_PROC_RANK);
        PMIX_INFO_LOAD(&pi[1], PMIX_LOCAL_RANK, &local, PMIX_UINT16);
        PMIX_INFO_LOAD(&pi[2], PMIX_NODE_RANK, &local, PMIX_UINT16);
        PMIX_INFO_LOAD(&pi[3], PMIX_NODEID, &nodeid, PMIX_UINT32);
        PMIX_INFO_LOAD(&pi[4], PMIX_HOSTNAME, host, PMIX_STRING);
        PMIX_LOAD_KEY(info[i].key, PMIX_PROC_INFO_ARRAY);
        info[i].value.type = PMIX_DATA_ARRAY;
        info[i].value.data.darray = arr; /* freed with the info array */
        i++;
    }
    free(peers);
    free(nodemap);
    free(procmap);
    return info;
}

struct child {
    pid_t pid;
    int fd;     /* read end of its stdout */
    int status; /* valid once done */
    bool done;
};

/* A copy of our environment the library may grow (setup_fork reallocs it). */
static char **env_copy(void)
{
    size_t n = 0;
    char **env;
    while (environ[n] != NULL) {
        n++;
    }
    env = calloc(n + 1, sizeof *env);
    for (size_t k = 0; env != NULL && k < n; k++) {
        env[k] = strdup(environ[k]);
    }
    return env;
}

static void env_free(char **env)
{
    for (size_t k = 0; env[k] != NULL; k++) {
        free(env[k]);
    }
    free(env);
}

static void read_all(int fd, char **buf, size_t *len)
{
    size_t cap = 4096;
    *len = 0;
    *buf = malloc(cap);
    for (;;) {
        ssize_t k;
        if (*len + 1 >= cap) {
            cap *= 2;
            *buf = realloc(*buf, cap);
        }
        k = read(fd, *buf + *len, cap - *len - 1);
        if (k > 0) {
            *len += (size_t) k;
        } else if (k == 0 || errno != EINTR) {
            break;
        }
    }
    (*buf)[*len] = '\0';
}

static int cmd_job(int argc, char **argv)
{
    long n = 2, pin = -1, timeout_s = 120;
    const char *client = NULL;
    const char *client_libs = getenv("BENCH_CLIENT_LIBRARY_PATH");
    char **cargv;
    int a, cargc, failed = 0;
    struct child *kids;
    pmix_info_t *info;
    size_t ninfo;
    pmix_status_t rc;
    double t, deadline;
    long rss0;
    bool killed = false;
    int live = 0;

    for (a = 0; a < argc && strcmp(argv[a], "--") != 0; a += 2) {
        if (a + 1 >= argc) {
            fprintf(stderr, "bench_host: %s needs a value\n", argv[a]);
            return 2;
        }
        if (strcmp(argv[a], "--n") == 0) {
            n = atol(argv[a + 1]);
        } else if (strcmp(argv[a], "--pin") == 0) {
            pin = atol(argv[a + 1]);
        } else if (strcmp(argv[a], "--timeout") == 0) {
            timeout_s = atol(argv[a + 1]);
        } else if (strcmp(argv[a], "--client") == 0) {
            client = argv[a + 1];
        } else {
            fprintf(stderr, "bench_host: unknown option %s\n", argv[a]);
            return 2;
        }
    }
    if (client == NULL || n < 1 || n > 65535) {
        fprintf(stderr, "bench_host job: needs --client PATH and 1 <= --n <= 65535\n");
        return 2;
    }
    /* client argv: the program, then whatever follows "--" */
    cargc = a < argc ? argc - a - 1 : 0;
    cargv = calloc((size_t) cargc + 2, sizeof *cargv);
    cargv[0] = (char *) client;
    for (int k = 0; k < cargc; k++) {
        cargv[k + 1] = argv[a + 1 + k];
    }

    if (pin >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET((int) pin, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) {
            perror("bench_host: sched_setaffinity");
            return 1;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    deadline = bench_now() + (double) timeout_s;

    rss0 = bench_rss_kb();
    result("server_init_ms", server_init() * 1e3);
    result("rss_start_kb", (double) rss0);
    result("rss_init_kb", (double) bench_rss_kb());

    info = job_info((uint32_t) n, &ninfo);
    t = bench_now();
    rc = register_nspace("bench", (int) n, info, ninfo);
    result("register_nspace_ms", (bench_now() - t) * 1e3);
    PMIX_INFO_FREE(info, ninfo);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "bench_host: register_nspace: %s\n", PMIx_Error_string(rc));
        server_finalize();
        return 1;
    }
    result("rss_reg_kb", (double) bench_rss_kb());

    kids = calloc((size_t) n, sizeof *kids);
    t = bench_now();
    for (long r = 0; r < n; r++) {
        pmix_proc_t p;
        char **env;
        int fds[2];
        PMIX_LOAD_PROCID(&p, "bench", (pmix_rank_t) r);
        rc = register_client(&p);
        if (rc != PMIX_SUCCESS) {
            emit("NOTE FAILED register_client %ld: %s\n", r, PMIx_Error_string(rc));
            failed = 1;
            break;
        }
        env = env_copy();
        rc = PMIx_server_setup_fork(&p, &env);
        if (rc == PMIX_SUCCESS && client_libs != NULL) {
            /* the clients' library path, not this host's (which must keep OpenPMIx's) */
            rc = pmix_setenv("LD_LIBRARY_PATH", client_libs, true, &env);
        }
        if (rc != PMIX_SUCCESS || pipe2(fds, O_CLOEXEC) != 0) {
            emit("NOTE FAILED setup_fork/pipe for rank %ld\n", r);
            env_free(env);
            failed = 1;
            break;
        }
        kids[r].pid = fork();
        if (kids[r].pid == 0) {
            dup2(fds[1], STDOUT_FILENO);
            execve(client, cargv, env);
            _exit(127);
        }
        close(fds[1]);
        kids[r].fd = fds[0];
        env_free(env);
        if (kids[r].pid < 0) {
            close(fds[0]);
            emit("NOTE FAILED fork of rank %ld\n", r);
            failed = 1;
            break;
        }
        live++;
    }
    result("launch_ms", (bench_now() - t) * 1e3);

    /* Reap with a deadline; a rank that fails or aborts ends the job for everyone. */
    while (live > 0) {
        bool timed_out;
        for (int r = 0; r < n; r++) {
            if (kids[r].pid > 0 && !kids[r].done
                && waitpid(kids[r].pid, &kids[r].status, WNOHANG) == kids[r].pid) {
                kids[r].done = true;
                live--;
                /* Once the job is being killed, only the cause is worth a line. */
                if (!killed && (!WIFEXITED(kids[r].status) || WEXITSTATUS(kids[r].status) != 0)) {
                    emit("NOTE FAILED rank %d ended with status 0x%x\n", r, kids[r].status);
                    failed = 1;
                }
            }
        }
        if (live == 0) {
            break;
        }
        timed_out = bench_now() > deadline;
        if (!killed && (timed_out || failed || atomic_load(&aborted))) {
            if (timed_out) {
                emit("NOTE FAILED deadline passed: killing every rank still running\n");
                failed = 1;
            }
            int nkilled = 0;
            for (int r = 0; r < n; r++) {
                if (kids[r].pid > 0 && !kids[r].done) {
                    kill(kids[r].pid, SIGKILL); /* our own children, by pid */
                    nkilled++;
                }
            }
            emit("NOTE FAILED killed the %d ranks still running\n", nkilled);
            killed = true;
        }
        usleep(20000);
    }
    result("job_ms", (bench_now() - t) * 1e3);
    result("rss_end_kb", (double) bench_rss_kb());
    deregister_nspace("bench");
    result("rss_dereg_kb", (double) bench_rss_kb());

    for (int r = 0; r < n; r++) {
        char *buf, *line, *save = NULL;
        size_t len;
        if (kids[r].pid <= 0) {
            continue;
        }
        read_all(kids[r].fd, &buf, &len);
        close(kids[r].fd);
        for (line = strtok_r(buf, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
            if (strncmp(line, "NOTE ", 5) == 0) {
                emit("NOTE rank %d: %s\n", r, line + 5);
            } else {
                emit("CLIENT %d %s\n", r, line);
            }
        }
        free(buf);
    }
    flush_out();
    server_finalize();
    free(kids);
    free(cargv);
    return failed ? 1 : 0;
}

/* ------------------------------------------------------------- regex */

/* "nid000001,nid000002,..." */
static char *node_names(int n)
{
    char *s = malloc((size_t) n * 11 + 1), *p = s;
    if (s == NULL) {
        abort();
    }
    *p = '\0';
    for (int i = 1; i <= n; i++) {
        p += sprintf(p, i > 1 ? ",nid%06d" : "nid%06d", i);
    }
    return s;
}

/* `nodes` nodes of `ppn` consecutive ranks: "0,1,2,3;4,5,6,7;..." */
static char *ppn_text(int nodes, int ppn)
{
    char *s = malloc((size_t) nodes * (size_t) ppn * 9 + 16), *p = s;
    long r = 0;
    if (s == NULL) {
        abort();
    }
    *p = '\0';
    for (int nd = 0; nd < nodes; nd++) {
        for (int k = 0; k < ppn; k++, r++) {
            p += sprintf(p, k > 0 ? ",%ld" : (nd > 0 ? ";%ld" : "%ld"), r);
        }
    }
    return s;
}

/* Length of a generated map: strings without their NUL (as Rust counts), zlib
 * blobs ("blob:\0component=zlib:\0size=<n>:\0<n bytes>") in full. */
static size_t map_len(const char *m)
{
    size_t at, n;
    if (strncmp(m, "blob:", 5) != 0) {
        return strlen(m);
    }
    at = strlen(m) + 1;
    at += strlen(m + at) + 1;
    n = strtoul(m + at + 5, NULL, 10);
    at += strlen(m + at) + 1;
    return at + n;
}

typedef pmix_status_t (*gen_fn)(const char *, char **);

static void time_gen(const char *name, int count, gen_fn gen, const char *input, int reps)
{
    double best = 1e300;
    size_t len = 0;
    char metric[64];
    for (int i = 0; i < reps; i++) {
        char *m = NULL;
        double t = bench_now();
        pmix_status_t rc = gen(input, &m);
        t = bench_now() - t;
        if (rc != PMIX_SUCCESS || m == NULL) {
            emit("NOTE FAILED %s of %d: %s\n", name, count, PMIx_Error_string(rc));
            return;
        }
        best = t < best ? t : best;
        len = map_len(m);
        free(m);
    }
    snprintf(metric, sizeof metric, "%s_%d_ms", name, count);
    result(metric, best * 1e3);
    snprintf(metric, sizeof metric, "%s_%d_bytes", name, count);
    result(metric, (double) len);
}

static int cmd_regex(int argc, char **argv)
{
    bool quick = argc > 0 && strcmp(argv[0], "--quick") == 0;
    const int sizes[] = {10000, 100000}, ppns[] = {10, 100};
    const int nsizes = quick ? 1 : 2;
    const int nodes = 1000;
    char metric[64];

    server_init(); /* the generators, too, need the library initialized */
    for (int i = 0; i < nsizes; i++) {
        int n = sizes[i];
        char *names = node_names(n), *ppn = ppn_text(n, 4);
        time_gen("generate_regex", n, PMIx_generate_regex, names, n >= 100000 ? 3 : 5);
        time_gen("generate_ppn", n, PMIx_generate_ppn, ppn, n >= 100000 ? 1 : 3);
        free(names);
        free(ppn);
    }

    /* Jobs on 1,000 nodes, this host not among them: only the maps and sizes. */
    for (int j = 0; j < nsizes; j++) {
        uint32_t nprocs = (uint32_t) (nodes * ppns[j]), nn = (uint32_t) nodes;
        char *names = node_names(nodes), *ppn = ppn_text(nodes, ppns[j]);
        char *nmap = NULL, *pmap = NULL, ns[64];
        pmix_info_t info[6];
        long before, after, gone;
        pmix_status_t rc;
        double t;

        PMIx_generate_regex(names, &nmap);
        PMIx_generate_ppn(ppn, &pmap);
        PMIX_INFO_LOAD(&info[0], PMIX_JOB_SIZE, &nprocs, PMIX_UINT32);
        PMIX_INFO_LOAD(&info[1], PMIX_UNIV_SIZE, &nprocs, PMIX_UINT32);
        PMIX_INFO_LOAD(&info[2], PMIX_MAX_PROCS, &nprocs, PMIX_UINT32);
        PMIX_INFO_LOAD(&info[3], PMIX_NUM_NODES, &nn, PMIX_UINT32);
        PMIX_INFO_LOAD(&info[4], PMIX_NODE_MAP, nmap, PMIX_REGEX);
        PMIX_INFO_LOAD(&info[5], PMIX_PROC_MAP, pmap, PMIX_REGEX);
        snprintf(ns, sizeof ns, "bigjob%u", nprocs);

        before = bench_rss_kb();
        t = bench_now();
        rc = register_nspace(ns, 0, info, 6);
        t = bench_now() - t;
        after = bench_rss_kb();
        if (rc != PMIX_SUCCESS) {
            emit("NOTE FAILED register_nspace of %u processes: %s\n", nprocs,
                 PMIx_Error_string(rc));
        } else {
            snprintf(metric, sizeof metric, "register_nspace_%u_ms", nprocs);
            result(metric, t * 1e3);
        }
        t = bench_now();
        deregister_nspace(ns);
        snprintf(metric, sizeof metric, "deregister_nspace_%u_ms", nprocs);
        result(metric, (bench_now() - t) * 1e3);
        gone = bench_rss_kb();
        snprintf(metric, sizeof metric, "register_nspace_%u_rss_kb", nprocs);
        result(metric, (double) (after - before));
        snprintf(metric, sizeof metric, "rss_before_reg_%u_kb", nprocs);
        result(metric, (double) before);
        snprintf(metric, sizeof metric, "rss_after_dereg_%u_kb", nprocs);
        result(metric, (double) gone);
        for (int k = 0; k < 6; k++) {
            PMIX_INFO_DESTRUCT(&info[k]);
        }
        free(nmap);
        free(pmap);
        free(names);
        free(ppn);
    }
    flush_out();
    server_finalize();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "job") == 0) {
        return cmd_job(argc - 2, argv + 2);
    }
    if (argc >= 2 && strcmp(argv[1], "regex") == 0) {
        return cmd_regex(argc - 2, argv + 2);
    }
    fprintf(stderr, "usage: bench_host job --client PATH [--n N] [--pin CPU] [--timeout S] "
                    "[-- CLIENT-ARGS]\n       bench_host regex [--quick]\n");
    return 2;
}
