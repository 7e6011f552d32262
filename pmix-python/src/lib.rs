//! The `pmix` Python module: PMIx for Python scripts, built on `pmix-client` with PyO3.
//!
//! Its class `PMIxClient` and its `PMIX_*` constants follow Debian's python3-pmix (the
//! Cython binding of OpenPMIx) closely enough that a script written for that binding runs on
//! this one: processes as `{'nspace', 'rank'}` dicts, values as `{'value', 'val_type'}`,
//! info lists as lists of `{'key', 'value', 'val_type'}`, results as `(rc, value)`. The
//! module carries `__implementation__ = "pmix-rs"` so a script can tell the two apart.
//! `docs/PYTHON.md` says how to build the wheel (`cargo xtask python-wheel`) and what
//! differs from python3-pmix. Rust programs want `pmix-client` itself.

mod client;
mod constants;
mod convert;
mod events;

use pyo3::prelude::*;

/// The module `pmix`.
#[pymodule]
fn pmix(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__implementation__", "pmix-rs")?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<client::PmixClient>()?;
    constants::add_all(m)
}
