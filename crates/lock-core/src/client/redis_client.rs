//! [`NodeClient`] over the `redis` crate's reconnecting `ConnectionManager`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use futures::StreamExt;
use tokio::sync::Mutex;

use super::{server_error, ConnectOptions, MessageReceiver, NodeClient, Reply, SubscriberClient};
use crate::config::NodeUrl;
use crate::error::LockError;

/// A node reached through the `redis` crate.
#[derive(Clone)]
pub struct RedisNode {
    manager: ConnectionManager,
    address: String,
    command_timeout: Duration,
}

impl std::fmt::Debug for RedisNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisNode")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl RedisNode {
    /// Wraps a connection manager the caller built, for applications that
    /// already hold one. `address` is used in errors and logs.
    pub fn from_manager(
        manager: ConnectionManager,
        address: impl Into<String>,
        command_timeout: Duration,
    ) -> Self {
        RedisNode {
            manager,
            address: address.into(),
            command_timeout,
        }
    }
}

pub(super) async fn connect(
    url: &NodeUrl,
    options: ConnectOptions,
) -> Result<Arc<dyn NodeClient>, LockError> {
    let address = url.address();
    let client = redis::Client::open(url.expose()).map_err(|err| LockError::InvalidConfig {
        field: "nodes".into(),
        reason: err.to_string(),
    })?;
    // A short retry budget: the caller's connect timeout bounds the whole
    // attempt, and a dead node must be reported, not retried for minutes.
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(options.connect_timeout))
        .set_response_timeout(Some(options.command_timeout))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(500));
    let manager = ConnectionManager::new_with_config(client, config)
        .await
        .map_err(|err| map_error(&address, options.command_timeout, err))?;
    Ok(Arc::new(RedisNode::from_manager(
        manager,
        address,
        options.command_timeout,
    )))
}

#[async_trait]
impl NodeClient for RedisNode {
    fn address(&self) -> &str {
        &self.address
    }

    async fn command(&self, name: &'static str, args: &[&[u8]]) -> Result<Reply, LockError> {
        let mut command = redis::cmd(name);
        for arg in args.iter().copied() {
            command.arg(arg);
        }
        let mut connection = self.manager.clone();
        let value: redis::Value = command
            .query_async(&mut connection)
            .await
            .map_err(|err| map_error(&self.address, self.command_timeout, err))?;
        convert(&self.address, value)
    }
}

fn convert(address: &str, value: redis::Value) -> Result<Reply, LockError> {
    use redis::Value;
    Ok(match value {
        Value::Nil => Reply::Nil,
        Value::Int(value) => Reply::Int(value),
        Value::BulkString(bytes) => Reply::Data(bytes),
        Value::SimpleString(text) => Reply::Status(text),
        Value::Okay => Reply::Status("OK".to_owned()),
        Value::Boolean(flag) => Reply::Int(i64::from(flag)),
        Value::Array(items) | Value::Set(items) => Reply::Array(
            items
                .into_iter()
                .map(|item| convert(address, item))
                .collect::<Result<_, _>>()?,
        ),
        Value::Map(pairs) => {
            let mut items = Vec::with_capacity(pairs.len() * 2);
            for (key, value) in pairs {
                items.push(convert(address, key)?);
                items.push(convert(address, value)?);
            }
            Reply::Array(items)
        }
        Value::VerbatimString { text, .. } => Reply::Data(text.into_bytes()),
        Value::ServerError(error) => {
            let message = match error.details() {
                Some(details) => format!("{} {details}", error.code()),
                None => error.code().to_owned(),
            };
            return Err(server_error(address, message));
        }
        other => {
            return Err(LockError::UnexpectedReply {
                node: address.to_owned(),
                script: "command",
                reply: format!("{other:?}"),
            })
        }
    })
}

fn map_error(address: &str, command_timeout: Duration, err: redis::RedisError) -> LockError {
    let node = address.to_owned();
    if err.kind() == redis::ErrorKind::AuthenticationFailed {
        return LockError::Authentication {
            node,
            message: err.to_string(),
        };
    }
    if err.is_timeout() {
        return LockError::Timeout {
            node,
            after: command_timeout,
        };
    }
    if let Some(code) = err.code() {
        let message = match err.detail() {
            Some(detail) => format!("{code} {detail}"),
            None => code.to_owned(),
        };
        return server_error(address, message);
    }
    LockError::Connection {
        node,
        source: Box::new(err),
    }
}

/// A subscriber connection through the `redis` crate.
pub struct RedisSubscriber {
    sink: Mutex<redis::aio::PubSubSink>,
    address: String,
    command_timeout: Duration,
}

impl std::fmt::Debug for RedisSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSubscriber")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

pub(super) async fn connect_subscriber(
    url: &NodeUrl,
    options: ConnectOptions,
) -> Result<(Arc<dyn SubscriberClient>, MessageReceiver), LockError> {
    let address = url.address();
    let client = redis::Client::open(url.expose()).map_err(|err| LockError::InvalidConfig {
        field: "nodes".into(),
        reason: err.to_string(),
    })?;
    let pubsub = client
        .get_async_pubsub()
        .await
        .map_err(|err| map_error(&address, options.command_timeout, err))?;
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
                        if sender.send(message.get_channel_name().to_owned()).is_err() {
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

#[async_trait]
impl SubscriberClient for RedisSubscriber {
    fn address(&self) -> &str {
        &self.address
    }

    async fn subscribe(&self, channel: &str) -> Result<(), LockError> {
        let mut sink = self.sink.lock().await;
        tokio::time::timeout(self.command_timeout, sink.subscribe(channel))
            .await
            .map_err(|_| LockError::Timeout {
                node: self.address.clone(),
                after: self.command_timeout,
            })?
            .map_err(|err| map_error(&self.address, self.command_timeout, err))
    }

    async fn unsubscribe(&self, channel: &str) -> Result<(), LockError> {
        let mut sink = self.sink.lock().await;
        tokio::time::timeout(self.command_timeout, sink.unsubscribe(channel))
            .await
            .map_err(|_| LockError::Timeout {
                node: self.address.clone(),
                after: self.command_timeout,
            })?
            .map_err(|err| map_error(&self.address, self.command_timeout, err))
    }
}
