/*
 * floor: the platform's floor for a request/reply over a local socket, with no PMIx at all.
 *
 * usage: floor N ITERS
 *
 * One server (this process, one thread, epoll) and N client processes, each connected by a
 * Unix stream socketpair. Every client sends a 64-byte request and blocks until the server
 * echoes it, ITERS times, all clients at once; the server answers whatever is readable, in
 * epoll batches. Each client prints "CLIENT <i> floor_op_us <mean µs per round trip>". Run it
 * under `taskset -c 0` for the pinned figure. This is the least any socket-based PMIx server
 * can spend on one publish, lookup or unpublish on this machine: two sends, two receives, the
 * context switches between the processes, and nothing else.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG 64

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* Reads exactly len bytes; 0 at end of stream. */
static int read_full(int fd, char *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n == 0) {
            return 0;
        }
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            die("read");
        }
        got += (size_t) n;
    }
    return 1;
}

static void write_full(int fd, const char *buf, size_t len)
{
    size_t put = 0;
    while (put < len) {
        ssize_t n = write(fd, buf + put, len - put);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            die("write");
        }
        put += (size_t) n;
    }
}

static void client(int i, int fd, long iters)
{
    char buf[MSG];
    memset(buf, 'x', sizeof buf);
    /* Wait for the start signal, so that every client starts at once. */
    if (!read_full(fd, buf, 1)) {
        exit(1);
    }
    double t = now();
    for (long k = 0; k < iters; k++) {
        write_full(fd, buf, MSG);
        if (!read_full(fd, buf, MSG)) {
            fprintf(stderr, "client %d: server gone\n", i);
            exit(1);
        }
    }
    printf("CLIENT %d floor_op_us %.3f\n", i, (now() - t) / (double) iters * 1e6);
    fflush(stdout);
    exit(0);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: floor N ITERS\n");
        return 2;
    }
    int n = atoi(argv[1]);
    long iters = atol(argv[2]);
    if (n < 1 || n > 4096 || iters < 1) {
        fprintf(stderr, "floor: N must be 1..4096 and ITERS at least 1\n");
        return 2;
    }
    /* A client gone early makes the echo fail with EPIPE (and a message), not kill us. */
    signal(SIGPIPE, SIG_IGN);
    /* One socket per client on top of stdio and epoll: room for N beyond the soft limit. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int *fds = calloc((size_t) n, sizeof *fds);
    pid_t *pids = calloc((size_t) n, sizeof *pids);
    if (fds == NULL || pids == NULL) {
        die("calloc");
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
        die("epoll_create1");
    }
    for (int i = 0; i < n; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
            die("socketpair");
        }
        pids[i] = fork();
        if (pids[i] < 0) {
            die("fork");
        }
        if (pids[i] == 0) {
            /* Only its own end: were it to keep the server's ends of the clients forked
             * before it, those would not see the end of the stream if the server died. */
            close(sv[0]);
            for (int j = 0; j < i; j++) {
                close(fds[j]);
            }
            close(ep);
            client(i, sv[1], iters);
        }
        close(sv[1]);
        fds[i] = sv[0];
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t) i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) < 0) {
            die("epoll_ctl");
        }
    }
    for (int i = 0; i < n; i++) {
        write_full(fds[i], "g", 1);
    }
    int open = n;
    struct epoll_event evs[256];
    char buf[MSG];
    while (open > 0) {
        int k = epoll_wait(ep, evs, 256, 60000);
        if (k < 0) {
            if (errno == EINTR) {
                continue;
            }
            die("epoll_wait");
        }
        if (k == 0) {
            fprintf(stderr, "floor: no client spoke for 60 s\n");
            return 1;
        }
        for (int e = 0; e < k; e++) {
            int fd = fds[evs[e].data.u32];
            if (read_full(fd, buf, MSG)) {
                write_full(fd, buf, MSG);
            } else {
                epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                close(fd);
                open--;
            }
        }
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        int st;
        if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failed = 1;
        }
    }
    return failed;
}
