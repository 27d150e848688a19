//! The artifact results service (v4): Twirp JSON with the runtime token,
//! and the Azure block blobs its signed URLs point at.

use super::{Artifact, Reply, State};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

pub const TWIRP: &str = "/twirp/github.actions.results.api.v1.ArtifactService/";
pub const BLOB: &str = "/artifact-blobs/";

/// `sha256:<hex>`, as FinalizeArtifact sends and the REST API lists.
pub fn digest(data: &[u8]) -> String {
    format!("sha256:{}", crate::nonce::to_hex(&Sha256::digest(data)))
}

fn twirp_error(status: u16, code: &str, msg: &str) -> Reply {
    Reply::json(status, json!({ "code": code, "msg": msg }))
}

/// A request field by its proto name or its JSON (camelCase) name.
fn field<'a>(body: &'a Value, proto: &str, camel: &str) -> &'a Value {
    if body[proto].is_null() {
        &body[camel]
    } else {
        &body[proto]
    }
}

fn text(body: &Value, proto: &str, camel: &str) -> String {
    field(body, proto, camel)
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// int64 fields arrive as decimal strings (or numbers).
fn int(body: &Value, proto: &str, camel: &str) -> Option<u64> {
    let v = field(body, proto, camel);
    v.as_str().and_then(|s| s.parse().ok()).or(v.as_u64())
}

/// The characters `@actions/artifact` refuses in a name.
const BAD_NAME: &[char] = &['"', ':', '<', '>', '|', '*', '?', '\r', '\n', '\\', '/'];

fn signed_url(st: &State, port: u16, id: u64) -> String {
    format!(
        "http://127.0.0.1:{port}{BLOB}{id}?sv=2025-01-05&sr=b&sig={}",
        st.sig
    )
}

/// The workflow run a runtime token belongs to.
struct Run {
    /// Its backend id, from the token's `scp` claim.
    backend: String,
    /// The job's backend id, from the same claim.
    job: String,
    repo: String,
    id: u64,
}

/// The run of a runtime token minted here, or the Twirp error that
/// refuses it.
fn runtime_run(st: &State, auth: &str) -> Result<Run, Reply> {
    // The runtime token: minted here (signature), with backend ids.
    let token = auth.strip_prefix("Bearer ").unwrap_or("");
    let ids = (token.rsplit('.').next() == Some(st.token_sig.as_str()))
        .then(|| crate::wire::jwt_backend_ids(token))
        .flatten();
    let Some((run, job)) = ids else {
        return Err(twirp_error(
            401,
            "unauthenticated",
            "no valid runtime token",
        ));
    };
    let Some((repo, run_id)) = st.runs.get(&run).cloned() else {
        return Err(twirp_error(401, "unauthenticated", "unknown workflow run"));
    };
    Ok(Run {
        backend: run,
        job,
        repo,
        id: run_id,
    })
}

pub fn twirp(st: &mut State, rpc: &str, auth: &str, body: &[u8], port: u16) -> Reply {
    let run = match runtime_run(st, auth) {
        Ok(run) => run,
        Err(reply) => return reply,
    };
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return twirp_error(400, "malformed", "the body is not JSON");
    };
    let (req_run, req_job) = (
        text(&body, "workflow_run_backend_id", "workflowRunBackendId"),
        text(
            &body,
            "workflow_job_run_backend_id",
            "workflowJobRunBackendId",
        ),
    );
    // The ids a request names must be the token's own run (a job may read
    // and delete its run's artifacts, not another run's).
    if req_run != run.backend || (rpc == "CreateArtifact" && req_job != run.job) {
        return twirp_error(
            403,
            "permission_denied",
            "the backend ids are not the token's run",
        );
    }
    let name = text(&body, "name", "name");
    match rpc {
        "CreateArtifact" => create_artifact(st, run, name, port),
        "FinalizeArtifact" => finalize_artifact(st, &run, &name, &body),
        "ListArtifacts" => list_artifacts(st, &run, &body),
        "GetSignedArtifactURL" => {
            match st
                .artifacts
                .iter()
                .find(|a| a.finalized && a.run_backend == run.backend && a.name == name)
            {
                Some(a) => Reply::json(200, json!({ "signed_url": signed_url(st, port, a.id) })),
                None => twirp_error(404, "not_found", "no such artifact"),
            }
        }
        "DeleteArtifact" => {
            let Some(i) = st
                .artifacts
                .iter()
                .position(|a| a.finalized && a.run_backend == run.backend && a.name == name)
            else {
                return twirp_error(404, "not_found", "no such artifact");
            };
            let a = st.artifacts.remove(i);
            Reply::json(200, json!({ "ok": true, "artifact_id": a.id.to_string() }))
        }
        _ => twirp_error(404, "bad_route", rpc),
    }
}

/// `CreateArtifact`: a pending artifact of the run (names are unique per
/// run), and the signed URL its blob goes to.
fn create_artifact(st: &mut State, run: Run, name: String, port: u16) -> Reply {
    if name.is_empty() || name.contains(BAD_NAME) {
        return twirp_error(400, "invalid_argument", "invalid artifact name");
    }
    if st
        .artifacts
        .iter()
        .any(|a| a.run_backend == run.backend && a.name == name)
    {
        return twirp_error(
            409,
            "already_exists",
            "an artifact with this name already exists on the workflow run",
        );
    }
    let id = st.next_id();
    st.artifacts.push(Artifact {
        id,
        repo: run.repo,
        run_id: run.id,
        run_backend: run.backend,
        job_backend: run.job,
        name,
        data: None,
        blocks: HashMap::new(),
        digest: None,
        finalized: false,
    });
    Reply::json(
        200,
        json!({ "ok": true, "signed_upload_url": signed_url(st, port, id) }),
    )
}

/// `FinalizeArtifact`: the pending artifact is final if its blob has the
/// size (and the hash, if named) the client names.
fn finalize_artifact(st: &mut State, run: &Run, name: &str, body: &Value) -> Reply {
    let size = int(body, "size", "size").unwrap_or(0);
    let hash = text(body, "hash", "hash");
    let Some(a) = st
        .artifacts
        .iter_mut()
        .find(|a| a.run_backend == run.backend && a.name == name && !a.finalized)
    else {
        return twirp_error(404, "not_found", "no such pending artifact");
    };
    let data = a.data.clone().unwrap_or_default();
    if data.len() as u64 != size {
        return twirp_error(400, "invalid_argument", "size does not match the upload");
    }
    if !hash.is_empty() && hash != digest(&data) {
        return twirp_error(400, "invalid_argument", "hash does not match the upload");
    }
    a.finalized = true;
    a.digest = Some(digest(&data));
    Reply::json(200, json!({ "ok": true, "artifact_id": a.id.to_string() }))
}

/// `ListArtifacts`: the run's finalized artifacts, by name or id if asked.
fn list_artifacts(st: &State, run: &Run, body: &Value) -> Reply {
    let name_filter = field(body, "name_filter", "nameFilter").as_str();
    let id_filter = int(body, "id_filter", "idFilter");
    let list: Vec<Value> = st
        .artifacts
        .iter()
        .filter(|a| a.finalized && a.run_backend == run.backend)
        .filter(|a| name_filter.is_none_or(|n| a.name == n))
        .filter(|a| id_filter.is_none_or(|i| a.id == i))
        .map(|a| {
            json!({
                "workflow_run_backend_id": a.run_backend,
                "workflow_job_run_backend_id": a.job_backend,
                "database_id": a.id.to_string(),
                "name": a.name,
                "size": a.data.as_ref().map(Vec::len).unwrap_or(0).to_string(),
                "created_at": "2026-11-30T00:00:00Z",
                "digest": a.digest,
            })
        })
        .collect();
    Reply::json(200, json!({ "artifacts": list }))
}

/// Azure's answer to a blob write.
fn created() -> Reply {
    Reply::raw(201, "application/octet-stream", vec![])
        .with("ETag", "\"0x8DCSTANDIN\"")
        .with("Last-Modified", "Mon, 30 Nov 2026 00:00:00 GMT")
        .with("x-ms-request-id", "00000000-0000-0000-0000-000000000000")
        .with("x-ms-version", "2025-01-05")
        .with("x-ms-request-server-encrypted", "true")
        .with("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg==")
}

/// The block ids of a Put Block List body, in order.
fn block_list(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    let mut ids = vec![];
    let mut rest = text.as_ref();
    while let Some(start) = rest.find('>') {
        rest = &rest[start + 1..];
        let Some(end) = rest.find('<') else { break };
        let id = rest[..end].trim();
        if !id.is_empty() {
            ids.push(id.to_string());
        }
        rest = &rest[end..];
    }
    ids
}

pub fn blob(
    st: &mut State,
    method: &str,
    id: &str,
    url: &str,
    blob_type: Option<&str>,
    body: Vec<u8>,
) -> Reply {
    let q = super::super::query(url);
    if q.get("sig") != Some(&st.sig) {
        return Reply::raw(403, "application/xml", b"AuthenticationFailed".to_vec());
    }
    let Some(a) = id
        .parse::<u64>()
        .ok()
        .and_then(|id| st.artifacts.iter_mut().find(|a| a.id == id))
    else {
        return Reply::raw(404, "application/xml", b"BlobNotFound".to_vec());
    };
    match (method, q.get("comp").map(String::as_str)) {
        ("PUT", _) if a.finalized => Reply::raw(409, "application/xml", b"BlobImmutable".to_vec()),
        ("PUT", Some("block")) => match q.get("blockid") {
            Some(b) => {
                a.blocks.insert(b.clone(), body);
                created()
            }
            None => Reply::raw(400, "application/xml", b"MissingBlockId".to_vec()),
        },
        ("PUT", Some("blocklist")) => {
            let mut data = vec![];
            for b in block_list(&body) {
                match a.blocks.get(&b) {
                    Some(part) => data.extend_from_slice(part),
                    None => {
                        return Reply::raw(400, "application/xml", b"InvalidBlockList".to_vec());
                    }
                }
            }
            a.blocks.clear();
            a.data = Some(data);
            created()
        }
        ("PUT", None) if blob_type == Some("BlockBlob") => {
            a.data = Some(body);
            created()
        }
        ("GET", _) if a.finalized => {
            Reply::raw(200, "application/zip", a.data.clone().unwrap_or_default())
        }
        _ => Reply::raw(404, "application/xml", b"BlobNotFound".to_vec()),
    }
}
