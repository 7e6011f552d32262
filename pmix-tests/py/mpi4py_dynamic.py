# mpi4py's dynamic processes under a launcher: pmix-tests/tests/python.rs runs it under pmixrun
# with mpi4py over the MPICH and Open MPI wheels.
#
#   python mpi4py_dynamic.py spawn            each rank's line after spawning 2 children
#   python mpi4py_dynamic.py server SERVICE   publishes a port as SERVICE, accepts one connect
#   python mpi4py_dynamic.py client SERVICE   looks SERVICE up (waiting for it), connects
#
# Every rank prints one line, written in one write, and exits 0; a failure raises.
import sys
import time

from mpi4py import MPI


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def merged_sum(inter, high):
    """The sum of every rank's rank + 1 over the merged intracommunicator, and its size."""
    merged = inter.Merge(high)
    total = merged.allreduce(merged.Get_rank() + 1)
    size = merged.Get_size()
    merged.Free()
    return size, total


def spawn():
    world = MPI.COMM_WORLD
    parent = MPI.Comm.Get_parent()
    if parent == MPI.COMM_NULL:
        inter = world.Spawn(sys.executable, args=[__file__, "spawn"], maxprocs=2, root=0)
        size, total = merged_sum(inter, False)
        inter.Disconnect()
        say("spawn parent rank %d of %d merged %d sum %d" % (world.Get_rank(), world.Get_size(), size, total))
    else:
        size, total = merged_sum(parent, True)
        parent.Disconnect()
        say("spawn child rank %d of %d merged %d sum %d" % (world.Get_rank(), world.Get_size(), size, total))


def server(service):
    world = MPI.COMM_WORLD
    port = MPI.Open_port() if world.Get_rank() == 0 else None
    if world.Get_rank() == 0:
        MPI.Publish_name(service, port)
    inter = world.Accept(port, root=0)
    size, total = merged_sum(inter, False)
    inter.Disconnect()
    if world.Get_rank() == 0:
        MPI.Unpublish_name(service, port)
        MPI.Close_port(port)
    say("server rank %d merged %d sum %d" % (world.Get_rank(), size, total))


def client(service):
    world = MPI.COMM_WORLD
    port = None
    if world.Get_rank() == 0:
        # The server may publish after this run starts: look again until it has (60 s at most).
        end = time.monotonic() + 60
        while port is None:
            try:
                port = MPI.Lookup_name(service)
            except MPI.Exception:
                if time.monotonic() > end:
                    raise
                time.sleep(0.05)
    inter = world.Connect(port, root=0)
    size, total = merged_sum(inter, True)
    inter.Disconnect()
    say("client rank %d merged %d sum %d" % (world.Get_rank(), size, total))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "spawn":
        spawn()
    elif mode == "server":
        server(sys.argv[2])
    elif mode == "client":
        client(sys.argv[2])
    else:
        raise SystemExit("unknown mode %r" % mode)
