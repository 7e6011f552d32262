//! Listing the servers a tool could attach to on this node: every pid rendezvous file
//! (`pmix.<host>.tool.<pid>`) under the temporary directory, as `pmixps` shows them.

use std::path::PathBuf;

use pmix_wire::openpmix::rendezvous::{Contact, pid_file_name};

use super::Tool;
use super::find::{MAX_DEPTH, native_beside, walk};
use crate::trust::Trust;

/// A server's pid file, as found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerFile {
    /// The server's pid (its file's name).
    pub pid: u32,
    /// The file.
    pub path: PathBuf,
    /// What it says: the URI, version, pid and ids.
    pub contact: Contact,
    /// A pmix-rs server's native socket, next to the file (`None`: an OpenPMIx server, such
    /// as PRRTE's `prterun`).
    pub native: Option<PathBuf>,
}

impl ServerFile {
    /// How to attach to this server: its native socket when it has one, else its URI.
    pub fn attach(&self) -> super::Attach {
        match &self.native {
            Some(s) => super::Attach::Uri(format!("unix:{}", s.display())),
            None => super::Attach::Uri(self.contact.uri.clone()),
        }
    }
}

impl Tool {
    /// The servers of this node whose pid files this tool can read (its user's, or
    /// everyone's for root), by pid. A file a killed server left is listed too: attaching to
    /// it fails.
    pub fn list_servers(&self) -> Vec<ServerFile> {
        let prefix = pid_file_name(&self.hostname, 0);
        let prefix = prefix.trim_end_matches('0');
        let pid_of = |name: &str| -> Option<u32> {
            let digits = name.strip_prefix(prefix)?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            digits.parse().ok()
        };
        let mut files = Vec::new();
        let trust = Trust::me();
        walk(
            &self.tmpdir,
            &|n| pid_of(n).is_some(),
            MAX_DEPTH,
            &trust,
            &mut files,
        );
        let mut out: Vec<ServerFile> = files
            .into_iter()
            .filter_map(|path| {
                let pid = pid_of(path.file_name()?.to_str()?)?;
                let contact = Contact::parse(&std::fs::read_to_string(&path).ok()?)?;
                let native = native_beside(&path, &trust);
                Some(ServerFile {
                    pid,
                    path,
                    contact,
                    native,
                })
            })
            .collect();
        out.sort_by(|a, b| (a.pid, &a.path).cmp(&(b.pid, &b.path)));
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::tool::ToolOptions;

    #[test]
    fn pid_files_of_this_host_are_listed_with_their_sockets() {
        let (top, srv, text, _l) = crate::tool::find::two_servers("pmixrs-list");
        // The namespace file (there), another host's and a stray name are not pid files.
        std::fs::write(srv.join("pmix.other.tool.8"), text).unwrap();
        std::fs::write(srv.join("pmix.h.tool.9x"), text).unwrap();
        let tool = Tool::init_with(ToolOptions {
            tmpdir: Some(top.clone()),
            hostname: Some("h".into()),
            ..ToolOptions::default()
        })
        .unwrap();
        let found = tool.list_servers();
        let pids: Vec<u32> = found.iter().map(|f| f.pid).collect();
        assert_eq!(pids, [7, 70]);
        assert_eq!(found[0].native, Some(srv.join("server.sock")));
        assert_eq!(
            found[0].attach(),
            crate::tool::Attach::Uri(format!("unix:{}", srv.join("server.sock").display()))
        );
        assert_eq!(found[1].native, None);
        assert_eq!(found[1].contact.uri, "prte@0.0;tcp4://127.0.0.1:6");
        std::fs::remove_dir_all(&top).unwrap();
    }
}
