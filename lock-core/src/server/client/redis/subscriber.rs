//! Pub/sub through the `redis` crate: the subscriber connection release
//! watches listen on (classic channels, or sharded ones on a cluster).

use super::*;

/// A subscriber connection through the `redis` crate.
pub(crate) struct RedisSubscriber {
    sink: Mutex<redis::aio::PubSubSink>,
    address: String,
    command_timeout: Duration,
}

debug_shows_address!(RedisSubscriber);

/// A pub/sub connection for `endpoint`: the server itself, the first seed of
/// a cluster that answers, or the master the sentinels name.
async fn open_pubsub(
    endpoint: &Endpoint,
    options: ConnectOptions,
) -> Result<redis::aio::PubSub, LockError> {
    let address = endpoint.address();
    let timeout = options.command_timeout;
    match endpoint.topology {
        Topology::Standalone | Topology::Cluster => {
            let mut last_error = None;
            for url in &endpoint.nodes {
                let client = standalone_client(endpoint, url)?;
                match client.get_async_pubsub().await {
                    Ok(pubsub) => return Ok(pubsub),
                    Err(err) => last_error = Some(map_error(&url.address(), timeout, err)),
                }
            }
            Err(last_error
                .unwrap_or_else(|| LockError::config("nodes", "at least one node URL is needed")))
        }
        Topology::Sentinel => {
            let link = SentinelLink::new(endpoint, options)?;
            let client = link
                .sentinels
                .lock()
                .await
                .async_get_client()
                .await
                .map_err(|err| map_error(&address, timeout, err))?;
            client
                .get_async_pubsub()
                .await
                .map_err(|err| map_error(&address, timeout, err))
        }
    }
}

pub(in crate::server::client) async fn connect_subscriber(
    endpoint: &Endpoint,
    options: ConnectOptions,
    sharded: bool,
) -> Result<(Arc<dyn SubscriberClient>, MessageReceiver), LockError> {
    if sharded {
        return connect_sharded_subscriber(endpoint, options).await;
    }
    let address = endpoint.address();
    let pubsub = open_pubsub(endpoint, options).await?;
    let (sink, mut stream) = pubsub.split();
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    // The stream ends when the connection is lost; dropping the sender then
    // closes the receiver, which tells the listener to stop trusting it.
    // It also ends when the receiver is dropped; dropping the stream (and the
    // sink, with the subscriber) then closes the connection.
    tokio::spawn(async move {
        loop {
            tokio::select! {
                message = stream.next() => match message {
                    Some(message) => {
                        let payload = message.get_payload::<String>().unwrap_or_default();
                        let channel = message.get_channel_name().to_owned();
                        if sender.send(Delivery::Message(channel, payload)).is_err() {
                            break;
                        }
                    }
                    None => break,
                },
                () = sender.closed() => break,
            }
        }
    });
    let subscriber = RedisSubscriber {
        sink: Mutex::new(sink),
        address,
        command_timeout: options.command_timeout,
    };
    Ok((Arc::new(subscriber), receiver))
}

/// Runs a subscriber's command within `timeout`, its error mapped as any
/// other command's.
async fn bounded<T>(
    address: &str,
    timeout: Duration,
    command: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, LockError> {
    tokio::time::timeout(timeout, command)
        .await
        .map_err(|_| LockError::Timeout {
            node: address.to_owned(),
            after: timeout,
        })?
        .map_err(|err| map_error(address, timeout, err))
}

#[async_trait]
impl SubscriberClient for RedisSubscriber {
    fn address(&self) -> &str {
        &self.address
    }

    async fn subscribe(&self, channel: &str) -> Result<(), LockError> {
        let mut sink = self.sink.lock().await;
        bounded(&self.address, self.command_timeout, sink.subscribe(channel)).await
    }

    async fn unsubscribe(&self, channel: &str) -> Result<(), LockError> {
        let mut sink = self.sink.lock().await;
        bounded(
            &self.address,
            self.command_timeout,
            sink.unsubscribe(channel),
        )
        .await
    }
}

/// A sharded subscriber through the `redis` crate: a RESP3 cluster
/// connection that sends each `SSUBSCRIBE` to the master of the channel's
/// slot (following `MOVED`) and passes every push to the listener.
struct RedisShardedSubscriber {
    connection: ClusterConnection,
    address: String,
    command_timeout: Duration,
}

debug_shows_address!(RedisShardedSubscriber);

impl RedisShardedSubscriber {
    /// Runs `command` (on a handle of the cluster connection) within the
    /// command timeout, its error mapped as any other command's.
    async fn bounded<T>(
        &self,
        command: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, LockError> {
        bounded(&self.address, self.command_timeout, command).await
    }
}

/// How many times the sharded subscriber's client sends a `SSUBSCRIBE` again
/// after a `MOVED` (it refreshes its slot map first): subscribing twice is
/// harmless, unlike running a script twice.
const SUBSCRIBE_RETRIES: u32 = 3;

async fn connect_sharded_subscriber(
    endpoint: &Endpoint,
    options: ConnectOptions,
) -> Result<(Arc<dyn SubscriberClient>, MessageReceiver), LockError> {
    let address = endpoint.address();
    let (pushes, mut pushed) = tokio::sync::mpsc::unbounded_channel::<redis::PushInfo>();
    let builder = cluster_builder(endpoint, options)?
        .retries(SUBSCRIBE_RETRIES)
        .use_protocol(redis::ProtocolVersion::RESP3)
        .push_sender(pushes);
    let connection = cluster_connection(builder, &address, options.command_timeout).await?;
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let push = tokio::select! {
                push = pushed.recv() => match push {
                    Some(push) => push,
                    None => break,
                },
                () = sender.closed() => break,
            };
            let delivery = match push.kind {
                redis::PushKind::SMessage => redis::Msg::from_push_info(push).map(|message| {
                    Delivery::Message(
                        message.get_channel_name().to_owned(),
                        message.get_payload::<String>().unwrap_or_default(),
                    )
                }),
                // Also the confirmation of our own SUNSUBSCRIBE, for a
                // channel no one watches any more: the listener skips it.
                redis::PushKind::SUnsubscribe => push
                    .data
                    .first()
                    .and_then(|channel| redis::from_redis_value_ref::<String>(channel).ok())
                    .map(Delivery::Dropped),
                // A node's connection broke: the client connects again and
                // subscribes its channels again, but messages meanwhile
                // are lost.
                redis::PushKind::Disconnection => Some(Delivery::Lost),
                _ => None,
            };
            if let Some(delivery) = delivery {
                if sender.send(delivery).is_err() {
                    break;
                }
            }
        }
    });
    let subscriber = RedisShardedSubscriber {
        connection,
        address,
        command_timeout: options.command_timeout,
    };
    Ok((Arc::new(subscriber), receiver))
}

#[async_trait]
impl SubscriberClient for RedisShardedSubscriber {
    fn address(&self) -> &str {
        &self.address
    }

    async fn subscribe(&self, channel: &str) -> Result<(), LockError> {
        self.bounded(self.connection.clone().ssubscribe(channel))
            .await
    }

    async fn unsubscribe(&self, channel: &str) -> Result<(), LockError> {
        self.bounded(self.connection.clone().sunsubscribe(channel))
            .await
    }
}
