#!/usr/bin/python3
"""pmix_control.py - the query, log, unsupported and cleanup scenarios of pmix_control.c on
python3-pmix (Debian's binding of the real OpenPMIx client library).

    /usr/bin/python3 pmix_control.py query|log|unsupported|cleanup DIR

Output lines are those of pmix_control.c, except that the query prints only
"query rank=R has_own_nspace=1" (the binding cannot unpack a process table); "FAIL rank=R:
<what>" on stderr and exit 2 on any failure. Run it with Debian's /usr/bin/python3.
"""
import contextlib
import os
import sys

import pmix

sys.dont_write_bytecode = True  # no __pycache__ next to the sources
import pmix_py  # noqa: E402 (after the line above)
from pmix_py import info, say, text

RANK = -1


def fail(msg):
    pmix_py.fail(RANK, msg)


def main():
    global RANK
    args = sys.argv[1:]
    if not args:
        fail("usage: pmix_control.py query|log|unsupported|cleanup DIR")
    client = pmix.PMIxClient()
    with contextlib.redirect_stdout(sys.stderr):
        rc, me = client.init([])
    if rc != pmix.PMIX_SUCCESS:
        fail("init: %d" % rc)
    RANK = me["rank"]
    scenario = args[0]
    if scenario == "query":
        rc, results = client.query([{"keys": [pmix.PMIX_QUERY_NAMESPACES], "qualifiers": []}])
        if rc != pmix.PMIX_SUCCESS:
            fail("query: %s" % client.error_string(rc))
        want = text(pmix.PMIX_QUERY_NAMESPACES)
        names = [text(r["value"]) for r in results if text(r["key"]) == want]
        if not names:
            fail("no namespaces in %r" % results)
        say("query rank=%d has_own_nspace=%d" % (RANK, text(me["nspace"]) in names[0].split(",")))
    elif scenario == "log":
        line = "log from rank %d" % RANK
        rc = client.log([info(pmix.PMIX_LOG_STDERR, line, pmix.PMIX_STRING)], [])
        if rc != pmix.PMIX_SUCCESS:
            fail("log: %s" % client.error_string(rc))
        say("log rank=%d ok" % RANK)
    elif scenario == "unsupported":
        rc, _ = client.job_control([], [info(pmix.PMIX_JOB_CTRL_PAUSE, True, pmix.PMIX_BOOL)])
        say("unsupported rank=%d status=%s" % (RANK, client.error_string(rc)))
    elif scenario == "cleanup" and len(args) > 1:
        top = os.path.join(args[1], "rank%d" % RANK)
        loose = os.path.join(args[1], "file%d" % RANK)
        os.makedirs(os.path.join(top, "sub"))
        for f in (os.path.join(top, "sub", "f"), loose):
            with open(f, "w") as out:
                out.write("x")
        rc, _ = client.job_control([], [
            info(pmix.PMIX_REGISTER_CLEANUP_DIR, top, pmix.PMIX_STRING),
            info(pmix.PMIX_CLEANUP_RECURSIVE, True, pmix.PMIX_BOOL),
            info(pmix.PMIX_REGISTER_CLEANUP, loose, pmix.PMIX_STRING),
        ])
        if rc != pmix.PMIX_SUCCESS:
            fail("job control: %s" % client.error_string(rc))
        say("cleanup rank=%d registered" % RANK)
    else:
        fail("unknown scenario %r" % args)
    rc = client.finalize([])
    if rc != pmix.PMIX_SUCCESS:
        fail("finalize: %d" % rc)


if __name__ == "__main__":
    main()
