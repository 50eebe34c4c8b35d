//! Link settings of liblagless.so: its soname, and a version script that exports only `lagless_*`.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=lagless.map");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liblagless.so.0");
        println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/lagless.map");
    }
}
