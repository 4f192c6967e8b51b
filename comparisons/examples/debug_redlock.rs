use std::sync::Arc;
use std::time::Duration;
use lock_core::{ClientKind, ConnectOptions, LockConfig, LockManager, NodeUrl};
use lock_redlock::{RedlockBackend, RedlockOptions};
use lock_testkit::RedisServer;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let servers: Vec<RedisServer> = (0..5).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<NodeUrl> = servers.iter().map(RedisServer::url).collect();
    let backend = RedlockBackend::connect(ClientKind::Fred, &urls, ConnectOptions::default(), RedlockOptions::default()).await.unwrap();
    let locks = LockManager::new(Arc::new(backend), LockConfig::with_nodes(urls.iter().map(|u| u.expose().to_owned()))).unwrap();
    let servers = Arc::new(servers);
    let mut tasks = vec![];
    for t in 0..16 {
        let locks = locks.clone();
        let servers = servers.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..3000 {
                let name = format!("ours:t{t}");
                match locks.try_acquire(&name).await {
                    Ok(Some(g)) => { g.release().await.unwrap(); }
                    other => {
                        let states: Vec<_> = servers.iter().map(|s| s.admin(&["PTTL", &format!("lock:{{{name}}}")]).unwrap()).collect();
                        println!("task {t} iter {i}: {:?} states {:?}", other.map(|g| g.is_some()), states);
                        return;
                    }
                }
            }
        }));
    }
    for t in tasks { t.await.unwrap(); }
    println!("done");
}
