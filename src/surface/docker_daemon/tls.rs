//! TLS to a daemon on `tcp://`, as `DOCKER_TLS_VERIFY` asks for it: the
//! daemon's certificate checked against `ca.pem`, and this client's
//! `cert.pem` and `key.pem` presented, all three from one directory
//! (`DOCKER_CERT_PATH`, else `~/.docker`, as the docker CLI takes them).
//! Never TLS without verifying the daemon: `DOCKER_TLS` alone is not
//! spoken.

use crate::fault::Fault;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the certificates are.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Tls {
    pub cert_path: PathBuf,
}

/// The largest certificate or key file read.
const MAX_PEM: u64 = 1 << 20;

/// A PEM file of the directory, read whole. Why symlinks are followed
/// here: the directory is the operator's configuration, not a shared
/// surface, and mounted secrets (a Kubernetes secret volume, the DinD
/// image's `/certs/client`) are symlinks to the real files.
fn pem(dir: &Path, name: &str) -> Result<Vec<u8>, Fault> {
    use std::io::Read;
    let path = dir.join(name);
    let shown = crate::escape::bytes(path.as_os_str().as_encoded_bytes());
    let mut data = Vec::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(MAX_PEM + 1).read_to_end(&mut data))
        .map_err(|e| Fault::invalid(format!("reading {shown} (for TLS to the daemon): {e}")))?;
    if data.len() as u64 > MAX_PEM {
        return Err(Fault::invalid(format!(
            "{shown} is over 1 MiB: not a certificate"
        )));
    }
    Ok(data)
}

impl Tls {
    /// The client configuration: `Invalid` when a file is missing or is
    /// not what it should be.
    pub fn config(&self) -> Result<Arc<rustls::ClientConfig>, Fault> {
        let dir = &self.cert_path;
        let bad = |what: &str, e: &dyn std::fmt::Display| {
            Fault::invalid(format!("{what} (for TLS to the daemon): {e}"))
        };
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&pem(dir, "ca.pem")?) {
            roots
                .add(c.map_err(|e| bad("ca.pem", &e))?)
                .map_err(|e| bad("ca.pem", &e))?;
        }
        if roots.is_empty() {
            return Err(Fault::invalid(
                "ca.pem holds no certificate (for TLS to the daemon)",
            ));
        }
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(&pem(dir, "cert.pem")?)
                .collect::<Result<_, _>>()
                .map_err(|e| bad("cert.pem", &e))?;
        let key =
            PrivateKeyDer::from_pem_slice(&pem(dir, "key.pem")?).map_err(|e| bad("key.pem", &e))?;
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("TLS", &e))?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .map_err(|e| bad("cert.pem and key.pem", &e))?;
        Ok(Arc::new(config))
    }
}

/// The name the daemon's certificate must carry: the address's host (an
/// IP address or a DNS name), without its port or brackets.
pub(super) fn server_name(addr: &str) -> Result<ServerName<'static>, Fault> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| {
        Fault::invalid(format!(
            "{} cannot be checked against a certificate: {e}",
            crate::escape::bytes(host.as_bytes())
        ))
    })
}
