//! `lagless`: see the library's docs (src/lib.rs) and the repository's README, "Operating
//! lagless".
fn main() -> std::process::ExitCode {
    let status = lagless_cli::run(std::env::args_os());
    std::process::ExitCode::from(u8::try_from(status).unwrap_or(1))
}
