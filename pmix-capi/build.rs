//! Gives the shared library the soname of OpenPMIx's client library, so a program linked
//! against `libpmix.so.2` loads this one when it comes first on `LD_LIBRARY_PATH`.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libpmix.so.2");
}
