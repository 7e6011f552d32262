#!/usr/bin/env python3
"""pmix_binding.py - one job's worth of the `pmix` Python module: the script
pmix-tests/tests/python_binding.rs runs under pmixrun, prterun and srun, with pmix-rs's binding
(pmix-python) and, as an oracle, with Debian's python3-pmix (same script, two bindings).

    python3 pmix_binding.py [gil] [errors] [constants] [no-names] [no-events]

Every rank prints, each line in one write(2):
  binding rank=R impl=pmix-rs|python3-pmix     which module answered (not compared)
  job rank=R size=N                            PMIX_JOB_SIZE at the wildcard rank
  get rank=R peer=P str=.. u32=.. i64=.. bool=.. double=.. bytes=..   after put/commit/fence
  lookup rank=R key=K value=V publisher=0      (ranks but 0) what rank 0 published
  event rank=R status=S source=0 info=V        (ranks but 0) rank 0's notify_event
  peers rank=R local=0,1,..                    resolve_peers of this node
  nodes rank=R count=C                         resolve_nodes of this job
  OK rank=R size=N
and with `gil`: "gil rank=R ok" once a Python thread of every other rank published while its
main thread waited in a fence (python3-pmix holds the GIL there: ours only); with `errors`:
"errors rank=R ok" once bad arguments raised TypeError/ValueError; with `constants`: every
PMIX_* constant as "const NAME=VALUE" (rank 0 only); with `no-names`, no publish, lookup or
unpublish (Slurm's srun --mpi=pmix has no name service: NOT_SUPPORTED); with `no-events`, no
event (slurmstepd takes any event a process notifies for a fatal error and cancels the
step). Failures: "FAIL rank=R: .." on stderr,
exit 2.
"""
import contextlib
import os
import sys
import threading

import pmix

# fail/say/text/info are those of the python3-pmix test programs (pmix-tests/openpmix).
sys.dont_write_bytecode = True  # no __pycache__ next to the sources
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "openpmix"))
import pmix_py  # noqa: E402 (after the lines above)
from pmix_py import info, say, text  # noqa: E402

RANK = -1
WAIT = 60  # seconds: a bound on waits for other ranks, never a synchronisation
EVENT_CODE = pmix.PMIX_EXTERNAL_ERR_BASE - 7


def fail(msg):
    pmix_py.fail(RANK, msg)


def must(what, rc):
    if isinstance(rc, tuple):
        rc = rc[0]
    if rc != pmix.PMIX_SUCCESS:
        fail("%s returned %d" % (what, rc))


# The values each rank puts (global scope), by rank.
def values_of(r):
    return [
        ("pyb.str", "value-of-rank-%d" % r, pmix.PMIX_STRING),
        ("pyb.u32", 4000000000 - r, pmix.PMIX_UINT32),
        ("pyb.i64", -(1 << 40) - r, pmix.PMIX_INT64),
        ("pyb.bool", r % 2 == 0, pmix.PMIX_BOOL),
        ("pyb.double", 1000.5 + 0.25 * r, pmix.PMIX_DOUBLE),
        ("pyb.bytes", {"bytes": bytes(range(r, r + 10 + r)), "size": 10 + r},
         pmix.PMIX_BYTE_OBJECT),
    ]


def main():
    global RANK
    args = sys.argv[1:]
    client = pmix.PMIxClient()
    with contextlib.redirect_stdout(sys.stderr):
        rc, me = client.init([])
    must("init", rc)
    RANK = me["rank"]
    nspace = text(me["nspace"])
    impl = getattr(pmix, "__implementation__", "python3-pmix")
    say("binding rank=%d impl=%s" % (RANK, impl))

    if "constants" in args and RANK == 0:
        for name in sorted(n for n in dir(pmix) if n.startswith("PMIX_")):
            v = getattr(pmix, name)
            if isinstance(v, (int, str, bytes)):
                say("const %s=%s" % (name, text(v)))

    def proc(r):
        return {"nspace": nspace, "rank": r}

    rc, size = client.get(proc(pmix.PMIX_RANK_WILDCARD), pmix.PMIX_JOB_SIZE, [])
    must("get job size", rc)
    size = size["value"]
    say("job rank=%d size=%d" % (RANK, size))

    # Events: every rank registers before the fence, so rank 0's notification after it finds
    # every handler in place.
    seen = []
    cond = threading.Condition()

    def handler(evhdlr, status, source, infos, results):
        with cond:
            seen.append((status, source, infos))
            cond.notify_all()
        return pmix.PMIX_EVENT_ACTION_COMPLETE, []

    reg = client.register_event_handler([EVENT_CODE], [], handler)
    must("register_event_handler", reg)
    handler_id = reg[1] if isinstance(reg, tuple) else None

    # put / commit / fence / get of every peer
    for k, v, t in values_of(RANK):
        must("put %s" % k, client.put(pmix.PMIX_GLOBAL, k, {"value": v, "val_type": t}))
    must("commit", client.commit())
    must("fence", client.fence([proc(pmix.PMIX_RANK_WILDCARD)],
                               [info(pmix.PMIX_COLLECT_DATA, True, pmix.PMIX_BOOL)]))
    for p in range(size):
        got = {}
        for k, want, t in values_of(p):
            rc, val = client.get(proc(p), k, [])
            must("get %s of %d" % (k, p), rc)
            if val["val_type"] != t:
                fail("%s of %d has type %d, not %d" % (k, p, val["val_type"], t))
            v = val["value"]
            if t == pmix.PMIX_BYTE_OBJECT:
                v = bytes(v["bytes"])[:v["size"]]
                want = want["bytes"]
            if v != want:
                fail("%s of %d is %r, expected %r" % (k, p, v, want))
            got[k] = v
        say("get rank=%d peer=%d str=%s u32=%d i64=%d bool=%d double=%s bytes=%s"
            % (RANK, p, got["pyb.str"], got["pyb.u32"], got["pyb.i64"], got["pyb.bool"],
               repr(got["pyb.double"]), got["pyb.bytes"].hex()))

    # publish / lookup / unpublish
    names = "no-names" not in args
    if not names:
        pass
    elif RANK == 0:
        must("publish", client.publish([info("pyb.pub.str", "published-by-0", pmix.PMIX_STRING),
                                        info("pyb.pub.u32", 424242, pmix.PMIX_UINT32)]))
    else:
        rc, found = client.lookup([{"key": "pyb.pub.str"}, {"key": "pyb.pub.u32"}],
                                  [info(pmix.PMIX_WAIT, 0, pmix.PMIX_INT)])
        must("lookup", rc)
        # python3-pmix's list also holds some of the dicts given (no 'proc'): left out.
        by_key = {text(d["key"]): d for d in found if d.get("proc") is not None}
        if sorted(by_key) != ["pyb.pub.str", "pyb.pub.u32"]:
            fail("lookup found %r" % found)
        for d in (by_key[k] for k in sorted(by_key)):
            if d["proc"] != proc(0):
                fail("lookup of %s: publisher %r" % (text(d["key"]), d["proc"]))
            say("lookup rank=%d key=%s value=%s publisher=%d"
                % (RANK, text(d["key"]), text(d["value"]), d["proc"]["rank"]))

    # Events: rank 0 notifies the job once every rank has registered (the fence above).
    must("fence", client.fence([], []))
    if "no-events" in args:
        pass
    elif RANK == 0:
        must("notify_event", client.notify_event(
            EVENT_CODE, proc(0), pmix.PMIX_RANGE_NAMESPACE,
            [info("pyb.event.msg", "hello-from-0", pmix.PMIX_STRING)]))
    else:
        with cond:
            if not cond.wait_for(lambda: seen, WAIT):
                fail("no event within %d s" % WAIT)
            status, source, infos = seen[0]
        msg = [text(i["value"]) for i in infos if text(i["key"]) == "pyb.event.msg"]
        say("event rank=%d status=%d source=%d info=%s"
            % (RANK, status, source["rank"], ",".join(msg)))
    if handler_id is not None:
        must("deregister_event_handler", client.deregister_event_handler(handler_id))

    rc, peers = client.resolve_peers(None, nspace)
    must("resolve_peers", rc)
    say("peers rank=%d local=%s" % (RANK, ",".join(str(p["rank"]) for p in peers)))
    rc, nodes = client.resolve_nodes(nspace)
    must("resolve_nodes", rc)
    say("nodes rank=%d count=%d" % (RANK, len(text(nodes).split(","))))

    if "gil" in args:
        check_gil(client, proc, size)
    if "errors" in args:
        check_errors(client, proc)

    must("fence", client.fence([], []))
    if RANK == 0 and names:
        must("unpublish", client.unpublish(["pyb.pub.str", "pyb.pub.u32"], []))
    must("finalize", client.finalize([]))
    say("OK rank=%d size=%d" % (RANK, size))


def check_gil(client, proc, size):
    """Ranks but 0 wait in a fence while a Python thread of theirs publishes; rank 0 joins the
    fence only once it has looked all of those up. A fence holding the GIL would starve that
    thread, and the job would hang (the test's deadline)."""
    if RANK == 0:
        keys = [{"key": "pyb.gil.%d" % r} for r in range(1, size)]
        rc, found = client.lookup(keys, [info(pmix.PMIX_WAIT, 0, pmix.PMIX_INT)])
        must("lookup of the gil keys", rc)
        if len(found) != size - 1:
            fail("gil: found %r" % found)
    else:
        entered = threading.Event()
        outcome = []

        def publisher():
            entered.wait(WAIT)
            outcome.append(client.publish(
                [info("pyb.gil.%d" % RANK, RANK, pmix.PMIX_UINT32)]))

        t = threading.Thread(target=publisher)
        t.start()
        entered.set()
        must("fence while a thread publishes", client.fence([], []))
        t.join(WAIT)
        if outcome != [pmix.PMIX_SUCCESS]:
            fail("gil: the publishing thread gave %r" % outcome)
    if RANK == 0:
        must("fence (gil)", client.fence([], []))
    say("gil rank=%d ok" % RANK)


def check_errors(client, proc):
    """Bad arguments raise TypeError or ValueError; nothing crashes."""
    bad_calls = [
        lambda: client.put(pmix.PMIX_GLOBAL, "k", "not a dict"),
        lambda: client.put(pmix.PMIX_GLOBAL, "k", {"value": 1}),
        lambda: client.put(pmix.PMIX_GLOBAL, "k", {"value": -1, "val_type": pmix.PMIX_UINT32}),
        lambda: client.put(pmix.PMIX_GLOBAL, "k", {"value": 1 << 40, "val_type": pmix.PMIX_INT}),
        lambda: client.put(pmix.PMIX_GLOBAL, "k" * 600, {"value": 1, "val_type": pmix.PMIX_INT}),
        lambda: client.put(pmix.PMIX_GLOBAL, 17, {"value": 1, "val_type": pmix.PMIX_INT}),
        lambda: client.put(pmix.PMIX_GLOBAL, "k", {"value": "x", "val_type": 9999}),
        lambda: client.get({"rank": 0}, "k", []),
        lambda: client.get(proc(0), "k", [{"key": "x"}]),
        lambda: client.fence("not a list", []),
        lambda: client.fence([{"nspace": "n", "rank": "zero"}], []),
        lambda: client.unpublish("one string", []),
        lambda: client.register_event_handler([EVENT_CODE], [], "not callable"),
        lambda: client.spawn([], [{"argv": ["x"]}]),
    ]
    for n, call in enumerate(bad_calls):
        try:
            call()
        except (TypeError, ValueError):
            continue
        fail("bad call %d raised nothing" % n)
    rc, val = client.get(proc(RANK), "pyb.never.put", [info(pmix.PMIX_IMMEDIATE, True,
                                                              pmix.PMIX_BOOL)])
    if rc != pmix.PMIX_ERR_NOT_FOUND or val is not None:
        fail("get of a key never put: %r" % ((rc, val),))
    say("errors rank=%d ok" % RANK)


if __name__ == "__main__":
    main()
