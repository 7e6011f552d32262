//! The host's processes as `/proc` shows them: each one's command line, executable, and the
//! node whose network namespace it runs in. The nodes share the host's PID namespace, so every
//! process of every node is in the host's `/proc`.

use std::path::PathBuf;

/// A process found in `/proc`.
#[derive(Clone, Debug)]
pub(crate) struct ProcInfo {
    pub(crate) pid: i32,
    /// Its command line, spaces between the arguments.
    pub(crate) cmdline: String,
    /// What its executable is (empty if unreadable: a zombie, a kernel thread).
    pub(crate) exe: PathBuf,
    /// The node whose network namespace it is in, if any.
    pub(crate) node: Option<u32>,
}

/// Every process's pid, from `/proc`.
pub(crate) fn pids() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

fn net_inode(pid: i32) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()?;
    let text = link.to_string_lossy().into_owned();
    text.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

/// What `/proc` says of `pid`, its node found among `namespaces` (the nodes': (node number,
/// inode)); None if it is gone.
pub(crate) fn info(pid: i32, namespaces: &[(u32, u64)]) -> Option<ProcInfo> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let cmdline = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    let ino = net_inode(pid);
    let node = namespaces
        .iter()
        .find(|(_, i)| Some(*i) == ino)
        .map(|(k, _)| *k);
    Some(ProcInfo {
        pid,
        cmdline,
        exe,
        node,
    })
}

/// Every process inside one of `namespaces` (the nodes'), sshd included.
pub(crate) fn in_node_namespaces(namespaces: &[(u32, u64)]) -> Vec<ProcInfo> {
    pids()
        .into_iter()
        .filter_map(|p| info(p, namespaces))
        .filter(|p| p.node.is_some())
        .collect()
}
