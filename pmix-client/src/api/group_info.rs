//! Reading what members shared in a group's construction (`GROUP_INFO`, such as
//! `GROUP_LOCAL_CID`): a Get qualified by the group's `GROUP_CONTEXT_ID`, always asked of the
//! server, whose answer is a `QUALIFIED_VALUE` (the value's info followed by its qualifiers).

use pmix_types::{Info, Key, Proc, Status, Value, attr};
use pmix_wire::{Reply, ReplyBody, Request};

use crate::{Client, Error};

/// The value of `key` among the qualified values of a reply, under context id `ctx`.
fn qualified_value(reply: Reply, key: &str, ctx: u64) -> Result<Value, Error> {
    if reply.status != Status::SUCCESS {
        return Err(Error::from_status(reply.status));
    }
    let ReplyBody::Get { data, .. } = reply.body else {
        return Err(Error::Protocol(format!(
            "a qualified get answered with {:?}",
            reply.body
        )));
    };
    data.into_iter()
        .flat_map(|p| p.kvs)
        .filter(|kv| kv.key.as_str() == attr::QUALIFIED_VALUE)
        .find_map(|kv| {
            let Value::DataArray(a) = kv.value else {
                return None;
            };
            let mut infos = a.infos();
            let primary = infos.next()?;
            let under = infos
                .any(|q| q.key.as_str() == attr::GROUP_CONTEXT_ID && q.value.as_u64() == Some(ctx));
            (primary.key.as_str() == key && under).then(|| primary.value.clone())
        })
        .ok_or_else(|| Error::from_status(Status::ERR_NOT_FOUND))
}

impl Client {
    /// Sends a Get of `key` of `proc` qualified by context id `ctx`; the request's id, or
    /// `None` when `done` ran at once (a malformed key).
    pub(crate) fn send_qualified_get(
        &self,
        proc: &Proc,
        key: &str,
        ctx: u64,
        info: &[Info],
        done: impl FnOnce(Result<Value, Error>) + Send + 'static,
    ) -> Option<u32> {
        let wire_key = match Key::new(key) {
            Ok(k) => k,
            Err(e) => {
                done(Err(Error::BadParam(e.to_string())));
                return None;
            }
        };
        let key = key.to_owned();
        self.shared().submit(
            Request::Get {
                proc: proc.clone(),
                key: Some(wire_key),
                info: info.to_vec(),
            },
            Box::new(move |r| done(r.and_then(|reply| qualified_value(reply, &key, ctx)))),
        )
    }
}
