#!/usr/bin/python3
"""pmix_tool.py - a python3-pmix tool (PMIxTool, Debian's binding of the real OpenPMIx 4.2
library) that attaches to a running server, reads the process table of its job and detaches.

    /usr/bin/python3 pmix_tool.py pid PID | nspace NSPACE | uri URI | system

finds the server by its pid, its namespace, its URI or as the system server, then prints

    tool me=<the tool's nspace>.<rank>
    tool job=<nspace> rank=<r> pid=<pid> host=<host> exe=<executable> state=<state>  (each)
    tool finalized

The job is the first namespace the server lists (QUERY_NAMESPACES) that is not the tool's.
"FAIL rank=-1: <what>" on stderr and exit 2 on any failure (as pmix_tool.c). Run it with
Debian's /usr/bin/python3.
"""
import contextlib
import sys

import pmix

sys.dont_write_bytecode = True  # no __pycache__ next to the sources
import pmix_py  # noqa: E402 (after the line above)
from pmix_py import info, say, text


def fail(msg):
    pmix_py.fail(-1, msg)


def main():
    args = sys.argv[1:]
    how = {
        "pid": lambda v: [info(pmix.PMIX_SERVER_PIDINFO, int(v), pmix.PMIX_PID)],
        "nspace": lambda v: [info(pmix.PMIX_SERVER_NSPACE, v, pmix.PMIX_STRING)],
        "uri": lambda v: [info(pmix.PMIX_SERVER_URI, v, pmix.PMIX_STRING)],
    }
    if args == ["system"]:
        directives = [info(pmix.PMIX_CONNECT_TO_SYSTEM, True, pmix.PMIX_BOOL)]
    elif len(args) == 2 and args[0] in how:
        directives = how[args[0]](args[1])
    else:
        fail("usage: pmix_tool.py pid PID | nspace NSPACE | uri URI | system")
    tool = pmix.PMIxTool()
    with contextlib.redirect_stdout(sys.stderr):
        rc, me = tool.init(directives)
    if rc != pmix.PMIX_SUCCESS:
        fail("PMIx_tool_init: %s" % tool.error_string(rc))
    mine = text(me["nspace"])
    say("tool me=%s.%d" % (mine, me["rank"]))
    rc, results = tool.query([{"keys": [pmix.PMIX_QUERY_NAMESPACES], "qualifiers": []}])
    if rc != pmix.PMIX_SUCCESS:
        fail("query namespaces: %s" % tool.error_string(rc))
    names = [text(r["value"]) for r in results if text(r["key"]) == text(pmix.PMIX_QUERY_NAMESPACES)]
    jobs = [n for n in (names[0].split(",") if names else []) if n and n != mine]
    if not jobs:
        fail("no job among the namespaces %r" % results)
    job = jobs[0]
    rc, results = tool.query([{
        "keys": [pmix.PMIX_QUERY_PROC_TABLE],
        "qualifiers": [info(pmix.PMIX_NSPACE, job, pmix.PMIX_STRING)],
    }])
    if rc != pmix.PMIX_SUCCESS:
        fail("query the process table of %s: %s" % (job, tool.error_string(rc)))
    tables = [r["value"] for r in results if text(r["key"]) == text(pmix.PMIX_QUERY_PROC_TABLE)]
    if not tables:
        fail("no process table in %r" % results)
    for p in tables[0]["array"]:
        say("tool job=%s rank=%d pid=%d host=%s exe=%s state=%d" % (
            text(p["proc"]["nspace"]), p["proc"]["rank"], p["pid"], text(p["hostname"]),
            text(p["executable"]), p["state"]))
    rc = tool.finalize()
    if rc != pmix.PMIX_SUCCESS:
        fail("PMIx_tool_finalize: %s" % tool.error_string(rc))
    say("tool finalized")


main()
