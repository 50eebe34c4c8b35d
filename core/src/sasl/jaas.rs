//! `sasl.jaas.config`: the Java client's one-line JAAS login module entry, e.g.
//!
//! ```text
//! org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s";
//! ```
//!
//! The grammar is that of Java's `JaasConfig` (a `StreamTokenizer`): a login module class, a
//! control flag (`required`, `requisite`, `sufficient`, `optional`), options `name=value` whose
//! value is a bare word or a double-quoted string with backslash escapes, and a closing `;`.
//! A client takes exactly one entry. Errors name the problem and the option, never a value: the
//! values are passwords and client secrets.
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

/// One parsed entry. `Debug` shows the option names only.
#[derive(Clone, PartialEq, Eq)]
pub struct JaasEntry {
    /// The entry's login module.
    pub module: LoginModule,
    options: BTreeMap<String, Secret>,
}

impl fmt::Debug for JaasEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JaasEntry")
            .field("module", &self.module)
            .field("options", &self.options.keys().collect::<Vec<_>>())
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

/// Parses a `sasl.jaas.config` value.
pub fn parse(text: &str) -> Result<JaasEntry> {
    let mut t = Tokens {
        chars: text.chars().collect(),
        pos: 0,
    };
    let class = match t.next()? {
        Some(Token::Word(w)) => w,
        Some(_) | None => return Err(err("expected a login module class name first")),
    };
    let module = module(&class)?;
    match t.next()? {
        Some(Token::Word(flag))
            if ["required", "requisite", "sufficient", "optional"]
                .contains(&flag.to_ascii_lowercase().as_str()) => {}
        Some(Token::Word(flag)) => {
            return Err(err(format!(
                "`{flag}` is not a login module control flag (expected `required`)"
            )))
        }
        _ => {
            return Err(err(
                "expected the control flag `required` after the class name",
            ))
        }
    }
    let mut options = BTreeMap::new();
    loop {
        let name = match t.next()? {
            Some(Token::Semicolon) => break,
            Some(Token::Word(w)) => w,
            Some(Token::Equals) => return Err(err("`=` without an option name before it")),
            Some(Token::Quoted(_)) => {
                return Err(err("a quoted string where an option name was expected"))
            }
            None => return Err(err("the entry does not end with `;`")),
        };
        if t.next()? != Some(Token::Equals) {
            return Err(err(format!("expected `=` after option `{name}`")));
        }
        let value = match t.next_value(&name)? {
            Some(Token::Word(v)) => {
                // A bare word ends at a space or `;`; anything else means the value needed
                // quotes (a password with `+` or `/`), and reading on would split it.
                if t.peek().is_some_and(|c| !c.is_whitespace() && c != ';') {
                    return Err(err(format!(
                        "option `{name}` has a value with a character that needs double quotes"
                    )));
                }
                v
            }
            Some(Token::Quoted(v)) => v,
            _ => return Err(err(format!("option `{name}` has no value"))),
        };
        if options.insert(name.clone(), Secret::new(value)).is_some() {
            return Err(err(format!("option `{name}` is given twice")));
        }
    }
    if t.next()?.is_some() {
        return Err(err(
            "text after the first entry's `;`: a client takes exactly one login module",
        ));
    }
    Ok(JaasEntry { module, options })
}

fn module(class: &str) -> Result<LoginModule> {
    match class {
        "org.apache.kafka.common.security.plain.PlainLoginModule" => Ok(LoginModule::Plain),
        "org.apache.kafka.common.security.scram.ScramLoginModule" => Ok(LoginModule::Scram),
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule" => {
            Ok(LoginModule::OAuthBearer)
        }
        "com.sun.security.auth.module.Krb5LoginModule" => Err(err(
            "Krb5LoginModule (GSSAPI/Kerberos) is not supported; use SCRAM-SHA-512, PLAIN over \
             SSL or OAUTHBEARER",
        )),
        other => Err(err(format!(
            "login module `{other}` is not supported; lagless understands PlainLoginModule, \
             ScramLoginModule and OAuthBearerLoginModule"
        ))),
    }
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

    fn next(&mut self) -> Result<Option<Token>> {
        self.next_in(None)
    }

    /// The next token, read as the value of option `name` (so a bad quoted string names it).
    fn next_value(&mut self, name: &str) -> Result<Option<Token>> {
        self.next_in(Some(name))
    }

    fn next_in(&mut self, option: Option<&str>) -> Result<Option<Token>> {
        self.skip_space();
        let Some(c) = self.peek() else {
            return Ok(None);
        };
        match c {
            '=' => {
                self.pos += 1;
                Ok(Some(Token::Equals))
            }
            ';' => {
                self.pos += 1;
                Ok(Some(Token::Semicolon))
            }
            '"' => self.quoted(option).map(Some),
            c if is_word_char(c) => {
                let start = self.pos;
                while self.peek().is_some_and(is_word_char) {
                    self.pos += 1;
                }
                Ok(Some(Token::Word(
                    self.chars[start..self.pos].iter().collect(),
                )))
            }
            // Never show the character if it may be inside a value.
            _ => Err(err(match option {
                Some(name) => {
                    format!("option `{name}` has a value with a character that needs double quotes")
                }
                None => format!("unexpected character at position {}", self.pos + 1),
            })),
        }
    }

    /// A double-quoted string, with Java's escapes: `\"`, `\\`, `\n`, `\t`, `\r`, `\b`, `\f`;
    /// a backslash before any other character stands for that character.
    fn quoted(&mut self, option: Option<&str>) -> Result<Token> {
        let what = match option {
            Some(name) => format!("the value of option `{name}`"),
            None => "a quoted string".to_string(),
        };
        self.pos += 1;
        let mut s = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(err(format!("{what} has no closing double quote")));
            };
            self.pos += 1;
            match c {
                '"' => return Ok(Token::Quoted(s)),
                '\\' => {
                    let Some(e) = self.peek() else {
                        return Err(err(format!("{what} ends with a lone backslash")));
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
                "`mandatory` is not a login module control flag",
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
    }
}
