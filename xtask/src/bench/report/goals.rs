//! The goals judged on the numbers: issue 6's on the main table (with the platform floor's
//! line and the memory given back), and the libpmix clients' on the libpmix table.

use super::digits::sig3;
use super::measured::Measured;
use super::rows::{
    Config, FLOOR, HOST_METRICS, JOB_MS, LIBPMIX, PUB_ALL, Row, SPLIT_ROWS, Stack, floor_configs, k,
};
use crate::bench::exec::SERVED_MS;

/// A goal of issue 6: the worst of some ratios must stay at or under `target`.
struct Goal {
    name: &'static str,
    target: f64,
    metrics: &'static [&'static str],
    /// Only these N (empty: all).
    ns: &'static [u32],
    /// Followed by a line on the platform floor: floor/OpenPMIx, the best ratio one socket
    /// round trip per call allows.
    floor: bool,
}

const GOALS: &[Goal] = &[
    Goal {
        name: "job-level get",
        target: 0.01,
        metrics: &["get_job_solo_us", "get_job_all_us"],
        ns: &[],
        floor: false,
    },
    Goal {
        name: "cached peer get",
        target: 0.01,
        metrics: &["get_peer_warm_us"],
        ns: &[],
        floor: false,
    },
    Goal {
        name: "barrier at N=2 and N=64",
        target: 0.5,
        metrics: &["barrier_us"],
        ns: &[2, 64],
        floor: false,
    },
    Goal {
        name: "collecting fence (first, repeated) at N=2 and N=64",
        target: 0.5,
        metrics: &["fence_first_us", "fence_collect_us"],
        ns: &[2, 64],
        floor: false,
    },
    Goal {
        name: "publish/lookup/unpublish",
        target: 0.25,
        metrics: &[
            "pub_solo_publish_us",
            "pub_solo_lookup_us",
            "pub_solo_unpublish_us",
            "pub_all_op_us",
        ],
        ns: &[],
        floor: true,
    },
    Goal {
        name: "init",
        target: 0.2,
        metrics: &["init_ms"],
        ns: &[],
        floor: false,
    },
    Goal {
        name: "register_nspace of 100k processes, time",
        target: 0.2,
        metrics: &["register_nspace_100000_ms"],
        ns: &[],
        floor: false,
    },
    Goal {
        name: "register_nspace of 100k processes, memory",
        target: 0.2,
        metrics: &["register_nspace_100000_rss_kb"],
        ns: &[],
        floor: false,
    },
];

/// The line after `g`: the platform floor divided by OpenPMIx's call, at the setting where
/// that is largest, against `g`'s target. No server doing one socket round trip per call can
/// have a ratio below it there.
fn floor_line(m: &Measured, rows: &[Row], g: &Goal) -> [String; 4] {
    let mut worst: Option<(f64, Config)> = None;
    for config in floor_configs(rows) {
        let floor = m.get(Stack::Floor, config, FLOOR);
        let theirs = m.get(Stack::Openpmix, config, PUB_ALL);
        if let (Some(f), Some(t)) = (floor, theirs) {
            let x = f / t;
            if t != 0.0 && worst.is_none_or(|(w, _)| x > w) {
                worst = Some((x, config));
            }
        }
    }
    let name = format!("{}: platform floor / OpenPMIx, all ranks", g.name);
    let target = format!("≤ {}", g.target);
    match worst {
        None => [name, target, "not measured".into(), "not judged".into()],
        Some((x, config)) => [
            name,
            target,
            format!("{} ({})", sig3(x), config.label()),
            if x <= g.target {
                "within reach of one round trip per call"
            } else {
                "out of reach of one round trip per call"
            }
            .into(),
        ],
    }
}

/// (goal, target, worst, where, verdict) lines.
pub(super) fn judge(m: &Measured, rows: &[Row]) -> Vec<[String; 4]> {
    let mut out = Vec::new();
    for g in GOALS {
        let mut worst: Option<(f64, &Row)> = None;
        let mut missing = 0;
        for r in rows
            .iter()
            .filter(|r| g.metrics.contains(&r.metric.as_str()))
        {
            if let Config::Job { n, .. } = r.config {
                if !g.ns.is_empty() && !g.ns.contains(&n) {
                    continue;
                }
            }
            match m.ratio(r.config, &r.metric) {
                Some(x) if worst.is_none_or(|(w, _)| x > w) => worst = Some((x, r)),
                Some(_) => {}
                None => missing += 1,
            }
        }
        let target = format!("≤ {}", g.target);
        out.push(match worst {
            None => [
                g.name.into(),
                target,
                "not measured".into(),
                "not judged".into(),
            ],
            Some((x, r)) => {
                let mut verdict = if x <= g.target { "met" } else { "NOT met" }.to_owned();
                if missing > 0 {
                    verdict.push_str(&format!(" ({missing} rows without a ratio)"));
                }
                [
                    g.name.into(),
                    target,
                    format!("{} ({})", sig3(x), r.label),
                    verdict,
                ]
            }
        });
        if g.floor {
            out.push(floor_line(m, rows, g));
        }
    }
    // Memory given back: our own before/after, no ratio; OpenPMIx's for reference.
    let mut worst: Option<(f64, String)> = None;
    let mut theirs: Option<f64> = None;
    let growth = |stack: Stack, config: Config, before: &str, after: &str| {
        let b = m.get(stack, config, before)?;
        let a = m.get(stack, config, after)?;
        (b > 0.0).then(|| (a - b) / b)
    };
    let configs: Vec<Config> = {
        let mut c: Vec<Config> = rows.iter().map(|r| r.config).collect();
        c.dedup();
        c
    };
    for config in configs {
        let pairs: Vec<(String, String, String)> = match config {
            Config::Job { .. } => {
                vec![("rss_init_kb".into(), "rss_dereg_kb".into(), config.label())]
            }
            Config::Maps => [10_000, 100_000]
                .iter()
                .map(|n| {
                    (
                        format!("rss_before_reg_{n}_kb"),
                        format!("rss_after_dereg_{n}_kb"),
                        format!("register_nspace of {} processes", k(*n)),
                    )
                })
                .collect(),
            Config::Launch { .. } => Vec::new(),
        };
        for (before, after, place) in pairs {
            if let Some(g) = growth(Stack::Ours, config, &before, &after) {
                if worst.as_ref().is_none_or(|(w, _)| g > *w) {
                    worst = Some((g, place));
                    theirs = growth(Stack::Openpmix, config, &before, &after);
                }
            }
        }
    }
    out.push(match worst {
        None => [
            "server RSS after deregister, vs before register (ours)".into(),
            "≤ +10%".into(),
            "not measured".into(),
            "not judged".into(),
        ],
        Some((g, place)) => [
            "server RSS after deregister, vs before register (ours)".into(),
            "≤ +10%".into(),
            format!(
                "{:+.0}% ({place}; OpenPMIx there: {})",
                g * 100.0,
                theirs.map_or("–".into(), |t| format!("{:+.0}%", t * 100.0))
            ),
            if g <= 0.10 { "met" } else { "NOT met" }.into(),
        ],
    });
    out
}

/// The goal lines of the libpmix table: the libpmix clients faster under our server than
/// under OpenPMIx's, with its default storage and with `hash`; as a whole job at every N, and
/// in every client row (not the host's rows); judged on the largest ratio of the medians.
pub(super) fn libpmix_goals(m: &Measured, rows: &[Row]) -> Vec<[String; 4]> {
    let theirs = [
        (Stack::Openpmix, "default MCA, gds ds21"),
        (Stack::OpenpmixHash, "gds hash"),
    ];
    fn whole(r: &&Row) -> bool {
        r.metric == JOB_MS
    }
    fn served(r: &&Row) -> bool {
        r.metric == SERVED_MS
    }
    fn each(r: &&Row) -> bool {
        r.metric != JOB_MS
            && !SPLIT_ROWS.iter().any(|(m, _)| *m == r.metric)
            && !HOST_METRICS.contains(&r.metric.as_str())
    }
    let mut out = Vec::new();
    for (what, select) in [
        ("whole job at every N", whole as fn(&&Row) -> bool),
        ("time in calls the server answers at every N", served),
        ("every client row", each),
    ] {
        for (stack, how) in theirs {
            let name =
                format!("libpmix clients faster under ours than under OpenPMIx ({how}), {what}");
            out.push(libpmix_goal(m, rows.iter().filter(select), stack, name));
        }
    }
    out
}

/// One goal line of the libpmix table: the worst of `rows`' ratios, ours over `theirs`.
fn libpmix_goal<'a>(
    m: &Measured,
    rows: impl Iterator<Item = &'a Row>,
    theirs: Stack,
    name: String,
) -> [String; 4] {
    let ratios = rows.map(|r| {
        (
            m.ratio_of(Stack::LibpmixOurs, theirs, r.config, &r.metric),
            r,
        )
    });
    worst_below_one(name, ratios, |r| {
        let label = r.label.strip_prefix(LIBPMIX).unwrap_or(&r.label);
        label.trim_start_matches(", ").to_owned()
    })
}

/// A goal line judged on the worst (largest) of `ratios`, one per row (`None` where a row has
/// none), against "< 1": the goal's name, the target, the worst ratio with its row as `label`
/// names it, and the verdict (saying how many rows had no ratio).
pub(in crate::bench) fn worst_below_one<'a>(
    name: String,
    ratios: impl Iterator<Item = (Option<f64>, &'a Row)>,
    label: impl Fn(&Row) -> String,
) -> [String; 4] {
    let target = "< 1".to_owned();
    let mut worst: Option<(f64, &Row)> = None;
    let mut missing = 0;
    for (ratio, r) in ratios {
        match ratio {
            Some(x) if worst.is_none_or(|(w, _)| x > w) => worst = Some((x, r)),
            Some(_) => {}
            None => missing += 1,
        }
    }
    match worst {
        None => [name, target, "not measured".into(), "not judged".into()],
        Some((x, r)) => {
            let mut verdict = if x < 1.0 { "met" } else { "NOT met" }.to_owned();
            if missing > 0 {
                verdict.push_str(&format!(" ({missing} rows without a ratio)"));
            }
            [name, target, format!("{} ({})", sig3(x), label(r)), verdict]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::{JOB_ROWS, libpmix_rows, opts, rows};
    use super::super::tables::{floor_table, libpmix_table};
    use super::*;
    use crate::bench::exec::{LOCAL_MS, Sample};

    #[test]
    fn the_floor_table_and_its_goal_line() {
        let mut m = Measured::default();
        let pinned = Config::Job { n: 2, pinned: true };
        let unpinned = Config::Job {
            n: 2,
            pinned: false,
        };
        // (setting, ours, OpenPMIx, floor runs): the floor's median is its middle run.
        for (config, ours, theirs, floors) in [
            (pinned, 30.0, 100.0, [10.0, 20.0, 500.0]),
            (unpinned, 80.0, 120.0, [35.0, 40.0, 45.0]),
        ] {
            for (stack, metric, v) in [
                (Stack::Ours, PUB_ALL, ours),
                (Stack::Openpmix, PUB_ALL, theirs),
            ] {
                let mut s = Sample::default();
                s.values.insert(metric.into(), v);
                m.add(stack, config, &s);
            }
            for f in floors {
                m.add(
                    Stack::Floor,
                    config,
                    &Sample::parse(&format!(
                        "CLIENT 0 floor_op_us {}\nCLIENT 1 floor_op_us {}\n",
                        f - 1.0,
                        f + 1.0
                    )),
                );
            }
        }
        let o = opts(&["publish/lookup/unpublish, all ranks"], false);
        let selected = rows(&o);
        let table = floor_table(&o, &m, &selected);
        assert!(table.contains("600 blocking"), "{table}");
        assert!(
            table.contains("| N=2, pinned | 20.0 | 1.50 | 5.00 |"),
            "{table}"
        );
        assert!(
            table.contains("| N=2, unpinned | 40.0 | 2.00 | 3.00 |"),
            "{table}"
        );
        // N=8 is selected but has no numbers: the floor ran, just not there.
        assert!(table.contains("| N=8, pinned | n/a | – | – |"), "{table}");
        let verdicts = judge(&m, &selected);
        let publish = verdicts
            .iter()
            .position(|v| v[0] == "publish/lookup/unpublish")
            .unwrap_or(usize::MAX);
        // The goal itself is judged as before: its worst ratio, 80/120.
        assert_eq!(
            verdicts[publish][2],
            "0.667 (publish/lookup/unpublish, all ranks (µs per call), N=2, unpinned)"
        );
        assert_eq!(verdicts[publish][3], "NOT met (2 rows without a ratio)");
        // The floor line: floor/OpenPMIx at its largest, 40/120 unpinned (pinned: 20/100).
        let floor = &verdicts[publish + 1];
        assert!(floor[0].contains("platform floor"), "{floor:?}");
        assert_eq!(floor[1], "≤ 0.25");
        assert_eq!(floor[2], "0.333 (N=2, unpinned)");
        assert_eq!(floor[3], "out of reach of one round trip per call");
        // No floor rows selected: no table, and the line says so.
        let barrier = rows(&opts(&["barrier"], false));
        assert_eq!(floor_table(&o, &m, &barrier), "");
        let goal = GOALS.iter().find(|g| g.floor);
        let line = goal.map(|g| floor_line(&m, &barrier, g));
        assert_eq!(line.map(|l| l[2].clone()).as_deref(), Some("not measured"));
    }

    #[test]
    fn medians_ratios_and_goals() {
        let mut m = Measured::default();
        let job = Config::Job { n: 2, pinned: true };
        for (stack, v) in [(Stack::Ours, 0.05), (Stack::Openpmix, 10.0)] {
            let mut s = Sample::default();
            s.values.insert("get_job_solo_us".into(), v);
            s.values.insert("rss_init_kb".into(), 1000.0);
            s.values.insert("rss_dereg_kb".into(), 1200.0);
            m.add(stack, job, &s);
        }
        assert_eq!(m.ratio(job, "get_job_solo_us"), Some(0.005));
        let rows = rows(&opts(&[], false));
        let verdicts = judge(&m, &rows);
        assert_eq!(verdicts[0][3], "met (7 rows without a ratio)");
        assert_eq!(verdicts[2][2], "not measured");
        let memory = verdicts.last().map(|v| v[3].clone());
        assert_eq!(memory.as_deref(), Some("NOT met"));
    }

    #[test]
    fn the_libpmix_table_and_its_goal_lines() {
        let mut m = Measured::default();
        let two = Config::Job { n: 2, pinned: true };
        let add = |m: &mut Measured, stack, config, metric: &str, v: f64| {
            let mut s = Sample::default();
            s.values.insert(metric.into(), v);
            m.add(stack, config, &s);
        };
        for (stack, barrier, init, server) in [
            (Stack::LibpmixOurs, 50.0, 4.0, 1.0),
            (Stack::Openpmix, 100.0, 20.0, 0.5),
            (Stack::OpenpmixHash, 80.0, 5.0, 0.5),
        ] {
            add(&mut m, stack, two, "barrier_us", barrier);
            add(&mut m, stack, two, "init_ms", init);
            add(&mut m, stack, two, "server_init_ms", server);
        }
        let o = opts(
            &[
                "libpmix clients, barrier",
                "libpmix clients, init",
                "libpmix clients, server init",
            ],
            false,
        );
        let rows = libpmix_rows(&o);
        assert_eq!(rows.len(), 12);
        let t = libpmix_table(&m, &rows);
        assert!(
            t.contains("| libpmix clients, barrier: fence without data (µs), N=2, pinned | 50.0 | 100 | 0.500 | 80.0 | 0.625 |"),
            "{t}"
        );
        assert!(
            t.contains("| libpmix clients, init (ms), N=8, unpinned | n/a | n/a | – | n/a | – |"),
            "{t}"
        );
        let g = libpmix_goals(&m, &rows);
        assert_eq!(g.len(), 6);
        // No whole-job row selected: those lines are not judged.
        assert!(
            g[0][0].contains("whole job") && g[0][0].contains("ds21"),
            "{:?}",
            g[0]
        );
        assert_eq!(g[0][3], "not judged");
        assert!(
            g[1][0].contains("whole job") && g[1][0].contains("gds hash"),
            "{:?}",
            g[1]
        );
        assert!(g[2][0].contains("calls the server answers"), "{:?}", g[2]);
        assert_eq!(g[2][3], "not judged");
        // The host's rows (server init, 2.0 here) are not judged; the clients' worst is init.
        assert!(g[4][0].contains("every client row"), "{:?}", g[4]);
        assert_eq!(
            g[4][2],
            "0.500 (barrier: fence without data (µs), N=2, pinned)"
        );
        assert_eq!(g[4][3], "met (6 rows without a ratio)");
        assert_eq!(g[5][2], "0.800 (init (ms), N=2, pinned)");
        assert!(g[5][0].contains("gds hash"), "{:?}", g[5]);
        // The whole job: its own rows, first in the table, judged on their own.
        for (stack, v) in [
            (Stack::LibpmixOurs, 900.0),
            (Stack::Openpmix, 1000.0),
            (Stack::OpenpmixHash, 800.0),
        ] {
            add(&mut m, stack, two, JOB_MS, v);
        }
        let o = opts(
            &["libpmix clients, whole job, first start to last exit (ms), n=2, pinned"],
            false,
        );
        let whole = libpmix_rows(&o);
        assert_eq!(whole.len(), 1);
        let t = libpmix_table(&m, &whole);
        assert!(t.contains("| 900 | 1000 | 0.900 | 800 | 1.13 |"), "{t}");
        let g = libpmix_goals(&m, &whole);
        assert_eq!(
            g[0][2],
            "0.900 (whole job, first start to last exit (ms), N=2, pinned)"
        );
        assert_eq!(g[0][3], "met");
        assert_eq!(g[1][3], "NOT met");
        assert_eq!(g[2][3], "not judged");
        assert_eq!(g[4][3], "not judged");
        // The time in calls the server answers: its own rows and goal lines, and not part of
        // "every client row".
        for (stack, v) in [
            (Stack::LibpmixOurs, 300.0),
            (Stack::Openpmix, 250.0),
            (Stack::OpenpmixHash, 400.0),
        ] {
            add(&mut m, stack, two, SERVED_MS, v);
        }
        let served = libpmix_rows(&opts(
            &["calls the server answers (ms), n=2, pinned"],
            false,
        ));
        assert_eq!(served.len(), 1, "{served:?}");
        let g = libpmix_goals(&m, &served);
        assert_eq!(g[2][3], "NOT met");
        assert!(
            g[2][2].starts_with("1.20 (all ranks' time in calls"),
            "{:?}",
            g[2]
        );
        assert_eq!(g[3][3], "met");
        assert_eq!(g[4][3], "not judged");
        let all = libpmix_rows(&opts(&["libpmix"], false));
        assert_eq!(all.len(), 4 * (JOB_ROWS.len() + 3));
        assert_eq!(all[0].metric, JOB_MS);
        assert_eq!(all[4].metric, SERVED_MS);
        assert_eq!(all[8].metric, LOCAL_MS);
        // Nothing of OpenPMIx ran: "not run", and the goals are not judged.
        let mut ours_only = Measured::default();
        add(&mut ours_only, Stack::LibpmixOurs, two, "barrier_us", 50.0);
        let t = libpmix_table(&ours_only, &rows);
        assert!(
            t.contains("| libpmix clients, barrier: fence without data (µs), N=2, pinned | 50.0 | not run | – | not run | – |"),
            "{t}"
        );
        assert_eq!(libpmix_goals(&ours_only, &rows)[2][3], "not judged");
        assert_eq!(libpmix_table(&m, &[]), "");
    }
}
