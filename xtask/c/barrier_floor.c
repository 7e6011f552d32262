/*
 * barrier_floor.c - the floor under a barrier across nodes on this machine: the least any
 * launcher with a local agent per node can do, with no PMIx, no protocol, no event library.
 * `cargo xtask bench --multinode` runs it in the same layout as the launchers: a root on the
 * host, one relay per node (started over ssh), two ranks per relay (its children, on
 * socketpairs).  One barrier: every rank writes a byte to its relay; the relay, once it has
 * all of its ranks', writes a byte to the root over TCP (TCP_NODELAY); the root, once it has
 * every relay's, answers each relay, which answers its ranks.  That is the message pattern of
 * a fence through a flat tree (radix at least the node count, as PRRTE's 64 and pmixrun's
 * default), with one process wake-up per message and nothing else.
 *
 *   barrier_floor root RELAYS ITERS             listens on 0.0.0.0, a port of the
 *                                               kernel's choice: prints "listening PORT"
 *   barrier_floor relay HOST PORT RANKS ITERS  prints "barrier_us <mean>" per rank
 *
 * A warm-up of ITERS/10 barriers precedes the timed ones.  Any failure exits 1 with a
 * message; a peer gone is a failure (read returns 0), so nothing waits forever on one.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *role = "barrier_floor";

static void die(const char *what)
{
    fprintf(stderr, "barrier_floor %s: %s\n", role, what);
    exit(1);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

static void put1(int fd)
{
    char b = 'b';
    if (write(fd, &b, 1) != 1)
        die("write failed");
}

static void get1(int fd)
{
    char b;
    if (read(fd, &b, 1) != 1)
        die("a peer is gone");
}

static void nodelay(int fd)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        die("TCP_NODELAY");
}

static int root(int relays, long iters)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    int *fds = calloc((size_t) relays, sizeof *fds);
    role = "root";
    if (lfd < 0 || fds == NULL)
        die("socket");
    if (bind(lfd, (struct sockaddr *) &a, sizeof a) != 0 || listen(lfd, relays) != 0 ||
        getsockname(lfd, (struct sockaddr *) &a, &len) != 0)
        die("cannot listen");
    /* Ready: the harness starts the relays once it reads this line. */
    printf("listening %d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (int i = 0; i < relays; i++) {
        if ((fds[i] = accept(lfd, NULL, NULL)) < 0)
            die("accept");
        nodelay(fds[i]);
    }
    for (long k = 0; k < iters + iters / 10; k++) {
        for (int i = 0; i < relays; i++)
            get1(fds[i]);
        for (int i = 0; i < relays; i++)
            put1(fds[i]);
    }
    return 0;
}

/* One rank: `iters` barriers through its relay after the warm-up; prints the mean. */
static int rank(int fd, long iters)
{
    double t = 0;
    for (long k = 0; k < iters + iters / 10; k++) {
        if (k == iters / 10)
            t = now();
        put1(fd);
        get1(fd);
    }
    printf("barrier_us %.3f\n", (now() - t) * 1e6 / (double) (iters > 0 ? iters : 1));
    return 0;
}

static int relay(const char *host, const char *port, int ranks, long iters)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
    int up = -1, *fds = calloc((size_t) ranks, sizeof *fds), status = 0;
    role = "relay";
    if (fds == NULL)
        die("calloc");
    if (getaddrinfo(host, port, &hints, &res) != 0)
        die("cannot resolve the root's address");
    if ((up = socket(AF_INET, SOCK_STREAM, 0)) < 0 || connect(up, res->ai_addr, res->ai_addrlen) != 0)
        die("cannot connect to the root");
    freeaddrinfo(res);
    nodelay(up);
    fflush(stdout);
    for (int i = 0; i < ranks; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
            die("socketpair");
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            role = "rank";
            close(sv[0]);
            close(up);
            exit(rank(sv[1], iters));
        }
        close(sv[1]);
        fds[i] = sv[0];
    }
    for (long k = 0; k < iters + iters / 10; k++) {
        for (int i = 0; i < ranks; i++)
            get1(fds[i]);
        put1(up);
        get1(up);
        for (int i = 0; i < ranks; i++)
            put1(fds[i]);
    }
    for (int i = 0; i < ranks; i++) {
        int s;
        if (wait(&s) < 0 || !WIFEXITED(s) || WEXITSTATUS(s) != 0)
            status = 1;
    }
    return status;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "root") == 0)
        return root(atoi(argv[2]), atol(argv[3]));
    if (argc == 6 && strcmp(argv[1], "relay") == 0)
        return relay(argv[2], argv[3], atoi(argv[4]), atol(argv[5]));
    fprintf(stderr, "usage: barrier_floor root RELAYS ITERS\n"
                    "       barrier_floor relay HOST PORT RANKS ITERS\n");
    return 2;
}
