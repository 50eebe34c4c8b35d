//! The committed header's version macros agree with Cargo.toml (the workspace version).
use std::path::Path;

fn define(header: &str, name: &str) -> String {
    let prefix = format!("#define {name} ");
    header
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("include/lagless.h has no `#define {name}`"))
        .trim()
        .to_string()
}

#[test]
fn header_version_macros_match_cargo_toml() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../include/lagless.h");
    let header = std::fs::read_to_string(&path).expect("include/lagless.h is committed");
    assert_eq!(
        define(&header, "LAGLESS_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MAJOR")
    );
    assert_eq!(
        define(&header, "LAGLESS_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_MINOR")
    );
    assert_eq!(
        define(&header, "LAGLESS_VERSION_PATCH"),
        env!("CARGO_PKG_VERSION_PATCH")
    );
    // LAGLESS_VERSION is spelled from the three numbers, so it can't disagree with them.
    assert_eq!(
        define(&header, "LAGLESS_VERSION"),
        "LAGLESS_STRINGIFY(LAGLESS_VERSION_MAJOR) \".\" LAGLESS_STRINGIFY(LAGLESS_VERSION_MINOR) \
         \".\" LAGLESS_STRINGIFY(LAGLESS_VERSION_PATCH)"
    );
}

#[test]
fn every_export_is_declared_in_the_header() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(root.join("../include/lagless.h")).unwrap();
    for entry in std::fs::read_dir(root.join("src")).unwrap() {
        let src = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in src.lines() {
            if let Some(rest) = line.trim().strip_prefix("pub extern \"C\" fn ") {
                let name = rest.split('(').next().unwrap();
                assert!(
                    name.starts_with("lagless_"),
                    "{name} lacks the lagless_ prefix"
                );
                let declared = header
                    .match_indices(&format!("{name}("))
                    .any(|(i, _)| matches!(header.as_bytes()[i - 1], b' ' | b'*'));
                assert!(
                    declared,
                    "{name} is exported but not in include/lagless.h: run ffi/gen-header.sh"
                );
            }
        }
    }
}
