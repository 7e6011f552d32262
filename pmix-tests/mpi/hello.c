/* hello: every rank checks an MPI_Allreduce of the ranks against n(n-1)/2 and a barrier,
 * then prints "hello rank <r> of <n> appnum <a> sum <s>". Optional argument: the world size
 * the launcher was asked for, checked too. */
#include "common.h"

int main(int argc, char **argv)
{
    init(&argc, &argv);
    int size = 0;
    CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (argc > 1 && atoi(argv[1]) != size)
        die("world size %d, expected %s", size, argv[1]);
    long rank = world_rank, sum = -1;
    CHECK(MPI_Allreduce(&rank, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    long want = (long)size * (size - 1) / 2;
    if (sum != want)
        die("sum of the ranks is %ld, expected %ld", sum, want);
    /* Every rank's maximum must be size-1 too: a reduction that only rank 0 got right
     * would pass the sum on rank 0 alone. */
    long max = -1;
    CHECK(MPI_Allreduce(&rank, &max, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD));
    if (max != size - 1)
        die("max of the ranks is %ld, expected %d", max, size - 1);
    CHECK(MPI_Barrier(MPI_COMM_WORLD));
    printf("hello rank %d of %d appnum %d sum %ld\n", world_rank, size, appnum(), sum);
    fflush(stdout);
    CHECK(MPI_Finalize());
    return 0;
}
