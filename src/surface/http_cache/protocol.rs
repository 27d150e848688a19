//! The cache as both runs reach it: bounded requests with the surface's
//! credentials, the listing (PROPFIND depth 1 or the index URL) with
//! what makes it one, cache-status headers, and what a write's or a
//! multistatus's status says.

use super::HttpCache;
use crate::escape;
use crate::fault::Fault;
use crate::http::answer::{self, Answer, Class, Server};
use crate::http::{Failure, Request};
use crate::scan::Marked;
use crate::surface::PlantOutcome;
use ::http::Method;

/// How an HTTP cache answers ([`crate::http::answer`]): its access control
/// refuses with 401 or 403. Every answer counts as the cache's own: caches
/// and WebDAV servers answer errors with pages of their own making
/// (nginx's 403 is an HTML page with no error body), and no format tells
/// them from a proxy's. No answer says a path exists already: a PUT
/// replaces.
pub(super) const CACHE: Server<'static> = Server {
    refusals: &[401, 403],
    own: &answer::any,
    refuses: &answer::any,
    exists: &answer::none,
};

/// What a status from the cache (an answer's, or a property's in a 207)
/// means.
pub(super) fn class(status: u16) -> Class {
    answer::classify(&Answer::status(status), &CACHE)
}

/// The status of a multistatus answer's (first) propstat:
/// `<D:status>HTTP/1.1 403 Forbidden</D:status>`, any namespace prefix,
/// reason phrase optional.
pub(super) fn propstat_status(body: &[u8]) -> Option<u16> {
    let text = String::from_utf8_lossy(body);
    let at = text.find("HTTP/1.")?;
    text[at..].split_whitespace().nth(1)?.parse().ok()
}

/// The last path segment of an href (without a trailing `/`).
pub(super) fn last_segment(href: &str) -> &str {
    href.trim_end_matches('/').rsplit('/').next().unwrap_or("")
}

/// A response header that says the answer came from the cache.
pub(super) fn cache_hit(headers: &::http::HeaderMap) -> Option<String> {
    for name in [
        "x-cache",
        "x-cache-status",
        "x-cache-lookup",
        "cf-cache-status",
        "x-proxy-cache",
    ] {
        if let Some(v) = headers.get(name).and_then(|v| v.to_str().ok())
            && v.to_ascii_uppercase().contains("HIT")
        {
            return Some(format!("{name}: {}", escape::bytes(v.as_bytes())));
        }
    }
    // A shared cache sends `Age: 0` with an answer it fetched just now, so
    // only an older one says the miss was kept.
    headers
        .get("age")
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.trim().parse::<u64>().is_ok_and(|a| a > 0))
        .map(|v| format!("age: {}", escape::bytes(v.as_bytes())))
}

impl HttpCache {
    pub(super) fn client(&self) -> Result<&crate::http::Client, Fault> {
        self.client.get()
    }

    pub(super) fn shown(&self) -> String {
        escape::bytes(self.settings.url.as_bytes())
    }

    pub(super) fn url_of(&self, name: &str) -> String {
        format!("{}{}", self.settings.url, crate::wire::percent_encode(name))
    }

    /// One request; `Unreachable` or `Broken` when there was no answer.
    pub(super) fn call(
        &self,
        method: &str,
        url: &str,
        headers: &[(&'static str, &str)],
        body: Vec<u8>,
    ) -> Result<crate::http::Response, Fault> {
        let method = Method::from_bytes(method.as_bytes()).expect("a valid method");
        let mut req = self
            .settings
            .auth
            .apply(Request::new(method.clone(), url))
            .bytes(body);
        for (k, v) in headers {
            req = req.header(k, *v);
        }
        self.client()?.send(&req).map_err(|f| match f {
            Failure::Unreachable(m) => {
                Fault::Unreachable(format!("cannot reach the cache at {}: {m}", self.shown()))
            }
            Failure::Broken(m) => {
                Fault::broken(format!("{method} at the cache {}: {m}", self.shown()))
            }
        })
    }

    /// Lists the cache once, handing each name (PROPFIND) or each body
    /// chunk (index URL) to the callbacks.
    pub(super) fn list(
        &self,
        name: &mut dyn FnMut(&str),
        chunk: &mut dyn FnMut(&[u8]),
    ) -> Result<String, ListError> {
        let client = self
            .client()
            .map_err(|f| ListError::Failed(f.into_reason()))?;
        let (req, what) = match &self.settings.index_url {
            Some(u) => (
                self.settings.auth.apply(Request::new(Method::GET, u)),
                format!("the index {}", escape::bytes(u.as_bytes())),
            ),
            None => (
                self.settings
                    .auth
                    .apply(Request::new(Method::from_bytes(b"PROPFIND").expect("valid"), &self.settings.url))
                    .header("depth", "1")
                    .header("content-type", "application/xml")
                    .bytes(
                        b"<?xml version=\"1.0\"?><D:propfind xmlns:D=\"DAV:\"><D:prop><D:resourcetype/></D:prop></D:propfind>"
                            .to_vec(),
                    ),
                format!("PROPFIND depth 1 of {}", self.shown()),
            ),
        };
        let propfind = self.settings.index_url.is_none();
        let mut hrefs = Marked::dav_hrefs();
        let mut count = 0usize;
        // (An error page is scanned too, but then nothing found counts.)
        let (status, _) = client
            .stream(&req, &mut |c| {
                chunk(c);
                if propfind {
                    hrefs.feed(c, &mut |h| {
                        count += 1;
                        name(h)
                    });
                }
                Ok(())
            })
            .map_err(|f| ListError::Failed(format!("listing the cache ({what}): {f}")))?;
        match status {
            // A multistatus always names the collection itself: one with
            // no href at all is no WebDAV listing (a login page, a proxy's
            // answer), and says nothing of what the cache holds.
            207 if propfind && count == 0 => Err(ListError::Failed(format!(
                "{what} answered HTTP 207 without a single href: not a WebDAV listing"
            ))),
            207 if propfind => Ok(what),
            200 if !propfind => Ok(what),
            // A server that treats PROPFIND as GET answers 200 with a page
            // that is no listing.
            200 => Err(ListError::Failed(format!(
                "{what} answered HTTP 200, not a WebDAV multistatus (207): no listing"
            ))),
            s if class(s) == Class::Refused => Err(ListError::Denied(format!(
                "the cache refused the listing ({what}): HTTP {status}"
            ))),
            405 | 501 if propfind => Err(ListError::Unavailable(format!(
                "the cache offers no PROPFIND listing (HTTP {status}); name an index with `index-url`"
            ))),
            s => Err(ListError::Failed(format!(
                "listing the cache ({what}): HTTP {s}"
            ))),
        }
    }
}

pub(super) enum ListError {
    Denied(String),
    /// The cache offers no listing at all (no PROPFIND, no index): a
    /// route run B does not have.
    Unavailable(String),
    Failed(String),
}

/// What a write's status says.
pub(super) fn write_outcome<N>(
    status: u16,
    what: &str,
    shown: &str,
) -> Result<(), PlantOutcome<N>> {
    match status {
        200..=299 => Ok(()),
        s if class(s) == Class::Refused => Err(PlantOutcome::Refused {
            reason: format!("the cache refused the {what} (HTTP {status}) at {shown}"),
        }),
        // A cache that takes no PUT at all is no cache run A can write;
        // a 405 to a PUT usually means a wrong path: not a verdict.
        405 | 501 if what != "PUT" => Err(PlantOutcome::Unsupported {
            reason: format!("the cache does not support {what} (HTTP {status})"),
        }),
        s => Err(PlantOutcome::Error {
            reason: format!("{what} at {shown}: HTTP {s}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::cache_hit;

    fn headers(pairs: &[(&'static str, &str)]) -> ::http::HeaderMap {
        let mut h = ::http::HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_a_cache_that_says_so_remembered_a_miss() {
        assert!(cache_hit(&headers(&[("x-cache", "Hit from cloudfront")])).is_some());
        assert!(cache_hit(&headers(&[("x-cache-status", "HIT")])).is_some());
        assert!(cache_hit(&headers(&[("age", "12")])).is_some());
        // A shared cache's fresh fetch: not a remembered miss.
        assert!(cache_hit(&headers(&[("age", "0"), ("x-cache", "MISS")])).is_none());
        assert!(cache_hit(&headers(&[])).is_none());
    }
}
