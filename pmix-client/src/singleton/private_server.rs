//! The private server a singleton starts when it spawns: `pmixrun --adopt-singleton`, which
//! registers the singleton's namespace as a job of one process, rank 0 being the singleton,
//! and serves it and every job it spawns (see `pmixrun`'s `adopt.rs`).
//!
//! **Finding pmixrun**: `PMIXRS_PMIXRUN` if set (a path: the user's explicit choice), else a
//! `pmixrun` next to this process's executable, else the first `pmixrun` on `PATH`. A found
//! one is run only if no other user could have put it there or changed it ([`Trust::path`]):
//! the file and every directory on its path (the link's and the target's) belong to this
//! process's user or root and are writable by nobody else, except a directory with the sticky
//! bit (`/tmp`), where others cannot replace what they do not own. Otherwise a singleton of
//! root in a world-writable directory would run whatever `pmixrun` another user left beside it.
//!
//! **The lifeline.** pmixrun's stdin is one end of a socket pair whose other end the
//! singleton keeps (close-on-exec, so its own children do not hold it): pmixrun writes the
//! environment `setup_fork` gave rank 0 there, `NAME=value` lines ended by an empty line,
//! and takes the end of the stream for the end of the singleton. pmixrun's stdout and
//! stderr are the singleton's, so the spawned processes' output goes where the singleton's
//! does.

use std::io::{BufRead, BufReader, Read};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hashbrown::HashMap;
use pmix_types::Proc;

use crate::Error;
use crate::env::{self, Rendezvous};
use crate::trust::Trust;

/// The variable naming the pmixrun a singleton starts.
pub(crate) const PMIXRUN_ENV: &str = "PMIXRS_PMIXRUN";

/// pmixrun's hidden mode for this.
const ADOPT_FLAG: &str = "--adopt-singleton";

/// How long pmixrun may take to say where its server is.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The most a rendezvous may take (a few hundred bytes in practice).
const MAX_RENDEZVOUS: usize = 64 << 10;

fn failed(why: impl Into<String>) -> Error {
    Error::PrivateServer(why.into())
}

/// The pmixrun to start, as the module documentation says.
pub(crate) fn find_pmixrun(
    from_env: Option<String>,
    exe: Option<PathBuf>,
    path: Option<String>,
) -> Result<PathBuf, Error> {
    if let Some(p) = from_env.filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let beside = exe
        .as_deref()
        .and_then(Path::parent)
        .map(|d| d.join("pmixrun"));
    let on_path = path
        .iter()
        .flat_map(|p| std::env::split_paths(p).collect::<Vec<_>>())
        .map(|d| d.join("pmixrun"));
    let mut refused = Vec::new();
    for p in beside.into_iter().chain(on_path).filter(|p| p.is_file()) {
        match Trust::me().path(&p) {
            Ok(()) => return Ok(p),
            Err(why) => refused.push(format!("{}: {why}", p.display())),
        }
    }
    let refused = if refused.is_empty() {
        String::new()
    } else {
        format!(
            "; refused, as another user could have placed or changed them: {}",
            refused.join("; ")
        )
    };
    Err(failed(format!(
        "no pmixrun: {PMIXRUN_ENV} is not set, none is next to this program, none is on PATH{refused}"
    )))
}

/// A started pmixrun's lifeline: dropping it lets pmixrun know the singleton is done, and
/// pmixrun ends once what it started has.
pub(crate) struct PrivateServer {
    _lifeline: UnixStream,
}

impl PrivateServer {
    /// Starts pmixrun adopting `me` and reads the rendezvous it gives.
    pub(crate) fn start(me: &Proc) -> Result<(PrivateServer, Rendezvous), Error> {
        let pmixrun = find_pmixrun(
            std::env::var(PMIXRUN_ENV).ok(),
            std::env::current_exe().ok(),
            std::env::var("PATH").ok(),
        )?;
        let (ours, theirs) =
            UnixStream::pair().map_err(|e| failed(format!("no socket pair: {e}")))?;
        let program = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "singleton".into());
        let child = Command::new(&pmixrun)
            .arg(ADOPT_FLAG)
            .arg(me.nspace.as_str())
            .arg(program)
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .spawn()
            .map_err(|e| failed(format!("cannot start {}: {e}", pmixrun.display())))?;
        let reaper = reap(child);
        let vars = match read_rendezvous(&ours) {
            Ok(v) => v,
            Err(why) => {
                drop(ours);
                // Its exit status says more than the missing rendezvous, if it has ended.
                let ended = reaper
                    .recv_timeout(Duration::from_secs(1))
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default();
                return Err(failed(format!("{}: {why}{ended}", pmixrun.display())));
            }
        };
        let rv = env::parse(&|k| vars.get(k).cloned())?;
        if rv.proc != *me {
            return Err(failed(format!(
                "pmixrun set up {} instead of {me}",
                rv.proc
            )));
        }
        Ok((PrivateServer { _lifeline: ours }, rv))
    }
}

/// Waits for pmixrun on a thread of its own, so that it leaves no zombie; the receiver hears
/// how it ended.
fn reap(mut child: Child) -> crossbeam_channel::Receiver<String> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let spawned = std::thread::Builder::new()
        .name("pmix-singleton-server".into())
        .spawn(move || {
            let how = match child.wait() {
                Ok(s) => s.to_string(),
                Err(e) => format!("cannot wait for it: {e}"),
            };
            let _ = tx.send(how);
        });
    if let Err(e) = spawned {
        tracing::warn!("pmix-client: no thread to wait for the private server: {e}");
    }
    rx
}

/// Reads `NAME=value` lines up to an empty one, within [`START_TIMEOUT`].
fn read_rendezvous(sock: &UnixStream) -> Result<HashMap<String, String>, String> {
    sock.set_read_timeout(Some(START_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(Read::take(sock, MAX_RENDEZVOUS as u64));
    let mut vars = HashMap::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) => return Err("ended before saying where its server is".into()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(format!(
                    "did not say where its server is within {} s",
                    START_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("reading where its server is: {e}")),
        }
        let line = line.trim_end_matches('\n');
        if line.is_empty() {
            break;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!("a line that is not NAME=value: {line:?}"));
        };
        vars.insert(k.to_owned(), v.to_owned());
    }
    sock.set_read_timeout(None).map_err(|e| e.to_string())?;
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmixrun_is_found_by_variable_then_beside_the_program_then_on_path() {
        let dir = std::env::temp_dir().join(format!("pmix-find-{}", std::process::id()));
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("pmixrun"), "").unwrap();
        let exe = Some(bin.join("app"));
        let elsewhere = Some(dir.join("app"));
        let path = Some(format!("/nonexistent:{}", bin.display()));
        assert_eq!(
            find_pmixrun(Some("/x/pmixrun".into()), exe.clone(), None).unwrap(),
            PathBuf::from("/x/pmixrun")
        );
        assert_eq!(find_pmixrun(None, exe, None).unwrap(), bin.join("pmixrun"));
        assert_eq!(
            find_pmixrun(Some(String::new()), elsewhere.clone(), path).unwrap(),
            bin.join("pmixrun")
        );
        let e = find_pmixrun(None, elsewhere, Some("/nonexistent".into())).unwrap_err();
        assert!(e.to_string().contains(PMIXRUN_ENV), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A pmixrun another user could have placed or changed is not run: one in a directory
    /// others may write (without the sticky bit), one others may write, one of another user
    /// (when the test can make one: as root).
    #[test]
    fn a_pmixrun_others_could_have_placed_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let set_mode = |p: &Path, mode: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let dir = std::env::temp_dir().join(format!("pmix-trust-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let pmixrun = bin.join("pmixrun");
        std::fs::write(&pmixrun, "").unwrap();
        set_mode(&pmixrun, 0o755);
        let uid = nix::unistd::geteuid().as_raw();
        let exe = Some(bin.join("app"));
        assert_eq!(find_pmixrun(None, exe.clone(), None).unwrap(), pmixrun);

        set_mode(&bin, 0o777);
        let e = find_pmixrun(None, exe.clone(), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("writable by others"), "{e}");
        // Sticky, as /tmp: others cannot replace a file they do not own.
        set_mode(&bin, 0o1777);
        assert_eq!(find_pmixrun(None, exe.clone(), None).unwrap(), pmixrun);
        set_mode(&bin, 0o755);

        set_mode(&pmixrun, 0o757);
        assert!(Trust::of(uid).path(&pmixrun).is_err());
        set_mode(&pmixrun, 0o755);

        // A link to it from a directory others may write.
        let open = dir.join("open");
        std::fs::create_dir_all(&open).unwrap();
        set_mode(&open, 0o777);
        std::os::unix::fs::symlink(&pmixrun, open.join("pmixrun")).unwrap();
        let e = Trust::of(uid).path(&open.join("pmixrun")).unwrap_err();
        assert!(e.contains("writable by others"), "{e}");

        if uid == 0 {
            nix::unistd::chown(&pmixrun, Some(nix::unistd::Uid::from_raw(1001)), None).unwrap();
            let e = find_pmixrun(None, exe, None).unwrap_err().to_string();
            assert!(e.contains("belongs to uid 1001"), "{e}");
        } else {
            // Another user's file, as seen by a third uid.
            assert!(Trust::of(uid + 1).path(&pmixrun).is_err());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_rendezvous_is_lines_up_to_an_empty_one() {
        use std::io::Write;
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(b"PMIX_RANK=0\nPMIXRS_SERVER_URI=unix:/tmp/x=y\n\nignored\n")
            .unwrap();
        let vars = read_rendezvous(&b).unwrap();
        assert_eq!(vars["PMIXRS_SERVER_URI"], "unix:/tmp/x=y");
        assert_eq!(vars.len(), 2);
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(b"PMIX_RANK=0\n").unwrap();
        drop(a);
        assert!(read_rendezvous(&b).unwrap_err().contains("ended"));
    }
}
