//! Changes another replica made, heard at once: `LISTEN` on a connection of its own (never a
//! pooled one, whose session a pooler could hand to someone else), and a counter that moves
//! with every notice. A notice is only a hint to read the store again: after the connection is
//! lost and made again the counter moves too, since notices sent meanwhile are gone, and the
//! gateway's once-a-second look at the change mark stays as the backstop.
//!
//! Events go on a second channel, and are passed on as [`Notice`]s: a session ended on some
//! replica. They are best effort too: a session's end is also found by the periodic look
//! (`sessions::keep_sessions`). Finished executions are not announced (thousands a second
//! would each take PostgreSQL's notification lock at commit, and reach every replica whether
//! or not a console watches): the console reads them from the store.

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{broadcast, oneshot, watch};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{AsyncMessage, Config, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::notice::{CHANNEL, EVENTS, Notice};

/// Listens until `stop` fires (the store is dropped), reconnecting with a growing wait.
pub(super) async fn listen(
    config: Config,
    tls: Option<MakeRustlsConnect>,
    changes: watch::Sender<u64>,
    notices: broadcast::Sender<Notice>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut wait = Duration::from_millis(100);
    loop {
        let session = async {
            match &tls {
                Some(tls) => session(&config, tls.clone(), &changes, &notices).await,
                None => session(&config, tokio_postgres::NoTls, &changes, &notices).await,
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
    notices: &broadcast::Sender<Notice>,
) -> Result<(), tokio_postgres::Error>
where
    T: MakeTlsConnect<Socket>,
    T::Stream: Send + 'static,
{
    let (client, mut connection) = config.connect(tls).await?;
    let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
    let statement = format!("LISTEN {CHANNEL}; LISTEN {EVENTS}");
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
        if let AsyncMessage::Notification(notification) = message? {
            if notification.channel() == CHANNEL {
                changes.send_modify(|n| *n += 1);
            } else if let Some(notice) =
                Notice::read(notification.channel(), notification.payload())
            {
                // No one listening is not an error.
                let _ = notices.send(notice);
            }
        }
    }
    Ok(())
}
