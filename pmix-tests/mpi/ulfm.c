/* ulfm: Open MPI's fault tolerance (ULFM, the MPIX_ calls) under a launcher that keeps the
 * job going after a rank dies (pmixrun --enable-recovery; Open MPI with mpi_ft_enable). Once
 * every rank passed a first barrier, the last rank kills itself with SIGKILL. Each other
 * rank's next barrier must fail with MPIX_ERR_PROC_FAILED, or MPIX_ERR_REVOKED when a peer
 * that saw the failure first revoked the communicator (or its first one already: a barrier's
 * end says that every rank entered it, not that every rank left it, and a rank still inside
 * when the last one dies may see the failure there); it revokes MPI_COMM_WORLD, shrinks it
 * to the survivors, sums their ranks over the new communicator, checks the sum and prints
 * "rank R: N survivors, sum S". Needs at least 2 ranks. */
#include "common.h"

#include <mpi-ext.h>
#include <signal.h>

int main(int argc, char **argv)
{
    init(&argc, &argv);
    int size = 0;
    CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (size < 2)
        die("needs 2 ranks or more, has %d", size);
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank == size - 1) {
        if (rc != MPI_SUCCESS)
            die("the first barrier returned %d", rc);
        raise(SIGKILL);
        die("SIGKILL did not end this rank");
    }
    if (rc == MPI_SUCCESS)
        rc = MPI_Barrier(MPI_COMM_WORLD);
    int class = MPI_SUCCESS;
    MPI_Error_class(rc, &class);
    if (class != MPIX_ERR_PROC_FAILED && class != MPIX_ERR_REVOKED)
        die("the barrier with a dead rank returned %d (class %d)", rc, class);
    CHECK(MPIX_Comm_revoke(MPI_COMM_WORLD));
    MPI_Comm survivors;
    CHECK(MPIX_Comm_shrink(MPI_COMM_WORLD, &survivors));
    CHECK(MPI_Comm_set_errhandler(survivors, MPI_ERRORS_RETURN));
    int n = 0, sum = 0;
    CHECK(MPI_Comm_size(survivors, &n));
    CHECK(MPI_Allreduce(&world_rank, &sum, 1, MPI_INT, MPI_SUM, survivors));
    if (n != size - 1 || sum != (size - 1) * (size - 2) / 2)
        die("shrunk to %d ranks summing %d", n, sum);
    printf("rank %d: %d survivors, sum %d\n", world_rank, n, sum);
    fflush(stdout);
    CHECK(MPI_Comm_free(&survivors));
    CHECK(MPI_Finalize());
    return 0;
}
