/* Helpers shared by the MPI test programs of pmix-tests (tests/mpich.rs builds and runs
 * them under pmixrun). Every program checks what it receives and fails loudly: a message on
 * stderr, then a non-zero exit (or MPI_Abort once MPI is up), so a wrong result can never
 * look like a pass. */
#ifndef PMIXRS_MPI_COMMON_H
#define PMIXRS_MPI_COMMON_H

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The program's name and its rank in MPI_COMM_WORLD (-1 before MPI_Init), for messages. */
static const char *prog_name = "mpi-test";
static int world_rank = -1;

/* Prints "<prog> rank <r>: <message>" on stderr and aborts the job with status 99. */
static inline void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s rank %d: FAILED: ", prog_name, world_rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    int up = 0;
    MPI_Initialized(&up);
    if (up)
        MPI_Abort(MPI_COMM_WORLD, 99);
    exit(99);
}

/* An MPI call that must succeed (with MPI_ERRORS_RETURN set; otherwise MPI aborts itself). */
#define CHECK(call)                                                                    \
    do {                                                                               \
        int check_rc_ = (call);                                                        \
        if (check_rc_ != MPI_SUCCESS) {                                                \
            char check_msg_[MPI_MAX_ERROR_STRING];                                     \
            int check_len_ = 0;                                                        \
            MPI_Error_string(check_rc_, check_msg_, &check_len_);                      \
            die("%s:%d: %s returned %d: %s", __FILE__, __LINE__, #call, check_rc_,    \
                check_msg_);                                                           \
        }                                                                              \
    } while (0)

/* Error handler MPI_ERRORS_RETURN on the communicators errors without one are raised on
 * (MPI_COMM_SELF since MPI-4, MPI_COMM_WORLD before), so a failing call returns its code. */
static inline void errors_return(void)
{
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
}

static inline void init(int *argc, char ***argv)
{
    if (*argc > 0) {
        const char *slash = strrchr((*argv)[0], '/');
        prog_name = slash ? slash + 1 : (*argv)[0];
    }
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "%s: FAILED: MPI_Init\n", prog_name);
        exit(98);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    errors_return();
}

/* This rank's MPI_APPNUM attribute; fails if the launcher gave none. */
static inline int appnum(void)
{
    int *value = NULL;
    int found = 0;
    CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &value, &found));
    if (!found)
        die("MPI_APPNUM is not set");
    return *value;
}

/* How long polling loops wait for another run before they give up. */
#define POLL_SECONDS 30.0

/* The interval between two polls: only paces a loop that tests a condition. */
static inline void pause_a_little(void)
{
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* Looks `service` up until it is published (at most POLL_SECONDS); fills `port`. A lookup
 * that succeeds with an empty port is an error, not "not yet". */
static inline void lookup_until_found(const char *service, char port[MPI_MAX_PORT_NAME])
{
    double end = MPI_Wtime() + POLL_SECONDS;
    for (;;) {
        port[0] = '\0';
        int rc = MPI_Lookup_name(service, MPI_INFO_NULL, port);
        if (rc == MPI_SUCCESS) {
            if (port[0] == '\0')
                die("MPI_Lookup_name(%s) succeeded with an empty port", service);
            return;
        }
        if (MPI_Wtime() > end)
            die("%s was not published within %.0f s", service, POLL_SECONDS);
        pause_a_little();
    }
}

/* Looks `service` up until the lookup fails (it was unpublished), at most POLL_SECONDS. */
static inline void lookup_until_gone(const char *service)
{
    double end = MPI_Wtime() + POLL_SECONDS;
    for (;;) {
        char port[MPI_MAX_PORT_NAME] = "";
        int rc = MPI_Lookup_name(service, MPI_INFO_NULL, port);
        if (rc != MPI_SUCCESS)
            return;
        if (port[0] == '\0')
            die("MPI_Lookup_name(%s) succeeded with an empty port", service);
        if (MPI_Wtime() > end)
            die("%s was still published after %.0f s", service, POLL_SECONDS);
        pause_a_little();
    }
}

/* Absolute path of this executable, to spawn more of it. */
static inline void self_exe(char *buf, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n <= 0)
        die("readlink /proc/self/exe failed");
    buf[n] = '\0';
}

/* Exchanges one int each way with every rank on the other side of intercommunicator
 * `inter`, and checks what arrives. `side` is 0 on one side, 1 on the other: the value sent
 * from rank l of side s to rank r is 1000000 s + 1000 l + r. Returns the remote size. */
static inline int exchange(MPI_Comm inter, int side)
{
    int me = 0, remote = 0;
    CHECK(MPI_Comm_rank(inter, &me));
    CHECK(MPI_Comm_remote_size(inter, &remote));
    int *out = malloc(sizeof(int) * (size_t)remote);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)remote);
    if (!out || !reqs)
        die("out of memory");
    for (int r = 0; r < remote; r++) {
        out[r] = 1000000 * side + 1000 * me + r;
        CHECK(MPI_Isend(&out[r], 1, MPI_INT, r, 7, inter, &reqs[r]));
    }
    for (int r = 0; r < remote; r++) {
        int got = -1;
        CHECK(MPI_Recv(&got, 1, MPI_INT, r, 7, inter, MPI_STATUS_IGNORE));
        int want = 1000000 * (1 - side) + 1000 * r + me;
        if (got != want)
            die("received %d from remote rank %d, expected %d", got, r, want);
    }
    /* One MPI_Wait each: gcc 12 warns about MPI_STATUSES_IGNORE given to MPI_Waitall. */
    for (int r = 0; r < remote; r++)
        CHECK(MPI_Wait(&reqs[r], MPI_STATUS_IGNORE));
    free(out);
    free(reqs);
    return remote;
}

#endif
