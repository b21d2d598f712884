//! The CLI's side of transfers: a progress bar the client library reports
//! to. Connections, transfers and error classification are the library's
//! (`bloomkit_client::transfer`), so library users get the same.

use bloomkit_client::transfer::Progress;
use indicatif::ProgressBar;

/// A progress bar the library's transfers report to.
pub struct Bar<'a>(pub &'a ProgressBar);

impl Progress for Bar<'_> {
    fn set_length(&self, bytes: u64) {
        self.0.set_length(bytes);
    }

    fn inc(&self, bytes: u64) {
        self.0.inc(bytes);
    }
}
