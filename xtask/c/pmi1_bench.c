/* pmi1_bench: barrier and collecting-fence latency over the PMI-1 wire protocol, for
 * `cargo xtask bench --multinode` under MPICH's Hydra (which speaks PMI-1, not PMIx) and
 * under `pmixrun --pmi pmi1`. The PMIx launchers' numbers come from bench_client.c and
 * mn_bench.c.
 *
 *   pmi1_bench FENCES BARRIERS
 *
 * Talks to the launcher on the socket PMI_FD names (no MPI library). A barrier is
 * barrier_in/barrier_out; a collecting fence is a put of this rank's key then a barrier
 * (PMI-1's commit point), after which the next rank's key is read back and checked
 * (untimed). The sized fences put S bytes (100, 1000, 10000) under new keys (a PMI-1 key is written once), in as many
 * values as the launcher's vallen_max needs (as MPICH splits a long business card), then
 * barrier; the far rank's first value is read back and checked (untimed). Prints, as
 * bench_client does, "fence_collect_us <mean>", "fence_<S>_us <mean>" and
 * "barrier_us <mean>", and "node <hostname>" (where the rank ran, which the xtask checks)
 * in one write, with the CPU time its parent (the launcher's daemon on the node; "daemon
 * <name>") spent per barrier and per sized-fence round, check get included
 * ("daemon_cpu_barrier_us", "daemon_cpu_fence_<S>_us"; cpu_time.h), and its own
 * ("client_cpu_..."); any failure exits 1 with a message on stderr. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_time.h"

static int fd = -1, rank = -1, size = 0;
static char kvs[256];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "pmi1_bench rank %d: %s\n", rank, what);
    exit(1);
}

/* Sends one command line, reads one reply line into buf; checks it starts with `want`.
 * PMI-1 is strictly request and reply, so nothing follows the reply's newline: it is read in
 * as few reads as the kernel allows (one byte at a time would cost a 1 KB value a thousand
 * system calls, which would show in the next round's barrier of every other rank). */
static void call(const char *line, const char *want, char *buf, size_t len)
{
    size_t n = strlen(line), off = 0;
    while (off < n) {
        ssize_t k = write(fd, line + off, n - off);
        if (k <= 0)
            die("write to the launcher failed");
        off += (size_t) k;
    }
    off = 0;
    for (;;) {
        if (off + 1 >= len)
            die("reply too long");
        ssize_t k = read(fd, buf + off, len - off - 1);
        if (k <= 0)
            die("the launcher closed the connection");
        off += (size_t) k;
        if (buf[off - 1] == '\n')
            break;
    }
    buf[off - 1] = '\0';
    if (strncmp(buf, want, strlen(want)) != 0) {
        fprintf(stderr, "pmi1_bench rank %d: sent %s got %s\n", rank, line, buf);
        exit(1);
    }
}

static const char *field(const char *reply, const char *key)
{
    const char *p = strstr(reply, key);
    return p ? p + strlen(key) : NULL;
}

int main(int argc, char **argv)
{
    char buf[2048], line[2048];
    const char *e;
    if (argc != 3)
        die("usage: pmi1_bench FENCES BARRIERS");
    long fences = atol(argv[1]), barriers = atol(argv[2]);
    if ((e = getenv("PMI_FD")) == NULL)
        die("no PMI_FD: not started by a PMI-1 launcher");
    fd = atoi(e);
    rank = (e = getenv("PMI_RANK")) ? atoi(e) : -1;
    size = (e = getenv("PMI_SIZE")) ? atoi(e) : 0;
    if (rank < 0 || size <= 0)
        die("no PMI_RANK or PMI_SIZE");

    call("cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=response_to_init", buf, sizeof buf);
    if (strstr(buf, "rc=0") == NULL)
        die("init refused");
    call("cmd=get_maxes\n", "cmd=maxes", buf, sizeof buf);
    /* Room for a value in a put line (itself at most sizeof line) and in a get reply. */
    long vallen = (e = field(buf, "vallen_max=")) ? atol(e) : 256;
    if (vallen > 1024)
        vallen = 1024;
    if (vallen < 64)
        die("vallen_max below 64");
    call("cmd=get_my_kvsname\n", "cmd=my_kvsname", buf, sizeof buf);
    if ((e = field(buf, "kvsname=")) == NULL)
        die("no kvsname");
    snprintf(kvs, sizeof kvs, "%.*s", (int) strcspn(e, " "), e);
    call("cmd=barrier_in\n", "cmd=barrier_out", buf, sizeof buf);

    double fence_time = 0;
    for (long i = 0; i < fences; i++) {
        double t = now();
        snprintf(line, sizeof line, "cmd=put kvsname=%s key=f%ld-r%d value=v%ld-%d\n", kvs, i,
                 rank, i, rank);
        call(line, "cmd=put_result", buf, sizeof buf);
        call("cmd=barrier_in\n", "cmd=barrier_out", buf, sizeof buf);
        fence_time += now() - t;
        int peer = (rank + 1) % size;
        snprintf(line, sizeof line, "cmd=get kvsname=%s key=f%ld-r%d\n", kvs, i, peer);
        call(line, "cmd=get_result", buf, sizeof buf);
        char want[64];
        snprintf(want, sizeof want, "value=v%ld-%d", i, peer);
        if (strstr(buf, want) == NULL)
            die("read back a wrong value after a fence");
    }
    static const long sizes[] = {100, 1000, 10000};
    double sized_time[3] = {0, 0, 0}, sized_daemon[3], sized_self[3];
    /* What a get reply line of MPICH's 1024 bytes holds, with room to spare. */
    long chunk = vallen - 64;
    for (int s = 0; s < 3; s++) {
        long bytes = sizes[s];
        cpu_mark_t from = cpu_mark();
        for (long i = 0; i < fences; i++) {
            double t = now();
            for (long c = 0; c * chunk < bytes; c++) {
                long n = bytes - c * chunk < chunk ? bytes - c * chunk : chunk;
                int k = snprintf(line, sizeof line, "cmd=put kvsname=%s key=s%ld-%ld-r%d-c%ld value=",
                                 kvs, bytes, i, rank, c);
                if (k <= 0 || (size_t) (k + n + 2) > sizeof line)
                    die("a put line does not fit");
                for (long j = 0; j < n; j++)
                    line[k + j] = (char) ('a' + (j + rank + i) % 26);
                line[k + n] = '\n';
                line[k + n + 1] = '\0';
                call(line, "cmd=put_result rc=0", buf, sizeof buf);
            }
            call("cmd=barrier_in\n", "cmd=barrier_out", buf, sizeof buf);
            sized_time[s] += now() - t;
            int peer = (rank + size / 2) % size;
            snprintf(line, sizeof line, "cmd=get kvsname=%s key=s%ld-%ld-r%d-c0\n", kvs, bytes, i,
                     peer);
            call(line, "cmd=get_result", buf, sizeof buf);
            const char *v = field(buf, "value=");
            long n = bytes < chunk ? bytes : chunk;
            if (v == NULL || (long) strcspn(v, " \n") != n || v[0] != (char) ('a' + (peer + i) % 26))
                die("read back a wrong value after a sized fence");
        }
        cpu_since(from, fences, &sized_daemon[s], &sized_self[s]);
    }

    call("cmd=barrier_in\n", "cmd=barrier_out", buf, sizeof buf);
    cpu_mark_t from = cpu_mark();
    double t = now();
    for (long i = 0; i < barriers; i++)
        call("cmd=barrier_in\n", "cmd=barrier_out", buf, sizeof buf);
    double barrier_time = now() - t;
    double barrier_daemon, barrier_self;
    cpu_since(from, barriers, &barrier_daemon, &barrier_self);
    call("cmd=finalize\n", "cmd=finalize_ack", buf, sizeof buf);

    double per_fence = fences > 0 ? 1e6 / (double) fences : 0.0;
    char host[256] = "?", daemon[64];
    gethostname(host, sizeof host - 1);
    parent_name(daemon, sizeof daemon);
    int k = snprintf(line, sizeof line,
                     "node %s\ndaemon %s\nfence_collect_us %.3f\nfence_100_us %.3f\nfence_1000_us %.3f\n"
                     "fence_10000_us %.3f\nbarrier_us %.3f\n",
                     host, daemon, fence_time * per_fence, sized_time[0] * per_fence, sized_time[1] * per_fence,
                     sized_time[2] * per_fence,
                     barriers > 0 ? barrier_time * 1e6 / (double) barriers : 0.0);
    /* A negative CPU reading (no /proc) is printed as such: the xtask shows it as missing. */
    k += snprintf(line + k, sizeof line - (size_t) k,
                  "daemon_cpu_fence_100_us %.3f\ndaemon_cpu_fence_1000_us %.3f\n"
                  "daemon_cpu_fence_10000_us %.3f\ndaemon_cpu_barrier_us %.3f\n"
                  "client_cpu_fence_100_us %.3f\nclient_cpu_fence_1000_us %.3f\n"
                  "client_cpu_fence_10000_us %.3f\nclient_cpu_barrier_us %.3f\n",
                  sized_daemon[0], sized_daemon[1], sized_daemon[2], barrier_daemon, sized_self[0],
                  sized_self[1], sized_self[2], barrier_self);
    if (k <= 0 || (size_t) k >= sizeof line || write(STDOUT_FILENO, line, (size_t) k) != k)
        return 1;
    return 0;
}
