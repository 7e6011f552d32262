//! A libpmix client's job data comes from the compact job image: the `REQ` answers (hash and
//! ds21) and the ds21 segments are made one rank at a time, the namespace's whole `JobData`
//! is never expanded for them, and they are what the expanded job data gives.

use std::path::PathBuf;

use pmix_types::{DataArray, Info, Key, Nspace, attr};
use pmix_wire::openpmix::job::to_job_info;
use pmix_wire::openpmix::{Dialect, Reply};

use super::ds21::Ds21;
use super::*;
use crate::engine::nspace::{Locale, Registration, register};

const HOST: &str = "node3";

/// A job of 40 nodes of 25 ranks, registered with the maps only (as pmixrun and the scale
/// bench do), plus one rank's own value.
fn job() -> Registration {
    let names: Vec<String> = (0..40).map(|n| format!("node{n}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let ppn: Vec<Vec<u32>> = (0..40).map(|n| (n * 25..n * 25 + 25).collect()).collect();
    let mine = DataArray::from_infos([
        Info::attr(attr::RANK, Rank(7)),
        Info::attr("my.key", "seven"),
    ]);
    let info = [
        Info::attr(
            attr::NODE_MAP,
            Value::Regex(pmix_regex::generate_regex(&names).unwrap()),
        ),
        Info::attr(
            attr::PROC_MAP,
            Value::Regex(pmix_regex::generate_ppn(&ppn).unwrap()),
        ),
        Info::attr(attr::PROC_DATA, mine),
    ];
    let extras = [Info::attr(attr::TMPDIR, "/tmp/pmix")];
    let locale = Locale {
        hostname: HOST,
        job_extras: &extras,
    };
    register(&Nspace::new("big").unwrap(), 25, &info, &locale).unwrap()
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pmixrs-opx-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_req_answer_is_made_from_the_image_without_expanding_the_job() {
    let reg = job();
    let lazy = &reg.job;
    let ds = Ds21::new(dir("req")).unwrap();
    let mut common = Common::new(Some(ds), HOST.into());
    common.nspace_registered(lazy.image().nspace(), 25);
    let dialect = Dialect::V41;
    let hash = common.job_bytes(lazy.image(), dialect, Gds::Hash).unwrap();
    let ds21 = common.job_bytes(lazy.image(), dialect, Gds::Ds21).unwrap();
    assert!(
        !lazy.is_built(),
        "a libpmix client's REQ expanded every rank's realm"
    );
    // The same bytes as from the whole job data.
    let full = lazy.get();
    let mut want = Vec::new();
    Reply::JobInfo(to_job_info(full, dialect).unwrap())
        .encode(dialect, &mut want)
        .unwrap();
    assert_eq!(&hash[..], &want[..], "the hash client's answer");
    let mut want = Vec::new();
    Reply::JobInfo(ds21_job_info(full))
        .encode(dialect, &mut want)
        .unwrap();
    assert_eq!(&ds21[..], &want[..], "the ds21 client's answer");
    // A second client of the job is handed the same encoding.
    let again = common.job_bytes(lazy.image(), dialect, Gds::Hash).unwrap();
    assert!(std::sync::Arc::ptr_eq(&hash, &again));
    common.shutdown();
}

#[test]
fn the_ds21_batches_hold_every_ranks_keys() {
    let reg = job();
    let image = reg.job.image().clone();
    let levels = image.levels();
    let batches: Vec<_> = ds21_job_batches(&image, &levels, HOST)
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(!reg.job.is_built());
    let full = reg.job.get();
    assert_eq!(batches.len(), 1 + full.procs.len());
    assert!(matches!(batches[0].level, ds21::Level::Job));
    // This node's local size is filed at the job level.
    let lsize = Key::new(attr::LOCAL_SIZE).unwrap();
    assert!(batches[0].pairs.iter().any(|(k, _)| *k == lsize));
    for (b, p) in batches[1..].iter().zip(&full.procs) {
        assert!(matches!(b.level, ds21::Level::Rank(r) if r == p.rank));
        let want: Vec<(Key, Vec<u8>)> = p
            .info
            .iter()
            .filter(|i| !matches!(i.value, Value::Regex(_)))
            .map(|i| (i.key.clone(), ds21::pack_value(&i.value).unwrap()))
            .collect();
        assert_eq!(b.pairs, want, "rank {}", p.rank);
    }
    let seven = &batches[1 + 7].pairs;
    assert!(seven.iter().any(|(k, _)| k.as_str() == "my.key"));
}
