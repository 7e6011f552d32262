//! The tables of the numbers: the main table (ours and OpenPMIx), the platform floor next
//! to the publish/lookup/unpublish rows, and the libpmix clients under our server and under
//! OpenPMIx's. The launch table is `launch`'s.

use std::fmt::Write as _;

use super::digits::sig3;
use super::measured::Measured;
use super::rows::{FLOOR, Row, Stack, floor_configs};
use crate::bench::Options;

/// The main table: ours and OpenPMIx side by side, and their ratio; empty if no row of it is
/// selected.
pub(super) fn main_table(m: &Measured, rows: &[Row]) -> String {
    let theirs_ran = m.ran(Stack::Openpmix);
    let mut table = String::new();
    // A filter may select launch rows only.
    if !rows.is_empty() {
        let _ = writeln!(table, "| metric | ours | OpenPMIx | ours/OpenPMIx |");
        let _ = writeln!(table, "| --- | ---: | ---: | ---: |");
    }
    for r in rows {
        let ours = m.get(Stack::Ours, r.config, &r.metric);
        let theirs = m.get(Stack::Openpmix, r.config, &r.metric);
        let ratio = m.ratio(r.config, &r.metric);
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} |",
            r.label,
            ours.map_or("n/a".into(), sig3),
            match theirs {
                Some(v) => sig3(v),
                None if theirs_ran => "n/a".into(),
                None => "not run".into(),
            },
            ratio.map_or("–".into(), sig3)
        );
    }
    table
}

/// The platform floor next to each side's publish/lookup/unpublish call (all ranks), in the
/// settings where that row is selected; empty if it is in none.
pub(super) fn floor_table(opts: &Options, m: &Measured, rows: &[Row]) -> String {
    let configs = floor_configs(rows);
    if configs.is_empty() {
        return String::new();
    }
    let floor_ran = m.ran(Stack::Floor);
    let theirs_ran = m.ran(Stack::Openpmix);
    let mut t = format!(
        "\nPlatform floor (`xtask/c/floor.c`, no PMIx): N clients and one epoll server, each \
         client doing {} blocking 64-byte request/echo round trips over a Unix socketpair, all \
         at once; next to it, one publish/lookup/unpublish call of all ranks, divided by it.\n\n",
        opts.floor_round_trips()
    );
    let _ = writeln!(
        t,
        "| setting | floor (µs per round trip) | ours ÷ floor | OpenPMIx ÷ floor |"
    );
    let _ = writeln!(t, "| --- | ---: | ---: | ---: |");
    for config in configs {
        let floor = m.get(Stack::Floor, config, FLOOR);
        let ours = m.over_floor(Stack::Ours, config);
        let theirs = m.over_floor(Stack::Openpmix, config);
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} |",
            config.label(),
            match floor {
                Some(v) => sig3(v),
                None if floor_ran => "n/a".into(),
                None => "not run".into(),
            },
            ours.map_or("–".into(), sig3),
            match theirs {
                Some(v) => sig3(v),
                None if theirs_ran => "–".into(),
                None => "not run".into(),
            },
        );
    }
    t
}

/// A cell of `stack`: its median, or why there is none ("not run": the stack ran nowhere in
/// this run, and a note says why; "n/a": it ran, but gave no number here).
fn cell(m: &Measured, stack: Stack, row: &Row) -> String {
    match m.get(stack, row.config, &row.metric) {
        Some(v) => sig3(v),
        None if m.ran(stack) => "n/a".into(),
        None => "not run".into(),
    }
}

/// The libpmix table: the same client program under our server and under OpenPMIx's, with
/// OpenPMIx's default storage module and with `hash`; empty if no row of it is selected.
pub(super) fn libpmix_table(m: &Measured, rows: &[Row]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut t = String::from(
        "\nlibpmix clients: the OpenPMIx client program (`xtask/c/bench_client.c`, the same \
         workloads) under our server (`pmix-bench job --client`: its OpenPMIx 4.2 front-end, \
         loopback TCP, clients offered PMIX_GDS_MODULE=ds21,hash: they pick ds21, shared memory \
         our server writes) and under OpenPMIx's own \
         (`bench_host.c`), with its default MCA settings (gds ds21; the runs of the main \
         table's OpenPMIx column) and with PMIX_MCA_gds=hash. The whole job is the host's time \
         from starting the first client to the last one's exit. The next rows split the \
         clients' timed steps, summed over all ranks: the calls the server answers (init, put \
         + commit, the fences, the first pass of peer gets, barriers, \
         publish/lookup/unpublish, finalize) and the gets libpmix answers from what it holds \
         (the job-level gets and the repeated passes of peer gets).\n\n",
    );
    let _ = writeln!(
        t,
        "| metric | libpmix on ours | on OpenPMIx | ours/OpenPMIx | on OpenPMIx, gds hash | \
         ours/hash |"
    );
    let _ = writeln!(t, "| --- | ---: | ---: | ---: | ---: | ---: |");
    for r in rows {
        let ratio = |b| {
            m.ratio_of(Stack::LibpmixOurs, b, r.config, &r.metric)
                .map_or("–".into(), sig3)
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} |",
            r.label,
            cell(m, Stack::LibpmixOurs, r),
            cell(m, Stack::Openpmix, r),
            ratio(Stack::Openpmix),
            cell(m, Stack::OpenpmixHash, r),
            ratio(Stack::OpenpmixHash),
        );
    }
    t
}

/// The client library table: the same client program on OpenPMIx's `libpmix.so.2` and on
/// pmix-rs's (`pmix-capi`), under our server and under OpenPMIx's; empty if no row of the
/// libpmix table is selected (it has the same rows).
pub(super) fn capi_table(m: &Measured, rows: &[Row]) -> String {
    if rows.is_empty() || !(m.ran(Stack::CapiOurs) || m.ran(Stack::CapiOpenpmix)) {
        return String::new();
    }
    let mut t = String::from(
        "\nClient libraries: the same client program (`xtask/c/bench_client.c`, built against \
         Debian's OpenPMIx 4.2 headers) on OpenPMIx's `libpmix.so.2` and on pmix-rs's \
         (`pmix-capi`, through the clients' `LD_LIBRARY_PATH`), under our server (`pmix-bench \
         job --client`) and under OpenPMIx's (`bench_host.c`, default MCA settings), in the \
         same runs as the table above. Rows as above; below 1, pmix-rs's library is faster \
         under the same server.\n\n",
    );
    let _ = writeln!(
        t,
        "| metric | our server: OpenPMIx's lib | pmix-rs's lib | pmix-rs/OpenPMIx | \
         OpenPMIx's server: OpenPMIx's lib | pmix-rs's lib | pmix-rs/OpenPMIx |"
    );
    let _ = writeln!(t, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in rows {
        let ratio = |a, b| {
            m.ratio_of(a, b, r.config, &r.metric)
                .map_or("–".into(), sig3)
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.label,
            cell(m, Stack::LibpmixOurs, r),
            cell(m, Stack::CapiOurs, r),
            ratio(Stack::CapiOurs, Stack::LibpmixOurs),
            cell(m, Stack::Openpmix, r),
            cell(m, Stack::CapiOpenpmix, r),
            ratio(Stack::CapiOpenpmix, Stack::Openpmix),
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::super::rows::{Config, PUB_ALL, opts, rows};
    use super::*;
    use crate::bench::exec::Sample;

    #[test]
    fn the_floor_table_without_floor_or_openpmix() {
        let mut m = Measured::default();
        let config = Config::Job { n: 2, pinned: true };
        let mut s = Sample::default();
        s.values.insert(PUB_ALL.into(), 30.0);
        m.add(Stack::Ours, config, &s);
        let o = opts(&["all ranks (µs per call), n=2, pinned"], true);
        let table = floor_table(&o, &m, &rows(&o));
        assert!(table.contains("150 blocking"), "{table}");
        assert!(
            table.contains("| N=2, pinned | not run | – | not run |"),
            "{table}"
        );
    }
}
