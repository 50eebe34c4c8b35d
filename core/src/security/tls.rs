//! TLS for broker connections: the rustls client configuration built from the `ssl.*` keys, and
//! errors that say which check failed.
//!
//! Both ecosystems' keys are read: librdkafka's (`ssl.ca.location`, `ssl.certificate.location`,
//! `ssl.key.location`, ...) and the Java client's (`ssl.truststore.*`, `ssl.keystore.*`). Every
//! file is read when the client is created, so a missing file or a wrong password fails at
//! creation with the key that named it, not at the first connection.
use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::{PemObject, SectionKind};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::{SecuritySettings, JKS_HINT};
use crate::error::{Error, Result};

/// The first four bytes of a JKS store.
const JKS_MAGIC: [u8; 4] = [0xfe, 0xed, 0xfe, 0xed];

/// A TLS client setup, cheap to clone.
#[derive(Clone)]
pub struct Tls {
    connector: TlsConnector,
    /// A client certificate is configured (mutual TLS): what a refused handshake means depends
    /// on it.
    client_certificate: bool,
}

impl Tls {
    /// The TLS setup the `ssl.*` settings of `c` describe.
    pub(crate) fn from_settings(c: &SecuritySettings) -> Result<Tls> {
        let roots = trust(c)?;
        let verify_hostname = match c.opt("ssl.endpoint.identification.algorithm")? {
            // The Java client disables the check with an empty value, librdkafka with `none`.
            Some(v) => v.eq_ignore_ascii_case("https"),
            None => false,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| {
                Error::config("ssl.ca.location", format!("no usable CA certificate: {e}"))
            })?;
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::config("security.protocol", format!("TLS setup failed: {e}")))?;
        let builder = if verify_hostname {
            builder.with_webpki_verifier(webpki)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyHostname(webpki)))
        };
        let identity = identity(c)?;
        let client_certificate = identity.is_some();
        let config = match identity {
            Some((key_name, chain, key)) => {
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    Error::config(
                        key_name,
                        format!("the client key does not fit its certificate: {e}"),
                    )
                })?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(Tls {
            connector: TlsConnector::from(Arc::new(config)),
            client_certificate,
        })
    }

    pub(crate) fn has_client_certificate(&self) -> bool {
        self.client_certificate
    }

    /// The TLS handshake over `stream`, with `addr`'s host as the name the broker's certificate
    /// must carry.
    pub(crate) async fn handshake(
        &self,
        addr: &str,
        stream: TcpStream,
    ) -> Result<TlsStream<TcpStream>> {
        let name = server_name(addr)?;
        self.connector
            .connect(name, stream)
            .await
            .map_err(|e| handshake_error(addr, &e, self.client_certificate))
    }
}

/// The host of `host:port` as a TLS server name (a DNS name or an IP address).
fn server_name(addr: &str) -> Result<ServerName<'static>> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ServerName::try_from(host.to_string()).map_err(|_| {
        Error::Transport(format!(
            "broker {addr}: `{host}` is neither a DNS name nor an IP address, so TLS cannot check it"
        ))
    })
}

/// Chain and expiry checked, the name not (`ssl.endpoint.identification.algorithm=none`).
#[derive(Debug)]
struct AnyHostname(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostname {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        // webpki checks the name last, after the chain and the validity period, so a name error
        // means everything else passed.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Reads a file a key names; the error names the key and the path.
fn read_file(key: &str, path: &str) -> Result<Vec<u8>> {
    std::fs::read(Path::new(path))
        .map_err(|e| Error::config(key, format!("cannot read `{path}` (from `{key}`): {e}")))
}

/// The certificates of a PEM text; none is an error naming `key`.
fn pem_certs(key: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::config(key, format!("`{key}` holds malformed PEM: {e}")))?;
    if certs.is_empty() {
        return Err(Error::config(
            key,
            format!("`{key}` holds no PEM certificate (-----BEGIN CERTIFICATE-----)"),
        ));
    }
    Ok(certs)
}

/// The trusted CAs: every CA the config names, else the system's roots.
fn trust(c: &SecuritySettings) -> Result<RootCertStore> {
    let mut sources: Vec<(&str, Vec<CertificateDer<'static>>)> = Vec::new();
    // librdkafka's `probe` means the system's CAs, which is what no CA setting means here.
    let ca_location = c
        .opt("ssl.ca.location")?
        .filter(|p| !p.eq_ignore_ascii_case("probe"));
    if let Some(path) = ca_location {
        // librdkafka also takes a directory of CA files.
        let p = Path::new(&path);
        if p.is_dir() {
            let mut certs = Vec::new();
            let entries = std::fs::read_dir(p).map_err(|e| {
                Error::config(
                    "ssl.ca.location",
                    format!("cannot read directory `{path}`: {e}"),
                )
            })?;
            for entry in entries.flatten() {
                if entry.path().is_file() {
                    let bytes = std::fs::read(entry.path()).unwrap_or_default();
                    certs.extend(CertificateDer::pem_slice_iter(&bytes).flatten());
                }
            }
            sources.push(("ssl.ca.location", certs));
        } else {
            let pem = read_file("ssl.ca.location", &path)?;
            sources.push(("ssl.ca.location", pem_certs("ssl.ca.location", &pem)?));
        }
    }
    if let Some(pem) = c.opt("ssl.ca.pem")? {
        sources.push(("ssl.ca.pem", pem_certs("ssl.ca.pem", pem.as_bytes())?));
    }
    if let Some(path) = c.opt("ssl.truststore.location")? {
        let bytes = read_file("ssl.truststore.location", &path)?;
        let certs = match store_type(c, "ssl.truststore.type", "ssl.truststore.location", &bytes)? {
            StoreType::Pem => pem_certs("ssl.truststore.location", &bytes)?,
            StoreType::Pkcs12 => {
                let password = c.opt("ssl.truststore.password")?.unwrap_or_default();
                let store = read_pkcs12("ssl.truststore.location", &bytes, &password)?;
                store
                    .entries()
                    .flat_map(|(_, e)| match e {
                        p12_keystore::KeyStoreEntry::Certificate(cert) => {
                            vec![CertificateDer::from(cert.as_der().to_vec())]
                        }
                        p12_keystore::KeyStoreEntry::PrivateKeyChain(chain) => chain
                            .chain()
                            .iter()
                            .map(|cert| CertificateDer::from(cert.as_der().to_vec()))
                            .collect(),
                        _ => Vec::new(),
                    })
                    .collect()
            }
        };
        sources.push(("ssl.truststore.location", certs));
    }
    if let Some(pem) = c.opt("ssl.truststore.certificates")? {
        sources.push((
            "ssl.truststore.certificates",
            pem_certs("ssl.truststore.certificates", pem.as_bytes())?,
        ));
    }
    let mut roots = RootCertStore::empty();
    if sources.is_empty() {
        // As librdkafka: no CA given means the system's trust store.
        let native = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(native.certs);
        if added == 0 {
            return Err(Error::config(
                "ssl.ca.location",
                "no CA certificate is configured and the system trust store has none: set \
                 `ssl.ca.location` (or `ssl.truststore.location`) to the CA that signed the \
                 brokers' certificates",
            ));
        }
        return Ok(roots);
    }
    for (key, certs) in sources {
        if certs.is_empty() {
            return Err(Error::config(key, format!("`{key}` holds no certificate")));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| {
                Error::config(
                    key,
                    format!("`{key}` holds a certificate that is not a usable CA: {e}"),
                )
            })?;
        }
    }
    Ok(roots)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreType {
    Pem,
    Pkcs12,
}

/// The type of a store file: as configured, else guessed from its content (PEM is text).
fn store_type(
    c: &SecuritySettings,
    type_key: &str,
    location_key: &str,
    bytes: &[u8],
) -> Result<StoreType> {
    if bytes.starts_with(&JKS_MAGIC) {
        return Err(Error::config(
            location_key,
            format!("`{location_key}` is a JKS store. {JKS_HINT}"),
        ));
    }
    match c.opt(type_key)?.map(|t| t.to_ascii_uppercase()).as_deref() {
        Some("PEM") => Ok(StoreType::Pem),
        Some("PKCS12") => Ok(StoreType::Pkcs12),
        Some(_) => Err(Error::config(type_key, JKS_HINT)),
        None if bytes.windows(11).any(|w| w == b"-----BEGIN ") => Ok(StoreType::Pem),
        None => Ok(StoreType::Pkcs12),
    }
}

fn read_pkcs12(key: &str, bytes: &[u8], password: &str) -> Result<p12_keystore::KeyStore> {
    p12_keystore::KeyStore::from_pkcs12(bytes, password).map_err(|e| {
        let why = match e {
            p12_keystore::error::Error::MacError(_) => {
                "the password is wrong (the store's integrity check failed)".to_string()
            }
            other => format!("it is not a readable PKCS#12 store ({other})"),
        };
        Error::config(
            key,
            format!("cannot open the PKCS#12 store of `{key}`: {why}"),
        )
    })
}

type Identity = (
    &'static str,
    Vec<CertificateDer<'static>>,
    PrivateKeyDer<'static>,
);

/// The client certificate chain and key, for mutual TLS, from whichever keys give them.
fn identity(c: &SecuritySettings) -> Result<Option<Identity>> {
    let key_password = c.opt("ssl.key.password")?;
    if let Some(path) = c.opt("ssl.keystore.location")? {
        let bytes = read_file("ssl.keystore.location", &path)?;
        return match store_type(c, "ssl.keystore.type", "ssl.keystore.location", &bytes)? {
            StoreType::Pkcs12 => {
                let password = c.opt("ssl.keystore.password")?.unwrap_or_default();
                let store = read_pkcs12("ssl.keystore.location", &bytes, &password)?;
                let Some((_, chain)) = store.private_key_chain() else {
                    return Err(Error::config(
                        "ssl.keystore.location",
                        "the PKCS#12 store of `ssl.keystore.location` holds no private key",
                    ));
                };
                let certs = chain
                    .chain()
                    .iter()
                    .map(|cert| CertificateDer::from(cert.as_der().to_vec()))
                    .collect();
                let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().to_vec()));
                Ok(Some(("ssl.keystore.location", certs, key)))
            }
            // A PEM keystore file holds the key and the chain.
            StoreType::Pem => {
                let certs = pem_certs("ssl.keystore.location", &bytes)?;
                let key = pem_key("ssl.keystore.location", &bytes, key_password.as_deref())?;
                Ok(Some(("ssl.keystore.location", certs, key)))
            }
        };
    }
    let cert = match (
        c.opt("ssl.certificate.location")?,
        c.opt("ssl.certificate.pem")?,
        c.opt("ssl.keystore.certificate.chain")?,
    ) {
        (Some(path), _, _) => {
            let pem = read_file("ssl.certificate.location", &path)?;
            Some((
                "ssl.certificate.location",
                pem_certs("ssl.certificate.location", &pem)?,
            ))
        }
        (None, Some(pem), _) => Some((
            "ssl.certificate.pem",
            pem_certs("ssl.certificate.pem", pem.as_bytes())?,
        )),
        (None, None, Some(pem)) => Some((
            "ssl.keystore.certificate.chain",
            pem_certs("ssl.keystore.certificate.chain", pem.as_bytes())?,
        )),
        _ => None,
    };
    let key = match (
        c.opt("ssl.key.location")?,
        c.opt("ssl.key.pem")?,
        c.opt("ssl.keystore.key")?,
    ) {
        (Some(path), _, _) => {
            let pem = read_file("ssl.key.location", &path)?;
            Some((
                "ssl.key.location",
                pem_key("ssl.key.location", &pem, key_password.as_deref())?,
            ))
        }
        (None, Some(pem), _) => Some((
            "ssl.key.pem",
            pem_key("ssl.key.pem", pem.as_bytes(), key_password.as_deref())?,
        )),
        (None, None, Some(pem)) => Some((
            "ssl.keystore.key",
            pem_key("ssl.keystore.key", pem.as_bytes(), key_password.as_deref())?,
        )),
        _ => None,
    };
    match (cert, key) {
        (Some((name, certs)), Some((_, key))) => Ok(Some((name, certs, key))),
        (None, None) => Ok(None),
        (Some((name, _)), None) => Err(Error::config(
            name,
            format!("`{name}` gives a client certificate but no key is set (`ssl.key.location`, `ssl.key.pem` or `ssl.keystore.key`)"),
        )),
        (None, Some((name, _))) => Err(Error::config(
            name,
            format!("`{name}` gives a client key but no certificate is set (`ssl.certificate.location`, `ssl.certificate.pem` or `ssl.keystore.certificate.chain`)"),
        )),
    }
}

const ENCRYPTED_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const ENCRYPTED_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";

/// The private key of a PEM text: PKCS#8 (encrypted with `password` or not), PKCS#1 or SEC1.
fn pem_key(key: &str, pem: &[u8], password: Option<&str>) -> Result<PrivateKeyDer<'static>> {
    let text = String::from_utf8_lossy(pem);
    if let Some(start) = text.find(ENCRYPTED_BEGIN) {
        let Some(len) = text[start..].find(ENCRYPTED_END) else {
            return Err(Error::config(
                key,
                format!("`{key}` holds a truncated encrypted key"),
            ));
        };
        let block = &text[start..start + len + ENCRYPTED_END.len()];
        let Some(password) = password else {
            return Err(Error::config(
                "ssl.key.password",
                format!("the key of `{key}` is encrypted: set `ssl.key.password`"),
            ));
        };
        let (_, der) = pkcs8::der::pem::decode_vec(block.as_bytes())
            .map_err(|e| Error::config(key, format!("`{key}` holds malformed PEM: {e}")))?;
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice()).map_err(|e| {
            Error::config(key, format!("`{key}` holds a malformed encrypted key: {e}"))
        })?;
        let plain = info.decrypt(password).map_err(|_| {
            Error::config(
                "ssl.key.password",
                format!("cannot decrypt the key of `{key}`: `ssl.key.password` is wrong (or the cipher is not PBES2 with AES)"),
            )
        })?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            plain.as_bytes().to_vec(),
        )));
    }
    // OpenSSL's legacy encryption of PKCS#1/SEC1 keys, which only OpenSSL itself reads.
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(Error::config(
            key,
            format!("the key of `{key}` uses OpenSSL's legacy PEM encryption: convert it to encrypted PKCS#8 with `openssl pkcs8 -topk8 -v2 aes-256-cbc -in key.pem -out key.p8.pem`"),
        ));
    }
    for section in <(SectionKind, Vec<u8>) as PemObject>::pem_slice_iter(pem) {
        let (kind, der) =
            section.map_err(|e| Error::config(key, format!("`{key}` holds malformed PEM: {e}")))?;
        let parsed = match kind {
            SectionKind::PrivateKey => Some(PrivateKeyDer::Pkcs8(der.into())),
            SectionKind::RsaPrivateKey => Some(PrivateKeyDer::Pkcs1(der.into())),
            SectionKind::EcPrivateKey => Some(PrivateKeyDer::Sec1(der.into())),
            _ => None,
        };
        if let Some(k) = parsed {
            return Ok(k);
        }
    }
    Err(Error::config(
        key,
        format!("`{key}` holds no PEM private key (-----BEGIN PRIVATE KEY-----)"),
    ))
}

const NAME_HINT: &str = "connect by a name the certificate carries, or set \
     `ssl.endpoint.identification.algorithm=none` to skip the check";

/// A certificate time as a UTC date a person reads at a glance, e.g. "2026-11-30 12:00:00 UTC".
fn utc(t: UnixTime) -> String {
    let secs = i64::try_from(t.as_secs()).unwrap_or(i64::MAX);
    match time::OffsetDateTime::from_unix_timestamp(secs) {
        Ok(d) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
            d.year(),
            u8::from(d.month()),
            d.day(),
            d.hour(),
            d.minute(),
            d.second()
        ),
        // Beyond year 9999: no certificate says that, but say something true anyway.
        Err(_) => format!("{secs} seconds after 1970-01-01 UTC"),
    }
}

/// The TLS error behind an I/O error, if there is one.
pub(crate) fn rustls_error(e: &io::Error) -> Option<&rustls::Error> {
    e.get_ref()?.downcast_ref::<rustls::Error>()
}

/// Says which check failed, in words a user can act on.
pub(crate) fn describe(e: &rustls::Error, client_certificate: bool) -> String {
    use rustls::AlertDescription as A;
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => "the broker's certificate is not trusted: it is not signed by a trusted CA (set `ssl.ca.location` or `ssl.truststore.location` to the CA that signed it; without either the system's CAs are trusted)".to_string(),
            CertificateError::Expired => "the broker's certificate has expired".to_string(),
            CertificateError::ExpiredContext { time, not_after } => format!("the broker's certificate expired on {} (it is now {})", utc(*not_after), utc(*time)),
            CertificateError::NotValidYet => "the broker's certificate is not valid yet".to_string(),
            CertificateError::NotValidYetContext { time, not_before } => format!("the broker's certificate is not valid before {} (it is now {}): check the clocks", utc(*not_before), utc(*time)),
            CertificateError::NotValidForName => format!("hostname mismatch: the broker's certificate is not valid for the host lagless connected to; {NAME_HINT}"),
            CertificateError::NotValidForNameContext { expected, presented } => format!("hostname mismatch: the broker's certificate is not valid for `{}` (it names {}); {NAME_HINT}", expected.to_str(), if presented.is_empty() { "no host".to_string() } else { presented.join(", ") }),
            CertificateError::Revoked => "the broker's certificate has been revoked".to_string(),
            other => format!("the broker's certificate was rejected: {other:?}"),
        },
        // With TLS 1.3 the broker checks the client's certificate after the client has finished
        // its handshake, and some brokers (Java's) say `bad_certificate` when there is none.
        rustls::Error::AlertReceived(A::CertificateRequired | A::BadCertificate | A::HandshakeFailure) if !client_certificate => "the broker requires a client certificate (mutual TLS): set `ssl.certificate.location` and `ssl.key.location`, or `ssl.keystore.location`".to_string(),
        rustls::Error::AlertReceived(a @ (A::BadCertificate | A::UnknownCA | A::CertificateUnknown | A::UnsupportedCertificate | A::CertificateExpired | A::CertificateRevoked)) => format!("the broker rejected lagless's client certificate (TLS alert {a:?}): check that the broker trusts its CA and that it has not expired"),
        rustls::Error::AlertReceived(a) => format!("the broker ended the TLS handshake (TLS alert {a:?})"),
        rustls::Error::InvalidMessage(_) => "the broker did not answer in TLS: the listener is probably PLAINTEXT or SASL_PLAINTEXT, so `security.protocol` probably mismatches".to_string(),
        other => format!("TLS failed: {other}"),
    }
}

/// The error of a failed handshake. A certificate or protocol failure will not go away by
/// retrying, so it is a TLS error, fatal as the Java client's `SslAuthenticationException`; a
/// lost connection is a transport error.
fn handshake_error(addr: &str, e: &io::Error, client_certificate: bool) -> Error {
    if let Some(t) = rustls_error(e) {
        return Error::Tls(format!(
            "handshake with broker {addr} failed: {}",
            describe(t, client_certificate)
        ));
    }
    match e.kind() {
        // A Kafka listener without TLS reads the ClientHello as an absurd request size and
        // closes the connection without a word.
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => Error::Tls(format!(
            "handshake with broker {addr} failed: the broker closed the connection without answering the TLS ClientHello; the listener is probably PLAINTEXT or SASL_PLAINTEXT, so `security.protocol` probably mismatches"
        )),
        _ => Error::Transport(format!("TLS handshake with broker {addr} failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // The tests go through real configs: their defaults and checks as keys are set.
    use crate::config::Config;
    use std::path::PathBuf;

    /// A CA and a client certificate it signed, made fresh, with their files in a directory of
    /// the test's own.
    struct Pki {
        dir: PathBuf,
        ca_pem: String,
        cert_pem: String,
        key_pem: String,
        key_der: Vec<u8>,
        cert_der: Vec<u8>,
    }

    impl Pki {
        fn new(name: &str) -> Pki {
            let dir =
                std::env::temp_dir().join(format!("lagless-tls-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let ca_key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            let ca = params.self_signed(&ca_key).unwrap();
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = rcgen::CertificateParams::new(vec!["client".to_string()])
                .unwrap()
                .signed_by(&key, &ca, &ca_key)
                .unwrap();
            let pki = Pki {
                dir,
                ca_pem: ca.pem(),
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
                key_der: key.serialize_der(),
                cert_der: cert.der().to_vec(),
            };
            pki.write("ca.pem", pki.ca_pem.as_bytes());
            pki.write("client.pem", pki.cert_pem.as_bytes());
            pki.write("client.key", pki.key_pem.as_bytes());
            pki
        }

        fn write(&self, name: &str, bytes: &[u8]) -> String {
            let path = self.dir.join(name);
            std::fs::write(&path, bytes).unwrap();
            path.to_string_lossy().into_owned()
        }

        fn path(&self, name: &str) -> String {
            self.dir.join(name).to_string_lossy().into_owned()
        }

        fn encrypted_key(&self, password: &str) -> String {
            let info = pkcs8::PrivateKeyInfo::try_from(self.key_der.as_slice()).unwrap();
            let doc = info
                .encrypt(rand::rngs::OsRng, password.as_bytes())
                .unwrap();
            doc.to_pem("ENCRYPTED PRIVATE KEY", pkcs8::LineEnding::LF)
                .unwrap()
                .to_string()
        }

        fn pkcs12(&self, password: &str) -> Vec<u8> {
            let mut store = p12_keystore::KeyStore::new();
            let chain = p12_keystore::PrivateKeyChain::new(
                &self.key_der,
                [1u8; 20],
                [p12_keystore::Certificate::from_der(&self.cert_der).unwrap()],
            );
            store.add_entry(
                "client",
                p12_keystore::KeyStoreEntry::PrivateKeyChain(chain),
            );
            store.writer(password).write().unwrap()
        }
    }

    impl Drop for Pki {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn from_config(c: &Config) -> Result<Tls> {
        Tls::from_settings(&c.security_settings()?)
    }

    fn config(pairs: &[(&str, &str)]) -> Config {
        let mut c = Config::new();
        c.set("security.protocol", "SSL").unwrap();
        for (k, v) in pairs {
            c.set(k, v).unwrap_or_else(|e| panic!("{k}: {e}"));
        }
        c
    }

    fn err(c: &Config) -> (String, String) {
        match from_config(c) {
            Err(Error::Config { key, message }) => (key, message),
            Err(other) => panic!("not a config error: {other}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn every_way_of_giving_the_ca_and_the_client_identity_loads() {
        let pki = Pki::new("forms");
        let (ca, cert, key) = (
            pki.path("ca.pem"),
            pki.path("client.pem"),
            pki.path("client.key"),
        );
        let encrypted = pki.write("client-enc.key", pki.encrypted_key("key-pw-1").as_bytes());
        let p12 = pki.write("client.p12", &pki.pkcs12("p12-pw-1"));
        let pem_store = pki.write(
            "keystore.pem",
            format!("{}{}", pki.key_pem, pki.cert_pem).as_bytes(),
        );
        let ca_dir = pki.dir.join("cas");
        std::fs::create_dir_all(&ca_dir).unwrap();
        std::fs::write(ca_dir.join("one.pem"), &pki.ca_pem).unwrap();
        let ca_dir = ca_dir.to_string_lossy().into_owned();

        let trusts: [&[(&str, &str)]; 5] = [
            &[("ssl.ca.location", &ca)],
            &[("ssl.ca.location", &ca_dir)],
            &[("ssl.ca.pem", &pki.ca_pem)],
            &[
                ("ssl.truststore.type", "PEM"),
                ("ssl.truststore.location", &ca),
            ],
            &[("ssl.truststore.certificates", &pki.ca_pem)],
        ];
        // `probe` (librdkafka) is the system's CAs; this machine may have none, and then the
        // error says how to name a CA.
        match from_config(&config(&[("ssl.ca.location", "probe")])) {
            Ok(_) => {}
            Err(Error::Config { key, message }) => {
                assert_eq!(key, "ssl.ca.location");
                assert!(message.contains("system trust store"), "{message}");
            }
            Err(other) => panic!("{other}"),
        }
        for trust in trusts {
            let t = from_config(&config(trust)).unwrap();
            assert!(!t.has_client_certificate());
        }
        let identities: [&[(&str, &str)]; 7] = [
            &[
                ("ssl.certificate.location", &cert),
                ("ssl.key.location", &key),
            ],
            &[
                ("ssl.certificate.pem", &pki.cert_pem),
                ("ssl.key.pem", &pki.key_pem),
            ],
            &[
                ("ssl.certificate.location", &cert),
                ("ssl.key.location", &encrypted),
                ("ssl.key.password", "key-pw-1"),
            ],
            &[
                ("ssl.keystore.location", &p12),
                ("ssl.keystore.password", "p12-pw-1"),
            ],
            &[
                ("ssl.keystore.type", "PKCS12"),
                ("ssl.keystore.location", &p12),
                ("ssl.keystore.password", "p12-pw-1"),
            ],
            &[
                ("ssl.keystore.type", "PEM"),
                ("ssl.keystore.location", &pem_store),
            ],
            &[
                ("ssl.keystore.type", "PEM"),
                ("ssl.keystore.certificate.chain", &pki.cert_pem),
                ("ssl.keystore.key", &pki.key_pem),
            ],
        ];
        for identity in identities {
            let mut pairs = vec![("ssl.ca.location", ca.as_str())];
            pairs.extend_from_slice(identity);
            let t = from_config(&config(&pairs)).unwrap_or_else(|e| {
                panic!(
                    "{:?}: {e}",
                    identity.iter().map(|p| p.0).collect::<Vec<_>>()
                )
            });
            assert!(t.has_client_certificate());
        }
    }

    #[test]
    fn bad_key_material_names_the_key_and_never_the_password() {
        let pki = Pki::new("errors");
        let ca = pki.path("ca.pem");
        let cert = pki.path("client.pem");
        let encrypted = pki.write("client-enc.key", pki.encrypted_key("key-pw-2").as_bytes());
        let p12 = pki.write("client.p12", &pki.pkcs12("p12-pw-2"));

        let (key, m) = err(&config(&[
            ("ssl.ca.location", &ca),
            ("ssl.certificate.location", &cert),
            ("ssl.key.location", &encrypted),
            ("ssl.key.password", "not-the-key-pw"),
        ]));
        assert_eq!(key, "ssl.key.password");
        assert!(m.contains("wrong") && !m.contains("not-the-key-pw"), "{m}");

        let (key, m) = err(&config(&[
            ("ssl.ca.location", &ca),
            ("ssl.certificate.location", &cert),
            ("ssl.key.location", &encrypted),
        ]));
        assert_eq!(key, "ssl.key.password");
        assert!(m.contains("encrypted"), "{m}");

        let (key, m) = err(&config(&[
            ("ssl.ca.location", &ca),
            ("ssl.keystore.location", &p12),
            ("ssl.keystore.password", "not-the-p12-pw"),
        ]));
        assert_eq!(key, "ssl.keystore.location");
        assert!(
            m.contains("password is wrong") && !m.contains("not-the-p12-pw"),
            "{m}"
        );

        let jks = pki.write("store.jks", &[0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2]);
        let (key, m) = err(&config(&[("ssl.truststore.location", &jks)]));
        assert_eq!(key, "ssl.truststore.location");
        assert!(
            m.contains("keytool -importkeystore") && m.contains("PKCS12"),
            "{m}"
        );

        let (key, m) = err(&config(&[
            ("ssl.ca.location", &ca),
            ("ssl.certificate.location", &cert),
        ]));
        assert_eq!(key, "ssl.certificate.location");
        assert!(m.contains("no key"), "{m}");
        let (key, _) = err(&config(&[
            ("ssl.ca.location", &ca),
            ("ssl.key.pem", &pki.key_pem),
        ]));
        assert_eq!(key, "ssl.key.pem");

        let (key, m) = err(&config(&[("ssl.ca.location", "/nonexistent/ca.pem")]));
        assert_eq!(key, "ssl.ca.location");
        assert!(m.contains("/nonexistent/ca.pem"), "{m}");

        let (key, m) = err(&config(&[("ssl.ca.pem", "not a certificate")]));
        assert_eq!(key, "ssl.ca.pem");
        assert!(m.contains("no PEM certificate"), "{m}");

        let legacy = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n";
        let (key, m) = err(&config(&[
            ("ssl.ca.location", &ca),
            ("ssl.certificate.location", &cert),
            ("ssl.key.pem", legacy),
        ]));
        assert_eq!(key, "ssl.key.pem");
        assert!(m.contains("openssl pkcs8 -topk8"), "{m}");

        // The key of another certificate.
        let other = rcgen::KeyPair::generate().unwrap().serialize_pem();
        let (key, m) = err(&config(&[
            ("ssl.ca.location", &ca),
            ("ssl.certificate.location", &cert),
            ("ssl.key.pem", &other),
        ]));
        assert_eq!(key, "ssl.certificate.location");
        assert!(m.contains("does not fit"), "{m}");
    }

    #[test]
    fn server_names_come_from_the_broker_address() {
        assert!(matches!(
            server_name("127.0.0.1:9093").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("[::1]:9093").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert_eq!(
            server_name("broker-1.example:9093").unwrap(),
            ServerName::try_from("broker-1.example").unwrap()
        );
    }

    #[test]
    fn tls_failures_say_which_check_failed() {
        let bad = |c: CertificateError| describe(&rustls::Error::InvalidCertificate(c), false);
        assert!(bad(CertificateError::UnknownIssuer).contains("not trusted"));
        assert!(bad(CertificateError::Expired).contains("expired"));
        let expired = bad(CertificateError::ExpiredContext {
            time: UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_796_472_000)),
            not_after: UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_796_040_000)),
        });
        assert!(
            expired
                .contains("expired on 2026-11-30 12:00:00 UTC (it is now 2026-12-05 12:00:00 UTC)"),
            "{expired}"
        );
        let early = bad(CertificateError::NotValidYetContext {
            time: UnixTime::since_unix_epoch(std::time::Duration::from_secs(0)),
            not_before: UnixTime::since_unix_epoch(std::time::Duration::from_secs(951_825_599)),
        });
        assert!(
            early.contains(
                "not valid before 2000-02-29 11:59:59 UTC (it is now 1970-01-01 00:00:00 UTC)"
            ),
            "{early}"
        );
        let name = bad(CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("127.0.0.1").unwrap(),
            presented: vec!["DNS:wrong.example".to_string()],
        });
        assert!(
            name.contains("not valid for `127.0.0.1` (it names DNS:wrong.example)"),
            "{name}"
        );
        assert!(bad(CertificateError::NotValidForName).contains("hostname mismatch"));
        assert!(bad(CertificateError::NotValidForName)
            .contains("ssl.endpoint.identification.algorithm"));
        let alert = |a, cert| describe(&rustls::Error::AlertReceived(a), cert);
        use rustls::AlertDescription as A;
        assert!(alert(A::BadCertificate, false).contains("requires a client certificate"));
        assert!(alert(A::CertificateRequired, false).contains("requires a client certificate"));
        assert!(alert(A::BadCertificate, true).contains("rejected lagless's client certificate"));
        let m = describe(
            &rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
            false,
        );
        assert!(
            m.contains("security.protocol") && m.contains("mismatch"),
            "{m}"
        );

        let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "tls handshake eof");
        let e = handshake_error("b:1", &eof, false);
        assert_eq!(e.name(), "SSL");
        assert!(e.is_fatal() && !e.is_retriable());
        assert!(e.to_string().contains("mismatch"), "{e}");
        let refused = io::Error::new(io::ErrorKind::ConnectionRefused, "refused");
        assert!(handshake_error("b:1", &refused, false).is_retriable());
    }
}
