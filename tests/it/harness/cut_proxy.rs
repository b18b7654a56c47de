//! A TCP proxy on loopback in front of a real server, for outages: while
//! `cut`, every open connection through it is dropped and new ones are
//! closed as soon as they are accepted, which a client sees the way it sees
//! a database restart (connections reset, then refused); `restore` lets
//! connections through again. The server behind it keeps everything it
//! committed, as a restarted server would.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

pub struct CutProxy {
    pub port: u16,
    cut: Arc<AtomicBool>,
    /// Cancelled to drop every connection open at a cut; replaced after.
    generation: Arc<std::sync::Mutex<CancellationToken>>,
}

impl CutProxy {
    /// A proxy on a free loopback port forwarding to `127.0.0.1:target`.
    pub async fn start(target: u16) -> CutProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let generation = Arc::new(std::sync::Mutex::new(CancellationToken::new()));
        {
            let (cut, generation) = (cut.clone(), generation.clone());
            tokio::spawn(async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        return;
                    };
                    if cut.load(Ordering::SeqCst) {
                        drop(client);
                        continue;
                    }
                    let dropped = generation.lock().unwrap().clone();
                    tokio::spawn(async move {
                        let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
                            return;
                        };
                        let (mut client, mut server) = (client, server);
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            () = dropped.cancelled() => {}
                        }
                    });
                }
            });
        }
        CutProxy {
            port,
            cut,
            generation,
        }
    }

    /// Drops every connection through the proxy and refuses new ones.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        let mut generation = self.generation.lock().unwrap();
        generation.cancel();
        *generation = CancellationToken::new();
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}
