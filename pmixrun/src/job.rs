//! What pmixrun tells its server about the job: the information `register_nspace` takes.
//!
//! Only what the launcher knows and the server cannot derive is given: sizes, the maps of this
//! one node, and each application context. Local ranks, node ranks, peers, app ranks and the
//! like are derived by the server from these (see pmix-server's registration), so they are not
//! repeated here.

use std::path::{Path, PathBuf};

use pmix_types::{DataArray, Info, Rank, Value, attr};

use crate::cli::App;

/// Where each application context's ranks are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// The first rank of each application context; its ranks are `first..first + np`.
    pub(crate) firsts: Vec<u32>,
    /// Number of processes in the job.
    pub(crate) size: u32,
}

impl Layout {
    /// Lays the application contexts out one after the other, in command-line order.
    pub(crate) fn new(apps: &[App]) -> Result<Layout, String> {
        let mut firsts = Vec::with_capacity(apps.len());
        let mut size: u32 = 0;
        for a in apps {
            firsts.push(size);
            size = size
                .checked_add(a.np)
                .filter(|s| *s < Rank::WILDCARD.0)
                .ok_or("too many processes in the job")?;
        }
        Ok(Layout { firsts, size })
    }

    /// The application context (index) that `rank` belongs to.
    pub(crate) fn app_of(&self, rank: u32) -> usize {
        self.firsts.iter().rposition(|f| *f <= rank).unwrap_or(0)
    }
}

/// The working directory an application context's processes start in, absolute.
pub(crate) fn wdir_of(app: &App, cwd: &Path) -> PathBuf {
    match &app.wdir {
        Some(d) => cwd.join(d),
        None => cwd.to_path_buf(),
    }
}

/// The job's registration information for a job entirely on `hostname`.
pub(crate) fn job_info(
    hostname: &str,
    apps: &[App],
    layout: &Layout,
    cwd: &Path,
) -> Result<Vec<Info>, String> {
    let nodes = pmix_regex::generate_regex(&[hostname])
        .map_err(|e| format!("cannot describe node {hostname:?}: {e}"))?;
    let ranks: Vec<u32> = (0..layout.size).collect();
    let ppn = pmix_regex::generate_ppn(&[ranks])
        .map_err(|e| format!("cannot describe the process map: {e}"))?;
    let napps = u32::try_from(apps.len()).map_err(|_| "too many application contexts")?;
    let mut info = vec![
        Info::attr(attr::JOB_SIZE, layout.size),
        Info::attr(attr::MAX_PROCS, layout.size),
        Info::attr(attr::UNIV_SIZE, layout.size),
        Info::attr(attr::JOB_NUM_APPS, napps),
        Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
        Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
    ];
    for (appnum, (app, first)) in (0u32..).zip(apps.iter().zip(&layout.firsts)) {
        let argv: Vec<String> = std::iter::once(&app.program)
            .chain(&app.args)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let app_info = DataArray::from_infos([
            Info::attr(attr::APPNUM, appnum),
            Info::attr(attr::APP_SIZE, app.np),
            Info::attr(attr::MAX_PROCS, app.np),
            Info::attr(attr::APPLDR, Rank(*first)),
            Info::attr(attr::WDIR, wdir_of(app, cwd).to_string_lossy().into_owned()),
            Info::attr(attr::APP_ARGV, argv.join(" ")),
        ]);
        info.push(Info::attr(attr::APP_INFO_ARRAY, app_info));
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(np: u32, program: &str) -> App {
        App {
            np,
            program: program.into(),
            args: vec!["x y".into()],
            wdir: None,
            env: vec![],
        }
    }

    #[test]
    fn app_contexts_follow_each_other() {
        let apps = [app(2, "a"), app(3, "b"), app(1, "c")];
        let l = Layout::new(&apps).map_err(|e| e.to_string());
        assert_eq!(
            l,
            Ok(Layout {
                firsts: vec![0, 2, 5],
                size: 6
            })
        );
        let l = Layout::new(&apps).unwrap_or_else(|e| panic!("{e}"));
        let owners: Vec<usize> = (0..6).map(|r| l.app_of(r)).collect();
        assert_eq!(owners, [0, 0, 1, 1, 1, 2]);
        assert!(Layout::new(&[app(u32::MAX, "a"), app(1, "b")]).is_err());
    }

    #[test]
    fn one_app_info_array_per_app_context() {
        let mut apps = [app(2, "a"), app(3, "b")];
        apps[1].wdir = Some("sub".into());
        let l = Layout::new(&apps).unwrap_or_else(|e| panic!("{e}"));
        let info =
            job_info("node1", &apps, &l, Path::new("/home/u")).unwrap_or_else(|e| panic!("{e}"));
        let get = |infos: &[Info], k: &str| {
            infos
                .iter()
                .find(|i| i.key.as_str() == k)
                .map(|i| i.value.clone())
        };
        assert_eq!(get(&info, attr::JOB_SIZE), Some(Value::Uint32(5)));
        assert_eq!(get(&info, attr::JOB_NUM_APPS), Some(Value::Uint32(2)));
        let arrays: Vec<Vec<Info>> = info
            .iter()
            .filter(|i| i.key.as_str() == attr::APP_INFO_ARRAY)
            .filter_map(|i| i.value.as_array().map(|a| a.infos().cloned().collect()))
            .collect();
        assert_eq!(arrays.len(), 2);
        assert_eq!(get(&arrays[1], attr::APPNUM), Some(Value::Uint32(1)));
        assert_eq!(get(&arrays[1], attr::APP_SIZE), Some(Value::Uint32(3)));
        assert_eq!(get(&arrays[1], attr::APPLDR), Some(Value::Rank(Rank(2))));
        assert_eq!(
            get(&arrays[1], attr::WDIR),
            Some(Value::String("/home/u/sub".into()))
        );
        assert_eq!(
            get(&arrays[0], attr::APP_ARGV),
            Some(Value::String("a x y".into()))
        );
    }
}
