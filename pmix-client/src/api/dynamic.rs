//! Dynamic processes: starting a new job (`PMIx_Spawn`), connecting jobs so that they can
//! read each other's data (`PMIx_Connect`, `PMIx_Disconnect`), and finding where a job's
//! processes run (`PMIx_Resolve_peers`, `PMIx_Resolve_nodes`).
//!
//! The launching is the host's and the collectives are the server's; the client checks the
//! arguments, passes the directives through, and takes in what a connect brings (the other
//! jobs' job data and every participant's committed data) so that the gets that follow are
//! answered locally.

use pmix_types::{Info, Nspace, Proc, Rank, Status, attr};
use pmix_wire::{App, Reply, ReplyBody, Request};

use crate::call::{blocking, on_status, status_result, timeout_of};
use crate::{Client, Error};

/// An application context of one process of `cmd`, its argv `[cmd]`, in the parent's working
/// directory, with no environment or directives added; [`AppExt`] adds them.
///
/// ```
/// use pmix_client::{AppExt, app};
///
/// let worker = app("./worker", 2).with_arg("--port").with_env("MODE", "child");
/// assert_eq!(worker.argv, ["./worker", "--port"]);
/// assert_eq!(worker.maxprocs, 2);
/// ```
pub fn app(cmd: impl Into<String>, maxprocs: u32) -> App {
    let cmd = cmd.into();
    App {
        argv: vec![cmd.clone()],
        cmd,
        env: Vec::new(),
        cwd: String::new(),
        maxprocs,
        info: Vec::new(),
    }
}

/// Builder methods for [`App`] (which lives in `pmix-wire`); start from [`app`].
pub trait AppExt: Sized {
    /// Appends one argument to argv.
    fn with_arg(self, arg: impl Into<String>) -> Self;
    /// Appends arguments to argv.
    fn with_args<I, S>(self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>;
    /// Adds `name=value` to the environment the processes start with.
    fn with_env(self, name: &str, value: &str) -> Self;
    /// Sets the working directory (empty: the parent's).
    fn with_cwd(self, dir: impl Into<String>) -> Self;
    /// Adds a per-app directive.
    fn with_info(self, info: Info) -> Self;
}

impl AppExt for App {
    fn with_arg(mut self, arg: impl Into<String>) -> Self {
        self.argv.push(arg.into());
        self
    }

    fn with_args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.argv.extend(args.into_iter().map(Into::into));
        self
    }

    fn with_env(mut self, name: &str, value: &str) -> Self {
        self.env.push(format!("{name}={value}"));
        self
    }

    fn with_cwd(mut self, dir: impl Into<String>) -> Self {
        self.cwd = dir.into();
        self
    }

    fn with_info(mut self, info: Info) -> Self {
        self.info.push(info);
        self
    }
}

/// Refuses what the server would refuse, before anything is sent.
fn check_apps(apps: &[App]) -> Result<(), Error> {
    if apps.is_empty() {
        return Err(Error::BadParam("spawn with no application".into()));
    }
    for (n, a) in apps.iter().enumerate() {
        if a.cmd.is_empty() {
            return Err(Error::BadParam(format!("spawn: app {n} has no command")));
        }
    }
    Ok(())
}

fn check_procs(call: &str, procs: &[Proc]) -> Result<(), Error> {
    if procs.is_empty() {
        return Err(Error::BadParam(format!("{call} with no processes")));
    }
    Ok(())
}

/// `TIMEOUT` or `SPAWN_TIMEOUT` of a spawn's job directives.
fn spawn_timeout(job_info: &[Info]) -> Option<std::time::Duration> {
    let spawn = job_info
        .iter()
        .rev()
        .find(|i| i.key.as_str() == attr::SPAWN_TIMEOUT)
        .and_then(|i| i.value.as_i64())
        .filter(|s| *s > 0)
        .map(|s| std::time::Duration::from_secs(s.unsigned_abs()));
    spawn.or_else(|| timeout_of(job_info))
}

fn spawn_result(reply: Reply) -> Result<Nspace, Error> {
    match (reply.status, reply.body) {
        (Status::SUCCESS, ReplyBody::Spawn { nspace }) => Ok(nspace),
        (Status::SUCCESS, other) => Err(Error::Protocol(format!(
            "a successful spawn reply names no namespace: {other:?}"
        ))),
        (status, _) => Err(Error::from_status(status)),
    }
}

impl Client {
    /// Starts a new job of the application contexts `apps` (`PMIx_Spawn`) and returns its
    /// namespace once the host has launched it (not when it ends).
    ///
    /// `job_info` (job-level directives) and each app's `info` are passed to the host as is;
    /// the children find this process in `PARENT_ID` and `SPAWNED` set. A job that cannot
    /// start fails with the host's status, e.g. `ERR_JOB_EXE_NOT_FOUND`
    /// ([`Error::Server`]); this process carries on. No apps or an app without a command is
    /// [`Error::BadParam`] without a message to the server; an app with `maxprocs` 0 is the
    /// host's to count (pmixrun: debugger daemons mapped `ppr:N:node`) or refuse.
    ///
    /// Launching may take long: this waits as long as the connection lives, unless
    /// `job_info` has `SPAWN_TIMEOUT` or `TIMEOUT` (seconds), after which (plus a second's
    /// margin for the server's own answer) it gives up with [`Error::Timeout`]; the job may
    /// still start then.
    ///
    /// A singleton (a process started without a server, [`Client::init`]) first starts its
    /// private server: `pmixrun`, from `PMIXRS_PMIXRUN`, next to this program or on `PATH`,
    /// which adopts this process as rank 0 of its job and launches the children; the call
    /// (and its `_nb` twin) waits on the caller's thread for pmixrun to say where its server
    /// is (at most 30 s). If it cannot, the spawn fails with [`Error::PrivateServer`]
    /// (`ERR_UNREACH`) and the process stays a singleton.
    pub fn spawn(&self, job_info: &[Info], apps: &[App]) -> Result<Nspace, Error> {
        self.check_blocking()?;
        check_apps(apps)?;
        blocking(self.shared(), spawn_timeout(job_info), |done| {
            self.send_spawn(job_info, apps, done)
        })
    }

    /// [`Client::spawn`] completing through `done` (`PMIx_Spawn_nb`); `done` runs on the
    /// reader thread, or at once on the caller's if the call is refused before sending. There
    /// is no client-side timeout: the host and the server enforce theirs, and a lost
    /// connection completes `done`.
    pub fn spawn_nb(
        &self,
        job_info: &[Info],
        apps: &[App],
        done: impl FnOnce(Result<Nspace, Error>) + Send + 'static,
    ) {
        if let Err(e) = self.check().and_then(|()| check_apps(apps)) {
            return done(Err(e));
        }
        self.send_spawn(job_info, apps, done);
        self.shared().kick();
    }

    fn send_spawn(
        &self,
        job_info: &[Info],
        apps: &[App],
        done: impl FnOnce(Result<Nspace, Error>) + Send + 'static,
    ) -> Option<u32> {
        self.shared().submit(
            Request::Spawn {
                job_info: job_info.to_vec(),
                apps: apps.to_vec(),
            },
            Box::new(move |r| done(r.and_then(spawn_result))),
        )
    }

    /// Connects this process with `procs` (`PMIx_Connect`): a collective that completes when
    /// every participant has called it with the same list. Rank `WILDCARD` stands for a whole
    /// namespace; the list must include this process.
    ///
    /// Afterwards the job data of the other namespaces and the committed data of every
    /// participant are in the local store: a get of the other side's job-level keys (rank
    /// `WILDCARD`, e.g. `JOB_SIZE`) or of what its processes committed before the connect is
    /// answered without a message. The jobs stay connected until they disconnect: each hears
    /// of the other's processes that end without finalizing (`ERR_PROC_TERM_WO_SYNC`).
    ///
    /// A participant that ends before connecting fails the call for everyone with
    /// `ERR_PROC_TERM_WO_SYNC`. `info` is passed to the server (`TIMEOUT`, in seconds, also
    /// gives up on the client's side a second after it). A connect and a fence over the same
    /// processes are different collectives. No processes is [`Error::BadParam`] without a
    /// message to the server.
    pub fn connect(&self, procs: &[Proc], info: &[Info]) -> Result<(), Error> {
        self.check_blocking()?;
        check_procs("connect", procs)?;
        blocking(self.shared(), timeout_of(info), |done| {
            self.send_connect(procs, info, done)
        })
    }

    /// [`Client::connect`] completing through `done` (`PMIx_Connect_nb`); `done` runs on the
    /// reader thread once the data is in the store, or at once on the caller's if the call is
    /// refused before sending.
    pub fn connect_nb(
        &self,
        procs: &[Proc],
        info: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) {
        if let Err(e) = self.check().and_then(|()| check_procs("connect", procs)) {
            return done(Err(e));
        }
        self.send_connect(procs, info, done);
        self.shared().kick();
    }

    fn send_connect(
        &self,
        procs: &[Proc],
        info: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) -> Option<u32> {
        let shared = self.shared_arc();
        self.shared().submit(
            Request::Connect {
                procs: procs.to_vec(),
                info: info.to_vec(),
            },
            Box::new(move |r| {
                done(r.and_then(|reply| {
                    let result = status_result(&reply);
                    shared.ingest(reply);
                    result
                }))
            }),
        )
    }

    /// Undoes a connect with `procs` (`PMIx_Disconnect`): a collective over the same list as
    /// the connect. The data the connect brought stays readable.
    ///
    /// `info` is passed to the server (`TIMEOUT` as for [`Client::connect`]). No processes is
    /// [`Error::BadParam`] without a message to the server.
    pub fn disconnect(&self, procs: &[Proc], info: &[Info]) -> Result<(), Error> {
        self.check_blocking()?;
        check_procs("disconnect", procs)?;
        blocking(self.shared(), timeout_of(info), |done| {
            self.send_disconnect(procs, info, done)
        })
    }

    /// [`Client::disconnect`] completing through `done` (`PMIx_Disconnect_nb`); `done` runs
    /// on the reader thread, or at once on the caller's if the call is refused before
    /// sending.
    pub fn disconnect_nb(
        &self,
        procs: &[Proc],
        info: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) {
        if let Err(e) = self.check().and_then(|()| check_procs("disconnect", procs)) {
            return done(Err(e));
        }
        self.send_disconnect(procs, info, done);
        self.shared().kick();
    }

    fn send_disconnect(
        &self,
        procs: &[Proc],
        info: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) -> Option<u32> {
        self.shared().submit(
            Request::Disconnect {
                procs: procs.to_vec(),
                info: info.to_vec(),
            },
            on_status(done),
        )
    }

    /// The processes of `nspace` on the node named `node`, or on this process's node when
    /// `None` (`PMIx_Resolve_peers`), ascending by rank; empty when none runs there.
    ///
    /// Answered from the namespace's job data: the node's `LOCAL_PEERS`, else the ranks
    /// whose job data names the node, else, for this node, the job-level `LOCAL_PEERS`. When
    /// that job data is not here (a namespace this process has not connected with or read
    /// from), the server is asked for it once (a `Get` of the namespace's job level), and the
    /// answer comes from what it sends; a namespace the server does not know is
    /// `ERR_NOT_FOUND`.
    pub fn resolve_peers(&self, node: Option<&str>, nspace: &Nspace) -> Result<Vec<Proc>, Error> {
        self.check()?;
        let here = self.hostname();
        let host = node.or(here.as_deref());
        let at_home = node.is_none() || node == here.as_deref();
        let ask = |c: &Client| {
            c.shared()
                .store()
                .ranks_on(nspace.as_str(), host, at_home)
                .map_err(Error::Protocol)
        };
        let ranks = match ask(self)? {
            Some(r) => r,
            None => {
                self.fetch_job(nspace)?;
                ask(self)?.unwrap_or_default()
            }
        };
        Ok(ranks
            .into_iter()
            .map(|r| Proc::new(nspace.clone(), r))
            .collect())
    }

    /// The hostnames of the nodes running processes of `nspace` (`PMIx_Resolve_nodes`), in
    /// node order.
    ///
    /// Answered from the namespace's job data (`NODE_LIST`, else the nodes it describes that
    /// run any of its processes, else the hostnames of its processes), which is asked of the
    /// server as for [`Client::resolve_peers`] when it is not here.
    pub fn resolve_nodes(&self, nspace: &Nspace) -> Result<Vec<String>, Error> {
        self.check()?;
        let here = self.hostname();
        let ask = |c: &Client| {
            c.shared()
                .store()
                .nodes_of(nspace.as_str(), here.as_deref())
        };
        match ask(self) {
            Some(nodes) => Ok(nodes),
            None => {
                self.fetch_job(nspace)?;
                Ok(ask(self).unwrap_or_default())
            }
        }
    }

    /// This process's node, as its job data names it.
    fn hostname(&self) -> Option<String> {
        let me = self.proc();
        self.shared()
            .store()
            .hostname_of(me.nspace.as_str(), me.rank)
    }

    /// Asks the server for the job data of `nspace` (which it ships with any answer about the
    /// namespace's job level) and takes it in.
    pub(crate) fn fetch_job(&self, nspace: &Nspace) -> Result<(), Error> {
        self.check_blocking()?;
        let shared = self.shared_arc();
        let status = blocking(self.shared(), None, |done| {
            self.shared().submit(
                Request::Get {
                    proc: Proc::new(nspace.clone(), Rank::WILDCARD),
                    key: None,
                    info: Vec::new(),
                },
                Box::new(move |r| {
                    done(r.map(|reply| {
                        let status = reply.status;
                        shared.ingest(reply);
                        status
                    }))
                }),
            )
        })?;
        if self
            .shared()
            .has_job(&Proc::new(nspace.clone(), Rank::WILDCARD))
        {
            Ok(())
        } else if status == Status::SUCCESS {
            Err(Error::Protocol(format!(
                "the server sent no job data for {nspace}"
            )))
        } else {
            Err(Error::from_status(status))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn app_builder_fills_every_field() {
        let a = app("/bin/w", 3)
            .with_args(["-x", "1"])
            .with_arg("y")
            .with_env("A", "b=c")
            .with_cwd("/tmp")
            .with_info(Info::attr(attr::TIMEOUT, 4i32));
        assert_eq!(a.cmd, "/bin/w");
        assert_eq!(a.argv, ["/bin/w", "-x", "1", "y"]);
        assert_eq!(a.env, ["A=b=c"]);
        assert_eq!(a.cwd, "/tmp");
        assert_eq!(a.maxprocs, 3);
        assert_eq!(a.info.len(), 1);
    }

    #[test]
    fn apps_are_checked() {
        assert!(matches!(check_apps(&[]), Err(Error::BadParam(_))));
        assert!(matches!(check_apps(&[app("", 1)]), Err(Error::BadParam(_))));
        let e = check_apps(&[app("a", 1), app("", 2)]).unwrap_err();
        assert!(e.to_string().contains("app 1"), "{e}");
        assert_eq!(e.status(), Status::ERR_BAD_PARAM);
        check_apps(&[app("a", 1)]).unwrap();
        // No count: the host's to derive (debugger daemons mapped ppr:N:node) or refuse.
        check_apps(&[app("a", 0)]).unwrap();
    }

    #[test]
    fn spawn_replies_map_onto_results() {
        let ns = Nspace::new("child").unwrap();
        let ok = Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Spawn { nspace: ns.clone() },
        };
        assert_eq!(spawn_result(ok).unwrap(), ns);
        let e = spawn_result(Reply::status(Status::ERR_JOB_EXE_NOT_FOUND)).unwrap_err();
        assert_eq!(e.status(), Status::ERR_JOB_EXE_NOT_FOUND);
        let e = spawn_result(Reply::status(Status::SUCCESS)).unwrap_err();
        assert!(matches!(e, Error::Protocol(_)), "{e:?}");
    }

    #[test]
    fn spawn_timeout_prefers_the_spawn_directive() {
        let t = |v: Vec<Info>| spawn_timeout(&v).map(|d| d.as_secs());
        assert_eq!(t(vec![]), None);
        assert_eq!(t(vec![Info::attr(attr::TIMEOUT, 5i32)]), Some(5));
        assert_eq!(
            t(vec![
                Info::attr(attr::TIMEOUT, 5i32),
                Info::attr(attr::SPAWN_TIMEOUT, 7i32)
            ]),
            Some(7)
        );
        assert_eq!(t(vec![Info::attr(attr::SPAWN_TIMEOUT, 0i32)]), None);
    }
}
