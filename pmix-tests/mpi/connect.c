/* connect: MPI_Open_port + MPI_Publish_name + MPI_Comm_accept in one job, MPI_Lookup_name +
 * MPI_Comm_connect in another, started separately and sharing a name server. Every rank of
 * each job exchanges data both ways with every rank of the other, then both disconnect.
 *
 *   connect server <svc>    rank 0 opens a port and publishes it as <svc>; all accept;
 *                           after the exchange rank 0 unpublishes <svc> and closes the port.
 *   connect client <svc>    rank 0 polls until <svc> is published; all connect to it.
 */
#include "common.h"

int main(int argc, char **argv)
{
    init(&argc, &argv);
    if (argc != 3)
        die("usage: %s server|client <service>", argv[0]);
    const char *svc = argv[2];
    int server = strcmp(argv[1], "server") == 0;
    if (!server && strcmp(argv[1], "client") != 0)
        die("unknown mode %s", argv[1]);
    char port[MPI_MAX_PORT_NAME] = "";
    if (world_rank == 0) {
        if (server) {
            CHECK(MPI_Open_port(MPI_INFO_NULL, port));
            CHECK(MPI_Publish_name(svc, MPI_INFO_NULL, port));
            printf("server: published %s\n", svc);
            fflush(stdout);
        } else {
            lookup_until_found(svc, port);
        }
    }
    MPI_Comm inter;
    if (server)
        CHECK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter));
    else
        CHECK(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter));
    int remote = exchange(inter, server ? 0 : 1);
    CHECK(MPI_Comm_disconnect(&inter));
    if (server && world_rank == 0) {
        CHECK(MPI_Unpublish_name(svc, MPI_INFO_NULL, port));
        CHECK(MPI_Close_port(port));
    }
    int size = 0;
    CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    printf("%s rank %d of %d: exchanged with %d remote ranks\n", argv[1], world_rank, size,
           remote);
    fflush(stdout);
    CHECK(MPI_Finalize());
    return 0;
}
