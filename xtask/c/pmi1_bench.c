/* pmi1_bench: barrier and collecting-fence latency over the PMI-1 wire protocol, for
 * `cargo xtask bench --multinode` under MPICH's Hydra (which speaks PMI-1, not PMIx) and
 * under `pmixrun --pmi pmi1`. The PMIx launchers' numbers come from bench_client.c.
 *
 *   pmi1_bench FENCES BARRIERS
 *
 * Talks to the launcher on the socket PMI_FD names (no MPI library). A barrier is
 * barrier_in/barrier_out; a collecting fence is a put of this rank's key then a barrier
 * (PMI-1's commit point), after which the next rank's key is read back and checked
 * (untimed). Prints, as bench_client does, "fence_collect_us <mean>" and "barrier_us <mean>"
 * in one write; any failure exits 1 with a message on stderr. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* Sends one command line, reads one reply line into buf; checks it starts with `want`. */
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
        ssize_t k = read(fd, buf + off, 1);
        if (k <= 0)
            die("the launcher closed the connection");
        if (buf[off] == '\n')
            break;
        off++;
    }
    buf[off] = '\0';
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
    call("cmd=barrier_in\n", "cmd=barrier_out", buf, sizeof buf);
    double t = now();
    for (long i = 0; i < barriers; i++)
        call("cmd=barrier_in\n", "cmd=barrier_out", buf, sizeof buf);
    double barrier_time = now() - t;
    call("cmd=finalize\n", "cmd=finalize_ack", buf, sizeof buf);

    int k = snprintf(line, sizeof line, "fence_collect_us %.3f\nbarrier_us %.3f\n",
                     fences > 0 ? fence_time * 1e6 / (double) fences : 0.0,
                     barriers > 0 ? barrier_time * 1e6 / (double) barriers : 0.0);
    if (k <= 0 || write(STDOUT_FILENO, line, (size_t) k) != k)
        return 1;
    return 0;
}
