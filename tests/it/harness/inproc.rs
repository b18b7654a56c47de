//! The daemon run in-process, for tests that need to control its job handler
//! and observe it: a `Gate` handler reports each job it starts and finishes
//! only when the test lets it.

use std::net::SocketAddr;
use std::sync::Arc;

use teammem::config::Config;
use teammem::daemon::{self, Options};
use teammem::queue::{Completion, Job, Queue, SystemClock};
use teammem::worker::{JobFailure, JobFuture, JobHandler};
use tokio::sync::{Semaphore, mpsc, oneshot};

/// A handler that announces every job it starts and waits for a permit to finish it.
pub struct Gate {
    started: mpsc::UnboundedSender<i64>,
    permits: Arc<Semaphore>,
}

impl JobHandler for Gate {
    fn run<'a>(&'a self, job: &'a Job) -> JobFuture<'a> {
        Box::pin(async move {
            let _ = self.started.send(job.id);
            let permit = self.permits.acquire().await.map_err(|_| JobFailure {
                reason: "gate closed".into(),
                retryable: false,
                receipt: None,
            })?;
            permit.forget();
            Ok(Completion::Succeeded {
                receipt: serde_json::json!({"status": "updated", "job": job.id}),
            })
        })
    }
}

pub struct Running {
    pub addr: SocketAddr,
    pub started: mpsc::UnboundedReceiver<i64>,
    pub permits: Arc<Semaphore>,
    pub queue: Queue,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), daemon::DaemonError>>,
}

impl Running {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Triggers shutdown and waits for the daemon to return.
    pub async fn shutdown(mut self) -> Result<(), daemon::DaemonError> {
        let _ = self.stop.take().expect("once").send(());
        self.task.await.expect("daemon task")
    }
}

/// Starts the daemon for `config` with a `Gate` handler.
pub async fn start(config: Config) -> Running {
    let (started_tx, started) = mpsc::unbounded_channel();
    let permits = Arc::new(Semaphore::new(0));
    let gate = Arc::new(Gate {
        started: started_tx,
        permits: permits.clone(),
    });
    launch(config, gate, started, permits).await
}

/// Starts the daemon for `config` with the test's own job handler (`started`
/// and `permits` of the result are then unused).
pub async fn start_with(config: Config, handler: Arc<dyn JobHandler>) -> Running {
    let (_, started) = mpsc::unbounded_channel();
    launch(config, handler, started, Arc::new(Semaphore::new(0))).await
}

async fn launch(
    config: Config,
    handler: Arc<dyn JobHandler>,
    started: mpsc::UnboundedReceiver<i64>,
    permits: Arc<Semaphore>,
) -> Running {
    let config = Arc::new(config);
    let (addr_tx, addr_rx) = oneshot::channel();
    let (stop, stop_rx) = oneshot::channel::<()>();
    let options = Options {
        handler: daemon::Handler::Given(handler),
        clock: Arc::new(SystemClock),
        on_listening: Some(Box::new(move |addr| {
            let _ = addr_tx.send(addr);
        })),
    };
    let task = tokio::spawn(daemon::run_with(config.clone(), options, async move {
        let _ = stop_rx.await;
    }));
    let addr = addr_rx.await.expect("daemon listening");
    let pool = teammem::db::open_configured(&config).await.expect("db");
    let queue = Queue::from_config(&config, pool);
    Running {
        addr,
        started,
        permits,
        queue,
        stop: Some(stop),
        task,
    }
}
