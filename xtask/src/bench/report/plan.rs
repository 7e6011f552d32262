//! The runs a report needs: the launch rows the options select (`launch` makes them), and
//! for each setting the selected rows of every table need, which stacks run there (`Plan`).

use super::rows::{Config, Row, filtered, floor_configs, libpmix_rows, rows};
use crate::bench::{Options, launch};

/// The launch rows the options ask for, in table order.
pub(super) fn launch_rows(opts: &Options) -> Vec<Row> {
    filtered(opts, launch::rows(opts))
}

/// One setting to run, and which stacks run there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) config: Config,
    /// Rows of the main (or launch) table need it: ours and OpenPMIx (or the launchers).
    pub(crate) main: bool,
    /// Rows of the libpmix table need it: the libpmix client under our server and under
    /// OpenPMIx's, with its default storage and with `hash`.
    pub(crate) libpmix: bool,
    /// The platform floor runs there too.
    pub(crate) floor: bool,
}

/// The runs the selected rows need, in the order they are run.
pub(crate) fn configs_needed(opts: &Options) -> Vec<Plan> {
    let rows = rows(opts);
    let floor = floor_configs(&rows);
    let main: Vec<Config> = rows
        .into_iter()
        .chain(launch_rows(opts))
        .map(|r| r.config)
        .collect();
    let libpmix: Vec<Config> = libpmix_rows(opts).into_iter().map(|r| r.config).collect();
    let mut configs: Vec<Config> = main.iter().chain(&libpmix).copied().collect();
    configs.sort_by_key(|c| match *c {
        Config::Job { n, pinned } => (0, None, n, !pinned),
        Config::Launch { mpich, n } => (1, Some(mpich), n, false),
        Config::Maps => (2, None, 0, false),
    });
    configs.dedup();
    configs
        .into_iter()
        .map(|config| Plan {
            config,
            main: main.contains(&config),
            libpmix: libpmix.contains(&config),
            floor: floor.contains(&config),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::rows::opts;
    use super::*;
    use crate::bench::mpich::Mpich;

    /// A setting the main (or launch) rows need; job settings are needed by the libpmix rows
    /// too in these tests' filters, which match theirs as well.
    fn plan(config: Config, floor: bool) -> Plan {
        Plan {
            config,
            main: true,
            libpmix: matches!(config, Config::Job { .. }),
            floor,
        }
    }

    #[test]
    fn a_filter_runs_only_what_its_rows_need() {
        let barrier = configs_needed(&opts(&["barrier"], false));
        assert_eq!(barrier.len(), 4, "every job setting, no maps");
        assert!(barrier.iter().all(|p| !p.floor), "no floor without its row");
        assert_eq!(
            configs_needed(&opts(&["n=8, pinned"], false)),
            [plan(Config::Job { n: 8, pinned: true }, true)]
        );
        assert_eq!(
            configs_needed(&opts(&["register_nspace, 100k"], false)),
            [plan(Config::Maps, false)]
        );
        assert!(configs_needed(&opts(&["100k"], true)).is_empty());
        // The floor runs with the all-ranks row, in every setting it is selected in...
        let all = configs_needed(&opts(&["publish/lookup/unpublish, all ranks"], false));
        assert_eq!(all.len(), 4);
        assert!(all.iter().all(|p| p.floor && p.config != Config::Maps));
        // ...and only there: not with rank 0 alone, nor in a setting filtered out.
        let solo = configs_needed(&opts(&["publish, rank 0 alone"], false));
        assert_eq!(solo.len(), 4);
        assert!(solo.iter().all(|p| !p.floor));
        assert_eq!(
            configs_needed(&opts(
                &["all ranks (µs per call), n=2, unpinned", "barrier"],
                false
            )),
            [
                plan(Config::Job { n: 2, pinned: true }, false),
                plan(
                    Config::Job {
                        n: 2,
                        pinned: false
                    },
                    true
                ),
                plan(Config::Job { n: 8, pinned: true }, false),
                plan(
                    Config::Job {
                        n: 8,
                        pinned: false
                    },
                    false
                ),
            ]
        );
        // The full run: the floor in every job setting, not with the maps.
        let full = configs_needed(&opts(&[], false));
        assert_eq!(full.iter().filter(|p| p.floor).count(), 4);
        assert_eq!(full.last(), Some(&plan(Config::Maps, false)));
        // The launch rows: after the jobs, each MPICH's counts together; none without them.
        let launch = |mpich, n| plan(Config::Launch { mpich, n }, false);
        assert_eq!(
            full.iter()
                .filter(|p| matches!(p.config, Config::Launch { .. }))
                .count(),
            4
        );
        assert_eq!(
            configs_needed(&opts(&["mpi hello"], false)),
            [
                launch(Mpich::Debian, 1),
                launch(Mpich::Debian, 8),
                launch(Mpich::Venv, 1),
                launch(Mpich::Venv, 8),
            ]
        );
        assert_eq!(
            configs_needed(&opts(&["debian mpich, n=8"], false)),
            [launch(Mpich::Debian, 8)]
        );
        assert!(
            barrier
                .iter()
                .all(|p| !matches!(p.config, Config::Launch { .. }))
        );
    }

    #[test]
    fn the_launch_rows_take_their_counts_from_n() {
        let parse = |args: &[&str]| {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            Options::parse(&args).map(|o| (o.ns, o.launch_ns))
        };
        assert_eq!(parse(&[]), Ok((vec![2, 8, 32, 64], vec![1, 8, 32])));
        assert_eq!(parse(&["--quick"]), Ok((vec![2, 8], vec![1, 8])));
        assert_eq!(
            parse(&["--quick", "--n", "4,16"]),
            Ok((vec![4, 16], vec![4, 16]))
        );
    }

    #[test]
    fn the_libpmix_filter_runs_only_the_libpmix_stacks() {
        let only = configs_needed(&opts(&["libpmix"], false));
        assert_eq!(only.len(), 4, "every job setting, no maps, no launch");
        assert!(only.iter().all(|p| p.libpmix && !p.main && !p.floor));
        assert!(rows(&opts(&["libpmix"], false)).is_empty());
        assert!(launch_rows(&opts(&["libpmix"], false)).is_empty());
        let barrier = libpmix_rows(&opts(&["libpmix clients, barrier"], false));
        assert_eq!(barrier.len(), 4);
        assert!(barrier.iter().all(|r| r.metric == "barrier_us"));
        assert_eq!(
            configs_needed(&opts(
                &["libpmix clients, barrier: fence without data (µs), n=8, pinned"],
                false
            )),
            [Plan {
                config: Config::Job { n: 8, pinned: true },
                main: false,
                libpmix: true,
                floor: false,
            }]
        );
        // Without any libpmix row (the maps, the launch rows), none of its stacks runs.
        let maps = configs_needed(&opts(&["register_nspace, 10k"], false));
        assert!(maps.iter().all(|p| !p.libpmix));
    }
}
