//! What run A uploads for a carrier: the project, version and file name
//! (which run B derives too) and the distribution itself, an sdist or
//! (for `file-name`) a wheel.

use super::{Pypi, Upload};
use crate::nonce::Nonce;
use crate::surface::RunCtx;

pub(super) fn upload_for(ctx: &RunCtx<'_>, carrier: Pypi, nonce: &Nonce) -> Upload {
    let project = crate::surface::tagged_name(
        ctx,
        carrier.name(),
        (carrier == Pypi::ProjectName).then_some(nonce),
        "",
    );
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
