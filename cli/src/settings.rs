//! The client configuration from the command line, kcat's way: `-F file` first, then each
//! `-X key=value` in order, then `-b`. Every key goes through the library's config table, so a
//! bad key or value gets the library's own error.
use lagless::{Config, Error};

/// Where the tool starts reading or resets to: `earliest`, `latest`, an offset (`offset:N` or
/// just `N`), or a timestamp in ms since the epoch (`timestamp:MS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    Earliest,
    Latest,
    Offset(i64),
    Timestamp(i64),
}

/// Parses a [`Position`].
pub fn parse_position(s: &str) -> Result<Position, String> {
    let s = s.trim();
    let number = |n: &str, what: &str| {
        n.trim()
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| format!("`{s}`: {what} must be a number >= 0"))
    };
    match s {
        "earliest" | "beginning" => Ok(Position::Earliest),
        "latest" | "end" => Ok(Position::Latest),
        _ => {
            if let Some(n) = s.strip_prefix("offset:") {
                number(n, "the offset").map(Position::Offset)
            } else if let Some(n) = s.strip_prefix("timestamp:") {
                number(n, "the timestamp").map(Position::Timestamp)
            } else if s.chars().all(|c| c.is_ascii_digit()) && !s.is_empty() {
                number(s, "the offset").map(Position::Offset)
            } else {
                Err(format!(
                    "`{s}`: expected earliest, latest, offset:N (or N) or timestamp:MS"
                ))
            }
        }
    }
}

/// Splits `key=value` (the value may contain `=`; surrounding whitespace is the config's to
/// trim).
pub fn parse_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{s}`: expected key=value")),
    }
}

/// The `key=value` lines of a config file (Java properties' simple form): blank lines and
/// lines starting with `#` or `!` are skipped. An error names the line.
pub fn parse_config_file(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        out.push(parse_pair(line).map_err(|e| format!("line {}: {e}", i + 1))?);
    }
    Ok(out)
}

/// The config: the file's pairs, then the `-X` pairs, then `-b`, each checked by the library.
pub fn build_config(
    file: &[(String, String)],
    extra: &[(String, String)],
    bootstrap: Option<&str>,
) -> Result<Config, Error> {
    let mut c = Config::new();
    for (k, v) in file.iter().chain(extra) {
        c.set(k, v)?;
    }
    if let Some(b) = bootstrap {
        c.set("bootstrap.servers", b)?;
    }
    Ok(c)
}

/// Sets `key` unless the user set it (`-X`/`-F`): the command's defaults never override them.
pub fn default_to(c: &mut Config, key: &str, value: &str) -> Result<(), Error> {
    if !c.is_set(key) {
        c.set(key, value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions() {
        let table = [
            ("earliest", Ok(Position::Earliest)),
            ("beginning", Ok(Position::Earliest)),
            ("latest", Ok(Position::Latest)),
            ("end", Ok(Position::Latest)),
            ("42", Ok(Position::Offset(42))),
            ("offset:7", Ok(Position::Offset(7))),
            (
                "timestamp:1700000000000",
                Ok(Position::Timestamp(1_700_000_000_000)),
            ),
            ("offset:-1", Err(())),
            ("-3", Err(())),
            ("timestamp:soon", Err(())),
            ("", Err(())),
            ("middle", Err(())),
        ];
        for (s, want) in table {
            assert_eq!(parse_position(s).map_err(|_| ()), want, "{s:?}");
        }
    }

    #[test]
    fn pairs_and_files() {
        assert_eq!(
            parse_pair("sasl.jaas.config=a=b").unwrap(),
            ("sasl.jaas.config".into(), "a=b".into())
        );
        assert!(parse_pair("novalue").is_err());
        assert!(parse_pair("=x").is_err());
        let file = "# comment\n\n! also\nclient.id = tool\nfetch.min.bytes=1\n";
        assert_eq!(
            parse_config_file(file).unwrap(),
            vec![
                ("client.id".into(), " tool".into()),
                ("fetch.min.bytes".into(), "1".into())
            ]
        );
        assert_eq!(
            parse_config_file("a=1\nbroken\n").unwrap_err(),
            "line 2: `broken`: expected key=value"
        );
    }

    #[test]
    fn the_config_takes_file_then_x_then_b_and_refuses_bad_keys() {
        let file = vec![("client.id".to_string(), "from-file".to_string())];
        let extra = vec![
            ("client.id".to_string(), "from-x".to_string()),
            ("bootstrap.servers".to_string(), "x:1".to_string()),
        ];
        let c = build_config(&file, &extra, Some("b:2")).unwrap();
        assert_eq!(c.get("client.id").unwrap().as_deref(), Some("from-x"));
        assert_eq!(c.get("bootstrap.servers").unwrap().as_deref(), Some("b:2"));
        let bad = vec![("fetch.min.byts".to_string(), "1".to_string())];
        let e = build_config(&[], &bad, None).unwrap_err();
        assert!(e.to_string().contains("fetch.min.byts"), "{e}");
        let mut c = build_config(&[], &extra, None).unwrap();
        default_to(&mut c, "client.id", "lagless").unwrap();
        default_to(&mut c, "group.id", "g").unwrap();
        assert_eq!(c.get("client.id").unwrap().as_deref(), Some("from-x"));
        assert_eq!(c.get("group.id").unwrap().as_deref(), Some("g"));
    }
}
