#!/usr/bin/python3
"""pmix_client.py - the scenarios of pmix_client.c on python3-pmix (Debian's binding of the real
OpenPMIx client library), used by pmix-tests as a known-good client.

    /usr/bin/python3 pmix_client.py [SCENARIO ...]     no scenario: job modex fence publish

Run it with Debian's /usr/bin/python3: the `pmix` module is installed for that interpreter
only (another python3 on PATH, e.g. pyenv's, does not have it).

Scenarios, output lines and exit statuses are those of pmix_client.c (see there): "job ...",
"modex ...", "fence ...", "publish ...", "aborting rank=1 code=C", and "OK rank=R size=N" at
the end; "FAIL rank=R: <what>" on stderr and exit 2 on any failure. The keys and values put
are the same as the C program's, so the two can even run as ranks of one job.

The binding prints "CLIENT STARTING THREAD" / "CLIENT THREAD STARTED" from init; those go to
stderr here, so stdout holds only the lines above.
"""
import contextlib
import os
import sys

import pmix

ME = {"nspace": "", "rank": -1}
JOB_SIZE = 0
CLIENT = None


def fail(msg):
    print("FAIL rank=%d: %s" % (ME["rank"], msg), file=sys.stderr, flush=True)
    os._exit(2)  # no finalize, no atexit: as a crashing client would


def say(line):
    """One line on stdout in one write(2): ranks sharing a pipe never mix within a line
    (print() may write the text and its newline separately)."""
    sys.stdout.flush()
    os.write(1, (line + "\n").encode())


def err(rc):
    return "%s (%d)" % (CLIENT.error_string(rc), rc)


def must(what, rc):
    if rc != pmix.PMIX_SUCCESS:
        fail("%s returned %s" % (what, err(rc)))


def proc_of(rank):
    return {"nspace": ME["nspace"], "rank": rank}


def wildcard():
    return proc_of(pmix.PMIX_RANK_WILDCARD)


def info(key, value, val_type):
    return {"key": key, "value": value, "val_type": val_type}


def get_typed(proc, key, val_type, infos=None):
    """The value of `key` of `proc`, which must exist with type `val_type`."""
    rc, val = CLIENT.get(proc, key, infos or [])
    if rc != pmix.PMIX_SUCCESS:
        fail("get %s of %s:%d: %s" % (key, proc["nspace"], proc["rank"], err(rc)))
    if val is None or val.get("val_type") != val_type:
        fail("get %s of %s:%d: %r, expected type %d" % (key, proc["nspace"], proc["rank"], val,
                                                       val_type))
    return val["value"]


def get_fails(proc, key, infos=None):
    """True if getting `key` of `proc` fails (as it must for a key that is not there)."""
    try:
        rc, _ = CLIENT.get(proc, key, infos or [])
    except UnboundLocalError:
        # Some builds of the binding fail this way when the get fails.
        return True
    return rc != pmix.PMIX_SUCCESS


def nodeid_of(proc, host, my_host):
    """The node id of `proc`, whose hostname is `host`; `my_host` is this process's.

    libpmix 4.2 answers a get of a node-level key (PMIX_NODEID among them) of a rank on another
    node from that node's info array, and its hash store files an array's node id apart from
    the keys that lookup searches: the plain get is NOT_FOUND, answered without asking the
    server, whatever the server sent (the real OpenPMIx server too). For such a rank only, a
    NOT_FOUND is retried with PMIX_JOB_INFO, which makes libpmix 4.2 read the rank's own data,
    where the server also puts its node id. A rank on this node must answer the plain get."""
    rc, val = CLIENT.get(proc, pmix.PMIX_NODEID, [])
    if rc == pmix.PMIX_ERR_NOT_FOUND and host != my_host:
        rc, val = CLIENT.get(proc, pmix.PMIX_NODEID, [info(pmix.PMIX_JOB_INFO, True,
                                                             pmix.PMIX_BOOL)])
    if rc != pmix.PMIX_SUCCESS:
        fail("get %s of %s:%d (on %s): %s" % (pmix.PMIX_NODEID, proc["nspace"], proc["rank"],
                                              host, err(rc)))
    if val is None or val.get("val_type") != pmix.PMIX_UINT32:
        fail("get %s of %s:%d: %r, expected a uint32" % (pmix.PMIX_NODEID, proc["nspace"],
                                                         proc["rank"], val))
    return val["value"]


def on_my_node(r, my_host, my_node):
    """Whether rank `r` runs on this node (by hostname), checked against its node id."""
    h = get_typed(proc_of(r), pmix.PMIX_HOSTNAME, pmix.PMIX_STRING)
    nid = nodeid_of(proc_of(r), h, my_host)
    if (h == my_host) != (nid == my_node):
        fail("rank %d on %s has node id %d, this rank on %s node id %d"
             % (r, h, nid, my_host, my_node))
    return h == my_host


def key(name):
    return name.decode() if isinstance(name, bytes) else name


# ---- job ----------------------------------------------------------------------------------

def scenario_job():
    wild = wildcard()
    size = get_typed(wild, pmix.PMIX_JOB_SIZE, pmix.PMIX_UINT32)
    local_size = get_typed(wild, pmix.PMIX_LOCAL_SIZE, pmix.PMIX_UINT32)
    univ_size = get_typed(wild, pmix.PMIX_UNIV_SIZE, pmix.PMIX_UINT32)
    num_nodes = get_typed(wild, pmix.PMIX_NUM_NODES, pmix.PMIX_UINT32)
    nodeid = get_typed(ME, pmix.PMIX_NODEID, pmix.PMIX_UINT32)
    hostname = get_typed(ME, pmix.PMIX_HOSTNAME, pmix.PMIX_STRING)
    local_rank = get_typed(ME, pmix.PMIX_LOCAL_RANK, pmix.PMIX_UINT16)
    node_rank = get_typed(ME, pmix.PMIX_NODE_RANK, pmix.PMIX_UINT16)
    appnum = get_typed(ME, pmix.PMIX_APPNUM, pmix.PMIX_UINT32)

    if size != JOB_SIZE:
        fail("job size %d at the wildcard rank, %d at init" % (size, JOB_SIZE))
    if ME["rank"] >= size:
        fail("rank %d is not below the job size %d" % (ME["rank"], size))
    if not 0 < local_size <= size:
        fail("local size %d with job size %d" % (local_size, size))
    if local_rank >= local_size:
        fail("local rank %d is not below the local size %d" % (local_rank, local_size))
    # Not compared with the job size: mpirun --oversubscribe gives the slots, fewer.
    if univ_size == 0:
        fail("universe size 0")
    if num_nodes == 0:
        fail("number of nodes is 0")
    peers = [int(p) for p in get_typed(wild, pmix.PMIX_LOCAL_PEERS, pmix.PMIX_STRING).split(",")]
    if len(peers) != local_size or ME["rank"] not in peers:
        fail("local peers %r with local size %d" % (peers, local_size))
    for r in range(size):
        p = proc_of(r)
        h = get_typed(p, pmix.PMIX_HOSTNAME, pmix.PMIX_STRING)
        nid = nodeid_of(p, h, hostname)
        lr = get_typed(p, pmix.PMIX_LOCAL_RANK, pmix.PMIX_UINT16)
        get_typed(p, pmix.PMIX_APPNUM, pmix.PMIX_UINT32)
        if r == ME["rank"] and (h, nid, lr) != (hostname, nodeid, local_rank):
            fail("my own data read as a peer's differs: %r" % ((h, nid, lr),))
        if (h == hostname) != (nid == nodeid):
            fail("rank %d on %s has node id %d, this rank on %s node id %d"
                 % (r, h, nid, hostname, nodeid))
    say("job rank=%d size=%d local_size=%d univ_size=%d num_nodes=%d nodeid=%d hostname=%s "
        "local_rank=%d node_rank=%d appnum=%d nspace=%s"
        % (ME["rank"], size, local_size, univ_size, num_nodes, nodeid, hostname, local_rank,
           node_rank, appnum, ME["nspace"]))


# ---- modex: the keys and values of pmix_client.c ------------------------------------------

K_LOCAL_STR = "oracle.local.str"
K_REMOTE_U32 = "oracle.remote.u32"
K_GLOBAL_I64 = "oracle.global.i64"
K_GLOBAL_BOOL = "oracle.global.bool"
K_GLOBAL_BYTES = "oracle.global.bytes"
K_GLOBAL_DOUBLE = "oracle.global.double"
K_GLOBAL_STR = "oracle.global.str"


def local_str(r):
    return "local-value-of-rank-%d" % r


def global_str(r):
    return ("global value of rank %d: the quick brown fox jumps over the lazy dog, "
            "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ "
            "!#$%%&()*+-./:;<=>?@" % r)


def remote_u32(r):
    return 4000000000 - r


def global_i64(r):
    return -(1 << 40) - r


def global_bool(r):
    return r % 2 == 0


def global_double(r):
    return 1000.5 + 0.125 * r


def global_bytes(r):
    return bytes((i * 7 + r * 13) & 0xFF for i in range(200 + r))


def put(scope, k, value, val_type):
    must("put %s" % k, CLIENT.put(scope, k, {"value": value, "val_type": val_type}))


def put_all():
    r = ME["rank"]
    put(pmix.PMIX_LOCAL, K_LOCAL_STR, local_str(r), pmix.PMIX_STRING)
    put(pmix.PMIX_REMOTE, K_REMOTE_U32, remote_u32(r), pmix.PMIX_UINT32)
    put(pmix.PMIX_GLOBAL, K_GLOBAL_I64, global_i64(r), pmix.PMIX_INT64)
    put(pmix.PMIX_GLOBAL, K_GLOBAL_BOOL, global_bool(r), pmix.PMIX_BOOL)
    put(pmix.PMIX_GLOBAL, K_GLOBAL_DOUBLE, global_double(r), pmix.PMIX_DOUBLE)
    put(pmix.PMIX_GLOBAL, K_GLOBAL_STR, global_str(r), pmix.PMIX_STRING)
    b = global_bytes(r)
    put(pmix.PMIX_GLOBAL, K_GLOBAL_BYTES, {"bytes": b, "size": len(b)}, pmix.PMIX_BYTE_OBJECT)


def check(r, k, got, want):
    if got != want:
        fail("%s of rank %d is %r, expected %r" % (k, r, got, want))


def check_peer(r, same_node):
    p = proc_of(r)
    me = r == ME["rank"]
    if me or same_node:
        check(r, K_LOCAL_STR, get_typed(p, K_LOCAL_STR, pmix.PMIX_STRING), local_str(r))
    if me or not same_node:
        check(r, K_REMOTE_U32, get_typed(p, K_REMOTE_U32, pmix.PMIX_UINT32), remote_u32(r))
    elif not get_fails(p, K_REMOTE_U32):
        fail("got %s, put with PMIX_REMOTE, of rank %d on this node" % (K_REMOTE_U32, r))
    check(r, K_GLOBAL_I64, get_typed(p, K_GLOBAL_I64, pmix.PMIX_INT64), global_i64(r))
    check(r, K_GLOBAL_BOOL, get_typed(p, K_GLOBAL_BOOL, pmix.PMIX_BOOL), global_bool(r))
    check(r, K_GLOBAL_DOUBLE, get_typed(p, K_GLOBAL_DOUBLE, pmix.PMIX_DOUBLE), global_double(r))
    check(r, K_GLOBAL_STR, get_typed(p, K_GLOBAL_STR, pmix.PMIX_STRING), global_str(r))
    bo = get_typed(p, K_GLOBAL_BYTES, pmix.PMIX_BYTE_OBJECT)
    want = global_bytes(r)
    check(r, K_GLOBAL_BYTES + " size", bo.get("size"), len(want))
    check(r, K_GLOBAL_BYTES, bytes(bo.get("bytes", b""))[:len(want)], want)


def scenario_modex(collect):
    put_all()
    must("commit", CLIENT.commit())
    infos = [info(pmix.PMIX_COLLECT_DATA, True, pmix.PMIX_BOOL)] if collect else []
    must("fence", CLIENT.fence([wildcard()], infos))
    my_node = get_typed(ME, pmix.PMIX_NODEID, pmix.PMIX_UINT32)
    my_host = get_typed(ME, pmix.PMIX_HOSTNAME, pmix.PMIX_STRING)
    for r in range(JOB_SIZE):
        check_peer(r, on_my_node(r, my_host, my_node))
    immediate = [info(pmix.PMIX_IMMEDIATE, True, pmix.PMIX_BOOL)]
    peer = proc_of((ME["rank"] + 1) % JOB_SIZE)
    if not get_fails(peer, "oracle.never.put", immediate):
        fail("get of a key rank %d never put succeeded" % peer["rank"])
    if not get_fails(wildcard(), "oracle.never.put", immediate):
        fail("get of a job-level key nobody put succeeded")
    say("modex rank=%d collect=%d peers=%d" % (ME["rank"], 1 if collect else 0, JOB_SIZE))


# ---- fence --------------------------------------------------------------------------------

def scenario_fence():
    fences = 0
    must("fence (no procs)", CLIENT.fence([], []))
    fences += 1
    must("fence (wildcard, collect)",
         CLIENT.fence([wildcard()], [info(pmix.PMIX_COLLECT_DATA, True, pmix.PMIX_BOOL)]))
    fences += 1
    everyone = [proc_of(r) for r in range(JOB_SIZE)]
    must("fence (every rank)", CLIENT.fence(everyone, []))
    fences += 1
    if JOB_SIZE >= 3:
        part = everyone[:2] if ME["rank"] < 2 else everyone[2:]
        must("fence (part)", CLIENT.fence(part, []))
        fences += 1
        must("fence (wildcard)", CLIENT.fence([wildcard()], []))
        fences += 1
    say("fence rank=%d fences=%d" % (ME["rank"], fences))


# ---- publish / lookup / unpublish ---------------------------------------------------------

PUB_STR_KEY = "oracle.pub.str"
PUB_U32_KEY = "oracle.pub.u32"
PUB_STR_VALUE = "published-by-rank-0"
PUB_U32_VALUE = 424242


def lookup_must_miss(k):
    rc, found = CLIENT.lookup([{"key": k}], [])
    if rc == pmix.PMIX_SUCCESS:
        fail("lookup of %s succeeded (%r) but it is not published" % (k, found))


def scenario_publish():
    looked_up = 0
    if ME["rank"] == 0:
        must("publish", CLIENT.publish([info(PUB_STR_KEY, PUB_STR_VALUE, pmix.PMIX_STRING),
                                        info(PUB_U32_KEY, PUB_U32_VALUE, pmix.PMIX_UINT32)]))
    else:
        # No fence first: the server must hold this lookup until rank 0 has published.
        rc, found = CLIENT.lookup([{"key": PUB_STR_KEY}, {"key": PUB_U32_KEY}],
                                  [info(pmix.PMIX_WAIT, 0, pmix.PMIX_INT)])
        must("lookup", rc)
        by_key = {key(d.get("key")): d for d in found if d.get("key") is not None}
        want = {PUB_STR_KEY: (PUB_STR_VALUE, pmix.PMIX_STRING),
                PUB_U32_KEY: (PUB_U32_VALUE, pmix.PMIX_UINT32)}
        for k, (value, val_type) in want.items():
            d = by_key.get(k)
            if d is None or d.get("value") != value or d.get("val_type") != val_type:
                fail("lookup of %s gave %r, expected value %r of type %d" % (k, d, value,
                                                                           val_type))
            if d.get("proc") != proc_of(0):
                fail("lookup of %s: publisher %r, expected %r" % (k, d.get("proc"), proc_of(0)))
        looked_up = len(want)
    must("fence", CLIENT.fence([], []))
    if ME["rank"] == 0:
        # This binding hands the library no keys whatever the list says (all of this
        # process's data is unpublished then); either way PUB_STR_KEY is gone after it.
        must("unpublish", CLIENT.unpublish([PUB_STR_KEY], []))
    must("fence", CLIENT.fence([], []))
    lookup_must_miss(PUB_STR_KEY)
    lookup_must_miss("oracle.never.published")
    say("publish rank=%d looked_up=%d" % (ME["rank"], looked_up))


# ---- abort --------------------------------------------------------------------------------

def scenario_abort(code):
    must("fence", CLIENT.fence([], []))
    if ME["rank"] == 1:
        say("aborting rank=1 code=%d" % code)
        rc = CLIENT.abort(code, "pmix_client.py abort scenario", [])
        print("rank 1: abort returned %s; exiting %d" % (err(rc), code), file=sys.stderr,
              flush=True)
        os._exit(code)
    # Rank 1 never arrives: the launcher tears the job down, or the server ends the fence
    # with an error once rank 1 is gone.
    rc = CLIENT.fence([], [])
    if rc == pmix.PMIX_SUCCESS:
        fail("a fence without rank 1, which aborted, succeeded")
    print("rank %d: the fence rank 1 never joined ended with %s; exiting 3" % (ME["rank"], err(rc)),
          file=sys.stderr, flush=True)
    os._exit(3)


# ---- main ---------------------------------------------------------------------------------

SCENARIOS = ("job", "modex", "modex-direct", "fence", "publish", "abort")


def main():
    global CLIENT, JOB_SIZE
    args = sys.argv[1:] or ["job", "modex", "fence", "publish"]
    plan = []
    i = 0
    while i < len(args):
        s = args[i]
        if s not in SCENARIOS:
            fail("unknown scenario %s (job, modex, modex-direct, fence, publish, abort CODE)" % s)
        if s == "abort":
            if i + 1 >= len(args):
                fail("abort needs an exit code")
            plan.append((s, int(args[i + 1])))
            i += 2
        else:
            plan.append((s, None))
            i += 1

    CLIENT = pmix.PMIxClient()
    with contextlib.redirect_stdout(sys.stderr):
        rc, me = CLIENT.init([])
    must("init", rc)
    ME.update(me)
    JOB_SIZE = get_typed(wildcard(), pmix.PMIX_JOB_SIZE, pmix.PMIX_UINT32)
    if JOB_SIZE == 0:
        fail("job size 0")

    for s, arg in plan:
        if s == "job":
            scenario_job()
        elif s == "modex":
            scenario_modex(True)
        elif s == "modex-direct":
            scenario_modex(False)
        elif s == "fence":
            scenario_fence()
        elif s == "publish":
            if JOB_SIZE < 2:
                fail("the publish scenario needs 2 ranks or more")
            scenario_publish()
        elif s == "abort":
            if JOB_SIZE < 2:
                fail("the abort scenario needs 2 ranks or more")
            scenario_abort(arg)

    must("finalize", CLIENT.finalize([]))
    say("OK rank=%d size=%d" % (ME["rank"], JOB_SIZE))


if __name__ == "__main__":
    main()
