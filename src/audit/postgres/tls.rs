//! TLS for the connection, with rustls (ring): what each `sslmode`
//! checks. `verify-full` checks the server's certificate against the public
//! roots (webpki's) and the location's `sslrootcert`, and its name against
//! the host; `prefer` and `require` encrypt without checking who answers,
//! as libpq does without a root certificate.

use crate::audit::location::{PgLocation, SslMode};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The TLS connector for `loc`'s `sslmode`.
pub fn connector(loc: &PgLocation) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let config = match loc.sslmode {
        SslMode::VerifyFull => builder
            .with_root_certificates(roots(loc)?)
            .with_no_client_auth(),
        SslMode::Disable | SslMode::Prefer | SslMode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unchecked(provider)))
            .with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The public roots and the certificates of `sslrootcert`.
fn roots(loc: &PgLocation) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let Some(path) = &loc.sslrootcert else {
        return Ok(roots);
    };
    let shown = path.display();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("sslrootcert={shown}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("sslrootcert={shown}: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "sslrootcert={shown} holds no certificate (a PEM `BEGIN CERTIFICATE` block)"
        ));
    }
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| format!("sslrootcert={shown}: {e}"))?;
    }
    Ok(roots)
}

/// Accepts any certificate, but still checks that the server holds its
/// key (the handshake's signatures), as `sslmode=require` asks.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
