/* spawn: MPI_Comm_spawn and MPI_Comm_spawn_multiple of this same program.
 *
 *   spawn parent      every rank of the job takes part in spawning 2 children; each parent
 *                     rank exchanges data both ways with each child over the
 *                     intercommunicator, then a merged intracommunicator is checked.
 *   spawn multiple    the same with MPI_Comm_spawn_multiple: 1 child with argv
 *                     "childA <P> a b=c  d;e" and 2 children with argv "childB <P> x".
 *
 * Children (argv[1] child, childA or childB, argv[2] the number of parents) check
 * MPI_Comm_get_parent, their world, their MPI_APPNUM and their arguments. */
#include "common.h"

#define ARG_A "a b=c  d;e"
#define ARG_B "x"

/* Both sides: exchange over the intercommunicator, then merge (parents low) and check the
 * merged ranks by an Allgather of "am I a parent". */
static void talk(MPI_Comm inter, int is_parent, int parents, int children)
{
    int remote = exchange(inter, is_parent ? 0 : 1);
    if (remote != (is_parent ? children : parents))
        die("remote group of %d ranks", remote);
    MPI_Comm merged;
    CHECK(MPI_Intercomm_merge(inter, is_parent ? 0 : 1, &merged));
    int size = 0;
    CHECK(MPI_Comm_size(merged, &size));
    if (size != parents + children)
        die("merged communicator of %d ranks, expected %d", size, parents + children);
    int *who = malloc(sizeof(int) * (size_t)size);
    if (!who)
        die("out of memory");
    CHECK(MPI_Allgather(&is_parent, 1, MPI_INT, who, 1, MPI_INT, merged));
    for (int r = 0; r < size; r++)
        if (who[r] != (r < parents))
            die("merged rank %d is%s a parent", r, who[r] ? "" : " not");
    free(who);
    CHECK(MPI_Comm_free(&merged));
    CHECK(MPI_Comm_disconnect(&inter));
}

static void parent(int multiple)
{
    MPI_Comm up;
    CHECK(MPI_Comm_get_parent(&up));
    if (up != MPI_COMM_NULL)
        die("a parent has a parent");
    int parents = 0;
    CHECK(MPI_Comm_size(MPI_COMM_WORLD, &parents));
    char exe[4096], p[16];
    self_exe(exe, sizeof exe);
    snprintf(p, sizeof p, "%d", parents);
    MPI_Comm inter;
    int errcodes[3] = {-1, -1, -1};
    int children = 0;
    if (!multiple) {
        char *args[] = {"child", p, NULL};
        children = 2;
        CHECK(MPI_Comm_spawn(exe, args, children, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                             errcodes));
    } else {
        char *cmds[] = {exe, exe};
        char *args_a[] = {"childA", p, ARG_A, NULL};
        char *args_b[] = {"childB", p, ARG_B, NULL};
        char **args[] = {args_a, args_b};
        int counts[] = {1, 2};
        MPI_Info infos[] = {MPI_INFO_NULL, MPI_INFO_NULL};
        children = 3;
        CHECK(MPI_Comm_spawn_multiple(2, cmds, args, counts, infos, 0, MPI_COMM_WORLD, &inter,
                                      errcodes));
    }
    for (int i = 0; i < children; i++)
        if (errcodes[i] != MPI_SUCCESS)
            die("spawn error code %d for child %d", errcodes[i], i);
    talk(inter, 1, parents, children);
    printf("parent rank %d of %d: talked with %d children\n", world_rank, parents, children);
}

static void child(int argc, char **argv)
{
    MPI_Comm up;
    CHECK(MPI_Comm_get_parent(&up));
    if (up == MPI_COMM_NULL)
        die("a child without a parent");
    const char *role = argv[1];
    int parents = atoi(argv[2]);
    int size = 0;
    CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int app = appnum();
    if (strcmp(role, "child") == 0) {
        if (argc != 3 || size != 2 || app != 0)
            die("child: %d arguments, world of %d, appnum %d", argc, size, app);
    } else if (strcmp(role, "childA") == 0) {
        if (argc != 4 || strcmp(argv[3], ARG_A) != 0)
            die("childA: %d arguments, third \"%s\"", argc, argc > 3 ? argv[3] : "");
        if (size != 3 || app != 0 || world_rank != 0)
            die("childA: rank %d of %d, appnum %d", world_rank, size, app);
    } else if (strcmp(role, "childB") == 0) {
        if (argc != 4 || strcmp(argv[3], ARG_B) != 0)
            die("childB: %d arguments, third \"%s\"", argc, argc > 3 ? argv[3] : "");
        if (size != 3 || app != 1 || world_rank == 0)
            die("childB: rank %d of %d, appnum %d", world_rank, size, app);
    } else {
        die("unknown role %s", role);
    }
    talk(up, 0, parents, size);
    printf("%s rank %d of %d appnum %d: talked with %d parents\n", role, world_rank, size, app,
           parents);
}

int main(int argc, char **argv)
{
    init(&argc, &argv);
    if (argc == 2 && strcmp(argv[1], "parent") == 0)
        parent(0);
    else if (argc == 2 && strcmp(argv[1], "multiple") == 0)
        parent(1);
    else if (argc >= 3)
        child(argc, argv);
    else
        die("usage: %s parent|multiple", argv[0]);
    fflush(stdout);
    CHECK(MPI_Finalize());
    return 0;
}
