//! Whether a process, or one of its descendants, holds a given socket.
//!
//! A libpmix client claims its name over loopback TCP with nothing but its uid. When the host
//! says which process it started for the name, the server asks the kernel for the inode of
//! the peer's socket (`tcp_peer.rs`) and looks for it among the descriptors of that process
//! and of its descendants (a wrapper script's child, python3's): another process of the same
//! user, outside that tree, does not take the name. Linux lists a process's children in
//! `/proc/<pid>/task/<tid>/children` and its descriptors in `/proc/<pid>/fd`, a socket's as
//! `socket:[<inode>]`. The walk reads only the tree of the one process, a handful of
//! directories for a rank.

use std::collections::HashSet;
use std::fs;

/// Processes walked at most: a rank's tree is a few processes; past this the answer is
/// "cannot tell" rather than an unbounded walk.
const MAX_TREE: usize = 4096;

/// Whether process `root` or one of its descendants has a descriptor for the socket `inode`:
/// `Some(false)` if the tree was walked and none has, `None` if the system cannot tell
/// (no `/proc`, the tree too large).
pub(crate) fn holds_socket(root: u32, inode: u64) -> Option<bool> {
    if fs::metadata("/proc/self/fd").is_err() {
        return None;
    }
    let wanted = format!("socket:[{inode}]");
    let mut seen = HashSet::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if seen.len() > MAX_TREE {
            return None;
        }
        if has_descriptor(pid, &wanted) {
            return Some(true);
        }
        todo.extend(children(pid));
    }
    Some(false)
}

/// Whether process `pid` has a descriptor whose link reads `wanted`. A process that is gone
/// or not readable has none.
fn has_descriptor(pid: u32, wanted: &str) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == wanted))
}

/// The children of every thread of process `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    use std::process::{Command, Stdio};

    /// A loopback connection: the listener (kept open), the client's end and its inode.
    fn connected() -> (TcpListener, TcpStream, u64) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let c = TcpStream::connect(l.local_addr().unwrap_or_else(|e| panic!("addr: {e}")))
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let inode = fs::metadata(format!("/proc/self/fd/{}", c.as_raw_fd()))
            .map(|m| m.ino())
            .unwrap_or(0);
        (l, c, inode)
    }

    #[test]
    fn a_socket_is_found_in_its_holders_tree_and_nowhere_else() {
        if fs::metadata("/proc/self/task").is_err() {
            return;
        }
        let (_l, _c, inode) = connected();
        let me = std::process::id();
        assert_eq!(holds_socket(me, inode), Some(true));
        // A child that does not have it (descriptors are close-on-exec): not in its tree...
        let mut child = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("sleep: {e}"));
        assert_eq!(holds_socket(child.id(), inode), Some(false));
        // ... while this process's tree, the child in it, still has it.
        assert_eq!(holds_socket(me, inode), Some(true));
        // No such socket anywhere in the tree.
        assert_eq!(holds_socket(me, u64::MAX), Some(false));
        let _ = child.kill();
        let _ = child.wait();
        // A process that is gone holds nothing.
        assert_eq!(holds_socket(child.id(), inode), Some(false));
    }

    #[test]
    fn a_descendant_holding_the_socket_counts() {
        use std::io::{BufRead, BufReader};
        if fs::metadata("/proc/self/task").is_err() {
            return;
        }
        let (_l, c, inode) = connected();
        let socket: std::os::fd::OwnedFd = c.into();
        // The shell hands the socket to a child and closes its own copies, as a wrapper
        // script that starts the real program does; it says so once done.
        use std::os::unix::process::CommandExt;
        let mut sh = Command::new("sh")
            .process_group(0)
            .args([
                "-c",
                "exec 3<&0; sleep 30 <&3 & exec 3<&- </dev/null; echo ready; wait",
            ])
            .stdin(Stdio::from(socket))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("sh: {e}"));
        let mut line = String::new();
        let out = sh.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let _ = BufReader::new(out).read_line(&mut line);
        assert_eq!(line.trim(), "ready");
        let pid = sh.id();
        assert!(
            !has_descriptor(pid, &format!("socket:[{inode}]")),
            "the shell still holds the socket itself"
        );
        assert_eq!(holds_socket(pid, inode), Some(true));
        // The shell and its sleep, which would keep the socket for 30 s.
        let group = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = sh.wait();
    }
}
