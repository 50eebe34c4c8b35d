//! `sasl.jaas.config`: the Java client's one-line JAAS login module entry, e.g.
//!
//! ```text
//! org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s";
//! ```
//!
//! The grammar is that of Java's `JaasConfig` (a `StreamTokenizer`): a login module class, a
//! control flag (`required`, `requisite`, `sufficient`, `optional`), options `name=value` whose
//! value is a bare word or a double-quoted string with backslash escapes, and a closing `;`.
//! A client takes exactly one entry. Errors name the problem, never a value: the values are
//! passwords and client secrets. Nor do they quote a word that could be a piece of one (an
//! unquoted `password=hunter two;` reads `two` as an option name): only the class name and the
//! option names lagless reads are quoted, anything else is named by its position.
use std::collections::BTreeMap;
use std::fmt;

use crate::error::{Error, Result};
use crate::secret::Secret;

const KEY: &str = "sasl.jaas.config";

/// The login modules lagless understands, by what they mean for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginModule {
    /// `org.apache.kafka.common.security.plain.PlainLoginModule`: `username`, `password`.
    Plain,
    /// `org.apache.kafka.common.security.scram.ScramLoginModule`: `username`, `password`.
    Scram,
    /// `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule`: the unsecured
    /// `unsecuredLogin*` options, or `clientId`/`clientSecret`/`scope` for OIDC.
    OAuthBearer,
}

/// One parsed entry. `Debug` shows the names of the options lagless reads and how many others
/// there are (another name may be a piece of a value that lacked quotes).
#[derive(Clone, PartialEq, Eq)]
pub struct JaasEntry {
    /// The entry's login module.
    pub module: LoginModule,
    options: BTreeMap<String, Secret>,
}

impl fmt::Debug for JaasEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = self
            .options
            .keys()
            .filter_map(|k| known_option(k))
            .collect();
        f.debug_struct("JaasEntry")
            .field("module", &self.module)
            .field("options", &known)
            .field("other_options", &(self.options.len() - known.len()))
            .finish()
    }
}

impl JaasEntry {
    /// An option's value (every value is kept as a secret, as the parser cannot know which are).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.options.get(name).map(Secret::expose)
    }

    /// An option's value as a [`Secret`], for passwords and client secrets.
    pub fn secret(&self, name: &str) -> Option<Secret> {
        self.options.get(name).cloned()
    }

    /// The options whose names start with `prefix`, with the prefix cut off (for
    /// `unsecuredLoginExtension_<name>` and `extension_<name>`).
    pub fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.options
            .iter()
            .filter_map(move |(k, v)| k.strip_prefix(prefix).map(|n| (n, v.expose())))
    }
}

/// The class names lagless understands, with the login module each stands for.
const MODULES: [(&str, LoginModule); 3] = [
    (
        "org.apache.kafka.common.security.plain.PlainLoginModule",
        LoginModule::Plain,
    ),
    (
        "org.apache.kafka.common.security.scram.ScramLoginModule",
        LoginModule::Scram,
    ),
    (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
        LoginModule::OAuthBearer,
    ),
];

const FLAGS: [&str; 4] = ["required", "requisite", "sufficient", "optional"];

/// The option names lagless reads. Only these are ever quoted in an error: any other word may
/// be a piece of a value that needed quotes (`password=hunter two;` reads `two` as an option
/// name), so an error names it by position instead. The `*_<name>` families are left out for
/// the same reason: their suffix is free text.
const KNOWN_OPTIONS: [&str; 8] = [
    "username",
    "password",
    "clientId",
    "clientSecret",
    "scope",
    "unsecuredLoginPrincipalClaimName",
    "unsecuredLoginScopeClaimName",
    "unsecuredLoginLifetimeSeconds",
];

fn known_option(name: &str) -> Option<&'static str> {
    KNOWN_OPTIONS.into_iter().find(|k| *k == name)
}

/// How an error names the option `name` whose name starts at character `at`: by name when it is
/// one of [`KNOWN_OPTIONS`], else by position.
fn describe(name: &str, at: usize) -> String {
    match known_option(name) {
        Some(k) => format!("option `{k}`"),
        None => format!("the option at character {at}"),
    }
}

/// Parses a `sasl.jaas.config` value.
///
/// Errors quote no text of the entry but fixed words (the login module class, a known option
/// name); anything else is named by its position (1-based, in characters).
pub fn parse(text: &str) -> Result<JaasEntry> {
    let mut t = Tokens {
        chars: text.chars().collect(),
        pos: 0,
        after: None,
    };
    let class = match t.next()? {
        Some((Token::Word(w), _)) => w,
        Some(_) | None => {
            return Err(err(format!(
                "expected a login module class name first, such as {}",
                MODULES[0].0
            )))
        }
    };
    let module = module(&class)?;
    match t.next()? {
        Some((Token::Word(flag), _)) if FLAGS.contains(&flag.to_ascii_lowercase().as_str()) => {}
        Some((Token::Word(w), _)) if known_option(&w).is_some() => {
            return Err(err(format!(
                "option `{w}` where the control flag was expected: the class name is followed \
                 by `required` (or `requisite`, `sufficient`, `optional`)"
            )))
        }
        Some((_, at)) => {
            return Err(err(format!(
                "the word at character {at} is not a login module control flag: the class \
                 name is followed by `required` (or `requisite`, `sufficient`, `optional`)"
            )))
        }
        None => {
            return Err(err(
                "expected the control flag `required` after the class name",
            ))
        }
    }
    let mut options = BTreeMap::new();
    loop {
        let (name, at) = match t.next()? {
            Some((Token::Semicolon, _)) => break,
            Some((Token::Word(w), at)) => (w, at),
            Some((Token::Equals, at)) => {
                return Err(err(format!(
                    "`=` without an option name before it {}",
                    t.place(at)
                )))
            }
            Some((Token::Quoted(_), at)) => {
                return Err(err(format!(
                    "a quoted string where an option name was expected {}; a value is quoted \
                     as a whole",
                    t.place(at)
                )))
            }
            None => return Err(err("the entry does not end with `;`")),
        };
        let option = describe(&name, at);
        if !matches!(t.next()?, Some((Token::Equals, _))) {
            return Err(err(match known_option(&name) {
                Some(k) => format!("expected `=` after option `{k}`"),
                // The word is most likely the rest of the previous value.
                None => format!(
                    "expected `name=value` {}; a value with spaces or `;` needs double quotes",
                    t.place(at)
                ),
            }));
        }
        let value = match t.next_value(&option)? {
            Some((Token::Word(v), _)) => {
                // A bare word ends at a space or `;`; anything else means the value needed
                // quotes (a password with `+` or `/`), and reading on would split it.
                if t.peek().is_some_and(|c| !c.is_whitespace() && c != ';') {
                    return Err(err(format!(
                        "{option} has a value with a character that needs double quotes"
                    )));
                }
                v
            }
            Some((Token::Quoted(v), _)) => v,
            _ => return Err(err(format!("{option} has no value"))),
        };
        if options.insert(name.clone(), Secret::new(value)).is_some() {
            return Err(err(format!("{option} is given twice")));
        }
        t.after = known_option(&name);
    }
    if let Some((_, at)) = t.next()? {
        return Err(err(format!(
            "text at character {at}, after the first entry's `;`: a client takes exactly one \
             login module"
        )));
    }
    Ok(JaasEntry { module, options })
}

/// The login module of a class name. The name is quoted only when it ends in `LoginModule`:
/// then it is a class, not a value put first by mistake.
fn module(class: &str) -> Result<LoginModule> {
    if let Some((_, m)) = MODULES.iter().find(|(name, _)| *name == class) {
        return Ok(m.clone());
    }
    if class == "com.sun.security.auth.module.Krb5LoginModule" {
        return Err(err(
            "Krb5LoginModule (GSSAPI/Kerberos) is not supported; use SCRAM-SHA-512, PLAIN over \
             SSL or OAUTHBEARER",
        ));
    }
    if !class.ends_with("LoginModule") {
        return Err(err(format!(
            "expected a login module class name first, such as {}",
            MODULES[0].0
        )));
    }
    // `PlainLoginModule` alone, or in another package: Java needs the full name, and so does
    // lagless, to mean the same thing.
    let simple = class.rsplit('.').next().unwrap_or(class);
    if let Some((full, _)) = MODULES
        .iter()
        .find(|(name, _)| name.ends_with(&format!(".{simple}")))
    {
        return Err(err(format!(
            "login module `{class}` needs its full class name: {full}"
        )));
    }
    Err(err(format!(
        "login module `{class}` is not supported; lagless understands {}, {} and {}",
        MODULES[0].0, MODULES[1].0, MODULES[2].0
    )))
}

fn err(message: impl Into<String>) -> Error {
    Error::config(KEY, message.into())
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

struct Tokens {
    chars: Vec<char>,
    pos: usize,
    /// The known option whose value was read last, to say where a later error is.
    after: Option<&'static str>,
}

impl Tokens {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    /// `at character N`, with the known option before it when there is one.
    fn place(&self, at: usize) -> String {
        match self.after {
            Some(k) => format!("at character {at}, after the value of option `{k}`"),
            None => format!("at character {at}"),
        }
    }

    /// The next token and the (1-based) character it starts at.
    fn next(&mut self) -> Result<Option<(Token, usize)>> {
        self.next_in(None)
    }

    /// The next token, read as the value of `option` (so a bad quoted string names it).
    fn next_value(&mut self, option: &str) -> Result<Option<(Token, usize)>> {
        self.next_in(Some(option))
    }

    fn next_in(&mut self, option: Option<&str>) -> Result<Option<(Token, usize)>> {
        self.skip_space();
        let Some(c) = self.peek() else {
            return Ok(None);
        };
        let at = self.pos + 1;
        let token = match c {
            '=' => {
                self.pos += 1;
                Token::Equals
            }
            ';' => {
                self.pos += 1;
                Token::Semicolon
            }
            '"' => self.quoted(option, at)?,
            c if is_word_char(c) => {
                let start = self.pos;
                while self.peek().is_some_and(is_word_char) {
                    self.pos += 1;
                }
                Token::Word(self.chars[start..self.pos].iter().collect())
            }
            // Never show the character: it may be inside a value.
            _ => {
                return Err(err(match option {
                    Some(option) => {
                        format!("{option} has a value with a character that needs double quotes")
                    }
                    None => format!(
                        "unexpected character {}; a value with characters other than letters, \
                         digits and `.-_$` needs double quotes",
                        self.place(at)
                    ),
                }))
            }
        };
        Ok(Some((token, at)))
    }

    /// A double-quoted string, with Java's escapes: `\"`, `\\`, `\n`, `\t`, `\r`, `\b`, `\f`;
    /// a backslash before any other character stands for that character.
    fn quoted(&mut self, option: Option<&str>, at: usize) -> Result<Token> {
        let place = self.place(at);
        let fail = |problem: &str| {
            err(match option {
                Some(option) => format!("the value of {option} {problem}"),
                None => format!("a quoted string {problem}, {place}"),
            })
        };
        self.pos += 1;
        let mut s = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(fail("has no closing double quote"));
            };
            self.pos += 1;
            match c {
                '"' => return Ok(Token::Quoted(s)),
                '\\' => {
                    let Some(e) = self.peek() else {
                        return Err(fail("ends with a lone backslash"));
                    };
                    self.pos += 1;
                    s.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        'b' => '\u{8}',
                        'f' => '\u{c}',
                        other => other,
                    });
                }
                c => s.push(c),
            }
        }
    }
}

/// What a bare word may hold: Java's tokenizer words (letters, digits, `.`, `-`, `_`, `$`).
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '-' | '_' | '$')
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

    #[test]
    fn plain_scram_and_oauthbearer_entries_parse() {
        let e = parse(&format!(
            r#"{PLAIN} required username="alice" password="alice-secret";"#
        ))
        .unwrap();
        assert_eq!(e.module, LoginModule::Plain);
        assert_eq!(e.get("username"), Some("alice"));
        assert_eq!(e.get("password"), Some("alice-secret"));

        let e = parse(
            "  org.apache.kafka.common.security.scram.ScramLoginModule   REQUIRED\n\
             username=bob\tpassword=\"b\" ;  ",
        )
        .unwrap();
        assert_eq!(e.module, LoginModule::Scram);
        assert_eq!(e.get("username"), Some("bob"));
        assert_eq!(e.get("password"), Some("b"));

        let e = parse(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             unsecuredLoginStringClaim_sub=\"alice\" unsecuredLoginLifetimeSeconds=\"3600\" \
             unsecuredLoginExtension_traceId=\"t1\";",
        )
        .unwrap();
        assert_eq!(e.module, LoginModule::OAuthBearer);
        assert_eq!(e.get("unsecuredLoginStringClaim_sub"), Some("alice"));
        assert_eq!(
            e.with_prefix("unsecuredLoginExtension_")
                .collect::<Vec<_>>(),
            vec![("traceId", "t1")]
        );
        // An entry with no options at all.
        assert!(parse(&format!("{PLAIN} required;")).is_ok());
    }

    #[test]
    fn quoted_values_keep_what_java_keeps() {
        // Azure Event Hubs: the password is a connection string full of `=`, `;` and `/`.
        let e = parse(&format!(
            r#"{PLAIN} required username="$ConnectionString" password="Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=a+b/c=";"#
        ))
        .unwrap();
        assert_eq!(e.get("username"), Some("$ConnectionString"));
        assert_eq!(
            e.get("password"),
            Some("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=a+b/c=")
        );
        let e = parse(&format!(
            r#"{PLAIN} required username="a \"q\" b\\c" password="x\ny\tz\;";"#
        ))
        .unwrap();
        assert_eq!(e.get("username"), Some("a \"q\" b\\c"));
        assert_eq!(e.get("password"), Some("x\ny\tz;"));
        assert_eq!(
            parse(&format!(r#"{PLAIN} required password="";"#))
                .unwrap()
                .get("password"),
            Some("")
        );
    }

    #[test]
    fn errors_name_the_problem_and_never_the_value() {
        let cases = [
            ("", "class name"),
            ("=x", "class name"),
            (PLAIN, "control flag"),
            (
                &*format!("{PLAIN} mandatory;"),
                "character 57 is not a login module control flag",
            ),
            (
                &*format!("{PLAIN} required username=\"a\""),
                "does not end with `;`",
            ),
            (
                &*format!("{PLAIN} required username \"a\";"),
                "expected `=` after option `username`",
            ),
            (
                &*format!("{PLAIN} required username=;"),
                "option `username` has no value",
            ),
            (
                &*format!("{PLAIN} required =\"a\";"),
                "`=` without an option name",
            ),
            (
                &*format!("{PLAIN} required password=\"pw-secret;"),
                "`password` has no closing double quote",
            ),
            (
                &*format!("{PLAIN} required password=\"pw-secret\\"),
                "`password` ends with a lone backslash",
            ),
            (
                &*format!("{PLAIN} required password=pw-secret+x;"),
                "`password` has a value with a character that needs double quotes",
            ),
            (
                &*format!("{PLAIN} required password=\"a\" password=\"pw-secret\";"),
                "`password` is given twice",
            ),
            (
                &*format!("{PLAIN} required; {PLAIN} required;"),
                "exactly one login module",
            ),
            (
                "com.sun.security.auth.module.Krb5LoginModule required;",
                "not supported",
            ),
            (
                "software.amazon.msk.auth.iam.IAMLoginModule required;",
                "IAMLoginModule",
            ),
        ];
        for (text, expect) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.code(), Error::config("", "").code(), "{text}");
            let m = e.to_string();
            assert!(m.contains(expect), "{text:?}: {m}");
            assert!(m.contains(KEY), "{m}");
            assert!(!m.contains("pw-secret"), "{text:?}: {m}");
        }
    }

    #[test]
    fn debug_shows_option_names_only() {
        let e = parse(&format!(
            r#"{PLAIN} required username="alice" password="pw-secret";"#
        ))
        .unwrap();
        let shown = format!("{e:?} {e:#?}");
        assert!(
            shown.contains("password") && shown.contains("username"),
            "{shown}"
        );
        assert!(!shown.contains("pw-secret"), "{shown}");

        // An unquoted value with a space parses as two options: the second name is a piece of
        // the password, so only the number of such options shows.
        let e = parse(&format!(
            r#"{PLAIN} required username="alice" password=s3cr3t VALUE=x;"#
        ))
        .unwrap();
        let shown = format!("{e:?} {e:#?}");
        assert!(shown.contains("other_options: 1"), "{shown}");
        assert_shows_no_secret("Debug", &shown);
    }

    /// A secret that no error, `Debug` output or log line may show any piece of.
    const SECRET: &str = "s3cr3t-VALUE";

    /// Every piece of [`SECRET`] long enough to be recognised (4 characters or more).
    fn secret_pieces() -> Vec<&'static str> {
        let mut pieces = Vec::new();
        for len in 4..=SECRET.len() {
            for start in 0..=SECRET.len() - len {
                pieces.push(&SECRET[start..start + len]);
            }
        }
        pieces
    }

    fn assert_shows_no_secret(what: &str, shown: &str) {
        for piece in secret_pieces() {
            assert!(!shown.contains(piece), "{what} shows `{piece}`: {shown}");
        }
    }

    /// Runs `f` with every tracing event, at every level, written to a buffer; gives back what
    /// `f` returned and the log text.
    pub(crate) fn with_captured_logs<T>(f: impl FnOnce() -> T) -> (T, String) {
        use std::sync::{Arc, Mutex};

        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Buffer {
            type Writer = Buffer;
            fn make_writer(&'a self) -> Buffer {
                self.clone()
            }
        }

        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(buffer.clone())
            .finish();
        let out = tracing::subscriber::with_default(subscriber, f);
        let logs = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        (out, logs)
    }

    #[test]
    fn no_parser_error_shows_a_piece_of_a_value() {
        // Each input goes down one error path with the secret (or its pieces) where a value or a
        // mistyped word would be; the second column is the error's gist, to prove the path.
        let cases: &[(String, &str)] = &[
            // The secret pasted alone, or quoted, where the class name goes.
            (SECRET.to_string(), "expected a login module class name"),
            (
                format!("\"{SECRET}\";"),
                "expected a login module class name",
            ),
            (
                format!("\"{SECRET}"),
                "has no closing double quote, at character 1",
            ),
            (PLAIN.to_string(), "expected the control flag `required`"),
            // An unknown control flag, and the flag left out.
            (
                format!("{PLAIN} {SECRET};"),
                "character 57 is not a login module control flag",
            ),
            (
                format!("{PLAIN} password=\"{SECRET}\";"),
                "option `password` where the control flag was expected",
            ),
            (
                format!("{PLAIN} \"{SECRET}\";"),
                "character 57 is not a login module control",
            ),
            (
                format!("{PLAIN} \"{SECRET}"),
                "has no closing double quote, at character 57",
            ),
            // An unquoted value with a space: the rest reads as an option name.
            (
                format!("{PLAIN} required password=s3cr3t VALUE;"),
                "expected `name=value` at character 82, after the value of option `password`",
            ),
            (
                format!("{PLAIN} required password=s3cr3t VALUE"),
                "expected `name=value` at character 82",
            ),
            (
                format!("{PLAIN} required {SECRET};"),
                "expected `name=value` at character 66;",
            ),
            (
                format!("{PLAIN} required username {SECRET};"),
                "expected `=` after option `username`",
            ),
            // Split by a quote, a `=`, a `;`, a backslash, other characters.
            (
                format!("{PLAIN} required password=s3cr3t \"VALUE\";"),
                "a quoted string where an option name was expected at character 82, after the \
                 value of option `password`",
            ),
            (
                format!("{PLAIN} required password=s3cr3t \"VALUE"),
                "a quoted string has no closing double quote, at character 82, after the value \
                 of option `password`",
            ),
            (
                format!("{PLAIN} required password=s3cr3t =VALUE;"),
                "`=` without an option name before it at character 82",
            ),
            (
                format!("{PLAIN} required password=s3cr3t;VALUE;"),
                "text at character 82, after the first entry's `;`",
            ),
            (
                format!("{PLAIN} required password=s3cr3t\\VALUE;"),
                "option `password` has a value with a character that needs double quotes",
            ),
            (
                format!("{PLAIN} required password=s3cr3t+VALUE;"),
                "option `password` has a value with a character that needs double quotes",
            ),
            (
                format!("{PLAIN} required password=+{SECRET};"),
                "option `password` has a value with a character that needs double quotes",
            ),
            (
                format!("{PLAIN} required password=s3cr3t 'VALUE';"),
                "unexpected character at character 82, after the value of option `password`",
            ),
            (
                format!("{PLAIN} required s3cr3t=VALUE+x;"),
                "the option at character 66 has a value with a character that needs double",
            ),
            (
                format!("{PLAIN} required s3cr3t=+VALUE;"),
                "the option at character 66 has a value with a character that needs double",
            ),
            // Unterminated quotes and a lone backslash.
            (
                format!("{PLAIN} required password=\"{SECRET};"),
                "the value of option `password` has no closing double quote",
            ),
            (
                format!("{PLAIN} required password=\"{SECRET}\\"),
                "the value of option `password` ends with a lone backslash",
            ),
            (
                format!("{PLAIN} required s3cr3t=\"VALUE;"),
                "the value of the option at character 66 has no closing double quote",
            ),
            (
                format!("{PLAIN} required s3cr3t=\"VALUE\\"),
                "the value of the option at character 66 ends with a lone backslash",
            ),
            // No value, no `;`.
            (
                format!("{PLAIN} required password=;{SECRET}"),
                "option `password` has no value",
            ),
            (
                format!("{PLAIN} required {SECRET}=;"),
                "the option at character 66 has no value",
            ),
            (
                format!("{PLAIN} required password=\"{SECRET}\""),
                "does not end with `;`",
            ),
            // Duplicate keys, known and not.
            (
                format!("{PLAIN} required password=\"x\" password=\"{SECRET}\";"),
                "option `password` is given twice",
            ),
            (
                format!("{PLAIN} required password=s3cr3t VALUE=a VALUE=b;"),
                "the option at character 90 is given twice",
            ),
            // A class name that is not one, and a short one.
            (
                format!("{SECRET} required password=\"x\";"),
                "expected a login module class name",
            ),
            (
                format!("PlainLoginModule required password=\"{SECRET}\";"),
                "needs its full class name",
            ),
        ];
        for (text, gist) in cases {
            let (result, logs) = with_captured_logs(|| {
                // Proves the capture works: the parser itself logs nothing.
                tracing::trace!("capture check");
                parse(text)
            });
            let e = result.expect_err(text);
            let (shown, debug) = (e.to_string(), format!("{e:?} {e:#?}"));
            assert!(shown.contains(gist), "{text:?}: {shown}");
            assert!(shown.contains(KEY), "{shown}");
            assert!(logs.contains("capture check"), "{logs}");
            assert_shows_no_secret(&format!("{text:?}: Display"), &shown);
            assert_shows_no_secret(&format!("{text:?}: Debug"), &debug);
            assert_shows_no_secret(&format!("{text:?}: logs"), &logs);
        }
    }

    #[test]
    fn the_config_path_shows_no_piece_of_the_jaas_value() {
        use crate::config::{Config, ConsumerConfig};

        let oauth = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
        // Entries that make a consumer (the unsecured OAUTHBEARER one logs a warning) and
        // entries that fail, each with the secret quoted, unquoted or split.
        let good = [
            format!(r#"{PLAIN} required username="alice" password="{SECRET}";"#),
            format!(r#"{PLAIN} required username="alice" password=s3cr3t VALUE=x;"#),
            format!(
                r#"{oauth} required unsecuredLoginStringClaim_sub="alice" clientSecret="{SECRET}";"#
            ),
        ];
        let bad = [
            format!(r#"{PLAIN} required username="alice" password=s3cr3t VALUE;"#),
            format!(r#"{PLAIN} required username="alice" password="{SECRET};"#),
            format!(r#"{PLAIN} required username="alice" s3cr3t=VALUE+1;"#),
            format!(r#"PlainLoginModule required password="{SECRET}";"#),
            SECRET.to_string(),
        ];
        for (text, ok) in good
            .iter()
            .map(|t| (t, true))
            .chain(bad.iter().map(|t| (t, false)))
        {
            let ((config, made), logs) = with_captured_logs(|| {
                let mut c = Config::new();
                c.set("bootstrap.servers", "localhost:9092").unwrap();
                c.set("security.protocol", "SASL_PLAINTEXT").unwrap();
                c.set("sasl.jaas.config", text).unwrap();
                let made = ConsumerConfig::from_config(&c);
                (c, made)
            });
            let mut shown = format!("{config:?} {config:#?} {:?}", config.dump());
            match made {
                Ok(consumer) => {
                    assert!(ok, "{text:?} was accepted");
                    shown += &format!("{consumer:?} {consumer:#?}");
                }
                Err(e) => {
                    assert!(!ok, "{text:?}: {e}");
                    assert!(
                        matches!(&e, Error::Config { key, .. } if key == KEY),
                        "{text:?}: {e}"
                    );
                    shown += &format!("{e} {e:?}");
                }
            }
            if text.starts_with(oauth) {
                assert!(
                    logs.contains("unsecured"),
                    "the warning is captured: {logs}"
                );
            }
            assert!(shown.contains(KEY), "{shown}");
            assert_shows_no_secret(&format!("{text:?}: Debug and errors"), &shown);
            assert_shows_no_secret(&format!("{text:?}: logs"), &logs);
        }
    }

    #[test]
    fn a_short_login_module_name_is_answered_with_the_full_class_name() {
        for (short, full) in [
            ("PlainLoginModule", PLAIN),
            (
                "ScramLoginModule",
                "org.apache.kafka.common.security.scram.ScramLoginModule",
            ),
            (
                "OAuthBearerLoginModule",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
            ),
            // The right class name in the wrong package.
            ("com.example.PlainLoginModule", PLAIN),
        ] {
            let e = parse(&format!(r#"{short} required username="a" password="b";"#))
                .unwrap_err()
                .to_string();
            assert!(e.contains("needs its full class name"), "{short}: {e}");
            assert!(e.contains(full), "{short}: {e}");
            // The full name parses.
            parse(&format!(r#"{full} required username="a" password="b";"#)).unwrap();
        }
        let e = parse("com.example.FooLoginModule required;")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`com.example.FooLoginModule` is not supported") && e.contains(PLAIN),
            "{e}"
        );
    }
}
