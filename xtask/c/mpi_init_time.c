/* mpi_init_time: how long MPI_Init takes, for `cargo xtask bench --capi`.
 *
 * Every rank times its own MPI_Init (CLOCK_MONOTONIC around the call); rank 0 prints the
 * slowest and the mean over the ranks. Built with Open MPI 5's mpicc; the bench runs it on
 * Open MPI's own libpmix and on pmix-rs's, under the same launcher.
 *
 * Output (rank 0): "mpi_init <size> max_us <max> mean_us <mean>". A failed call exits 1. */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    double start = now_us();
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "mpi_init_time: MPI_Init failed\n");
        return 1;
    }
    double mine = now_us() - start, max = 0, sum = 0;
    int rank = -1, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (MPI_Reduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        fprintf(stderr, "mpi_init_time: rank %d: MPI_Reduce failed\n", rank);
        return 1;
    }
    if (rank == 0) {
        printf("mpi_init %d max_us %.0f mean_us %.0f\n", size, max, sum / size);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
