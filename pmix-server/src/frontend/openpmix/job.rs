//! The job data a libpmix client is handed at init (its `REQ` request), laid out the way its
//! `hash` storage module files it: job-level keys alone, one info array for the session, one
//! per node and one per application, and one byte object per rank (`pmix.pblob`) holding that
//! rank's keys. The engine's [`JobData`] already has exactly these levels, so this is a
//! re-arrangement, not a derivation.
//!
//! What is left out on purpose: node and process maps (`PMIX_REGEX` values), which the engine
//! has already expanded into the node and rank levels (the reference server does not forward
//! them to `hash` clients either), and info arrays that the levels replace.

use pmix_types::{DataArray, DataType, Info, InfoFlags, Key, Rank, Value, attr};
use pmix_wire::{JobData, Realm};

/// The session id the reference uses when a job has none.
const NO_SESSION: u32 = u32::MAX;

/// Keys whose values are levels of their own here; a host that also gave them as job-level
/// arrays would otherwise have them twice, once in a layout the client reads differently.
const LEVEL_ARRAYS: [&str; 5] = [
    attr::SESSION_INFO_ARRAY,
    attr::JOB_INFO_ARRAY,
    attr::APP_INFO_ARRAY,
    attr::NODE_INFO_ARRAY,
    attr::PROC_DATA,
];

/// The `REQ` reply's content, before encoding.
#[derive(Debug)]
pub(crate) struct JobLayout<'a> {
    /// Top-level key/value pairs, in order (job keys, then the level arrays).
    pub(crate) top: Vec<(Key, Value)>,
    /// Each rank's own keys, for its `pmix.pblob`.
    pub(crate) procs: Vec<(Rank, &'a [Info])>,
}

fn find<'a>(infos: &'a [Info], key: &str) -> Option<&'a Value> {
    infos
        .iter()
        .find(|i| i.key.as_str() == key)
        .map(|i| &i.value)
}

fn key(s: &str) -> Option<Key> {
    Key::new(s).ok()
}

/// An info array with `first` in front when `infos` lacks it, and the last element marked
/// the way the reference marks arrays it builds.
fn info_array(first: Option<Info>, infos: &[Info]) -> Option<Value> {
    let mut items: Vec<Info> = Vec::with_capacity(infos.len() + 1);
    if let Some(f) = first {
        if find(infos, f.key.as_str()).is_none() {
            items.push(f);
        }
    }
    items.extend(
        infos
            .iter()
            .filter(|i| !matches!(i.value, Value::Regex(_)))
            .cloned(),
    );
    let n = items.len();
    let items: Vec<Value> = items
        .into_iter()
        .enumerate()
        .map(|(k, mut i)| {
            if k + 1 == n {
                i.flags = i.flags | InfoFlags::ARRAY_END;
            }
            Value::Info(Box::new(i))
        })
        .collect();
    DataArray::new(DataType::INFO, items)
        .ok()
        .map(|a| Value::DataArray(Box::new(a)))
}

/// Lays `job` out for a libpmix client.
pub(crate) fn layout(job: &JobData) -> JobLayout<'_> {
    let mut top: Vec<(Key, Value)> = job
        .job
        .iter()
        .filter(|i| !matches!(i.value, Value::Regex(_)))
        .filter(|i| !LEVEL_ARRAYS.contains(&i.key.as_str()))
        .map(|i| (i.key.clone(), i.value.clone()))
        .collect();

    if find(&job.job, attr::NODE_LIST).is_none() {
        let mut nodes: Vec<&Realm> = job.nodes.iter().collect();
        nodes.sort_by_key(|r| r.id);
        let names: Vec<&str> = nodes
            .iter()
            .filter_map(|r| find(&r.info, attr::HOSTNAME).and_then(Value::as_str))
            .collect();
        if !names.is_empty() {
            if let Some(k) = key(attr::NODE_LIST) {
                top.push((k, Value::String(names.join(","))));
            }
        }
    }

    // The client files a session array only under its id.
    let session_id = find(&job.session, attr::SESSION_ID)
        .cloned()
        .unwrap_or(Value::Uint32(NO_SESSION));
    if let (Some(k), Some(id)) = (key(attr::SESSION_INFO_ARRAY), key(attr::SESSION_ID)) {
        if let Some(v) = info_array(Some(Info::new(id, session_id)), &job.session) {
            top.push((k, v));
        }
    }
    // A node array is filed under its id or its name, an application array under its number.
    if let (Some(k), Some(id)) = (key(attr::NODE_INFO_ARRAY), key(attr::NODEID)) {
        for node in &job.nodes {
            if let Some(v) = info_array(Some(Info::new(id.clone(), node.id)), &node.info) {
                top.push((k.clone(), v));
            }
        }
    }
    if let (Some(k), Some(num)) = (key(attr::APP_INFO_ARRAY), key(attr::APPNUM)) {
        for app in &job.apps {
            if let Some(v) = info_array(Some(Info::new(num.clone(), app.id)), &app.info) {
                top.push((k.clone(), v));
            }
        }
    }

    let procs = job
        .procs
        .iter()
        .map(|p| (p.rank, p.info.as_slice()))
        .collect();
    JobLayout { top, procs }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmix_types::Nspace;
    use pmix_wire::ProcRealm;

    fn info(k: &'static str, v: impl Into<Value>) -> Info {
        Info::attr(k, v)
    }

    fn job() -> JobData {
        JobData {
            nspace: Nspace::new("j").unwrap(),
            session: vec![info(attr::UNIV_SIZE, 4u32)],
            job: vec![
                info(attr::JOB_SIZE, 2u32),
                info(attr::NODE_MAP, Value::Regex(b"raw:n0\0".to_vec())),
                info(attr::LOCAL_SIZE, 2u32),
            ],
            apps: vec![Realm {
                id: 0,
                info: vec![info(attr::APP_SIZE, 2u32)],
            }],
            nodes: vec![Realm {
                id: 0,
                info: vec![info(attr::NODEID, 0u32), info(attr::HOSTNAME, "n0")],
            }],
            procs: (0..2)
                .map(|r| ProcRealm {
                    rank: Rank(r),
                    info: vec![info(attr::LOCAL_RANK, r as u16)],
                })
                .collect(),
        }
    }

    fn array_of<'a>(l: &'a JobLayout<'_>, k: &str) -> Vec<&'a Info> {
        l.top
            .iter()
            .filter(|(key, _)| key.as_str() == k)
            .flat_map(|(_, v)| match v {
                Value::DataArray(a) => a.infos().collect::<Vec<_>>(),
                _ => Vec::new(),
            })
            .collect()
    }

    #[test]
    fn maps_are_left_out_and_levels_become_arrays() {
        let j = job();
        let l = layout(&j);
        let keys: Vec<&str> = l.top.iter().map(|(k, _)| k.as_str()).collect();
        assert!(!keys.contains(&attr::NODE_MAP), "{keys:?}");
        assert!(keys.contains(&attr::JOB_SIZE));
        assert_eq!(
            l.top
                .iter()
                .find(|(k, _)| k.as_str() == attr::NODE_LIST)
                .map(|(_, v)| v.clone()),
            Some(Value::String("n0".into()))
        );

        let session = array_of(&l, attr::SESSION_INFO_ARRAY);
        assert_eq!(session[0].key.as_str(), attr::SESSION_ID);
        assert_eq!(session[0].value, Value::Uint32(u32::MAX));
        assert_eq!(session[1].key.as_str(), attr::UNIV_SIZE);
        assert!(session[1].flags.contains(InfoFlags::ARRAY_END));
        assert!(!session[0].flags.contains(InfoFlags::ARRAY_END));

        // The node realm has its id already: not added twice.
        let node = array_of(&l, attr::NODE_INFO_ARRAY);
        assert_eq!(
            node.iter()
                .filter(|i| i.key.as_str() == attr::NODEID)
                .count(),
            1
        );
        let app = array_of(&l, attr::APP_INFO_ARRAY);
        assert_eq!(app[0].key.as_str(), attr::APPNUM);
        assert_eq!(app[0].value, Value::Uint32(0));

        assert_eq!(l.procs.len(), 2);
        assert_eq!(l.procs[1].0, Rank(1));
    }
}
