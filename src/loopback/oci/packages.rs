//! GitHub's packages API as ghcr.io's registry backs it, served beside
//! the loopback registry: a package is a repository `<owner>/<name>`, a
//! version one manifest digest.

use super::{Reply, State, query};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// `GET /{orgs,users}/{owner}/packages/container/{name}/versions`, one
/// version per manifest digest with the tags on it in
/// `metadata.container.tags`, newest first, paged by `per_page`/`page`
/// with `Link`; and `DELETE …/versions/{id}`, GitHub's delete of a
/// package version (204; the manifest goes with every tag on it), for a
/// token that may delete ([`super::OciServer::api_deleter`]; another gets
/// 403). A token that may not read packages gets GitHub's 403 (`Resource
/// not accessible by integration`), none at all a 401, an unknown package
/// or version a 404, all with GitHub's JSON error body. The owner is
/// taken as an organization and as a user alike.
pub(super) fn serve(
    st: &mut State,
    method: &str,
    path: &str,
    url: &str,
    auth: &str,
    port: u16,
) -> Reply {
    let gh = |status: u16, m: &str| {
        Reply::json(
            status,
            json!({ "message": m, "documentation_url": "https://docs.github.com/rest", "status": status.to_string() }),
        )
    };
    let token = auth
        .strip_prefix("Bearer ")
        .or_else(|| auth.strip_prefix("token "));
    match token.map(|t| st.api_tokens.get(t)) {
        None | Some(None) => return gh(401, "Bad credentials"),
        Some(Some(false)) => return gh(403, "Resource not accessible by integration"),
        Some(Some(true)) => {}
    }
    let parts: Vec<&str> = path.split('/').collect();
    let (owner, name, version) = match parts.as_slice() {
        [
            "",
            "orgs" | "users",
            owner,
            "packages",
            "container",
            name,
            "versions",
        ] => (*owner, *name, None),
        [
            "",
            "orgs" | "users",
            owner,
            "packages",
            "container",
            name,
            "versions",
            id,
        ] => (*owner, *name, Some(*id)),
        _ => return gh(404, "Not Found"),
    };
    match (method, version) {
        ("GET", None) => {}
        ("DELETE", Some(id)) => {
            let may = token.is_some_and(|t| st.api_deleters.contains(t));
            if !may {
                return gh(403, "Resource not accessible by integration");
            }
            return delete(
                st,
                &format!("{owner}/{}", crate::wire::percent_decode(name)),
                id,
            );
        }
        _ => return gh(404, "Not Found"),
    }
    let repo = format!("{owner}/{}", crate::wire::percent_decode(name));
    let Some(r) = st
        .repos
        .get(&repo)
        .filter(|r| st.lag_after.is_none_or(|l| r.seq <= l))
    else {
        return gh(404, "Package not found.");
    };
    let items: Vec<Value> = versions(st, r)
        .iter()
        .map(|(d, (seq, tags))| {
            json!({ "id": seq, "name": d, "metadata": { "package_type": "container", "container": { "tags": tags } } })
        })
        .collect();
    let q = query(url);
    let per: usize = q
        .get("per_page")
        .and_then(|n| n.parse().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let page: usize = q
        .get("page")
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
        .max(1);
    let shown: Vec<Value> = items
        .iter()
        .skip((page - 1) * per)
        .take(per)
        .cloned()
        .collect();
    let body = Value::Array(shown).to_string().into_bytes();
    if items.len() > page * per {
        let next = format!(
            "<http://127.0.0.1:{port}{path}?per_page={per}&page={}>; rel=\"next\"",
            page + 1
        );
        return Reply::new(
            200,
            body,
            &[("Content-Type", "application/json"), ("Link", &next)],
        );
    }
    Reply::new(200, body, &[("Content-Type", "application/json")])
}

/// A package's versions, newest first: digest -> (its newest tag's seq,
/// which is its id, and its tags); only tagged manifests, and only what
/// the lag shows.
fn versions<'r>(st: &State, r: &'r super::Repo) -> Vec<(&'r String, (u64, Vec<&'r String>))> {
    let mut by: BTreeMap<&String, (u64, Vec<&String>)> = BTreeMap::new();
    for (tag, (d, seq)) in &r.tags {
        if st.lag_after.is_none_or(|n| *seq <= n) {
            let e = by.entry(d).or_default();
            e.0 = e.0.max(*seq);
            e.1.push(tag);
        }
    }
    let mut versions: Vec<(&String, (u64, Vec<&String>))> = by.into_iter().collect();
    versions.sort_by_key(|(_, (seq, _))| std::cmp::Reverse(*seq));
    versions
}

/// `DELETE …/versions/{id}` of the package `repo`: the manifest of that
/// version and every tag on it go (204), as GitHub deletes a version.
fn delete(st: &mut State, repo: &str, id: &str) -> Reply {
    let gh404 = || {
        Reply::json(
            404,
            json!({ "message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404" }),
        )
    };
    let Some(r) = st.repos.get(repo) else {
        return gh404();
    };
    let digest = versions(st, r)
        .into_iter()
        .find(|(_, (seq, _))| seq.to_string() == id)
        .map(|(d, _)| d.clone());
    let (Some(d), Some(r)) = (digest, st.repos.get_mut(repo)) else {
        return gh404();
    };
    r.manifests.remove(&d);
    r.tags.retain(|_, (t, _)| *t != d);
    Reply::empty(204)
}
