/* spawn: MPI_Comm_spawn and MPI_Comm_spawn_multiple of this same program.
 *
 *   spawn parent      every rank of the job takes part in spawning 2 children; each parent
 *                     rank exchanges data both ways with each child over the
 *                     intercommunicator, then a merged intracommunicator is checked.
 *   spawn multiple    the same with MPI_Comm_spawn_multiple: 1 child with argv
 *                     "childA <P> a b=c  d;e" and 2 children with argv "childB <P> x".
 *   spawn wdir <A> <B>
 *                     MPI_Comm_spawn_multiple of 1 child "wdirA <P> <A>" with info
 *                     wdir=<A> and 1 child "wdirB <P> <B>" with info wdir=<B>.
 *
 * Children (argv[1] child, childA, childB, wdirA or wdirB, argv[2] the number of parents)
 * check MPI_Comm_get_parent, their world, their MPI_APPNUM and their arguments; wdirA and
 * wdirB also that they run in the directory argv[3] (compared by device and inode). */
#include "common.h"

#include <sys/stat.h>

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

/* Whether the current directory is `dir`, the same directory by device and inode. */
static int in_dir(const char *dir)
{
    struct stat here, there;
    return stat(".", &here) == 0 && stat(dir, &there) == 0 && here.st_dev == there.st_dev &&
           here.st_ino == there.st_ino;
}

/* MPI_Comm_spawn_multiple of one wdirA child in `dir_a` and one wdirB child in `dir_b`. */
static int spawn_in_dirs(const char *exe, const char *p, const char *dir_a, const char *dir_b,
                         MPI_Comm *inter, int *errcodes)
{
    char *cmds[] = {(char *)exe, (char *)exe};
    char *args_a[] = {"wdirA", (char *)p, (char *)dir_a, NULL};
    char *args_b[] = {"wdirB", (char *)p, (char *)dir_b, NULL};
    char **args[] = {args_a, args_b};
    int counts[] = {1, 1};
    MPI_Info infos[2];
    for (int i = 0; i < 2; i++) {
        CHECK(MPI_Info_create(&infos[i]));
        CHECK(MPI_Info_set(infos[i], "wdir", i == 0 ? dir_a : dir_b));
    }
    CHECK(MPI_Comm_spawn_multiple(2, cmds, args, counts, infos, 0, MPI_COMM_WORLD, inter,
                                  errcodes));
    for (int i = 0; i < 2; i++)
        CHECK(MPI_Info_free(&infos[i]));
    return 2;
}

static void parent(int multiple, const char *dir_a, const char *dir_b)
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
    if (dir_a) {
        children = spawn_in_dirs(exe, p, dir_a, dir_b, &inter, errcodes);
    } else if (!multiple) {
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
    } else if (strcmp(role, "wdirA") == 0 || strcmp(role, "wdirB") == 0) {
        int a = role[4] == 'A';
        if (argc != 4 || size != 2 || app != !a || world_rank != !a)
            die("%s: %d arguments, rank %d of %d, appnum %d", role, argc, world_rank, size, app);
        if (!in_dir(argv[3]))
            die("%s: not running in %s", role, argv[3]);
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
        parent(0, NULL, NULL);
    else if (argc == 2 && strcmp(argv[1], "multiple") == 0)
        parent(1, NULL, NULL);
    else if (argc == 4 && strcmp(argv[1], "wdir") == 0)
        parent(1, argv[2], argv[3]);
    else if (argc >= 3)
        child(argc, argv);
    else
        die("usage: %s parent|multiple|wdir <dirA> <dirB>", argv[0]);
    fflush(stdout);
    CHECK(MPI_Finalize());
    return 0;
}
