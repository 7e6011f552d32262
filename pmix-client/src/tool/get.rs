//! `PMIx_Get` in a tool: the data of a job that the primary server holds, as a client gets
//! it, by the same rules ([`crate::Client::get`]): what an earlier answer brought is read from
//! the connection's store, anything else is asked of the server with a Get, whose answer (the
//! process's data and its namespace's job data) the store keeps.

use pmix_types::{Info, Proc, Value};
use pmix_wire::Request;

use super::Tool;
use crate::Error;
use crate::core::get::{GetDirectives, Local, ServerGet};

impl Tool {
    /// The value of `key` for `proc` (`PMIx_Get`; with no key, all `proc` put, as
    /// [`crate::Client::get_all`]), from the primary server.
    ///
    /// Keys beginning with `pmix` are job data (rank `WILDCARD`: the job level; a rank: its
    /// own, then its app's, node's and job's), other keys what a process committed. A
    /// pmix-rs server answers a tool at once and never waits for a process to commit (the
    /// tool is no part of any job): data not committed yet is `ERR_NOT_FOUND`. What this
    /// tool's own name has is what its server holds for it (OpenPMIx servers register a
    /// namespace for their tools; pmix-rs servers none: `ERR_NOT_FOUND`).
    pub fn get(&mut self, proc: &Proc, key: Option<&str>, info: &[Info]) -> Result<Value, Error> {
        let me = self.proc().cloned().ok_or(Error::NotInitialized)?;
        let d = GetDirectives::parse(info)?;
        if let Local::Done(r) = self
            .primary_link()?
            .core_mut()
            .resolve_get_unpacked(&me, proc, key, &d)
        {
            return r;
        }
        let asked = ServerGet::new(proc, key)?;
        let reply = self.request(Request::Get {
            proc: asked.ask.clone(),
            key: asked.key.clone(),
            info: info.to_vec(),
        })?;
        let status = reply.status;
        let core = self.primary_link()?.core_mut();
        // Whatever the reply carries is the server's word, whatever its status.
        core.ingest(reply);
        let key = asked.key.as_ref().map(pmix_types::Key::as_str);
        let d = d.answered();
        let local = core.resolve_get_unpacked(&me, proc, key, &d);
        asked.answer(status, proc, || local, || core.has_job(proc))
    }
}
