//! The one classifier of HTTP answers ([`classify`]): what an answer to
//! one request means for the carrier that request plants or reads. Every
//! surface type that speaks HTTP reads its answers through it, with the
//! rules of its own server ([`Server`]), so that which answer proves a
//! carrier closed is decided in one place, and each server's differences
//! are parameters a reader can compare, each with why.
//!
//! A refusal proves a carrier closed only when the server's own access
//! control answers the very request that plants or reads it: a refusal
//! status from something in front of the server (a proxy, an SSO gate, a
//! CDN) says nothing of it ([`Class::NotTheServer`]), nor does a refusal
//! status that says the thing exists ([`Class::Conflict`]) or that is the
//! server's but no access control (a rate limit, a feature switched off:
//! [`Class::Failed`]).

use http::HeaderMap;

/// An answer, as far as classifying it needs: its status, its headers
/// where the caller kept them, and as much of its body as was read (empty
/// for a body streamed elsewhere).
#[derive(Clone, Copy)]
pub struct Answer<'a> {
    pub status: u16,
    pub headers: Option<&'a HeaderMap>,
    pub body: &'a [u8],
}

impl<'a> From<&'a super::Response> for Answer<'a> {
    fn from(r: &'a super::Response) -> Answer<'a> {
        Answer {
            status: r.status,
            headers: Some(&r.headers),
            body: &r.body,
        }
    }
}

impl Answer<'_> {
    /// An answer whose body was not kept (streamed, or not read).
    pub fn status(status: u16) -> Answer<'static> {
        Answer {
            status,
            headers: None,
            body: &[],
        }
    }

    /// The body as JSON, when it is.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(self.body).ok()
    }

    /// A header's value, when kept and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers?.get(name)?.to_str().ok()
    }
}

/// What an answer means for the request that got it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// 2xx: made, read, removed.
    Done,
    /// The server's own access control refused this very request.
    Refused,
    /// The thing is there already (a version published before, a file
    /// uploaded before): no access control, whatever the status.
    Conflict,
    /// The server's own answer that there is no such thing (404).
    Absent,
    /// A refusal or not-found status that is not the server's own answer:
    /// something in front of it answered, which says nothing of the
    /// server's access control or of what it holds.
    NotTheServer,
    /// Anything else: an error.
    Failed,
}

/// A test of an answer: the parameters of a [`Server`].
pub type Test<'a> = dyn Fn(&Answer<'_>) -> bool + 'a;

/// How one server answers: the rules [`classify`] reads its answers by.
pub struct Server<'a> {
    /// The statuses its access control refuses with.
    pub refusals: &'static [u16],
    /// Whether an error answer is the server's own rather than that of
    /// something in front of it.
    pub own: &'a Test<'a>,
    /// Whether a refusal status of the server's own is its access control
    /// refusing this request (rather than, say, a rate limit).
    pub refuses: &'a Test<'a>,
    /// Whether an error answer says the thing exists already.
    pub exists: &'a Test<'a>,
}

/// Every answer passes.
pub fn any(_: &Answer<'_>) -> bool {
    true
}

/// No answer passes.
pub fn none(_: &Answer<'_>) -> bool {
    false
}

/// The body is a JSON object.
pub fn json_object(a: &Answer<'_>) -> bool {
    a.json().is_some_and(|v| v.is_object())
}

/// The body says the thing written exists already (npm's "cannot publish
/// over the previously published versions", an index's "File already
/// exists"), in its first 4 KiB.
pub fn says_exists(a: &Answer<'_>) -> bool {
    let text = String::from_utf8_lossy(&a.body[..a.body.len().min(4096)]).to_ascii_lowercase();
    ["previously published", "already exist", "already present"]
        .iter()
        .any(|w| text.contains(w))
}

/// What `answer` means under `server`'s rules.
pub fn classify(answer: &Answer<'_>, server: &Server<'_>) -> Class {
    let status = answer.status;
    if (200..300).contains(&status) {
        return Class::Done;
    }
    let refusal = server.refusals.contains(&status);
    if (refusal || status == 409) && (server.exists)(answer) {
        return Class::Conflict;
    }
    let missing = status == 404;
    if (refusal || missing) && !(server.own)(answer) {
        return Class::NotTheServer;
    }
    match () {
        _ if missing => Class::Absent,
        _ if refusal && (server.refuses)(answer) => Class::Refused,
        _ => Class::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NPM_LIKE: Server<'static> = Server {
        refusals: &[401, 403],
        own: &json_object,
        refuses: &any,
        exists: &says_exists,
    };

    fn answer(status: u16, body: &str) -> Class {
        classify(
            &Answer {
                status,
                headers: None,
                body: body.as_bytes(),
            },
            &NPM_LIKE,
        )
    }

    #[test]
    fn each_answer_is_one_class() {
        assert_eq!(answer(201, ""), Class::Done);
        assert_eq!(answer(403, r#"{"error":"forbidden"}"#), Class::Refused);
        assert_eq!(answer(401, r#"{"error":"unauthorized"}"#), Class::Refused);
        assert_eq!(answer(403, "<html>SSO</html>"), Class::NotTheServer);
        assert_eq!(
            answer(
                403,
                r#"{"error":"cannot publish over the previously published versions"}"#
            ),
            Class::Conflict
        );
        assert_eq!(answer(409, "File already exists"), Class::Conflict);
        assert_eq!(answer(404, r#"{"error":"not_found"}"#), Class::Absent);
        assert_eq!(answer(404, "<html>404</html>"), Class::NotTheServer);
        assert_eq!(answer(500, r#"{"error":"x"}"#), Class::Failed);
        assert_eq!(answer(409, "{}"), Class::Failed);
    }
}
