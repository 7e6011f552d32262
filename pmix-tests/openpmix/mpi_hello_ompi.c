/*
 * mpi_hello_ompi.c - an Open MPI program for pmix-tests: under a launcher it shows that Open
 * MPI 4.1 (Debian's, on the system libpmix) found its PMIx server, learnt the job and wired
 * up its ranks.
 *
 *   mpi_hello_ompi [EXPECTED_SIZE]
 *
 * MPI_Init; MPI_Comm_rank / MPI_Comm_size (the size checked against EXPECTED_SIZE if given:
 * under a launcher Open MPI does not recognise, every rank runs as a singleton of size 1);
 * MPI_Allreduce of the ranks, checked against n(n-1)/2, and of their maximum, checked against
 * n-1 (so every rank, not only one, got the reduction right); a ring exchange with the next
 * and previous ranks; MPI_Barrier; MPI_Finalize. Then it prints
 *
 *   OK rank=R size=N sum=S
 *
 * Any failure prints "FAIL rank=R: <what>" on stderr and exits 2 (MPI_Abort once MPI is up).
 *
 * Build with Open MPI's wrapper by its full name, /usr/bin/mpicc.openmpi (plain `mpicc` is a
 * Debian alternative that may be MPICH's):
 *   mpicc.openmpi -O1 -Wall -Wextra -o mpi_hello_ompi mpi_hello_ompi.c
 */
#include <mpi.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int rank = -1;

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL rank=%d: ", rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down)
        MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

#define CHECK(call)                                                                   \
    do {                                                                              \
        int check_rc_ = (call);                                                       \
        if (check_rc_ != MPI_SUCCESS) {                                               \
            char check_msg_[MPI_MAX_ERROR_STRING];                                    \
            int check_len_ = 0;                                                       \
            MPI_Error_string(check_rc_, check_msg_, &check_len_);                     \
            fail("%s returned %d: %s", #call, check_rc_, check_msg_);                 \
        }                                                                             \
    } while (0)

int main(int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
        fail("MPI_Init failed");
    /* Errors come back as codes, checked here, instead of aborting inside MPI. */
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int size = 0;
    CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (argc > 1 && atoi(argv[1]) != size)
        fail("world size %d, expected %s (a singleton: the launcher was not recognised?)",
             size, argv[1]);

    long mine = rank, sum = -1, max = -1;
    CHECK(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    long want = (long)size * (size - 1) / 2;
    if (sum != want)
        fail("sum of the ranks is %ld, expected %ld", sum, want);
    CHECK(MPI_Allreduce(&mine, &max, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD));
    if (max != size - 1)
        fail("max of the ranks is %ld, expected %d", max, size - 1);

    /* Point to point: each rank sends its rank to the next and receives the previous's. */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, got = -1;
    CHECK(MPI_Sendrecv(&rank, 1, MPI_INT, next, 17, &got, 1, MPI_INT, prev, 17, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE));
    if (got != prev)
        fail("received %d from rank %d in the ring", got, prev);

    CHECK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(MPI_Finalize());
    printf("OK rank=%d size=%d sum=%ld\n", rank, size, sum);
    fflush(stdout);
    return 0;
}
