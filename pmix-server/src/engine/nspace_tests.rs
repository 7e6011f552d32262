//! The derived job data against the eager derivation it replaced (kept below as `eager`,
//! unchanged but for the map type and the no-data case the engine used to apply), for map
//! shapes, apps, offsets and host-given overrides.

use std::sync::Arc;

use pmix_types::{DataArray, Info, Nspace, Proc, Rank, Value, attr};
use pmix_wire::JobData;

use super::{Locale, find, map_text, register};

/// The registration as it was built before job data became lazy: everything at once.
mod eager {
    use pmix_types::{Info, Nspace, Rank, Value, attr};
    use pmix_wire::job_image::join_ranks;
    use pmix_wire::{JobData, ProcRealm, Realm};

    use crate::Error;
    use crate::engine::anl_map;
    use crate::engine::nspace::{
        Ctx, Levels, Locale, add_missing, find, has, parse_maps, parse_rank_list, per_namespace,
    };

    pub(super) struct Registration {
        pub(super) job: JobData,
        pub(super) size: u32,
        pub(super) local_ranks: Vec<Rank>,
    }

    /// Builds the registration of one namespace.
    pub(super) fn register(
        nspace: &Nspace,
        nlocalprocs: u32,
        info: &[Info],
        locale: &Locale<'_>,
    ) -> Result<Registration, Error> {
        let mut lv = Levels::default();
        lv.walk(info, Ctx::Job)?;

        let maps = match (find(&lv.job, attr::NODE_MAP), find(&lv.job, attr::PROC_MAP)) {
            (Some(n), Some(p)) => Some(parse_maps(n, p).map(|m| (m.names, m.ppn))?),
            (None, None) => None,
            _ => {
                return Err(Error::BadRegistration(
                    "PMIX_NODE_MAP and PMIX_PROC_MAP must be given together".into(),
                ));
            }
        };

        let size = match find(&lv.job, attr::JOB_SIZE) {
            Some(v) => v
                .as_u32()
                .ok_or_else(|| Error::BadRegistration("PMIX_JOB_SIZE is not an integer".into()))?,
            None => match &maps {
                Some((_, ppn)) => u32::try_from(ppn.iter().map(Vec::len).sum::<usize>())
                    .map_err(|_| Error::BadRegistration("too many ranks".into()))?,
                None if !lv.procs.is_empty() => lv.procs.keys().map(|r| r.0 + 1).max().unwrap_or(0),
                None => nlocalprocs,
            },
        };
        if let Some((_, ppn)) = &maps {
            if let Some(bad) = ppn.iter().flatten().find(|r| r.0 >= size) {
                return Err(Error::BadRegistration(format!(
                    "PMIX_PROC_MAP places rank {bad} but the job has {size} processes"
                )));
            }
        }

        // Applications: their rank ranges follow app order and APP_SIZE.
        if lv.apps.is_empty() {
            lv.apps.insert(0, Vec::new());
        }
        let napps = u32::try_from(lv.apps.len()).unwrap_or(u32::MAX);
        let single_app = lv.apps.len() == 1;
        let mut app_of_rank: Vec<(u32, Rank)> = Vec::new(); // (appnum, first rank) ranges
        let mut next = 0u32;
        for (&appnum, infos) in lv.apps.iter_mut() {
            let app_size = match find(infos, attr::APP_SIZE).and_then(Value::as_u32) {
                Some(s) => s,
                None if single_app => size,
                None => 0,
            };
            let ldr = find(infos, attr::APPLDR)
                .and_then(Value::as_rank)
                .unwrap_or(Rank(next));
            app_of_rank.push((appnum, ldr));
            if !has(infos, attr::APPNUM) {
                infos.insert(0, Info::attr(attr::APPNUM, appnum));
            }
            add_missing(infos, attr::APP_SIZE, app_size);
            add_missing(infos, attr::APPLDR, ldr);
            add_missing(infos, attr::MAX_PROCS, app_size);
            next = ldr.0.saturating_add(app_size);
        }
        let app_for = |rank: Rank| -> (u32, Rank) {
            // The last app whose leader is at or below the rank.
            let mut best = (0, Rank(0));
            for &(appnum, ldr) in &app_of_rank {
                if ldr <= rank {
                    best = (appnum, ldr);
                }
            }
            best
        };

        // Nodes and the processes on them.
        let offset = find(&lv.job, attr::NPROC_OFFSET)
            .and_then(Value::as_u32)
            .unwrap_or(0);
        let mut node_realms: Vec<Realm> = Vec::new();
        let mut local_ranks: Option<Vec<Rank>> = None;
        if let Some((names, ppn)) = &maps {
            for (idx, (name, ranks)) in names.iter().zip(ppn).enumerate() {
                let id = u32::try_from(idx).unwrap_or(u32::MAX);
                // Host-given node arrays for this node, matched by id or by name.
                let mut infos: Vec<Info> = Vec::new();
                for given in &lv.nodes {
                    let by_id = find(given, attr::NODEID).and_then(Value::as_u32) == Some(id);
                    let by_name =
                        find(given, attr::HOSTNAME).and_then(Value::as_str) == Some(name.as_str());
                    if by_id || by_name {
                        infos.extend(given.iter().cloned());
                    }
                }
                add_missing(&mut infos, attr::NODEID, id);
                add_missing(&mut infos, attr::HOSTNAME, name.as_str());
                let lsize = u32::try_from(ranks.len()).unwrap_or(u32::MAX);
                add_missing(&mut infos, attr::LOCAL_SIZE, lsize);
                add_missing(&mut infos, attr::NODE_SIZE, lsize);
                add_missing(&mut infos, attr::LOCAL_PEERS, join_ranks(ranks));
                if let Some(first) = ranks.iter().min() {
                    add_missing(&mut infos, attr::LOCALLDR, *first);
                }
                for (lrank, &rank) in ranks.iter().enumerate() {
                    let lrank = u16::try_from(lrank).unwrap_or(u16::MAX);
                    let p = lv.procs.entry(rank).or_default();
                    add_missing(p, attr::NODEID, id);
                    add_missing(p, attr::HOSTNAME, name.as_str());
                    add_missing(p, attr::LOCAL_RANK, lrank);
                    add_missing(p, attr::NODE_RANK, lrank);
                }
                if name == locale.hostname && local_ranks.is_none() {
                    local_ranks = Some(ranks.clone());
                }
                node_realms.push(Realm { id, info: infos });
            }
        } else {
            for (idx, given) in lv.nodes.iter().enumerate() {
                let id = find(given, attr::NODEID)
                    .and_then(Value::as_u32)
                    .unwrap_or(u32::try_from(idx).unwrap_or(u32::MAX));
                node_realms.push(Realm {
                    id,
                    info: given.clone(),
                });
            }
        }
        // A job registered as spawned says so at job level; each process says the same.
        let spawned = find(&lv.job, attr::SPAWNED)
            .and_then(Value::as_bool)
            .unwrap_or(false);
        for r in 0..size {
            let rank = Rank(r);
            let (appnum, ldr) = app_for(rank);
            let p = lv.procs.entry(rank).or_default();
            if !has(p, attr::RANK) {
                p.insert(0, Info::attr(attr::RANK, rank));
            }
            add_missing(p, attr::GLOBAL_RANK, Rank(offset.saturating_add(r)));
            add_missing(p, attr::APPNUM, appnum);
            add_missing(p, attr::APP_RANK, Rank(r - ldr.0.min(r)));
            add_missing(p, attr::REINCARNATION, 0u32);
            add_missing(p, attr::SPAWNED, spawned);
        }

        // Which ranks are on this node.
        let local_ranks =
            if let Some(peers) = find(&lv.job, attr::LOCAL_PEERS).and_then(Value::as_str) {
                parse_rank_list(peers)?
            } else if let Some(l) = local_ranks {
                l
            } else if maps.is_some() && nlocalprocs == 0 {
                // (Since multi-node pmixrun: a job of other nodes only.)
                Vec::new()
            } else if maps.as_ref().is_some_and(|(n, _)| n.len() == 1) {
                maps.as_ref().map(|(_, p)| p[0].clone()).unwrap_or_default()
            } else {
                (0..nlocalprocs.min(size)).map(Rank).collect()
            };
        let mut local_ranks = local_ranks;
        local_ranks.sort_unstable();
        local_ranks.dedup();

        // Job and session defaults.
        if !has(&lv.job, attr::NSPACE) {
            lv.job.insert(0, Info::attr(attr::NSPACE, nspace.as_str()));
        }
        add_missing(&mut lv.job, attr::JOBID, nspace.as_str());
        add_missing(&mut lv.job, attr::JOB_SIZE, size);
        add_missing(&mut lv.job, attr::MAX_PROCS, size);
        add_missing(&mut lv.job, attr::JOB_NUM_APPS, napps);
        if let Some((names, _)) = &maps {
            add_missing(
                &mut lv.job,
                attr::NUM_NODES,
                u32::try_from(names.len()).unwrap_or(u32::MAX),
            );
        }
        // This node's values are also job-level for the clients on it (what a Get with rank
        // WILDCARD of LOCAL_SIZE, LOCAL_PEERS or LOCAL_PROCS means to them).
        let lsize = u32::try_from(local_ranks.len()).unwrap_or(u32::MAX);
        add_missing(&mut lv.job, attr::LOCAL_SIZE, lsize);
        add_missing(&mut lv.job, attr::LOCAL_PEERS, join_ranks(&local_ranks));
        let procs = local_ranks
            .iter()
            .map(|&r| pmix_types::Proc::new(nspace.clone(), r));
        add_missing(
            &mut lv.job,
            attr::LOCAL_PROCS,
            pmix_types::DataArray::from_procs(procs),
        );
        if let Some(first) = local_ranks.first() {
            add_missing(&mut lv.job, attr::LOCALLDR, *first);
        }
        for extra in locale.job_extras {
            if !has(&lv.job, extra.key.as_str()) {
                lv.job.push(per_namespace(extra, nspace));
            }
        }
        if !has(&lv.session, attr::UNIV_SIZE) && !has(&lv.job, attr::UNIV_SIZE) {
            lv.session.push(Info::attr(attr::UNIV_SIZE, size));
        }

        let job = JobData {
            nspace: nspace.clone(),
            session: lv.session,
            job: lv.job,
            apps: lv
                .apps
                .into_iter()
                .map(|(id, info)| Realm { id, info })
                .collect(),
            nodes: node_realms,
            procs: lv
                .procs
                .into_iter()
                .map(|(rank, info)| ProcRealm { rank, info })
                .collect(),
        };
        // Added since: PMIX_ANL_MAP, worked out here from the node each rank was given.
        let mut job = job;
        if let Some(map) = anl_map_of_procs(&job, size, local_ranks.len() == size as usize) {
            add_missing(&mut job.job, attr::ANL_MAP, map);
        }
        // What the engine made of a registration without data.
        let job = if lv.nodata {
            JobData {
                nspace: nspace.clone(),
                session: vec![],
                job: vec![],
                apps: vec![],
                nodes: vec![],
                procs: vec![],
            }
        } else {
            job
        };
        Ok(Registration {
            job,
            size,
            local_ranks,
        })
    }

    /// The ANL map of each rank's `NODEID`, or of one node when all ranks are here.
    fn anl_map_of_procs(job: &JobData, size: u32, all_here: bool) -> Option<String> {
        let node = |r: u32| {
            let p = job.procs.iter().find(|p| p.rank == Rank(r))?;
            find(&p.info, attr::NODEID).and_then(Value::as_u32)
        };
        let nodes: Option<Vec<u32>> = (0..size).map(node).collect();
        let nodes = nodes.or_else(|| all_here.then(|| vec![0; size as usize]))?;
        let map = anl_map::of_runs(&anl_map::runs(nodes), anl_map::MAX_JOB_DATA_LEN);
        (!map.is_empty()).then_some(map)
    }
}

const HOST: &str = "node1";

fn extras() -> Vec<Info> {
    vec![
        Info::attr(attr::TMPDIR, "/tmp/pmix"),
        Info::attr(attr::NSDIR, "/tmp/pmix/ns"),
    ]
}

fn maps(nodes: &[&str], ppn: &[Vec<u32>]) -> [Info; 2] {
    [
        Info::attr(
            attr::NODE_MAP,
            Value::Regex(pmix_regex::generate_regex(nodes).unwrap()),
        ),
        Info::attr(
            attr::PROC_MAP,
            Value::Regex(pmix_regex::generate_ppn(ppn).unwrap()),
        ),
    ]
}

fn array(key: &'static str, infos: impl IntoIterator<Item = Info>) -> Info {
    Info::attr(key, DataArray::from_infos(infos))
}

fn is_map(key: &str) -> bool {
    key == attr::NODE_MAP || key == attr::PROC_MAP
}

/// `got`, a node or process map, names what `given` names, in at most as many bytes.
fn assert_same_map(key: &str, got: Option<&Value>, given: Option<&Value>) {
    let (Some(got), Some(given)) = (got.and_then(map_text), given.and_then(map_text)) else {
        assert_eq!(got, given, "{key}");
        return;
    };
    assert!(got.len() <= given.len(), "{key} grew");
    if key == attr::NODE_MAP {
        assert_eq!(
            pmix_regex::parse_regex(got).unwrap(),
            pmix_regex::parse_regex(given).unwrap()
        );
    } else {
        assert_eq!(
            pmix_regex::parse_ppn(got).unwrap(),
            pmix_regex::parse_ppn(given).unwrap()
        );
    }
}

/// Registers `info` both ways and checks that everything agrees; returns the job data.
fn agree(nlocalprocs: u32, info: &[Info]) -> Arc<JobData> {
    let extras = extras();
    let locale = Locale {
        hostname: HOST,
        job_extras: &extras,
    };
    let ns = Nspace::new("ns").unwrap();
    let old = eager::register(&ns, nlocalprocs, info, &locale).unwrap();
    let new = register(&ns, nlocalprocs, info, &locale).unwrap();
    assert!(
        !new.job.is_built(),
        "registration derived the job data eagerly"
    );
    assert_eq!(new.size, old.size);
    assert_eq!(new.local_ranks, old.local_ranks);
    // Job-level values read before the job data exists are the ones it will hold (the maps
    // in their shorter form: the same nodes and ranks, in no more bytes).
    for i in old.job.job.iter().chain(&old.job.session) {
        let in_job = old.job.job.iter().find(|j| j.key == i.key);
        let got = new.job.job_value(i.key.as_str());
        if is_map(i.key.as_str()) {
            assert_same_map(i.key.as_str(), got, in_job.map(|j| &j.value));
            continue;
        }
        assert_eq!(got, in_job.map(|j| &j.value), "job_value({})", i.key);
    }
    assert_eq!(new.job.job_value("no.such.key"), None);
    assert!(!new.job.is_built(), "job_value derived the job data");
    let job = new.job.get().clone();
    assert!(
        Arc::ptr_eq(&job, new.job.get()),
        "the job data is derived once"
    );
    assert_eq!(job.session, old.job.session);
    assert_eq!(job.job.len(), old.job.job.len());
    for (a, b) in job.job.iter().zip(&old.job.job) {
        assert_eq!(a.key, b.key);
        if is_map(a.key.as_str()) {
            assert_same_map(a.key.as_str(), Some(&a.value), Some(&b.value));
        } else {
            assert_eq!(a, b);
        }
    }
    assert_eq!(job.apps, old.job.apps);
    assert_eq!(job.nodes, old.job.nodes);
    assert_eq!(job.procs.len(), old.job.procs.len());
    for (new, old) in job.procs.iter().zip(&old.job.procs) {
        assert_eq!(new, old, "rank {}", old.rank);
    }
    assert_eq!(job.nspace, old.job.nspace);
    job
}

fn proc_value(job: &JobData, rank: u32, key: &str) -> Option<Value> {
    let p = job.procs.iter().find(|p| p.rank == Rank(rank))?;
    find(&p.info, key).cloned()
}

#[test]
fn blocks_of_ranks_on_several_nodes() {
    let ppn: Vec<Vec<u32>> = (0..4).map(|n| (n * 3..n * 3 + 3).collect()).collect();
    let job = agree(0, &maps(&["node0", "node1", "node2", "node3"], &ppn));
    assert_eq!(job.procs.len(), 12);
    assert_eq!(
        proc_value(&job, 7, attr::HOSTNAME),
        Some(Value::from("node2"))
    );
    assert_eq!(
        proc_value(&job, 7, attr::LOCAL_RANK),
        Some(Value::from(1u16))
    );
    assert_eq!(
        find(&job.job, attr::ANL_MAP),
        Some(&Value::from("(vector,(0,4,3))"))
    );
}

#[test]
fn round_robin_ranks_and_a_short_node() {
    let ppn = vec![vec![0, 3, 6], vec![1, 4, 7], vec![2, 5]];
    let job = agree(0, &maps(&["node0", HOST, "node2"], &ppn));
    assert_eq!(proc_value(&job, 4, attr::NODEID), Some(Value::from(1u32)));
    assert_eq!(
        proc_value(&job, 5, attr::NODE_RANK),
        Some(Value::from(1u16))
    );
    assert_eq!(
        find(&job.job, attr::ANL_MAP),
        Some(&Value::from("(vector,(0,3,1),(0,3,1),(0,2,1))"))
    );
}

#[test]
fn several_apps_offset_and_spawned() {
    let ppn = vec![vec![0, 1, 2, 3], vec![4, 5, 6], vec![7, 8, 9]];
    let mut info = maps(&["a", "b", HOST], &ppn).to_vec();
    info.extend([
        Info::attr(attr::NPROC_OFFSET, 100u32),
        Info::attr(attr::SPAWNED, true),
        array(
            attr::APP_INFO_ARRAY,
            [
                Info::attr(attr::APPNUM, 0u32),
                Info::attr(attr::APP_SIZE, 3u32),
            ],
        ),
        array(
            attr::APP_INFO_ARRAY,
            [
                Info::attr(attr::APPNUM, 1u32),
                Info::attr(attr::APP_SIZE, 5u32),
            ],
        ),
        array(
            attr::APP_INFO_ARRAY,
            [
                Info::attr(attr::APPNUM, 2u32),
                Info::attr(attr::APP_SIZE, 2u32),
                Info::attr(attr::WDIR, "/w"),
            ],
        ),
    ]);
    let job = agree(0, &info);
    assert_eq!(proc_value(&job, 8, attr::APPNUM), Some(Value::from(2u32)));
    assert_eq!(
        proc_value(&job, 7, attr::APP_RANK),
        Some(Value::from(Rank(4)))
    );
    assert_eq!(
        proc_value(&job, 9, attr::GLOBAL_RANK),
        Some(Value::from(Rank(109)))
    );
}

#[test]
fn app_leaders_out_of_app_order() {
    let ppn = vec![vec![0, 1, 2, 3, 4, 5]];
    let mut info = maps(&["solo"], &ppn).to_vec();
    for (appnum, ldr, size) in [(0u32, 0u32, 1u32), (1, 5, 1), (2, 1, 4)] {
        info.push(array(
            attr::APP_INFO_ARRAY,
            [
                Info::attr(attr::APPNUM, appnum),
                Info::attr(attr::APPLDR, Rank(ldr)),
                Info::attr(attr::APP_SIZE, size),
            ],
        ));
    }
    let job = agree(0, &info);
    assert_eq!(proc_value(&job, 0, attr::APPNUM), Some(Value::from(0u32)));
    assert_eq!(proc_value(&job, 5, attr::APPNUM), Some(Value::from(2u32)));
}

#[test]
fn host_given_values_win() {
    let ppn = vec![vec![0, 2], vec![1, 3, 4]];
    let mut info = maps(&[HOST, "node0"], &ppn).to_vec();
    info.extend([
        Info::attr(attr::JOB_SIZE, 7u32),
        Info::attr(attr::NSDIR, "/given"),
        array(
            attr::SESSION_INFO_ARRAY,
            [
                Info::attr(attr::UNIV_SIZE, 64u32),
                Info::attr(attr::SESSION_ID, 3u32),
            ],
        ),
        array(
            attr::NODE_INFO_ARRAY,
            [
                Info::attr(attr::HOSTNAME, "node0"),
                Info::attr(attr::LOCAL_SIZE, 9u32),
            ],
        ),
        array(
            attr::NODE_INFO_ARRAY,
            [
                Info::attr(attr::NODEID, 0u32),
                Info::attr(attr::NODE_SIZE, 11u32),
            ],
        ),
        array(
            attr::PROC_DATA,
            [
                Info::attr(attr::RANK, Rank(3)),
                Info::attr(attr::HOSTNAME, "elsewhere"),
                Info::attr(attr::LOCAL_RANK, 9u16),
                Info::attr(attr::APPNUM, 5u32),
                Info::attr(attr::SPAWNED, true),
            ],
        ),
        array(
            attr::PROC_DATA,
            [
                Info::attr(attr::PROCID, Proc::new(Nspace::new("ns").unwrap(), Rank(5))),
                Info::attr(attr::GLOBAL_RANK, Rank(42)),
            ],
        ),
        // A rank beyond the job keeps exactly what the host gave.
        array(
            attr::PROC_DATA,
            [
                Info::attr(attr::RANK, Rank(20)),
                Info::attr(attr::HOSTNAME, "far"),
            ],
        ),
    ]);
    let job = agree(0, &info);
    assert_eq!(
        proc_value(&job, 3, attr::HOSTNAME),
        Some(Value::from("elsewhere"))
    );
    assert_eq!(
        proc_value(&job, 3, attr::NODE_RANK),
        Some(Value::from(1u16))
    );
    assert_eq!(proc_value(&job, 20, attr::APPNUM), None);
    // Ranks 5 and 6 are in the job but on no node of the map.
    assert_eq!(proc_value(&job, 6, attr::HOSTNAME), None);
    assert_eq!(proc_value(&job, 6, attr::APPNUM), Some(Value::from(0u32)));
}

#[test]
fn a_rank_listed_on_two_nodes_takes_the_first() {
    let ppn = vec![vec![0, 1], vec![2, 1, 3], vec![1, 4]];
    agree(0, &maps(&["x", "y", "z"], &ppn));
}

#[test]
fn local_peers_given_and_single_node_maps() {
    let ppn = vec![vec![0, 1], vec![2, 3]];
    let mut info = maps(&["a", "b"], &ppn).to_vec();
    info.push(Info::attr(attr::LOCAL_PEERS, "3,1-2"));
    agree(0, &info);
    agree(0, &maps(&["other"], &[vec![2, 0, 1]]));
    agree(3, &maps(&["other"], &[vec![2, 0, 1]]));
    agree(2, &maps(&["a", "b"], &ppn));
}

#[test]
fn a_job_of_other_nodes_only_has_no_local_rank() {
    let extras = extras();
    let locale = Locale {
        hostname: HOST,
        job_extras: &extras,
    };
    let ns = Nspace::new("ns").unwrap();
    for names in [&["other"][..], &["a", "b"]] {
        let ppn: Vec<Vec<u32>> = (0..names.len() as u32).map(|n| vec![n]).collect();
        let r = register(&ns, 0, &maps(names, &ppn), &locale).unwrap();
        assert!(r.local_ranks.is_empty(), "{names:?}: {:?}", r.local_ranks);
    }
}

#[test]
fn no_maps() {
    // All of the job here: one node.
    let job = agree(3, &[]);
    assert_eq!(
        find(&job.job, attr::ANL_MAP),
        Some(&Value::from("(vector,(0,1,3))"))
    );
    // Part of it elsewhere, nobody says where: no map.
    let job = agree(2, &[Info::attr(attr::JOB_SIZE, 4u32)]);
    assert_eq!(find(&job.job, attr::ANL_MAP), None);
    agree(
        0,
        &[
            array(
                attr::PROC_DATA,
                [
                    Info::attr(attr::RANK, Rank(2)),
                    Info::attr(attr::HOSTNAME, "h"),
                ],
            ),
            array(
                attr::NODE_INFO_ARRAY,
                [
                    Info::attr(attr::HOSTNAME, "h"),
                    Info::attr(attr::LOCAL_SIZE, 1u32),
                ],
            ),
            array(attr::NODE_INFO_ARRAY, [Info::attr(attr::NODEID, 7u32)]),
        ],
    );
}

#[test]
fn no_data_gives_empty_job_data() {
    let mut info = maps(&[HOST], &[vec![0, 1]]).to_vec();
    info.push(Info::attr(attr::REGISTER_NODATA, true));
    let job = agree(0, &info);
    assert!(job.job.is_empty() && job.procs.is_empty() && job.nodes.is_empty());
}

#[test]
fn errors_are_found_at_registration() {
    let extras = extras();
    let locale = Locale {
        hostname: HOST,
        job_extras: &extras,
    };
    let ns = Nspace::new("ns").unwrap();
    let [nmap, pmap] = maps(&["a", "b"], &[vec![0], vec![1, 2]]);
    let cases: Vec<Vec<Info>> = vec![
        vec![nmap.clone()],
        vec![nmap.clone(), pmap.clone(), Info::attr(attr::JOB_SIZE, 2u32)],
        vec![
            Info::attr(attr::NODE_MAP, "a,b,c"),
            Info::attr(attr::PROC_MAP, "0;1"),
        ],
        vec![
            Info::attr(attr::NODE_MAP, 3u32),
            Info::attr(attr::PROC_MAP, "0"),
        ],
        vec![nmap, pmap, Info::attr(attr::LOCAL_PEERS, "1,x")],
        vec![Info::attr(attr::JOB_SIZE, "many")],
        vec![array(attr::PROC_DATA, [Info::attr(attr::HOSTNAME, "h")])],
        vec![array(
            attr::APP_INFO_ARRAY,
            [Info::attr(attr::APP_SIZE, 1u32)],
        )],
    ];
    for info in cases {
        let old = eager::register(&ns, 0, &info, &locale).map(|_| ());
        let new = register(&ns, 0, &info, &locale).map(|_| ());
        let (Err(old), Err(new)) = (old, new) else {
            panic!("{info:?} was accepted");
        };
        assert_eq!(new.to_string(), old.to_string());
    }
}

/// A large job: the derived realms equal the eager ones rank by rank.
#[test]
fn a_large_job() {
    let names: Vec<String> = (0..50).map(|i| format!("n{i:03}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let ppn: Vec<Vec<u32>> = (0..50u32)
        .map(|n| (0..40).map(|i| n + 50 * i).collect())
        .collect();
    let mut info = maps(&names, &ppn).to_vec();
    info.push(array(
        attr::APP_INFO_ARRAY,
        [
            Info::attr(attr::APPNUM, 0u32),
            Info::attr(attr::APP_SIZE, 1500u32),
        ],
    ));
    info.push(array(
        attr::APP_INFO_ARRAY,
        [
            Info::attr(attr::APPNUM, 1u32),
            Info::attr(attr::APP_SIZE, 500u32),
        ],
    ));
    let job = agree(0, &info);
    assert_eq!(job.procs.len(), 2000);
}

#[test]
fn the_engine_registers_without_deriving() {
    let mut eng = crate::engine::Engine::new(HOST.into(), extras(), crate::NameService::BuiltIn);
    let ppn: Vec<Vec<u32>> = (0..3).map(|n| (n * 4..n * 4 + 4).collect()).collect();
    let info = maps(&["a", "b", "c"], &ppn);
    eng.register_nspace(Nspace::new("big").unwrap(), 0, &info)
        .unwrap();
    let id = eng.ns_id("big").unwrap();
    let held = &eng.nspaces[&id];
    assert_eq!(held.size, 12);
    assert!(held.local.is_empty());
    assert!(!held.job.is_built());
    // Re-registration replaces what was held, still without deriving.
    let _ = held.job.get();
    eng.register_nspace(Nspace::new("big").unwrap(), 0, &info)
        .unwrap();
    assert!(!eng.nspaces[&id].job.is_built());
}

#[test]
fn the_nsdir_is_read_without_deriving() {
    let mut eng = crate::engine::Engine::new(HOST.into(), extras(), crate::NameService::BuiltIn);
    let ppn: Vec<Vec<u32>> = (0..3).map(|n| (n * 4..n * 4 + 4).collect()).collect();
    let info = maps(&["a", HOST, "c"], &ppn);
    eng.register_nspace(Nspace::new("big").unwrap(), 4, &info)
        .unwrap();
    // What the shell reads to create the namespace's directory.
    let dir = eng.job_value("big", attr::NSDIR).and_then(Value::as_str);
    assert_eq!(dir, Some("/tmp/pmix/ns/big"));
    assert_eq!(eng.job_value("other", attr::NSDIR), None);
    let id = eng.ns_id("big").unwrap();
    assert!(!eng.nspaces[&id].job.is_built());
    let built = eng.job_data("big").unwrap();
    let nsdir = built.job.iter().find(|i| i.key.as_str() == attr::NSDIR);
    assert_eq!(nsdir.and_then(|i| i.value.as_str()), dir);
}

#[test]
fn a_nodata_namespace_has_no_job_values() {
    let extras = extras();
    let locale = Locale {
        hostname: HOST,
        job_extras: &extras,
    };
    let ns = Nspace::new("ns").unwrap();
    let info = [
        Info::attr(attr::JOB_SIZE, 4u32),
        Info::attr(attr::REGISTER_NODATA, true),
    ];
    let reg = register(&ns, 4, &info, &locale).unwrap();
    assert_eq!(reg.job.job_value(attr::JOB_SIZE), None);
    assert!(reg.job.get().job.is_empty());
}

#[test]
fn raw_maps_are_kept_in_their_shorter_form() {
    let names: Vec<String> = (0..8).map(|i| format!("node{i:03}")).collect();
    let ranks: Vec<Vec<u32>> = (0..8).map(|n| (n * 16..(n + 1) * 16).collect()).collect();
    let nmap = pmix_regex::generate_regex(&names).unwrap();
    let pmap = pmix_regex::generate_ppn(&ranks).unwrap();
    assert!(nmap.starts_with(b"raw:") && pmap.starts_with(b"raw:"));
    let as_string = String::from_utf8(pmap.clone()).unwrap();
    let extras = extras();
    let locale = Locale {
        hostname: HOST,
        job_extras: &extras,
    };
    let ns = Nspace::new("ns").unwrap();
    for proc_map in [Value::Regex(pmap.clone()), Value::String(as_string)] {
        let info = [
            Info::attr(attr::NODE_MAP, Value::Regex(nmap.clone())),
            Info::attr(attr::PROC_MAP, proc_map.clone()),
        ];
        let reg = register(&ns, 0, &info, &locale).unwrap();
        let n = reg.job.job_value(attr::NODE_MAP).unwrap();
        assert_eq!(n, &Value::Regex(b"pmix[node[3:0-7]]".to_vec()));
        let p = reg.job.job_value(attr::PROC_MAP).unwrap();
        let text = map_text(p).unwrap();
        assert!(
            text.starts_with(b"pmix[") && text.len() < pmap.len(),
            "{p:?}"
        );
        // A string stays a string.
        assert_eq!(
            matches!(p, Value::String(_)),
            matches!(proc_map, Value::String(_))
        );
        assert_eq!(pmix_regex::parse_ppn(text).unwrap(), ranks);
    }
}
