//! Pub/sub through the `fred` crate: the subscriber connection release
//! watches listen on (classic channels, or sharded ones on a cluster).

use super::*;

/// A subscriber connection through the `fred` crate. fred re-subscribes to
/// every channel after a reconnect.
pub(crate) struct FredSubscriber {
    client: FredSubscriberClient,
    address: String,
    /// How long a SUBSCRIBE may wait for its confirmation: a refusal
    /// (`NOPERM` for a user without channels) never completes the call.
    command_timeout: Duration,
    /// A cluster client that subscribes with `SSUBSCRIBE` on each
    /// channel's master.
    sharded: bool,
}

debug_shows_address!(FredSubscriber);

impl Drop for FredSubscriber {
    fn drop(&mut self) {
        let client = self.client.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = client.quit().await;
            });
        }
    }
}

pub(in crate::server::client) async fn connect_subscriber(
    endpoint: &Endpoint,
    options: ConnectOptions,
    sharded: bool,
) -> Result<(Arc<dyn SubscriberClient>, MessageReceiver), LockError> {
    let address = endpoint.address();
    let client = if sharded {
        connect_sharded_subscriber(endpoint, options).await?
    } else {
        connect_classic_subscriber(endpoint, options).await?
    };
    let _resubscribe = client.manage_subscriptions();
    let mut messages = client.message_rx();
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let received = tokio::select! {
                received = messages.recv() => received,
                () = sender.closed() => break,
            };
            match received {
                Ok(message) => {
                    let payload = message.value.as_string().unwrap_or_default();
                    let delivery = Delivery::Message(message.channel.to_string(), payload);
                    if sender.send(delivery).is_err() {
                        break;
                    }
                }
                // Missed messages only delay waiters until their fallback timer.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });
    let subscriber = FredSubscriber {
        client,
        address,
        command_timeout: options.command_timeout,
        sharded,
    };
    Ok((Arc::new(subscriber), receiver))
}

/// A cluster subscriber: fred sends each `SSUBSCRIBE` to the master of the
/// channel's slot and waits for the server's confirmation. fred does not pass
/// on a `SUNSUBSCRIBE` the server sends when a slot moves; the waiter's
/// timer then subscribes again ([`SubscriberClient::subscribe`]).
async fn connect_sharded_subscriber(
    endpoint: &Endpoint,
    options: ConnectOptions,
) -> Result<FredSubscriberClient, LockError> {
    let address = endpoint.address();
    let mut builder = builder(config(endpoint)?, options);
    // Subscribing twice is harmless, so a `SSUBSCRIBE` whose connection
    // broke may be sent again, unlike a script.
    builder.with_connection_config(|connection| connection.max_command_attempts = 3);
    let client = builder
        .build_subscriber_client()
        .map_err(|err| map_error(&address, options.command_timeout, err))?;
    if let Err(err) = client.init().await {
        let _ = client.quit().await;
        return Err(map_error(&address, options.command_timeout, err));
    }
    Ok(client)
}

/// A subscriber on one server: the first seed of a cluster that answers (a
/// classic message reaches every node of a cluster), or the master of a
/// sentinel group.
async fn connect_classic_subscriber(
    endpoint: &Endpoint,
    options: ConnectOptions,
) -> Result<FredSubscriberClient, LockError> {
    let address = endpoint.address();
    // A cluster's messages reach every node, and a subscriber's PING (which
    // confirms its SUBSCRIBE) must reach the same connection: subscribe on
    // one node, the first seed that answers.
    let candidates: Vec<Endpoint> = match endpoint.topology {
        Topology::Cluster => endpoint
            .nodes
            .iter()
            .map(|node| Endpoint::standalone(node.clone()).with_tls(endpoint.tls.clone()))
            .collect(),
        Topology::Standalone | Topology::Sentinel => vec![endpoint.clone()],
    };
    let mut last_error = None;
    let mut connected = None;
    for candidate in &candidates {
        let client = builder(config(candidate)?, options)
            .build_subscriber_client()
            .map_err(|err| map_error(&address, options.command_timeout, err))?;
        match client.init().await {
            Ok(_) => {
                connected = Some(client);
                break;
            }
            Err(err) => {
                let _ = client.quit().await;
                last_error = Some(map_error(
                    &candidate.address(),
                    options.command_timeout,
                    err,
                ));
            }
        }
    }
    connected.ok_or_else(|| {
        last_error.unwrap_or_else(|| LockError::config("nodes", "at least one node URL is needed"))
    })
}

#[async_trait]
impl SubscriberClient for FredSubscriber {
    fn address(&self) -> &str {
        &self.address
    }

    async fn subscribe(&self, channel: &str) -> Result<(), LockError> {
        if self.sharded {
            // fred waits for the server's reply to SSUBSCRIBE (a refusal is
            // an error) and tracks the channel only once it is confirmed.
            // Sent again for a channel already subscribed, it reaches the
            // slot's master of now: that is how a moved slot is followed.
            //
            // fred fails a command that meets `MOVED` ("Too many failed
            // write attempts", whatever `max_command_attempts` says) after
            // it refreshed its slot map, so one more try reaches the new
            // master.
            let subscribed = async {
                match self.client.ssubscribe(channel).await {
                    Err(err) if err.details().contains("failed write attempts") => {
                        self.client.ssubscribe(channel).await
                    }
                    other => other,
                }
            };
            return match tokio::time::timeout(self.command_timeout, subscribed).await {
                Ok(result) => result.map_err(|err| map_error(&self.address, Duration::ZERO, err)),
                Err(_) => Err(LockError::Timeout {
                    node: self.address.clone(),
                    after: self.command_timeout,
                }),
            };
        }
        // fred answers SUBSCRIBE as soon as it is written, before the server
        // has run it. A PING on the same connection is answered after the
        // SUBSCRIBE ran, so the waiter's next attempt comes after the
        // subscription and a release in between is not missed.
        //
        // The reply also tells a refused SUBSCRIBE (`NOPERM`, which fred drops):
        // in RESP2 a connection in subscribed mode answers PING with the array
        // `["pong", ""]`, one that is not with the status `PONG`.
        let confirmed = async {
            self.client.subscribe(channel).await?;
            self.client.ping::<fred::types::Value>(None).await
        };
        let result = match tokio::time::timeout(self.command_timeout, confirmed).await {
            Ok(Ok(fred::types::Value::Array(_))) => return Ok(()),
            // Told apart from a reconnect in between only by its rarity: both
            // back off, and waiters poll meanwhile.
            Ok(Ok(_)) => Err(LockError::PermissionDenied {
                node: self.address.clone(),
                needs: crate::error::AclNeed::Channels,
                message: format!(
                    "the subscription to `{channel}` was not confirmed: the server refused it \
                     (NOPERM, which fred does not pass on), or the connection was \
                     re-established meanwhile"
                ),
            }),
            Ok(Err(err)) => Err(map_error(&self.address, Duration::ZERO, err)),
            Err(_) => Err(LockError::Timeout {
                node: self.address.clone(),
                after: self.command_timeout,
            }),
        };
        // fred tracks the channel from the moment it wrote SUBSCRIBE and would
        // subscribe to it again after every reconnect, refused or not.
        let _ = tokio::time::timeout(self.command_timeout, self.client.unsubscribe(channel)).await;
        result
    }

    async fn unsubscribe(&self, channel: &str) -> Result<(), LockError> {
        let unsubscribed = if self.sharded {
            self.client.sunsubscribe(channel).await
        } else {
            self.client.unsubscribe(channel).await
        };
        unsubscribed.map_err(|err| map_error(&self.address, Duration::ZERO, err))
    }
}
