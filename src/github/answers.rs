//! What GitHub's answers mean: the rules of its REST API and of its Twirp
//! services ([`REST`], [`TWIRP`]) that [`crate::http::answer`] reads them
//! by, and whether an error answer is GitHub's own ([`from_github`]).

use crate::http::answer::{self, Answer as Said, Server};
use serde_json::Value;

/// How GitHub's REST API answers ([`crate::http::answer`]):
/// - its access control refuses with 403 (a 401 is the token not
///   accepted: an error);
/// - an answer is GitHub's own with its JSON error body (`message` and
///   `documentation_url`) or its `x-github-request-id` ([`from_github`]): a
///   gateway's `{"message":"Forbidden"}` in front of it says nothing of
///   what the token may do;
/// - a 403 of its own refuses the token a permission only when its message
///   says so ([`missing_permission`]): SAML enforcement, an IP allow list
///   or a feature that is off (code scanning without GitHub Code Security)
///   close nothing the token could open. (Rate limits are told apart
///   before: `Api::call_url`.)
pub const REST: Server<'static> = Server {
    refusals: &[403],
    own: &githubs_answer,
    refuses: &refuses_permission,
    exists: &answer::none,
};

/// How a Twirp service of GitHub's (the Actions cache's, the results
/// service's) answers: its access control refuses with 403 and Twirp's
/// `code: permission_denied`; every error of its own is Twirp's JSON error
/// body (an object with a string `code`), so a 403 without one is a
/// proxy's or a firewall's; a 401 is the runtime token not accepted.
pub const TWIRP: Server<'static> = Server {
    refusals: &[403],
    own: &twirp_body,
    refuses: &|a: &Said<'_>| twirp_code(a).as_deref() == Some("permission_denied"),
    exists: &answer::none,
};

/// The `code` of a Twirp error body.
pub fn twirp_code(a: &Said<'_>) -> Option<String> {
    a.json()
        .filter(Value::is_object)?
        .get("code")?
        .as_str()
        .map(str::to_string)
}

fn twirp_body(a: &Said<'_>) -> bool {
    twirp_code(a).is_some()
}

fn githubs_answer(a: &Said<'_>) -> bool {
    let body = a.json();
    match a.headers {
        Some(h) => from_github(h, body.as_ref()),
        None => from_github(&::http::HeaderMap::new(), body.as_ref()),
    }
}

fn refuses_permission(a: &Said<'_>) -> bool {
    a.json()
        .and_then(|v| v["message"].as_str().map(missing_permission))
        .unwrap_or(false)
}

/// Whether GitHub's message is the one it gives a token that lacks a
/// permission ("Resource not accessible by integration", or "… by
/// personal access token"), in a REST 403 or a GraphQL `FORBIDDEN`.
pub fn missing_permission(message: &str) -> bool {
    message.contains("Resource not accessible by")
}

/// Whether an error answer is GitHub's own: its JSON error body carries a
/// `message` and GitHub's `documentation_url`, or the response GitHub's
/// `x-github-request-id`. A gateway in front (an API Gateway's or a
/// CloudFront's `{"message":"Forbidden"}`) has neither, and its 403 says
/// nothing of what the token may do.
pub fn from_github(headers: &::http::HeaderMap, body: Option<&Value>) -> bool {
    let message = body.is_some_and(|v| v["message"].is_string());
    let documented = body.is_some_and(|v| v["documentation_url"].is_string());
    message && (documented || headers.contains_key("x-github-request-id"))
}
