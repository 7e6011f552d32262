//! What this library calls itself (`PMIx_Get_version`).

/// This library's version, `"pmix-rs <version>"`: the counterpart of `PMIx_Get_version`, which
/// OpenPMIx answers with `"OpenPMIx <version>, ..."`. Needs no connection, as there.
///
/// ```
/// assert!(pmix_client::version().starts_with("pmix-rs "));
/// ```
pub fn version() -> &'static str {
    concat!("pmix-rs ", env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_the_library_and_its_version() {
        let v = super::version();
        assert_eq!(v.strip_prefix("pmix-rs "), Some(env!("CARGO_PKG_VERSION")));
        assert!(v.split('.').count() >= 3, "{v}");
    }
}
