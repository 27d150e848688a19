//! What run A uploads for a carrier: the project, version and file name
//! (which run B derives too) and the distribution itself, an sdist or
//! (for `file-name`) a wheel.

use super::protocol::{INDEX, excerpt};
use super::{Entry, Pypi, PypiIndex, Upload};
use crate::escape;
use crate::http::answer::{self, Class};
use crate::nonce::Nonce;
use crate::surface::RunCtx;
use crate::surface::witness::{self, Side};
use crate::surface::{Journal, PlantOutcome};

/// The route the witnesses stand in: a project's pages read by its name
/// (its simple page, and `json-url`'s metadata, whose miss the simple page
/// decides).
pub(super) const PROJECT: &str = "project";

/// The project of the project route's witness on `side`.
pub(super) fn witness_project(ctx: &RunCtx<'_>, side: Side) -> String {
    witness::name(ctx, PROJECT, side, "")
}

/// What the project route's witness on `side` uploads: an sdist of version
/// `0.0.0` that carries no nonce (as a project-name plant's, under the
/// witness's name).
pub(super) fn witness_upload(ctx: &RunCtx<'_>, side: Side) -> Upload {
    let none = Nonce::from_hex(&"0".repeat(32)).expect("32 hex digits");
    upload_as(ctx, witness_project(ctx, side), Pypi::ProjectName, &none)
}

/// What a carrier's plant uploads.
pub(super) fn upload_for(ctx: &RunCtx<'_>, carrier: Pypi, nonce: &Nonce) -> Upload {
    let project = crate::surface::tagged_name(
        ctx,
        carrier.name(),
        (carrier == Pypi::ProjectName).then_some(nonce),
        "",
    );
    upload_as(ctx, project, carrier, nonce)
}

/// What a plant of `carrier` uploads as `project`.
fn upload_as(ctx: &RunCtx<'_>, project: String, carrier: Pypi, nonce: &Nonce) -> Upload {
    let version = if carrier == Pypi::Version {
        format!("0.0.0+{}", nonce.hex())
    } else {
        "0.0.0".to_string()
    };
    let mut description = format!("runwarden plant, probe {}\n", ctx.probe_id);
    if carrier == Pypi::Description {
        description += &format!("{}\n", nonce.hex());
    }
    let pkg_info = format!(
        "Metadata-Version: 2.1\nName: {project}\nVersion: {version}\nSummary: runwarden plant\n\n{description}"
    );
    let dist = project.replace('-', "_");
    if carrier == Pypi::FileName {
        // A build tag must start with a digit.
        let file = format!("{dist}-{version}-1{}-py3-none-any.whl", nonce.hex());
        let info = format!("{dist}-{version}.dist-info");
        let wheel =
            "Wheel-Version: 1.0\nGenerator: runwarden\nRoot-Is-Purelib: true\nTag: py3-none-any\n";
        let record = format!("{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n");
        let data = crate::archive::zip_stored(&[
            (&format!("{info}/METADATA"), pkg_info.as_bytes()),
            (&format!("{info}/WHEEL"), wheel.as_bytes()),
            (&format!("{info}/RECORD"), record.as_bytes()),
        ]);
        return Upload {
            project,
            version,
            file,
            data,
            filetype: "bdist_wheel",
            pyversion: "py3",
            description,
        };
    }
    let file = format!("{dist}-{version}.tar.gz");
    let data = crate::archive::tgz(&[(&format!("{dist}-{version}/PKG-INFO"), pkg_info.as_bytes())]);
    Upload {
        project,
        version,
        file,
        data,
        filetype: "sdist",
        pyversion: "source",
        description,
    }
}

impl PypiIndex {
    /// One upload, as twine sends it: journalled before the request and
    /// taken back only when the index's answer says nothing was uploaded;
    /// the plant's outcome when it was not.
    pub(super) fn put(
        &self,
        u: &Upload,
        journal: &mut Journal<'_, Entry>,
    ) -> Result<(), PlantOutcome<Nonce>> {
        let entry = Entry {
            project: u.project.clone(),
            version: u.version.clone(),
            files: vec![u.file.clone()],
        };
        journal.record(&entry);
        let shown = escape::bytes(u.file.as_bytes());
        let upload = self.upload(u);
        // A 4xx says nothing was uploaded; a 5xx may come after it was
        // (a gateway's), so the entry stays journalled.
        if upload
            .as_ref()
            .is_ok_and(|r| (400..500).contains(&r.status))
        {
            journal.retract(&entry);
        }
        match upload {
            Err(f) => Err(PlantOutcome::Error { reason: f.into() }),
            // (A file that exists is a conflict: protocol::INDEX.)
            Ok(r) if answer::classify(&(&r).into(), &INDEX) == Class::Refused => {
                Err(PlantOutcome::Refused {
                    reason: format!(
                        "the index refused the upload (HTTP {}: {})",
                        r.status,
                        excerpt(&r.body)
                    ),
                })
            }
            Ok(r) if (200..300).contains(&r.status) => Ok(()),
            Ok(r) => Err(PlantOutcome::Error {
                reason: format!("uploading {shown}: HTTP {} {}", r.status, excerpt(&r.body)),
            }),
        }
    }
}
