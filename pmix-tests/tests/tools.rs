//! Tools attach to a running `pmixrun` (`docs/TOOLS.md`): a python3-pmix tool
//! (`openpmix/pmix_tool.py`), a libpmix tool (`openpmix/pmix_tool.c`, with libpmix 4.2 and
//! 5.0.11) and the Rust `Tool` (`pmix-tool-client`) find it by its pid, its namespace or its
//! URI, read its job's process table (the pids must be the ranks' own), and detach; the job,
//! held running meanwhile by FIFOs its ranks wait on, then ends well. A tool of another user is
//! refused, and a peer sending garbage loses only its own connection. Every run is bounded
//! by a deadline.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pmix_tests::{
    HeldJob, Output, Running, ToolLib as Lib, assert_ok, cargo_build, keyed_lines, tool_command,
};

/// For one run: a tool takes well under a second.
const DEADLINE: Duration = Duration::from_secs(60);

/// The command that runs the tool of `lib` with `how` (`pid PID`, `nspace NS`, `uri URI`).
fn tool(lib: Lib, how: &[&str]) -> Command {
    tool_command(lib, "pmix_tool", "pmix-tool-client", how)
}

fn run_tool(lib: Lib, how: &[&str], what: &str) -> Output {
    Running::start(tool(lib, how), what).finish(Instant::now() + DEADLINE, what)
}

/// The first line of the rendezvous file `name` in pmixrun's directory (the server's URI).
fn uri_of(job: &HeldJob, name: &str) -> String {
    let path = job.rendezvous_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines().next().unwrap_or_default().to_owned()
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .expect("gethostname")
        .to_string_lossy()
        .into_owned()
}

/// The tool named itself, listed every rank of the held pmixrun job with the rank's own pid,
/// running `sh` (as found on `PATH`) here, and finalized.
fn check_table(out: &Output, job: &HeldJob, what: &str) {
    let nspace = format!("rs-pmixrun-{}", job.pid);
    check_rows(out, job, what, &nspace, &sh(), &here(job));
}

/// Each rank of `job` on this machine's hostname: a one-node run's, or prterun's.
fn here(job: &HeldJob) -> Vec<String> {
    vec![hostname(); job.rank_pids.len()]
}

/// Where `sh` is found on `PATH`, as the launchers name the program they started.
fn sh() -> String {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("sh"))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
        .expect("sh on PATH")
}

/// [`check_table`] for a job named `nspace` whose processes run `exe`, rank `r` on the node
/// `hosts[r]`.
fn check_rows(out: &Output, job: &HeldJob, what: &str, nspace: &str, exe: &str, hosts: &[String]) {
    assert_ok(out, what);
    let me = keyed_lines(&out.stdout, "tool");
    assert!(
        me.first().and_then(|f| f.get("me")).is_some(),
        "{what}: the tool did not say its name: {out:#?}"
    );
    let rows: Vec<_> = me.iter().filter(|f| f.contains_key("job")).collect();
    assert_eq!(rows.len(), job.rank_pids.len(), "{what}: {out:#?}");
    for (rank, pid) in job.rank_pids.iter().enumerate() {
        let row = rows
            .iter()
            .find(|f| f.get("rank").map(String::as_str) == Some(&rank.to_string()))
            .unwrap_or_else(|| panic!("{what}: rank {rank} is not in the table: {out:#?}"));
        assert_eq!(row["job"], nspace, "{what}");
        assert_eq!(row["pid"], pid.to_string(), "{what}: rank {rank}: {out:#?}");
        assert_eq!(row["host"], hosts[rank], "{what}: rank {rank}");
        assert_eq!(row["exe"], exe, "{what}");
        // PMIX_PROC_STATE_RUNNING.
        assert_eq!(row["state"], "5", "{what}");
    }
    assert!(
        out.stdout.lines().any(|l| l == "tool finalized"),
        "{what}: {out:#?}"
    );
}

/// Holds a job of two, attaches `lib`'s tool to it in each way it can find pmixrun, then
/// releases the job, which must end well.
fn attach(lib: Lib) {
    let job = HeldJob::start(pmix_tests::pmixrun_bin(), &[], 2, Instant::now() + DEADLINE);
    let pid = job.pid.to_string();
    let server_ns = format!("rs-server-{pid}");
    let uri = uri_of(&job, &format!("pmix.{}.tool.{pid}", hostname()));
    for how in [
        ["pid", pid.as_str()],
        ["nspace", server_ns.as_str()],
        ["uri", uri.as_str()],
    ] {
        let what = format!("{lib:?} tool by {}", how.join(" "));
        let out = run_tool(lib, &how, &what);
        check_table(&out, &job, &what);
    }
    let out = job.release(Instant::now() + DEADLINE);
    assert_ok(&out, &format!("the job {lib:?} tools attached to"));
}

#[test]
fn python3_pmix_tool_attaches_by_pid_nspace_and_uri() {
    attach(Lib::Python);
}

#[test]
fn libpmix_4_tool_attaches_by_pid_nspace_and_uri() {
    attach(Lib::C);
}

#[test]
fn libpmix_5_tool_attaches_by_pid_nspace_and_uri() {
    attach(Lib::CWheel);
}

#[test]
fn rust_tool_attaches_by_pid_nspace_and_uri() {
    attach(Lib::Rust);
}

/// `Tool::get` (`PMIx_Get` in a tool) reads a held pmixrun job's data: its size at the job
/// level, a rank's local rank and host, through a Get the server answers at once; a key
/// nobody put, a namespace nobody has and the tool's own job data (pmix-rs servers hold none
/// for a tool) are not found, without waiting. The C tool on our library does the same
/// (`tests/capi.rs`, `pmix_tool_get.c`), compared with Debian's libpmix.
#[test]
fn a_rust_tool_gets_a_held_jobs_data() {
    use pmix_client::tool::{Attach, Tool};
    use pmix_server::types::{Nspace, Proc, Rank, Value, attr};
    let end = Instant::now() + DEADLINE;
    let job = HeldJob::start(pmix_tests::pmixrun_bin(), &[], 2, end);
    let mut tool = Tool::init(Attach::Pid(job.pid)).expect("attaching");
    let ns = Nspace::new(format!("rs-pmixrun-{}", job.pid)).expect("a namespace");
    let of = |rank: Rank| Proc::new(ns.clone(), rank);
    let mut get = |p: &Proc, key: &str| tool.get(p, Some(key), &[]);
    assert_eq!(
        get(&of(Rank::WILDCARD), attr::JOB_SIZE).expect("job size"),
        Value::Uint32(2)
    );
    assert_eq!(
        get(&of(Rank(1)), attr::LOCAL_RANK).expect("a local rank"),
        Value::Uint16(1)
    );
    assert_eq!(
        get(&of(Rank(0)), attr::HOSTNAME).expect("a host").as_str(),
        Some(hostname().as_str())
    );
    let missing = [
        (of(Rank(0)), "pmixrs.tool.none"),
        (
            Proc::new(
                Nspace::new("pmixrs-no-such-job").expect("ns"),
                Rank::WILDCARD,
            ),
            attr::JOB_SIZE,
        ),
    ];
    for (p, key) in &missing {
        let e = get(p, key).expect_err("not found");
        assert_eq!(
            e.status(),
            pmix_server::types::Status::ERR_NOT_FOUND,
            "{p} {key}: {e}"
        );
    }
    let me = tool.proc().cloned().expect("a name");
    let e = tool
        .get(&me, Some(attr::JOB_SIZE), &[])
        .expect_err("no job data of a tool");
    assert_eq!(e.status(), pmix_server::types::Status::ERR_NOT_FOUND, "{e}");
    tool.finalize().expect("finalize");
    assert_ok(&job.release(end), "the job a Rust tool read");
}

/// pmixrun's rendezvous files are gone when it ends.
#[test]
fn rendezvous_files_are_removed_at_exit() {
    let job = HeldJob::start(pmix_tests::pmixrun_bin(), &[], 1, Instant::now() + DEADLINE);
    let files = tool_files(&job);
    for f in &files {
        assert!(f.is_file(), "{} is missing", f.display());
    }
    let out = job.release(Instant::now() + DEADLINE);
    assert_ok(&out, "the job");
    for f in &files {
        assert!(!f.exists(), "{} is left", f.display());
    }
}

/// Runs as root only: the tool is then started as `nobody`.
fn require_root(what: &str) {
    assert!(
        nix::unistd::geteuid().is_root(),
        "{what} runs a tool as another user (nobody): run the tests as root"
    );
}

#[test]
fn a_tool_of_another_user_is_refused() {
    require_root("a_tool_of_another_user_is_refused");
    let job = HeldJob::start(pmix_tests::pmixrun_bin(), &[], 2, Instant::now() + DEADLINE);
    let hosts = here(&job);
    refuses_nobody(job, &hosts);
}

/// Tools of `nobody` are refused by the pmixrun of `job` (its ranks on `hosts`), which then
/// serves the user's own tool and ends well.
fn refuses_nobody(job: HeldJob, hosts: &[String]) {
    let pid = job.pid.to_string();
    let uri = uri_of(&job, &format!("pmix.{}.tool.{pid}", hostname()));
    // Given the URI, the tool reaches the server, which refuses it for its uid.
    for lib in [Lib::Python, Lib::C, Lib::CWheel, Lib::Rust] {
        let what = format!("{lib:?} tool of nobody by uri");
        let mut cmd = tool(lib, &["uri", &uri]);
        {
            use std::os::unix::process::CommandExt;
            cmd.uid(65534).gid(65534).current_dir("/");
        }
        let out = Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what);
        assert!(
            !out.status.success() && out.stderr.contains("FAIL rank=-1: PMIx_tool_init"),
            "{what}: it was not refused at init: {out:#?}"
        );
        assert!(!out.stdout.contains("tool job="), "{what}: {out:#?}");
    }
    // By pid it does not even find the server: the files lie where only the user may look.
    let what = "C tool of nobody by pid";
    let mut cmd = tool(Lib::C, &["pid", &pid]);
    {
        use std::os::unix::process::CommandExt;
        cmd.uid(65534).gid(65534).current_dir("/");
    }
    let out = Running::start(cmd, what).finish(Instant::now() + DEADLINE, what);
    assert!(
        !out.status.success() && out.stderr.contains("FAIL rank=-1: PMIx_tool_init"),
        "{what}: {out:#?}"
    );
    // The user's own tool is served, and the job is unaffected.
    let what = "the user's tool after nobody's";
    let out = run_tool(Lib::C, &["pid", &pid], what);
    check_rows(&out, &job, what, &format!("rs-pmixrun-{pid}"), &sh(), hosts);
    assert_ok(&job.release(Instant::now() + DEADLINE), "the job");
}

/// Reads `stream` until the peer closes it; fails the test if it does not by the deadline.
fn expect_closed(stream: &mut impl Read, what: &str) {
    let end = Instant::now() + DEADLINE;
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
            Err(e) if Instant::now() < end && e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("{what}: the server did not close the connection: {e}"),
        }
    }
}

#[test]
fn a_peer_sending_garbage_closes_only_its_own_connection() {
    use pmix_wire::openpmix::{ClientHandshake, Dialect, ToolReply};
    let job = HeldJob::start(pmix_tests::pmixrun_bin(), &[], 2, Instant::now() + DEADLINE);
    let uri = uri_of(&job, &format!("pmix.{}.tool.{}", hostname(), job.pid));
    let addr = uri
        .split_once(";tcp4://")
        .map(|(_, a)| a.to_owned())
        .unwrap_or_else(|| panic!("no tcp4 address in {uri:?}"));
    let connect = || {
        let s = std::net::TcpStream::connect(&addr).expect("connecting to the OpenPMIx port");
        s.set_read_timeout(Some(DEADLINE)).expect("timeout");
        s
    };
    // Garbage instead of a handshake.
    let mut s = connect();
    s.write_all(&[0xff; 64]).expect("writing garbage");
    expect_closed(&mut s, "garbage handshake on the OpenPMIx port");
    // A tool's handshake, accepted, then a message announcing 4 GiB.
    let (uid, gid) = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    let hs = ClientHandshake::tool_needs_id(uid, gid, Dialect::V41);
    let mut bytes = Vec::new();
    hs.encode(&mut bytes).expect("encoding a tool handshake");
    let mut s = connect();
    s.write_all(&bytes).expect("writing the handshake");
    let mut got = Vec::new();
    let reply = loop {
        let mut buf = [0u8; 1024];
        let n = s.read(&mut buf).expect("reading the handshake's answer");
        assert!(n > 0, "the server closed a tool's handshake");
        got.extend_from_slice(&buf[..n]);
        if let Some((r, _)) = ToolReply::decode(&got, true).expect("a tool reply") {
            break r;
        }
    };
    assert!(reply.status.is_success(), "{reply:?}");
    let header = pmix_wire::openpmix::Header {
        pindex: 1,
        tag: 7,
        nbytes: u32::MAX,
    };
    s.write_all(&header.encode()).expect("writing the header");
    expect_closed(&mut s, "a tool announcing 4 GiB");
    // Garbage on the native socket.
    let sock = job.rendezvous_dir().join("server.sock");
    let mut u = std::os::unix::net::UnixStream::connect(&sock).expect("connecting natively");
    u.set_read_timeout(Some(DEADLINE)).expect("timeout");
    u.write_all(&[0, 0, 0, 8, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1])
        .expect("writing garbage");
    expect_closed(&mut u, "garbage on the native socket");
    // Everyone else is served as before.
    let pid = job.pid.to_string();
    let out = run_tool(Lib::Python, &["pid", &pid], "a tool after the garbage");
    check_table(&out, &job, "a tool after the garbage");
    assert_ok(&job.release(Instant::now() + DEADLINE), "the job");
}

/// The Rust `Tool` and the libpmix tools attach to PRRTE's `prterun` (an OpenPMIx 5.0.11
/// server) by its pid and its namespace and read its job's process table: the tool side of
/// the OpenPMIx wire against the reference. One tool per `prterun`: after a second tool has
/// come and gone, `prterun` 5.0.11 no longer ends when its job does (with any tool library).
#[test]
fn rust_and_libpmix_tools_attach_to_prterun() {
    let prterun = Path::new("/opt/ompi5/bin/prterun");
    assert!(
        prterun.is_file(),
        "{} is missing: {}",
        prterun.display(),
        pmix_tests::INSTALL_TEST_DEPS
    );
    for (lib, by_pid) in [
        (Lib::Rust, true),
        (Lib::Rust, false),
        (Lib::C, true),
        (Lib::CWheel, false),
    ] {
        let job = HeldJob::start(
            prterun,
            &["--allow-run-as-root", "--oversubscribe"],
            2,
            Instant::now() + DEADLINE,
        );
        let pid = job.pid.to_string();
        // PRRTE names its own namespace `prterun-<host>-<pid>@0` and its first job `...@1`.
        let dvm = format!("prterun-{}-{pid}@0", hostname());
        let first = format!("prterun-{}-{pid}@1", hostname());
        let how = if by_pid {
            ["pid", pid.as_str()]
        } else {
            ["nspace", dvm.as_str()]
        };
        let what = format!("{lib:?} tool to prterun by {}", how.join(" "));
        let out = run_tool(lib, &how, &what);
        check_rows(&out, &job, &what, &first, &sh(), &here(&job));
        assert_ok(&job.release(Instant::now() + DEADLINE), &what);
    }
}

/// A server started as the node's system server writes `pmix.sys.<host>` at the top of its
/// system temporary directory; libpmix and Rust tools asking for the system server find it
/// there, and it is gone when the server stops.
#[test]
fn the_system_server_is_found_by_libpmix_and_rust_tools() {
    use pmix_client::tool::{Attach, Tool, ToolOptions};
    let top = std::env::temp_dir().join(format!("pmixrs-systools.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&top);
    let sys = top.join("sys");
    std::fs::create_dir_all(&sys).expect("creating the test's directories");
    let h = pmix_tests::TestHost::start_with(
        pmix_server::NoHost,
        pmix_server::ServerOptions {
            tmpdir: Some(top.clone()),
            system_tmpdir: Some(sys.clone()),
            tool_support: true,
            system_server: true,
            ..Default::default()
        },
    );
    h.job("sysjob", 1);
    let file = sys.join(format!("pmix.sys.{}", h.server.hostname()));
    assert!(file.is_file(), "{} is missing", file.display());
    // Rust, in this process.
    let mut rust = Tool::init_with(ToolOptions {
        server: Some(Attach::System),
        tmpdir: Some(top.clone()),
        system_tmpdir: Some(sys.clone()),
        hostname: Some(h.server.hostname().to_owned()),
        ..ToolOptions::default()
    })
    .expect("a Rust tool attaching to the system server");
    assert_eq!(rust.server(), Some(&h.server.proc()));
    let names = rust
        .query_keys(&[pmix_server::types::attr::QUERY_NAMESPACES], Vec::new())
        .expect("query");
    assert_eq!(names[0].value.as_str(), Some("sysjob"), "{names:?}");
    rust.finalize().expect("finalize");
    // libpmix 4.2, looking in PMIX_SYSTEM_TMPDIR: attached, it lists the job; the test host
    // answers no process table, so the C tool stops there.
    let what = "libpmix tool to the system server";
    let mut cmd = tool(Lib::C, &["system"]);
    cmd.env("PMIX_SYSTEM_TMPDIR", &sys);
    let out = Running::start(cmd, what).finish(Instant::now() + DEADLINE, what);
    let me = format!("tool me={}-tool-", h.server.proc().nspace);
    assert!(out.stdout.contains(&me), "{what}: {out:#?}");
    assert!(
        out.stderr
            .contains("FAIL rank=-1: PMIx_Query_info(pmix.qry.ptable of sysjob)"),
        "{what}: {out:#?}"
    );
    h.server.finalize().expect("finalize the server");
    assert!(!file.exists(), "{} is left", file.display());
    let _ = std::fs::remove_dir_all(&top);
}

/// `pmixrun --system-server` is also the node's system server, as `prterun --system-server`
/// is (issue 35): a libpmix tool asking for the system server (`PMIX_CONNECT_TO_SYSTEM`, in
/// `PMIX_SYSTEM_TMPDIR`) attaches to it and reads the job's process table; the file goes
/// with the run.
#[test]
fn pmixrun_as_the_system_server_is_found_by_a_libpmix_tool() {
    let top = std::env::temp_dir().join(format!("pmixrs-sysrun.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&top);
    std::fs::create_dir_all(&top).expect("creating the test's directory");
    let end = Instant::now() + DEADLINE;
    // pmixrun's temporary directory (and so its system one) is the test's own.
    let tmpdir = format!("TMPDIR={}", top.display());
    let pmixrun = pmix_tests::pmixrun_bin().to_str().expect("a UTF-8 path");
    let job = HeldJob::start(
        Path::new("/usr/bin/env"),
        &[&tmpdir, pmixrun, "--system-server"],
        2,
        end,
    );
    let file = top.join(format!("pmix.sys.{}", hostname()));
    assert!(file.is_file(), "{} is missing", file.display());
    let what = "libpmix tool to pmixrun --system-server";
    let mut cmd = tool(Lib::C, &["system"]);
    cmd.env("PMIX_SYSTEM_TMPDIR", &top);
    let out = Running::start(cmd, what).finish(end, what);
    check_table(&out, &job, what);
    assert_ok(&job.release(end), "the job");
    assert!(!file.exists(), "{} is left", file.display());
    let _ = std::fs::remove_dir_all(&top);
}

/// One Rust `Tool` attached to two pmixruns at once: both listed, requests to the primary
/// one, `set_server` switching, `disconnect` letting one go; both jobs end well.
#[test]
fn one_rust_tool_holds_two_servers() {
    use pmix_client::tool::{Attach, Tool};
    use pmix_server::types::attr;
    let end = Instant::now() + DEADLINE;
    let first = HeldJob::start(pmix_tests::pmixrun_bin(), &[], 1, end);
    let second = HeldJob::start(pmix_tests::pmixrun_bin(), &[], 1, end);
    let mut tool = Tool::init(Attach::Pid(first.pid)).expect("attaching to the first");
    let server_of = |job: &HeldJob| format!("rs-server-{}", job.pid);
    let two = tool
        .attach_to_server(Attach::Pid(second.pid))
        .expect("attaching to the second");
    let servers: Vec<String> = tool
        .get_servers()
        .iter()
        .map(|p| p.nspace.to_string())
        .collect();
    assert_eq!(servers, [server_of(&first), server_of(&second)]);
    let jobs = |tool: &mut Tool| {
        let r = tool
            .query_keys(&[attr::QUERY_NAMESPACES], Vec::new())
            .expect("query");
        r[0].value.as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(jobs(&mut tool), format!("rs-pmixrun-{}", first.pid));
    tool.set_server(&two).expect("set_server");
    assert_eq!(jobs(&mut tool), format!("rs-pmixrun-{}", second.pid));
    tool.disconnect(&two).expect("disconnect");
    assert_eq!(tool.get_servers().len(), 1);
    assert_eq!(jobs(&mut tool), format!("rs-pmixrun-{}", first.pid));
    assert!(
        tool.set_server(&two).is_err(),
        "set_server to a server let go"
    );
    tool.finalize().expect("finalize");
    assert_ok(&first.release(end), "the first job");
    assert_ok(&second.release(end), "the second job");
}

/// A server whose host did not enable tools refuses them on both ports, with a status the tool
/// sees, and writes no rendezvous files.
#[test]
fn a_server_without_tool_support_refuses_tools() {
    use pmix_client::tool::{Attach, Tool};
    let h = pmix_tests::TestHost::start(pmix_server::NoHost);
    let ns = h.job("plain", 1);
    let env = h
        .server
        .setup_fork(&pmix_server::types::Proc::new(ns, 0))
        .expect("setup_fork");
    let socket = pmix_tests::native_socket(&env);
    let dir = socket.parent().expect("the rendezvous directory");
    let files: Vec<_> = std::fs::read_dir(dir)
        .expect("reading the rendezvous directory")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("pmix."))
        .map(|e| e.path())
        .collect();
    assert!(
        files.is_empty(),
        "rendezvous files without tool support: {files:?}"
    );
    let tcp = pmix_tests::env_value(&env, "PMIX_SERVER_URI41").to_owned();
    for uri in [format!("unix:{}", socket.display()), tcp] {
        match Tool::init(Attach::Uri(uri.clone())) {
            Err(e) => assert_eq!(
                e.status(),
                pmix_server::types::Status::ERR_NOT_SUPPORTED,
                "{uri}: {e}"
            ),
            Ok(t) => panic!("{uri}: a tool was served: {t:?}"),
        }
    }
}

/// A run on two logical nodes of this machine, two ranks each (ranks 0 and 1 on `n1`, 2 and 3
/// on `n2`): its root serves tools for both (docs/TOOLS.md, "Multi-node runs").
const TWO_NODES: [&str; 4] = ["--launcher", "local", "--host", "n[1-2]:2"];

/// The node of each rank of a [`TWO_NODES`] job of four.
fn two_node_hosts() -> Vec<String> {
    ["n1", "n1", "n2", "n2"].map(String::from).to_vec()
}

/// pmixrun's two rendezvous files (by pid and by namespace), in its directory: on several
/// nodes, the root's.
fn tool_files(job: &HeldJob) -> [PathBuf; 2] {
    let dir = job.rendezvous_dir();
    [
        dir.join(format!("pmix.{}.tool.{}", hostname(), job.pid)),
        dir.join(format!("pmix.{}.tool.rs-server-{}", hostname(), job.pid)),
    ]
}

/// The parent of process `pid`, from `/proc`.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// The daemons of a multi-node `job` write no tool rendezvous file: each rank's nearest
/// ancestor with a rendezvous directory (its daemon's server) has none in it.
fn daemons_serve_no_tools(job: &HeldJob) {
    for (rank, &pid) in job.rank_pids.iter().enumerate() {
        let mut at = parent_of(pid);
        let dir = loop {
            let Some(a) = at.filter(|&a| a > 1 && a != job.pid) else {
                panic!("rank {rank} (pid {pid}): no ancestor below pmixrun has a server");
            };
            let prefix = format!("pmixrs.{a}.");
            let found = std::fs::read_dir(std::env::temp_dir())
                .expect("reading the temporary directory")
                .flatten()
                .find(|e| e.file_name().to_string_lossy().starts_with(&prefix));
            if let Some(d) = found {
                break d.path();
            }
            at = parent_of(a);
        };
        let tool_files: Vec<_> = std::fs::read_dir(&dir)
            .expect("reading a daemon's rendezvous directory")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("pmix.") && n.contains(".tool."))
            .collect();
        assert!(
            tool_files.is_empty(),
            "rank {rank}'s daemon ({}) serves tools: {tool_files:?}",
            dir.display()
        );
    }
}

/// Holds a job of four on two logical nodes, attaches `lib`'s tool to its root by pmixrun's
/// pid and checks every rank of both nodes, then releases the job, which must end well and
/// leave no rendezvous file.
fn attach_to_two_nodes(lib: Lib) {
    let job = HeldJob::start(
        pmix_tests::pmixrun_bin(),
        &TWO_NODES,
        4,
        Instant::now() + DEADLINE,
    );
    let files = tool_files(&job);
    for f in &files {
        assert!(f.is_file(), "{} is missing", f.display());
    }
    daemons_serve_no_tools(&job);
    let pid = job.pid.to_string();
    let what = format!("{lib:?} tool to a two-node run by pid");
    let out = run_tool(lib, &["pid", &pid], &what);
    check_rows(
        &out,
        &job,
        &what,
        &format!("rs-pmixrun-{pid}"),
        &sh(),
        &two_node_hosts(),
    );
    let out = job.release(Instant::now() + DEADLINE);
    assert_ok(&out, &format!("the two-node job {lib:?} tools attached to"));
    for f in &files {
        assert!(!f.exists(), "{} is left", f.display());
    }
}

#[test]
fn python3_pmix_tool_attaches_to_a_two_node_run() {
    attach_to_two_nodes(Lib::Python);
}

#[test]
fn libpmix_4_tool_attaches_to_a_two_node_run() {
    attach_to_two_nodes(Lib::C);
}

#[test]
fn libpmix_5_tool_attaches_to_a_two_node_run() {
    attach_to_two_nodes(Lib::CWheel);
}

#[test]
fn rust_tool_attaches_to_a_two_node_run() {
    attach_to_two_nodes(Lib::Rust);
}

#[test]
fn a_tool_of_another_user_is_refused_by_a_two_node_run() {
    require_root("a_tool_of_another_user_is_refused_by_a_two_node_run");
    let job = HeldJob::start(
        pmix_tests::pmixrun_bin(),
        &TWO_NODES,
        4,
        Instant::now() + DEADLINE,
    );
    refuses_nobody(job, &two_node_hosts());
}

/// What the root answers a Rust `Tool` besides the whole table, found by namespace and by URI:
/// the run's namespaces, a job-level key from the job's registration, the job's status, and
/// the local process table (the ranks on the node the run's node list names as this machine,
/// `localhost`).
#[test]
fn the_root_answers_namespaces_job_data_status_and_its_nodes_table() {
    use pmix_client::tool::{Attach, Tool};
    use pmix_server::types::{Status, Value, attr};
    let job = HeldJob::start(
        pmix_tests::pmixrun_bin(),
        &["--launcher", "local", "--host", "localhost:2,n2:2"],
        4,
        Instant::now() + DEADLINE,
    );
    let server_ns = format!("rs-server-{}", job.pid);
    let nspace = format!("rs-pmixrun-{}", job.pid);
    let uri = uri_of(&job, &format!("pmix.{}.tool.{}", hostname(), job.pid));
    for how in [Attach::Nspace(server_ns.clone()), Attach::Uri(uri)] {
        let what = format!("{how:?}");
        let mut tool = Tool::init(how).unwrap_or_else(|e| panic!("{what}: {e}"));
        let of_job = || vec![pmix_client::Info::attr(attr::NSPACE, nspace.as_str())];
        let one = |tool: &mut Tool, key: &str, qualifiers| {
            let got = tool
                .query_keys(&[key], qualifiers)
                .unwrap_or_else(|e| panic!("{what}: {key}: {e}"));
            got.into_iter()
                .find(|i| i.key.as_str() == key)
                .unwrap_or_else(|| panic!("{what}: no {key} in the answer"))
                .value
        };
        let names = one(&mut tool, attr::QUERY_NAMESPACES, Vec::new());
        assert_eq!(names.as_str(), Some(nspace.as_str()), "{what}");
        let size = one(&mut tool, attr::JOB_SIZE, of_job());
        assert_eq!(size.as_i64(), Some(4), "{what}: {size:?}");
        let status = one(&mut tool, attr::QUERY_JOB_STATUS, of_job());
        assert_eq!(status, Value::Status(Status::SUCCESS), "{what}");
        let Value::DataArray(local) = one(&mut tool, attr::QUERY_LOCAL_PROC_TABLE, of_job()) else {
            panic!("{what}: the local table is no array");
        };
        let rows: Vec<(u32, u32, String)> = local
            .items()
            .iter()
            .map(|v| match v {
                Value::ProcInfo(p) => (p.proc.rank.0, p.pid, p.hostname.clone()),
                other => panic!("{what}: {other:?} in the local table"),
            })
            .collect();
        let expected: Vec<(u32, u32, String)> = (0..2)
            .map(|r| (r, job.rank_pids[r as usize], "localhost".to_owned()))
            .collect();
        assert_eq!(rows, expected, "{what}");
        tool.finalize()
            .unwrap_or_else(|e| panic!("{what}: finalize: {e}"));
    }
    assert_ok(&job.release(Instant::now() + DEADLINE), "the job");
}

/// A tool's job control at the root of a run on two logical nodes reaches every node: the
/// held ranks of both are killed through their daemons (a kill asked for is no failure: the
/// run ends well), and the tool hears the job's end from the root.
#[test]
fn a_tools_job_control_at_the_root_kills_the_ranks_of_every_node() {
    use pmix_client::tool::{Attach, Tool};
    use pmix_server::types::{Nspace, Proc, Rank, Status, attr};
    let end = Instant::now() + DEADLINE;
    let job = HeldJob::start(pmix_tests::pmixrun_bin(), &TWO_NODES, 4, end);
    let nspace = Nspace::new(format!("rs-pmixrun-{}", job.pid)).expect("a namespace");
    let mut tool = Tool::init(Attach::Pid(job.pid)).expect("attaching to the root");
    tool.register_events(&[Status::EVENT_JOB_END])
        .expect("registering for the job's end");
    tool.job_control(
        &[Proc::new(nspace.clone(), Rank::WILDCARD)],
        vec![pmix_client::Info::attr(attr::JOB_CTRL_KILL, true)],
    )
    .expect("job control from the root's tool");
    let ended = tool
        .wait_event(Status::EVENT_JOB_END, DEADLINE)
        .expect("the job's end at the root");
    let of = ended
        .info
        .iter()
        .find(|i| i.key.as_str() == attr::NSPACE)
        .and_then(|i| i.value.as_str());
    assert_eq!(of, Some(nspace.as_str()), "{ended:?}");
    tool.finalize().expect("finalize");
    let pids = job.rank_pids.clone();
    let out = job.wait_for_end(end);
    assert_ok(&out, "the job killed by a tool");
    assert!(
        out.stderr
            .contains("asked for SIGKILL to be sent to 4 process(es)"),
        "{out:#?}"
    );
    for (rank, pid) in pids.iter().enumerate() {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "rank {rank} (pid {pid}) is still there: {out:#?}"
        );
    }
}

/// A tool at the root of a run on two logical nodes spawns a job, placed in the free slots of
/// both nodes (the first job, mapped by node, leaves one on each; the root counted the first
/// job's slots twice once, and refused it): the root's server knows it (its process table lists both nodes' ranks with
/// their pids), the tool's job control ends it and the tool hears its end (a spawn held in
/// init across nodes: `debugger.rs`). The first job, held meanwhile, then ends well.
#[test]
fn a_tool_at_the_root_spawns_a_job_across_nodes() {
    use pmix_client::tool::{Attach, Tool};
    use pmix_server::types::{Proc, Rank, Status, Value, attr};
    let end = Instant::now() + DEADLINE;
    let job = HeldJob::start(
        pmix_tests::pmixrun_bin(),
        &[
            "--launcher",
            "local",
            "--host",
            "n[1-2]:3",
            "--map-by",
            "node",
        ],
        4,
        end,
    );
    let mut tool = Tool::init(Attach::Pid(job.pid)).expect("attaching to the root");
    tool.register_events(&[Status::EVENT_JOB_END])
        .expect("registering for jobs' ends");
    let app = |argv: &[&str]| pmix_client::App {
        cmd: argv[0].to_owned(),
        argv: argv.iter().map(|a| (*a).to_owned()).collect(),
        env: Vec::new(),
        cwd: String::new(),
        maxprocs: 2,
        info: Vec::new(),
    };
    // The spawned ranks wait on a FIFO nobody opens, until killed.
    let fifo = std::env::temp_dir().join(format!("pmixrs-spawnfifo.{}", job.pid));
    let _ = std::fs::remove_file(&fifo);
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let script = format!("cat {} > /dev/null", fifo.display());
    let spawned = tool
        .spawn(Vec::new(), vec![app(&["sh", "-c", &script])])
        .expect("a tool's spawn at the root");
    let table = tool
        .query_keys(
            &[attr::QUERY_PROC_TABLE],
            vec![pmix_client::Info::attr(attr::NSPACE, spawned.as_str())],
        )
        .expect("the spawned job's table");
    let Value::DataArray(rows) = &table[0].value else {
        panic!("{table:?}");
    };
    let hosts: Vec<(u32, String, bool)> = rows
        .items()
        .iter()
        .map(|v| match v {
            Value::ProcInfo(p) => (p.proc.rank.0, p.hostname.clone(), p.pid > 0),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        hosts,
        [(0, "n1".to_owned(), true), (1, "n2".to_owned(), true)],
        "{table:?}"
    );
    tool.job_control(
        &[Proc::new(spawned.clone(), Rank::WILDCARD)],
        vec![pmix_client::Info::attr(attr::JOB_CTRL_KILL, true)],
    )
    .expect("killing the spawned job");
    let ended = tool
        .wait_event(Status::EVENT_JOB_END, DEADLINE)
        .expect("the spawned job's end");
    let of = ended
        .info
        .iter()
        .find(|i| i.key.as_str() == attr::NSPACE)
        .and_then(|i| i.value.as_str());
    assert_eq!(of, Some(spawned.as_str()), "{ended:?}");
    tool.finalize().expect("finalize");
    let _ = std::fs::remove_file(&fifo);
    assert_ok(&job.release(end), "the first job");
}

/// `pmixps` lists a run on two logical nodes through its root: every rank of both nodes with
/// its own pid and node.
#[test]
fn pmixps_lists_every_node_of_a_two_node_run() {
    let end = Instant::now() + DEADLINE;
    let job = HeldJob::start(pmix_tests::pmixrun_bin(), &TWO_NODES, 4, end);
    let pmixps = cargo_build(&["-p", "pmixps", "--bin", "pmixps"]).join("pmixps");
    let mut ps = Command::new(pmixps);
    ps.args(["--pid", &job.pid.to_string(), "--no-header"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = Running::start(ps, "pmixps").finish(end, "pmixps");
    assert_ok(&out, "pmixps");
    // PMIXRUN JOB RANK PID STATE HOST PROGRAM
    let mut rows: Vec<Vec<String>> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect();
    rows.sort_by_key(|r| r.get(2).cloned());
    let hosts = two_node_hosts();
    let want: Vec<Vec<String>> = (0..4)
        .map(|r| {
            vec![
                job.pid.to_string(),
                format!("rs-pmixrun-{}", job.pid),
                r.to_string(),
                job.rank_pids[r].to_string(),
                "RUNNING".to_owned(),
                hosts[r].clone(),
                sh(),
            ]
        })
        .collect();
    assert_eq!(rows, want, "{out:#?}");
    assert_ok(&job.release(end), "the job pmixps listed");
}

/// A tool's event at the root reaches the processes of every node: a `DEBUGGER_RELEASE` a Rust
/// tool sends to a job on two logical nodes (`pmix-debuggee --await-release`, every rank
/// registered for it) is relayed to both daemons, whose servers deliver it; each rank hears
/// it from the tool and the run ends well.
#[test]
fn a_tools_event_at_the_root_reaches_every_node() {
    use pmix_client::tool::{Attach, Tool};
    use pmix_server::types::Nspace;
    let end = Instant::now() + DEADLINE;
    let debuggee =
        cargo_build(&["-p", "pmix-tests", "--bin", "pmix-debuggee"]).join("pmix-debuggee");
    let mut cmd = Command::new(pmix_tests::pmixrun_bin());
    cmd.args(TWO_NODES)
        .args(["-n", "4"])
        .arg(&debuggee)
        .arg("--await-release")
        .env_remove("PMIXRS_NAMESERVER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("starting pmixrun");
    let pid = child.id();
    let (lines_tx, lines) = crossbeam_channel::unbounded();
    let (rest_tx, rest) = crossbeam_channel::unbounded();
    let stdout = child.stdout.take().expect("stdout piped");
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = lines_tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        let _ = rest_tx.send(all);
    });
    let run = Running::with_stdout(child, rest);
    let mut awaiting = 0;
    while awaiting < 4 {
        match lines.recv_deadline(end) {
            Ok(l) if l.starts_with("awaiting rank=") => awaiting += 1,
            Ok(_) => {}
            Err(_) => {
                let out = run.finish(Instant::now() + DEADLINE, "the awaiting job");
                panic!("{awaiting} of 4 ranks registered in time: {out:#?}");
            }
        }
    }
    let mut tool = Tool::init(Attach::Pid(pid)).expect("attaching to the root");
    let me = tool.proc().cloned().expect("the tool's name");
    let nspace = Nspace::new(format!("rs-pmixrun-{pid}")).expect("a namespace");
    tool.release_job(&nspace).expect("the tool's release");
    tool.finalize().expect("finalize");
    let out = run.finish(end, "the job a tool's event reached");
    assert_ok(&out, "the job a tool's event reached");
    for rank in 0..4 {
        let heard = format!("heard rank={rank} from={}\n", me.nspace);
        assert!(out.stdout.contains(&heard), "rank {rank}: {out:#?}");
    }
}
