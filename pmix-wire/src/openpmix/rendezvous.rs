//! The rendezvous files of OpenPMIx servers (`pmix_ptl_base`): how a tool finds a server it
//! was not started by. The names, and the five lines each holds; where they lie and who
//! writes them is the server's and the tool's business (`docs/TOOLS.md`).

/// The file by which tools find the server of pid `pid` on `host`. Tools look for a file
/// whose name *starts* with this, in their temporary directory and below it.
pub fn pid_file_name(host: &str, pid: u32) -> String {
    format!("pmix.{host}.tool.{pid}")
}

/// The file by which tools find the server of namespace `nspace` on `host`.
pub fn nspace_file_name(host: &str, nspace: &str) -> String {
    format!("pmix.{host}.tool.{nspace}")
}

/// The system server's file on `host`, at the top of the system temporary directory.
pub fn system_file_name(host: &str) -> String {
    format!("pmix.sys.{host}")
}

/// What a rendezvous file says of its server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contact {
    /// Its URI, `<nspace>.<rank>;tcp4://<address>:<port>`.
    pub uri: String,
    /// The OpenPMIx version it speaks (`4.2.2`; some write `v5.0.11`), if the file says.
    pub version: Option<String>,
    /// Its pid, if the file says.
    pub pid: Option<u32>,
    /// Its effective uid and gid, if the file says.
    pub ids: Option<(u32, u32)>,
}

impl Contact {
    /// The file's text: URI, version, pid, `<uid>:<gid>`, and `stamp` (the reference writes
    /// the time there; readers skip it).
    pub fn to_text(&self, stamp: &str) -> String {
        let mut t = format!("{}\n", self.uri);
        t.push_str(&format!("{}\n", self.version.as_deref().unwrap_or("")));
        t.push_str(&format!("{}\n", self.pid.unwrap_or(0)));
        let (u, g) = self.ids.unwrap_or((0, 0));
        t.push_str(&format!("{u}:{g}\n{stamp}\n"));
        t
    }

    /// Reads a file's text; `None` if it has no URI line. Lines after the URI are optional,
    /// as the reference reads only the first two.
    pub fn parse(text: &str) -> Option<Contact> {
        let mut lines = text.lines().map(str::trim);
        let uri = lines.next().filter(|u| u.contains(';'))?.to_owned();
        let version = lines.next().filter(|v| !v.is_empty()).map(str::to_owned);
        let pid = lines.next().and_then(|p| p.parse().ok());
        let ids = lines.next().and_then(|l| {
            let (u, g) = l.split_once(':')?;
            Some((u.parse().ok()?, g.parse().ok()?))
        });
        Some(Contact {
            uri,
            version,
            pid,
            ids,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_text_round_trip() {
        assert_eq!(pid_file_name("n1", 42), "pmix.n1.tool.42");
        assert_eq!(
            nspace_file_name("n1", "prterun-n1-42@0"),
            "pmix.n1.tool.prterun-n1-42@0"
        );
        assert_eq!(system_file_name("n1"), "pmix.sys.n1");
        let c = Contact {
            uri: "srv.0;tcp4://127.0.0.1:5".into(),
            version: Some("4.2.2".into()),
            pid: Some(42),
            ids: Some((1000, 100)),
        };
        let text = c.to_text("Thu Nov 26 01:00:00 2026");
        assert_eq!(
            text,
            "srv.0;tcp4://127.0.0.1:5\n4.2.2\n42\n1000:100\nThu Nov 26 01:00:00 2026\n"
        );
        assert_eq!(Contact::parse(&text), Some(c));
        // A file with the URI alone (the reference's URI files) is read too.
        let bare = Contact::parse("srv.0;tcp4://127.0.0.1:5\n").map(|c| c.uri);
        assert_eq!(bare.as_deref(), Some("srv.0;tcp4://127.0.0.1:5"));
        assert_eq!(Contact::parse(""), None);
        assert_eq!(Contact::parse("garbage\n"), None);
    }
}
