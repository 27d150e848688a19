//! Requests to the registry with the surface's credentials and the
//! bearer token flow.
//!
//! Where credentials go: the configured ones (basic, or a bearer token)
//! to the registry's origin, and to the token service a 401's
//! `WWW-Authenticate: Bearer realm=…` names only when that realm is on
//! the registry's own host with the registry's own scheme (any port: a
//! token service beside the registry on one machine is common; never
//! plain http when the registry is https, which would be a downgrade), or
//! is exactly the `token-realm` the config names (an https URL: Docker
//! Hub's `auth.docker.io`, a Harbor's or an Artifactory's own service).
//! Any other realm is an error naming the key to set, never an anonymous
//! retry that could read as a refusal. Tokens the service issues go only
//! to the registry's origin. An upload `Location` or a `Link` on another
//! origin is never followed; a blob redirect to another origin (a storage
//! backend's signed URL) is followed without any credential.
//!
//! The token service is not the registry's access control: any answer of
//! it but a token (a refusal of the credentials, a rate limit, a front's
//! page) is an error, so a mistyped or expired token never reads as a
//! closed carrier.

use super::OciRegistry;
use crate::escape;
use crate::fault::Fault;
use crate::http::{Failure, Request, Response, origin};
use ::http::Method;

/// A `WWW-Authenticate: Bearer` challenge's parameters.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Challenge {
    pub realm: String,
    pub service: Option<String>,
    pub scope: Option<String>,
    pub error: Option<String>,
}

/// The Bearer challenge of a header value (`Bearer realm="…",service="…"`),
/// quoted values taken whole (a scope has commas).
pub(super) fn parse_challenge(value: &str) -> Option<Challenge> {
    let rest = value.trim();
    let (scheme, mut rest) = rest.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut c = Challenge::default();
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let (val, next) = match after.strip_prefix('"') {
            Some(q) => {
                let end = q.find('"')?;
                (&q[..end], &q[end + 1..])
            }
            None => after.split_once(',').unwrap_or((after, "")),
        };
        match key.trim().to_ascii_lowercase().as_str() {
            "realm" => c.realm = val.to_string(),
            "service" => c.service = Some(val.to_string()),
            "scope" => c.scope = Some(val.to_string()),
            "error" => c.error = Some(val.to_string()),
            _ => {}
        }
        rest = next;
    }
    (!c.realm.is_empty()).then_some(c)
}

/// The repository a registry path is about (`""`: the catalog, `/v2/`).
fn scope_key(url: &str, registry: &str) -> String {
    let path = url.strip_prefix(registry).unwrap_or(url);
    let path = path.split('?').next().unwrap_or("");
    let rest = path.strip_prefix("/v2/").unwrap_or("");
    for mark in ["/manifests/", "/blobs/", "/tags/"] {
        if let Some((name, _)) = rest.split_once(mark) {
            return name.to_string();
        }
    }
    String::new()
}

impl OciRegistry {
    pub(super) fn client(&self) -> Result<&crate::http::Client, Fault> {
        self.client.get()
    }

    pub(super) fn shown(&self) -> String {
        escape::bytes(self.settings.registry.as_bytes())
    }

    /// `path` (from `/v2/`) on the registry.
    pub(super) fn at(&self, path: &str) -> String {
        format!("{}{path}", self.settings.registry)
    }

    /// A URL the registry named (an upload `Location`, a `Link`): made
    /// absolute, and `Invalid` on another origin, which would get the
    /// registry's credentials.
    pub(super) fn resolve(&self, named: &str) -> Result<String, Fault> {
        if named.starts_with('/') && !named.starts_with("//") {
            return Ok(self.at(named));
        }
        if origin(named).as_deref() == Some(self.settings.registry.as_str()) {
            return Ok(named.to_string());
        }
        Err(Fault::invalid(
            "the registry named a URL on another origin; it is not followed with the registry's credentials",
        ))
    }

    /// `req` with the token issued for its repository, else the configured
    /// credentials.
    /// Records whether it was an issued token ([`OciRegistry::bearer_sent`]):
    /// only an answer to one can be a scope's refusal.
    pub(super) fn authed<'a>(&self, req: Request<'a>, key: &str) -> Request<'a> {
        let token = self.tokens.borrow().get(key).cloned();
        self.bearer_sent.set(token.is_some());
        match token {
            Some(t) => req.secret_header("authorization", format!("Bearer {t}")),
            None => self.settings.auth.apply(req),
        }
    }

    pub(super) fn failure(&self, method: &Method, f: Failure) -> Fault {
        match f {
            Failure::Unreachable(m) => {
                Fault::Unreachable(format!("cannot reach the registry {}: {m}", self.shown()))
            }
            Failure::Broken(m) => {
                Fault::broken(format!("{method} at the registry {}: {m}", self.shown()))
            }
        }
    }

    /// One request to the registry, answered whole; on a Bearer challenge
    /// the token is fetched and the request sent once more.
    /// `Unreachable` or `Broken` when there was no answer.
    pub(super) fn call(
        &self,
        method: Method,
        url: &str,
        accept: &str,
        body: Option<(&'static str, &[u8])>,
    ) -> Result<Response, Fault> {
        let key = scope_key(url, &self.settings.registry);
        for attempt in 0..2 {
            let mut req = self.authed(Request::new(method.clone(), url), &key);
            req = req.header("accept", accept.to_string());
            if let Some((ty, b)) = body {
                req = req.header("content-type", ty).bytes(b.to_vec());
            }
            let r = self
                .client()?
                .send(&req)
                .map_err(|f| self.failure(&method, f))?;
            self.saw(&r.headers);
            if r.status == 401 && attempt == 0 && self.challenged(&r.headers, &key)? {
                continue;
            }
            return Ok(r);
        }
        unreachable!("the loop returns on its second pass")
    }

    /// Notes the registry's `Docker-Distribution-Api-Version`, which its
    /// own read-only 405 must then carry too.
    pub(super) fn saw(&self, headers: &::http::HeaderMap) {
        if let Some(v) = headers
            .get("docker-distribution-api-version")
            .and_then(|v| v.to_str().ok())
        {
            *self.api_version.borrow_mut() = Some(v.to_string());
        }
    }

    /// Answers a Bearer challenge: asks its realm for a token (with the
    /// configured credentials, where [`realm_trusted`] allows) and keeps
    /// it for `key`. `Ok(false)` when there is no Bearer challenge; an
    /// error when the token service gives no token, whatever it answers
    /// (a refusal of the credentials is not the registry's access
    /// control refusing a carrier).
    pub(super) fn challenged(&self, headers: &::http::HeaderMap, key: &str) -> Result<bool, Fault> {
        let Some(c) = headers
            .get_all("www-authenticate")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(parse_challenge)
        else {
            return Ok(false);
        };
        // A 401 for a token already issued for this scope: the scope does
        // not cover the request (insufficient_scope) unless a new token
        // is asked for, so one more is.
        let mut q = vec![];
        if let Some(s) = &c.service {
            q.push(format!("service={}", crate::wire::percent_encode(s)));
        }
        if let Some(s) = &c.scope {
            q.push(format!("scope={}", crate::wire::percent_encode(s)));
        }
        let sep = if c.realm.contains('?') { '&' } else { '?' };
        let url = format!("{}{sep}{}", c.realm, q.join("&"));
        let mut req = Request::new(Method::GET, &url).header("accept", "application/json");
        if !self.settings.auth.secrets().is_empty() {
            if !realm_trusted(
                &self.settings.registry,
                &c.realm,
                self.settings.token_realm.as_deref(),
            ) {
                return Err(Fault::broken(format!(
                    "the registry {} names the token service {}, not on its own host and scheme: the credentials are not sent there (if it is the registry's own, name it with `token-realm:`, an https URL)",
                    self.shown(),
                    escape::bytes(c.realm.as_bytes())
                )));
            }
            req = self.settings.auth.apply(req);
        }
        let r = self.client()?.send(&req).map_err(|f| {
            self.failure(&Method::GET, f)
                .context("asking the registry's token service")
        })?;
        if r.status != 200 {
            return Err(Fault::broken(format!(
                "the registry's token service gave no token (HTTP {}): a mistyped or expired credential, a rate limit or a front before it; that proves nothing about the registry's access control",
                r.status
            )));
        }
        let v = r
            .json()
            .map_err(|f| f.context("the token service's answer"))?;
        let Some(t) = v["token"].as_str().or(v["access_token"].as_str()) else {
            return Err(Fault::broken("the token service's answer holds no token"));
        };
        crate::redact::add(t);
        self.tokens
            .borrow_mut()
            .insert(key.to_string(), t.to_string());
        Ok(true)
    }
}

/// Whether the token service at `realm` may get the configured
/// credentials: on the registry's own host with its own scheme (any
/// port), or exactly the https `named` realm of `token-realm`.
pub(super) fn realm_trusted(registry: &str, realm: &str, named: Option<&str>) -> bool {
    let parts = |u: &str| {
        let u = u.parse::<::http::Uri>().ok()?;
        Some((
            u.scheme_str()?.to_ascii_lowercase(),
            u.host()?.to_ascii_lowercase(),
        ))
    };
    if parts(realm).is_some() && parts(realm) == parts(registry) {
        return true;
    }
    let bare = |u: &str| {
        u.split('?')
            .next()
            .unwrap_or("")
            .trim_end_matches('/')
            .to_string()
    };
    named.is_some_and(|n| n.starts_with("https://") && bare(n) == bare(realm))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_keep_quoted_commas() {
        let c = parse_challenge(
            r#"Bearer realm="https://auth.example/token",service="reg",scope="repository:ci/x:pull,push",error="insufficient_scope""#,
        )
        .unwrap();
        assert_eq!(c.realm, "https://auth.example/token");
        assert_eq!(c.service.as_deref(), Some("reg"));
        assert_eq!(c.scope.as_deref(), Some("repository:ci/x:pull,push"));
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(parse_challenge(r#"Basic realm="x""#), None);
        assert_eq!(parse_challenge("Bearer service=x"), None);
    }

    #[test]
    fn realms_get_credentials_only_on_the_registrys_host_and_scheme_or_when_named() {
        let https = "https://reg.example";
        let http = "http://127.0.0.1:5000";
        assert!(realm_trusted(https, "https://reg.example:8443/token", None));
        assert!(realm_trusted(http, "http://127.0.0.1:5001/token", None));
        // A downgrade to plain http on the registry's own host.
        assert!(!realm_trusted(https, "http://reg.example:8080/token", None));
        assert!(!realm_trusted(http, "https://127.0.0.1:5001/token", None));
        // Another host, https or not, only when named, and named https.
        let hub = "https://auth.docker.io/token";
        assert!(!realm_trusted(https, hub, None));
        assert!(realm_trusted(https, hub, Some(hub)));
        assert!(realm_trusted(
            https,
            "https://auth.docker.io/token?x=1",
            Some(hub)
        ));
        assert!(!realm_trusted(
            https,
            "https://auth.docker.io/other",
            Some(hub)
        ));
        assert!(!realm_trusted(
            https,
            "http://auth.docker.io/token",
            Some("http://auth.docker.io/token")
        ));
        assert!(!realm_trusted(http, "http://127.0.0.2:5001/token", None));
    }

    #[test]
    fn scope_keys_are_repositories() {
        let r = "http://h:1";
        assert_eq!(scope_key("http://h:1/v2/ci/x/manifests/t", r), "ci/x");
        assert_eq!(scope_key("http://h:1/v2/ci/x/blobs/uploads/?a", r), "ci/x");
        assert_eq!(scope_key("http://h:1/v2/_catalog?n=100", r), "");
    }
}
