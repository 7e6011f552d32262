//! placeholder
use pyo3::prelude::*;
#[pymodule]
fn pmix(_m: &Bound<'_, PyModule>) -> PyResult<()> { Ok(()) }
