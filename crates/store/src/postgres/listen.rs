//! Changes another replica made, heard at once: `LISTEN` on a connection of its own (never a
//! pooled one, whose session a pooler could hand to someone else), and a counter that moves
//! with every notice. A notice is only a hint to read the store again: after the connection is
//! lost and made again the counter moves too, since notices sent meanwhile are gone, and the
//! gateway's once-a-second look at the change mark stays as the backstop.

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{oneshot, watch};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{AsyncMessage, Config, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

/// The channel changes are announced on.
pub(super) const CHANNEL: &str = "sandgate_changes";

/// Listens until `stop` fires (the store is dropped), reconnecting with a growing wait.
pub(super) async fn listen(
    config: Config,
    tls: Option<MakeRustlsConnect>,
    changes: watch::Sender<u64>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut wait = Duration::from_millis(100);
    loop {
        let session = async {
            match &tls {
                Some(tls) => session(&config, tls.clone(), &changes).await,
                None => session(&config, tokio_postgres::NoTls, &changes).await,
            }
        };
        tokio::select! {
            _ = &mut stop => return,
            ended = session => {
                match ended {
                    Ok(()) => wait = Duration::from_millis(100),
                    Err(e) => tracing::debug!("listening for changes stopped, trying again in {wait:?}: {e}"),
                }
            }
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(Duration::from_secs(5));
    }
}

/// One connection's life: LISTEN, say that everything may have changed, then pass on every
/// notice until the connection ends.
async fn session<T>(
    config: &Config,
    tls: T,
    changes: &watch::Sender<u64>,
) -> Result<(), tokio_postgres::Error>
where
    T: MakeTlsConnect<Socket>,
    T::Stream: Send + 'static,
{
    let (client, mut connection) = config.connect(tls).await?;
    let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
    let statement = format!("LISTEN {CHANNEL}");
    let listening = client.batch_execute(&statement);
    tokio::pin!(listening);
    // The connection is driven by reading its messages; LISTEN is answered through it.
    loop {
        tokio::select! {
            done = &mut listening => {
                done?;
                break;
            }
            message = messages.next() => match message {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
        }
    }
    changes.send_modify(|n| *n += 1);
    while let Some(message) = messages.next().await {
        if let AsyncMessage::Notification(_) = message? {
            changes.send_modify(|n| *n += 1);
        }
    }
    Ok(())
}
