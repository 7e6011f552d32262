//! Where each application context's ranks are in its job, and where its processes start.

use std::path::{Path, PathBuf};

use pmix_types::Rank;

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
