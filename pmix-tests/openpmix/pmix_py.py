"""pmix_py.py - what the python3-pmix test programs of this directory share, the Python twin of
pmix_fail.h: failing as the tests expect ("FAIL rank=R: <what>" on stderr, exit status 2),
printing whole lines, and the binding's quirks."""
import os
import sys


def fail(rank, msg):
    """Prints "FAIL rank=R: <msg>" on stderr and exits 2."""
    print("FAIL rank=%d: %s" % (rank, msg), file=sys.stderr, flush=True)
    os._exit(2)


def say(line):
    """One line in one write(2), so processes sharing a pipe never mix within a line."""
    sys.stdout.flush()
    os.write(1, (line + "\n").encode())


def text(x):
    """The binding gives some strings as bytes (its attribute names among them)."""
    return x.decode() if isinstance(x, bytes) else x


def info(key, value, val_type):
    """A pmix_info_t as the binding takes it."""
    return {"key": key, "value": value, "val_type": val_type}
