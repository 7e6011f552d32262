//! The numbers measured: every run's, by stack, setting and metric, and what the report
//! reads of them (medians, minima, ratios, which stacks ran).

use std::collections::{BTreeMap, BTreeSet};

use super::rows::{Config, FLOOR, PUB_ALL, Stack};
use crate::bench::exec::Sample;

/// Every number measured, by side, run setting and metric (several with `--runs`).
#[derive(Default)]
pub(crate) struct Measured {
    values: BTreeMap<(Stack, Config, String), Vec<f64>>,
    /// Every side and setting that was run, even if a run gave no number.
    ran: BTreeSet<(Stack, Config)>,
}

impl Measured {
    /// One run's numbers; an empty sample records a run that gave none.
    pub(crate) fn add(&mut self, stack: Stack, config: Config, sample: &Sample) {
        self.ran.insert((stack, config));
        let mut put = |metric: &str, v: f64| {
            self.values
                .entry((stack, config, metric.to_owned()))
                .or_default()
                .push(v);
        };
        for (metric, v) in &sample.values {
            put(metric, *v);
        }
        if config == Config::Maps {
            for n in [10_000, 100_000] {
                let before = sample.values.get(&format!("rss_before_reg_{n}_kb"));
                let after = sample.values.get(&format!("rss_after_dereg_{n}_kb"));
                if let (Some(b), Some(a)) = (before, after) {
                    put(&format!("kept_after_dereg_{n}_kb"), a - b);
                }
            }
        }
    }

    /// The median of the runs.
    pub(in crate::bench) fn get(&self, stack: Stack, config: Config, metric: &str) -> Option<f64> {
        let mut v = self
            .values
            .get(&(stack, config, metric.to_owned()))?
            .clone();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let mid = v.len() / 2;
        Some(if v.len() % 2 == 1 {
            v[mid]
        } else {
            (v[mid - 1] + v[mid]) / 2.0
        })
    }

    /// The least of the runs.
    pub(in crate::bench) fn min(&self, stack: Stack, config: Config, metric: &str) -> Option<f64> {
        self.values
            .get(&(stack, config, metric.to_owned()))?
            .iter()
            .copied()
            .min_by(f64::total_cmp)
    }

    pub(super) fn ratio(&self, config: Config, metric: &str) -> Option<f64> {
        self.ratio_of(Stack::Ours, Stack::Openpmix, config, metric)
    }

    /// `a`'s median over `b`'s.
    pub(super) fn ratio_of(&self, a: Stack, b: Stack, config: Config, metric: &str) -> Option<f64> {
        let a = self.get(a, config, metric)?;
        let b = self.get(b, config, metric)?;
        (b != 0.0).then(|| a / b)
    }

    /// A side's publish/lookup/unpublish call (all ranks) in units of the platform floor.
    pub(super) fn over_floor(&self, stack: Stack, config: Config) -> Option<f64> {
        let v = self.get(stack, config, PUB_ALL)?;
        let floor = self.get(Stack::Floor, config, FLOOR)?;
        (floor != 0.0).then(|| v / floor)
    }

    pub(super) fn ran(&self, stack: Stack) -> bool {
        self.ran_where(stack, |_| true)
    }

    /// Whether `stack` was run in a setting `which` selects.
    pub(in crate::bench) fn ran_where(&self, stack: Stack, which: impl Fn(Config) -> bool) -> bool {
        self.ran.iter().any(|(s, c)| *s == stack && which(*c))
    }
}
