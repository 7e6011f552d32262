//! Event handlers written in Python: a Rust handler for pmix-client that takes the GIL and
//! calls the Python function as python3-pmix does, `hdlr(evhdlr_id, status, source, info,
//! results)`, where `source` is a process dict, `info` a list of info dicts and `results`
//! the (always empty) results of earlier handlers.
//!
//! The function runs on the client's reader thread. Whatever it returns (python3-pmix asks
//! for `(status, results)`) is not passed on: pmix-client runs every matching handler in
//! turn. An exception it raises is printed on stderr (Python's unraisable hook), and the
//! other handlers still run.

use pmix_client::types::Event;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::convert::{infos_to, proc_to};

/// The Rust handler pmix-client runs for a Python function registered under `id`.
pub(crate) fn python_handler(id: u64, hdlr: Py<PyAny>) -> impl Fn(&Event) + Send + Sync {
    move |event: &Event| {
        Python::attach(|py| {
            if let Err(e) = call(py, id, &hdlr, event) {
                e.write_unraisable(py, Some(hdlr.bind(py)));
            }
        })
    }
}

fn call(py: Python<'_>, id: u64, hdlr: &Py<PyAny>, event: &Event) -> PyResult<()> {
    let source = proc_to(py, &event.source)?;
    let info = infos_to(py, &event.info)?;
    let results = PyList::empty(py);
    hdlr.call1(py, (id, event.code.0, source, info, results))?;
    Ok(())
}
