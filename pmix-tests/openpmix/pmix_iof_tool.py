#!/usr/bin/python3
"""pmix_iof_tool.py - a python3-pmix tool (PMIxTool, OpenPMIx 4.2) that pulls a job's output
(PMIx_IOF_pull) from the server of a pid: the Python twin of pmix_iof_tool.c's `pull`.

    /usr/bin/python3 pmix_iof_tool.py pull PID NSPACE NLINES

pulls the stdout and stderr of every process of NSPACE, prints `tool pulled` once the pull is
registered, then one line per line of output received,

    iof rank=<source rank> channel=<stdout|stderr> line=<the line>

until NLINES lines came (30 s at most), then finalizes (which ends the pull) and prints
`tool finalized`. "FAIL rank=-1: <what>" on stderr and exit 2 on any failure.
"""
import contextlib
import sys
import threading

import pmix

sys.dont_write_bytecode = True  # no __pycache__ next to the sources
import pmix_py  # noqa: E402 (after the line above)
from pmix_py import info, say, text

CHANNELS = {pmix.PMIX_FWD_STDOUT_CHANNEL: "stdout", pmix.PMIX_FWD_STDERR_CHANNEL: "stderr"}


def fail(msg):
    pmix_py.fail(-1, msg)


def main():
    args = sys.argv[1:]
    if len(args) != 4 or args[0] != "pull":
        fail("usage: pmix_iof_tool.py pull PID NSPACE NLINES")
    pid, nspace, want = int(args[1]), args[2], int(args[3])
    tool = pmix.PMIxTool()
    with contextlib.redirect_stdout(sys.stderr):
        rc, _ = tool.init([info(pmix.PMIX_SERVER_PIDINFO, pid, pmix.PMIX_PID)])
    if rc != pmix.PMIX_SUCCESS:
        fail("PMIx_tool_init: %s" % tool.error_string(rc))
    lines = []
    done = threading.Event()
    lock = threading.Lock()

    def handler(_refid, channel, source, payload, _info):
        # The binding reads the bytes as a C string: only `size` of them are the chunk's.
        data = payload.get("bytes", b"")[: payload.get("size", 0)]
        with lock:
            for line in text(data).splitlines():
                lines.append((source["rank"], CHANNELS.get(channel, str(channel)), line))
            if len(lines) >= want:
                done.set()

    procs = [{"nspace": nspace, "rank": pmix.PMIX_RANK_WILDCARD}]
    channels = pmix.PMIX_FWD_STDOUT_CHANNEL | pmix.PMIX_FWD_STDERR_CHANNEL
    rc, refid = tool.iof_pull(procs, channels, [], handler)
    if rc != pmix.PMIX_SUCCESS:
        fail("PMIx_IOF_pull: %s" % tool.error_string(rc))
    say("tool pulled")
    if not done.wait(30):
        with lock:
            fail("only %d of %d lines came: %r" % (len(lines), want, lines))
    with lock:
        for rank, channel, line in lines:
            say("iof rank=%d channel=%s line=%s" % (rank, channel, line))
    # No PMIx_IOF_deregister here: python3-pmix calls libpmix's blocking form, whose answer
    # handler frees the lock the caller waits on (it hangs now and then), and then fails
    # forgetting its own handler. The finalize ends the pull at the server.
    del refid
    rc = tool.finalize()
    if rc != pmix.PMIX_SUCCESS:
        fail("PMIx_tool_finalize: %s" % tool.error_string(rc))
    say("tool finalized")


main()
