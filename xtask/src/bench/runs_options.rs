//! The options of the bench modes that time whole launches at a few process counts
//! (`--torch`, `--mpi4py-spawn`): `--n LIST`, `--runs K`, `--out FILE`.

use std::path::PathBuf;

/// What the command line asked for.
pub(super) struct RunsOptions {
    /// The process counts, each timed in turn.
    pub(super) ns: Vec<u32>,
    /// Runs of each side per count.
    pub(super) runs: u32,
    /// Where the report also goes.
    pub(super) out: Option<PathBuf>,
}

/// The options in `args`, `ns` and `runs` the defaults; `None` when help was asked for.
pub(super) fn parse(args: &[String], ns: &[u32], runs: u32) -> Result<Option<RunsOptions>, String> {
    let mut o = RunsOptions {
        ns: ns.to_vec(),
        runs,
        out: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--n" => {
                o.ns = value()?
                    .split(',')
                    .map(|n| n.trim().parse().map_err(|_| format!("--n: {n:?}")))
                    .collect::<Result<_, _>>()?
            }
            "--runs" => o.runs = value()?.parse().map_err(|_| "--runs: not a number")?,
            "--out" => o.out = Some(value()?.into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.runs < 1 || o.ns.is_empty() || o.ns.contains(&0) {
        return Err("--runs and every N must be at least 1".into());
    }
    Ok(Some(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn defaults_are_replaced_by_what_is_given_and_nonsense_is_refused() {
        let o = parse(&args(&[]), &[4], 5).unwrap().unwrap();
        assert_eq!((o.ns, o.runs, o.out), (vec![4], 5, None));
        let o = parse(&args(&["--n", "2, 8", "--runs", "3"]), &[4], 5)
            .unwrap()
            .unwrap();
        assert_eq!((o.ns, o.runs), (vec![2, 8], 3));
        assert!(parse(&args(&["--help"]), &[4], 5).unwrap().is_none());
        for bad in [
            &["--n", "0"][..],
            &["--runs", "0"],
            &["--n", "x"],
            &["--what"],
        ] {
            assert!(parse(&args(bad), &[4], 5).is_err(), "{bad:?}");
        }
    }
}
