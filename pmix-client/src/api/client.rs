//! [`Client`]: the handle an application holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hashbrown::HashMap;
use parking_lot::Mutex;
use pmix_types::{Info, Key, Proc, Rank, Scope, Status, Value, attr, is_reserved_key};
use pmix_wire::{Kv, Reply, ReplyBody, Request};

use crate::call::{blocking, on_status, status_result, timeout_of};
use crate::conn::{Conn, Shared};
use crate::core::get::{GetDirectives, Local, ServerGet};
use crate::handshake::JobIn;
use crate::{Error, env, singleton};

/// How long finalize waits for the server's acknowledgement before closing anyway.
const FINALIZE_WAIT: Duration = Duration::from_secs(30);

/// A connection to the local PMIx server, and the process's view of the job.
///
/// Cheap to clone (an `Arc` inside), `Send` and `Sync`: every thread of the process may use
/// the same client. Create one per process with [`Client::init`]; a second `init` while the
/// first client is initialized would open a second connection as the same process, which the
/// server refuses (`ERR_EXISTS`). After [`Client::finalize`], `init` may be called again.
///
/// **Blocking and non-blocking.** Every call that may need the server exists in a
/// non-blocking form taking a completion; the blocking form is that plus a wait, during which
/// the caller's thread reads the reply itself when no other thread is reading. Completions run
/// on whichever thread reads replies (the client's reader thread, or a thread blocked in a
/// call): they must be short, and a *blocking* call made from one fails with
/// [`Error::WouldDeadlock`] instead of waiting for the thread it runs on.
///
/// **Local answers.** Job data arrives at init and data collected by fences or returned by
/// gets is cached, so most gets are answered on the caller's thread without a message (see
/// [`Client::get`]). Those answers keep working after the connection to the server is lost;
/// everything that needs the server then fails at once with [`Error::LostConnection`].
///
/// **Finalize.** [`Client::finalize`] is idempotent. Dropping the last handle of an
/// initialized client finalizes it too (ignoring errors), so that a process that returns from
/// `main` without finalizing still tells the server its end was orderly.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    proc: Proc,
    conn: Conn,
    puts: Mutex<Puts>,
    initialized: AtomicBool,
    /// Serialises finalize so two threads finalizing at once do not both close.
    finalizing: Mutex<()>,
}

/// What was put since the last commit, in put order, a later put of a key replacing the
/// earlier one in place.
#[derive(Default)]
struct Puts {
    kvs: Vec<Option<Kv>>,
    index: HashMap<Key, usize>,
}

impl Puts {
    fn set(&mut self, kv: Kv) {
        match self.index.get(&kv.key) {
            Some(&i) => self.kvs[i] = Some(kv),
            None => {
                self.index.insert(kv.key.clone(), self.kvs.len());
                self.kvs.push(Some(kv));
            }
        }
    }

    fn remove(&mut self, key: &str) {
        if let Some(i) = self.index.remove(key) {
            self.kvs[i] = None;
        }
    }

    fn take(&mut self) -> Vec<Kv> {
        self.index.clear();
        std::mem::take(&mut self.kvs)
            .into_iter()
            .flatten()
            .collect()
    }
}

impl Client {
    /// Connects to the server that started this process, as its environment describes
    /// (`docs/PROTOCOL.md`, "Rendezvous"), and receives the job's data; or, with no server in
    /// the environment, makes this process a singleton.
    ///
    /// A pmix-rs server (`PMIXRS_SERVER_URI`) is preferred; without one, an OpenPMIx server
    /// (`PMIX_SERVER_URI41`, `4`, `3` or `21`) is spoken to in its own protocol
    /// (`docs/OPENPMIX.md`, "The client side"). A server the environment names must be there:
    /// if it cannot be reached, init fails ([`Error::Connect`], `ERR_UNREACH`) rather than
    /// carry on as a singleton, since the launcher meant the process to be part of a job; so
    /// does an environment giving `PMIX_NAMESPACE` without a server ([`Error::BadEnvironment`]).
    ///
    /// **Singleton.** With no server named at all, the process is a job of its own, as under
    /// OpenPMIx and MPICH: namespace `singleton.<host>.<pid>` (OpenPMIx's form), rank 0, job
    /// data of a one-process job on this node (`JOB_SIZE`, `UNIV_SIZE`, `LOCAL_SIZE`,
    /// `NODE_SIZE`, `MAX_PROCS` 1; `HOSTNAME`, `LOCAL_RANK`, `NODE_RANK`, `APPNUM`, ...;
    /// `SINGLETON` names the namespace). Put, commit, get, fences and connects over itself,
    /// publish, lookup (`WAIT` included) and unpublish, event registration, `PMIx_Log` to
    /// stdout or stderr, and groups of itself are answered in the process. What needs other
    /// processes or a launcher (a fence, connect, get or group naming another namespace,
    /// queries, job control) fails with `ERR_UNREACH`. [`Client::spawn`] starts a private
    /// server first (`pmixrun`, found through `PMIXRS_PMIXRUN`, next to this program, or on
    /// `PATH`), which adopts this process as rank 0 of its job; from then on the singleton
    /// is an ordinary client of that server, and the spawned processes see it as their
    /// parent (`PARENT_ID`) and read what it committed and published. Where OpenPMIx's
    /// `PMIx_Init` returns `PMIX_ERR_UNREACH` for a usable singleton, this returns `Ok`; a
    /// singleton tells itself by `SINGLETON` in its job data (its namespace), which a launched
    /// process does not have. OpenPMIx's `NODE_MAP` is not given (it needs the regex codec).
    ///
    /// **Again after finalize.** Init may be called again after [`Client::finalize`]: the
    /// process connects again under the same name (a singleton gets the same namespace) and
    /// receives its job's data afresh; what it had put must be put again.
    ///
    /// **Stop in init.** A job started to be debugged (`DEBUG_STOP_IN_INIT` in its data,
    /// `pmixrun --stop-in-init`) is held here until a tool sends `DEBUGGER_RELEASE`, as
    /// libpmix's `PMIx_Init` holds it (`docs/TOOLS.md`, "Debuggers").
    pub fn init() -> Result<Client, Error> {
        Client::init_with_env(|k| std::env::var(k).ok())
    }

    /// [`Client::init`] reading the rendezvous through `get` instead of the process
    /// environment, so tests and embedders can start several clients in one process (a `get`
    /// that knows no variable makes a singleton).
    pub fn init_with_env(get: impl Fn(&str) -> Option<String>) -> Result<Client, Error> {
        let (proc, (conn, job)) = match env::parse(&get) {
            Ok(rv) => (rv.proc.clone(), Conn::open(&rv)?),
            Err(Error::NoServer) => {
                let me = Proc::new(
                    singleton::nspace(&singleton::hostname(), std::process::id()),
                    Rank(0),
                );
                (me.clone(), singleton::open(me))
            }
            Err(e) => return Err(e),
        };
        let mut fetch = None;
        {
            let mut store = conn.shared.store_mut();
            store.set_me(proc.clone());
            match job {
                JobIn::Image(image) => store.insert_image(image),
                JobIn::Data(job) => store.insert_job(job),
                JobIn::Fetch(why) => fetch = Some(why),
            }
        }
        let client = Client {
            inner: Arc::new(Inner {
                proc,
                conn,
                puts: Mutex::new(Puts::default()),
                initialized: AtomicBool::new(true),
                finalizing: Mutex::new(()),
            }),
        };
        if let Some(why) = fetch {
            tracing::info!("pmix-client: {why}; asking for the job data instead");
            client.fetch_job(&client.inner.proc.nspace)?;
        }
        client.stop_in_init()?;
        Ok(client)
    }

    /// This process's namespace and rank.
    pub fn proc(&self) -> &Proc {
        &self.inner.proc
    }

    /// True between a successful init and finalize.
    pub fn is_initialized(&self) -> bool {
        self.inner.initialized.load(Ordering::Acquire)
    }

    /// False once the connection to the server is known to be lost (or closed by
    /// finalize): calls that need the server then fail at once.
    pub fn is_connected(&self) -> bool {
        !self.shared().is_closed()
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.inner.conn.shared
    }

    /// The shared state, for completions that outlive the call.
    pub(crate) fn shared_arc(&self) -> Arc<Shared> {
        Arc::clone(&self.inner.conn.shared)
    }

    pub(crate) fn check(&self) -> Result<(), Error> {
        if self.is_initialized() {
            Ok(())
        } else {
            Err(Error::NotInitialized)
        }
    }

    /// Refuses a blocking call on the reader thread, which would wait for itself.
    pub(crate) fn check_blocking(&self) -> Result<(), Error> {
        self.check()?;
        if self.shared().on_reader_thread() {
            return Err(Error::WouldDeadlock);
        }
        Ok(())
    }

    /// Records `key = value` for the next [`Client::commit`] (`PMIx_Put`).
    ///
    /// The value is visible to this process at once, before the commit; to others after the
    /// commit, as `scope` says: `LOCAL` to processes of this node, `REMOTE` to processes of
    /// other nodes, `GLOBAL` (or `UNDEF`) to all. `INTERNAL` is [`Client::store_internal`].
    /// A later put of the same key replaces the earlier one. Keys beginning with `pmix` are
    /// reserved for the standard's attributes and refused with `ERR_BAD_PARAM`.
    pub fn put(&self, scope: Scope, key: &str, value: impl Into<Value>) -> Result<(), Error> {
        self.check()?;
        if is_reserved_key(key) {
            return Err(Error::ReservedKey(key.to_owned()));
        }
        if scope.0 > Scope::INTERNAL.0 {
            return Err(Error::BadParam(format!("unknown scope {scope:?}")));
        }
        let key = Key::new(key).map_err(|e| Error::BadParam(e.to_string()))?;
        let value = value.into();
        let mut puts = self.inner.puts.lock();
        if scope == Scope::INTERNAL {
            puts.remove(key.as_str());
        } else {
            puts.set(Kv {
                scope,
                key: key.clone(),
                value: value.clone(),
            });
        }
        self.shared()
            .store_mut()
            .insert_data(&self.inner.proc, key, value, scope);
        Ok(())
    }

    /// Stores a value only this process will see (`PMIx_Store_internal` on itself): it is
    /// never sent to the server, and a get of this process's key returns it.
    ///
    /// Reserved `pmix` keys are refused as by [`Client::put`]: a get of a reserved key is
    /// answered from job data, so such a value could never be read back.
    pub fn store_internal(&self, key: &str, value: impl Into<Value>) -> Result<(), Error> {
        self.put(Scope::INTERNAL, key, value)
    }

    /// Sends everything put since the last commit to the server (`PMIx_Commit`) and waits
    /// for it to be stored, so that gets waiting for this process are released.
    ///
    /// The standard lets commit return before the data is sent; waiting for the
    /// acknowledgement costs one round trip and is the only way to report a refusal. Commits
    /// with nothing new are sent too: they tell the server this process has committed. If the
    /// commit fails, what it carried stays visible to this process only; put it again to
    /// retry.
    pub fn commit(&self) -> Result<(), Error> {
        self.check_blocking()?;
        blocking(self.shared(), None, |done| {
            // Held while sending so that two commits reach the server in the order their data
            // was taken.
            let mut puts = self.inner.puts.lock();
            let kvs = puts.take();
            self.shared()
                .submit(Request::Commit { kvs }, on_status(done))
        })
    }

    /// Retrieves the value of `key` published by `proc` (`PMIx_Get`).
    ///
    /// Answered on the caller's thread whenever the rules of `docs/PROTOCOL.md` allow:
    /// - keys beginning with `pmix` come from job data: rank `WILDCARD` reads the job level,
    ///   then the session level; a real rank reads that rank's proc level, then its app's, its
    ///   node's, then the job level. Qualifiers `SESSION_INFO`, `JOB_INFO`,
    ///   `APP_INFO` (+`APPNUM`), `NODE_INFO` (+`NODEID` or `HOSTNAME`) select one level; an app
    ///   or node qualifier without a number uses the target's (for `WILDCARD` in this
    ///   process's namespace, this process's). A miss is `ERR_NOT_FOUND` at once, unless the
    ///   namespace's job data has not arrived yet: then the server is asked, and its reply
    ///   brings it.
    /// - other keys of rank `WILDCARD` are looked up at the job level only (hosts may register
    ///   user keys there); a miss is `ERR_NOT_FOUND`, the server is not asked.
    /// - other keys of a process come from what this process put (all of it, at once, before
    ///   any commit) or what fences and earlier gets brought in. A miss of this process's own
    ///   key is `ERR_NOT_FOUND`; of another's, `ERR_NOT_FOUND` with `OPTIONAL`, otherwise the
    ///   server is asked (with all of `info`: `IMMEDIATE`, `TIMEOUT`, `DATA_SCOPE` are
    ///   enforced there) and all the data of that process in its reply is cached.
    ///
    /// - a key qualified by `GROUP_CONTEXT_ID` (what a member shared in `GROUP_INFO` when
    ///   that group was constructed, such as `GROUP_LOCAL_CID`) is always asked of the server,
    ///   and found only under that context id.
    ///
    /// `GET_REFRESH_CACHE` asks the server for another process's put data even when it is
    /// cached (the process may have put and committed new values since), and caches the
    /// answer; this process's own data and job data are always local. `DATA_SCOPE` restricts
    /// the answer to values put with that scope (`GLOBAL` values count
    /// as both `LOCAL` and `REMOTE`). With `TIMEOUT` the server fails the get with
    /// `ERR_TIMEOUT`; should it not answer, this call gives up one second later on its own.
    ///
    /// A string libpmix compressed when it was put (`PMIX_COMPRESSED_STRING`) comes back
    /// as the string, as libpmix's own get gives it (bounded by
    /// [`MAX_DECOMPRESSED_STRING`](crate::MAX_DECOMPRESSED_STRING)).
    pub fn get(&self, proc: &Proc, key: &str, info: &[Info]) -> Result<Value, Error> {
        self.get_blocking(proc, Some(key), info)
    }

    /// All the data `proc` put, as a [`Value::DataArray`] of [`Info`] (`PMIx_Get` with a
    /// NULL key). Job-level data is not included.
    ///
    /// Local when the store holds all of the process's data: this process's own (puts and
    /// internal values), or data a collecting fence or an earlier get brought in whole.
    /// Otherwise the server is asked, unless `OPTIONAL` is given (`ERR_NOT_FOUND`).
    pub fn get_all(&self, proc: &Proc, info: &[Info]) -> Result<Value, Error> {
        self.get_blocking(proc, None, info)
    }

    fn get_blocking(&self, proc: &Proc, key: Option<&str>, info: &[Info]) -> Result<Value, Error> {
        self.get_compressed(proc, key, info)
            .and_then(crate::decompress::readable)
    }

    /// A get whose answer may still hold compressed strings.
    fn get_compressed(
        &self,
        proc: &Proc,
        key: Option<&str>,
        info: &[Info],
    ) -> Result<Value, Error> {
        self.check()?;
        let d = GetDirectives::parse(info)?;
        if let (Some(k), Some(ctx)) = (key, context_qualifier(info)) {
            self.check_blocking()?;
            return blocking(self.shared(), d.timeout, |done| {
                self.send_qualified_get(proc, k, ctx, info, done)
            });
        }
        if let Local::Done(r) = self.shared().resolve_get(&self.inner.proc, proc, key, &d) {
            return r;
        }
        self.check_blocking()?;
        blocking(self.shared(), d.timeout, |done| {
            self.server_get(proc, key, info, done)
        })
    }

    /// [`Client::get`] (or, with no key, [`Client::get_all`]) completing through `done`
    /// (`PMIx_Get_nb`). A local answer runs `done` before this returns, on the caller's
    /// thread; a server answer runs it on the reader thread. There is no client-side backstop
    /// for `TIMEOUT` here: the server enforces it, and a lost connection completes `done`.
    pub fn get_nb(
        &self,
        proc: &Proc,
        key: Option<&str>,
        info: &[Info],
        done: impl FnOnce(Result<Value, Error>) + Send + 'static,
    ) {
        let done = move |r: Result<Value, Error>| done(r.and_then(crate::decompress::readable));
        if let Err(e) = self.check() {
            return done(Err(e));
        }
        let d = match GetDirectives::parse(info) {
            Ok(d) => d,
            Err(e) => return done(Err(e)),
        };
        if let (Some(k), Some(ctx)) = (key, context_qualifier(info)) {
            self.send_qualified_get(proc, k, ctx, info, done);
            return self.shared().kick();
        }
        match self.shared().resolve_get(&self.inner.proc, proc, key, &d) {
            Local::Done(r) => done(r),
            Local::AskServer => {
                self.server_get(proc, key, info, done);
                self.shared().kick();
            }
        }
    }

    /// Sends a Get; the completion caches the reply and answers from the store.
    /// ([`ServerGet`] says what is asked.)
    fn server_get(
        &self,
        proc: &Proc,
        key: Option<&str>,
        info: &[Info],
        done: impl FnOnce(Result<Value, Error>) + Send + 'static,
    ) -> Option<u32> {
        let asked = match ServerGet::new(proc, key) {
            Ok(a) => a,
            Err(e) => {
                done(Err(e));
                return None;
            }
        };
        let shared = Arc::clone(&self.inner.conn.shared);
        let me = self.inner.proc.clone();
        let target = proc.clone();
        let kept_info = info.to_vec();
        let req = Request::Get {
            proc: asked.ask.clone(),
            key: asked.key.clone(),
            info: info.to_vec(),
        };
        self.shared().submit(
            req,
            Box::new(move |r| {
                let result = r.and_then(|reply| {
                    let status = reply.status;
                    // Whatever the reply carries is the server's word, whatever its status
                    // (a not-found still ships the namespace's job data, once).
                    shared.ingest(reply);
                    let key = asked.key.as_ref().map(Key::as_str);
                    let local = || match GetDirectives::parse(&kept_info) {
                        Ok(d) => shared.resolve_get(&me, &target, key, &d.answered()),
                        Err(e) => Local::Done(Err(e)),
                    };
                    asked.answer(status, &target, local, || shared.has_job(&target))
                });
                done(result);
            }),
        )
    }

    /// Waits until every process of `procs` has called fence over the same set
    /// (`PMIx_Fence`). An empty list is this process's whole namespace; rank `WILDCARD`
    /// stands for a whole namespace.
    ///
    /// With `COLLECT_DATA` (default off, as the standard says, for scalability) the server
    /// returns every participant's committed data visible to this process, which is cached so
    /// that the gets that follow are local; without it, gets ask the server. With `TIMEOUT`
    /// the server fails the fence with `ERR_TIMEOUT`; should it not answer, this call gives
    /// up one second later on its own.
    pub fn fence(&self, procs: &[Proc], info: &[Info]) -> Result<(), Error> {
        self.check_blocking()?;
        blocking(self.shared(), timeout_of(info), |done| {
            self.start_fence(procs, info, done)
        })
    }

    /// [`Client::fence`] completing through `done` (`PMIx_Fence_nb`); `done` runs on the
    /// reader thread (or at once, on the caller's, if the request cannot be sent).
    pub fn fence_nb(
        &self,
        procs: &[Proc],
        info: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) {
        if let Err(e) = self.check() {
            return done(Err(e));
        }
        self.start_fence(procs, info, done);
        self.shared().kick();
    }

    fn start_fence(
        &self,
        procs: &[Proc],
        info: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) -> Option<u32> {
        let shared = Arc::clone(&self.inner.conn.shared);
        self.shared().submit(
            Request::Fence {
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

    /// Asks the host to abort `procs` (empty: this whole namespace) with `status`
    /// (`PMIx_Abort`). The reply comes once the host has acted, so a caller among `procs` may
    /// be killed before this returns.
    pub fn abort(&self, status: Status, message: &str, procs: &[Proc]) -> Result<(), Error> {
        let reply = self.request(Request::Abort {
            status,
            message: message.to_owned(),
            procs: procs.to_vec(),
        })?;
        status_result(&reply)
    }

    /// Tells the server this process is done (`PMIx_Finalize`), waits for its answer, then
    /// closes the connection and joins the reader thread. Later calls fail with
    /// [`Error::NotInitialized`]; calling it again does nothing.
    ///
    /// The connection is closed even when the server's answer is an error, is lost, or does
    /// not come within 30 seconds; the error is then returned. Event handlers are dropped
    /// first: none runs after finalize has begun.
    pub fn finalize(&self) -> Result<(), Error> {
        self.finalize_with(&[])
    }

    /// [`Client::finalize`] with directives (`PMIx_Finalize`'s `info`): `PMIX_EMBED_BARRIER`
    /// (true, or given without a boolean) first joins a fence without data over this
    /// process's namespace, so that no process of it finalizes before all have come this far.
    /// The fence's failure (a process of the namespace gone) does not stop the finalize, as
    /// in libpmix; the other directives go to the server.
    pub fn finalize_with(&self, info: &[Info]) -> Result<(), Error> {
        if self.is_initialized() && embeds_barrier(info) {
            let all = [Proc::new(self.proc().nspace.clone(), Rank::WILDCARD)];
            if let Err(e) = self.fence(&all, &[]) {
                tracing::debug!("pmix-client: the barrier of finalize failed: {e}");
            }
        }
        let info: Vec<Info> = info
            .iter()
            .filter(|i| i.key.as_str() != attr::EMBED_BARRIER)
            .cloned()
            .collect();
        self.inner.finalize(info)
    }

    /// Sends any request and waits for its reply: for requests this crate has no dedicated
    /// call for (every native request has one today), or to see a reply as it came.
    ///
    /// Returns the reply whatever its status: only failing to get one (a lost connection,
    /// a call from a completion callback) is an `Err`. Data the reply carries (a Get's or a
    /// Connect's process and job data, a fence's collection) is cached as for the dedicated
    /// calls.
    pub fn request(&self, req: Request) -> Result<Reply, Error> {
        self.check_blocking()?;
        blocking(self.shared(), None, |done| self.request_nb_inner(req, done))
    }

    /// [`Client::request`] completing through `done`, on the reader thread.
    pub fn request_nb(
        &self,
        req: Request,
        done: impl FnOnce(Result<Reply, Error>) + Send + 'static,
    ) {
        if let Err(e) = self.check() {
            return done(Err(e));
        }
        self.request_nb_inner(req, done);
        self.shared().kick();
    }

    fn request_nb_inner(
        &self,
        req: Request,
        done: impl FnOnce(Result<Reply, Error>) + Send + 'static,
    ) -> Option<u32> {
        let shared = Arc::clone(&self.inner.conn.shared);
        self.shared().submit_whole(
            req,
            Box::new(move |r| {
                if let Ok(reply) = &r {
                    if matches!(
                        reply.body,
                        ReplyBody::Get { .. } | ReplyBody::Fence { .. } | ReplyBody::Connect { .. }
                    ) {
                        shared.ingest(reply.clone());
                    }
                }
                done(r)
            }),
        )
    }
}

impl Inner {
    fn finalize(&self, info: Vec<Info>) -> Result<(), Error> {
        let _one = self.finalizing.lock();
        if !self.initialized.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let shared = &self.conn.shared;
        // No handler hears of the connection ending: that is the point of finalize. Dropping
        // them also ends any cycle of a handler owning a handle of this client.
        for _ in 0..shared.events.clear() {
            shared.listen(false);
        }
        let result = if shared.on_reader_thread() {
            // Waiting here would wait for this very thread; say goodbye and go.
            shared.submit(Request::Finalize { info }, Box::new(|_| {}));
            Ok(())
        } else {
            blocking(shared, Some(FINALIZE_WAIT), |done| {
                shared.submit(Request::Finalize { info }, on_status(done))
            })
        };
        self.conn.close();
        result
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.initialized.load(Ordering::Acquire) {
            if let Err(e) = self.finalize(Vec::new()) {
                tracing::debug!("pmix-client: finalize on drop: {e}");
            }
        } else {
            // Already finalized: the connection is closed and the reader joined, but make
            // sure of it should finalize have been cut short.
            self.conn.close();
        }
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("proc", &self.inner.proc)
            .field("initialized", &self.is_initialized())
            .finish()
    }
}

/// The context id a Get is qualified by, if any.
fn context_qualifier(info: &[Info]) -> Option<u64> {
    info.iter()
        .find(|i| i.key.as_str() == pmix_types::attr::GROUP_CONTEXT_ID)
        .and_then(|i| i.value.as_u64())
}

/// Whether finalize's `info` asks for a barrier first (`PMIX_EMBED_BARRIER`: true, or present
/// with a value that is not a boolean, as libpmix reads it).
fn embeds_barrier(info: &[Info]) -> bool {
    info.iter()
        .find(|i| i.key.as_str() == attr::EMBED_BARRIER)
        .is_some_and(|i| i.flag().unwrap_or(true))
}
