//! `PMIxClient`, the class scripts use, with python3-pmix's method names, arguments and
//! results: statuses as integers (`PMIX_SUCCESS` is 0), results as `(rc, value)` tuples.
//!
//! Every call that may wait for the server lets go of the GIL while it waits, so other Python
//! threads run (and event handlers, which take the GIL on the client's reader thread).
//! Arguments Python gets wrong (a list that is not one, a key too long, a number out of
//! range) raise `TypeError` or `ValueError` before anything is sent.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use pmix_client::types::{App, DataRange, DataType, Key, Query, Scope, Status};
use pmix_client::{Client, Error, HandlerId};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::{
    bad, infos_from, infos_to, key, nspace, pair, pdata_to, proc_from, proc_to, procs_from,
    procs_to, text, texts_from, value_from, value_to,
};
use crate::events::python_handler;

/// The status an outcome stands for.
fn status_of<T>(r: &Result<T, Error>) -> Status {
    match r {
        Ok(_) => Status::SUCCESS,
        Err(e) => e.status(),
    }
}

/// A PMIx client (`PMIx_Init` .. `PMIx_Finalize`) for this process.
#[pyclass(name = "PMIxClient", module = "pmix")]
pub(crate) struct PmixClient {
    client: Mutex<Option<Client>>,
    /// The handlers registered, by the number this class handed out for them.
    handlers: Mutex<HashMap<u64, HandlerId>>,
    next_handler: AtomicU64,
}

impl PmixClient {
    /// The client, once `init` succeeded and until `finalize`.
    fn client(&self) -> Result<Client, Status> {
        let guard = self.client.lock().map_err(|_| Status::ERR_INIT)?;
        guard.clone().ok_or(Status::ERR_INIT)
    }

    /// Runs `f` on the client without the GIL and gives its status.
    fn call<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Client) -> Result<T, Error> + Send,
    ) -> Result<T, Status> {
        let c = self.client()?;
        py.detach(|| f(&c)).map_err(|e| e.status())
    }
}

/// A client call over processes and info (`Client::connect`, `Client::disconnect`).
type OverProcs =
    fn(&Client, &[pmix_client::types::Proc], &[pmix_client::types::Info]) -> Result<(), Error>;

/// The status of an outcome as python3-pmix returns it.
fn rc<T>(r: Result<T, Status>) -> i32 {
    match r {
        Ok(_) => Status::SUCCESS.0,
        Err(s) => s.0,
    }
}

#[pymethods]
impl PmixClient {
    #[new]
    fn new() -> Self {
        PmixClient {
            client: Mutex::new(None),
            handlers: Mutex::new(HashMap::new()),
            next_handler: AtomicU64::new(1),
        }
    }

    /// init(info=[]) -> (rc, {'nspace': .., 'rank': ..}): connects to the server that started
    /// this process (`PMIx_Init`); a process started by none becomes a singleton. The info
    /// list is checked but not used.
    #[pyo3(signature = (info=None))]
    fn init<'py>(
        &self,
        py: Python<'py>,
        info: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        infos_from(info)?;
        if let Ok(c) = self.client() {
            return pair(py, Status::SUCCESS, proc_to(py, c.proc())?.into_any());
        }
        let r = py.detach(Client::init);
        let status = status_of(&r);
        match r {
            Ok(c) => {
                let me = proc_to(py, c.proc())?;
                *self
                    .client
                    .lock()
                    .map_err(|_| bad("the client's lock is poisoned"))? = Some(c);
                pair(py, status, me.into_any())
            }
            Err(_) => pair(py, status, PyDict::new(py).into_any()),
        }
    }

    /// initialized() -> bool: whether `init` succeeded and `finalize` has not run.
    fn initialized(&self) -> bool {
        self.client().is_ok_and(|c| c.is_initialized())
    }

    /// get_version() -> str: this library's name and version ("pmix-rs 0.1.0").
    fn get_version(&self) -> &'static str {
        pmix_client::version()
    }

    /// finalize(info=[]) -> rc (`PMIx_Finalize`): handlers are dropped, the connection closed;
    /// `PMIX_EMBED_BARRIER` first joins a barrier of the namespace.
    #[pyo3(signature = (info=None))]
    fn finalize(&self, py: Python<'_>, info: Option<&Bound<'_, PyAny>>) -> PyResult<i32> {
        let info = infos_from(info)?;
        let r = self.call(py, |c| c.finalize_with(&info));
        if r.is_ok() {
            if let Ok(mut g) = self.client.lock() {
                *g = None;
            }
            if let Ok(mut h) = self.handlers.lock() {
                h.clear();
            }
        }
        Ok(rc(r))
    }

    /// abort(status, msg, procs=[]) -> rc (`PMIx_Abort`): asks the launcher to end `procs`
    /// (this job when empty) with `status`.
    #[pyo3(signature = (status, msg, procs=None))]
    fn abort(
        &self,
        py: Python<'_>,
        status: i32,
        msg: &Bound<'_, PyAny>,
        procs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<i32> {
        let msg = text(msg, "the abort message")?;
        let procs = procs_from(procs)?;
        Ok(rc(self.call(py, |c| c.abort(Status(status), &msg, &procs))))
    }

    /// put(scope, key, {'value': .., 'val_type': ..}) -> rc (`PMIx_Put`).
    fn put(
        &self,
        py: Python<'_>,
        scope: u8,
        ky: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<i32> {
        let k = key(ky)?;
        let v = value_from(value)?;
        Ok(rc(self.call(py, |c| c.put(Scope(scope), k.as_str(), v))))
    }

    /// store_internal(proc, key, value) -> rc (`PMIx_Store_internal`), for this process only.
    fn store_internal(
        &self,
        py: Python<'_>,
        proc: &Bound<'_, PyAny>,
        ky: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<i32> {
        let k = key(ky)?;
        let v = value_from(value)?;
        if !proc.is_none() {
            let target = proc_from(proc)?;
            if self.client().is_ok_and(|c| *c.proc() != target) {
                return Ok(Status::ERR_NOT_SUPPORTED.0);
            }
        }
        Ok(rc(self.call(py, |c| c.store_internal(k.as_str(), v))))
    }

    /// commit() -> rc (`PMIx_Commit`).
    fn commit(&self, py: Python<'_>) -> i32 {
        rc(self.call(py, |c| c.commit()))
    }

    /// fence(procs=[], info=[]) -> rc (`PMIx_Fence`); no procs is this whole job.
    #[pyo3(signature = (procs=None, info=None))]
    fn fence(
        &self,
        py: Python<'_>,
        procs: Option<&Bound<'_, PyAny>>,
        info: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<i32> {
        let procs = procs_from(procs)?;
        let info = infos_from(info)?;
        Ok(rc(self.call(py, |c| c.fence(&procs, &info))))
    }

    /// get(proc, key, info=[]) -> (rc, {'value': .., 'val_type': ..} or None) (`PMIx_Get`);
    /// `proc` None is this process.
    #[pyo3(signature = (proc, ky, info=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        proc: &Bound<'py, PyAny>,
        ky: &Bound<'py, PyAny>,
        info: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let k = key(ky)?;
        let info = infos_from(info)?;
        let target = if proc.is_none() {
            None
        } else {
            Some(proc_from(proc)?)
        };
        let r = self.call(py, |c| {
            c.get(target.as_ref().unwrap_or(c.proc()), k.as_str(), &info)
        });
        match r {
            Ok(v) => pair(py, Status::SUCCESS, value_to(py, &v)?.into_any()),
            Err(s) => pair(py, s, py.None().into_bound(py)),
        }
    }

    /// publish(data, info=[]) -> rc (`PMIx_Publish`): `data` is a list of info dicts.
    #[pyo3(signature = (data, info=None))]
    fn publish(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        info: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<i32> {
        let data = infos_from(Some(data))?;
        let info = infos_from(info)?;
        Ok(rc(self.call(py, |c| c.publish(&data, &info))))
    }

    /// lookup(pdata, info=[]) -> (rc, [{'proc', 'key', 'value', 'val_type'}, ..])
    /// (`PMIx_Lookup`): `pdata` is a list of dicts with a 'key' each; the answer has one
    /// dict per key found.
    #[pyo3(signature = (pdata, info=None))]
    fn lookup<'py>(
        &self,
        py: Python<'py>,
        pdata: &Bound<'py, PyAny>,
        info: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let keys = pdata
            .try_iter()?
            .map(|d| {
                let d = d?;
                let k = d
                    .get_item("key")
                    .map_err(|_| bad(format!("a lookup entry has no 'key': {d}")))?;
                Ok(key(&k)?.as_str().to_owned())
            })
            .collect::<PyResult<Vec<String>>>()?;
        let info = infos_from(info)?;
        let r = self.call(py, |c| {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            c.lookup(&keys, &info)
        });
        let found = PyList::empty(py);
        let status = match r {
            Ok(all) => {
                for p in all.iter().filter(|p| p.is_found()) {
                    found.append(pdata_to(py, p)?)?;
                }
                Status::SUCCESS
            }
            Err(s) => s,
        };
        pair(py, status, found.into_any())
    }

    /// unpublish(keys, info=[]) -> rc (`PMIx_Unpublish`); no keys is all of this process's.
    #[pyo3(signature = (keys=None, info=None))]
    fn unpublish(
        &self,
        py: Python<'_>,
        keys: Option<&Bound<'_, PyAny>>,
        info: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<i32> {
        let keys = texts_from(keys, "a key")?;
        for k in &keys {
            Key::new(k).map_err(|e| bad(format!("bad key {k:?}: {e}")))?;
        }
        let info = infos_from(info)?;
        Ok(rc(self.call(py, |c| {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            c.unpublish(&keys, &info)
        })))
    }

    /// spawn(job_info, apps) -> (rc, nspace) (`PMIx_Spawn`): each app a dict with 'cmd' and
    /// optional 'argv', 'env' (["NAME=value", ..]), 'cwd', 'maxprocs' (default 1), 'info'.
    fn spawn<'py>(
        &self,
        py: Python<'py>,
        job_info: &Bound<'py, PyAny>,
        apps: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let job_info = infos_from(Some(job_info))?;
        let apps = apps
            .try_iter()?
            .map(|a| app_from(&a?))
            .collect::<PyResult<Vec<App>>>()?;
        match self.call(py, |c| c.spawn(&job_info, &apps)) {
            Ok(ns) => pair(
                py,
                Status::SUCCESS,
                ns.as_str().into_pyobject(py)?.into_any(),
            ),
            Err(s) => pair(py, s, py.None().into_bound(py)),
        }
    }

    /// connect(procs, info=[]) -> rc (`PMIx_Connect`).
    #[pyo3(signature = (procs=None, info=None))]
    fn connect(
        &self,
        py: Python<'_>,
        procs: Option<&Bound<'_, PyAny>>,
        info: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<i32> {
        self.over_procs(py, procs, info, Client::connect)
    }

    /// disconnect(procs, info=[]) -> rc (`PMIx_Disconnect`).
    #[pyo3(signature = (procs=None, info=None))]
    fn disconnect(
        &self,
        py: Python<'_>,
        procs: Option<&Bound<'_, PyAny>>,
        info: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<i32> {
        self.over_procs(py, procs, info, Client::disconnect)
    }

    /// resolve_peers(node, nspace) -> (rc, [proc, ..]) (`PMIx_Resolve_peers`): the
    /// processes of `nspace` (this job when None) on `node` (this node when None).
    #[pyo3(signature = (node=None, nspace=None))]
    fn resolve_peers<'py>(
        &self,
        py: Python<'py>,
        node: Option<&Bound<'py, PyAny>>,
        nspace: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let node = match node {
            Some(n) if !n.is_none() => Some(text(n, "a node name")?),
            _ => None,
        };
        let ns = self.nspace_or_mine(nspace)?;
        match self.call(py, |c| {
            let ns = ns.unwrap_or_else(|| c.proc().nspace.clone());
            c.resolve_peers(node.as_deref(), &ns)
        }) {
            Ok(peers) => pair(py, Status::SUCCESS, procs_to(py, &peers)?.into_any()),
            Err(s) => pair(py, s, PyList::empty(py).into_any()),
        }
    }

    /// resolve_nodes(nspace) -> (rc, "node1,node2,..") (`PMIx_Resolve_nodes`); this job when
    /// None.
    #[pyo3(signature = (nspace=None))]
    fn resolve_nodes<'py>(
        &self,
        py: Python<'py>,
        nspace: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ns = self.nspace_or_mine(nspace)?;
        let r = self.call(py, |c| {
            let ns = ns.unwrap_or_else(|| c.proc().nspace.clone());
            c.resolve_nodes(&ns)
        });
        match r {
            Ok(nodes) => pair(
                py,
                Status::SUCCESS,
                nodes.join(",").into_pyobject(py)?.into_any(),
            ),
            Err(s) => pair(py, s, "".into_pyobject(py)?.into_any()),
        }
    }

    /// query(queries) -> (rc, [info, ..]) (`PMIx_Query_info`): each query a dict
    /// {'keys': [..], 'qualifiers': [info, ..]}.
    fn query<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let queries = queries
            .try_iter()?
            .map(|q| query_from(&q?))
            .collect::<PyResult<Vec<Query>>>()?;
        match self.call(py, |c| c.query(&queries)) {
            Ok(results) => pair(py, Status::SUCCESS, infos_to(py, &results)?.into_any()),
            Err(s) => pair(py, s, PyList::empty(py).into_any()),
        }
    }

    /// log(data, directives=[]) -> rc (`PMIx_Log`).
    #[pyo3(signature = (data, directives=None))]
    fn log(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        directives: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<i32> {
        let data = infos_from(Some(data))?;
        let directives = infos_from(directives)?;
        Ok(rc(self.call(py, |c| c.log(&data, &directives))))
    }

    /// job_control(targets, directives) -> (rc, []) (`PMIx_Job_control`).
    fn job_control<'py>(
        &self,
        py: Python<'py>,
        targets: &Bound<'py, PyAny>,
        directives: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let targets = procs_from(Some(targets))?;
        let directives = infos_from(Some(directives))?;
        let r = self.call(py, |c| c.job_control(&targets, &directives));
        pair(py, Status(rc(r)), PyList::empty(py).into_any())
    }

    /// register_event_handler(codes, info, hdlr) -> (rc, id)
    /// (`PMIx_Register_event_handler`): `hdlr(id, status, source, info, results)` runs, with
    /// the GIL, for each event of one of `codes` (every code when empty or None).
    fn register_event_handler<'py>(
        &self,
        py: Python<'py>,
        codes: &Bound<'py, PyAny>,
        info: &Bound<'py, PyAny>,
        hdlr: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if !hdlr.is_callable() {
            return Err(bad("the event handler must be callable"));
        }
        let codes: Vec<Status> = if codes.is_none() {
            Vec::new()
        } else {
            codes
                .extract::<Vec<i32>>()?
                .into_iter()
                .map(Status)
                .collect()
        };
        let info = infos_from(Some(info))?;
        let id = self.next_handler.fetch_add(1, Ordering::Relaxed);
        let handler = python_handler(id, hdlr.clone().unbind());
        match self.call(py, |c| c.register_event_handler(&codes, &info, handler)) {
            Ok(hid) => {
                self.handlers
                    .lock()
                    .map_err(|_| bad("the handler table's lock is poisoned"))?
                    .insert(id, hid);
                pair(py, Status::SUCCESS, id.into_pyobject(py)?.into_any())
            }
            Err(s) => pair(py, s, (-1i64).into_pyobject(py)?.into_any()),
        }
    }

    /// deregister_event_handler(id) -> rc (`PMIx_Deregister_event_handler`).
    fn deregister_event_handler(&self, py: Python<'_>, id: u64) -> PyResult<i32> {
        let hid = self
            .handlers
            .lock()
            .map_err(|_| bad("the handler table's lock is poisoned"))?
            .remove(&id);
        match hid {
            Some(hid) => Ok(rc(self.call(py, |c| c.deregister_event_handler(hid)))),
            None => Ok(Status::ERR_BAD_PARAM.0),
        }
    }

    /// notify_event(status, source, range, info) -> rc (`PMIx_Notify_event`). The source is
    /// always this process, whatever `source` says.
    fn notify_event(
        &self,
        py: Python<'_>,
        status: i32,
        source: &Bound<'_, PyAny>,
        range: u8,
        info: &Bound<'_, PyAny>,
    ) -> PyResult<i32> {
        if !source.is_none() {
            proc_from(source)?;
        }
        let info = infos_from(Some(info))?;
        Ok(rc(self.call(py, |c| {
            c.notify_event(Status(status), DataRange(range), &info)
        })))
    }

    /// error_string(rc) -> str: the standard's name of a status ("PMIX_ERR_NOT_FOUND").
    fn error_string(&self, status: i32) -> String {
        match Status(status).name() {
            Some(n) => format!("PMIX_{n}"),
            None => format!("PMIX status {status}"),
        }
    }

    /// data_type_string(type) -> str: the standard's name of a data type ("PMIX_STRING").
    fn data_type_string(&self, ty: u16) -> String {
        match DataType(ty).name() {
            Some(n) => format!("PMIX_{n}"),
            None => format!("PMIX data type {ty}"),
        }
    }
}

impl PmixClient {
    /// A call over processes and info (connect, disconnect), this job when none are given.
    fn over_procs(
        &self,
        py: Python<'_>,
        procs: Option<&Bound<'_, PyAny>>,
        info: Option<&Bound<'_, PyAny>>,
        f: OverProcs,
    ) -> PyResult<i32> {
        let procs = self.procs_or_my_job(procs)?;
        let info = infos_from(info)?;
        Ok(rc(self.call(py, |c| f(c, &procs, &info))))
    }

    /// The processes given, or this process's whole job when none are (as python3-pmix).
    fn procs_or_my_job(
        &self,
        procs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<pmix_client::types::Proc>> {
        let procs = procs_from(procs)?;
        if !procs.is_empty() {
            return Ok(procs);
        }
        Ok(match self.client() {
            Ok(c) => vec![pmix_client::types::Proc::new(
                c.proc().nspace.clone(),
                pmix_client::types::Rank::WILDCARD,
            )],
            Err(_) => procs,
        })
    }

    /// The namespace given, or None for this process's own.
    fn nspace_or_mine(
        &self,
        ns: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<pmix_client::types::Nspace>> {
        match ns {
            Some(n) if !n.is_none() => {
                let s = text(n, "a namespace")?;
                if s.is_empty() {
                    Ok(None)
                } else {
                    nspace(n).map(Some)
                }
            }
            _ => Ok(None),
        }
    }
}

/// An app dict of `spawn`.
fn app_from(obj: &Bound<'_, PyAny>) -> PyResult<App> {
    let cmd = obj
        .get_item("cmd")
        .map_err(|_| bad(format!("an app has no 'cmd': {obj}")))?;
    let mut app = pmix_client::app(text(&cmd, "an app's cmd")?, 1);
    let opt = |name: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        match obj.get_item(name) {
            Ok(v) if !v.is_none() => Ok(Some(v)),
            _ => Ok(None),
        }
    };
    if let Some(argv) = opt("argv")? {
        app.argv = texts_from(Some(&argv), "an argument")?;
    }
    if let Some(env) = opt("env")? {
        app.env = texts_from(Some(&env), "an environment entry")?;
    }
    if let Some(cwd) = opt("cwd")? {
        app.cwd = text(&cwd, "an app's cwd")?;
    }
    if let Some(n) = opt("maxprocs")? {
        app.maxprocs = n
            .extract()
            .map_err(|_| bad(format!("an app's maxprocs must be a count, not {n}")))?;
    }
    if let Some(info) = opt("info")? {
        app.info = infos_from(Some(&info))?;
    }
    Ok(app)
}

/// A query dict, {'keys': [..], 'qualifiers': [info, ..]}.
fn query_from(obj: &Bound<'_, PyAny>) -> PyResult<Query> {
    let keys = obj
        .get_item("keys")
        .map_err(|_| bad(format!("a query has no 'keys': {obj}")))?;
    let keys = keys
        .try_iter()?
        .map(|k| key(&k?))
        .collect::<PyResult<Vec<Key>>>()?;
    let qualifiers = match obj.get_item("qualifiers") {
        Ok(q) => infos_from(Some(&q))?,
        Err(_) => Vec::new(),
    };
    Ok(Query { keys, qualifiers })
}
