//! Asking the server and its host (`PMIx_Query_info`, `PMIx_Log`, `PMIx_Job_control`): calls
//! answered by the server's tables or by the host behind it, never by the local store.

use pmix_types::{Info, Proc, Status};
use pmix_wire::{Query, ReplyBody, Request};

use crate::call::{blocking, on_status, timeout_of};
use crate::{Client, Error};

/// Refuses what the server would refuse, before sending anything.
fn check_queries(queries: &[Query]) -> Result<(), Error> {
    if queries.is_empty() || queries.iter().any(|q| q.keys.is_empty()) {
        return Err(Error::BadParam("a query needs at least one key".into()));
    }
    Ok(())
}

fn check_log(data: &[Info]) -> Result<(), Error> {
    if data.is_empty() {
        return Err(Error::BadParam("nothing to log".into()));
    }
    Ok(())
}

fn check_job_control(directives: &[Info]) -> Result<(), Error> {
    if directives.is_empty() {
        return Err(Error::BadParam("job control without directives".into()));
    }
    Ok(())
}

/// The `TIMEOUT` of a query: among any query's qualifiers.
fn queries_timeout(queries: &[Query]) -> Option<std::time::Duration> {
    queries.iter().find_map(|q| timeout_of(&q.qualifiers))
}

impl Client {
    /// Asks the server for information (`PMIx_Query_info`): one [`Info`] per key answered,
    /// keyed by the query key.
    ///
    /// A pmix-rs server answers itself the namespaces it serves (`QUERY_NAMESPACES`), the
    /// process sets a job's data names (`QUERY_NUM_PSETS`, `QUERY_PSET_NAMES`), its functions
    /// and attributes (`SERVER_FUNCTIONS`, `QUERY_SUPPORTED_KEYS`, `QUERY_ATTRIBUTE_SUPPORT`
    /// with a `SERVER_ATTRIBUTES` or `SERVER_FUNCTIONS` qualifier: `REGATTR`s by function)
    /// and job-level keys of a namespace (`NSPACE` qualifier, else this job), and passes the
    /// rest (process tables, job status, ...) to its host. When only some keys could be
    /// answered (the server returned `QUERY_PARTIAL_SUCCESS`), those come back and the others
    /// are missing; when none could, the server's status is the error
    /// (`ERR_NOT_SUPPORTED`, `ERR_NOT_FOUND`). Answers are never cached: every call asks.
    /// No query, or one without keys, is [`Error::BadParam`] without a message to the server.
    pub fn query(&self, queries: &[Query]) -> Result<Vec<Info>, Error> {
        self.check_blocking()?;
        check_queries(queries)?;
        blocking(self.shared(), queries_timeout(queries), |done| {
            self.send_query(queries, done)
        })
    }

    /// [`Client::query`] completing through `done` (`PMIx_Query_info_nb`); `done` runs on the
    /// reader thread, or at once on the caller's if the call is refused before sending.
    pub fn query_nb(
        &self,
        queries: &[Query],
        done: impl FnOnce(Result<Vec<Info>, Error>) + Send + 'static,
    ) {
        if let Err(e) = self.check().and_then(|()| check_queries(queries)) {
            return done(Err(e));
        }
        self.send_query(queries, done);
        self.shared().kick();
    }

    fn send_query(
        &self,
        queries: &[Query],
        done: impl FnOnce(Result<Vec<Info>, Error>) + Send + 'static,
    ) -> Option<u32> {
        self.shared().submit(
            Request::Query {
                queries: queries.to_vec(),
            },
            Box::new(move |r| {
                done(r.and_then(|reply| match (reply.status, reply.body) {
                    (
                        Status::SUCCESS | Status::QUERY_PARTIAL_SUCCESS,
                        ReplyBody::Query { results },
                    ) => Ok(results),
                    (Status::SUCCESS, _) => Ok(Vec::new()),
                    (status, _) => Err(Error::from_status(status)),
                }))
            }),
        )
    }

    /// Logs `data` through the server's host (`PMIx_Log`): each entry names a channel and
    /// what to write there, e.g. `Info::attr(attr::LOG_STDERR, "text")`. The server names
    /// this process as the source (`LOG_SOURCE`); `directives` pass through (`TIMEOUT` also
    /// bounds the wait). pmixrun writes `LOG_STDERR` and `LOG_STDOUT` entries on its own
    /// stderr, tagged with the source. A host that serves none of the channels answers
    /// `ERR_NOT_SUPPORTED` ([`Error::Server`]). Nothing to log is [`Error::BadParam`].
    pub fn log(&self, data: &[Info], directives: &[Info]) -> Result<(), Error> {
        self.check_blocking()?;
        check_log(data)?;
        blocking(self.shared(), timeout_of(directives), |done| {
            self.send_log(data, directives, done)
        })
    }

    /// [`Client::log`] completing through `done` (`PMIx_Log_nb`).
    pub fn log_nb(
        &self,
        data: &[Info],
        directives: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) {
        if let Err(e) = self.check().and_then(|()| check_log(data)) {
            return done(Err(e));
        }
        self.send_log(data, directives, done);
        self.shared().kick();
    }

    fn send_log(
        &self,
        data: &[Info],
        directives: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) -> Option<u32> {
        self.shared().submit(
            Request::Log {
                data: data.to_vec(),
                directives: directives.to_vec(),
            },
            on_status(done),
        )
    }

    /// Acts on processes (`PMIx_Job_control`): `targets` are processes, a whole namespace
    /// with rank `WILDCARD`, or this job when empty; `directives` say what to do.
    ///
    /// `JOB_CTRL_KILL`, `JOB_CTRL_TERMINATE` and `JOB_CTRL_SIGNAL` (an int) go to the host
    /// (pmixrun carries them out; their ends do not fail the run). Cleanup registrations
    /// (`REGISTER_CLEANUP` files, `REGISTER_CLEANUP_DIR` directories with
    /// `CLEANUP_RECURSIVE`, `CLEANUP_IGNORE`, `CLEANUP_LEAVE_TOPDIR`) are kept by a pmix-rs
    /// server, which removes those paths (what this process's uid and gid own) when the
    /// targets' job ends. A directive the host does not carry out is
    /// `ERR_NOT_SUPPORTED` ([`Error::Server`]), never a silent success. No directives is
    /// [`Error::BadParam`] without a message to the server.
    pub fn job_control(&self, targets: &[Proc], directives: &[Info]) -> Result<(), Error> {
        self.check_blocking()?;
        check_job_control(directives)?;
        blocking(self.shared(), timeout_of(directives), |done| {
            self.send_job_control(targets, directives, done)
        })
    }

    /// [`Client::job_control`] completing through `done` (`PMIx_Job_control_nb`). A process
    /// that kills its own job may not live to see `done` run.
    pub fn job_control_nb(
        &self,
        targets: &[Proc],
        directives: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) {
        if let Err(e) = self.check().and_then(|()| check_job_control(directives)) {
            return done(Err(e));
        }
        self.send_job_control(targets, directives, done);
        self.shared().kick();
    }

    fn send_job_control(
        &self,
        targets: &[Proc],
        directives: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) -> Option<u32> {
        self.shared().submit(
            Request::JobControl {
                targets: targets.to_vec(),
                directives: directives.to_vec(),
            },
            on_status(done),
        )
    }
}
