//! The cache as both runs reach it: where an entry or a blob is under each
//! protocol, one bounded request with the surface's credentials, a read
//! that streams (scanned for the nonce and hashed as it arrives, its
//! first bytes kept), and what a status says.

use super::{BuildCache, Kind, Protocol};
use crate::escape;
use crate::fault::Fault;
use crate::http::{Failure, Request};
use ::http::Method;
use sha2::{Digest, Sha256};

/// The most of one entry a read takes: the plants are a few hundred
/// bytes; an entry someone else put at an agreed key may be anything.
const MAX_READ: usize = 64 << 20;

/// How much of an entry a read keeps (an action result to decode, the
/// line that names a plant).
const KEEP: usize = 64 << 10;

/// What a status says of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Said {
    Done,
    /// 404 or 410: nothing is there.
    Absent,
    /// The cache's access control refused this very request (a 403 to a
    /// credential it took; a 401 to a run that sends none).
    Refused(String),
    Failed(String),
}

/// What one read came to.
pub(super) enum Read {
    There(Got),
    Absent,
    Refused(String),
    Failed(String),
}

/// An entry read whole.
pub(super) struct Got {
    /// Its first [`KEEP`] bytes.
    pub head: Vec<u8>,
    /// Whether `head` is all of it.
    pub whole: bool,
    pub sha256: String,
    /// Whether the needle asked for was in it.
    pub found: bool,
    /// Turborepo's `x-artifact-tag`, as the server handed it back.
    pub tag: Option<String>,
}

impl Got {
    /// Whether it names `name` in its first bytes (a plant's content
    /// does, in its first line or its output's path).
    pub fn names(&self, name: &str) -> bool {
        memchr::memmem::find(&self.head, name.as_bytes()).is_some()
    }
}

impl BuildCache {
    pub(super) fn shown(&self) -> String {
        escape::bytes(self.settings.url.as_bytes())
    }

    /// Where an entry (`Kind::Entry`, at an agreed key) or a Bazel blob is.
    pub(super) fn url(&self, kind: Kind, key: &str) -> String {
        let base = &self.settings.url;
        match (kind, self.settings.protocol) {
            (Kind::Blob, _) => format!("{base}cas/{key}"),
            (Kind::Entry, Protocol::Bazel) => format!("{base}ac/{key}"),
            (Kind::Entry, Protocol::Gradle) => format!("{base}{key}"),
            (Kind::Entry, Protocol::Nx) => format!("{base}v1/cache/{key}"),
            (Kind::Entry, Protocol::Turborepo) => {
                let team = self
                    .settings
                    .team
                    .as_ref()
                    .map(|t| format!("?{}={}", t.param, crate::wire::percent_encode(&t.value)))
                    .unwrap_or_default();
                format!("{base}v8/artifacts/{key}{team}")
            }
        }
    }

    /// An entry or blob as people read it: its path under the base URL.
    pub(super) fn place(&self, kind: Kind, key: &str) -> String {
        let url = self.url(kind, key);
        let path = url.strip_prefix(&self.settings.url).unwrap_or(&url);
        let path = path.split('?').next().unwrap_or(path);
        escape::bytes(path.as_bytes())
    }

    /// One request; `Unreachable` or `Broken` when there was no answer.
    /// `sink` takes the body as it arrives.
    fn request(
        &self,
        method: Method,
        url: &str,
        body: Vec<u8>,
        tag: Option<&str>,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), Fault>,
    ) -> Result<(u16, ::http::HeaderMap), Fault> {
        let mut req = self
            .settings
            .auth
            .apply(Request::new(method.clone(), url))
            .bytes(body);
        if method == Method::PUT {
            // (Turborepo's server answers 415 to any other type.)
            req = req.header("content-type", "application/octet-stream");
        }
        if let Some(t) = tag {
            req = req.header("x-artifact-tag", t);
        }
        let client = self.client.get()?;
        client.stream(&req, sink).map_err(|f| match f {
            Failure::Unreachable(m) => {
                Fault::Unreachable(format!("cannot reach the cache at {}: {m}", self.shown()))
            }
            Failure::Broken(m) => {
                Fault::broken(format!("{method} at the cache {}: {m}", self.shown()))
            }
        })
    }

    /// A PUT of `body` (with Turborepo's tag), a DELETE: the status, and
    /// the answer's first bytes (what an error says).
    pub(super) fn send(
        &self,
        method: Method,
        kind: Kind,
        key: &str,
        body: Vec<u8>,
        tag: Option<&str>,
    ) -> Result<(u16, Vec<u8>), Fault> {
        let url = self.url(kind, key);
        // (An answer's body says nothing a status does not but why a 403
        // is one: read, bounded.)
        let mut said = Vec::new();
        let (status, _) = self.request(method, &url, body, tag, &mut |c| {
            if said.len() + c.len() > KEEP {
                return Err(Fault::broken("the answer is larger than 64 KiB"));
            }
            said.extend_from_slice(c);
            Ok(())
        })?;
        Ok((status, said))
    }

    /// A GET of what is at `key`, scanned for `needle` as it streams.
    pub(super) fn read(&self, kind: Kind, key: &str, needle: Option<&str>) -> Read {
        let url = self.url(kind, key);
        let mut scan = crate::scan::Needles::new(needle.iter().map(|n| n.to_string()).collect());
        let mut hash = Sha256::new();
        let mut head = Vec::new();
        let mut total = 0usize;
        let got = self.request(Method::GET, &url, vec![], None, &mut |c| {
            total += c.len();
            if total > MAX_READ {
                return Err(Fault::broken(
                    "the entry is larger than 64 MiB: not read whole",
                ));
            }
            scan.feed(c);
            hash.update(c);
            let room = KEEP.saturating_sub(head.len());
            head.extend_from_slice(&c[..c.len().min(room)]);
            Ok(())
        });
        let (status, headers) = match got {
            Ok(x) => x,
            Err(f) => return Read::Failed(f.into_reason()),
        };
        let op = format!("GET of {}", self.place(kind, key));
        match self.said(status, &op, &head) {
            Said::Done => Read::There(Got {
                whole: total <= KEEP,
                head,
                sha256: crate::nonce::to_hex(&hash.finalize()),
                found: needle.is_some() && scan.found(0),
                tag: headers
                    .get("x-artifact-tag")
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
            }),
            Said::Absent => Read::Absent,
            Said::Refused(m) => Read::Refused(m),
            Said::Failed(m) => Read::Failed(m),
        }
    }

    /// What `status` (with the answer's first bytes, `body`) says of `op`
    /// (a request of this surface's).
    pub(super) fn said(&self, status: u16, op: &str, body: &[u8]) -> Said {
        let anonymous = !self.settings.auth.has_credential();
        let says = |w: &str| memchr::memmem::find(body, w.as_bytes()).is_some();
        match status {
            200..=299 => Said::Done,
            404 | 410 => Said::Absent,
            // Vercel answers a token it does not take, and a team whose
            // remote caching is off, with 403 too: neither is a refusal
            // of this request by access control.
            403 if says("invalidToken") || says("invalid_token") => Said::Failed(format!(
                "the cache did not take the token ({}) for the {op} (HTTP 403, an invalid token): not a refusal",
                self.settings.auth.describe()
            )),
            403 if says("remote_caching_disabled") => Said::Failed(format!(
                "{op}: HTTP 403, remote caching is turned off for the team: not access control, nothing is tested"
            )),
            403 if anonymous => Said::Refused(format!(
                "the cache refused the {op} (HTTP 403) to an anonymous run"
            )),
            403 => Said::Refused(format!("the cache refused the {op} (HTTP 403)")),
            401 if anonymous => Said::Refused(format!(
                "the cache asks for credentials for the {op} (HTTP 401), and the surface sends none: an anonymous run may not"
            )),
            401 => Said::Failed(format!(
                "the cache did not take the credential ({}) for the {op} (HTTP 401): not a refusal (that is a 403)",
                self.settings.auth.describe()
            )),
            409 => Said::Failed(format!(
                "{op}: HTTP 409, an entry is at this probe's agreed key already (someone else's)"
            )),
            405 | 501 => Said::Failed(format!(
                "{op}: HTTP {status}, the server takes no such request there: check `url` and `protocol`"
            )),
            s => Said::Failed(format!("{op}: HTTP {s}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surface::build_cache::{BuildCache, Protocol, Settings};

    fn cache(auth: crate::surface::HttpAuth) -> BuildCache {
        let settings = Settings {
            url: "http://127.0.0.1:9/".into(),
            protocol: Protocol::Turborepo,
            auth,
            team: None,
            permanent: false,
            control: false,
        };
        BuildCache {
            client: crate::http::LazyClient::new(settings.auth.secrets()),
            settings,
        }
    }

    #[test]
    fn only_a_403_of_access_control_is_a_refusal() {
        let c = cache(crate::surface::HttpAuth::bearer_for_control("t".into()));
        assert!(matches!(
            c.said(403, "PUT", b"<html>403</html>"),
            Said::Refused(_)
        ));
        // Vercel's answer to a token it does not take, and to a team whose
        // remote caching is off.
        let invalid = br#"{"error":{"code":"forbidden","invalidToken":true}}"#;
        assert!(matches!(c.said(403, "PUT", invalid), Said::Failed(_)));
        let off = br#"{"error":{"code":"remote_caching_disabled"}}"#;
        assert!(matches!(c.said(403, "PUT", off), Said::Failed(_)));
        assert!(matches!(c.said(401, "PUT", b""), Said::Failed(_)));
        let anonymous = cache(crate::surface::HttpAuth::default());
        assert!(matches!(anonymous.said(401, "PUT", b""), Said::Refused(_)));
        assert!(matches!(c.said(409, "PUT", b""), Said::Failed(_)));
    }
}
