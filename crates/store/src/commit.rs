//! A write on its way to the store, which a response waits for before it names what it wrote.

use tokio::sync::oneshot;

use crate::error::StoreError;

/// An output on its way to the store.
#[derive(Debug)]
#[must_use = "a response names an output only once it is committed"]
pub struct Commit(pub(crate) oneshot::Receiver<Result<(), StoreError>>);

impl Commit {
    /// A write already done, with its outcome.
    pub fn finished(outcome: Result<(), StoreError>) -> Commit {
        let (reply, answer) = oneshot::channel();
        let _ = reply.send(outcome);
        Commit(answer)
    }

    /// Waits until the write is done, and says whether it succeeded.
    pub async fn committed(self) -> Result<(), StoreError> {
        self.0.await.map_err(|_| StoreError::Closed)?
    }
}
