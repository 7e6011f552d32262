# How long MPI_Comm_spawn of one child takes, through mpi4py, from the parents' side:
# `cargo xtask bench --mpi4py-spawn` runs it under pmixrun and under PRRTE's prterun.
#
#   python mpi4py_spawn_time.py K     K spawns of one child, each by every rank together
#
# Rank 0 prints one line per spawn, "spawn <seconds>", the time from the spawn's start (after
# a barrier of the parents) to its return; the child meets its parents in a barrier and
# disconnects, and so do they.
import sys
import time

from mpi4py import MPI

CHILD = "from mpi4py import MPI; p = MPI.Comm.Get_parent(); p.Barrier(); p.Disconnect()"


def main():
    world = MPI.COMM_WORLD
    spawns = []
    for _ in range(int(sys.argv[1])):
        world.Barrier()
        start = time.perf_counter()
        inter = world.Spawn(sys.executable, ["-c", CHILD], maxprocs=1, root=0)
        spawns.append(time.perf_counter() - start)
        inter.Barrier()
        inter.Disconnect()
    if world.Get_rank() == 0:
        sys.stdout.write("".join(f"spawn {s:.6f}\n" for s in spawns))
        sys.stdout.flush()


main()
