//! What members share when they construct a group (`GROUP_INFO`, such as Open MPI's
//! `GROUP_LOCAL_CID`), and how it is read back.
//!
//! Each member's `GROUP_INFO` (a data array of infos) is kept while the construction is under
//! way, travels with its node's contribution when members live on other nodes, and once the
//! group has a context id is stored for that member under it, as OpenPMIx does: a member's
//! value is read with `PMIx_Get(member, key)` qualified by `GROUP_CONTEXT_ID` (an info
//! flagged as a qualifier). The answer carries it as libpmix stores such values: a
//! `QUALIFIED_VALUE` entry, a data array of the value's info followed by the qualifier's.
//! Without a context id nothing is stored (nothing could name it). The values outlive the
//! group, as in OpenPMIx, and go with their member's namespace.

use std::collections::HashMap;

use pmix_types::{DataArray, DataType};
use pmix_types::{Info, Key, Proc, Scope, Status, Value, attr};
use pmix_wire::{Kv, ProcKvs, Reply, ReplyBody};

use super::{ConnId, Engine};

/// The info of members, stored and pending.
#[derive(Debug, Default)]
pub(super) struct GroupInfo {
    /// `GROUP_INFO` of members whose construction of group (number) is under way.
    pending: HashMap<(u32, Proc), Vec<Info>>,
    /// Stored values: by member, each under the context id of its group.
    stored: HashMap<Proc, Vec<(u64, Info)>>,
}

/// The members' infos of a `GROUP_INFO` directive.
fn shared_infos(info: &[Info]) -> Option<Vec<Info>> {
    let i = info.iter().find(|i| i.key.as_str() == attr::GROUP_INFO)?;
    match &i.value {
        Value::DataArray(a) => Some(a.infos().cloned().collect()),
        _ => None,
    }
}

/// The context id a Get is qualified by.
pub(super) fn context_qualifier(info: &[Info]) -> Option<u64> {
    info.iter()
        .find(|i| i.key.as_str() == attr::GROUP_CONTEXT_ID)
        .and_then(|i| i.value.as_u64())
}

impl GroupInfo {
    /// A member entered the construction of group `gid` with `info`.
    pub(super) fn arrived(&mut self, gid: u32, me: &Proc, info: &[Info]) {
        if let Some(infos) = shared_infos(info) {
            self.pending.insert((gid, me.clone()), infos);
        }
    }

    /// The pending info of group `gid`'s members, taken.
    pub(super) fn take(&mut self, gid: u32) -> Vec<(Proc, Vec<Info>)> {
        let keys: Vec<(u32, Proc)> = self
            .pending
            .keys()
            .filter(|(g, _)| *g == gid)
            .cloned()
            .collect();
        keys.into_iter()
            .filter_map(|k| self.pending.remove(&k).map(|v| (k.1, v)))
            .collect()
    }

    /// Drops what is pending for group `gid` (its id is forgotten).
    pub(super) fn forget(&mut self, gid: u32) {
        self.pending.retain(|(g, _), _| *g != gid);
    }

    /// Stores every member's info under `context_id`, replacing values of the same key.
    pub(super) fn store(&mut self, context_id: u64, members: Vec<(Proc, Vec<Info>)>) {
        for (p, infos) in members {
            let mine = self.stored.entry(p).or_default();
            for i in infos {
                mine.retain(|(c, old)| !(*c == context_id && old.key == i.key));
                mine.push((context_id, i));
            }
        }
    }

    /// The value member `p` shared as `key` in the group of `context_id`.
    fn find(&self, p: &Proc, context_id: u64, key: &str) -> Option<&Info> {
        self.stored
            .get(p)?
            .iter()
            .find(|(c, i)| *c == context_id && i.key.as_str() == key)
            .map(|(_, i)| i)
    }

    /// Forgets the values of namespace `ns`'s members.
    pub(super) fn purge_nspace(&mut self, ns: &str) {
        self.stored.retain(|p, _| p.nspace.as_str() != ns);
    }

    /// The answer to a Get of `target`'s `key` qualified by `GROUP_CONTEXT_ID` in `info`,
    /// from the members' group info; `None` when the Get is not one.
    fn answer(&self, target: &Proc, key: Option<&Key>, info: &[Info]) -> Option<Reply> {
        let (Some(ctx), Some(key)) = (context_qualifier(info), key) else {
            return None;
        };
        let Some(found) = self.find(target, ctx, key.as_str()) else {
            return Some(Reply::status(Status::ERR_NOT_FOUND));
        };
        let pair = vec![
            Value::Info(Box::new(found.clone())),
            Value::Info(Box::new(
                Info::attr(attr::GROUP_CONTEXT_ID, Value::Size(ctx)).qualifier(),
            )),
        ];
        let Ok(array) = DataArray::new(DataType::INFO, pair) else {
            return Some(Reply::status(Status::ERR_NOT_FOUND));
        };
        let qualified = Info::attr(attr::QUALIFIED_VALUE, Value::DataArray(Box::new(array)));
        let kv = Kv {
            scope: Scope::GLOBAL,
            key: qualified.key,
            value: qualified.value,
        };
        let body = ReplyBody::Get {
            data: vec![ProcKvs {
                proc: target.clone(),
                kvs: vec![kv],
            }],
            jobs: Vec::new(),
        };
        Some(Reply {
            status: Status::SUCCESS,
            body,
        })
    }
}

impl Engine {
    /// A Get qualified by `GROUP_CONTEXT_ID`: answered from the members' group info, at once.
    /// `false` when the Get is not one.
    pub(super) fn get_group_info(
        &mut self,
        conn: ConnId,
        id: u32,
        target: &Proc,
        key: Option<&Key>,
        info: &[Info],
    ) -> bool {
        match self.groups.info.answer(target, key, info) {
            Some(reply) => {
                self.reply(conn, id, reply);
                true
            }
            None => false,
        }
    }
}
