//! Errors of the persistence layer.

use std::path::PathBuf;

/// Everything that can go wrong reading or writing under a home.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The home directory itself is gone; writers never recreate it.
    #[error("home directory {path} does not exist; create it first or point HERD_HOME elsewhere")]
    HomeMissing { path: PathBuf },
    /// A directory under the home could not be created or secured.
    #[error("failed to create directory {path}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A path outside the home was passed where one under it was required.
    #[error("{path} is not under the home {home}")]
    OutsideHome { path: PathBuf, home: PathBuf },
}
