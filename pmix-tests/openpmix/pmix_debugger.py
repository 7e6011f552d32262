#!/usr/bin/python3
"""pmix_debugger.py - a python3-pmix debugger tool (PMIxTool, OpenPMIx 4.2), the Python twin of
pmix_debugger.c and pmix-debugger (tests/debugger.rs), with the same lines:

    /usr/bin/python3 pmix_debugger.py PID

attaches to the server of PID, registers for READY_FOR_DEBUG and EVENT_JOB_END, waits for a
job held in init to be ready and prints "debugger ready job=<nspace>", one
"debugger proc rank=R pid=P" line per process (QUERY_PROC_TABLE), then "debugger waiting",
and reads one command from stdin: "release" (DEBUGGER_RELEASE to the job, "debugger
released") or "kill" (job_control with JOB_CTRL_KILL, "debugger killed"); then waits for the
job's end ("debugger job-end job=<nspace>") and finalizes ("debugger finalized"). At the end
of stdin it exits 3 at once. "FAIL rank=-1: <what>" on stderr and exit 2 on any failure;
every wait gives up after 60 seconds.
"""
import contextlib
import os
import sys
import threading
import time

import pmix

sys.dont_write_bytecode = True  # no __pycache__ next to the sources
import pmix_py  # noqa: E402 (after the line above)
from pmix_py import info, say, text

WAIT = 60.0


def fail(msg):
    pmix_py.fail(-1, msg)


seen = {}
cond = threading.Condition()


def handler(evhdlr, status, source, infos, results):
    for i in infos:
        if text(i["key"]) == text(pmix.PMIX_NSPACE):
            with cond:
                seen.setdefault(status, text(i["value"]))
                cond.notify_all()
    return pmix.PMIX_EVENT_ACTION_COMPLETE, []


def out_of_callbacks():
    """Waits until no thread but those Python started runs Python code. python3-pmix 4.2 makes
    its blocking calls (PMIx_Query_info, PMIx_tool_finalize, ...) holding the GIL, while its
    event callback runs Python on libpmix's progress thread: a blocking call made while that
    thread still waits for the GIL inside the callback (our handler has signalled, the
    binding's wrapper has not returned) deadlocks both, the reply never read (seen about one
    run in ten under load). Such a thread holds a Python frame until it is out."""
    ours = {t.ident for t in threading.enumerate() if not isinstance(t, threading._DummyThread)}
    end = time.monotonic() + WAIT
    while any(tid not in ours for tid in sys._current_frames()):
        if time.monotonic() > end:
            fail("libpmix's progress thread stayed in an event callback for %d s" % WAIT)
        time.sleep(0.001)


def wait_for(code, what):
    with cond:
        if not cond.wait_for(lambda: code in seen, WAIT):
            fail("no %s within %d s" % (what, WAIT))
        return seen[code]


def main():
    if len(sys.argv) != 2:
        fail("usage: pmix_debugger.py PID")
    tool = pmix.PMIxTool()
    with contextlib.redirect_stdout(sys.stderr):
        rc, me = tool.init([info(pmix.PMIX_SERVER_PIDINFO, int(sys.argv[1]), pmix.PMIX_PID)])
    if rc != pmix.PMIX_SUCCESS:
        fail("PMIx_tool_init: %s" % tool.error_string(rc))
    rc = tool.register_event_handler([pmix.PMIX_READY_FOR_DEBUG, pmix.PMIX_EVENT_JOB_END], [],
                                     handler)
    rc = rc[0] if isinstance(rc, tuple) else rc
    if rc < 0:
        fail("register_event_handler: %s" % tool.error_string(rc))
    job = wait_for(pmix.PMIX_READY_FOR_DEBUG, "READY_FOR_DEBUG")
    say("debugger ready job=%s" % job)
    out_of_callbacks()
    rc, results = tool.query([{
        "keys": [pmix.PMIX_QUERY_PROC_TABLE],
        "qualifiers": [info(pmix.PMIX_NSPACE, job, pmix.PMIX_STRING)],
    }])
    if rc != pmix.PMIX_SUCCESS:
        fail("query the process table of %s: %s" % (job, tool.error_string(rc)))
    for r in results:
        if text(r["key"]) == text(pmix.PMIX_QUERY_PROC_TABLE):
            for p in r["value"]["array"]:
                say("debugger proc rank=%d pid=%d" % (p["proc"]["rank"], p["pid"]))
    say("debugger waiting")
    line = sys.stdin.readline()
    if not line:
        os._exit(3)
    everyone = {"nspace": job, "rank": pmix.PMIX_RANK_WILDCARD}
    if line.strip() == "release":
        rc = tool.notify_event(pmix.PMIX_DEBUGGER_RELEASE, me, pmix.PMIX_RANGE_CUSTOM, [
            info(pmix.PMIX_EVENT_CUSTOM_RANGE, {"type": pmix.PMIX_PROC, "array": [everyone]},
                 pmix.PMIX_DATA_ARRAY),
            info(pmix.PMIX_EVENT_NON_DEFAULT, True, pmix.PMIX_BOOL),
        ])
        if rc != pmix.PMIX_SUCCESS:
            fail("notify_event(DEBUGGER_RELEASE): %s" % tool.error_string(rc))
        say("debugger released")
    elif line.strip() == "kill":
        rc, _ = tool.job_control([everyone], [info(pmix.PMIX_JOB_CTRL_KILL, True, pmix.PMIX_BOOL)])
        if rc != pmix.PMIX_SUCCESS:
            fail("job_control: %s" % tool.error_string(rc))
        say("debugger killed")
    else:
        fail("unknown command %r" % line)
    ended = wait_for(pmix.PMIX_EVENT_JOB_END, "EVENT_JOB_END")
    say("debugger job-end job=%s" % ended)
    out_of_callbacks()
    rc = tool.finalize()
    if rc != pmix.PMIX_SUCCESS:
        fail("PMIx_tool_finalize: %s" % tool.error_string(rc))
    say("debugger finalized")


main()
