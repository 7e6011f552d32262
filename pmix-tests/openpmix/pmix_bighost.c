/*
 * pmix_bighost.c - one daemon of a large job on the OpenPMIx server library: the twin of
 * `pmix-scale host` (pmix-tests/src/bin/pmix-scale.rs) for `cargo xtask bench --scale`,
 * printing the same lines for the same phases.
 *
 *   pmix_bighost --client PATH --phase reg0|first|many --nodes N --ppn P
 *                [--clients K] [--reps R] [--timeout S]
 *
 * The job: N nodes "node00001"... of P consecutive ranks each, registered with PMIX_NODE_MAP
 * and PMIX_PROC_MAP from PMIx_generate_regex / PMIx_generate_ppn, sizes and one app, and
 * nothing per node or per rank (the library derives that from the maps).
 *
 *   reg0   the server's PMIX_HOSTNAME is not in the node map, nlocalprocs 0:
 *          PMIx_server_register_nspace's time and the VmRSS it adds, then deregister;
 *   first  the server is the middle node (index N/2, P local ranks); after the registration,
 *          one client (PATH first ..., its first local rank) alone: its lines are passed on
 *          as "first_<metric>", with its VmRSS and Pss and the server's sampled while it
 *          waits on its stdin;
 *   many   K clients (default P) started back to back: the wall time from the first start to
 *          the last "READY" (init done), and with all of them alive the node's memory, VmRSS
 *          and Pss (/proc/<pid>/smaps_rollup) of the server and every client.
 *
 * The fence rows say NA: the data a host's fence_nb returns is libpmix's own packed
 * per-node blobs, which another libpmix server produces and a host passes on opaquely; a
 * host cannot fabricate the other nodes' share through the public API.
 *
 * Output on stdout: "RESULT <metric> <value>", "NA <metric> <reason>", "NOTE <text>". Every
 * client is killed at the deadline (default 600 s), and then the host fails. Server storage:
 * OpenPMIx's default (gds ds21), unless PMIX_MCA_gds says otherwise.
 *
 * Build: cc -O2 -o pmix_bighost pmix_bighost.c $(pkg-config --cflags --libs pmix)
 */
#define _GNU_SOURCE
#include <pmix.h>
#include <pmix_server.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A "kB" field of /proc/<pid>/<file>; pid 0 is this process. */
static long proc_kb(pid_t pid, const char *file, const char *field)
{
    char path[64], buf[512];
    if (pid == 0)
        snprintf(path, sizeof path, "/proc/self/%s", file);
    else
        snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    FILE *f = fopen(path, "r");
    long kb = 0;
    size_t flen = strlen(field);
    if (f == NULL)
        return 0;
    while (fgets(buf, sizeof buf, f) != NULL)
        if (strncmp(buf, field, flen) == 0) {
            kb = atol(buf + flen);
            break;
        }
    fclose(f);
    return kb;
}

static long rss_kb(pid_t pid)
{
    return proc_kb(pid, "status", "VmRSS:");
}

static long pss_kb(pid_t pid)
{
    return proc_kb(pid, "smaps_rollup", "Pss:");
}

static char tmpdir[] = "/tmp/pmix_bighost.XXXXXX";

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void cleanup(void)
{
    nftw(tmpdir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

static void failed(const char *what, pmix_status_t rc)
{
    printf("NOTE FAILED %s: %s\n", what, PMIx_Error_string(rc));
    fflush(stdout);
    cleanup();
    _exit(1);
}

/* ---- upcalls ---------------------------------------------------------------------------- */

static pmix_status_t on_connected(const pmix_proc_t *p, void *obj, pmix_op_cbfunc_t cb,
                                  void *cbdata)
{
    (void)p, (void)obj, (void)cb, (void)cbdata;
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t on_finalized(const pmix_proc_t *p, void *obj, pmix_op_cbfunc_t cb,
                                  void *cbdata)
{
    (void)p, (void)obj, (void)cb, (void)cbdata;
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t on_abort(const pmix_proc_t *p, void *obj, int status, const char msg[],
                              pmix_proc_t procs[], size_t nprocs, pmix_op_cbfunc_t cb,
                              void *cbdata)
{
    (void)obj, (void)procs, (void)nprocs, (void)cb, (void)cbdata;
    fprintf(stderr, "pmix_bighost: %s:%u aborted (%d): %s\n", p->nspace, p->rank, status,
            msg != NULL ? msg : "");
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_server_module_t module = {
    .client_connected = on_connected,
    .client_finalized = on_finalized,
    .abort = on_abort,
};

/* ---- blocking wrappers of the server calls ---------------------------------------------- */

struct latch {
    pthread_mutex_t mx;
    pthread_cond_t cv;
    bool done;
    pmix_status_t status;
};

static void latch_open(pmix_status_t status, void *cbdata)
{
    struct latch *l = cbdata;
    pthread_mutex_lock(&l->mx);
    l->status = status;
    l->done = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mx);
}

/* The final status of a call that returned `rc` and reports to `l`. */
static pmix_status_t latch_wait(pmix_status_t rc, struct latch *l)
{
    if (rc == PMIX_OPERATION_SUCCEEDED)
        return PMIX_SUCCESS;
    if (rc != PMIX_SUCCESS)
        return rc;
    pthread_mutex_lock(&l->mx);
    while (!l->done)
        pthread_cond_wait(&l->cv, &l->mx);
    pthread_mutex_unlock(&l->mx);
    return l->status;
}

#define LATCH {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, PMIX_SUCCESS}

/* ---- clients ------------------------------------------------------------------------------ */

struct client {
    pid_t pid;
    int in;          /* write end of its stdin, -1 once closed */
    int out;         /* read end of its stdout, -1 at its end */
    char buf[8192];  /* its partial line */
    size_t len;
    bool ready;
    double ready_at;
};

static struct client *kids;
static int nkids;
static double deadline;

static void kill_all(void)
{
    for (int k = 0; k < nkids; k++)
        if (kids[k].pid > 0) {
            kill(kids[k].pid, SIGKILL);
            waitpid(kids[k].pid, NULL, 0);
            kids[k].pid = 0;
        }
}

/* Registers `p` and returns the environment setup_fork gives it. */
static char **prepare(const pmix_proc_t *p)
{
    struct latch l = LATCH;
    pmix_status_t rc = PMIx_server_register_client(p, getuid(), getgid(), NULL, latch_open, &l);
    if (latch_wait(rc, &l) != PMIX_SUCCESS)
        failed("PMIx_server_register_client", rc);
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + 1, sizeof *env);
    for (size_t k = 0; env != NULL && k < n; k++)
        env[k] = strdup(environ[k]);
    if (env == NULL)
        failed("calloc", PMIX_ERR_NOMEM);
    rc = PMIx_server_setup_fork(p, &env);
    if (rc != PMIX_SUCCESS)
        failed("PMIx_server_setup_fork", rc);
    return env;
}

/* Starts `path role extra...` with `env` (freed here), its stdin and stdout on pipes. */
static void start(const char *path, const char *role, char **env, char **extra)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
        failed("pipe", PMIX_ERR_SYS_OTHER);
    pid_t pid = fork();
    if (pid < 0)
        failed("fork", PMIX_ERR_SYS_OTHER);
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        char *argv[16] = {(char *)path, (char *)role};
        for (int k = 0; extra[k] != NULL && k < 13; k++)
            argv[k + 2] = extra[k];
        execve(path, argv, env);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    for (size_t k = 0; env[k] != NULL; k++)
        free(env[k]);
    free(env);
    struct client *c = &kids[nkids++];
    memset(c, 0, sizeof *c);
    c->pid = pid;
    c->in = in[1];
    c->out = out[0];
}

/* Every line a client printed before "READY" is passed on: "RESULT x v" as "RESULT
 * <prefix>x v" (or kept for the caller in `sums`), "NA x why" as "NA <prefix>x why". */
struct sum {
    char name[64];
    double total, max;
    int count;
};
static struct sum sums[64];
static int nsums;

static void add_sum(const char *name, double v)
{
    int i = 0;
    while (i < nsums && strcmp(sums[i].name, name) != 0)
        i++;
    if (i == nsums) {
        if (nsums == 64)
            return;
        nsums++;
        snprintf(sums[i].name, sizeof sums[i].name, "%s", name);
    }
    sums[i].total += v;
    sums[i].max = sums[i].count == 0 || v > sums[i].max ? v : sums[i].max;
    sums[i].count++;
}

static const struct sum *find_sum(const char *name)
{
    for (int i = 0; i < nsums; i++)
        if (strcmp(sums[i].name, name) == 0)
            return &sums[i];
    return NULL;
}

static void line(struct client *c, const char *text)
{
    char name[64];
    double v;
    if (strcmp(text, "READY") == 0) {
        c->ready = true;
        c->ready_at = now();
    } else if (strncmp(text, "NOTE FAILED", 11) == 0) {
        printf("NOTE FAILED client %d: %s\n", (int)c->pid, text + 12);
        fflush(stdout);
        kill_all();
        cleanup();
        _exit(1);
    } else if (sscanf(text, "RESULT %63s %lf", name, &v) == 2) {
        add_sum(name, v);
    } else if (strncmp(text, "NA ", 3) == 0) {
        printf("NA first_%s\n", text + 3);
    }
}

/* Reads the clients' lines until all are READY, at most until the deadline. */
static void until_ready(void)
{
    struct pollfd *fds = calloc((size_t)nkids, sizeof *fds);
    for (;;) {
        int waiting = 0;
        for (int k = 0; k < nkids; k++) {
            fds[k].fd = kids[k].ready ? -1 : kids[k].out;
            fds[k].events = POLLIN;
            waiting += !kids[k].ready;
        }
        if (waiting == 0)
            break;
        int left = (int)((deadline - now()) * 1e3);
        if (left <= 0 || poll(fds, (nfds_t)nkids, left) == 0) {
            printf("NOTE FAILED %d clients not READY before the deadline\n", waiting);
            fflush(stdout);
            kill_all();
            cleanup();
            _exit(1);
        }
        for (int k = 0; k < nkids; k++) {
            struct client *c = &kids[k];
            if (c->ready || !(fds[k].revents & (POLLIN | POLLHUP)))
                continue;
            ssize_t got = read(c->out, c->buf + c->len, sizeof c->buf - 1 - c->len);
            if (got <= 0) {
                printf("NOTE FAILED client %d ended before READY\n", (int)c->pid);
                fflush(stdout);
                kill_all();
                cleanup();
                _exit(1);
            }
            c->len += (size_t)got;
            c->buf[c->len] = '\0';
            char *nl;
            while ((nl = memchr(c->buf, '\n', c->len)) != NULL) {
                *nl = '\0';
                line(c, c->buf);
                size_t used = (size_t)(nl - c->buf) + 1;
                memmove(c->buf, nl + 1, c->len - used);
                c->len -= used;
                c->buf[c->len] = '\0';
            }
        }
    }
    free(fds);
}

/* Closes every client's stdin and waits for it to exit 0, until the deadline. */
static void finish(void)
{
    for (int k = 0; k < nkids; k++) {
        close(kids[k].in);
        kids[k].in = -1;
    }
    for (int k = 0; k < nkids; k++) {
        int st = 0;
        for (;;) {
            pid_t r = waitpid(kids[k].pid, &st, WNOHANG);
            if (r == kids[k].pid)
                break;
            if (now() > deadline) {
                printf("NOTE FAILED clients did not exit before the deadline\n");
                fflush(stdout);
                kill_all();
                cleanup();
                _exit(1);
            }
            usleep(5000);
        }
        kids[k].pid = 0;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            printf("NOTE FAILED a client ended with status %d\n", st);
            fflush(stdout);
            kill_all();
            cleanup();
            _exit(1);
        }
    }
}

/* ---- main ------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    const char *client = NULL, *phase = "";
    long nodes = 1000, ppn = 100, nclients = 0, reps = 10000, timeout_s = 600;
    for (int a = 1; a + 1 < argc; a += 2) {
        const char *k = argv[a], *v = argv[a + 1];
        if (strcmp(k, "--client") == 0)
            client = v;
        else if (strcmp(k, "--phase") == 0)
            phase = v;
        else if (strcmp(k, "--nodes") == 0)
            nodes = atol(v);
        else if (strcmp(k, "--ppn") == 0)
            ppn = atol(v);
        else if (strcmp(k, "--clients") == 0)
            nclients = atol(v);
        else if (strcmp(k, "--reps") == 0)
            reps = atol(v);
        else if (strcmp(k, "--timeout") == 0)
            timeout_s = atol(v);
        else if (strcmp(k, "--fence-bytes") != 0) {
            fprintf(stderr, "pmix_bighost: unknown option %s\n", k);
            return 2;
        }
    }
    bool local = strcmp(phase, "first") == 0 || strcmp(phase, "many") == 0;
    if (client == NULL || (!local && strcmp(phase, "reg0") != 0) || nodes < 2 || ppn < 1 ||
        nodes * ppn > UINT32_MAX / 2 || nclients < 0 || nclients > ppn) {
        fprintf(stderr, "usage: pmix_bighost --client PATH --phase reg0|first|many --nodes N "
                        "--ppn P [--clients K<=P] [--reps R] [--timeout S]\n");
        return 2;
    }
    if (nclients == 0)
        nclients = ppn;
    deadline = now() + (double)timeout_s;
    signal(SIGPIPE, SIG_IGN);

    uint32_t nprocs = (uint32_t)(nodes * ppn), nnodes = (uint32_t)nodes, here = nnodes / 2;
    char myname[32];
    if (local)
        snprintf(myname, sizeof myname, "node%05u", here + 1);
    else
        snprintf(myname, sizeof myname, "elsewhere");

    if (mkdtemp(tmpdir) == NULL) {
        perror("pmix_bighost: mkdtemp");
        return 1;
    }
    pmix_info_t sinfo[3];
    PMIX_INFO_LOAD(&sinfo[0], PMIX_SERVER_TMPDIR, tmpdir, PMIX_STRING);
    PMIX_INFO_LOAD(&sinfo[1], PMIX_SYSTEM_TMPDIR, tmpdir, PMIX_STRING);
    PMIX_INFO_LOAD(&sinfo[2], PMIX_HOSTNAME, myname, PMIX_STRING);
    pmix_status_t rc = PMIx_server_init(&module, sinfo, 3);
    if (rc != PMIX_SUCCESS)
        failed("PMIx_server_init", rc);

    /* The maps, from the node names and each node's ranks. */
    char *names = malloc((size_t)nnodes * 10 + 1);
    char *ranks = malloc((size_t)nprocs * 11 + 1);
    if (names == NULL || ranks == NULL)
        failed("malloc", PMIX_ERR_NOMEM);
    size_t nl = 0, rl = 0;
    for (uint32_t n = 0; n < nnodes; n++) {
        nl += (size_t)sprintf(names + nl, n ? ",node%05u" : "node%05u", n + 1);
        for (uint32_t r = n * (uint32_t)ppn; r < (n + 1) * (uint32_t)ppn; r++)
            rl += (size_t)sprintf(ranks + rl, r == n * (uint32_t)ppn ? (n ? ";%u" : "%u") : ",%u",
                                  r);
    }
    char *nodemap = NULL, *procmap = NULL;
    if ((rc = PMIx_generate_regex(names, &nodemap)) != PMIX_SUCCESS)
        failed("PMIx_generate_regex", rc);
    if ((rc = PMIx_generate_ppn(ranks, &procmap)) != PMIX_SUCCESS)
        failed("PMIx_generate_ppn", rc);
    free(names);
    free(ranks);

    uint32_t zero = 0, one = 1;
    pmix_rank_t leader = 0;
    pmix_info_t info[12];
    size_t ni = 0;
    PMIX_INFO_LOAD(&info[ni++], PMIX_JOB_SIZE, &nprocs, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[ni++], PMIX_MAX_PROCS, &nprocs, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[ni++], PMIX_UNIV_SIZE, &nprocs, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[ni++], PMIX_NUM_NODES, &nnodes, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[ni++], PMIX_JOB_NUM_APPS, &one, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[ni++], PMIX_NODE_MAP, nodemap, PMIX_REGEX);
    PMIX_INFO_LOAD(&info[ni++], PMIX_PROC_MAP, procmap, PMIX_REGEX);
    PMIX_INFO_LOAD(&info[ni++], PMIX_APPNUM, &zero, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[ni++], PMIX_APP_SIZE, &nprocs, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[ni++], PMIX_APPLDR, &leader, PMIX_PROC_RANK);
    PMIX_INFO_LOAD(&info[ni++], PMIX_TMPDIR, tmpdir, PMIX_STRING);
    free(nodemap);
    free(procmap);

    pmix_nspace_t ns;
    PMIX_LOAD_NSPACE(ns, "scale");
    long before = rss_kb(0);
    double t = now();
    struct latch l = LATCH;
    rc = PMIx_server_register_nspace(ns, local ? (int)ppn : 0, info, ni, latch_open, &l);
    rc = latch_wait(rc, &l);
    if (rc != PMIX_SUCCESS)
        failed("PMIx_server_register_nspace", rc);
    printf("RESULT register_nspace_ms %.3f\n", (now() - t) * 1e3);
    printf("RESULT register_nspace_rss_kb %ld\n", rss_kb(0) - before);
    for (size_t i = 0; i < ni; i++)
        PMIX_INFO_DESTRUCT(&info[i]);

    char nodes_s[24], ppn_s[24], reps_s[24];
    snprintf(nodes_s, sizeof nodes_s, "%ld", nodes);
    snprintf(ppn_s, sizeof ppn_s, "%ld", ppn);
    snprintf(reps_s, sizeof reps_s, "%ld", reps);
    char *extra[] = {"--nodes", nodes_s, "--ppn", ppn_s, "--reps", reps_s, NULL};
    pmix_rank_t base = here * (pmix_rank_t)ppn;
    kids = calloc((size_t)nclients, sizeof *kids);
    if (kids == NULL)
        failed("calloc", PMIX_ERR_NOMEM);

    if (strcmp(phase, "first") == 0) {
        pmix_proc_t p;
        PMIX_LOAD_PROCID(&p, ns, base);
        start(client, "first", prepare(&p), extra);
        until_ready();
        printf("RESULT first_client_rss_kb %ld\n", rss_kb(kids[0].pid));
        printf("RESULT first_client_pss_kb %ld\n", pss_kb(kids[0].pid));
        printf("RESULT first_server_rss_added_kb %ld\n", rss_kb(0) - before);
        for (int i = 0; i < nsums; i++)
            printf("RESULT first_%s %.3f\n", sums[i].name, sums[i].total / sums[i].count);
        finish();
    } else if (local) {
        /* Registered and set up first, as pmix-scale does, so that only the starts are timed. */
        char ***envs = calloc((size_t)nclients, sizeof *envs);
        if (envs == NULL)
            failed("calloc", PMIX_ERR_NOMEM);
        for (long k = 0; k < nclients; k++) {
            pmix_proc_t p;
            PMIX_LOAD_PROCID(&p, ns, base + (pmix_rank_t)k);
            envs[k] = prepare(&p);
        }
        double t0 = now();
        for (long k = 0; k < nclients; k++)
            start(client, "many", envs[k], extra);
        free(envs);
        until_ready();
        double last = 0;
        for (int k = 0; k < nkids; k++)
            last = kids[k].ready_at > last ? kids[k].ready_at : last;
        printf("RESULT many_wall_ms %.3f\n", (last - t0) * 1e3);
        const struct sum *s = find_sum("init_ms");
        if (s != NULL) {
            printf("RESULT many_init_mean_ms %.3f\n", s->total / s->count);
            printf("RESULT many_init_max_ms %.3f\n", s->max);
        }
        s = find_sum("rss_added_kb");
        if (s != NULL)
            printf("RESULT many_client_rss_added_kb %.3f\n", s->total / s->count);
        long crss = 0, cpss = 0, srss = rss_kb(0), spss = pss_kb(0);
        for (int k = 0; k < nkids; k++) {
            crss += rss_kb(kids[k].pid);
            cpss += pss_kb(kids[k].pid);
        }
        printf("RESULT many_clients %d\n", nkids);
        printf("RESULT many_server_rss_kb %ld\n", srss);
        printf("RESULT many_clients_rss_kb %ld\n", crss);
        printf("RESULT many_node_rss_kb %ld\n", srss + crss);
        printf("RESULT many_server_pss_kb %ld\n", spss);
        printf("RESULT many_clients_pss_kb %ld\n", cpss);
        printf("RESULT many_node_pss_kb %ld\n", spss + cpss);
        const char *why = "a host cannot fabricate the other nodes' share of libpmix's "
                          "fence data (its own packed format) through the public API";
        const char *rows[] = {"fence_us", "fence_max_us", "get_after_fence_first_us",
                              "get_after_fence_us", "fenced_node_rss_kb", "fenced_node_pss_kb"};
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
            printf("NA %s %s\n", rows[i], why);
        finish();
    } else {
        struct latch d = LATCH;
        t = now();
        PMIx_server_deregister_nspace(ns, latch_open, &d);
        latch_wait(PMIX_SUCCESS, &d);
        printf("RESULT deregister_nspace_ms %.3f\n", (now() - t) * 1e3);
    }
    fflush(stdout);
    PMIx_server_finalize();
    cleanup();
    return 0;
}
