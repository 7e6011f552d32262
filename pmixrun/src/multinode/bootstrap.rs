//! Starting the daemons of a multi-node run: each vertex of the tree starts its children
//! (tree spawn), through the launch agent (`ssh` by default, or the user's `--launch-agent`,
//! run as `AGENT... HOST COMMAND...`) or, with `--launcher local`, as processes of this
//! machine. What a daemon needs to know, the per-run secret included, reaches it on its stdin
//! as a [`Boot`], never in its argv (which `ps` shows on every node).
//!
//! The daemon's stdin stays open for the daemon's life: its end (the agent or the parent gone)
//! is one of the daemon's lifelines, the tree link to its parent the other.

use std::io::Read;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::Duration;

use crossbeam_channel::Sender;
use pmix_tree::{Topology, Vertex};
use serde::{Deserialize, Serialize};

/// The hidden flag that makes pmixrun a daemon of a multi-node run.
pub(crate) const DAEMON_FLAG: &str = "--pmixrun-internal-daemon";

/// Largest [`Boot`] a daemon accepts on its stdin.
pub(crate) const MAX_BOOT: u32 = 64 << 20;

/// How long a daemon tries each address of its parent.
const CONNECT_PROBE: Duration = Duration::from_secs(3);

/// Everything a daemon is told when it starts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Boot {
    /// Its vertex in the tree.
    pub(crate) vertex: Vertex,
    /// The tree's size (root included) and fan-out.
    pub(crate) size: u32,
    pub(crate) radix: u32,
    /// The run's secret.
    #[serde(with = "serde_bytes")]
    pub(crate) secret: Vec<u8>,
    /// Where its parent listens: every address it has, in the order to try them.
    pub(crate) parent: Vec<SocketAddr>,
    /// The node of every vertex (index 0: the root's machine).
    pub(crate) nodes: Vec<String>,
    /// The launch agent; empty for `--launcher local`.
    pub(crate) agent: Vec<String>,
    /// The pmixrun program, at the same path on every node.
    pub(crate) program: PathBuf,
    /// Heartbeat period and silence limit of the tree's links, in milliseconds.
    pub(crate) heartbeat_ms: u64,
    /// Test-only: the delay of every tree message, in microseconds (0: none).
    pub(crate) link_delay_us: u64,
    pub(crate) dead_after_ms: u64,
    /// `--verbose`.
    pub(crate) verbose: bool,
    /// Started by one `srun` for every node: where the root's join service listens (the
    /// daemon's vertex is then its task rank plus one, and its parent is found there).
    /// Empty for tree spawn.
    pub(crate) join: Vec<SocketAddr>,
}

impl Boot {
    /// The tree's shape.
    pub(crate) fn topology(&self) -> Topology {
        Topology::new(self.size, self.radix)
    }

    /// The node vertex `v` runs on.
    pub(crate) fn node(&self, v: Vertex) -> &str {
        self.nodes.get(v as usize).map_or("?", String::as_str)
    }

    /// The secret as the tree takes it.
    pub(crate) fn secret(&self) -> Result<[u8; pmix_tree::net::SECRET_LEN], String> {
        self.secret
            .as_slice()
            .try_into()
            .map_err(|_| "the run's secret has the wrong length".to_owned())
    }
}

/// A daemon this vertex started and still holds by its stdin.
#[derive(Debug)]
pub(crate) struct Started {
    pub(crate) vertex: Vertex,
    /// Closed when this vertex goes: the daemon's lifeline.
    _stdin: ChildStdin,
    pid: u32,
}

/// A started agent (or local daemon) ended.
#[derive(Debug)]
pub(crate) struct AgentEnded {
    pub(crate) vertex: Vertex,
    pub(crate) status: std::io::Result<ExitStatus>,
}

/// Quotes `s` for a POSIX shell (the agent hands the command to the remote user's shell).
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Starts the daemon of each child of `boot.vertex`, each told `parent` as its parent's
/// addresses; reports each one's end on `ended` (a thread waits for it). Stops at the first
/// that cannot be started, returning those that were with the error.
pub(crate) fn start_children(
    boot: &Boot,
    parent: &[SocketAddr],
    ended: &Sender<AgentEnded>,
) -> (Vec<Started>, Option<String>) {
    let mut started = Vec::new();
    for child in boot.topology().children(boot.vertex) {
        let mut theirs = boot.clone();
        theirs.vertex = child;
        theirs.parent = parent.to_vec();
        match start_one(&theirs, ended) {
            Ok(s) => started.push(s),
            Err(e) => return (started, Some(e)),
        }
    }
    (started, None)
}

fn start_one(boot: &Boot, ended: &Sender<AgentEnded>) -> Result<Started, String> {
    let host = boot.node(boot.vertex).to_owned();
    let (cmd, what) = match boot.agent.split_first() {
        None => {
            let mut c = Command::new(&boot.program);
            c.arg(DAEMON_FLAG);
            (c, format!("the daemon for {host}"))
        }
        Some((agent, agent_args)) => {
            let mut c = Command::new(agent);
            let program = shell_quote(&boot.program.to_string_lossy());
            c.args(agent_args).arg(&host).arg(program).arg(DAEMON_FLAG);
            (c, format!("{agent} {host}"))
        }
    };
    spawn_agent(cmd, boot, boot.vertex, &what, ended)
}

/// Inside a Slurm allocation: one `srun` starting the daemon of every node at once (vertex
/// `i + 1` on `nodes[i]`, by its task rank), each given `boot` on its stdin (srun passes its
/// stdin on to every task) and finding its parent through the root's join service
/// ([`crate::multinode::join`]). Reported on `ended` as vertex 0's agent.
pub(crate) fn start_srun(
    boot: &Boot,
    nodes: &[String],
    ended: &Sender<AgentEnded>,
) -> Result<Started, String> {
    let n = nodes.len().to_string();
    let mut cmd = Command::new("srun");
    cmd.args(["--nodes", &n, "--ntasks", &n, "--ntasks-per-node=1"])
        .arg(format!(
            "--nodelist={}",
            pmix_regex::hostlist::compress(nodes)
        ))
        .args(["--kill-on-bad-exit=1", "--mpi=none", "--cpu-bind=none"])
        .arg(&boot.program)
        .arg(DAEMON_FLAG);
    spawn_agent(cmd, boot, 0, "srun", ended)
}

/// Starts `cmd` (an agent, or a daemon itself) in a process group of its own, writes `boot`
/// on its stdin and keeps that open, and reports its end on `ended` as `vertex`'s.
fn spawn_agent(
    mut cmd: Command,
    boot: &Boot,
    vertex: Vertex,
    what: &str,
    ended: &Sender<AgentEnded>,
) -> Result<Started, String> {
    use std::os::unix::process::CommandExt;
    // Its own process group: a Ctrl-C at the terminal is for the root to pass on, not for
    // the agents to die of.
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .process_group(0);
    let mut child: Child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {what}: {}", crate::node::launch::describe(&e)))?;
    let pid = child.id();
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| format!("no stdin for {what}"))?;
    // The pipe holds far less than a large boot; a daemon that dies before reading it
    // fails the write, and is then reported by its waiter.
    if let Err(e) =
        crate::multinode::msg::write_frame(&mut stdin, &crate::multinode::msg::encode(boot))
    {
        tracing::debug!(what, "writing the boot message: {e}");
    }
    let ended = ended.clone();
    std::thread::Builder::new()
        .name(format!("agent-{vertex}"))
        .stack_size(crate::node::output::SMALL_STACK)
        .spawn(move || {
            let status = child.wait();
            let _ = ended.send(AgentEnded { vertex, status });
        })
        .map_err(|e| format!("cannot watch {what}: {}", crate::node::launch::describe(&e)))?;
    Ok(Started {
        vertex,
        _stdin: stdin,
        pid,
    })
}

impl Started {
    /// Kills the agent (or local daemon): the last resort once the run is over.
    pub(crate) fn kill(&self) {
        if let Ok(pid) = i32::try_from(self.pid) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Why an agent that ended before its daemon joined failed, for the user.
pub(crate) fn agent_failure(boot: &Boot, ended: &AgentEnded) -> String {
    if !boot.join.is_empty() {
        let status = match &ended.status {
            Ok(s) => s.to_string(),
            Err(e) => crate::node::launch::describe(e),
        };
        return format!("srun ended ({status}) before every daemon joined");
    }
    let host = boot.node(ended.vertex);
    let program = boot.program.display();
    let agent = boot.agent.first().map_or("", String::as_str);
    let code = match &ended.status {
        Ok(s) => s.code(),
        Err(e) => {
            return format!(
                "cannot wait for the daemon of {host}: {}",
                crate::node::launch::describe(e)
            );
        }
    };
    match code {
        Some(127) => format!(
            "pmixrun not found on {host} (as {program}): it must be at the same path on \
             every node"
        ),
        Some(126) => format!("pmixrun cannot be executed on {host} (as {program})"),
        Some(255) if agent.ends_with("ssh") => format!("cannot reach {host} with {agent}"),
        Some(c) if boot.agent.is_empty() => {
            format!("the daemon for {host} exited with status {c} before it joined")
        }
        Some(c) => format!(
            "the launch agent ({agent} {host}) exited with status {c} before the daemon joined"
        ),
        None => format!("the daemon for {host} was killed before it joined"),
    }
}

/// Reads the [`Boot`] from stdin (a big-endian length, then the message).
pub(crate) fn read_boot(input: &mut impl Read) -> Result<Boot, String> {
    let body = crate::multinode::msg::read_frame(input, MAX_BOOT)
        .map_err(|e| format!("no boot message on stdin: {e}"))?;
    crate::multinode::msg::decode(&body).ok_or_else(|| "undecodable boot message".to_owned())
}

/// The addresses this machine can be reached at, for its children: with an agent, every IPv4
/// address of its interfaces (loopback last); locally, loopback alone. `port` is the tree's.
pub(crate) fn my_addresses(local: bool, port: u16) -> Vec<SocketAddr> {
    let loopback = SocketAddr::from(([127, 0, 0, 1], port));
    if local {
        return vec![loopback];
    }
    let mut addrs: Vec<SocketAddr> = nix::ifaddrs::getifaddrs()
        .map(|list| {
            list.filter_map(|i| i.address)
                .filter_map(|a| a.as_sockaddr_in().map(|s| s.ip()))
                .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
                .map(|ip| SocketAddr::from((ip, port)))
                .collect()
        })
        .unwrap_or_default();
    addrs.dedup();
    addrs.push(loopback);
    addrs
}

/// Picks the parent's address this daemon can reach: the one the agent came from first (ssh
/// says in `SSH_CONNECTION`), then each in turn.
pub(crate) fn reachable_parent(candidates: &[SocketAddr]) -> Result<SocketAddr, String> {
    let mut order: Vec<SocketAddr> = Vec::with_capacity(candidates.len() + 1);
    let port = candidates.first().map(SocketAddr::port);
    if let (Some(conn), Some(port)) = (std::env::var("SSH_CONNECTION").ok(), port) {
        if let Some(ip) = conn.split_whitespace().next() {
            if let Ok(mut a) = (ip, port).to_socket_addrs() {
                order.extend(a.next());
            }
        }
    }
    for a in candidates {
        if !order.contains(a) {
            order.push(*a);
        }
    }
    // One address leaves nothing to choose: a probe would only make the parent log a
    // handshake that ended before it began.
    if let [only] = order[..] {
        return Ok(only);
    }
    for addr in &order {
        match TcpStream::connect_timeout(addr, CONNECT_PROBE) {
            Ok(_) => return Ok(*addr),
            Err(e) => tracing::debug!(%addr, "parent not reachable there: {e}"),
        }
    }
    Err(format!(
        "cannot reach the parent daemon at any of {order:?}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_survive_the_remote_shell() {
        assert_eq!(shell_quote("/usr/bin/pmixrun"), "/usr/bin/pmixrun");
        assert_eq!(shell_quote("/a b/it's"), "'/a b/it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn the_boot_message_round_trips_and_bad_ones_are_refused() {
        let boot = Boot {
            vertex: 3,
            size: 9,
            radix: 2,
            secret: vec![7; 32],
            parent: vec![SocketAddr::from(([10, 0, 0, 1], 4000))],
            nodes: (0..9).map(|i| format!("n{i}")).collect(),
            agent: vec!["ssh".into(), "-x".into()],
            program: "/opt/pmixrun".into(),
            heartbeat_ms: 1000,
            link_delay_us: 0,
            dead_after_ms: 5000,
            verbose: false,
            join: Vec::new(),
        };
        let body = crate::multinode::msg::encode(&boot);
        let mut framed = (body.len() as u32).to_be_bytes().to_vec();
        framed.extend(&body);
        let back = read_boot(&mut framed.as_slice()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back.vertex, 3);
        assert_eq!(back.node(3), "n3");
        assert!(back.secret().is_ok());
        assert!(read_boot(&mut &framed[..framed.len() - 1]).is_err());
        assert!(read_boot(&mut &u32::MAX.to_be_bytes()[..]).is_err());
    }
}
