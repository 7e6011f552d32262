/* mpi_hello: the smallest useful MPI program, for `cargo xtask bench`'s launch rows.
 *
 * MPI_Init, the world's rank and size, one MPI_Allreduce of the ranks checked against
 * n(n-1)/2 on every rank, one line on stdout, MPI_Finalize. The bench times the launcher
 * from start to exit around it, so it does nothing else. Compiled with an MPICH's mpicc;
 * nothing in it is specific to a launcher.
 *
 * Output: "hello <rank> <size> <sum>". A wrong sum or a failed call exits 1 with a message
 * on stderr (MPI's default error handler aborts the job before that on most failures). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "mpi_hello: MPI_Init failed\n");
        return 1;
    }
    int rank = -1, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long mine = rank, sum = -1;
    if (MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) {
        fprintf(stderr, "mpi_hello: rank %d: MPI_Allreduce failed\n", rank);
        return 1;
    }
    long want = (long)size * (size - 1) / 2;
    if (sum != want) {
        fprintf(stderr, "mpi_hello: rank %d of %d: sum of the ranks %ld, expected %ld\n",
                rank, size, sum, want);
        return 1;
    }
    printf("hello %d %d %ld\n", rank, size, sum);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
